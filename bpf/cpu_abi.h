/*
 * cpu_abi.h - what the on-CPU sampler (cpu.bpf.c) and user space (agent/cpu/cpu.c)
 * share: map keys, values and counter indices.
 *
 * Design, so that no sample is lost silently:
 *  - Two counts maps, selected by `active` in .bss. The BPF program counts
 *    only into the active one; user space flips `active`, then waits for
 *    every program run that may still see the old value (an update of an
 *    ARRAY_OF_MAPS makes the kernel call synchronize_rcu()), and drains the
 *    now idle one at leisure.
 *  - Stacks are stored by a 64-bit content hash computed in BPF. An existing
 *    entry is compared word by word; on a collision the next probe slot is
 *    tried, so two different stacks stored never share an id.
 *  - The stack maps are not flipped: a stack stays stored across windows,
 *    and a sample whose stack an earlier window stored finds it there (a
 *    lookup and compare, no insert). User space (agent/cpu.c) keeps a copy
 *    of each stack it has read, reads only ids a drained count names that
 *    it has not seen, and evicts stacks no count has named for a while
 *    (a map past half full: the ones named longest ago, never one named in
 *    the window just drained): it deletes them from the map but keeps its
 *    copy one more window, for a program run that found the stack just
 *    before the delete and counts under its id in the window after. A
 *    count whose id is in neither is counted as lost (CPU_STACK_EVICTED),
 *    never dropped. So an id names a stack's content, not a stack of one
 *    window. On gcstack.go (most samples a key new in the window) stacks
 *    inserted per sample fell from ~0.9 (one per stack and window) to
 *    ~0.35 after a minute, the rest found stored.
 *  - Fast path: most samples repeat a (thread, stacks) key already counted in
 *    the window, so BPF first looks the key up with each stack's first
 *    probe slot and only adds 1 on a hit: one map operation, no stack-map
 *    lookup or word-by-word compare (gcstack.go: -4 % BPF time per sample).
 *    A hit can be wrong only if the same thread (the key holds tgid and
 *    tid) has two different stacks of the same 64-bit hash in one window;
 *    a process can thus at worst mislabel its own samples. On a miss the
 *    stacks are looked up or stored as above and the key counted under
 *    their ids.
 *  - A sample whose stack cannot be stored (map full, stack error, probes
 *    exhausted) is still counted, with a reserved stack id naming the cause;
 *    per-CPU counters say how many samples met each fate.
 */
#ifndef PUSHPROF_BPF_CPU_ABI_H
#define PUSHPROF_BPF_CPU_ABI_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

/* Frames per stack the maps can hold; the kernel's default
 * perf_event_max_stack. The configured depth may be lower, never higher. */
#define CPU_MAX_DEPTH 127

/* cpu.frequency_hz's range, checked by the sampler (agent/cpu/cpu.c) and the
 * config schema, which includes this header rather than the sampler's: the
 * cpu-clock event takes any period, but above 1 kHz the sampler's own cost
 * is no longer small beside the workload's. The BPF program does not use it. */
#define CPU_HZ_MIN 1
#define CPU_HZ_MAX 1000
/*
 * Two stack maps, by size: stacks of up to CPU_SMALL_DEPTH frames
 * (nearly all: Go's GC and allocator, syscalls, most kernel stacks) in
 * values of 264 bytes, longer ones in values of 1 KiB. An insert copies
 * the whole value into memory the workload has evicted: on gcstack.go,
 * where most samples are a (thread, stack) new in the window, 264-byte
 * values took 5 % off the BPF time per sample (bench/bpf_ab.py, depth-32
 * experiment build against 1 KiB values), and keeping stacks across
 * windows (above) spares most inserts of a stack seen before.
 * A stored stack's id says which map holds it: CPU_STACK_LARGE set for
 * the 1 KiB map. The stack's content hash covers its length, so the same
 * frames never land in both.
 */
#define CPU_SMALL_DEPTH 32
#define CPU_STACK_LARGE (1ULL << 63)
/* Stack-map slots tried for one stack before giving up (hash collisions). */
#define CPU_MAX_PROBES 4
/* Default map sizes; user space resizes before load. */
#define CPU_DEFAULT_ENTRIES 2048

