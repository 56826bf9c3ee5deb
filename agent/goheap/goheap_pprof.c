/*
 * goheap_pprof.c - a go_heap's buckets as the profile
 * runtime/pprof.WriteHeapProfile writes: sample types, period, the "bytes"
 * label, locations from PCs with inlined frames merged as
 * profileBuilder.appendLocsForStack does, leading runtime.* frames hidden.
 * Values go through Go's scaleHeapSample (goheap_scale.c).
 *   writeHeapProto: runtime/pprof/protomem.go:15 (1.19), :16 (1.23)
 *   appendLocsForStack: runtime/pprof/proto.go:399 (1.19), :403 (1.23)
 * The builder is shared with goheap_snapshot.c (goheap_internal.h).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "goheap_internal.h"
#include "pprof.h"
#include "grow.h"

/*
 * The builder's tables start small and grow with what the heap holds: an
 * idle program's snapshot has a few dozen PCs, a 100,000-bucket one a few
 * thousand. Sized for the large case up front they were ~450 KiB zeroed
 * per snapshot (the cache 192 KiB, pcmap and locmap 128 KiB each), most
 * of an idle program's snapshot: the memset, the page faults and the
 * allocator's trim (madvise, a TLB flush of every CPU) that followed.
 */
#define LCACHE_MIN 256
#define LCACHE_MAX 8192
#define BUILDER_MAP_MIN 64

static inline size_t lcache_slot(const struct goheap_builder *b, uint64_t pc)
{
	return (pc ^ (pc >> 13)) & b->lcache_mask;
}

/* Four times the slots (up to LCACHE_MAX) once the locations pass a
 * quarter of them, about the load the fixed 8192 slots had on a large
 * heap: a cache, so the new one starts empty, and out of memory keeps the
 * old one. */
static void lcache_grow(struct goheap_builder *b)
{
	size_t slots = b->lcache_mask + 1, want = slots * 4;

	if (b->nlocs <= slots / 4 || slots >= LCACHE_MAX)
		return;
	if (want > LCACHE_MAX)
		want = LCACHE_MAX;
	void *n = calloc(want, sizeof(*b->lcache));
	if (!n)
		return;
	free(b->lcache);
	b->lcache = n;
	b->lcache_mask = want - 1;
}

static struct gobin_frame *frames_alloc(struct goheap_builder *b, size_t n)
{
	struct frame_chunk *c = b->frames;
	if (!c || 4096 - c->used < n) {
		if (!(c = malloc(sizeof(*c))))
			return NULL;
		c->used = 0;
		c->next = b->frames;
		b->frames = c;
	}
	struct gobin_frame *f = c->v + c->used;
	c->used += n;
	return f;
}

/* The pcinfo of pc (cached); *idx its index. Pointers into b->pcs are
 * valid until the next call. */
static const struct pcinfo *pc_info_idx(struct goheap_builder *b, uint64_t pc, uint32_t *idxp)
{
	uint32_t idx;
	if (u64map_get(&b->pcmap, pc, &idx)) {
		if (idxp)
			*idxp = idx;
		return &b->pcs[idx];
	}
	if (pp_grow(&b->pcs, &b->cappcs, b->npcs + 1, sizeof(*b->pcs), 256))
		return NULL;
	struct pcinfo *pi = &b->pcs[b->npcs];
	struct gobin_frame fr[GOHEAP_MAX_INLINE];
	pi->nfr = (uint32_t)gobin_symbolize(b->g, pc - 1, fr, GOHEAP_MAX_INLINE);
	pi->fr = NULL;
	if (pi->nfr) {
		if (!(pi->fr = frames_alloc(b, pi->nfr)))
			return NULL;
		memcpy(pi->fr, fr, pi->nfr * sizeof(*fr));
	}
	size_t nat = gobin_symbolize(b->g, pc, fr, GOHEAP_MAX_INLINE);
	pi->runtime_at_pc = nat > 0 && !strncmp(fr[0].function, "runtime.", 8);
	if (u64map_put(&b->pcmap, pc, (uint32_t)b->npcs))
		return NULL;
	if (idxp)
		*idxp = (uint32_t)b->npcs;
	b->npcs++;
	return pi;
}

