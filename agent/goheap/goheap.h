/*
 * goheap.h - a Go program's heap profile, read from outside the process.
 *
 * Three steps, usable separately:
 *   1. goheap_read(): walk runtime.mbuckets -> allnext with
 *      process_vm_readv (remotemem.h; or the gobin's struct gobin_mem, the
 *      seam the fuzz target uses) into a struct go_heap (raw buckets, nothing
 *      interpreted yet). Producers that obtain buckets another way (the
 *      OOM capture reads them from BPF) fill a go_heap with
 *      goheap_add_bucket() instead.
 *   2. goheap_to_pprof(): the profile runtime/pprof.WriteHeapProfile would
 *      write (writeHeapProto): sample types alloc_objects/count,
 *      alloc_space/bytes, inuse_objects/count, inuse_space/bytes, period
 *      space/bytes = MemProfileRate, values through scaleHeapSample,
 *      numeric label "bytes", frames at pc-1 with inlined frames, leading
 *      runtime.* frames hidden.
 *   3. goheap_series_labels(): the series labels of such a profile.
 * goheap_snapshot() does all three for one pid (on-demand and periodic).
 *
 * Files: goheap_walk.c (the walk, go_heap, views), goheap_scale.c (Go's
 * scaleHeapSample), goheap_pprof.c (the profile builder),
 * goheap_snapshot.c (the streamed snapshot, labels). Buckets are decoded
 * by gobucket.c (the layout: bpf/golayout.h), target memory read by
 * remotemem.c.
 *
 * Views: the runtime keeps per bucket an `active` record (what it
 * publishes) and three `future` cycles not yet published.
 *   GOHEAP_VIEW_RUNTIME: exactly what runtime.MemProfile reports at that
 *     instant: active + future[C % 3] (the flush MemProfile performs), and
 *     when no bucket has any active data (no GC yet) all futures.
 *   GOHEAP_VIEW_LATEST: active + all three futures (the newest allocations
 *     included; what an OOM capture wants).
 *
 * Target memory is hostile: the walk is bounded by max_buckets, loops are
 * cut at the first repeated bucket (Brent's cycle detection for a stored
 * walk; for a streamed snapshot a sampled seen-set, and a second, exact
 * walk only when a loop was met: goheap_walk.c), nstk above
 * GOHEAP_NSTK_LIMIT stops the walk, stacks deeper than max_depth are
 * truncated (counted), and goheap_snapshot() also
 * bounds the product (struct goheap_budget: frames, distinct PCs, bytes
 * read, wall time). A walk that stops early still returns what it read,
 * with complete = false and the reason.
 */
#ifndef PUSHPROF_GOHEAP_H
#define PUSHPROF_GOHEAP_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "err.h"
#include "gobin.h"
#include "gobucket.h"
#include "labels.h"

struct pprof;

/* Go records at most 32 frames up to 1.22, at most 1024 from 1.23 on
 * (golayout.h). */
#define GOHEAP_NSTK_LIMIT GO_MAX_STACK

/* goheap_read()/goheap_snapshot() return this when MemProfileRate is 0
 * and there are no buckets: "memory profiling disabled". */
#define GOHEAP_EDISABLED (-EOPNOTSUPP)

enum goheap_view { GOHEAP_VIEW_RUNTIME, GOHEAP_VIEW_LATEST };

const char *goheap_view_name(enum goheap_view v); /* "runtime" | "latest" */
int goheap_view_parse(const char *s, enum goheap_view *v);

struct go_bucket {
	uint64_t addr;	/* the bucket's address in the target (identity) */
	uint64_t size;	/* allocation size: buckets are keyed by stack and size */
	uint32_t nstk;	/* PCs kept in stk (<= max_depth) */
	bool truncated; /* the bucket had more than max_depth PCs */
	uint64_t *stk;	/* return PCs, runtime addresses, leaf first */
	struct go_memrec active, future[3];
};

struct goheap_arena;

struct go_heap {
	struct go_bucket *buckets;
	size_t n, cap;
	bool buckets_mapped; /* grow.h: pp_grow_big */
	int64_t rate;	/* runtime.MemProfileRate at read time */
	uint32_t cycle; /* raw runtime.mProfCycle (cycle << 1 | flushed) */
	bool complete;
	char incomplete_reason[192]; /* "" when complete */
	uint64_t truncated_stacks;   /* buckets whose stack was cut at max_depth */
	int64_t time_ns;	     /* CLOCK_REALTIME at the start of the read */
	int64_t duration_ns;	     /* how long the read took */
	uint64_t remote_reads;	     /* process_vm_readv calls (for measurement) */
	struct goheap_arena *arena;  /* owns the stacks */
};

