// SPDX-License-Identifier: GPL-2.0
/*
 * cpu.bpf.c - on-CPU sampler: runs on every cpu-clock perf event and counts
 * (tgid, tid, cgroup, user stack, kernel stack, thread name). See cpu.h for
 * the double-buffering and collision design.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "cpu.h"

#define EEXIST 17
#define PF_KTHREAD 0x00200000

const volatile __u32 max_depth = CPU_MAX_DEPTH;
const volatile bool kernel_stacks = true;
const volatile bool filter_tgids = false;

/* Index of the map set BPF writes into; flipped by user space. */
__u32 active = 0;

struct counts_map {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, CPU_DEFAULT_ENTRIES);
	__type(key, struct cpu_sample_key);
	__type(value, __u64);
};

struct stacks_map {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, CPU_DEFAULT_ENTRIES);
	__type(key, __u64);
	__type(value, struct cpu_stack);
};

struct counts_map counts0 SEC(".maps");
struct counts_map counts1 SEC(".maps");
struct stacks_map stacks0 SEC(".maps");
struct stacks_map stacks1 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 2);
	__type(key, __u32);
	__array(values, struct counts_map);
} counts_sets SEC(".maps") = {
	.values = { &counts0, &counts1 },
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 2);
	__type(key, __u32);
	__array(values, struct stacks_map);
} stacks_sets SEC(".maps") = {
	.values = { &stacks0, &stacks1 },
};

/* tgids to sample when filter_tgids is set. The value is the process's
 * frameless-code range (cpu.h; nwords 0: none), so that a filtered sampler
 * finds it with the lookup it does anyway. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, struct cpu_fl_proc);
} allowed_tgids SEC(".maps");

/* Frameless Go code (see cpu.h): tgid -> text range when the whole host is
 * sampled (else in allowed_tgids), and the bitmap pool. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, CPU_FL_MAX_PROCS);
	__type(key, __u32);
	__type(value, struct cpu_fl_proc);
} fl_procs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, CPU_FL_POOL_WORDS);
	__type(key, __u32);
	__type(value, __u64);
} fl_bits SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, CPU_STAT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

struct scratch {
	struct cpu_sample_key key;
	struct cpu_stack user;
	struct cpu_stack kern;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct scratch);
} scratch_map SEC(".maps");

static __always_inline void count(__u32 which)
{
	__u64 *v = bpf_map_lookup_elem(&stats, &which);
	if (v)
		*v += 1;	/* per-CPU slot: no atomics needed */
}

static __always_inline __u64 mix64(__u64 h)
{
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ULL;
	h ^= h >> 33;
	return h;
}

static __always_inline __u64 stack_hash(const struct cpu_stack *st)
{
	__u64 h = 0x9e3779b97f4a7c15ULL ^ st->len;
	for (__u32 i = 0; i < CPU_MAX_DEPTH; i++) {
		if (i >= st->len)
			break;
		h = (h ^ st->ips[i]) * 0x100000001b3ULL;
		h = (h << 31) | (h >> 33);
	}
	return mix64(h);
}

static __always_inline bool stack_equal(const struct cpu_stack *a, const struct cpu_stack *b)
{
	if (a->len != b->len)
		return false;
	for (__u32 i = 0; i < CPU_MAX_DEPTH; i++) {
		if (i >= a->len)
			break;
		if (a->ips[i] != b->ips[i])
			return false;
	}
	return true;
}

/* Fill st with the kernel stack; returns a reserved id when there is
 * nothing to store, 0xffff... when st holds frames to store. */
static __always_inline __u64 grab_kernel_stack(void *ctx, struct cpu_stack *st)
{
	__u32 size = max_depth * sizeof(__u64);
	if (size > sizeof(st->ips))
		size = sizeof(st->ips);
	long n = bpf_get_stack(ctx, st->ips, size, 0);
	if (n < 0) {
		st->len = 0;
		count(CPU_STAT_STACK_ERR);
		return CPU_STACK_ERR;
	}
	st->len = (__u32)n / sizeof(__u64);
	if (st->len == 0)
		return CPU_STACK_NONE;
	if (st->len >= max_depth)
		count(CPU_STAT_TRUNCATED);
	return ~0ULL;
}

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, CPU_CFA_POOL);
	__type(key, __u32);
	__type(value, __u64);
} fl_cfa SEC(".maps");

/*
 * The process's frameless-code entry when ip lies in a marked chunk of it
 * (cpu.h), else NULL; *w: the pool index of the bitmap word. One hash
 * lookup per sample when the whole host is sampled, a bitmap word only
 * for PCs inside the covered text.
 */
