/*
 * cpu_internal.h - what cpu.c (perf events, the BPF program's lifecycle,
 * the tgid filter and the leaf-table pools) and cpu_drain.c (windows: the
 * counts drain and the stack copies) share: the sampler's state. Not for
 * other modules: cpu.h is the interface.
 */
#ifndef PUSHPROF_CPU_INTERNAL_H
#define PUSHPROF_CPU_INTERNAL_H

#include "cpu.h"
#include "u64map.h"

#include <bpf/bpf.h>
#include <linux/types.h>
#include <stddef.h>
#include <stdint.h>

/* Windows a stored stack stays in the BPF maps after the last count that
 * named it, at most (see evict()). */
#define STACK_KEEP_MAX 32

/* A stack user space has read from a BPF stack map (see "Stack copies"). */
struct stack_copy {
	uint64_t id;
	uint64_t used;	  /* the last drain whose counts named it */
	uint64_t deleted; /* the drain that deleted it from its map; 0: stored */
	uint32_t len;
	__u64 *ips; /* leaf first; owned */
};

struct cpu_sampler {
	struct cpu_bpf *skel;
	struct bpf_link **links; /* by cpu number; NULL = not attached */
	struct maprec_ring **rings; /* by cpu number: its event's mmap records, or NULL */
	uint64_t maprec_records, maprec_lost, maprec_errors;
	int ncpu_slots;
	unsigned nattached;
	uint32_t frequency_hz;
	int possible; /* for per-CPU map values */
	uint64_t last_stats[CPU_STAT_MAX];
	int counts_fd[2], stacks_fd, sstacks_fd; /* sstacks: small stacks (bpf/cpu_abi.h) */
	uint32_t ncounts, nstacks; /* max_entries of each counts map, of each stack map */
	bool filter;		   /* allowed_tgids in use (it holds fl ranges) */
	/* stack copies: every stack read and not yet forgotten, copies[idx[id]] */
	struct stack_copy *copies;
	size_t ncopies, copies_cap;
	struct u64map idx;
	uint64_t drains;  /* the copies' clock */
	uint32_t keep;	  /* windows unnamed after which a stack is deleted */
	bool evict_all;	  /* tests: delete every stack at every drain */
	size_t stored[2]; /* copies whose stack is still in its map: small, large */
};

#endif
