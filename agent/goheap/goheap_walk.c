/*
 * goheap_walk.c - a live Go program's runtime.mbuckets list, read from
 * outside: the walk (bounded, loop-proof, budgeted; buckets decoded by
 * gobucket.c through a cached remotemem reader), the go_heap that stores
 * what it read, and the two views of a bucket's counters (goheap.h). The
 * profile is goheap_pprof.c's; the streamed snapshot goheap_snapshot.c's.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "gobucket.h"
#include "grow.h"
#include "goheap_internal.h"
#include "remotemem.h"

#define ARENA_CHUNK (64u << 10) /* PCs per arena chunk */

const char *goheap_view_name(enum goheap_view v)
{
	return v == GOHEAP_VIEW_LATEST ? "latest" : "runtime";
}

int goheap_view_parse(const char *s, enum goheap_view *v)
{
	if (!strcmp(s, "runtime"))
		*v = GOHEAP_VIEW_RUNTIME;
	else if (!strcmp(s, "latest"))
		*v = GOHEAP_VIEW_LATEST;
	else
		return -EINVAL;
	return 0;
}

/* ---- go_heap storage -------------------------------------------------- */

struct arena_chunk {
	struct arena_chunk *next;
	size_t used;
	uint64_t v[];
};

struct goheap_arena {
	struct arena_chunk *head;
};

uint64_t *goheap_arena_alloc(struct go_heap *h, size_t n)
{
	if (!h->arena && !(h->arena = calloc(1, sizeof(*h->arena))))
		return NULL;
	struct arena_chunk *c = h->arena->head;
	if (!c || ARENA_CHUNK - c->used < n) {
		size_t cap = n > ARENA_CHUNK ? n : ARENA_CHUNK;
		c = malloc(sizeof(*c) + cap * sizeof(uint64_t));
		if (!c)
			return NULL;
		c->used = 0;
		c->next = h->arena->head;
		h->arena->head = c;
		if (n > ARENA_CHUNK) { /* exactly full: next alloc gets a new chunk */
			c->used = n;
			return c->v;
		}
	}
	uint64_t *p = c->v + c->used;
	c->used += n;
	return p;
}

void goheap_init(struct go_heap *h)
{
	memset(h, 0, sizeof(*h));
	h->complete = true;
}

void goheap_free(struct go_heap *h)
{
	if (h->arena) {
		struct arena_chunk *c = h->arena->head;
		while (c) {
			struct arena_chunk *n = c->next;
			free(c);
			c = n;
		}
		free(h->arena);
	}
	pp_free_big(h->buckets, h->cap, sizeof(*h->buckets), h->buckets_mapped);
	goheap_init(h);
}

void goheap_set_incomplete(struct go_heap *h, const char *fmt, ...)
{
	if (!h->complete)
		return;
	h->complete = false;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(h->incomplete_reason, sizeof(h->incomplete_reason), fmt, ap);
	va_end(ap);
}

int goheap_add_bucket(struct go_heap *h, uint64_t addr, uint64_t size, const uint64_t *stk,
		      uint32_t nstk, bool truncated, const struct go_memrec *active,
		      const struct go_memrec future[3])
{
	/* grow.h: small heaps in malloc's heap, large ones mremap'd */
	if (pp_grow_big(&h->buckets, &h->cap, &h->buckets_mapped, h->n + 1, sizeof(*h->buckets),
			64))
		return -ENOMEM;
	uint64_t *s = NULL;
	if (nstk) {
		s = goheap_arena_alloc(h, nstk);
		if (!s)
			return -ENOMEM;
		memcpy(s, stk, nstk * sizeof(*s));
	}
	struct go_bucket *b = &h->buckets[h->n++];
	b->addr = addr;
	b->size = size;
	b->nstk = nstk;
	b->truncated = truncated;
	b->stk = s;
	b->active = *active;
	memcpy(b->future, future, sizeof(b->future));
	if (truncated)
		h->truncated_stacks++;
	return 0;
}

/* ---- the walk ----------------------------------------------------------- */

/* A loop was found (or may hide behind the bucket limit): keep each bucket
 * once (the list repeats from the first bucket seen twice on). Returns
 * whether anything was cut. */
static bool drop_repeats(struct go_heap *h)
{
	struct u64map seen;
	bool cut = false;
	if (u64map_init(&seen, h->n))
		return false;
	for (size_t i = 0; i < h->n; i++) {
		if (u64map_get(&seen, h->buckets[i].addr, NULL) ||
		    u64map_put(&seen, h->buckets[i].addr, 1)) {
			for (size_t j = i; j < h->n; j++)
				if (h->buckets[j].truncated)
					h->truncated_stacks--;
			h->n = i;
			cut = true;
			break;
		}
	}
	u64map_free(&seen);
	return cut;
}

