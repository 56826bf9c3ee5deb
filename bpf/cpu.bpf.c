// SPDX-License-Identifier: GPL-2.0
/*
 * cpu.bpf.c - on-CPU sampler: runs on every cpu-clock perf event and counts
 * (tgid, tid, cgroup, user stack, kernel stack, thread name, CPU). See cpu_abi.h for
 * the double-buffering and collision design.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "cpu_abi.h"

#define EEXIST 17
#define PF_KTHREAD 0x00200000

/*
 * Architectures: meson passes __TARGET_ARCH_x86 or __TARGET_ARCH_arm64 (for
 * bpf_tracing.h and the parts below). Both keep frame records as [fp] the
 * caller's fp, [fp + 8] the return address (x86 %rbp, arm64 x29; Go's
 * arm64 frames too), so the frame-pointer walk is the same. x86-64 has
 * every rule for code whose fp is not its own frame (PP_FRAME_RULES 1);
 * arm64 has none of them, only the plain walk, because they are x86's:
 *  - the leaf rules read a leaf's return address from a stack slot (the
 *    tables say which), where x86's call put it; an arm64 leaf without a
 *    frame record, or in its prologue, still has it in the link register
 *    x30, which is not read here: such a leaf's caller is missing;
 *  - pp_go_edge decodes x86 instructions, and the tables come from x86
 *    code (agent/cpu/frameless.c, agent/cpu/ehframe.c);
 *  - the g0 switch rule reads Go's g from %r14 or %fs:-8 (x28 and
 *    tpidr_el0 on arm64).
 */
#if defined(__TARGET_ARCH_x86)
#define PP_FRAME_RULES 1
/* user mode: the privilege level in cs's low bits is 3 (a u64 load:
 * pt_regs.cs is a u16 beside __csh in newer kernels) */
#define PP_USER_MODE(r) ((PP_REG(r, cs) & 3) == 3)
#define PP_GO_G_REG r14 /* Go's g register */
#elif defined(__TARGET_ARCH_arm64)
#define PP_FRAME_RULES 0
/* user mode: pstate's mode field (M[3:0]) is EL0t */
#define PP_USER_MODE(r) ((PP_REG(r, pstate) & 0xf) == 0)
#define PP_GO_G_REG regs[28] /* Go's g register */
#else
#error "cpu.bpf.c: build for __TARGET_ARCH_x86 or __TARGET_ARCH_arm64"
#endif

/*
 * Register f (a field of bpf_user_pt_regs_t: bpf_tracing.h's __PT_IP_REG,
 * __PT_FP_REG, ...) of the interrupted context r ((const __u64 *)&ctx->regs),
 * as a u64 at a constant offset: the context's regs have the architecture's
 * user ABI layout, which does not change; the verifier admits only 8-byte
 * loads of them; and CO-RE accesses (PT_REGS_IP) cost the sampler ~10
 * instructions of register spills on x86 for nothing.
 */
#define PP_REG(r, f) ((r)[__builtin_offsetof(bpf_user_pt_regs_t, f) / 8])

const volatile __u32 max_depth = CPU_MAX_DEPTH;
const volatile bool kernel_stacks = true;
const volatile bool cpu_label = false; /* key.cpu: the `cpu` sample label */
const volatile bool filter_tgids = false;

/* Index of the map set BPF writes into; flipped by user space. */
__u32 active = 0;
/* Leaf tables' generation (cpu_abi.h, "Per-CPU cache"): user space bumps it
 * after every change to the tables; a cached answer of another generation
 * is not used. */
__u32 fl_gen = 0; /* .bss beside `active` (one line per sample); user
			 * space starts it at 1: 0 would match zeroed slots */

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

/* stacks of up to CPU_SMALL_DEPTH frames (cpu_abi.h) */
struct small_stacks_map {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, CPU_DEFAULT_ENTRIES);
	__type(key, __u64);
	__type(value, struct cpu_stack_small);
};

struct counts_map counts0 SEC(".maps");
struct counts_map counts1 SEC(".maps");
/* Stacks persist across windows (cpu_abi.h): one map of each size, never
 * flipped; user space reads the ids it has not seen and evicts. */