void goheap_init(struct go_heap *h);
void goheap_free(struct go_heap *h);
/* Mark the heap incomplete (first reason wins). */
void goheap_set_incomplete(struct go_heap *h, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Copies stk (at most max_depth PCs are the caller's business). -ENOMEM. */
int goheap_add_bucket(struct go_heap *h, uint64_t addr, uint64_t size, const uint64_t *stk,
		      uint32_t nstk, bool truncated, const struct go_memrec *active,
		      const struct go_memrec future[3]);

/*
 * Read the buckets of an attached gobin's process. Returns 0 with
 * h->complete possibly false; GOHEAP_EDISABLED (rate 0, no buckets);
 * -ESRCH when the process is gone before anything could be read;
 * -EACCES/-EPERM; -ENOENT when the gobin lacks the variables.
 * h must be goheap_init()ed; on error it holds no buckets.
 */
int goheap_read(pid_t pid, const struct gobin *g, uint32_t max_buckets, uint32_t max_depth,
		struct go_heap *h, struct pp_err *err);

/* The record a view reports for one bucket (see above). `all_clear` is
 * goheap_all_active_clear(h), computed once per heap. */
bool goheap_all_active_clear(const struct go_heap *h);
struct go_memrec goheap_bucket_record(const struct go_heap *h, const struct go_bucket *b,
				      enum goheap_view view, bool all_clear);

/* runtime/pprof's scaleHeapSample, with math.Exp computed bit for bit as
 * Go does on amd64 (goheap_go_exp), so values match Go's own profile. */
void goheap_scale_heap_sample(int64_t count, int64_t size, int64_t rate, int64_t *count_out,
			      int64_t *size_out);
double goheap_go_exp(double x);

/*
 * Build the profile. g symbolizes the PCs (its bias must be right for the
 * process the buckets came from). Comments carry the view and, when
 * incomplete, the reason. *out is the caller's (pprof_free).
 */
int goheap_to_pprof(const struct go_heap *h, const struct gobin *g, enum goheap_view view,
		    struct pprof **out, struct pp_err *err);

/*
 * __name__=memory, node, pid, comm, executable, cgroup, trigger, view, then
 * the external labels (which do not override those). comm/cgroup are read
 * from /proc now ("" when the process is gone). out must be empty.
 */
int goheap_series_labels(pid_t pid, const struct gobin *g, const char *node, const char *trigger,
			 enum goheap_view view, const struct pp_labels *external,
			 struct pp_labels *out, struct pp_err *err);

/*
 * What one snapshot may cost (go_heap.budget), whatever the target's
 * bucket list claims: max_buckets and max_depth alone still allow
 * 100,000 x 128 distinct PCs (GBs, tens of seconds). A zero field means no
 * limit. Past a limit the walk stops, the profile keeps what was read and
 * is flagged incomplete with a reason starting "budget:" (and
 * goheap_snapshot.budget_cut is set, so callers can back off).
 *   max_frames: PCs kept over all buckets (the sample data, ~8 B each);
 *   max_locations: distinct PCs symbolized (pcinfo, frames, locations:
 *     ~200 B each);
 *   max_read_bytes: bytes asked of process_vm_readv (the read time);
 *   max_duration_ns: wall time of the whole snapshot (both walks when the
 *     runtime view needs a second one), checked every few buckets.
 */
struct goheap_budget {
	uint64_t max_frames, max_locations, max_read_bytes, max_duration_ns;
};

/* The same limits for a heap held whole (an OOM capture, built with
 * goheap_to_pprof()): keeps the longest prefix of buckets within
 * max_frames and max_locations (max_read_bytes and max_duration do not
 * apply) and marks h incomplete with a "budget:" reason. Returns 1 when
 * it cut, 0 when not, -ENOMEM. NULL or zeroed b: no limit. */
int goheap_apply_budget(struct go_heap *h, const struct goheap_budget *b);

struct goheap_snapshot_opts {
	enum goheap_view view;
	uint32_t max_buckets, max_depth;
	struct goheap_budget budget; /* zeroed: unlimited (tests, goheap_tool) */
	/* When set and true, the walk stops within a few buckets (agent
	 * shutdown), the profile flagged incomplete; NULL = never. */
	const _Atomic(bool) *cancel;
	const char *trigger; /* "on_demand" | "interval" | ... */
	const char *node;
	const struct pp_labels *external; /* may be NULL */
};

struct goheap_snapshot {
	uint8_t *gz; /* gzip'd pprof, malloc'd */
	size_t len;
	struct pp_labels labels;
	size_t buckets, samples;
	bool complete;
	bool budget_cut; /* cut by opts.budget (reason starts "budget:") */
	char incomplete_reason[192];
	uint64_t truncated_stacks;
	uint64_t frames, locations; /* PCs kept, distinct PCs symbolized */
	uint64_t read_bytes;	    /* asked of process_vm_readv */
	int64_t rate;
	int64_t read_ns;  /* the walk, which streams into the profile builder */
	int64_t total_ns; /* + encoding, gzip and labels */
};

/* Read + profile + labels for one attached gobin. The buckets stream into
 * the profile builder as they are read (no go_heap is held), and its
 * samples into gzip as they are made (pprof_stream_gzip: one sample per
 * bucket, as runtime/pprof writes, none held whole). Errors as
 * goheap_read(). Thread-safe, and serialized: one snapshot at a time in
 * the process (the HTTP snapshot thread and gotrack's worker wait for each
 * other), so one budget is also the agent's peak for snapshots; a wait
 * lasts at most the other snapshot's max_duration. */
int goheap_snapshot(pid_t pid, const struct gobin *g, const struct goheap_snapshot_opts *o,
		    struct goheap_snapshot *out, struct pp_err *err);
void goheap_snapshot_free(struct goheap_snapshot *s);

#endif
