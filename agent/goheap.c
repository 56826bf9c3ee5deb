/*
 * goheap.c - read runtime.mbuckets from a live Go process, pick the view,
 * and build the heap profile exactly like runtime/pprof's writeHeapProto.
 */
#include "goheap.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <time.h>
#include <zlib.h>

#include "pprof.h"
#include "procinfo.h"

#define BUCKET_HDR 48			/* next, allnext, typ, hash, size, nstk */
#define MEMREC_BYTES 128		/* active + future[3], 4 x uintptr each */
#define WINDOW (128u << 10)		/* remote read granularity */
#define NWINDOWS 8
#define ARENA_CHUNK (64u << 10)		/* PCs per arena chunk */

/* ---- small helpers ---------------------------------------------------- */

static int64_t now_ns(clockid_t c)
{
	struct timespec ts;
	clock_gettime(c, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

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

/* Open-addressing set/map of nonzero uint64 keys. */
struct u64map {
	uint64_t *keys;
	uint32_t *vals;
	size_t cap, n;		/* cap is a power of two */
};

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	x ^= x >> 33;
	return x;
}

static int u64map_init(struct u64map *m, size_t want)
{
	size_t cap = 64;
	while (cap < want * 2)
		cap <<= 1;
	m->keys = calloc(cap, sizeof(*m->keys));
	m->vals = calloc(cap, sizeof(*m->vals));
	m->cap = cap;
	m->n = 0;
	if (!m->keys || !m->vals) {
		free(m->keys);
		free(m->vals);
		m->keys = NULL;
		m->vals = NULL;
		return -ENOMEM;
	}
	return 0;
}

static void u64map_free(struct u64map *m)
{
	free(m->keys);
	free(m->vals);
	m->keys = NULL;
	m->vals = NULL;
}

/* Slot of key (existing or empty). */
static size_t u64map_slot(const struct u64map *m, uint64_t key)
{
	size_t i = mix(key) & (m->cap - 1);
	while (m->keys[i] && m->keys[i] != key)
		i = (i + 1) & (m->cap - 1);
	return i;
}

static bool u64map_get(const struct u64map *m, uint64_t key, uint32_t *val)
{
	size_t i = u64map_slot(m, key);
	if (!m->keys[i])
		return false;
	if (val)
		*val = m->vals[i];
	return true;
}

static int u64map_grow(struct u64map *m)
{
	struct u64map nm;
	if (u64map_init(&nm, m->cap))
		return -ENOMEM;
	for (size_t i = 0; i < m->cap; i++)
		if (m->keys[i]) {
			size_t j = u64map_slot(&nm, m->keys[i]);
			nm.keys[j] = m->keys[i];
			nm.vals[j] = m->vals[i];
			nm.n++;
		}
	u64map_free(m);
	*m = nm;
	return 0;
}

static int u64map_put(struct u64map *m, uint64_t key, uint32_t val)
{
	if ((m->n + 1) * 2 > m->cap && u64map_grow(m))
		return -ENOMEM;
	size_t i = u64map_slot(m, key);
	if (!m->keys[i])
		m->n++;
	m->keys[i] = key;
	m->vals[i] = val;
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

static uint64_t *arena_alloc(struct go_heap *h, size_t n)
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
		if (n > ARENA_CHUNK) {	/* exactly full: next alloc gets a new chunk */
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
	if (h->buckets)
		munmap(h->buckets, h->cap * sizeof(*h->buckets));
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
	if (h->n == h->cap) {
		/* mmap/mremap: growing moves page tables, never copies, and does
		 * not depend on malloc's moving mmap threshold. */
		size_t cap = h->cap ? h->cap * 2 : 4096;
		void *nb = h->buckets
			? mremap(h->buckets, h->cap * sizeof(*h->buckets), cap * sizeof(*h->buckets),
				 MREMAP_MAYMOVE)
			: mmap(NULL, cap * sizeof(*h->buckets), PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (nb == MAP_FAILED)
			return -ENOMEM;
		h->buckets = nb;
		h->cap = cap;
	}
	uint64_t *s = NULL;
	if (nstk) {
		s = arena_alloc(h, nstk);
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

/* ---- remote reads through a small window cache ------------------------ */

struct window {
	uint64_t start;
	size_t len;		/* valid bytes */
	uint8_t *buf;
};

struct reader {
	const struct gobin *g;	/* its mem, when set, replaces process_vm_readv */
	pid_t pid;
	struct window w[NWINDOWS];
	unsigned next;		/* round-robin victim */
	uint64_t calls;
	int last_errno;
};

static ssize_t remote(struct reader *r, uint64_t addr, void *buf, size_t len)
{
	r->calls++;
	ssize_t n = gobin_read_some(r->g, r->pid, addr, buf, len);
	if (n < 0)
		r->last_errno = (int)-n;
	return n;
}

/*
 * Copy [addr, addr+len) of the target into out. Buckets are allocated
 * upwards in persistentalloc chunks and the list runs newest first, i.e.
 * mostly downwards: a miss reads the WINDOW bytes that end at the end of
 * the request, so the next buckets are already there. Returns 0, or
 * -errno (ESRCH: process gone; EFAULT: not mapped).
 */
static int rread(struct reader *r, uint64_t addr, void *out, size_t len)
{
	if (len > WINDOW || addr + len < addr)
		return -EINVAL;
	for (unsigned i = 0; i < NWINDOWS; i++) {
		struct window *w = &r->w[i];
		if (w->len && addr >= w->start && addr + len <= w->start + w->len) {
			memcpy(out, w->buf + (addr - w->start), len);
			return 0;
		}
	}
	struct window *w = &r->w[r->next];
	r->next = (r->next + 1) % NWINDOWS;
	if (!w->buf && !(w->buf = malloc(WINDOW)))
		return -ENOMEM;
	uint64_t end = (addr + len + 4095) & ~4095ULL;
	uint64_t start = end >= WINDOW ? end - WINDOW : 0;
	if (start > addr)
		start = addr & ~4095ULL;
	w->len = 0;
	ssize_t n = remote(r, start, w->buf, end - start);
	if (n < 0 || (uint64_t)n < addr + len - start) {
		if (n < 0 && r->last_errno == ESRCH)
			return -ESRCH;
		/* The window reached into unmapped memory: read exactly. */
		start = addr;
		n = remote(r, start, w->buf, len);
		if (n < 0)
			return r->last_errno == ESRCH ? -ESRCH : -r->last_errno;
		if ((size_t)n < len)
			return -EFAULT;
	}
	w->start = start;
	w->len = (size_t)n;
	memcpy(out, w->buf + (addr - start), len);
	return 0;
}

static void reader_free(struct reader *r)
{
	for (unsigned i = 0; i < NWINDOWS; i++)
		free(r->w[i].buf);
}

/* ---- the walk ----------------------------------------------------------- */

static void memrec_from(struct go_memrec *m, const uint64_t *w)
{
	m->allocs = w[0];
	m->frees = w[1];
	m->alloc_bytes = w[2];
	m->free_bytes = w[3];
}

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

/*
 * Streaming instead of storing: each bucket goes to fn while the walk runs
 * (its stk points into the read buffer, valid during the call), so a
 * snapshot never holds all buckets at once. h keeps the metadata and the
 * count; loops are caught with a set of the buckets seen.
 */
struct stream {
	int (*fn)(struct stream *st, const struct go_heap *h, const struct go_bucket *b);
};

static int walk(pid_t pid, const struct gobin *g, uint32_t max_buckets, uint32_t max_depth,
		struct go_heap *h, struct stream *st, struct pp_err *err)
{
	int rc;
	uint64_t head;
	int64_t t0 = now_ns(CLOCK_MONOTONIC);

	h->time_ns = now_ns(CLOCK_REALTIME);
	if (!g->mbuckets_addr || !g->rate_addr || !g->cycle_addr)
		return pp_errf(err, -ENOENT, "%s: the runtime's memory-profile variables are not "
			       "located", g->exe);
	if ((rc = gobin_read_rate(g, &h->rate, err)) || (rc = gobin_read_cycle(g, &h->cycle, err)) ||
	    (rc = gobin_read_mbuckets(g, &head, err)))
		return rc;
	if (h->rate == 0 && head == 0)
		return pp_errf(err, GOHEAP_EDISABLED,
			       "pid %d: memory profiling disabled (runtime.MemProfileRate is 0: "
			       "the program references no heap profile; go_heap.enable_profiling "
			       "or --enable-profiling turns it on for later allocations)", (int)pid);
	if (max_depth == 0 || max_depth > GOHEAP_NSTK_LIMIT)
		max_depth = GOHEAP_NSTK_LIMIT;
	if (max_buckets == 0)
		max_buckets = 1;

	struct reader rd = {.g = g, .pid = pid};
	size_t maxrec = BUCKET_HDR + 8 * GOHEAP_NSTK_LIMIT + MEMREC_BYTES;
	uint64_t *buf = malloc(maxrec);
	if (!buf)
		return -ENOMEM;
	/* Loops: stored, Brent's cycle detection costs nothing per bucket and
	 * once it fires the repeated tail is cut exactly (drop_repeats);
	 * streamed, nothing can be taken back: a set of the buckets seen. */
	uint64_t saved = 0, power = 1, lam = 0;
	struct u64map seen = {0};
	if (st && u64map_init(&seen, 4096)) {
		free(buf);
		return -ENOMEM;
	}
	rc = 0;
	for (uint64_t b = head; b;) {
		if (st) {
			if (u64map_get(&seen, b, NULL)) {
				goheap_set_incomplete(h, "the bucket list loops (at 0x%" PRIx64 ")", b);
				break;
			}
			if ((rc = u64map_put(&seen, b, 1)))
				break;
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
				goheap_set_incomplete(h, "more than go_heap.max_buckets (%" PRIu32
						      ") buckets: the rest were not read",
						      max_buckets);
			break;
		}
		if (b & 7) {
			goheap_set_incomplete(h, "misaligned bucket pointer 0x%" PRIx64, b);
			break;
		}
		uint64_t nstk = 0;
		int r = rread(&rd, b, buf, BUCKET_HDR + MEMREC_BYTES);
		if (!r) {
			uint64_t typ = buf[2];
			nstk = buf[5];
			if (typ != 1) {
				goheap_set_incomplete(h, "bucket 0x%" PRIx64 " has type %" PRIu64
						      ", not a memory profile bucket", b, typ);
				break;
			}
			if (nstk > GOHEAP_NSTK_LIMIT) {
				goheap_set_incomplete(h, "bucket 0x%" PRIx64 " claims %" PRIu64
						      " frames (limit %d)", b, nstk,
						      GOHEAP_NSTK_LIMIT);
				break;
			}
			size_t total = BUCKET_HDR + 8 * nstk + MEMREC_BYTES;
			if (total > BUCKET_HDR + MEMREC_BYTES)
				r = rread(&rd, b, buf, total);
		}
		if (r == -ESRCH) {
			if (h->n == 0) {
				rc = pp_errf(err, -ESRCH, "pid %d: the process exited", (int)pid);
				break;
			}
			goheap_set_incomplete(h, "the process exited during the read");
			break;
		}
		if (r) {
			if (r == -ENOMEM) {
				rc = r;
				break;
			}
			goheap_set_incomplete(h, "bucket 0x%" PRIx64 " is not readable (%s)", b,
					      strerror(-r));
			break;
		}
		/* nstk as checked above: the second read may see other bytes. */
		const uint64_t *stk = buf + 6;
		const uint64_t *mr = stk + nstk;
		struct go_memrec active, fut[3];
		memrec_from(&active, mr);
		for (int i = 0; i < 3; i++)
			memrec_from(&fut[i], mr + 4 * (i + 1));
		bool trunc = nstk > max_depth;
		if (st) {
			struct go_bucket bk = {.addr = b, .size = buf[4],
					       .nstk = trunc ? max_depth : (uint32_t)nstk,
					       .truncated = trunc, .stk = (uint64_t *)stk,
					       .active = active};
			memcpy(bk.future, fut, sizeof(fut));
			h->n++;
			h->truncated_stacks += trunc;
			if ((rc = st->fn(st, h, &bk)))
				break;
		} else if ((rc = goheap_add_bucket(h, b, buf[4], stk,
						   trunc ? max_depth : (uint32_t)nstk, trunc,
						   &active, fut))) {
			break;
		}
		b = buf[1];
	}
	u64map_free(&seen);
	h->remote_reads = rd.calls + 3;
	h->duration_ns = now_ns(CLOCK_MONOTONIC) - t0;
	reader_free(&rd);
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
	return walk(pid, g, max_buckets, max_depth, h, NULL, err);
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

/* ---- profile ------------------------------------------------------------ */

/*
 * math.Exp as Go computes it on amd64 (math/exp_amd64.s, from SLEEF): not
 * correctly rounded, so glibc's exp() can differ in the last bit, which
 * scaleHeapSample's truncation to int64 turns into off-by-one values. The
 * FMA variant is used when the CPU has AVX and FMA, as Go decides. Other
 * architectures use Go's portable exp.go; there glibc's exp() is kept.
 */
#if defined(__x86_64__)
#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")
#endif
static bool go_use_fma(void)
{
	static int v = -1;
	if (v < 0) {
		__builtin_cpu_init();
		v = __builtin_cpu_supports("avx") && __builtin_cpu_supports("fma");
	}
	return v;
}

double goheap_go_exp(double x)
{
	static const double LOG2E = 1.4426950408889634073599246810018920;
	static const double LN2U = 0.69314718055966295651160180568695068359375;
	static const double LN2L = 0.28235290563031577122588448175013436025525412068e-12;
	static const double c[9] = {0.5, 1.0, 2.0, 1.6666666666666666667e-1,
				    4.1666666666666666667e-2, 8.3333333333333333333e-3,
				    1.3888888888888888889e-3, 1.9841269841269841270e-4,
				    2.4801587301587301587e-5};
	if (isnan(x) || isinf(x))
		return x < 0 ? 0 : x;
	if (x > 7.09782712893384e+02)
		return INFINITY;
	double t = LOG2E * x;
	if (t < -2147483648.0 || t > 2147483647.0)	/* CVTSD2SL: integer indefinite */
		t = -2147483648.0;
	int32_t bx = (int32_t)nearbyint(t);
	double x1 = bx, p;
	if (go_use_fma()) {
		x = fma(-x1, LN2U, x);
		x = fma(-x1, LN2L, x);
		x *= 0.0625;
		p = fma(c[8], x, c[7]);
		p = fma(p, x, c[6]);
		p = fma(p, x, c[5]);
		p = fma(p, x, c[4]);
		p = fma(p, x, c[3]);
		p = fma(p, x, c[0]);
		p = fma(p, x, c[1]);
		x = x * p;
		x = x * (x + c[2]);
		x = x * (x + c[2]);
		x = x * (x + c[2]);
		x = fma(x + c[2], x, c[1]);
	} else {
		/* Separate multiplies and adds: no FMA in the baseline x86-64
		 * ISA, so the compiler cannot contract them. */
		x = x - LN2U * x1;
		x = x - LN2L * x1;
		x *= 0.0625;
		p = c[8] * x + c[7];
		p = p * x + c[6];
		p = p * x + c[5];
		p = p * x + c[4];
		p = p * x + c[3];
		p = p * x + c[0];
		p = p * x + c[1];
		x = x * p;
		x = x * (x + c[2]);
		x = x * (x + c[2]);
		x = x * (x + c[2]);
		x = x * (x + c[2]);
		x = x + c[1];
	}
	/* fr * 2**exponent */
	int32_t e = bx + 0x3FF;
	uint64_t bits;
	double m;
	if (e <= 0) {
		if (e < -52)
			return 0;
		bits = (uint64_t)(uint32_t)(e + 0x3FE) << 52;
		memcpy(&m, &bits, 8);
		x *= m;
		e = 1;
	} else if (e >= 0x7FF) {
		return INFINITY;
	}
	bits = (uint64_t)(uint32_t)e << 52;
	memcpy(&m, &bits, 8);
	return x * m;
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif
#else
double goheap_go_exp(double x)
{
	return exp(x);
}
#endif

/*
 * Go's int64(f) on amd64 (CVTTSD2SQ): NaN and values out of range give
 * the "integer indefinite" INT64_MIN. In C that conversion is undefined,
 * and hostile counts and rates (e.g. rate 2^62, average size 1) reach it.
 */
static int64_t go_int64(double f)
{
	if (!(f >= -9223372036854775808.0 && f < 9223372036854775808.0))
		return INT64_MIN;
	return (int64_t)f;
}

/* runtime/pprof scaleHeapSample. */
void goheap_scale_heap_sample(int64_t count, int64_t size, int64_t rate, int64_t *oc,
			      int64_t *os)
{
	if (count == 0 || size == 0) {
		*oc = *os = 0;
		return;
	}
	if (rate <= 1) {
		*oc = count;
		*os = size;
		return;
	}
	double avg = (double)size / (double)count;
	double scale = 1 / (1 - goheap_go_exp(-avg / (double)rate));
	*oc = go_int64((double)count * scale);
	*os = go_int64((double)size * scale);
}

#define MAX_INLINE 64

/* What we know about one PC: its innermost frame at pc-1 (a return
 * address), whether that frame is inlined, all frames (for the final
 * expansion), and whether FuncForPC(pc) is a runtime function. */
struct pcinfo {
	struct gobin_frame *fr;		/* nfr frames, in the builder's frame pool */
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
	struct gobin_frame first;	/* innermost frame of pcs[0] */
	bool first_inlined;
};

struct builder {
	const struct gobin *g;
	struct pprof *p;
	uint64_t mapping;
	struct u64map pcmap;		/* pc -> index into pcs */
	struct pcinfo *pcs;
	size_t npcs, cappcs;
	struct u64map locmap;		/* first pc -> index into locs */
	struct { uint64_t pc; uint32_t li; } *lcache;	/* direct-mapped front of locmap */
	struct loccache *locs;
	size_t nlocs, caplocs;
	struct go_heap pool;		/* arena for location pc lists */
	struct frame_chunk *frames;
	/* the deck: pcs merged into one location (inlining) */
	uint64_t dpcs[MAX_INLINE];
	struct gobin_frame dfr[MAX_INLINE];
	bool dinl[MAX_INLINE];
	uint32_t nd;
	int64_t dlast;			/* index in pcs of the last pc in the deck, -1 */
	int64_t rate;
	uint64_t *stkbuf;		/* location ids of the sample being built */
};

static struct gobin_frame *frames_alloc(struct builder *b, size_t n)
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
static const struct pcinfo *pc_info_idx(struct builder *b, uint64_t pc, uint32_t *idxp)
{
	uint32_t idx;
	if (u64map_get(&b->pcmap, pc, &idx)) {
		if (idxp)
			*idxp = idx;
		return &b->pcs[idx];
	}
	if (b->npcs == b->cappcs) {
		size_t cap = b->cappcs ? b->cappcs * 2 : 256;
		struct pcinfo *n = realloc(b->pcs, cap * sizeof(*n));
		if (!n)
			return NULL;
		b->pcs = n;
		b->cappcs = cap;
	}
	struct pcinfo *pi = &b->pcs[b->npcs];
	struct gobin_frame fr[MAX_INLINE];
	pi->nfr = (uint32_t)gobin_symbolize(b->g, pc - 1, fr, MAX_INLINE);
	pi->fr = NULL;
	if (pi->nfr) {
		if (!(pi->fr = frames_alloc(b, pi->nfr)))
			return NULL;
		memcpy(pi->fr, fr, pi->nfr * sizeof(*fr));
	}
	size_t nat = gobin_symbolize(b->g, pc, fr, MAX_INLINE);
	pi->runtime_at_pc = nat > 0 && !strncmp(fr[0].function, "runtime.", 8);
	if (u64map_put(&b->pcmap, pc, (uint32_t)b->npcs))
		return NULL;
	if (idxp)
		*idxp = (uint32_t)b->npcs;
	b->npcs++;
	return pi;
}

static const struct pcinfo *pc_info(struct builder *b, uint64_t pc)
{
	return pc_info_idx(b, pc, NULL);
}

/* pcDeck.tryAdd: merge pc into the pending location when the pending
 * frames are inlined into the same physical function. */
static bool deck_try_add(struct builder *b, uint64_t pc, const struct gobin_frame *f,
			 bool inlined, int64_t pcidx)
{
	if (b->nd) {
		if (!b->dinl[b->nd - 1])	/* the last frame is physical */
			return false;
		const struct gobin_frame *last = &b->dfr[b->nd - 1];
		if (last->entry == 0 || f->entry == 0 || last->entry != f->entry)
			return false;
		if (!strcmp(last->function, f->function))	/* recursion */
			return false;
		if (b->nd >= MAX_INLINE)
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
static uint64_t mapping_of(const struct builder *b, uint64_t addr)
{
	return addr >= b->g->text_start && addr < b->g->text_limit ? b->mapping : 0;
}

/* Emit the pending location; returns its id (0 when none or on error). */
static uint64_t deck_emit(struct builder *b, bool final, int *rc)
{
	if (!b->nd)
		return 0;
	struct pprof_line lines[2 * MAX_INLINE];
	size_t nl = 0;
	for (uint32_t i = 0; i < b->nd; i++) {
		const struct gobin_frame *f = &b->dfr[i];
		uint64_t fid = pprof_function(b->p, f->function, f->function, f->file, 0);
		if (!fid) {
			*rc = -ENOMEM;
			return 0;
		}
		lines[nl++] = (struct pprof_line){fid, f->line};
	}
	/* runtime_expandFinalInlineFrame: a stack that ends inside inlined
	 * frames gets their callers from the last PC's full expansion. */
	if (final && b->dinl[b->nd - 1] && b->dlast >= 0) {
		const struct pcinfo *last = &b->pcs[b->dlast];
		for (uint32_t i = 1; i < last->nfr && nl < 2 * MAX_INLINE; i++) {
			const struct gobin_frame *f = &last->fr[i];
			uint64_t fid = pprof_function(b->p, f->function, f->function, f->file, 0);
			if (!fid) {
				*rc = -ENOMEM;
				return 0;
			}
			lines[nl++] = (struct pprof_line){fid, f->line};
		}
	}
	uint64_t id = pprof_location(b->p, mapping_of(b, b->dpcs[0] - 1), b->dpcs[0] - 1, lines, nl);
	if (!id) {
		*rc = -ENOMEM;
		return 0;
	}
	if (!final && !u64map_get(&b->locmap, b->dpcs[0], NULL)) {
		if (b->nlocs == b->caplocs) {
			size_t cap = b->caplocs ? b->caplocs * 2 : 256;
			struct loccache *n = realloc(b->locs, cap * sizeof(*n));
			if (!n) {
				*rc = -ENOMEM;
				return 0;
			}
			b->locs = n;
			b->caplocs = cap;
		}
		struct loccache *l = &b->locs[b->nlocs];
		l->pcs = arena_alloc(&b->pool, b->nd);
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
	}
	b->nd = 0;
	b->dlast = -1;
	return id;
}

/* An unsymbolized PC: a location with the address only. */
static uint64_t raw_location(struct builder *b, uint64_t pc)
{
	return pprof_location(b->p, mapping_of(b, pc - 1), pc - 1, NULL, 0);
}

#define LCACHE 8192

/* locmap lookup through a direct-mapped cache: stacks repeat the same few
 * thousand PCs, and this is the per-frame hot path. */
static inline bool loc_lookup(struct builder *b, uint64_t pc, uint32_t *li)
{
	size_t slot = (pc ^ (pc >> 13)) & (LCACHE - 1);
	if (pc && b->lcache[slot].pc == pc) {	/* 0 marks an empty slot */
		*li = b->lcache[slot].li;
		return true;
	}
	if (!u64map_get(&b->locmap, pc, li))
		return false;
	b->lcache[slot].pc = pc;
	b->lcache[slot].li = *li;
	return true;
}

static inline bool same_pcs(const uint64_t *a, const uint64_t *b, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		if (a[i] != b[i])
			return false;
	return true;
}

/* profileBuilder.appendLocsForStack */
static int locs_for_stack(struct builder *b, const uint64_t *stk, uint32_t n, uint64_t *locs,
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
			if ((id = deck_emit(b, false, &rc)))
				locs[(*nlocs)++] = id;
			if (rc)
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
			if ((id = deck_emit(b, false, &rc)))
				locs[(*nlocs)++] = id;
			if (rc)
				return rc;
			if (!(id = raw_location(b, pc)))
				return -ENOMEM;
			locs[(*nlocs)++] = id;
			i++;
			continue;
		}
		if (!strcmp(pi->fr[0].function, "runtime.goexit")) {
			if ((id = deck_emit(b, false, &rc)))
				locs[(*nlocs)++] = id;
			if (rc)
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
		if ((id = deck_emit(b, false, &rc)))
			locs[(*nlocs)++] = id;
		if (rc)
			return rc;
		deck_try_add(b, pc, &f0, inl, pidx);	/* deck empty: succeeds */
		i++;
	}
	/* The last location may need the final inline expansion; it is not
	 * cached (its PCs are cut short). */
	bool final = b->nd && b->dinl[b->nd - 1];
	if ((id = deck_emit(b, final, &rc)))
		locs[(*nlocs)++] = id;
	return rc;
}

static void builder_free(struct builder *b)
{
	pprof_free(b->p);
	b->p = NULL;
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
	memset(b, 0, sizeof(*b));	/* safe to call again */
}

static int builder_init(struct builder *b, const struct gobin *g, int64_t rate, int64_t time_ns)
{
	memset(b, 0, sizeof(*b));
	b->g = g;
	b->dlast = -1;
	b->rate = rate;
	goheap_init(&b->pool);
	b->p = pprof_new();
	b->lcache = calloc(LCACHE, sizeof(*b->lcache));
	b->stkbuf = malloc(2 * GOHEAP_NSTK_LIMIT * sizeof(*b->stkbuf));
	if (!b->p || !b->lcache || !b->stkbuf || u64map_init(&b->pcmap, 4096) ||
	    u64map_init(&b->locmap, 4096))
		return -ENOMEM;
	if (pprof_add_sample_type(b->p, "alloc_objects", "count") ||
	    pprof_add_sample_type(b->p, "alloc_space", "bytes") ||
	    pprof_add_sample_type(b->p, "inuse_objects", "count") ||
	    pprof_add_sample_type(b->p, "inuse_space", "bytes") ||
	    pprof_set_period(b->p, "space", "bytes", rate))
		return -ENOMEM;
	pprof_set_time(b->p, time_ns, 0);
	if (g->text_limit > g->text_start) {
		const char *bid = g->gnu_build_id[0] ? g->gnu_build_id : g->go_build_id;
		b->mapping = pprof_mapping(b->p, g->text_start, g->text_limit,
					   g->text_offset + (g->text_start - (g->text_vaddr + g->bias)),
					   g->exe, bid, true, g->has_pclntab);
		if (!b->mapping)
			return -ENOMEM;
	}
	return 0;
}

/* One bucket with the record its view reports (writeHeapProto's loop). */
static int builder_add(struct builder *b, const struct go_bucket *bk, const struct go_memrec *r)
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
		skip = 0;	/* Go keeps the whole stack then */
	/* An empty stack (nstk 0 from the target) has stk NULL: no locations,
	 * and no pointer arithmetic on NULL. */
	if (nstk && (rc = locs_for_stack(b, bk->stk + skip, nstk - skip, b->stkbuf, &nlocs)))
		return rc;
	if (nlocs == 0 && skip && (rc = locs_for_stack(b, bk->stk, nstk, b->stkbuf, &nlocs)))
		return rc;
	int64_t ao = (int64_t)r->allocs, ab = (int64_t)r->alloc_bytes;
	int64_t io = (int64_t)(r->allocs - r->frees), ib = (int64_t)(r->alloc_bytes - r->free_bytes);
	int64_t v[4];
	goheap_scale_heap_sample(ao, ab, b->rate, &v[0], &v[1]);
	goheap_scale_heap_sample(io, ib, b->rate, &v[2], &v[3]);
	int64_t bsize = ao > 0 ? ab / ao : 0;
	struct pprof_label lab = {.key = "bytes", .str = NULL, .num = bsize};
	if (pprof_add_sample(b->p, b->stkbuf, nlocs, v, &lab, bsize != 0 ? 1 : 0))
		return -ENOMEM;
	return 0;
}

static int builder_comments(struct builder *b, const struct go_heap *h, enum goheap_view view)
{
	char comment[320];
	snprintf(comment, sizeof(comment), "pushprof go heap: view=%s buckets=%zu rate=%" PRId64
		 " cycle=%" PRIu32 " truncated_stacks=%" PRIu64, goheap_view_name(view), h->n, h->rate,
		 h->cycle >> 1, h->truncated_stacks);
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
	struct builder b;
	int rc = builder_init(&b, g, h->rate, h->time_ns);
	*out = NULL;
	if (!rc)
		rc = builder_comments(&b, h, view);
	bool clear = view == GOHEAP_VIEW_RUNTIME && goheap_all_active_clear(h);
	for (size_t i = 0; !rc && i < h->n; i++) {
		struct go_memrec r = goheap_bucket_record(h, &h->buckets[i], view, clear);
		rc = builder_add(&b, &h->buckets[i], &r);
	}
	if (rc) {
		pp_errf(err, rc, "building the heap profile: %s", strerror(-rc));
	} else {
		*out = b.p;
		b.p = NULL;
	}
	builder_free(&b);
	return rc;
}

/* ---- labels and the one-call snapshot ------------------------------------ */

int goheap_series_labels(pid_t pid, const struct gobin *g, const char *node,
			 const char *trigger, enum goheap_view view,
			 const struct pp_labels *external, struct pp_labels *out,
			 struct pp_err *err)
{
	char pidbuf[24], comm[64] = "", cg[4096] = "";
	snprintf(pidbuf, sizeof(pidbuf), "%d", (int)pid);
	proc_comm(pid, comm, sizeof(comm));
	if (proc_cgroup(pid, NULL, cg, sizeof(cg)))
		cg[0] = '\0';
	if (pp_labels_set(out, "__name__", "memory") ||
	    pp_labels_set(out, "node", node ? node : "") ||
	    pp_labels_set(out, "pid", pidbuf) || pp_labels_set(out, "comm", comm) ||
	    pp_labels_set(out, "executable", g->exe ? g->exe : "") ||
	    pp_labels_set(out, "cgroup", cg) ||
	    pp_labels_set(out, "trigger", trigger ? trigger : "on_demand") ||
	    pp_labels_set(out, "view", goheap_view_name(view)))
		return pp_errf(err, -ENOMEM, "out of memory");
	for (size_t i = 0; external && i < external->n; i++) {
		if (pp_labels_get(out, external->v[i].name))
			continue;
		if (pp_labels_set(out, external->v[i].name, external->v[i].value))
			return pp_errf(err, -ENOMEM, "out of memory");
	}
	/* Empty values mean "no label" to Parca. */
	static const char *const optional[] = {"node", "comm", "cgroup"};
	for (size_t i = 0; i < 3; i++) {
		const char *v = pp_labels_get(out, optional[i]);
		if (v && !*v)
			pp_labels_del(out, optional[i]);
	}
	pp_labels_sort(out);
	return 0;
}

/*
 * Encode and gzip at level 1 (gzip.BestSpeed), as runtime/pprof does for
 * its own profiles: on a 100,000-bucket heap, level 6 costs more than
 * reading and building together, for ~15% smaller output.
 */
static int encode_fast(const struct pprof *p, uint8_t **gz, size_t *gzlen, struct pp_err *err)
{
	uint8_t *raw = NULL, *buf = NULL;
	size_t len = 0;
	z_stream zs;
	int rc = pprof_encode(p, false, &raw, &len, err);
	if (rc)
		return rc;
	memset(&zs, 0, sizeof(zs));
	rc = -ENOMEM;
	if (len > UINT32_MAX) {
		rc = pp_errf(err, -E2BIG, "profile of %zu bytes too large", len);
		goto out;
	}
	if (deflateInit2(&zs, Z_BEST_SPEED, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
		pp_errf(err, rc, "gzip: deflateInit failed");
		goto out;
	}
	size_t cap = deflateBound(&zs, len);
	if (!(buf = malloc(cap))) {
		deflateEnd(&zs);
		pp_errf(err, rc, "gzip: out of memory");
		goto out;
	}
	zs.next_in = raw;
	zs.avail_in = (uInt)len;
	zs.next_out = buf;
	zs.avail_out = (uInt)cap;
	if (deflate(&zs, Z_FINISH) != Z_STREAM_END) {
		deflateEnd(&zs);
		rc = pp_errf(err, -EIO, "gzip: deflate failed");
		goto out;
	}
	*gzlen = zs.total_out;
	deflateEnd(&zs);
	*gz = buf;
	buf = NULL;
	rc = 0;
out:
	free(buf);
	free(raw);
	return rc;
}

/* A snapshot streams the buckets straight into the profile builder. */
struct snap_stream {
	struct stream st;
	struct builder *b;
	enum goheap_view view;
	bool all_cycles;	/* runtime view, second pass: no GC published yet */
	bool any_active;	/* some bucket has published (or C%3) data */
};

static int snap_fn(struct stream *st, const struct go_heap *h, const struct go_bucket *bk)
{
	struct snap_stream *ss = (struct snap_stream *)st;
	if (ss->view == GOHEAP_VIEW_RUNTIME && !ss->all_cycles) {
		struct go_memrec a = goheap_bucket_record(h, bk, GOHEAP_VIEW_RUNTIME, false);
		if (a.allocs || a.frees)
			ss->any_active = true;
	}
	struct go_memrec r = goheap_bucket_record(h, bk, ss->view, ss->all_cycles);
	ss->b->rate = h->rate;
	return builder_add(ss->b, bk, &r);
}

int goheap_snapshot(pid_t pid, const struct gobin *g, const struct goheap_snapshot_opts *o,
		    struct goheap_snapshot *out, struct pp_err *err)
{
	struct go_heap h;
	struct builder b = {.p = NULL};
	struct pprof *p = NULL;
	int64_t t0 = now_ns(CLOCK_MONOTONIC);
	int rc;

	memset(out, 0, sizeof(*out));
	for (int pass = 0; pass < 2; pass++) {
		struct snap_stream ss = {.st.fn = snap_fn, .b = &b, .view = o->view,
					 .all_cycles = pass == 1};
		goheap_init(&h);
		builder_free(&b);
		/* The rate and time are known once the walk has begun: snap_fn
		 * passes the rate on, period and time are set at the end. */
		if ((rc = builder_init(&b, g, 0, 0)))
			goto nomem;
		if ((rc = walk(pid, g, o->max_buckets, o->max_depth, &h, &ss.st, err)))
			goto out;
		/* runtime.MemProfile's "clear" case: nothing published by any GC
		 * yet, so it reports every cycle - walk again, adding them all. */
		if (o->view == GOHEAP_VIEW_RUNTIME && !ss.any_active && h.n && pass == 0)
			continue;
		break;
	}
	if ((rc = builder_comments(&b, &h, o->view)))
		goto nomem;
	if (pprof_set_period(b.p, "space", "bytes", h.rate)) {
		rc = -ENOMEM;
		goto nomem;
	}
	pprof_set_time(b.p, h.time_ns, 0);
	p = b.p;
	b.p = NULL;
	builder_free(&b);	/* before encoding: the symbol caches are not needed */
	out->buckets = h.n;
	out->complete = h.complete;
	memcpy(out->incomplete_reason, h.incomplete_reason, sizeof(out->incomplete_reason));
	out->truncated_stacks = h.truncated_stacks;
	out->rate = h.rate;
	out->read_ns = h.duration_ns;
	if ((rc = encode_fast(p, &out->gz, &out->len, err)))
		goto out;
	if ((rc = goheap_series_labels(pid, g, o->node, o->trigger, o->view, o->external,
				       &out->labels, err)))
		goto out;
	out->samples = pprof_sample_count(p);
	out->total_ns = now_ns(CLOCK_MONOTONIC) - t0;
	goto out;
nomem:
	pp_errf(err, rc, "building the heap profile: %s", strerror(-rc));
out:
	if (rc)
		goheap_snapshot_free(out);
	builder_free(&b);
	pprof_free(p);
	goheap_free(&h);
	return rc;
}

void goheap_snapshot_free(struct goheap_snapshot *s)
{
	free(s->gz);
	pp_labels_free(&s->labels);
	memset(s, 0, sizeof(*s));
}