static const struct pcinfo *pc_info(struct goheap_builder *b, uint64_t pc)
{
	return pc_info_idx(b, pc, NULL);
}

/* pcDeck.tryAdd: merge pc into the pending location when the pending
 * frames are inlined into the same physical function. */
static bool deck_try_add(struct goheap_builder *b, uint64_t pc, const struct gobin_frame *f,
			 bool inlined, int64_t pcidx)
{
	if (b->nd) {
		if (!b->dinl[b->nd - 1]) /* the last frame is physical */
			return false;
		const struct gobin_frame *last = &b->dfr[b->nd - 1];
		if (last->entry == 0 || f->entry == 0 || last->entry != f->entry)
			return false;
		if (!strcmp(last->function, f->function)) /* recursion */
			return false;
		if (b->nd >= GOHEAP_MAX_INLINE)
			return false;
	}
	b->dpcs[b->nd] = pc;
	b->dfr[b->nd] = *f;
	b->dinl[b->nd] = inlined;
	b->nd++;
	b->dlast = pcidx;
	return true;
}

/* The executable's mapping for addresses in its text, else none (Go's own
 * unwinder only records Go code, so that is defensive). */
static uint64_t mapping_of(const struct goheap_builder *b, uint64_t addr)
{
	return addr >= b->g->text_start && addr < b->g->text_limit ? b->mapping : 0;
}

/* Emit the pending location; returns its id (0 when none or on error). */
static uint64_t deck_emit(struct goheap_builder *b, bool final, int *rc)
{
	if (!b->nd)
		return 0;
	struct pprof_line lines[2 * GOHEAP_MAX_INLINE];
	size_t nl = 0;
	for (uint32_t i = 0; i < b->nd; i++) {
		const struct gobin_frame *f = &b->dfr[i];
		uint64_t fid = pprof_function(b->p, f->function, f->function, f->file, 0);
		if (!fid) {
			*rc = -ENOMEM;
			return 0;
		}
		lines[nl++] = (struct pprof_line){ fid, f->line };
	}
	/* runtime_expandFinalInlineFrame: a stack that ends inside inlined
	 * frames gets their callers from the last PC's full expansion. */
	if (final && b->dinl[b->nd - 1] && b->dlast >= 0) {
		const struct pcinfo *last = &b->pcs[b->dlast];
		for (uint32_t i = 1; i < last->nfr && nl < 2 * GOHEAP_MAX_INLINE; i++) {
			const struct gobin_frame *f = &last->fr[i];
			uint64_t fid = pprof_function(b->p, f->function, f->function, f->file, 0);
			if (!fid) {
				*rc = -ENOMEM;
				return 0;
			}
			lines[nl++] = (struct pprof_line){ fid, f->line };
		}
	}
	uint64_t id =
		pprof_location(b->p, mapping_of(b, b->dpcs[0] - 1), b->dpcs[0] - 1, lines, nl);
	if (!id) {
		*rc = -ENOMEM;
		return 0;
	}
	if (!final && !u64map_get(&b->locmap, b->dpcs[0], NULL)) {
		if (pp_grow(&b->locs, &b->caplocs, b->nlocs + 1, sizeof(*b->locs), 256)) {
			*rc = -ENOMEM;
			return 0;
		}
		struct loccache *l = &b->locs[b->nlocs];
		l->pcs = goheap_arena_alloc(&b->pool, b->nd);
		if (!l->pcs || u64map_put(&b->locmap, b->dpcs[0], (uint32_t)b->nlocs)) {
			*rc = -ENOMEM;
			return 0;
		}
		memcpy(l->pcs, b->dpcs, b->nd * sizeof(uint64_t));
		l->npcs = b->nd;
		l->id = id;
		l->first = b->dfr[0];
		l->first_inlined = b->dinl[0];
		b->nlocs++;
		lcache_grow(b);
	}
	b->nd = 0;
	b->dlast = -1;
	return id;
}

/* An unsymbolized PC: a location with the address only. */
static uint64_t raw_location(struct goheap_builder *b, uint64_t pc)
{
	return pprof_location(b->p, mapping_of(b, pc - 1), pc - 1, NULL, 0);
}

