/*
 * cpu.h - what the on-CPU sampler (cpu.bpf.c) and user space (agent/cpu.c)
 * share: map keys, values and counter indices.
 *
 * Design, so that no sample is lost silently:
 *  - Two map sets (counts + stacks), selected by `active` in .bss. The BPF
 *    program writes only into the active set; user space flips `active`,
 *    then waits for every program run that may still see the old value (an
 *    update of an ARRAY_OF_MAPS makes the kernel call synchronize_rcu()),
 *    and drains the now idle set at leisure.
 *  - Stacks are stored by a 64-bit content hash computed in BPF. An existing
 *    entry is compared word by word; on a collision the next probe slot is
 *    tried, so two different stacks never share an id.
 *  - A sample whose stack cannot be stored (map full, stack error, probes
 *    exhausted) is still counted, with a reserved stack id naming the cause;
 *    per-CPU counters say how many samples met each fate.
 */
#ifndef PUSHPROF_BPF_CPU_H
#define PUSHPROF_BPF_CPU_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

/* Frames per stack the maps can hold; the kernel's default
 * perf_event_max_stack. The configured depth may be lower, never higher. */
#define CPU_MAX_DEPTH 127
/* Stack-map slots tried for one stack before giving up (hash collisions). */
#define CPU_MAX_PROBES 4
/* Default map sizes; user space resizes before load. */
#define CPU_DEFAULT_ENTRIES 2048

/*
 * Frameless Go code, the leaf case. Go gives no frame (no saved %rbp) to a
 * function whose frame size is 0: assembly declared $0-N (runtime.memmove,
 * memclrNoHeapPointers, syscall trampolines, hash kernels) and compiled
 * leaves without locals. A sample in one has %rbp still pointing at the
 * caller's frame, so the frame-pointer walk goes from the leaf straight to
 * the grand-caller; the return address into the caller sits at [%rsp].
 *
 * User space (agent/frameless.c) marks such functions from .gopclntab
 * (pcsp 0 at every PC) in a bitmap of one bit per CPU_FL_CHUNK bytes of a
 * binary's text: Go's linker aligns amd64 functions to 32 bytes, so the
 * bitmap is exact. Bitmaps live in one pool of u64 words (fl_bits, an
 * ARRAY), one analysis per executable shared by its processes; a tgid's
 * text range at runtime (PIE: biased) and first word are the value of its
 * allowed_tgids entry when the sampler filters (the lookup it does anyway),
 * of its fl_procs entry when it samples the whole host (one more lookup
 * per sample). Only when the leaf PC lies in that range one fl_bits lookup; a set bit makes it insert [sp] as
 * frame 1 and go on with the usual walk. [sp] of a frameless leaf is a
 * return address, fixed per call site, so stacks still dedupe.
 * Mid-stack frameless functions and prologues are not handled here.
 */
#define CPU_FL_CHUNK_SHIFT 5			/* 32-byte chunks */
#define CPU_FL_WORD_BYTES (64u << CPU_FL_CHUNK_SHIFT)	/* text per word: 2 KiB */
#define CPU_FL_POOL_WORDS (1u << 18)		/* 2 MiB of words: 512 MiB of text */
#define CPU_FL_MAX_PROCS 8192

/*
 * C and C++: prologues, epilogues, frameless leaves. A sample at a
 * function's first instruction, after `push %rbp` but before `mov
 * %rsp,%rbp`, at the `ret` after `leave`, or anywhere in a leaf built with
 * -momit-leaf-frame-pointer has %rbp still holding the caller's frame (or
 * the caller's %rbp saved on the stack): the walk misses the caller. User
 * space (agent/ehframe.c) finds these ranges in .eh_frame: the CFA is
 * %rsp-based there, so the return address is at [sp + 8*ra] and the
 * caller's %rbp is in %rbp (fp 0) or at [sp + 8*(fp-1)].
 *
 * Same per-process range and pool as Go, but two words per 2 KiB of text:
 * word 2i is the bitmap (a set bit: the chunk holds such a range, the
 * pre-filter), word 2i+1 the window of table entries overlapping those
 * 2 KiB: first entry (high 32 bits, relative to tab) and count (low 32).
 * The table: ntab entries from index tab of the fl_cfa pool, sorted by
 * start, disjoint, one u64 each (CPU_CFA_ENTRY). ntab 0 means Go
 * semantics (one bitmap word per 2 KiB, caller at [sp] for the whole
 * chunk). Only for a leaf PC whose chunk bit is set BPF reads the window
 * and binary-searches it: ranges are disjoint and at least a byte long,
 * so a window holds at most 2049 entries and CPU_CFA_STEPS lookups find
 * the one (a longer window, which only a broken table has, gives a wrong
 * answer for that process, never an unbounded search). Return addresses
 * are fixed per call site: stacks still dedupe.
 */