/*
 * Leaves whose %rbp is not their own frame. The walk reads the caller at
 * [bp+8], right only once the sampled function has saved the caller's %rbp
 * and pointed %rbp at its own frame. Elsewhere the caller is lost (the walk
 * goes to the grand-caller) or junk follows:
 *  - Go functions without a frame (no saved %rbp): assembly declared $0-N
 *    (runtime.memmove, memclrNoHeapPointers, syscall trampolines) and
 *    compiled leaves without locals; the return address stays at [sp];
 *  - Go assembly with a frame that uses %rbp as data (crypto/sha256.block):
 *    the return address and the saved %rbp sit at fixed offsets from %rsp;
 *  - C/C++: a function's first instruction, between `push %rbp` and
 *    `mov %rsp,%rbp`, the `ret` after `leave`, and leaves built without a
 *    frame pointer (-momit-leaf-frame-pointer).
 * User space (agent/cpu/frameless.c) finds such PC ranges once per executable
 * (Go: .gopclntab's pcsp, the stack-pointer delta Go's own unwinder uses;
 * C/C++: .eh_frame, where the CFA is %rsp-based) and records for each where
 * the return address is, [sp + 8*ra], and the caller's %rbp: still in %rbp
 * (fp 0) or at [sp + 8*(fp-1)].
 *
 * Per process: its text range at runtime (PIE: biased), in the value of its
 * allowed_tgids entry when the sampler filters (the lookup it does anyway),
 * of its fl_procs entry when it samples the whole host (one more lookup per
 * sample). Per executable, shared by its processes: two pool words (fl_bits)
 * per 2 KiB of text, word 2i a bitmap of 32-byte chunks (a set bit: the
 * chunk holds such a range, the pre-filter), word 2i+1 the window of table
 * entries overlapping those 2 KiB: first entry (high 32 bits, relative to
 * tab) and count (low 32); the table, ntab entries from index tab of the
 * fl_cfa pool, sorted by start, disjoint, one u64 each (CPU_CFA_ENTRY).
 * Only for a PC whose chunk bit is set BPF reads the window and
 * binary-searches it: ranges are disjoint and at least a byte long, so a
 * window holds at most 2049 entries and CPU_CFA_STEPS lookups find the one
 * (a longer window, which only a broken table has, gives a wrong answer for
 * that process, never an unbounded search). The leaf's caller is inserted
 * as frame 1 and the walk goes on from the caller's %rbp; the return
 * address is fixed per call site, so stacks still dedupe.
 *
 * Mid-stack (Go only, go = 1): a frame whose return address lies in an
 * entry with ra 0 and fp 0 returns into frameless Go code, which kept its
 * own caller's return address at its %rsp: right above the callee's frame,
 * inserted from there (pp_frame_fix). Go's linker aligns functions to 32
 * bytes, so a chunk belongs to one function and the pre-filter is exact for
 * Go. In C such a range is a prologue or a leaf, never a return site. Only
 * assembly can call from a frameless function (the compiler gives any
 * function that calls a frame), so user space hands BPF [mid_lo, mid_hi),
 * the span of such functions and the g0 switch sites (runtime's
 * asm_amd64.s: a few KiB): only a return address inside it costs a call of
 * pp_frame_fix, not every frame of the walk.
 *
 * Go prologues and epilogues. A compiled Go function with a frame has
 * %rbp pointing at its caller's frame for a few instructions: the stack
 * check (`cmp 16(%r14),%rsp; jbe`), up to Go 1.20 `sub $n,%rsp; mov
 * %rbp,n-8(%rsp); lea n-8(%rsp),%rbp` and `add $n,%rsp; ret` (after `mov
 * n-8(%rsp),%rbp`), from Go 1.21 `push %rbp; mov %rsp,%rbp` and `ret`
 * (after `pop %rbp`). A small function called at a high rate spends a
 * good share of its samples there (runtime.findObject: a fifth). Marking
 * them in the table would take about six entries per function (hundreds
 * of thousands for a large program, in a pool all processes share), so
 * BPF decodes them instead: user space marks the chunks around pcsp's
 * steps of every compiled function in the bitmap (no entries); for a leaf
 * in such a chunk but in no range, 20 bytes of code around ip (one read of
 * a line the CPU just executed) say which instruction it is; each pattern fixes where the return address
 * is ([sp], [sp+8], [sp+n]), and %rbp is still the caller's, so the walk
 * goes on from it (pp_go_edge). The same instructions mean the same in
 * C code linked into the binary (cgo), and a misread only costs a wrong
 * caller for that sample, never unbounded work.
 *
 * Per-CPU cache. Each table lookup touches lines of 4 MiB maps that the
 * workload has evicted since the last sample 10 ms ago (bench/bpf_ab.py:
 * about 450 ns per sample on leaves.go, most of what the tables cost), and
 * a hot leaf is sampled in the same few ranges again and again. So the
 * per-CPU scratch value keeps the last answers: CPU_FL_SETS sets of
 * CPU_FL_WAYS slots (one 64-byte line per set, so a lookup touches one
 * line), the set picked by the PC's 256-byte block, the most recent answer first,
 * each "in the table at tab, offsets [lo, hi) have entry e" (a range, the
 * gap between two ranges, or a run of chunks without any, so that a
 * function body is one answer, not one per chunk); and, when the whole
 * host is sampled, the fl_procs values of the last processes sampled,
 * CPU_PROC_SLOTS slots picked by tgid (a CPU that runs the profiled
 * process between others finds it there). Measured in
 * an experiment build (counters, and bpf_ktime_get_ns around fl_search,
 * on a host busy with other sessions), with eight direct-mapped slots of
 * one chunk each: 0.30 (leaves.go) and 0.53 (gcstack.go) cache misses per
 * sample, each ~0.6-1 us of cold table lines (two hot leaves, or a leaf
 * and other code, taking one slot in turn), and a fl_procs lookup on 0.46
 * samples in 1 (the sampled process changes); then 0.18, 0.24 and,
 * keeping only the process before, 0.17; in a later run (busier host)
 * the slots by tgid took the lookups from 0.26 to 0.12 per sample.
 * Counted since (CPU_STAT_FL_SEARCH, `fl_search` in the window line):
 * gcstack.go, targeted, 99 Hz, 2026-12-02, searches per sample with 16
 * sets picked by the 32-byte chunk 0.74 (frames returning into
 * the mid-stack span look up too, and one answer, a function body, was
 * kept once per chunk sampled in it); 64 sets 0.40; by 128-byte block 64
 * sets 0.24, 256 sets 0.11; by 256-byte block 128 sets 0.14-0.16, 256
 * sets 0.12; by 512-byte block 64 sets 0.28. 128 sets by 256-byte block
 * here: 8 KiB per CPU (a percpu value may not pass 32 KiB).
 * A slot or the process is used only while its generation equals fl_gen
 * (.bss), which user space bumps after every write to fl_bits, fl_cfa,
 * fl_procs or allowed_tgids values: a table's pool space is reused
 * only after the processes using it were dropped (a bump), so a cached
 * answer never outlives what it was read from.
 */
