/*
 * cpu_profile.h - turn one drained CPU window into one pprof profile per
 * process, shaped the way the Parca UI reads on-CPU data:
 * __name__=parca_agent, samples/count, period cpu/nanoseconds of
 * 1e9/frequency_hz, time = window start, duration = window length; series
 * labels node, pid, comm, executable, cgroup + external_labels; per-sample
 * string labels thread_id, thread_name and cpu (Parca Agent's: the CPU
 * number the sample was taken on); stacks leaf first, kernel frames
 * (mapping "[kernel.kallsyms]") below the user frames.
 *
 * Samples whose stack could not be stored still count, under a pseudo frame
 * naming the cause ("[lost stack: ...]"), so CPU time adds up.
 *
 * A user return address outside every executable mapping of the process
 * (what a frame-pointer walk reads when code uses %rbp as data: hash state,
 * heap or stack addresses) cannot be a real caller: the user stack ends
 * before it, under a "[truncated: junk return address]" frame, and the
 * sample counts in cpu_profile_stats.junk_cut. The sampled PC itself is
 * never judged (it came from the registers, and JIT code runs from
 * anonymous memory). When the process's mappings are unknown (gone before
 * it was ever seen) the stack is kept as walked.
 */
#ifndef PUSHPROF_CPU_PROFILE_H
#define PUSHPROF_CPU_PROFILE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "cpu.h"
#include "err.h"
#include "labels.h"
#include "report.h"
#include "targets.h"

struct symbolizer;
struct sym_mapping;

struct cpu_profile_opts {
	const char *node;
	const struct pp_labels *external_labels; /* may be NULL */
	uint32_t frequency_hz;
	/* The store's naming. Parca: __name__ "parca_agent", sample type
	 * samples/count (Parca Agent's). Pyroscope: __name__ "process_cpu",
	 * sample type cpu/nanoseconds = samples x period, which its UI lists
	 * as process_cpu:cpu:nanoseconds:cpu:nanoseconds. */
	bool pyroscope;
	bool thread_labels; /* thread_id, thread_name sample labels */
	bool cpu_label;	    /* `cpu` sample label (the sampler recorded key.cpu) */
	int64_t time_nanos; /* window start, CLOCK_REALTIME */
	int64_t duration_nanos;
	/* A process's comm, exe and cgroup read at or after this time
	 * (CLOCK_MONOTONIC: the window's start) are current for its profile:
	 * not read again (targets_refresh). 0: every process is re-read. */
	uint64_t facts_since_ns;
	struct symbolizer *sym; /* NULL: addresses + mappings only */
	/* Optional: called once per process and file mapping (with a GNU build
	 * id) that had addresses left without a name, so its file can be sent
	 * for server-side symbolization (debuginfo.h). Keep it cheap. */
	void (*unresolved)(pid_t pid, const struct sym_mapping *m, void *arg);
	void *unresolved_arg;
	/* Optional: called between two processes' profiles, when nothing of
	 * the targets table or the symbolizer is held, so that the caller can
	 * take process events (new targets) during a long build. It may
	 * change the targets table and load symbols. */
	void (*between)(void *arg);
	void *between_arg;
};

struct cpu_profile_stats {
	size_t profiles;
	uint64_t samples;
	uint64_t bytes; /* gzip bytes handed to the reporter */
	uint64_t frames, frames_named;
	/* Samples whose user stack was cut at a return address outside every
	 * executable mapping of the process (a register used as data, not a
	 * frame pointer); their frames from there on are dropped. */
	uint64_t junk_cut;
};

/*
 * Build one profile per process of the window and hand each to rep (the
 * same interface the heap and OOM producers report through; durable is
 * false: the next window replaces a lost one), on the caller's thread. A
 * profile rep refuses is logged with its pid and the build goes on.
 * Returns 0, or negative with err set when building fails (out of memory).
 */
int cpu_profiles_build(const struct cpu_window *w, struct targets *t,
		       const struct cpu_profile_opts *o, const struct pp_reporter *rep,
		       struct cpu_profile_stats *st, struct pp_err *err);

#endif
