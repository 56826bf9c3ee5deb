/*
 * pprof_internal.h - the builder's state, shared by pprof.c (building,
 * interning) and pprof_encode.c (the wire format). Not an API: use pprof.h.
 */
#ifndef PUSHPROF_PPROF_INTERNAL_H
#define PUSHPROF_PPROF_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pprof.h"

/* ---- varints ----------------------------------------------------------- */

static inline size_t vlen(uint64_t v)
{
	return (size_t)(63 - __builtin_clzll(v | 1)) / 7 + 1;
}

static inline uint8_t *put_v(uint8_t *o, uint64_t v)
{
	while (v >= 0x80) {
		*o++ = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	*o++ = (uint8_t)v;
	return o;
}

struct ht_slot {
	uint32_t idx1; /* index + 1; 0 = empty */
	uint32_t h;
};

struct htab {
	struct ht_slot *s;
	uint32_t mask; /* capacity - 1 (power of two), 0 when unallocated */
	uint32_t n;
};

/* ---- builder state ---------------------------------------------------- */

struct mapping {
	uint64_t start, limit, offset;
	int64_t file, build_id;
	bool has_functions, has_line_numbers;
};

struct function {
	int64_t name, system_name, filename, start_line;
};

struct location {
	uint64_t mapping_id, address;
	uint32_t line_off, nlines; /* in p->lines */
};

struct slabel {
	int64_t key, str, num, num_unit;
};

/* A sample's key is kept as the bytes it is sent as: its location ids as
 * packed varints (one or two bytes each in a heap profile), then its
 * labels as encoded Label fields. Keys are hashed and compared as bytes
 * (the encoding is canonical) and copied as they are by the encoder.
 * Values are p->vals[i * nstypes ...] for sample i. */
struct sample {
	uint32_t key_off;	   /* in p->skey */
	uint32_t loc_len, lab_len; /* bytes of ids, then of labels */
};

struct value_type {
	int64_t type, unit;
};

struct pprof {
	char **strs;
	size_t nstrs, capstrs;
	struct htab strtab;
	/* intern()'s last answer: the pointer it was given, compared by
	 * content before use (the caller's memory may have changed). */
	const char *last_s;
	size_t last_i;

	struct value_type *stypes;
	size_t nstypes, capstypes;
	struct value_type period_type;
	int64_t period, time_nanos, duration_nanos, default_sample_type;
	int64_t *comments;
	size_t ncomments, capcomments;

	struct mapping *maps;
	size_t nmaps, capmaps;
	struct htab maptab;

	struct function *funcs;
	size_t nfuncs, capfuncs;
	struct htab functab;

	struct location *locs;
	size_t nlocs, caplocs;
	struct htab loctab;

	struct pprof_line *lines; /* every location's lines */
	size_t nlines, caplines;

	struct sample *samples;
	size_t nsamples, capsamples;
	struct htab sampletab;
	uint8_t *skey; /* every sample's key bytes */
	size_t nskey, capskey;
	int64_t *vals; /* nstypes per sample */
	size_t capvals;
	/* pprof_set_merge(p, false): no table, no key pool: each sample is
	 * its whole encoded Sample field, appended here (mmap'd). */
	bool nomerge;
	uint8_t *sbuf;
	size_t nsbuf, capsbuf;
	bool sbuf_mapped; /* pp_grow_big's */
	/* pprof_stream_gzip(): sample types and samples compressed as they
	 * come; sbuf then stages what deflate has not been given yet. */
	struct pprof_zs *zs;
};

/* Room for n more bytes in p->sbuf (pprof.c): 0 or -ENOMEM. */
int pprof_sbuf_room(struct pprof *p, size_t n);
/* Stream: give the staged bytes to deflate (pprof_encode.c): 0 or
 * -ENOMEM (the stream is then failed: encoding will say so). */
int pprof_zs_flush(struct pprof *p);
void pprof_zs_free(struct pprof_zs *zs);

/* Staged bytes handed to deflate at this size. */
#define PPROF_STAGE (64u << 10)

#endif