#define CPU_PROC_SLOTS 8			      /* power of two */
#define CPU_FL_SETS 128				      /* power of two */
#define CPU_FL_SET_SHIFT 8			      /* set by 256-byte block */
#define CPU_FL_WAYS 2				      /* slots per set: 64 bytes */
#define CPU_FL_CHUNK_SHIFT 5			      /* 32-byte chunks */
#define CPU_FL_WORD_BYTES (64u << CPU_FL_CHUNK_SHIFT) /* text per word: 2 KiB */
#define CPU_FL_POOL_WORDS (1u << 19)		      /* 4 MiB of words: 512 MiB of text */
#define CPU_FL_MAX_PROCS 8192
#define CPU_CFA_POOL (1u << 19) /* entries (u64): 4 MiB */
#define CPU_CFA_STEPS 12
#define CPU_CFA_MAX_ENTRIES CPU_CFA_POOL
/* entry: start offset from cpu_fl_proc.start (32 bits) | len (12) | ra (10) | fp (10) */
#define CPU_CFA_LEN_MAX 4095u
#define CPU_CFA_SLOT_MAX 1023u
#define CPU_CFA_ENTRY(off, len, ra, fp) \
	(((__u64)(off) << 32) | ((__u64)(len) << 20) | ((__u64)(ra) << 10) | (__u64)(fp))
/* fl_search's answer for a PC in no range of a marked chunk (len 0: never
 * an entry): Go prologue or epilogue code may be there, decode it */
#define CPU_CFA_EDGE_MAYBE CPU_CFA_ENTRY(0, 0, CPU_CFA_SLOT_MAX, CPU_CFA_SLOT_MAX)

struct cpu_fl_proc {
	__u64 start;  /* runtime address of chunk 0, 32-byte aligned */
	__u64 end;    /* text covered: end <= start + nwords / 2 * CPU_FL_WORD_BYTES */
	__u32 word;   /* first word in fl_bits */
	__u32 nwords; /* 2 per 2 KiB (bitmap, window) */
	__u32 tab;    /* first entry in fl_cfa */
	__u32 ntab;
	__u64 switch_ret[2];  /* Go: g0 switch return sites (below); 0: none */
	__u64 mid_lo, mid_hi; /* Go: return addresses the mid-stack rules need to see */
	__u32 go;	      /* Go code: the mid-stack rule above applies */
	__u32 pad;
};