struct stacks_map stacks SEC(".maps");
struct small_stacks_map sstacks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 2);
	__type(key, __u32);
	__array(values, struct counts_map);
} counts_sets SEC(".maps") = {
	.values = { &counts0, &counts1 },
};

/* tgids to sample when filter_tgids is set. The value is the process's
 * leaf tables (cpu_abi.h; ntab 0: none), so that a filtered sampler finds them
 * with the lookup it does anyway. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, struct cpu_fl_proc);
} allowed_tgids SEC(".maps");

/* Leaf tables (see cpu_abi.h): tgid -> its tables when the whole host is
 * sampled (else in allowed_tgids), the pool of bitmap and window words, and
 * (below) the pool of table entries. */
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

/* A per-CPU answer of the leaf tables (cpu_abi.h, "Per-CPU cache"): in the
 * table at tab, every offset in [lo, hi) from the process's text start has
 * the entry e (0: none; CPU_CFA_EDGE_MAYBE: Go code to decode). */
struct fl_slot {
	__u32 tab;
	__u32 gen;
	__u64 lo, hi;
	__u64 e;
};

/* CPU_FL_WAYS slots of one set share a cache line (64 bytes): a lookup
 * touches one line, and two answers wanted in turn (two hot leaves whose
 * PCs pick the same set) both stay */
struct fl_cache {
	struct fl_slot slots[CPU_FL_SETS][CPU_FL_WAYS];
};

