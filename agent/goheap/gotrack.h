/*
 * gotrack.h - the Go programs among the agent's targets, for heap profiles.
 *
 * The run loop reports targets as they come and go; gotrack keeps an
 * analyzed, attached gobin per Go process (non-Go executables are
 * remembered by device/inode so an exec storm of the same binary costs one
 * ELF look each), takes the periodic snapshots (go_heap.interval) and the
 * pre-OOM ones (go_heap.pressure: a memory cgroup above threshold_percent
 * of its limit, at most once per cooldown), and hands profiles to the
 * reporter given to gotrack_new() (report.h). With go_heap.enable_profiling it turns on memory profiling in Go
 * programs that have it off (MemProfileRate 0), logging each one.
 *
 * Threading: every function here is for the run loop's thread only. The
 * snapshots themselves (interval and pressure) run on one worker thread
 * of gotrack's own, started at the first snapshot, so a slow or hostile
 * target never delays CPU windows, process events or /healthz: the loop
 * queues a job (pressure ones first, with a gobin_share()d copy of the
 * process's analysis, at most one job per process at a time), the worker
 * takes the snapshot and hands the profile to the reporter (on the
 * worker thread), and the loop collects the outcomes (gotrack_fd() readable ->
 * gotrack_collect()) to apply go_heap.budget's backoff. The worker reads only the config
 * (read-only while the loop runs) and the job; gotrack_stop() joins it.
 */
#ifndef PUSHPROF_GOTRACK_H
#define PUSHPROF_GOTRACK_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "config.h"
#include "goheap.h"
#include "report.h"

struct gotrack;

struct oom_watch;

struct gotrack_opts {
	const struct config *cfg; /* required; must outlive the gotrack */
	/* Where finished profiles go, called on the worker thread (copied;
	 * rep.arg must outlive gotrack_stop()). Required. */
	struct pp_reporter rep;
};

/* 0 with *out set; -EINVAL (no cfg or reporter), -ENOMEM, or eventfd's
 * error, with err filled and *out NULL. The worker thread is started on
 * the first snapshot, not here. */
int gotrack_new(const struct gotrack_opts *o, struct gotrack **out, struct pp_err *err);
/* Also hand every newly tracked Go process to the OOM watcher (go_heap.on_oom). */
void gotrack_set_oom(struct gotrack *t, struct oom_watch *w);
/* Cancels a snapshot under way (it stops within a few buckets) and joins
 * the worker; queued jobs are dropped. Call before the reporter's target
 * goes away.
 * gotrack_free() does it too. */
void gotrack_stop(struct gotrack *t);
void gotrack_free(struct gotrack *t);

/* A target appeared: returns 1 when it is a Go program now tracked, 0 when
 * not Go (or already tracked), negative on errors worth a log line. */
int gotrack_add(struct gotrack *t, pid_t pid);
void gotrack_remove(struct gotrack *t, pid_t pid);
/* Targets only report changes of their matched state, so a target that
 * execs stays silent: look again at the targets that were not Go and at
 * the tracked ones, and analyze those whose executable changed. A stat per
 * process; the run loop calls it after process events and every scan. */
void gotrack_recheck(struct gotrack *t);
/* go_heap.enable_profiling waits until a new process's Go runtime has
 * initialized (it assigns MemProfileRate itself) and then verifies the
 * write: the mono time gotrack_recheck() has such work due, UINT64_MAX if
 * none. */
uint64_t gotrack_due(const struct gotrack *t);
/* Whole-host mode (no targets: the target set reports no changes): the
 * target scanner's observer hands over every process it evaluates; a Go
 * one not tracked yet is tracked (not-Go executables are cached, so this is
 * a stat per process and nothing is remembered for not-Go ones). Returns
 * 1 when newly tracked. */
int gotrack_consider(struct gotrack *t, pid_t pid);
size_t gotrack_count(const struct gotrack *t);

/* Queue one snapshot of every tracked process (trigger "interval") for the
 * worker, except those backed off after a snapshot over go_heap.budget
 * (counted in pushprof_go_heap_snapshots_backed_off_total) and those whose
 * previous job is not done. */
void gotrack_snapshot_all(struct gotrack *t);
/* Readable (eventfd) when the worker has finished jobs: a pressure job as
 * soon as it is done, interval jobs when the queue has run empty (or is
 * half full), so that one interval wakes the loop once, not per process. */
int gotrack_fd(const struct gotrack *t);
/* Apply finished jobs: drop processes found gone, back off those cut by
 * the budget (backoff, doubling per consecutive cut up to 8x; logged at
 * the first cut, counted in pushprof_go_heap_budget_exceeded_total), clear
 * the backoff after a complete one. Returns how many jobs finished (their
 * profiles are already reported); *urgent (may be NULL) how many of
 * them were not periodic (pressure: to be pushed at once). */
size_t gotrack_collect(struct gotrack *t, size_t *urgent);
/* go_heap.budget as goheap_snapshot() takes it. */
struct goheap_budget gotrack_budget(const struct go_heap_config *gh);
/* Poll memory cgroups; queue snapshots (trigger "pressure", even of
 * processes backed off) of those above threshold. Returns how many were
 * queued. */
int gotrack_check_pressure(struct gotrack *t, uint64_t now_ns);

/* Memory cgroup usage and limit of a process (v2 memory.current/max, else
 * v1 memory.usage_in_bytes/limit_in_bytes). limit UINT64_MAX = unlimited. */
int gotrack_memcg_usage(pid_t pid, uint64_t *usage, uint64_t *limit);

#endif