/* locmap lookup through a direct-mapped cache: stacks repeat the same few
 * thousand PCs, and this is the per-frame hot path. */
static inline bool loc_lookup(struct goheap_builder *b, uint64_t pc, uint32_t *li)
{
	size_t slot = lcache_slot(b, pc);
	if (pc && b->lcache[slot].pc == pc) { /* 0 marks an empty slot */
		*li = b->lcache[slot].li;
		return true;
	}
	if (!u64map_get(&b->locmap, pc, li))
		return false;
	const struct loccache *l = &b->locs[*li];
	b->lcache[slot].pc = pc;
	b->lcache[slot].li = *li;
	/* ids fit 32 bits: pprof caps every table at 2^31 entries */
	b->lcache[slot].one = l->npcs == 1 && l->id <= UINT32_MAX ? (uint32_t)l->id : 0;
	return true;
}

static inline bool same_pcs(const uint64_t *a, const uint64_t *b, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		if (a[i] != b[i])
			return false;
	return true;
}

/* The deck's pending frames as one location appended to locs (none when
 * the deck is empty): 0 or deck_emit's error. */
static inline int deck_flush(struct goheap_builder *b, uint64_t *locs, size_t *nlocs)
{
	int rc = 0;
	if (!b->nd) /* the common case, and deck_emit's frame is 2 KiB */
		return 0;
	uint64_t id = deck_emit(b, false, &rc);

	if (id)
		locs[(*nlocs)++] = id;
	return rc;
}

/* profileBuilder.appendLocsForStack */
static int locs_for_stack(struct goheap_builder *b, const uint64_t *stk, uint32_t n, uint64_t *locs,
			  size_t *nlocs)
{
	int rc = 0;
	uint32_t i = 0;
	uint64_t id;
	*nlocs = 0;
	b->nd = 0;
	b->dlast = -1;
	while (i < n) {
		uint64_t pc = stk[i];
		uint32_t li, pidx;
		/* Fast paths, each what the slow path below ends in: the
		 * goexit frame at the bottom of every stack is dropped; with
		 * nothing pending, a pc seen before as a location by itself. */
		if (pc == b->goexit_pc && pc) {
			if ((rc = deck_flush(b, locs, nlocs)))
				return rc;
			i++;
			continue;
		}
		if (!b->nd) {
			size_t slot = lcache_slot(b, pc);
			if (pc && b->lcache[slot].pc == pc && b->lcache[slot].one) {
				locs[(*nlocs)++] = b->lcache[slot].one;
				i++;
				continue;
			}
		}
		if (loc_lookup(b, pc, &li)) {
			if (b->nd) {
				struct gobin_frame first = b->locs[li].first;
				bool inl = b->locs[li].first_inlined;
				if (!pc_info_idx(b, pc, &pidx))
					return -ENOMEM;
				if (deck_try_add(b, pc, &first, inl, pidx)) {
					i++;
					continue;
				}
			}
			if ((rc = deck_flush(b, locs, nlocs)))
				return rc;
			/* deck_emit may have grown b->locs: index again. */
			const struct loccache *l = &b->locs[li];
			if (l->npcs <= n - i && same_pcs(l->pcs, stk + i, l->npcs)) {
				locs[(*nlocs)++] = l->id;
				i += l->npcs;
				continue;
			}
		}
		const struct pcinfo *pi = pc_info_idx(b, pc, &pidx);
		if (!pi)
			return -ENOMEM;
		if (pi->nfr == 0) {
			if ((rc = deck_flush(b, locs, nlocs)))
				return rc;
			if (!(id = raw_location(b, pc)))
				return -ENOMEM;
			locs[(*nlocs)++] = id;
			i++;
			continue;
		}
		if (!strcmp(pi->fr[0].function, "runtime.goexit")) {
			b->goexit_pc = pc;
			if ((rc = deck_flush(b, locs, nlocs)))
				return rc;
			i++;
			continue;
		}
		struct gobin_frame f0 = pi->fr[0];
		bool inl = pi->nfr > 1;
		if (deck_try_add(b, pc, &f0, inl, pidx)) {
			i++;
			continue;
		}
		if ((rc = deck_flush(b, locs, nlocs)))
			return rc;
		deck_try_add(b, pc, &f0, inl, pidx); /* deck empty: succeeds */
		i++;
	}
	/* The last location may need the final inline expansion; it is not
	 * cached (its PCs are cut short). */
	bool final = b->nd && b->dinl[b->nd - 1];
	if ((id = deck_emit(b, final, &rc)))
		locs[(*nlocs)++] = id;
	return rc;
}

