/*
 * fuzz_buckets - libFuzzer target for the heap bucket walk and profile
 * building in goheap_*.c over a hostile memory image.
 *
 * The target's memory is a fake address space given to the gobin through
 * its read seam (struct gobin_mem): goheap_read() + goheap_to_pprof() (the
 * stored walk, Brent loop cut) or goheap_snapshot() (the streamed walk,
 * what the agent runs) see exactly what they would see through
 * process_vm_readv. PCs are symbolized with a real Go executable loaded
 * once (FUZZ_GOBIN_FIXTURE, a fuzz_gobin seed: non-PIE, bias 0, so bucket
 * PCs are its link-time addresses).
 *
 * Input, little-endian (make_fuzz_seeds.py writes seeds in this format):
 *   u8  flags        bit 0: goheap_snapshot (else read + to_pprof)
 *                    bit 1: view latest (else runtime)
 *   u8  esrch_after  0: never; else reads after that many fail with
 *                    ESRCH (the process exits during the walk)
 *   u16 max_buckets  u16 max_depth  u16 unused
 *   u32 mProfCycle   u32 unused
 *   i64 MemProfileRate
 *   u64 mbuckets     the list head
 *   then segments until the end: u64 addr, u32 len, len bytes (the last
 *   one may be cut short by the end of the input).
 * The three variables live at GLOBALS, ahead of the segments.
 *
 * Invariants checked (abort = finding): the walk ends (libFuzzer's timeout),
 * an error leaves no buckets, at most max_buckets buckets, no bucket twice
 * in a stored heap, stacks within max_depth and the truncation count
 * right, and every profile built encodes into bytes pprof_validate()
 * accepts.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gobin.h"
#include "goheap.h"
#include "pprof.h"
#include "tests/lib/fuzz.h"

#define GLOBALS 0x10000ull	/* rate, cycle, head: 8 bytes each */
#define HDR 32
#define MAX_SEGS 256

struct seg {
	uint64_t addr;
	const uint8_t *p;
	size_t len;
};

struct space {
	struct seg s[MAX_SEGS];
	size_t n;
	uint8_t globals[24];
	unsigned reads, esrch_after;
};

static const struct seg *seg_at(const struct space *sp, uint64_t addr)
{
	for (size_t i = 0; i < sp->n; i++)
		if (addr >= sp->s[i].addr && addr - sp->s[i].addr < sp->s[i].len)
			return &sp->s[i];
	return NULL;
}

/* struct gobin_mem's read(): copies across adjacent segments, short at a
 * hole, -EFAULT when nothing is at addr, like process_vm_readv. */
static ssize_t space_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	struct space *sp = ctx;
	if (sp->esrch_after && ++sp->reads > sp->esrch_after)
		return -ESRCH;
	size_t done = 0;
	while (done < len) {
		const struct seg *s = seg_at(sp, addr + done);
		if (!s)
			break;
		size_t off = (size_t)(addr + done - s->addr), n = s->len - off;
		if (n > len - done)
			n = len - done;
		memcpy((uint8_t *)buf + done, s->p + off, n);
		done += n;
	}
	return done ? (ssize_t)done : -EFAULT;
}

static struct gobin *fixture;

/* Undefined behaviour is a finding too: UBSan only prints by default,
 * which libFuzzer would not notice. */
const char *__ubsan_default_options(void);
const char *__ubsan_default_options(void)
{
	return "halt_on_error=1:abort_on_error=1:print_stacktrace=1";
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	struct pp_err err = {0};
	if (gobin_new(&(struct gobin_opts){ .path = FUZZ_GOBIN_FIXTURE }, &fixture, &err)) {
		fprintf(stderr, "fuzz_buckets: %s: %s\n", FUZZ_GOBIN_FIXTURE, err.msg);
		abort();
	}
	if (fixture->pie || !fixture->has_pclntab) {
		fprintf(stderr, "fuzz_buckets: the fixture must be a non-PIE Go executable with a "
			"pclntab\n");
		abort();
	}
	return 0;
}

static uint64_t rd64(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return v;
}

