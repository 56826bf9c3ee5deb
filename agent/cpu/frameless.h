/*
 * frameless.h - the leaf tables of sampled processes: where their code
 * keeps the return address and the caller's %rbp when %rbp is not the
 * function's own frame, handed to the CPU sampler's BPF program (bpf/cpu_abi.h,
 * "Leaves whose %rbp is not their own frame").
 *
 * For each targeted process the executable (/proc/PID/exe) is analysed
 * once per file (device, inode) into PC ranges: Go from .gopclntab's pcsp
 * (gopcln_func_pcsp(): frameless functions whole, assembly with a frame
 * per run) plus its g0 switch sites (runtime.systemstack, asmcgocall);
 * anything else from .eh_frame (ehframe.h: the %rsp-based ranges of the
 * executable segment, i.e. prologues, epilogues, frameless leaves). The
 * ranges become a sorted table in one pool (fl_cfa) and, per 2 KiB of
 * text, a bitmap and a window word in another (fl_bits); the process's
 * text range at runtime (from /proc/PID/maps, so PIE works) goes to BPF
 * with cpu_sampler_fl_set() (its allowed_tgids entry when filtering,
 * fl_procs for the whole host). Processes of one executable share one
 * table; it is freed with the last of them.
 *
 * Bounds (the executable and /proc are the target's, hence hostile):
 * text of at most CPU_FL_POOL_WORDS / 2 * 2 KiB per binary, a budget of
 * decoded pcsp entries or .eh_frame bytes per analysis (a section of at
 * most FL_EH_MAX_SECTION), CPU_CFA_MAX_ENTRIES ranges per executable,
 * pools of CPU_FL_POOL_WORDS words and CPU_CFA_POOL entries,
 * CPU_FL_MAX_PROCS processes (whole host), at most FL_MAX_BINS executables
 * remembered (negative results included). What does not fit is logged and
 * counted (pushprof_cpu_frameless_skipped_total{cause}), and the process is
 * sampled as before, with plain frame-pointer stacks. Shared libraries are
 * not analysed (only /proc/PID/exe).
 *
 * Not thread-safe: the agent's loop thread only.
 */
#ifndef PUSHPROF_FRAMELESS_H
#define PUSHPROF_FRAMELESS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "err.h"

struct cpu_sampler;
struct frameless;

struct frameless_opts {
	struct cpu_sampler *cpu; /* required; must outlive the frameless */
	/* Go executables only: no C/C++ tables from .eh_frame for the others
	 * (default false: both). */
	bool go_only;
};

/* 0 with *out set; -EINVAL (no cpu) or -ENOMEM with err filled, *out NULL.
 * No thread: everything happens in frameless_track() on the caller's. */
int frameless_new(const struct frameless_opts *o, struct frameless **out, struct pp_err *err);
/* Drops the processes' entries from the BPF maps, then the state. NULL-safe. */
void frameless_free(struct frameless *f);

/*
 * pid is (still) sampled: analyse its executable unless known and install
 * its range. Cheap when nothing changed (a stat of /proc/PID/exe); a
 * process that exec'd another file is re-installed. Returns 1 when the
 * process has a table now, 0 when it needs none (not Go, no frameless
 * code) or it could not get one (logged, counted), -ESRCH when it is gone.
 */
int frameless_track(struct frameless *f, pid_t pid);
/*
 * Analyse pid's executable unless known, without installing anything: the
 * agent calls it before it allows a new target, so that the target's first
 * samples are walked with its table instead of plainly (the analysis of a
 * large binary takes a few hundred ms). 1 its executable has a table, 0
 * none, -ESRCH gone, -ENOMEM.
 */
int frameless_prepare(struct frameless *f, pid_t pid);
/* pid is no longer sampled or exited: drop its entry (no-op if none). */
void frameless_untrack(struct frameless *f, pid_t pid);

/* Processes with a table, executables with a bitmap, pool words used. */
void frameless_counts(const struct frameless *f, size_t *procs, size_t *bins, size_t *words);

#endif
