/*
 * grow.h - the one grow-by-doubling for the agent's vectors.
 *
 * A vector is a pointer, a capacity and a count the caller keeps; before
 * storing element `need - 1` the caller asks pp_grow for room. Capacity
 * starts at `first` and doubles, so n appends cost O(n) copies.
 * Not thread-safe by itself: the caller owns the vector.
 */
#ifndef PUSHPROF_GROW_H
#define PUSHPROF_GROW_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* The capacity pp_grow and pp_grow_big move to (need > cap): 0 with *nc
 * set, or -ENOMEM when it or its size in bytes would overflow. */
static inline int pp_grow_cap(size_t cap, size_t need, size_t elem, size_t first, size_t *nc)
{
	size_t c = cap ? cap : (first ? first : 1);
	while (c < need) {
		if (c > SIZE_MAX / 2)
			return -ENOMEM;
		c *= 2;
	}
	if (elem && c > SIZE_MAX / elem)
		return -ENOMEM;
	*nc = c;
	return 0;
}

/*
 * Make *(T **)pp hold at least `need` elements of `elem` bytes: nothing
 * when *cap already does, else realloc to the first of first, 2*first, ...
 * (or 2*cap, 4*cap, ... when *cap > 0) that does. `pp` is the address of
 * the caller's typed pointer (T **), so no cast is needed at the call.
 * New elements are uninitialised. 0, or -ENOMEM (allocation failed or the
 * size would overflow) with *pp and *cap unchanged, the old block still
 * the caller's.
 */
static inline int pp_grow(void *pp, size_t *cap, size_t need, size_t elem, size_t first)
{
	if (need <= *cap)
		return 0;
	size_t nc;
	if (pp_grow_cap(*cap, need, elem, first, &nc))
		return -ENOMEM;
	void *old;
	memcpy(&old, pp, sizeof(old));
	void *nv = realloc(old, nc * elem);
	if (!nv)
		return -ENOMEM;
	memcpy(pp, &nv, sizeof(nv));
	*cap = nc;
	return 0;
}

/*
 * Vectors that can grow to hundreds of MiB (a 100,000-bucket heap walk, a
 * heap profile's encoded samples) and are mostly small (an idle program's
 * few dozen buckets). Small, they live in malloc's heap: a mapping of
 * their own each time cost an mmap and an munmap per snapshot, and each
 * munmap flushes the TLB of every CPU the agent's threads ran on (a third
 * of gotrack's worker's time on an idle node). Past PP_GROW_MAP_BYTES the
 * vector moves once into a mapping of its own and grows by mremap, which
 * moves page tables instead of copying (realloc of a large block copies
 * once malloc's dynamic mmap threshold has risen past its size).
 * *mapped says which it is; pp_free_big frees either. Otherwise as
 * pp_grow: `first` elements at least, doubling; 0 or -ENOMEM with the
 * vector unchanged.
 */
#define PP_GROW_MAP_BYTES (1u << 20)

static inline int pp_grow_big(void *pp, size_t *cap, bool *mapped, size_t need, size_t elem,
			      size_t first)
{
	if (need <= *cap)
		return 0;
	size_t nc;
	if (!elem || pp_grow_cap(*cap, need, elem, first, &nc))
		return -ENOMEM;
	size_t bytes = nc * elem;
	if (!*mapped && bytes < PP_GROW_MAP_BYTES)
		return pp_grow(pp, cap, need, elem, first);
	void *old;
	memcpy(&old, pp, sizeof(old));
	void *nv;
	if (*mapped) {
		nv = mremap(old, *cap * elem, bytes, MREMAP_MAYMOVE);
	} else {
		nv = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (nv != MAP_FAILED && old) {
			memcpy(nv, old, *cap * elem); /* once, under a MiB */
			free(old);
		}
	}
	if (nv == MAP_FAILED)
		return -ENOMEM;
	memcpy(pp, &nv, sizeof(nv));
	*cap = nc;
	*mapped = true;
	return 0;
}

static inline void pp_free_big(void *p, size_t cap, size_t elem, bool mapped)
{
	if (mapped)
		munmap(p, cap * elem);
	else
		free(p);
}

/*
 * A growing byte string for encoders and rewriters: append, and check oom
 * once at the end (an allocation failure is sticky: later appends do
 * nothing). p is NUL-terminated after every append, so text can be used
 * as a C string; binary data is fine too (n is its length). Zero-initialise;
 * the owner frees p.
 */
struct pp_buf {
	char *p;
	size_t n, cap;
	bool oom;
};

static inline void pp_buf_add(struct pp_buf *b, const void *d, size_t len)
{
	if (b->oom)
		return;
	if (b->n + len + 1 < b->n || pp_grow(&b->p, &b->cap, b->n + len + 1, 1, 256)) {
		b->oom = true;
		return;
	}
	if (len)
		memcpy(b->p + b->n, d, len);
	b->n += len;
	b->p[b->n] = '\0';
}

/* The string so far ("" when nothing was added), or NULL after oom. */
static inline const char *pp_buf_str(struct pp_buf *b)
{
	if (!b->p && !b->oom)
		pp_buf_add(b, "", 0);
	return b->oom ? NULL : b->p;
}

#endif
