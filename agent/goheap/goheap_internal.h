/*
 * goheap_internal.h - what the goheap files share with each other and
 * with nothing else: the bucket walk (goheap_walk.c) and the profile
 * builder (goheap_pprof.c), which goheap_snapshot.c joins into one
 * streamed pass. Not an API: use goheap.h.
 */
#ifndef PUSHPROF_GOHEAP_INTERNAL_H
#define PUSHPROF_GOHEAP_INTERNAL_H

#include <stdatomic.h>
#include <time.h>

#include "goheap.h"
#include "ppclock.h"
#include "u64map.h"

/* n PCs from h's arena (freed with h). NULL when out of memory. */
uint64_t *goheap_arena_alloc(struct go_heap *h, size_t n);

/* ---- the walk (goheap_walk.c) ------------------------------------------- */

/*
 * Streaming instead of storing: each bucket goes to fn while the walk runs
 * (its stk points into the read buffer, valid during the call), so a
 * snapshot never holds all buckets at once. h keeps the metadata and the
 * count; loops are caught with a set of the buckets seen.
 */
struct goheap_stream {
	/* 0, -errno, or GOHEAP_STOP after setting h incomplete (h is the
	 * walk's: fn may mark it) to end the walk without an error. */
	int (*fn)(struct goheap_stream *st, struct go_heap *h, const struct go_bucket *b);
	/* false: loops are found with a sampled set (goheap_walk.c), and a
	 * loop makes the walk return GOHEAP_REWALK (some buckets were passed
	 * to fn twice): walk again, from a fresh consumer, with exact true
	 * (a set of every bucket: the walk stops at the first repeat). */
	bool exact;
};

#define GOHEAP_STOP 1
#define GOHEAP_REWALK 2

/* The walk's share of a budget: limits, the absolute deadline, and what
 * was spent (out). */
struct goheap_walk_budget {
	const struct goheap_budget *b;
	int64_t deadline_ns;	     /* CLOCK_MONOTONIC; 0 = none */
	const _Atomic(bool) *cancel; /* NULL = never */
	uint64_t frames, read_bytes; /* spent */
	bool cut;
};

/* st NULL: store the buckets in h (goheap_read); wb NULL: no budget.
 * Errors as goheap_read(); GOHEAP_REWALK (streamed only, see above). */
int goheap_walk(pid_t pid, const struct gobin *g, uint32_t max_buckets, uint32_t max_depth,
		struct go_heap *h, struct goheap_stream *st, struct goheap_walk_budget *wb,
		struct pp_err *err);

/* ---- the profile builder (goheap_pprof.c) ------------------------------- */

#define GOHEAP_MAX_INLINE 64

/* What we know about one PC: its innermost frame at pc-1 (a return
 * address), whether that frame is inlined, all frames (for the final
 * expansion), and whether FuncForPC(pc) is a runtime function. */
struct pcinfo {
	struct gobin_frame *fr; /* nfr frames, in the builder's frame pool */
	uint32_t nfr;
	bool runtime_at_pc;
};

/* Frames of all PCs, in chunks that never move. */
struct frame_chunk {
	struct frame_chunk *next;
	size_t used;
	struct gobin_frame v[4096];
};

struct loccache {
	uint64_t id;
	uint32_t npcs;
	uint64_t *pcs;
	struct gobin_frame first; /* innermost frame of pcs[0] */
	bool first_inlined;
};

struct goheap_builder {
	const struct gobin *g;
	struct pprof *p;
	uint64_t mapping;
	struct u64map pcmap; /* pc -> index into pcs */
	struct pcinfo *pcs;
	size_t npcs, cappcs;
	struct u64map locmap; /* first pc -> index into locs */
	/* direct-mapped front of locmap; one is the location id when that
	 * location is this one pc alone (no inlined callers merged in): the
	 * common case takes it without reading locs[li] */
	struct {
		uint64_t pc;
		uint32_t li;
		uint32_t one;
	} * lcache;
	size_t lcache_mask; /* slots - 1: grown with nlocs (goheap_pprof.c) */
	struct loccache *locs;
	size_t nlocs, caplocs;
	uint64_t goexit_pc;  /* a pc found in runtime.goexit (ends every stack), 0 */
	struct go_heap pool; /* arena for location pc lists */
	struct frame_chunk *frames;
	/* the deck: pcs merged into one location (inlining) */
	uint64_t dpcs[GOHEAP_MAX_INLINE];
	struct gobin_frame dfr[GOHEAP_MAX_INLINE];
	bool dinl[GOHEAP_MAX_INLINE];
	uint32_t nd;
	int64_t dlast; /* index in pcs of the last pc in the deck, -1 */
	int64_t rate;
	uint64_t *stkbuf; /* location ids of the sample being built */
	uint64_t max_pcs; /* budget max_locations; 0 = none */
};

struct goheap_builder_opts {
	const struct gobin *g; /* required; borrowed, must outlive the builder */
	int64_t rate;	       /* the profile's period (0: set later) */
	int64_t time_ns;       /* the profile's time (0: set later) */
};
/* An empty profile with the heap's sample types, period (rate) and time,
 * and the executable's mapping. 0 with *out set; -EINVAL (no gobin) or
 * -ENOMEM with err filled and *out NULL. Used by one thread at a time. */
int goheap_builder_new(const struct goheap_builder_opts *o, struct goheap_builder **out,
		       struct pp_err *err);
/* NULL-safe. */
void goheap_builder_free(struct goheap_builder *b);
/* One bucket with the record its view reports (writeHeapProto's loop):
 * 0, -ENOMEM, or GOHEAP_STOP when it would pass b->max_pcs (nothing added). */
int goheap_builder_add(struct goheap_builder *b, const struct go_bucket *bk,
		       const struct go_memrec *r);
/* The "pushprof go heap: ..." comment and, when incomplete, the reason. */
int goheap_builder_comments(struct goheap_builder *b, const struct go_heap *h,
			    enum goheap_view view);

#endif
