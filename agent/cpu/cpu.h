/*
 * cpu.h - the on-CPU sampler's life in user space: load bpf/cpu.bpf.c, open
 * one software cpu-clock perf event per online CPU with the program
 * attached, keep that set in step with CPU hotplug, maintain the kernel's
 * tgid filter, and drain one window of samples at a time.
 *
 * A drain flips the BPF side to the other counts map and waits (synchronize_rcu
 * via a map-in-map update) until no program run can still write the old one,
 * so samples taken during the drain land in the next window, never nowhere.
 * Stacks stay stored across windows; the sampler keeps copies (cpu.c).
 */
#ifndef PUSHPROF_CPU_H
#define PUSHPROF_CPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "bpf/cpu_abi.h"
#include "err.h"
#include "maprec.h"

struct cpu_sampler;

struct cpu_sampler_opts {
	uint32_t frequency_hz; /* CPU_HZ_MIN..CPU_HZ_MAX */
	uint32_t max_depth;    /* 1..CPU_MAX_DEPTH and <= perf_event_max_stack */
	bool kernel_stacks;
	bool cpu_label;	      /* record the CPU of each sample (key.cpu) */
	bool filter;	      /* only tgids passed to cpu_sampler_allow() */
	uint64_t interval_ns; /* sizes the maps for one window */
	/* tests: windows unnamed after which a stored stack is deleted (0: the
	 * default, 32; fewer when a map fills, cpu.c); every stored stack
	 * deleted at every drain (the copies still resolve them) */
	uint32_t stack_keep;
	bool stack_evict_all;
};

struct cpu_record {
	struct cpu_sample_key key;
	uint64_t count;
};

struct cpu_stack_entry {
	uint64_t id; /* 0 = empty slot */
	uint32_t len;
	uint64_t *ips; /* leaf first */
};

/* One drained window. */
struct cpu_window {
	struct cpu_record *recs;
	size_t nrecs;
	struct cpu_stack_entry *stacks; /* open addressing by id: the stacks recs name */
	size_t nstacks, stacks_cap;
	uint64_t stats[CPU_STAT_MAX]; /* counter deltas since the last drain */
	uint64_t samples;	      /* sum of recs[].count */
	/* samples whose stack id was neither stored in BPF nor copied: their
	 * key's id is now CPU_STACK_EVICTED (cpu.c, "Stack copies") */
	uint64_t lost_evicted;
	size_t stacks_read;	 /* stacks read from BPF in this drain */
	size_t stacks_from_copy; /* named, deleted just before: from the kept copy */
	size_t stacks_evicted;	 /* deleted from the BPF maps in this drain */
	size_t stacks_stored;	 /* stacks stored in the BPF maps after it */
};

/* Check max_depth against CPU_MAX_DEPTH and /proc/sys/kernel/perf_event_max_stack. */
int cpu_check_depth(uint32_t depth, struct pp_err *err);

/* Loads and attaches; needs CAP_BPF+CAP_PERFMON (root). */
int cpu_sampler_new(const struct cpu_sampler_opts *o, struct cpu_sampler **out, struct pp_err *err);
void cpu_sampler_free(struct cpu_sampler *s);

/* Re-read /sys/devices/system/cpu/online: attach to new CPUs, detach from
 * gone ones. *changed (optional) tells whether anything changed. */
int cpu_sampler_sync_cpus(struct cpu_sampler *s, bool *changed, struct pp_err *err);
unsigned cpu_sampler_ncpus(const struct cpu_sampler *s);
/* Hand the executable file mappings the kernel recorded since the last
 * call, on every CPU, to fn (maprec.h: each CPU's event keeps a ring of
 * them). Returns how many. Called from the agent's loop only. */
int cpu_sampler_drain_maps(struct cpu_sampler *s, maprec_fn fn, void *arg);
/* Mapping records handed over, lost to full rings, and CPUs whose ring
 * could not be mapped (they rely on /proc reads alone), since the start. */
void cpu_sampler_maprec_stats(const struct cpu_sampler *s, uint64_t *records, uint64_t *lost,
			      uint64_t *errors);
/* What sync does with the file's contents, given as a cpulist ("0-3,5");
 * lets tests exercise attach/detach without taking CPUs offline. */
int cpu_sampler_set_cpus(struct cpu_sampler *s, const char *cpulist, bool *changed,
			 struct pp_err *err);

/* Kernel filter (opts.filter): add or remove a tgid. */
int cpu_sampler_allow(struct cpu_sampler *s, pid_t tgid, bool allow);

/*
 * Frameless Go code (bpf/cpu_abi.h; agent/cpu/frameless.c decides what goes in).
 * fl_write stores n bitmap words at pool index word (word + n <=
 * CPU_FL_POOL_WORDS); fl_set gives tgid its text range: with opts.filter
 * in its allowed_tgids entry (-ENOENT when the tgid is not allowed: call
 * cpu_sampler_allow() first; allowing again keeps the range), else in
 * fl_procs (-E2BIG when CPU_FL_MAX_PROCS processes already have one);
 * fl_del drops it (0 when it had none). Loop thread only; negative errno.
 */
int cpu_sampler_fl_write(struct cpu_sampler *s, uint32_t word, const uint64_t *bits, uint32_t n);
/* The same for the C/C++ table pool (fl_cfa): n entries at index at
 * (at + n <= CPU_CFA_POOL), -ERANGE otherwise. Loop thread only. */
int cpu_sampler_cfa_write(struct cpu_sampler *s, uint32_t at, const uint64_t *ent, uint32_t n);
int cpu_sampler_fl_set(struct cpu_sampler *s, pid_t tgid, const struct cpu_fl_proc *p);
int cpu_sampler_fl_del(struct cpu_sampler *s, pid_t tgid);

/* Flip, wait, drain the idle counts map into w (w is reset first), with
 * the frames of every stack its counts name; evict stacks unused for a
 * while from the BPF maps. Loop thread only. */
int cpu_sampler_drain(struct cpu_sampler *s, struct cpu_window *w, struct pp_err *err);

/* Frames of a stack id seen in w; NULL with *len = 0 for reserved ids and
 * ids not found. */
const uint64_t *cpu_window_stack(const struct cpu_window *w, uint64_t id, uint32_t *len);
void cpu_window_free(struct cpu_window *w);

/* The BPF program's id, for `bpftool prog show id N` (bpf_stats). */
int cpu_sampler_prog_id(const struct cpu_sampler *s);
/* Entries of one counts map and of one stack map (of each size): a
 * window's nrecs and stacks_stored against these are the maps' fill. */
void cpu_sampler_capacity(const struct cpu_sampler *s, uint32_t *counts, uint32_t *stacks);

#endif
