/*
 * agent_window.h - what a CPU window tells the operator: its metrics
 * (pushprof_cpu_*, pushprof_bpf_map_*) and its "cpu window" log line, from
 * the figures the run loop (agent.c, window()) gathered. Loop thread only.
 */
#ifndef PUSHPROF_AGENT_WINDOW_H
#define PUSHPROF_AGENT_WINDOW_H

#include <stddef.h>
#include <stdint.h>

#include "cpu.h"
#include "cpu_profile.h"
#include "frameless.h"
#include "symbolize.h"

struct window_report {
	uint64_t window;	      /* its number, from 1 */
	const struct cpu_window *win; /* drained */
	struct cpu_sampler *cpu;
	struct frameless *fl;		    /* NULL: no leaf tables */
	const struct cpu_profile_stats *ps; /* of the first store's encoding */
	size_t matched, procs;		    /* targets matched, processes known */
	int64_t dur_ns;			    /* the window's length */
	double cpu_ms, loop_cpu_ms;	    /* the window work: all threads, the loop's */
	const struct sym_stats *sst;
	const char *flush_error; /* NULL: the outbox flush went well */
};

void agent_window_report(const struct window_report *r);

/*
 * After a window: hand memory glibc keeps after free back to the system
 * (malloc_trim) when the arenas' free bytes grew by more than 4 MiB since
 * the last time. *free_at holds that figure between calls (start at 0).
 * A burst (the first window loading every process's symbols, a large heap
 * snapshot) leaves that much; steady windows reuse their own free memory
 * and are not trimmed, since a page handed back is faulted in again when
 * reused. Returns 1 when it trimmed, 0 when not.
 */
int agent_give_back_memory(size_t *free_at);

#endif
