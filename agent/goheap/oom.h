/*
 * oom.h - Go heap profiles of processes the kernel OOM-kills.
 *
 * The watcher loads bpf/oom.bpf.c and keeps, per tracked Go process, what
 * the BPF side needs (runtime.mbuckets address, max buckets/depth) plus a
 * user-space mirror of the bucket headers and stacks: these never change
 * once created, so at OOM time the BPF walk only copies 32 bytes of
 * counters per mirrored bucket. Kernel memory at 1,000,000 buckets: the
 * ring buffer, 32 MiB (1M x 32 B of counters + 3,907 chunk headers fit
 * even if the consumer made no progress) + per-CPU scratch (16.8 KB per
 * possible CPU) + targets (4,096 x 56 B values, preallocated) + victims
 * (256 x 200 B) - 32.5 MiB in all, <= 64 MiB. The ring is sized
 * max_buckets x 32 B + 1 MiB rounded up to a power of two, capped at
 * 32 MiB (8 MiB for the default 100,000). Measured here: 1,000,095
 * buckets captured complete in 130-175 ms, 100,072 in 13-20 ms, 10,053 in
 * 1.4-2.3 ms (2 shared cores, other work running).
 * User space pays for the mirror instead: ~(32 + 8 x depth) B per bucket,
 * at most max_frames x 8 B + max_buckets x 32 B per process
 * (243 MiB RSS at 1M buckets of ~13 frames; building the 1M-bucket profile
 * through goheap then peaks at ~970 MiB).
 * Buckets created since the last catch-up (every 200 ms) are copied whole
 * (80 B + 8 B per frame); a burst the ring cannot hold makes the profile
 * incomplete (ring_full) - never silently short.
 *
 * A thread owned by the watcher consumes the ring buffer, keeps the mirrors
 * current and turns every victim into exactly one oom_result: a profile
 * (complete or not, with the reason) or an event saying why there is none.
 * The caller drains results from its own loop (oom_watch_fd() becomes
 * readable when some are ready): oom_watch_deliver() hands each profile to
 * the reporter given in oom_watch_opts (durable: the agent's writes it to
 * disk before any network call), or oom_watch_take() hands over the
 * results themselves.
 *
 * Files: oom.c (lifecycle), oom_mirror.c (mirrors), oom_capture.c
 * (captures -> results); the bucket layout is bpf/golayout.h's.
 *
 * Several victims at once are fine: BPF state is per victim tgid and the
 * ring buffer is shared.
 */
#ifndef PUSHPROF_OOM_H
#define PUSHPROF_OOM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "err.h"
#include "goheap.h"
#include "labels.h"
#include "report.h"

struct oom_watch;

struct oom_watch_opts {
	uint32_t max_buckets;	  /* go_heap.max_buckets (clamped to 8,388,608) */
	uint32_t max_stack_depth; /* go_heap.max_stack_depth (<= 1024) */
	/* go_heap.budget.oom_max_frames: PCs one process's mirror may hold
	 * (~8 B each, and as much again while a batch is read); past it the
	 * mirror keeps the newest buckets that fit, captures end there and
	 * are incomplete ("budget_max_frames"). 0 = no limit. */
	uint64_t max_frames;
	/* go_heap.budget: bounds building a capture's profile (max_frames and
	 * max_locations; past them "budget_profile"). Zeroed = no limit. */
	struct goheap_budget budget;
	uint32_t max_targets;		      /* tracked processes; 0 -> 4096 */
	uint64_t ring_bytes;		      /* 0 -> sized from max_buckets (<= 32 MiB) */
	uint64_t mirror_interval_ns;	      /* mirror catch-up period; 0 -> 200 ms */
	bool enable_profiling;		      /* go_heap.enable_profiling: rate 0 -> 512 KiB */
	bool exit_hook_only;		      /* tests: capture at sched_process_exit only */
	const char *node;		      /* label `node`; NULL -> hostname */
	const struct pp_labels *extra_labels; /* copied onto every profile */
	/* Where oom_watch_deliver() hands profiles (durable = true); fn NULL:
	 * results are only taken with oom_watch_take(). */
	struct pp_reporter report;
};

