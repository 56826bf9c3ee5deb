/*
 * procev_abi.h - process events from BPF (procev.bpf.c -> agent/targets/procev.c).
 *
 * Where the netlink proc connector is out of reach (it needs CAP_NET_ADMIN
 * in the host's network namespace, which a DaemonSet usually lacks), the
 * agent still learns of new processes, execs, renames and exits as they
 * happen from these four tracepoints. Records wake user space only when it
 * asks for it: the agent sets `wake_armed` (procev.bpf.c) before each drain,
 * and the first record after that wakes a poll on the ring and disarms it.
 * The agent then drains at most once a second, so a node that forks
 * thousands of times a second wakes it once a second, and one where nothing
 * starts does not wake it at all.
 */
#ifndef PUSHPROF_BPF_PROCEV_ABI_H
#define PUSHPROF_BPF_PROCEV_ABI_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

enum procev_type {
	PROCEV_FORK = 1, /* a new process (not a thread) */
	PROCEV_EXEC = 2,
	PROCEV_COMM = 3, /* a process's main thread renamed itself */
	PROCEV_EXIT = 4, /* a process's last thread exited (it may wait to be reaped) */
};

struct procev_rec {
	__u32 type;
	__u32 tgid;
};

#endif