#define BUDGET_CHECK_EVERY 64 /* buckets between clock reads */

/*
 * Streamed loops without a set of every bucket (100,000 buckets made it
 * 3 MB of hash table, touched anew each snapshot): every LOOP_SAMPLE-th
 * bucket goes into a small set. A list that closes a loop at step r (its
 * first repeat) revisits a sampled bucket by step r + LOOP_SAMPLE - 1: the
 * first sampled step j >= the loop's start is within LOOP_SAMPLE of it and
 * comes round again one loop length later. By then up to LOOP_SAMPLE - 1
 * repeats were streamed, so the walk returns GOHEAP_REWALK and the caller
 * walks again with st->exact (the set of every bucket: the walk stops at
 * the first repeat). A walk that stops for another reason (the bucket
 * limit, a budget) first follows up to LOOP_SAMPLE - 1 more allnext
 * pointers (8-byte reads), so a loop closed before the stop is still found
 * and the result is the exact walk's. Loops are a hostile target's: a Go
 * runtime's list never loops, and then the sampled set is all it costs.
 */
#define LOOP_SAMPLE 32

/* In front of the set, a bit per hash of each bucket put in it: most
 * buckets are answered by one bit of 8 KiB instead of a probe of the
 * set's table (that probe missed the cache on each of 100,000 buckets:
 * the window copies sweep it out). */
#define SEEN_BITS (1u << 16)

static inline uint32_t seen_bit(uint64_t b)
{
	return (uint32_t)((b * 0x9e3779b97f4a7c15ull) >> 48);
}

static inline bool seen_maybe(const uint64_t *bits, uint64_t b)
{
	uint32_t i = seen_bit(b);
	return bits[i >> 6] >> (i & 63) & 1;
}

/* From b (the walk's step `step`, already checked): does the list repeat
 * a sampled bucket within LOOP_SAMPLE - 1 more steps? */
static bool loop_ahead(struct rmem *rd, struct u64map *seen, uint64_t b, uint64_t step)
{
	for (uint64_t i = 1; i < LOOP_SAMPLE && b; i++) {
		uint64_t next;
		if (b & 7 || rmem_read(rd, b + GO_BUCKET_ALLNEXT, &next, sizeof(next), NULL))
			return false;
		if (next && u64map_get(seen, next, NULL))
			return true;
		if ((step + i) % LOOP_SAMPLE == 0 && next && u64map_put(seen, next, 1))
			return false;
		b = next;
	}
	return false;
}

int goheap_walk(pid_t pid, const struct gobin *g, uint32_t max_buckets, uint32_t max_depth,
		struct go_heap *h, struct goheap_stream *st, struct goheap_walk_budget *wb,
		struct pp_err *err)
{
	int rc;
	uint64_t head;
	int64_t t0 = pp_clock_ns(CLOCK_MONOTONIC);

	h->time_ns = pp_clock_ns(CLOCK_REALTIME);
	if (!g->mbuckets_addr || !g->rate_addr || !g->cycle_addr)
		return pp_errf(err, -ENOENT,
			       "%s: the runtime's memory-profile variables are not "
			       "located",
			       g->exe);
	if ((rc = gobin_read_rate(g, &h->rate, err)) ||
	    (rc = gobin_read_cycle(g, &h->cycle, err)) || (rc = gobin_read_mbuckets(g, &head, err)))
		return rc;
	if (h->rate == 0 && head == 0)
		return pp_errf(err, GOHEAP_EDISABLED,
			       "pid %d: memory profiling disabled (runtime.MemProfileRate is 0: "
			       "the program references no heap profile; go_heap.enable_profiling "
			       "or --enable-profiling turns it on for later allocations)",
			       (int)pid);
	if (max_depth == 0 || max_depth > GOHEAP_NSTK_LIMIT)
		max_depth = GOHEAP_NSTK_LIMIT;
	if (max_buckets == 0)
		max_buckets = 1;