/* What came of one OOM kill. */
enum oom_outcome {
	OOM_OUT_PROFILE = 1, /* gz/labels set; complete says whether whole */
	OOM_OUT_EVENT,	     /* no profile: reason says why */
};

struct oom_result {
	enum oom_outcome outcome;
	pid_t pid, tid;
	uint64_t capture_id;
	char comm[16];
	char exe[4096]; /* "" when the victim was not tracked */
	char cgroup[1024];
	uint32_t flags; /* enum oom_flag (bpf/oom_abi.h) */
	bool complete;
	char reason[256]; /* comma-separated; "" when complete */
	/* from oom:mark_victim, kB */
	uint64_t total_vm_kb, anon_rss_kb, file_rss_kb, shmem_rss_kb, pgtables_kb;
	uint32_t uid;
	int oom_score_adj;
	/* the walk */
	int64_t rate; /* MemProfileRate read at capture, -1 unknown */
	uint64_t buckets, new_buckets, dropped;
	uint64_t absent_records;     /* records partly on absent pages: read as zeros */
	uint64_t capture_ns;	     /* bpf_ktime_get_ns end - start */
	uint64_t mark_to_capture_ns; /* mark_victim -> walk start */
	/* OOM_OUT_PROFILE */
	struct pp_labels labels; /* __name__=memory, trigger=oom, ... */
	uint8_t *gz;
	size_t gz_len;
};

/* Needs CAP_BPF/CAP_PERFMON (root). Starts the consumer thread. */
int oom_watch_new(const struct oom_watch_opts *opts, struct oom_watch **out, struct pp_err *err);
void oom_watch_free(struct oom_watch *w);

/*
 * Track a Go process: analyze its executable, mirror its buckets, publish
 * it to BPF. -ENOEXEC: not Go; -ENOENT: profile variables not found;
 * -ESRCH: gone. A process with MemProfileRate 0 is tracked anyway (its
 * OOM gives an explicit event) unless enable_profiling is set: then the
 * rate is written into it and 1 is returned, so the caller can log that it
 * changed the process. Tracking an already tracked pid is a no-op (0).
 * Untracking happens by itself when the process exits.
 */
int oom_watch_track(struct oom_watch *w, pid_t pid, struct pp_err *err);
/* The same with an analysis of the executable already at hand (shared, not
 * re-read: gobin_share). */
struct gobin;
int oom_watch_track_shared(struct oom_watch *w, pid_t pid, const struct gobin *shared,
			   struct pp_err *err);
void oom_watch_untrack(struct oom_watch *w, pid_t pid);
bool oom_watch_tracked(struct oom_watch *w, pid_t pid);
size_t oom_watch_ntracked(struct oom_watch *w);

/* Readable (eventfd) when results are waiting. */
int oom_watch_fd(const struct oom_watch *w);
/* Move out up to max finished results; returns how many. Free each with
 * oom_result_free(). */
size_t oom_watch_take(struct oom_watch *w, struct oom_result **out, size_t max);
void oom_result_free(struct oom_result *r);

/*
 * What the agent loop calls when oom_watch_fd() is readable: every waiting
 * result is handed over - a profile to opts.report with durable = true
 * (the agent's writes it to the local store and spool before any network
 * call), an event as a WARN log line (and both counted). Runs on the
 * caller's thread. Returns the number of results handled; err holds the
 * last report failure (results are never kept back for retry: delivery
 * owns retries).
 */
int oom_watch_deliver(struct oom_watch *w, struct pp_err *err);

struct oom_watch_stats {
	uint64_t marks, dup_marks, captures, ring_drops, victims_full;
	uint64_t profiles, events;
	uint64_t delivered, deliver_failed; /* by oom_watch_deliver() */
	uint64_t kernel_bytes;		    /* ring + maps, as sized at load */
	uint64_t mirrored_buckets;	    /* over all tracked processes */
};
void oom_watch_stats(struct oom_watch *w, struct oom_watch_stats *st);

/* Reason text for one flag ("bucket_limit", ...); NULL for unknown bits. */
const char *oom_flag_name(uint32_t flag);

/* Set this process's /proc/self/oom_score_adj (-1000..1000), so the agent
 * is not the one killed. The run loop calls it with config oom_score_adj. */
int oom_protect_self(int score_adj, struct pp_err *err);

#endif