#define CPU_CFA_POOL (1u << 19)			/* entries (u64): 4 MiB */
#define CPU_CFA_STEPS 12
#define CPU_CFA_MAX_ENTRIES CPU_CFA_POOL
/* entry: start offset from cpu_fl_proc.start (32 bits) | len (12) | ra (10) | fp (10) */
#define CPU_CFA_LEN_MAX 4095u
#define CPU_CFA_SLOT_MAX 1023u
#define CPU_CFA_ENTRY(off, len, ra, fp) \
	(((__u64)(off) << 32) | ((__u64)(len) << 20) | ((__u64)(ra) << 10) | (__u64)(fp))

struct cpu_fl_proc {
	__u64 start;		/* runtime address of chunk 0, 32-byte aligned */
	__u64 end;		/* text covered: end <= start + nwords * CPU_FL_WORD_BYTES */
	__u32 word;		/* first word in fl_bits */
	__u32 nwords;		/* C/C++: 2 per 2 KiB (bitmap, window) */
	__u32 tab;		/* first entry in fl_cfa (C and C++) */
	__u32 ntab;		/* 0: Go (see above) */
};

/* Reserved stack ids: never produced by the hash. */
enum cpu_stack_id {
	CPU_STACK_NONE = 0,		/* no frames (kernel thread, user-mode sample) */
	CPU_STACK_ERR = 1,		/* bpf_get_stack (kernel) failed */
	CPU_STACK_MAP_FULL = 2,		/* stacks map full */
	CPU_STACK_COLLISION = 3,	/* all probe slots held other stacks */
	CPU_STACK_RESERVED = 16,	/* hashes below this are shifted up */
};

struct cpu_sample_key {
	__u32 tgid;
	__u32 pid;			/* thread id */
	__u64 cgroup_id;		/* cgroup v2 id */
	__u64 user_stack;		/* id in the stacks map, or enum cpu_stack_id */
	__u64 kernel_stack;
	char comm[16];			/* thread name at sample time */
};

struct cpu_stack {
	__u32 len;			/* frames in ips */
	__u32 pad;
	__u64 ips[CPU_MAX_DEPTH];	/* leaf first */
};

/* Per-CPU counters, cumulative since load; user space diffs per window. */
enum cpu_stat {
	CPU_STAT_RUNS,			/* program invocations */
	CPU_STAT_IDLE,			/* idle task, not recorded */
	CPU_STAT_FILTERED,		/* tgid not targeted */
	CPU_STAT_RECORDED,		/* counted in the counts map */
	CPU_STAT_LOST_COUNTS_FULL,	/* counts map full: sample lost */
	CPU_STAT_STACK_ERR,		/* a stack came back as an error (sample kept) */
	CPU_STAT_STACKS_FULL,		/* stacks map full (sample kept, stack lost) */
	CPU_STAT_COLLISION,		/* probes exhausted (sample kept, stack lost) */
	CPU_STAT_PROBE,			/* a probe slot held another stack (handled) */
	CPU_STAT_TRUNCATED,		/* stack hit the depth limit */
	CPU_STAT_FL_LEAF,		/* frameless leaf: caller read from [sp] */
	CPU_STAT_FL_FAULT,		/* frameless leaf, but [sp] was unreadable */
	CPU_STAT_CFA_LEAF,		/* C/C++ leaf in an %rsp-based range: caller from the stack */
	CPU_STAT_CFA_FAULT,		/* such a leaf, but the stack slots were unreadable */
	CPU_STAT_MAX,
};

#endif