void goheap_builder_free(struct goheap_builder *b)
{
	if (!b)
		return;
	pprof_free(b->p);
	free(b->stkbuf);
	free(b->pcs);
	free(b->locs);
	free(b->lcache);
	u64map_free(&b->pcmap);
	u64map_free(&b->locmap);
	goheap_free(&b->pool);
	while (b->frames) {
		struct frame_chunk *c = b->frames->next;
		free(b->frames);
		b->frames = c;
	}
	free(b);
}

/* The builder's tables and profile; -ENOMEM (b is freed by the caller). */
static int builder_fill(struct goheap_builder *b, const struct gobin *g, int64_t rate,
			int64_t time_ns)
{
	b->g = g;
	b->dlast = -1;
	b->rate = rate;
	goheap_init(&b->pool);
	pprof_new(&b->p, NULL); /* b->p NULL on failure: -ENOMEM below */
	b->lcache = calloc(LCACHE_MIN, sizeof(*b->lcache));
	b->lcache_mask = LCACHE_MIN - 1;
	b->stkbuf = malloc(2 * GOHEAP_NSTK_LIMIT * sizeof(*b->stkbuf));
	if (!b->p || !b->lcache || !b->stkbuf || u64map_init(&b->pcmap, BUILDER_MAP_MIN) ||
	    u64map_init(&b->locmap, BUILDER_MAP_MIN))
		return -ENOMEM;
	/* writeHeapProto writes one sample per bucket and merges none: the
	 * same here, without pprof's merge table (100,000 buckets are
	 * 100,000 samples either way: buckets that share a stack differ in
	 * size, hence in the "bytes" label). */
	pprof_set_merge(b->p, false);
	if (pprof_add_sample_type(b->p, "alloc_objects", "count") ||
	    pprof_add_sample_type(b->p, "alloc_space", "bytes") ||
	    pprof_add_sample_type(b->p, "inuse_objects", "count") ||
	    pprof_add_sample_type(b->p, "inuse_space", "bytes") ||
	    pprof_set_period(b->p, "space", "bytes", rate))
		return -ENOMEM;
	pprof_set_time(b->p, time_ns, 0);
	if (g->text_limit > g->text_start) {
		const char *bid = g->gnu_build_id[0] ? g->gnu_build_id : g->go_build_id;
		b->mapping =
			pprof_mapping(b->p, g->text_start, g->text_limit,
				      g->text_offset + (g->text_start - (g->text_vaddr + g->bias)),
				      g->exe, bid, true, g->has_pclntab);
		if (!b->mapping)
			return -ENOMEM;
	}
	return 0;
}

int goheap_builder_new(const struct goheap_builder_opts *o, struct goheap_builder **out,
		       struct pp_err *err)
{
	*out = NULL;
	if (!o || !o->g)
		return pp_errf(err, -EINVAL, "heap profile: no gobin given");
	struct goheap_builder *b = calloc(1, sizeof(*b));
	if (!b || builder_fill(b, o->g, o->rate, o->time_ns) < 0) {
		goheap_builder_free(b);
		return pp_errf(err, -ENOMEM, "heap profile: out of memory");
	}
	*out = b;
	return 0;
}

