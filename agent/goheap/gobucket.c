/*
 * gobucket.c - read and check one memory-profile bucket (gobucket.h).
 */
#include "gobucket.h"

#include <inttypes.h>
#include <string.h>

/* PCs read with the header in one call when no record is wanted: most
 * stacks are shorter, so one read per bucket. */
#define PREFETCH_FRAMES 32

static void cycle_from(struct go_memrec *m, const uint64_t *w)
{
	struct go_rt_memrec_cycle c;
	memcpy(&c, w, sizeof(c)); /* __u64 and uint64_t are distinct types */
	*m = (struct go_memrec){ c.allocs, c.frees, c.alloc_bytes, c.free_bytes };
}

static int unreadable(struct rmem *r, uint64_t addr, int rc, struct pp_err *err)
{
	if (rc == -ESRCH)
		return pp_errf(err, rc, "pid %d: the process exited", (int)r->pid);
	if (rc == -ENOMEM)
		return pp_errf(err, rc, "out of memory reading pid %d", (int)r->pid);
	return pp_errf(err, rc, "bucket 0x%" PRIx64 " is not readable (%s)", addr, strerror(-rc));
}

/* len bytes at addr: where they are in r's window when peek (no copy:
 * a snapshot reads 35 MB of buckets), else copied into buf. */
static int words_at(struct rmem *r, bool peek, uint64_t addr, size_t len, uint64_t *buf,
		    const uint64_t **w)
{
	if (!peek) {
		*w = buf;
		return rmem_read(r, addr, buf, len, NULL);
	}
	const uint8_t *p;
	int rc = rmem_peek(r, addr, len, &p, NULL);
	*w = (const uint64_t *)(const void *)p; /* 8-aligned: addr is */
	return rc;
}

int gobucket_read(struct rmem *r, uint64_t addr, uint32_t max_depth, bool with_record,
		  uint64_t *buf, struct gobucket *b, struct pp_err *err)
{
	size_t first = GO_BUCKET_HDR + (with_record ? GO_MEMRECORD_SIZE : 8 * PREFETCH_FRAMES);
	bool peek = with_record && r->cached && !(addr & 7);
	const uint64_t *w;
	int rc = words_at(r, peek, addr, first, buf, &w);
	if (rc == -EFAULT && !with_record) {
		/* the frames may cross into an unmapped page */
		first = GO_BUCKET_HDR;
		rc = rmem_read(r, addr, buf, first, NULL);
	}
	if (rc)
		return unreadable(r, addr, rc, err);
	struct go_rt_bucket hd, *h = &hd;
	memcpy(&hd, w, sizeof(hd)); /* __u64 and uint64_t are distinct types */
	if (h->typ != GO_BUCKET_MEMPROF)
		return pp_errf(err, GOBUCKET_EBAD,
			       "bucket 0x%" PRIx64 " has type %" PRIu64
			       ", not a memory profile bucket",
			       addr, (uint64_t)h->typ);
	if (h->nstk > GO_MAX_STACK)
		return pp_errf(err, GOBUCKET_EBAD,
			       "bucket 0x%" PRIx64 " claims %" PRIu64 " frames (limit %d)", addr,
			       (uint64_t)h->nstk, GO_MAX_STACK);
	/* Copied now: the second read below may see other bytes (the target
	 * is live), and nstk as checked is what sizes everything. */
	uint64_t nstk = h->nstk;
	uint32_t nkept = (uint32_t)(nstk < max_depth ? nstk : max_depth);
	size_t need = with_record ? GO_BUCKET_BYTES(nstk) : GO_BUCKET_HDR + 8 * (size_t)nkept;
	if (need > first && (rc = words_at(r, peek, addr, need, buf, &w)))
		return unreadable(r, addr, rc, err);
	*b = (struct gobucket){ .addr = addr,
				.allnext = h->allnext,
				.size = h->size,
				.nstk = nstk,
				.nkept = nkept,
				.stk = w + GO_BUCKET_STK / 8 };
	if (with_record) {
		const uint64_t *mr = w + GO_BUCKET_STK / 8 + nstk;
		cycle_from(&b->active, mr);
		for (int i = 0; i < 3; i++)
			cycle_from(&b->future[i], mr + (GO_MEMREC_CYCLE_SIZE / 8) * (i + 1));
	}
	return 0;
}