static __always_inline const struct cpu_fl_proc *
frameless_at(const struct cpu_fl_proc *fl, __u32 tgid, __u64 ip, __u32 *w)
{
	if (!fl)	/* whole host: not looked up yet */
		fl = bpf_map_lookup_elem(&fl_procs, &tgid);
	if (!fl || ip < fl->start || ip >= fl->end)
		return NULL;
	__u64 chunk = (ip - fl->start) >> CPU_FL_CHUNK_SHIFT;
	__u64 at = fl->ntab ? (chunk >> 6) * 2 : chunk >> 6;	/* C/C++: bitmap, window */
	if (at >= fl->nwords)
		return NULL;
	*w = fl->word + (__u32)at;
	__u64 *bits = bpf_map_lookup_elem(&fl_bits, w);
	return bits && ((*bits >> (chunk & 63)) & 1) ? fl : NULL;
}

/*
 * C/C++: the table entry (cpu.h) whose range holds ip, 0 if none. The
 * window after bitmap word w names the entries overlapping ip's 2 KiB; a
 * binary search of at most CPU_CFA_STEPS array lookups in it for the last
 * entry starting at or before ip.
 */
static __always_inline __u64 cfa_find(const struct cpu_fl_proc *fl, __u32 w, __u64 ip)
{
	__u64 off = ip - fl->start;
	__u32 wi = w + 1, lo, hi, idx;
	__u64 *win = bpf_map_lookup_elem(&fl_bits, &wi);

	if (!win)
		return 0;
	lo = *win >> 32;
	hi = lo + (__u32)*win;
	if (hi <= lo || hi > fl->ntab)
		return 0;
	for (__u32 i = 0; i < CPU_CFA_STEPS; i++) {
		if (hi - lo <= 1)
			break;
		__u32 mid = lo + (hi - lo) / 2;
		idx = fl->tab + mid;
		__u64 *e = bpf_map_lookup_elem(&fl_cfa, &idx);
		if (!e)
			return 0;
		if ((*e >> 32) <= off)
			lo = mid;
		else
			hi = mid;
	}
	idx = fl->tab + lo;
	__u64 *e = bpf_map_lookup_elem(&fl_cfa, &idx);
	if (!e)
		return 0;
	__u64 start = *e >> 32, len = (*e >> 20) & CPU_CFA_LEN_MAX;
	return off >= start && off - start < len ? *e : 0;
}

/*
 * The user stack by frame pointers, as the kernel's perf_callchain_user()
 * walks it (the leaf ip, then [bp+8] up the [bp] chain until a zero, an
 * unreadable frame or the depth limit), but read here directly: going
 * through bpf_get_stack() costs ~5 us more per sample on this class of VM
 * (the perf callchain buffers and the copy out of them are cold memory on
 * every 10 ms tick). Regs are the interrupted ones when the sample hit user
 * mode, the task's saved user regs otherwise. A leaf in frameless Go code
 * gets its caller from [sp] before the walk, a C/C++ leaf in a prologue,
 * epilogue or frameless leaf its caller and the caller's %rbp from the
 * slots its .eh_frame gives (cpu.h).
 */
static __always_inline __u64 grab_user_stack(struct bpf_perf_event_data *ctx,
					     struct task_struct *task, __u32 tgid,
					     const struct cpu_fl_proc *fl, bool in_user,
					     struct cpu_stack *st)
{
	const __u64 *r = (const __u64 *)&ctx->regs;
	__u64 ip, fp, sp;
	__u32 n;

	st->len = 0;
	if (BPF_CORE_READ(task, flags) & PF_KTHREAD)
		return CPU_STACK_NONE;
	if (in_user) {
		ip = r[16];	/* x86-64 pt_regs: ip */
		fp = r[4];	/* bp */
		sp = r[19];	/* sp */
	} else {
		struct pt_regs *ur = (struct pt_regs *)bpf_task_pt_regs(task);

		ip = BPF_CORE_READ(ur, ip);
		fp = BPF_CORE_READ(ur, bp);
		sp = BPF_CORE_READ(ur, sp);
	}
	if (!ip)
		return CPU_STACK_NONE;
	st->ips[0] = ip;
	n = 1;
	__u32 w = 0;
	const struct cpu_fl_proc *p = max_depth > 1 ? frameless_at(fl, tgid, ip, &w) : NULL;
	if (p && !p->ntab) {
		/* Go: the whole function is frameless, the caller at [sp] */
		__u64 ra;

		if (bpf_probe_read_user(&ra, sizeof(ra), (void *)sp) == 0 && ra) {
			st->ips[1] = ra;
			n = 2;
			count(CPU_STAT_FL_LEAF);
		} else {
			count(CPU_STAT_FL_FAULT);
		}
	} else if (p) {
		/* C/C++: only the table's ranges; elsewhere in the chunk
		 * %rbp is this function's frame and the plain walk is right */
		__u64 e = cfa_find(p, w, ip);
		if (e) {
			__u64 ra, cfp = fp, pair[2];
			__u32 k = (e >> 10) & CPU_CFA_SLOT_MAX, f = e & CPU_CFA_SLOT_MAX;
			long err;

			if (f && f == k) {
				/* %rbp saved right below the return address (after
				 * `push %rbp`): one read for both */
				err = bpf_probe_read_user(pair, sizeof(pair),
							  (void *)(sp + 8 * (__u64)(k - 1)));
				cfp = pair[0];
				ra = pair[1];
			} else {
				err = bpf_probe_read_user(&ra, sizeof(ra), (void *)(sp + 8 * (__u64)k));
				if (!err && f)
					err = bpf_probe_read_user(&cfp, sizeof(cfp),
								  (void *)(sp + 8 * (__u64)(f - 1)));
			}
			if (!err && ra) {
				st->ips[1] = ra;
				n = 2;
				fp = cfp;	/* the caller's frame: the walk goes on from there */
				count(CPU_STAT_CFA_LEAF);
			} else {
				count(CPU_STAT_CFA_FAULT);
			}
		}
	}
	for (__u32 i = 1; i < CPU_MAX_DEPTH; i++) {
		__u64 frame[2];	/* saved bp, return address */

		if (n >= max_depth || n >= CPU_MAX_DEPTH || !fp)
			break;
		if (bpf_probe_read_user(frame, sizeof(frame), (void *)fp))
			break;
		if (!frame[1])
			break;
		st->ips[n] = frame[1];
		n++;
		fp = frame[0];
	}
	st->len = n;
	if (n >= max_depth && fp)
		count(CPU_STAT_TRUNCATED);
	return ~0ULL;
}