/* One bucket with the record its view reports (writeHeapProto's loop). */
int goheap_builder_add(struct goheap_builder *b, const struct go_bucket *bk,
		       const struct go_memrec *r)
{
	int rc;
	/* WriteHeapProfile asks MemProfile with inuseZero = true: every
	 * bucket; all-zero ones add nothing and are left out. */
	if (!r->allocs && !r->frees && !r->alloc_bytes && !r->free_bytes)
		return 0;
	uint32_t nstk = bk->nstk <= GOHEAP_NSTK_LIMIT ? bk->nstk : GOHEAP_NSTK_LIMIT;
	/* writeHeapProto: hide leading runtime.* frames unless that leaves
	 * nothing. */
	size_t nlocs = 0;
	uint32_t skip = 0;
	for (; skip < nstk; skip++) {
		const struct pcinfo *pi = pc_info(b, bk->stk[skip]);
		if (!pi)
			return -ENOMEM;
		if (!pi->runtime_at_pc)
			break;
	}
	if (skip == nstk)
		skip = 0; /* Go keeps the whole stack then */
	/* The budget on distinct PCs: checked before the bucket changes
	 * anything, so a bucket goes in whole or not at all. pc_info above
	 * may already have added up to a stack's worth past the limit. */
	if (b->max_pcs && b->npcs + nstk > b->max_pcs) {
		uint64_t fresh = 0;
		for (uint32_t i = 0; i < nstk; i++)
			fresh += !u64map_get(&b->pcmap, bk->stk[i], NULL);
		if (b->npcs + fresh > b->max_pcs)
			return GOHEAP_STOP;
	}
	/* An empty stack (nstk 0 from the target) has stk NULL: no locations,
	 * and no pointer arithmetic on NULL. */
	if (nstk && (rc = locs_for_stack(b, bk->stk + skip, nstk - skip, b->stkbuf, &nlocs)))
		return rc;
	if (nlocs == 0 && skip && (rc = locs_for_stack(b, bk->stk, nstk, b->stkbuf, &nlocs)))
		return rc;
	int64_t ao = (int64_t)r->allocs, ab = (int64_t)r->alloc_bytes;
	int64_t io = (int64_t)(r->allocs - r->frees),
		ib = (int64_t)(r->alloc_bytes - r->free_bytes);
	int64_t v[4];
	goheap_scale_heap_sample(ao, ab, b->rate, &v[0], &v[1]);
	goheap_scale_heap_sample(io, ib, b->rate, &v[2], &v[3]);
	int64_t bsize = ao > 0 ? ab / ao : 0;
	struct pprof_label lab = { .key = "bytes", .str = NULL, .num = bsize };
	if (pprof_add_sample(b->p, b->stkbuf, nlocs, v, &lab, bsize != 0 ? 1 : 0))
		return -ENOMEM;
	return 0;
}

int goheap_builder_comments(struct goheap_builder *b, const struct go_heap *h,
			    enum goheap_view view)
{
	char comment[320];
	snprintf(comment, sizeof(comment),
		 "pushprof go heap: view=%s buckets=%zu rate=%" PRId64 " cycle=%" PRIu32
		 " truncated_stacks=%" PRIu64,
		 goheap_view_name(view), h->n, h->rate, h->cycle >> 1, h->truncated_stacks);
	if (pprof_add_comment(b->p, comment))
		return -ENOMEM;
	if (!h->complete) {
		snprintf(comment, sizeof(comment), "incomplete: %s", h->incomplete_reason);
		if (pprof_add_comment(b->p, comment))
			return -ENOMEM;
	}
	return 0;
}

int goheap_to_pprof(const struct go_heap *h, const struct gobin *g, enum goheap_view view,
		    struct pprof **out, struct pp_err *err)
{
	struct goheap_builder *b;
	struct goheap_builder_opts bo = { .g = g, .rate = h->rate, .time_ns = h->time_ns };
	int rc = goheap_builder_new(&bo, &b, NULL);
	*out = NULL;
	if (!rc)
		rc = goheap_builder_comments(b, h, view);
	bool clear = view == GOHEAP_VIEW_RUNTIME && goheap_all_active_clear(h);
	for (size_t i = 0; !rc && i < h->n; i++) {
		struct go_memrec r = goheap_bucket_record(h, &h->buckets[i], view, clear);
		rc = goheap_builder_add(b, &h->buckets[i], &r);
	}
	if (rc) {
		pp_errf(err, rc, "building the heap profile: %s", strerror(-rc));
	} else {
		*out = b->p;
		b->p = NULL;
	}
	goheap_builder_free(b);
	return rc;
}