/*
 * Frameless Go code mid-stack: runtime.systemstack and runtime.asmcgocall
 * (asm, $0 frames) switch to the thread's g0 stack and call a function
 * there, which saves the goroutine's %rbp: the walk goes from the return
 * address into systemstack straight to the grand-caller, and the caller
 * (mallocgc, gcBgMarkWorker, cgocall: ~40 % of a GC-heavy program's
 * samples) is lost. Its return address is where the goroutine's stack
 * pointer was saved at the switch (gosave_systemstack_switch:
 * g.sched.sp = systemstack's SP), and Go's own unwinder crosses the switch
 * the same way (curg.sched). User space hands BPF the return site after the
 * switch path's call (switch_ret, runtime addresses); a frame returning
 * there makes BPF find g0 (in %r14, Go's g register, else at %fs:-8, Go's
 * TLS slot), then m = g0.m, curg = m.curg, and insert [curg.sched.sp].
 * Every step is checked (the frame returning to the switch site inside
 * g's stack, so g is g0 (cpu.bpf.c, g0_caller); curg != g, curg.m == m,
 * sched.sp inside curg.stack), so a wrong layout or a hostile process
 * only costs the fix:
 * counted (CPU_STAT_G0_FAIL), the walk goes on as before.
 * Offsets of runtime2.go, the same in Go 1.17 to 1.23 (64-bit):
 *   g: stack{lo,hi} 0, stackguard0 16, stackguard1 24, _panic 32,
 *      _defer 40, m 48, sched gobuf{sp,...} 56
 *   m: g0 0, morebuf gobuf (7 words) 8, divmod+pad 64, procid 72,
 *      gsignal 80, goSigStack{stack,guard0,guard1,stktopsp} 88,
 *      sigmask [2]uint32 128, tls [6]uintptr 136, mstartfn 184, curg 192
 */
#define GO_G_STACK_LO 0
#define GO_G_STACK_HI 8
#define GO_G_M 48
#define GO_G_SCHED_SP 56
#define GO_M_CURG 192
#define GO_TLS_G (-8) /* %fs:-8: runtime.tlsg on linux/amd64 */

/* Reserved stack ids: never produced by the hash. */
enum cpu_stack_id {
	CPU_STACK_NONE = 0,	 /* no frames (kernel thread, user-mode sample) */
	CPU_STACK_ERR = 1,	 /* bpf_get_stack (kernel) failed */
	CPU_STACK_MAP_FULL = 2,	 /* stacks map full */
	CPU_STACK_COLLISION = 3, /* all probe slots held other stacks */
	CPU_STACK_EVICTED = 4,	 /* user space only: a count named a stack
					 * neither the map nor its copies held */
	CPU_STACK_RESERVED = 16, /* hashes below this are shifted up */
};

struct cpu_sample_key {
	__u32 tgid;
	__u32 pid;	  /* thread id */
	__u64 cgroup_id;  /* cgroup v2 id */
	__u64 user_stack; /* id in the stacks map, or enum cpu_stack_id */
	__u64 kernel_stack;
	char comm[16]; /* thread name at sample time */
	__u32 cpu;     /* CPU the sample was taken on; 0 when cpu_label is off */
	__u32 pad;
};

struct cpu_stack {
	__u32 len; /* frames in ips */
	__u32 pad;
	__u64 ips[CPU_MAX_DEPTH]; /* leaf first */
};

/* The value of the small stack maps: the first fields of struct cpu_stack. */
struct cpu_stack_small {
	__u32 len; /* frames in ips, <= CPU_SMALL_DEPTH */
	__u32 pad;
	__u64 ips[CPU_SMALL_DEPTH];
};

/* Per-CPU counters, cumulative since load; user space diffs per window. */
enum cpu_stat {
	CPU_STAT_RUNS,		   /* program invocations */
	CPU_STAT_IDLE,		   /* idle task, not recorded */
	CPU_STAT_FILTERED,	   /* tgid not targeted */
	CPU_STAT_RECORDED,	   /* counted in the counts map */
	CPU_STAT_STACK_NEW,	   /* a stack inserted (not found in its map) */
	CPU_STAT_LOST_COUNTS_FULL, /* counts map full: sample lost */
	CPU_STAT_STACK_ERR,	   /* a stack came back as an error (sample kept) */
	CPU_STAT_STACKS_FULL,	   /* stacks map full (sample kept, stack lost) */
	CPU_STAT_COLLISION,	   /* probes exhausted (sample kept, stack lost) */
	CPU_STAT_PROBE,		   /* a probe slot held another stack (handled) */
	CPU_STAT_TRUNCATED,	   /* stack hit the depth limit */
	CPU_STAT_FL_LEAF,	   /* leaf in a table range: caller from the stack */
	CPU_STAT_FL_FAULT,	   /* such a leaf (or frame), but the stack slots were unreadable */
	CPU_STAT_FL_MID,    /* frameless Go mid-stack: caller read above the callee's frame */
	CPU_STAT_G0_SWITCH, /* caller of systemstack/asmcgocall from curg.sched.sp */
	CPU_STAT_G0_FAIL,   /* a g0 switch site, but g0/m/curg did not check out */
	CPU_STAT_GO_EDGE,   /* Go leaf in a prologue/epilogue: caller from the stack */
	CPU_STAT_FL_SEARCH, /* leaf tables searched: no answer in the per-CPU cache */
	CPU_STAT_MAX,
};

#endif