static __always_inline __u64 store_stack(void *stacks, const struct cpu_stack *st)
{
	__u64 h = stack_hash(st);

	for (__u32 probe = 0; probe < CPU_MAX_PROBES; probe++) {
		__u64 k = h + probe * 0x9e3779b97f4a7c15ULL;
		if (k < CPU_STACK_RESERVED)
			k += CPU_STACK_RESERVED;
		struct cpu_stack *ex = bpf_map_lookup_elem(stacks, &k);
		if (!ex) {
			long r = bpf_map_update_elem(stacks, &k, st, BPF_NOEXIST);
			if (r == 0)
				return k;
			if (r != -EEXIST) {
				count(CPU_STAT_STACKS_FULL);
				return CPU_STACK_MAP_FULL;
			}
			/* Another CPU stored this slot just now. */
			ex = bpf_map_lookup_elem(stacks, &k);
			if (!ex)
				continue;
		}
		if (stack_equal(ex, st))
			return k;
		count(CPU_STAT_PROBE);
	}
	count(CPU_STAT_COLLISION);
	return CPU_STACK_COLLISION;
}

SEC("perf_event")
int pp_cpu_sample(struct bpf_perf_event_data *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32, pid = (__u32)id;
	__u32 zero = 0;

	count(CPU_STAT_RUNS);
	if (pid == 0) {
		count(CPU_STAT_IDLE);
		return 0;
	}
	const struct cpu_fl_proc *fl = NULL;
	if (filter_tgids) {
		fl = bpf_map_lookup_elem(&allowed_tgids, &tgid);
		if (!fl) {
			count(CPU_STAT_FILTERED);
			return 0;
		}
	}

	__u32 set = active & 1;
	void *counts = bpf_map_lookup_elem(&counts_sets, &set);
	void *stacks = bpf_map_lookup_elem(&stacks_sets, &set);
	struct scratch *s = bpf_map_lookup_elem(&scratch_map, &zero);
	if (!counts || !stacks || !s)
		return 0;

	__builtin_memset(&s->key, 0, sizeof(s->key));
	s->key.tgid = tgid;
	s->key.pid = pid;
	s->key.cgroup_id = bpf_get_current_cgroup_id();
	bpf_get_current_comm(s->key.comm, sizeof(s->key.comm));

	/* x86-64 pt_regs: cs; its low bits are the privilege level */
	bool in_user = (((const __u64 *)&ctx->regs)[17] & 3) == 3;
	struct task_struct *task = bpf_get_current_task_btf();

	__u64 u = grab_user_stack(ctx, task, tgid, fl, in_user, &s->user);
	if (u == ~0ULL)
		u = store_stack(stacks, &s->user);
	s->key.user_stack = u;

	/* a sample taken in user mode has no kernel frames: skip the unwinder */
	__u64 k = CPU_STACK_NONE;
	if (kernel_stacks && !in_user) {
		k = grab_kernel_stack(ctx, &s->kern);
		if (k == ~0ULL)
			k = store_stack(stacks, &s->kern);
	}
	s->key.kernel_stack = k;

	__u64 *c = bpf_map_lookup_elem(counts, &s->key);
	if (c) {
		__sync_fetch_and_add(c, 1);
	} else {
		__u64 one = 1;
		long r = bpf_map_update_elem(counts, &s->key, &one, BPF_NOEXIST);
		if (r == -EEXIST) {
			c = bpf_map_lookup_elem(counts, &s->key);
			if (c)
				__sync_fetch_and_add(c, 1);
			else
				r = -1;
			if (c)
				r = 0;
		}
		if (r != 0) {
			count(CPU_STAT_LOST_COUNTS_FULL);
			return 0;
		}
	}
	count(CPU_STAT_RECORDED);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