struct scratch {
	struct cpu_sample_key key;
	/* the sampled process's tables (zeroed: none); when the whole host is
	 * sampled, the fl_procs value of proc_tgid at generation proc_gen */
	__u32 proc_tgid, proc_gen;
	struct cpu_fl_proc proc;
	/* whole host: fl_procs values of the last processes sampled, by tgid
	 * (a CPU that runs the profiled process between others finds it
	 * here, not in fl_procs) */
	struct {
		__u32 tgid, gen;
		struct cpu_fl_proc p;
	} procs[CPU_PROC_SLOTS];
	struct fl_cache cache;
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
		*v += 1; /* per-CPU slot: no atomics needed */
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

/* a (a stored value of a map whose values hold `depth` frames, a
 * constant) holds the same stack as b */
static __always_inline bool stack_equal(const struct cpu_stack *a, const struct cpu_stack *b,
					__u32 depth)
{
	if (a->len != b->len)
		return false;
	for (__u32 i = 0; i < depth; i++) {
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

/* Bits set in x (no popcount instruction in BPF). */
static __always_inline __u64 popcount64(__u64 x)
{
	x = x - ((x >> 1) & 0x5555555555555555ULL);
	x = (x & 0x3333333333333333ULL) + ((x >> 2) & 0x3333333333333333ULL);
	x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0fULL;
	return (x * 0x0101010101010101ULL) >> 56;
}

/* 1 + the index of x's highest set bit (x != 0) */
static __always_inline __u64 fls64(__u64 x)
{
	x |= x >> 1;
	x |= x >> 2;
	x |= x >> 4;
	x |= x >> 8;
	x |= x >> 16;
	x |= x >> 32;
	return popcount64(x);
}

/* the index of x's lowest set bit (x != 0) */
static __always_inline __u64 ctz64(__u64 x)
{
	return popcount64((x & -x) - 1);
}

/*
 * The table entry (cpu_abi.h) whose range holds ip, 0 if none: the chunk's
 * bit first (the pre-filter: no further lookup for most PCs), then a
 * binary search of at most CPU_CFA_STEPS array lookups in the window of
 * entries overlapping ip's 2 KiB for the last one starting at or before ip.
 * [*lo, *hi) (offsets from fl->start) is a span around ip with the same
 * answer, for the per-CPU cache; left alone when the answer is 0 for
 * ip outside the process's tables.
 */
static __always_inline __u64 fl_search(const struct cpu_fl_proc *fl, __u64 ip, __u64 *lo_off,
				       __u64 *hi_off)
{
	__u64 off = ip - fl->start, chunk = off >> CPU_FL_CHUNK_SHIFT;
	__u64 at = (chunk >> 6) * 2; /* bitmap, window */
	if (at + 1 >= fl->nwords)
		return 0;
	__u32 w = fl->word + (__u32)at, wi = w + 1, lo, hi, idx;
	__u64 *bits = bpf_map_lookup_elem(&fl_bits, &w);
	if (!bits)
		return 0;
	if (!((*bits >> (chunk & 63)) & 1)) {
		/* no range in the chunk, nor in the run of unmarked chunks
		 * around it (the whole 2 KiB without a bit): one cached
		 * answer for a function body, not one per chunk */
		__u64 b = *bits, c = chunk & 63;
		__u64 below = b & ((1ULL << c) - 1), above = c < 63 ? b >> (c + 1) : 0;
		__u64 base = chunk & ~63ULL;
		*lo_off = (base + (below ? fls64(below) : 0)) << CPU_FL_CHUNK_SHIFT;
		*hi_off = (chunk + 1 + (above ? ctz64(above) : 63 - c)) << CPU_FL_CHUNK_SHIFT;
		return 0;
	}
	__u64 *win = bpf_map_lookup_elem(&fl_bits, &wi);
	if (!win)
		return 0;
	lo = *win >> 32;
	hi = lo + (__u32)*win;
	/* a chunk marked without a range: Go prologue or epilogue code */
	__u64 clo = chunk << CPU_FL_CHUNK_SHIFT, chi = clo + (1u << CPU_FL_CHUNK_SHIFT);
	if (hi <= lo) {
		*lo_off = clo;
		*hi_off = chi;
		return CPU_CFA_EDGE_MAYBE;
	}
	if (hi > fl->ntab)
		return 0;
	__u32 end = hi;
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
	__u64 ent = *e, start = ent >> 32, len = (ent >> 20) & CPU_CFA_LEN_MAX;
	if (start > off) { /* before the window's first range */
		*lo_off = off;
		*hi_off = start < chi ? start : chi;
		return CPU_CFA_EDGE_MAYBE;
	}
	if (off - start < len) {
		*lo_off = start;
		*hi_off = start + len;
		return ent;
	}
	/* between two ranges: up to the next one's start, or the 2 KiB end */
	__u64 next = ((chunk | 63) + 1) << CPU_FL_CHUNK_SHIFT;
	if (lo + 1 < end) {
		idx = fl->tab + lo + 1;
		e = bpf_map_lookup_elem(&fl_cfa, &idx);
		if (!e)
			return 0;
		if ((*e >> 32) < next)
			next = *e >> 32;
	}
	/* the gap within ip's chunk, whose bit says it may hold an edge */
	*lo_off = start + len > clo ? start + len : clo;
	*hi_off = next < chi ? next : chi;
	if (*hi_off <= off)
		*hi_off = off + 1; /* a broken table: this PC only */
	return CPU_CFA_EDGE_MAYBE;
}

/*
 * The table entry (cpu_abi.h) whose range holds ip (0 if none), through the
 * per-CPU cache: a hit touches none of the tables' maps. A global function, verified once: inlined, its branches multiplied
 * the states of the walk that follows (500k instructions processed).
 */
__noinline __u64 pp_leaf_find(const struct cpu_fl_proc *fl, __u64 ip, struct fl_cache *cache,
			      __u32 gen)
{
	if (!fl || !cache || !fl->ntab || ip < fl->start || ip >= fl->end)
		return 0;
	__u64 off = ip - fl->start, blk = off >> CPU_FL_SET_SHIFT;
	struct fl_slot *c = cache->slots[(blk ^ (blk >> 7) ^ fl->tab) & (CPU_FL_SETS - 1)];

	if (c[0].gen == gen && c[0].tab == fl->tab && off >= c[0].lo && off < c[0].hi)
		return c[0].e;
	if (c[1].gen == gen && c[1].tab == fl->tab && off >= c[1].lo && off < c[1].hi) {
		struct fl_slot t = c[1]; /* most recent first */

		c[1] = c[0];
		c[0] = t;
		return t.e;
	}
	count(CPU_STAT_FL_SEARCH);
	__u64 lo = 0, hi = 0, e = fl_search(fl, ip, &lo, &hi);
	if (hi > lo) {
		c[1] = c[0];
		c[0].tab = fl->tab;
		c[0].gen = gen;
		c[0].lo = lo;
		c[0].hi = hi;
		c[0].e = e;
	}
	return e;
}

#if PP_FRAME_RULES
/*
 * A Go leaf sampled in a compiled function's prologue or epilogue (cpu_abi.h,
 * "Go prologues and epilogues"), decoded from the instruction at ip (the
 * interrupted one: ip is an instruction boundary) and the one before: a
 * table entry (ra slot k, fp 0: %rbp is still the caller's), 0 elsewhere.
 */
__noinline __u64 pp_go_edge(__u64 ip)
{
	__u8 c[20]; /* c[4] is the byte at ip */
	__u32 k = 0;
	__s32 d;

	if (ip < 4 || bpf_probe_read_user(c, sizeof(c), (void *)(ip - 4)))
		return 0;
	const __u8 *p = c + 4;
	if (p[0] == 0xc3) /* ret */
		k = 0;
	else if (p[0] == 0x55) /* push %rbp (Go 1.21+) */
		k = 0;
	else if (p[0] == 0x48 && p[1] == 0x89 && p[2] == 0xe5 && c[3] == 0x55)
		k = 1; /* mov %rsp,%rbp after the push */
	else if ((p[0] == 0x49 || p[0] == 0x4d) && p[1] == 0x3b && p[2] == 0x66 && p[3] == 0x10)
		k = 0; /* cmp 16(%r14),%rsp|%r12: stack check */
	else if ((p[0] == 0x76 || (p[0] == 0x0f && p[1] == 0x86)) &&
		 (c[0] == 0x49 || c[0] == 0x4d) && c[1] == 0x3b && c[2] == 0x66 && c[3] == 0x10)
		k = 0; /* its jbe to morestack */
	else if (p[0] == 0x4c && p[1] == 0x8d && p[2] == 0x64 && p[3] == 0x24 && p[5] == 0x4d &&
		 p[6] == 0x3b && p[7] == 0x66 && p[8] == 0x10)
		k = 0; /* lea -n(%rsp),%r12 before it */
	else if (p[0] == 0x48 && (p[1] == 0x83 || p[1] == 0x81) && p[2] == 0xec) {
		/* sub $n,%rsp, Go up to 1.20 (%rbp stored next; from 1.21 the
		 * sub comes after `mov %rsp,%rbp` and the walk is right) */
		const __u8 *q = p + (p[1] == 0x83 ? 4 : 7);
		if (!(q[0] == 0x48 && q[1] == 0x89 && (q[2] == 0x6c || q[2] == 0xac) &&
		      q[3] == 0x24))
			return 0;
		k = 0;
	} else if (p[0] == 0x48 && (p[1] == 0x89 || p[1] == 0x8d) && p[3] == 0x24 &&
		   (p[2] == 0x6c || p[2] == 0xac)) {
		/* mov %rbp,n(%rsp) or lea n(%rsp),%rbp (up to Go 1.20): the
		 * return address is right above the save slot */
		d = p[2] == 0x6c ? (__s32)(__s8)p[4]
				 : (__s32)(p[4] | p[5] << 8 | p[6] << 16 | (__u32)p[7] << 24);
		if (d < 0 || d % 8)
			return 0;
		k = (__u32)d / 8 + 1;
	} else if (p[0] == 0x48 && (p[1] == 0x83 || p[1] == 0x81) && p[2] == 0xc4) {
		/* add $n,%rsp right before ret (up to Go 1.20: %rbp already
		 * restored; from 1.21 a pop %rbp follows and the walk is right) */
		if (p[1] == 0x83) {
			d = (__s32)(__s8)p[3];
			if (p[4] != 0xc3)
				return 0;
		} else {
			d = (__s32)(p[3] | p[4] << 8 | p[5] << 16 | (__u32)p[6] << 24);
			if (p[7] != 0xc3)
				return 0;
		}
		if (d <= 0 || d % 8)
			return 0;
		k = (__u32)d / 8;
	} else {
		return 0;
	}
	if (k > CPU_CFA_SLOT_MAX)
		return 0;
	count(CPU_STAT_GO_EDGE);
	return CPU_CFA_ENTRY(0, 1, k, 0);
}

/*
 * The return address into the caller of runtime.systemstack/asmcgocall,
 * for a thread on g0 that switched there (cpu_abi.h, "Frameless Go code
 * mid-stack"): [curg.sched.sp], each step checked. g is a candidate for
 * g0, a the address of the frame that returns to the switch site (on the
 * stack the switch went to). 0 when it does not check out.
 *
 * That g is g0 is not read from m.g0 (one probe read less, of a line of
 * m, per switch-site frame: ~40 % of gcstack.go's samples): g's first words (stack.lo,
 * stack.hi, ..., m) come in the read that fetches g.m anyway, and a
 * inside [stack.lo, stack.hi) says the frame that returns to the switch
 * site is on g's stack. Only g0's stack is where systemstack and
 * asmcgocall call their function: g is that g0, or g0 is the stack its
 * bounds were taken for, which is what the m.g0 read checked. What it
 * also caught, a g that is not g0 at all, fails either this check or
 * the ones on curg: a goroutine running on its own stack is m.curg
 * (curg == g), gsignal's stack does not hold g0's frames, and a stray
 * %r14 (ABI0 assembly, C) must bracket the frame and name an m whose
 * curg points back at it.
 */
static __always_inline __u64 g0_caller(__u64 g, __u64 a)
{
	__u64 gw[GO_G_M / 8 + 1], curg = 0, cg[8], ret = 0;

	/* stack.lo, stack.hi, ..., m: one read */
	if (!g || bpf_probe_read_user(gw, sizeof(gw), (void *)g))
		return 0;
	__u64 m = gw[GO_G_M / 8];
	if (!m || a < gw[GO_G_STACK_LO / 8] || a + 16 > gw[GO_G_STACK_HI / 8])
		return 0; /* the frame is not on g's stack: g is not this g0 */
	if (bpf_probe_read_user(&curg, sizeof(curg), (void *)(m + GO_M_CURG)) || !curg || curg == g)
		return 0;
	/* stack.lo, stack.hi, ..., m, sched.sp: one read */
	if (bpf_probe_read_user(cg, sizeof(cg), (void *)curg))
		return 0;
	__u64 lo = cg[GO_G_STACK_LO / 8], hi = cg[GO_G_STACK_HI / 8];
	__u64 sp = cg[GO_G_SCHED_SP / 8];
	if (cg[GO_G_M / 8] != m || sp < lo || sp + 8 > hi)
		return 0;
	if (bpf_probe_read_user(&ret, sizeof(ret), (void *)sp))
		return 0;
	return ret;
}

/*
 * The frame to insert after return address ra, read from the frame at
 * address a ([a] saved bp, [a+8] ra), 0 for none (fl: the process's tables,
 * zeroed when it has none):
 *  - ra is a g0 switch site (runtime.systemstack, asmcgocall): the caller
 *    of the switching function, from curg, with g0 from %r14 (Go's g
 *    register) or else from Go's TLS slot (%fs:-8);
 *  - ra lies in frameless Go code (cpu_abi.h, "Mid-stack"): that function kept
 *    its caller's return address at its own %rsp, which is where the
 *    callee's frame ends: [a+16].
 * A global function: verified once, not at every frame of the walk (a
 * branch in the loop would multiply the verifier's states per frame).
 */
__noinline __u64 pp_frame_fix(const struct cpu_fl_proc *fl, __u64 ra, __u64 a, __u64 r14,
			      struct fl_cache *cache)
{
	__u64 c = 0;

	if (!fl || !fl->go || !ra || !a)
		return 0;
	if (ra == fl->switch_ret[0] || ra == fl->switch_ret[1]) {
		c = g0_caller(r14, a);
		if (!c) {
			struct task_struct *task = bpf_get_current_task_btf();
			__u64 fs = BPF_CORE_READ(task, thread.fsbase), g = 0;

			if (fs && !bpf_probe_read_user(&g, sizeof(g), (void *)(fs + GO_TLS_G)))
				c = g0_caller(g, a);
		}
		count(c ? CPU_STAT_G0_SWITCH : CPU_STAT_G0_FAIL);
		return c;
	}
	__u64 e = pp_leaf_find(fl, ra, cache, fl_gen);
	if (!e || ((e >> 10) & CPU_CFA_SLOT_MAX) || (e & CPU_CFA_SLOT_MAX))
		return 0; /* not frameless: the frame chain is right */
	if (bpf_probe_read_user(&c, sizeof(c), (void *)(a + 16)) || !c) {
		count(CPU_STAT_FL_FAULT);
		return 0;
	}
	count(CPU_STAT_FL_MID);
	return c;
}

#else
/* arm64: none of those rules (see "Architectures" above) */
static __always_inline __u64 pp_go_edge(__u64 ip)
{
	return 0;
}

static __always_inline __u64 pp_frame_fix(const struct cpu_fl_proc *fl, __u64 ra, __u64 a, __u64 g,
					  struct fl_cache *cache)
{
	return 0;
}
#endif /* PP_FRAME_RULES */

/*
 * The user stack by frame pointers, as the kernel's perf_callchain_user()
 * walks it (the leaf ip, then [bp+8] up the [bp] chain until a zero, an
 * unreadable frame or the depth limit), but read here directly: going
 * through bpf_get_stack() costs ~5 us more per sample on this class of VM
 * (the perf callchain buffers and the copy out of them are cold memory on
 * every 10 ms tick). Regs are the interrupted ones when the sample hit user
 * mode, the task's saved user regs otherwise. A leaf whose %rbp is not its
 * own frame (frameless Go code, Go assembly that uses %rbp as data, C/C++
 * prologues, epilogues and frameless leaves) gets its caller and the
 * caller's %rbp from the stack slots its table gives; a Go frame returning
 * into runtime.systemstack on g0 or into frameless code gets the caller
 * that the plain walk skips inserted (cpu_abi.h).
 */
static __always_inline __u64 grab_user_stack(struct bpf_perf_event_data *ctx,
					     struct task_struct *task, __u32 tgid,
					     const struct cpu_fl_proc *fl, bool in_user,
					     struct scratch *sc)
{
	struct cpu_stack *st = &sc->user;
	__u32 gen = fl_gen;
	const __u64 *r = (const __u64 *)&ctx->regs;
	/* the process's tables, zeroed for none: in the scratch value, whose
	 * contents the verifier does not track, so that every path reaches
	 * the walk below in one state (a stack copy, zeroed on some paths and
	 * read from a map on others, made it verify the walk five times) */
	const struct cpu_fl_proc *flc = &sc->proc;
	__u64 ip, fp, sp, g; /* g: Go's g register */
	__u32 n;

	st->len = 0;
	if (task->flags & PF_KTHREAD) /* a trusted pointer: a load, no helper call */
		return CPU_STACK_NONE;
	if (in_user) {
		ip = PP_REG(r, __PT_IP_REG);
		fp = PP_REG(r, __PT_FP_REG);
		sp = PP_REG(r, __PT_SP_REG);
		g = PP_REG(r, PP_GO_G_REG);
	} else {
		struct pt_regs *ur = (struct pt_regs *)bpf_task_pt_regs(task);

		ip = PT_REGS_IP_CORE(ur);
		fp = PT_REGS_FP_CORE(ur);
		sp = PT_REGS_SP_CORE(ur);
		g = BPF_CORE_READ(__PT_REGS_CAST(ur), PP_GO_G_REG);
	}
	if (fl) { /* filtering: from the allowed_tgids entry */
		sc->proc = *fl;
		sc->proc_gen = 0;
	} else if (!filter_tgids && (sc->proc_gen != gen || sc->proc_tgid != tgid)) {
		/* whole host: fl_procs, unless the last sample's process (or
		 * the one before) it is */
		__u32 slot = tgid & (CPU_PROC_SLOTS - 1);

		if (sc->procs[slot].gen == gen && sc->procs[slot].tgid == tgid) {
			sc->proc = sc->procs[slot].p;
		} else {
			fl = bpf_map_lookup_elem(&fl_procs, &tgid);
			if (fl)
				sc->proc = *fl;
			else
				__builtin_memset(&sc->proc, 0, sizeof(sc->proc));
			sc->procs[slot].p = sc->proc;
			sc->procs[slot].tgid = tgid;
			sc->procs[slot].gen = gen;
		}
		sc->proc_tgid = tgid;
		sc->proc_gen = gen;
	} else if (filter_tgids) {
		__builtin_memset(&sc->proc, 0, sizeof(sc->proc));
	}
	if (!ip)
		return CPU_STACK_NONE;
	st->ips[0] = ip;
	n = 1;
	__u64 inject = 0; /* a frame to insert before the next one read */
	/* the leaf in a table range: its caller and the caller's %rbp from
	 * the stack slots the table gives (cpu_abi.h); elsewhere %rbp is the
	 * leaf's own frame and the plain walk is right */
	__u64 e = PP_FRAME_RULES && max_depth > 1 ? pp_leaf_find(flc, ip, &sc->cache, gen) : 0;
	/* no range, but a chunk with a Go prologue or epilogue: decode it */
	if (e == CPU_CFA_EDGE_MAYBE)
		e = flc->go ? pp_go_edge(ip) : 0;
	if (e) {
		__u64 ra, cfp = fp, pair[2];
		__u32 k = (e >> 10) & CPU_CFA_SLOT_MAX, f = e & CPU_CFA_SLOT_MAX;
		long err;

		if (f && f == k) {
			/* %rbp saved right below the return address (after
			 * `push %rbp`, Go's frames): one read for both */
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
			fp = cfp; /* the caller's frame: the walk goes on from there */
			count(CPU_STAT_FL_LEAF);
			/* the caller may be frameless too (a write-barrier stub):
			 * the leaf's frame ends at [sp + 8k + 8] */
			if (ra >= flc->mid_lo && ra < flc->mid_hi)
				inject =
					pp_frame_fix(flc, ra, sp + 8 * (__u64)k - 8, g, &sc->cache);
		} else {
			count(CPU_STAT_FL_FAULT);
		}
	}
	/*
	 * One frame per iteration, n advancing with i: a frame inserted after
	 * a g0 switch site takes an iteration of its own (inject), so that the
	 * verifier sees one shape of state, not one per place of insertion.
	 */
	for (__u32 i = 1; i < CPU_MAX_DEPTH; i++) {
		__u64 frame[2]; /* saved bp, return address */

		if (n >= max_depth || n >= CPU_MAX_DEPTH)
			break;
		__u64 a = fp; /* where the frame is read; 0: an inserted one */

		if (inject) {
			frame[0] = fp; /* the walk goes on from the same frame */
			frame[1] = inject;
			inject = 0;
			a = 0;
		} else {
			if (!fp || bpf_probe_read_user(frame, sizeof(frame), (void *)fp))
				break;
			if (!frame[1])
				break;
		}
		st->ips[n] = frame[1];
		n++;
		fp = frame[0];
		/* only return addresses in that span can need a fix (cpu_abi.h) */
		if (frame[1] >= flc->mid_lo && frame[1] < flc->mid_hi)
			inject = pp_frame_fix(flc, frame[1], a, g, &sc->cache);
	}
	st->len = n;
	if (n >= max_depth && fp)
		count(CPU_STAT_TRUNCATED);
	return ~0ULL;
}

/* The stack id of probe slot `probe` for a stack st of content hash h:
 * CPU_STACK_LARGE set when it goes to the 1 KiB map (cpu_abi.h). */
static __always_inline __u64 stack_slot(__u64 h, __u32 probe, const struct cpu_stack *st)
{
	__u64 k = h + probe * 0x9e3779b97f4a7c15ULL;

	if (st->len > CPU_SMALL_DEPTH)
		return k | CPU_STACK_LARGE;
	k &= ~CPU_STACK_LARGE;
	return k < CPU_STACK_RESERVED ? k + CPU_STACK_RESERVED : k;
}

/* Store st (content hash h) in stacks, whose values hold `depth` frames (a
 * constant): its id, or a reserved id naming why it could not be stored. */
static __always_inline __u64 store_in(void *stacks, const struct cpu_stack *st, __u64 h,
				      __u32 depth)
{
	for (__u32 probe = 0; probe < CPU_MAX_PROBES; probe++) {
		__u64 k = stack_slot(h, probe, st);
		struct cpu_stack *ex = bpf_map_lookup_elem(stacks, &k);
		if (!ex) {
			long r = bpf_map_update_elem(stacks, &k, st, BPF_NOEXIST);
			if (r == 0) {
				count(CPU_STAT_STACK_NEW);
				return k;
			}
			if (r != -EEXIST) {
				count(CPU_STAT_STACKS_FULL);
				return CPU_STACK_MAP_FULL;
			}
			/* Another CPU stored this slot just now. */
			ex = bpf_map_lookup_elem(stacks, &k);
			if (!ex)
				continue;
		}
		if (stack_equal(ex, st, depth))
			return k;
		count(CPU_STAT_PROBE);
	}
	count(CPU_STAT_COLLISION);
	return CPU_STACK_COLLISION;
}

/* Store st in the map of its size (cpu_abi.h): its id, or a reserved id. */
static __always_inline __u64 store_stack(void *small, void *large, const struct cpu_stack *st,
					 __u64 h)
{
	if (st->len > CPU_SMALL_DEPTH)
		return store_in(large, st, h, CPU_MAX_DEPTH);
	return store_in(small, st, h, CPU_SMALL_DEPTH);
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
	struct scratch *s = bpf_map_lookup_elem(&scratch_map, &zero);
	if (!counts || !s)
		return 0;

	__builtin_memset(&s->key, 0, sizeof(s->key));
	s->key.tgid = tgid;
	s->key.pid = pid;
	s->key.cgroup_id = bpf_get_current_cgroup_id();
	bpf_get_current_comm(s->key.comm, sizeof(s->key.comm));
	if (cpu_label)
		s->key.cpu = bpf_get_smp_processor_id();

	bool in_user = PP_USER_MODE((const __u64 *)&ctx->regs);
	struct task_struct *task = bpf_get_current_task_btf();

	__u64 u = grab_user_stack(ctx, task, tgid, fl, in_user, s), uh = 0;
	/* a sample taken in user mode has no kernel frames: skip the unwinder */
	__u64 k = CPU_STACK_NONE, kh = 0;
	if (kernel_stacks && !in_user)
		k = grab_kernel_stack(ctx, &s->kern);

	/*
	 * The common case, a sample like one counted before in this window:
	 * one map operation (cpu_abi.h, "Fast path"). The key holds each stack's
	 * first probe slot; a hit means an earlier sample of this thread
	 * stored that slot with a stack of the same 64-bit hash.
	 */
	if (u == ~0ULL)
		uh = stack_hash(&s->user);
	if (k == ~0ULL)
		kh = stack_hash(&s->kern);
	s->key.user_stack = u == ~0ULL ? stack_slot(uh, 0, &s->user) : u;
	s->key.kernel_stack = k == ~0ULL ? stack_slot(kh, 0, &s->kern) : k;
	__u64 *c = bpf_map_lookup_elem(counts, &s->key);
	if (c) {
		__sync_fetch_and_add(c, 1);
		count(CPU_STAT_RECORDED);
		return 0;
	}

	/* new in this window: store the stacks (found, most of the time,
	 * where an earlier window left them; their ids may be other probe
	 * slots, or reserved ids), then count under those ids; with the
	 * same ids the key just missed (nearly always) no second lookup:
	 * the insert below meets another CPU's entry as -EEXIST */
	__u64 uid = s->key.user_stack, kid = s->key.kernel_stack;
	if (u == ~0ULL)
		s->key.user_stack = store_stack(&sstacks, &stacks, &s->user, uh);
	if (k == ~0ULL)
		s->key.kernel_stack = store_stack(&sstacks, &stacks, &s->kern, kh);
	c = NULL;
	if (s->key.user_stack != uid || s->key.kernel_stack != kid)
		c = bpf_map_lookup_elem(counts, &s->key);
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