	struct rmem rd;
	rmem_init(&rd, g->mem, pid, true);
	uint64_t *buf = malloc(GOBUCKET_BUF_WORDS * sizeof(uint64_t));
	if (!buf)
		return -ENOMEM;
	/* Loops: stored, Brent's cycle detection costs nothing per bucket and
	 * once it fires the repeated tail is cut exactly (drop_repeats);
	 * streamed, nothing can be taken back: a set of the buckets seen. */
	uint64_t saved = 0, power = 1, lam = 0, step = 0, stop_at = 0;
	struct u64map seen = { 0 };
	uint64_t *seen_bits = NULL;
	bool exact = st && st->exact;
	if (st && (u64map_init(&seen, exact ? 4096 : 256) ||
		   !(seen_bits = calloc(SEEN_BITS / 64, sizeof(uint64_t))))) {
		u64map_free(&seen);
		free(buf);
		return -ENOMEM;
	}
	rc = 0;
	for (uint64_t b = head; b; step++) {
		if (st) {
			if (seen_maybe(seen_bits, b) && u64map_get(&seen, b, NULL)) {
				if (!exact) {
					rc = GOHEAP_REWALK;
					break;
				}
				goheap_set_incomplete(h, "the bucket list loops (at 0x%" PRIx64 ")",
						      b);
				break;
			}
			if (exact || step % LOOP_SAMPLE == 0) {
				if ((rc = u64map_put(&seen, b, 1)))
					break;
				uint32_t i = seen_bit(b);
				seen_bits[i >> 6] |= 1ull << (i & 63);
			}
			stop_at = b; /* the walk stops here unless it goes on */
		} else if (b == saved) {
			drop_repeats(h);
			goheap_set_incomplete(h, "the bucket list loops (at 0x%" PRIx64 ")", b);
			break;
		}
		if (++lam == power) {
			saved = b;
			power <<= 1;
			lam = 0;
		}
		if (h->n >= max_buckets) {
			/* Brent needs up to twice the loop to see it: a loop longer
			 * than half the limit ends here, with repeats to cut. */
			if (!st && drop_repeats(h))
				goheap_set_incomplete(h, "the bucket list loops");
			else
				goheap_set_incomplete(h,
						      "more than go_heap.max_buckets (%" PRIu32
						      ") buckets: the rest were not read",
						      max_buckets);
			break;
		}
		if (b & 7) {
			goheap_set_incomplete(h, "misaligned bucket pointer 0x%" PRIx64, b);
			break;
		}
		if (wb && wb->b->max_read_bytes && rd.bytes > wb->b->max_read_bytes) {
			wb->cut = true;
			goheap_set_incomplete(
				h,
				"budget: more than go_heap.budget.max_read_bytes (%" PRIu64
				") read after %zu buckets: the rest were not "
				"read",
				wb->b->max_read_bytes, h->n);
			break;
		}
		if (wb && wb->cancel && h->n % BUDGET_CHECK_EVERY == 0 &&
		    atomic_load_explicit(wb->cancel, memory_order_relaxed)) {
			goheap_set_incomplete(h, "cancelled (the agent is stopping)");
			break;
		}
		if (wb && wb->deadline_ns && h->n % BUDGET_CHECK_EVERY == 0 &&
		    pp_clock_ns(CLOCK_MONOTONIC) > wb->deadline_ns) {
			wb->cut = true;
			goheap_set_incomplete(h,
					      "budget: go_heap.budget.max_duration (%" PRIu64
					      " ms) over after %zu buckets: the rest were not read",
					      wb->b->max_duration_ns / 1000000, h->n);
			break;
		}
		struct gobucket gb;
		struct pp_err berr; /* 516 bytes: not cleared per bucket */
		berr.code = 0;
		berr.msg[0] = '\0';
		int r = gobucket_read(&rd, b, max_depth, true, buf, &gb, &berr);
		if (r == -ESRCH) {
			if (h->n == 0) {
				rc = pp_errf(err, -ESRCH, "pid %d: the process exited", (int)pid);
				break;
			}
			goheap_set_incomplete(h, "the process exited during the read");
			break;
		}
		if (r == -ENOMEM) {
			rc = r;
			break;
		}
		if (r) { /* not a bucket, or not readable: berr says which */
			goheap_set_incomplete(h, "%s", berr.msg);
			break;
		}
		bool trunc = gb.nstk > max_depth;
		uint64_t keep = gb.nkept;
		if (wb && wb->b->max_frames && wb->frames + keep > wb->b->max_frames) {
			wb->cut = true;
			goheap_set_incomplete(
				h,
				"budget: more than go_heap.budget.max_frames (%" PRIu64
				") frames after %zu buckets: the rest were not read",
				wb->b->max_frames, h->n);
			break;
		}
		if (wb)
			wb->frames += keep;
		if (st) {
			struct go_bucket bk = { .addr = b,
						.size = gb.size,
						.nstk = gb.nkept,
						.truncated = trunc,
						.stk = (uint64_t *)gb.stk,
						.active = gb.active };
			memcpy(bk.future, gb.future, sizeof(bk.future));
			h->n++;
			h->truncated_stacks += trunc;
			if ((rc = st->fn(st, h, &bk))) {
				if (rc == GOHEAP_STOP) {
					h->n--;
					h->truncated_stacks -= trunc;
					if (wb) {
						wb->frames -= keep;
						wb->cut = true;
					}
					rc = 0;
				}
				break;
			}
		} else if ((rc = goheap_add_bucket(h, b, gb.size, gb.stk, gb.nkept, trunc,
						   &gb.active, gb.future))) {
			break;
		}
		b = gb.allnext;
		stop_at = 0;
	}
	/* Stopped early (not at the list's end, not at a loop): a loop closed
	 * just before is found by looking a few buckets ahead. */
	if (st && !exact && !rc && stop_at && loop_ahead(&rd, &seen, stop_at, step))
		rc = GOHEAP_REWALK;
	u64map_free(&seen);
	free(seen_bits);
	if (wb)
		wb->read_bytes += rd.bytes;
	h->remote_reads = rd.calls + 3;
	h->duration_ns = pp_clock_ns(CLOCK_MONOTONIC) - t0;
	rmem_free(&rd);
	free(buf);
	if (rc) {
		goheap_free(h);
		if (rc == -ENOMEM)
			pp_errf(err, rc, "out of memory reading the buckets");
		return rc;
	}
	return 0;
}

