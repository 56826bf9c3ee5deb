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
	double events_cpu_ms; /* of loop_cpu_ms: process events taken during the build */
	const struct sym_stats *sst;
	const char *flush_error; /* NULL: the outbox flush went well */
};

void agent_window_report(const struct window_report *r);

#endif
