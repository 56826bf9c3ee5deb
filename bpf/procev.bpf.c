// SPDX-License-Identifier: GPL-2.0
/*
 * procev.bpf.c - fork / exec / rename / exit events for the target scanner, when
 * the netlink proc connector is not available (see procev_abi.h).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "procev_abi.h"

char LICENSE[] SEC("license") = "GPL";

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} events SEC(".maps");

/* records that did not fit: user space rescans /proc when this moves */
__u64 lost;
/* set by user space before it drains (procev_abi.h): the next record wakes
 * it, the ones after do not until it drains again */
__u64 wake_armed;

static __always_inline void emit(__u32 type, __u32 tgid)
{
	struct procev_rec r = { .type = type, .tgid = tgid };
	__u64 flags = BPF_RB_NO_WAKEUP;

	/* one wake-up per drain: a busy node forks thousands of times a
	 * second. Two CPUs may both see it armed: two wake-ups, harmless. */
	if (wake_armed && __sync_lock_test_and_set(&wake_armed, 0))
		flags = BPF_RB_FORCE_WAKEUP;
	if (bpf_ringbuf_output(&events, &r, sizeof(r), flags))
		__sync_fetch_and_add(&lost, 1);
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(procev_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 pid = BPF_CORE_READ(child, pid), tgid = BPF_CORE_READ(child, tgid);

	if (pid == tgid)
		emit(PROCEV_FORK, tgid);
	return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(procev_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	emit(PROCEV_EXEC, BPF_CORE_READ(p, tgid));
	return 0;
}

SEC("tp_btf/task_rename")
int BPF_PROG(procev_rename, struct task_struct *task, const char *comm)
{
	__u32 pid = BPF_CORE_READ(task, pid), tgid = BPF_CORE_READ(task, tgid);

	if (pid == tgid)
		emit(PROCEV_COMM, tgid);
	return 0;
}

/*
 * The whole process is gone when its last thread exits: do_exit() counts
 * the group's live threads down (signal->live) before this tracepoint, in
 * every kernel that has it. One record per process, not one per thread
 * (a thread pool's churn would fill the ring).
 */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(procev_exit, struct task_struct *p)
{
	if (BPF_CORE_READ(p, signal, live.counter) == 0)
		emit(PROCEV_EXIT, BPF_CORE_READ(p, tgid));
	return 0;
}