int goheap_read(pid_t pid, const struct gobin *g, uint32_t max_buckets, uint32_t max_depth,
		struct go_heap *h, struct pp_err *err)
{
	return goheap_walk(pid, g, max_buckets, max_depth, h, NULL, NULL, err);
}

int goheap_apply_budget(struct go_heap *h, const struct goheap_budget *b)
{
	struct u64map pcs = { 0 };
	uint64_t frames = 0;
	size_t i;
	int cut = 0;

	if (!b || (!b->max_frames && !b->max_locations))
		return 0;
	if (b->max_locations && u64map_init(&pcs, 4096))
		return -ENOMEM;
	for (i = 0; i < h->n && !cut; i++) {
		const struct go_bucket *bk = &h->buckets[i];
		if (b->max_frames && frames + bk->nstk > b->max_frames) {
			goheap_set_incomplete(
				h,
				"budget: more than go_heap.budget.max_frames (%" PRIu64
				") frames after %zu buckets: the rest were left out",
				b->max_frames, i);
			cut = 1;
			break;
		}
		frames += bk->nstk;
		for (uint32_t k = 0; b->max_locations && k < bk->nstk; k++) {
			if (u64map_get(&pcs, bk->stk[k], NULL))
				continue;
			if (pcs.n >= b->max_locations) {
				goheap_set_incomplete(
					h,
					"budget: more than go_heap.budget.max_locations (%" PRIu64
					") distinct PCs after %zu buckets: the "
					"rest were left out",
					b->max_locations, i);
				cut = 1;
				break;
			}
			if (u64map_put(&pcs, bk->stk[k], 1)) {
				u64map_free(&pcs);
				return -ENOMEM;
			}
		}
		if (cut)
			break;
	}
	if (cut) {
		for (size_t j = i; j < h->n; j++)
			if (h->buckets[j].truncated)
				h->truncated_stacks--;
		h->n = i;
	}
	u64map_free(&pcs);
	return cut;
}

/* ---- views -------------------------------------------------------------- */

static void memrec_add(struct go_memrec *a, const struct go_memrec *b)
{
	a->allocs += b->allocs;
	a->frees += b->frees;
	a->alloc_bytes += b->alloc_bytes;
	a->free_bytes += b->free_bytes;
}

/* runtime.MemProfile: "clear" when, after flushing future[C%3], no bucket
 * has active allocs or frees. */
bool goheap_all_active_clear(const struct go_heap *h)
{
	uint32_t idx = (h->cycle >> 1) % 3;
	for (size_t i = 0; i < h->n; i++) {
		struct go_memrec a = h->buckets[i].active;
		memrec_add(&a, &h->buckets[i].future[idx]);
		if (a.allocs || a.frees)
			return false;
	}
	return true;
}

struct go_memrec goheap_bucket_record(const struct go_heap *h, const struct go_bucket *b,
				      enum goheap_view view, bool all_clear)
{
	struct go_memrec r = b->active;
	if (view == GOHEAP_VIEW_LATEST || all_clear) {
		for (int i = 0; i < 3; i++)
			memrec_add(&r, &b->future[i]);
	} else {
		memrec_add(&r, &b->future[(h->cycle >> 1) % 3]);
	}
	return r;
}