static void must_validate(const uint8_t *buf, size_t len)
{
	struct pp_err err = {0};
	if (pprof_validate(buf, len, &err)) {
		fprintf(stderr, "fuzz_buckets: profile does not validate: %s\n", err.msg);
		abort();
	}
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static void check_heap(const struct go_heap *h, uint32_t max_buckets, uint32_t max_depth)
{
	uint32_t depth = max_depth == 0 || max_depth > GOHEAP_NSTK_LIMIT ? GOHEAP_NSTK_LIMIT
									 : max_depth;
	if (h->n > (max_buckets ? max_buckets : 1))
		abort();
	if (h->complete != !h->incomplete_reason[0])
		abort();
	uint64_t trunc = 0;
	uint64_t *addrs = malloc((h->n ? h->n : 1) * sizeof(*addrs));
	if (!addrs)
		return;
	for (size_t i = 0; i < h->n; i++) {
		const struct go_bucket *b = &h->buckets[i];
		if (b->nstk > depth || (b->nstk && !b->stk) || (b->truncated && b->nstk != depth))
			abort();
		trunc += b->truncated;
		addrs[i] = b->addr;
	}
	if (trunc != h->truncated_stacks)
		abort();
	qsort(addrs, h->n, sizeof(*addrs), cmp_u64);
	for (size_t i = 1; i < h->n; i++)
		if (addrs[i] == addrs[i - 1])
			abort();	/* a loop must be cut, not reported twice */
	free(addrs);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < HDR)
		return 0;
	uint8_t flags = data[0];
	uint32_t max_buckets = (uint32_t)data[2] | (uint32_t)data[3] << 8;
	uint32_t max_depth = (uint32_t)data[4] | (uint32_t)data[5] << 8;
	struct space *sp = calloc(1, sizeof(*sp));
	if (!sp)
		return 0;
	sp->esrch_after = data[1];
	memcpy(sp->globals, data + 16, 8);		/* rate */
	memcpy(sp->globals + 8, data + 8, 4);		/* cycle (upper half stays 0) */
	memcpy(sp->globals + 16, data + 24, 8);		/* head */
	sp->s[sp->n++] = (struct seg){GLOBALS, sp->globals, sizeof(sp->globals)};
	for (size_t off = HDR; off + 12 <= size && sp->n < MAX_SEGS;) {
		uint64_t addr = rd64(data + off);
		uint32_t len;
		memcpy(&len, data + off + 8, 4);
		off += 12;
		if (len > size - off)
			len = (uint32_t)(size - off);
		if (len && addr + len > addr)	/* no wrap-around segments */
			sp->s[sp->n++] = (struct seg){addr, data + off, len};
		off += len;
	}
	struct gobin_mem mem = {.read = space_read, .ctx = sp};

	/* The fixture's analysis, attached to the fake process (what
	 * gobin_attach() would fill in for a non-PIE executable). */
	struct gobin g = *fixture;
	g.pid = getpid();	/* for the labels' /proc reads only: memory is sp */
	g.bias = 0;
	g.text_start = g.text_vaddr;
	g.text_limit = g.text_vaddr + g.text_memsz;
	g.rate_addr = GLOBALS;
	g.cycle_addr = GLOBALS + 8;
	g.mbuckets_addr = GLOBALS + 16;
	g.mem = &mem;

	enum goheap_view view = flags & 2 ? GOHEAP_VIEW_LATEST : GOHEAP_VIEW_RUNTIME;
	struct pp_err err = {0};
	if (flags & 1) {
		struct goheap_snapshot_opts o = {.view = view, .max_buckets = max_buckets,
						 .max_depth = max_depth, .trigger = "fuzz",
						 .node = "fuzz"};
		struct goheap_snapshot s;
		if (goheap_snapshot(g.pid, &g, &o, &s, &err) == 0) {
			if (s.buckets > (max_buckets ? max_buckets : 1) || !s.gz ||
			    s.complete != !s.incomplete_reason[0])
				abort();
			must_validate(s.gz, s.len);
			goheap_snapshot_free(&s);
		}
	} else {
		struct go_heap h;
		goheap_init(&h);
		int rc = goheap_read(g.pid, &g, max_buckets, max_depth, &h, &err);
		if (rc) {
			if (h.n)
				abort();	/* "on error it holds no buckets" */
		} else {
			check_heap(&h, max_buckets, max_depth);
			struct pprof *p;
			if (goheap_to_pprof(&h, &g, view, &p, &err) == 0) {
				uint8_t *raw;
				size_t len;
				if (pprof_encode(p, false, &raw, &len, &err) == 0) {
					must_validate(raw, len);
					free(raw);
				}
				pprof_free(p);
			}
		}
		goheap_free(&h);
	}
	free(sp);
	return 0;
}
