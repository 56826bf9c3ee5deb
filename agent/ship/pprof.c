/*
 * pprof.c - in-memory pprof builder with interning. Its encoding is
 * pprof_encode.c's: the protobuf wire format written straight from the
 * builder's arrays into one exactly sized buffer (the bytes protobuf-c's
 * pack would write: fields in number order, proto3 zeros left out,
 * repeated scalars packed), with no intermediate message tree. What is
 * done with a finished profile's bytes (gzip, gunzip, validation) is in
 * pprof_bytes.c. The state both share is pprof_internal.h.
 *
 * Every entity lives in a growable array; its id is index + 1. A small
 * open-addressing hash table per entity kind maps a key to that index, so
 * interning is O(1) and identical samples (same location ids, same labels
 * in the same order) merge by adding values. Samples' keys and values and
 * locations' lines live in shared pools indexed by offset: a 100,000-sample
 * heap profile is a few large arrays, not 300,000 small mallocs. A
 * profile that does not merge (pprof_set_merge) keeps each sample only as
 * its encoded bytes in one mmap'd buffer: no table, no keys, no values.
 */
#include "pprof.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "grow.h"
#include "pprof_internal.h"

/* Ids and string indexes are kept in uint32 slots in the hash tables. */
#define PPROF_MAX_ENTRIES 0x7fffffffu

/* ---- varints and hashing --------------------------------------------- */

static uint64_t mix64(uint64_t h, uint64_t v)
{
	h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
	h *= 0xff51afd7ed558ccdull;
	return h ^ (h >> 32);
}

static uint64_t hash_bytes(uint64_t h, const void *data, size_t len)
{
	const unsigned char *p = data;
	uint64_t v;

	while (len >= 8) {
		memcpy(&v, p, 8);
		h = mix64(h, v);
		p += 8;
		len -= 8;
	}
	v = 0;
	memcpy(&v, p, len);
	return mix64(h, v ^ ((uint64_t)len << 56));
}

typedef int (*ht_eq_fn)(const struct pprof *p, uint32_t idx, const void *key);

/* Index of the entry equal to key, or -1. */
static int64_t ht_find(const struct htab *t, uint32_t h, ht_eq_fn eq, const struct pprof *p,
		       const void *key)
{
	if (!t->s)
		return -1;
	for (uint32_t i = h & t->mask;; i = (i + 1) & t->mask) {
		const struct ht_slot *s = &t->s[i];
		if (!s->idx1)
			return -1;
		if (s->h == h && eq(p, s->idx1 - 1, key))
			return s->idx1 - 1;
	}
}

static void ht_put(struct ht_slot *s, uint32_t mask, uint32_t h, uint32_t idx1)
{
	uint32_t i = h & mask;

	while (s[i].idx1)
		i = (i + 1) & mask;
	s[i].idx1 = idx1;
	s[i].h = h;
}

static int ht_insert(struct htab *t, uint32_t h, uint32_t idx)
{
	if (!t->s || (uint64_t)(t->n + 1) * 2 > (uint64_t)t->mask + 1) {
		uint64_t cap = t->s ? ((uint64_t)t->mask + 1) * 2 : 64;
		if (cap > (1ull << 31))
			return -ENOMEM;
		struct ht_slot *ns = calloc(cap, sizeof(*ns));
		if (!ns)
			return -ENOMEM;
		if (t->s) {
			for (uint64_t i = 0; i <= t->mask; i++)
				if (t->s[i].idx1)
					ht_put(ns, cap - 1, t->s[i].h, t->s[i].idx1);
			free(t->s);
		}
		t->s = ns;
		t->mask = cap - 1;
	}
	ht_put(t->s, t->mask, h, idx + 1);
	t->n++;
	return 0;
}

/* Grow a vector to hold at least n+1 elements. */
static int vec_reserve(void **v, size_t *cap, size_t n, size_t elem)
{
	if (n < *cap)
		return 0;
	if (n >= PPROF_MAX_ENTRIES)
		return -ENOMEM;
	return pp_grow(v, cap, n + 1, elem, 16);
}

/* ---- strings ---------------------------------------------------------- */

static int str_eq(const struct pprof *p, uint32_t idx, const void *key)
{
	return strcmp(p->strs[idx], key) == 0;
}

/* String table index of s (NULL = ""), or -1 on allocation failure. */
static int64_t intern(struct pprof *p, const char *s)
{
	if (!s)
		s = "";
	/* The same string again (a sample label's key, once per sample):
	 * one compare instead of strlen, hash and probe. */
	if (p->last_s == s && p->last_i < p->nstrs && !strcmp(p->strs[p->last_i], s))
		return (int64_t)p->last_i;
	uint32_t h = (uint32_t)hash_bytes(0, s, strlen(s));
	int64_t i = ht_find(&p->strtab, h, str_eq, p, s);
	if (i < 0) {
		if (vec_reserve((void **)&p->strs, &p->capstrs, p->nstrs, sizeof(*p->strs)))
			return -1;
		char *d = strdup(s);
		if (!d)
			return -1;
		if (ht_insert(&p->strtab, h, p->nstrs)) {
			free(d);
			return -1;
		}
		p->strs[p->nstrs] = d;
		i = (int64_t)p->nstrs++;
	}
	p->last_s = s;
	p->last_i = (size_t)i;
	return i;
}

int pprof_new(struct pprof **out, struct pp_err *err)
{
	struct pprof *p = calloc(1, sizeof(*p));

	*out = NULL;
	if (!p)
		return pp_errf(err, -ENOMEM, "pprof: out of memory");
	if (intern(p, "") != 0) { /* string_table[0] == "" */
		pprof_free(p);
		return pp_errf(err, -ENOMEM, "pprof: out of memory");
	}
	*out = p;
	return 0;
}

void pprof_free(struct pprof *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->nstrs; i++)
		free(p->strs[i]);
	void *arrays[] = { p->strs,	p->strtab.s, p->stypes,	   p->comments, p->maps,
			   p->maptab.s, p->funcs,    p->functab.s, p->locs,	p->loctab.s,
			   p->lines,	p->samples,  p->skey,	   p->vals,	p->sampletab.s };
	for (size_t i = 0; i < sizeof(arrays) / sizeof(arrays[0]); i++)
		free(arrays[i]);
	pp_free_big(p->sbuf, p->capsbuf, 1, p->sbuf_mapped);
	pprof_zs_free(p->zs);
	free(p);
}

/* ---- profile-level fields --------------------------------------------- */

int pprof_add_sample_type(struct pprof *p, const char *type, const char *unit)
{
	/* Samples already added carry one value per type known at the time. */
	if (p->nsamples || p->zs)
		return -EINVAL;
	int64_t t = intern(p, type), u = intern(p, unit);
	if (t < 0 || u < 0 ||
	    vec_reserve((void **)&p->stypes, &p->capstypes, p->nstypes, sizeof(*p->stypes)))
		return -ENOMEM;
	p->stypes[p->nstypes++] = (struct value_type){ t, u };
	return 0;
}

int pprof_set_period(struct pprof *p, const char *type, const char *unit, int64_t period)
{
	int64_t t = intern(p, type), u = intern(p, unit);

	if (t < 0 || u < 0)
		return -ENOMEM;
	p->period_type = (struct value_type){ t, u };
	p->period = period;
	return 0;
}

void pprof_set_time(struct pprof *p, int64_t time_nanos, int64_t duration_nanos)
{
	p->time_nanos = time_nanos;
	p->duration_nanos = duration_nanos;
}

int pprof_add_comment(struct pprof *p, const char *comment)
{
	int64_t c = intern(p, comment);

	if (c < 0 ||
	    vec_reserve((void **)&p->comments, &p->capcomments, p->ncomments, sizeof(*p->comments)))
		return -ENOMEM;
	p->comments[p->ncomments++] = c;
	return 0;
}

/* pprof stores the default type as the string index of the type's name. */
int pprof_set_default_sample_type(struct pprof *p, const char *type)
{
	for (size_t i = 0; i < p->nstypes; i++) {
		if (strcmp(p->strs[p->stypes[i].type], type) == 0) {
			p->default_sample_type = p->stypes[i].type;
			return 0;
		}
	}
	return -ENOENT;
}

/* ---- mappings, functions, locations ----------------------------------- */

struct map_key {
	uint64_t start, limit, offset;
	int64_t file;
};

static int map_eq(const struct pprof *p, uint32_t idx, const void *key)
{
	const struct map_key *k = key;
	const struct mapping *m = &p->maps[idx];

	return m->start == k->start && m->limit == k->limit && m->offset == k->offset &&
	       m->file == k->file;
}

uint64_t pprof_mapping(struct pprof *p, uint64_t start, uint64_t limit, uint64_t offset,
		       const char *file, const char *build_id, bool has_functions,
		       bool has_line_numbers)
{
	struct map_key k = { start, limit, offset, intern(p, file) };
	int64_t b = intern(p, build_id);

	if (k.file < 0 || b < 0)
		return 0;
	uint32_t h = (uint32_t)hash_bytes(1, &k, sizeof(k));
	int64_t i = ht_find(&p->maptab, h, map_eq, p, &k);
	if (i >= 0)
		return i + 1;
	if (vec_reserve((void **)&p->maps, &p->capmaps, p->nmaps, sizeof(*p->maps)) ||
	    ht_insert(&p->maptab, h, p->nmaps))
		return 0;
	p->maps[p->nmaps] = (struct mapping){ start, limit,	    offset,	     k.file,
					      b,     has_functions, has_line_numbers };
	return ++p->nmaps;
}

static int func_eq(const struct pprof *p, uint32_t idx, const void *key)
{
	return memcmp(&p->funcs[idx], key, sizeof(struct function)) == 0;
}

uint64_t pprof_function(struct pprof *p, const char *name, const char *system_name,
			const char *filename, int64_t start_line)
{
	struct function f = { intern(p, name), intern(p, system_name ? system_name : name),
			      intern(p, filename), start_line };

	if (f.name < 0 || f.system_name < 0 || f.filename < 0)
		return 0;
	uint32_t h = (uint32_t)hash_bytes(2, &f, sizeof(f));
	int64_t i = ht_find(&p->functab, h, func_eq, p, &f);
	if (i >= 0)
		return i + 1;
	if (vec_reserve((void **)&p->funcs, &p->capfuncs, p->nfuncs, sizeof(*p->funcs)) ||
	    ht_insert(&p->functab, h, p->nfuncs))
		return 0;
	p->funcs[p->nfuncs] = f;
	return ++p->nfuncs;
}

struct loc_key {
	uint64_t mapping_id, address;
	const struct pprof_line *lines;
	size_t nlines;
};

static int loc_eq(const struct pprof *p, uint32_t idx, const void *key)
{
	const struct loc_key *k = key;
	const struct location *l = &p->locs[idx];

	if (k->address)
		return l->address == k->address && l->mapping_id == k->mapping_id;
	if (l->address || l->mapping_id != k->mapping_id || l->nlines != k->nlines)
		return 0;
	const struct pprof_line *ll = l->nlines ? p->lines + l->line_off : NULL;
	for (size_t i = 0; i < k->nlines; i++)
		if (ll[i].function_id != k->lines[i].function_id || ll[i].line != k->lines[i].line)
			return 0;
	return 1;
}

uint64_t pprof_location(struct pprof *p, uint64_t mapping_id, uint64_t address,
			const struct pprof_line *lines, size_t nlines)
{
	struct loc_key k = { mapping_id, address, lines, nlines };
	uint64_t h = hash_bytes(3, &mapping_id, sizeof(mapping_id));

	if (mapping_id > p->nmaps || (nlines && !lines) || nlines > 4096)
		return 0;
	for (size_t i = 0; i < nlines; i++)
		if (!lines[i].function_id || lines[i].function_id > p->nfuncs)
			return 0;
	if (address) {
		h = hash_bytes(h, &address, sizeof(address));
	} else {
		for (size_t i = 0; i < nlines; i++) {
			h = mix64(h, lines[i].function_id);
			h = mix64(h, (uint64_t)lines[i].line);
		}
	}
	int64_t i = ht_find(&p->loctab, (uint32_t)h, loc_eq, p, &k);
	if (i >= 0)
		return i + 1;
	if ((nlines && vec_reserve((void **)&p->lines, &p->caplines, p->nlines + nlines - 1,
				   sizeof(*p->lines))) ||
	    vec_reserve((void **)&p->locs, &p->caplocs, p->nlocs, sizeof(*p->locs)) ||
	    ht_insert(&p->loctab, (uint32_t)h, p->nlocs))
		return 0;
	if (nlines)
		memcpy(p->lines + p->nlines, lines, nlines * sizeof(*lines));
	p->locs[p->nlocs] =
		(struct location){ mapping_id, address, (uint32_t)p->nlines, (uint32_t)nlines };
	p->nlines += nlines;
	return ++p->nlocs;
}

/* ---- samples ---------------------------------------------------------- */

struct sample_key {
	const uint8_t *key;
	size_t loc_len, lab_len;
};

static int sample_eq(const struct pprof *p, uint32_t idx, const void *key)
{
	const struct sample_key *k = key;
	const struct sample *s = &p->samples[idx];

	return s->loc_len == k->loc_len && s->lab_len == k->lab_len &&
	       memcmp(p->skey + s->key_off, k->key, k->loc_len + k->lab_len) == 0;
}

/* A varint field, left out when zero (proto3). */
static uint8_t *put_field(uint8_t *o, uint32_t f, uint64_t v)
{
	return v ? put_v(put_v(o, (uint64_t)f << 3), v) : o;
}

/* Label field 3 of a Sample: at most 2 + 4 * 11 bytes. */
/* A sample's label with its strings interned: 0, -EINVAL (no key) or
 * -ENOMEM. */
static int label_of(struct pprof *p, const struct pprof_label *in, struct slabel *l)
{
	*l = (struct slabel){ 0 };
	if (!in->key || !*in->key)
		return -EINVAL;
	l->key = intern(p, in->key);
	if (in->str) {
		l->str = intern(p, in->str);
	} else {
		l->num = in->num;
		if (in->num_unit)
			l->num_unit = intern(p, in->num_unit);
	}
	return l->key < 0 || l->str < 0 || l->num_unit < 0 ? -ENOMEM : 0;
}

/* Written in place behind its length, counted first (at most 29: one
 * byte; a memcpy from a staging buffer was most of a heap sample's
 * label cost). */
static uint8_t *put_label(uint8_t *o, const struct slabel *l)
{
	const uint64_t f[4] = { (uint64_t)l->key, (uint64_t)l->str, (uint64_t)l->num,
				(uint64_t)l->num_unit };
	size_t n = 0;
	for (int i = 0; i < 4; i++)
		n += f[i] ? 1 + vlen(f[i]) : 0;
	*o++ = (3 << 3) | 2;
	*o++ = (uint8_t)n;
	for (int i = 0; i < 4; i++)
		o = put_field(o, (uint32_t)i + 1, f[i]);
	return o;
}

/* The most put_label writes: 2 + 6 (key) + 6 (str) + 11 (num) + 6 (unit). */
#define LABEL_MOST 31

int pprof_set_merge(struct pprof *p, bool merge)
{
	if (p->nsamples)
		return -EINVAL;
	p->nomerge = !merge;
	return 0;
}

/* Room for n more bytes in sbuf (grow.h: pp_grow_big). */
int pprof_sbuf_room(struct pprof *p, size_t n)
{
	if (p->nsbuf + n < p->nsbuf)
		return -ENOMEM;
	return pp_grow_big(&p->sbuf, &p->capsbuf, &p->sbuf_mapped, p->nsbuf + n, 1, 16 << 10);
}

/* An unmerged sample, encoded now as w_sample would, in one pass over
 * its location ids. Lengths go in front of what they measure, so each is
 * given the room of the most it can be (ids at most p->nlocs, labels
 * LABEL_MOST) and what follows is moved only when it came out short
 * enough to need a shorter length, which a heap sample never does. Checks
 * the location ids as pprof_add_sample does, before any label's strings
 * are interned. */
static int add_unmerged(struct pprof *p, const uint64_t *locs, size_t nlocs, const int64_t *values,
			const struct pprof_label *labels, size_t nlabels)
{
	size_t vb = 0;
	for (size_t v = 0; v < p->nstypes; v++)
		vb += vlen((uint64_t)values[v]);
	size_t lb_most = nlocs * vlen(p->nlocs), lbl = vlen(lb_most);
	size_t most = (nlocs ? 1 + lbl + lb_most : 0) + 1 + vlen(vb) + vb + LABEL_MOST * nlabels;
	size_t hl = 1 + vlen(most);
	if (pprof_sbuf_room(p, hl + most))
		return -ENOMEM;
	uint8_t *start = p->sbuf + p->nsbuf, *body = start + hl, *o = body;
	if (nlocs) {
		uint8_t *ids = body + 1 + lbl;
		o = ids;
		for (size_t j = 0; j < nlocs; j++) {
			if (!locs[j] || locs[j] > p->nlocs)
				return -EINVAL;
			o = put_v(o, locs[j]);
		}
		size_t lb = (size_t)(o - ids);
		body[0] = (1 << 3) | 2;
		uint8_t *at = put_v(body + 1, lb);
		if (at != ids) {
			memmove(at, ids, lb);
			o = at + lb;
		}
	}
	*o++ = (2 << 3) | 2;
	o = put_v(o, vb);
	for (size_t v = 0; v < p->nstypes; v++)
		o = put_v(o, (uint64_t)values[v]);
	for (size_t i = 0; i < nlabels; i++) {
		struct slabel l;
		int rc = label_of(p, &labels[i], &l);
		if (rc)
			return rc;
		o = put_label(o, &l);
	}
	size_t n = (size_t)(o - body);
	start[0] = (2 << 3) | 2;
	uint8_t *h = put_v(start + 1, n);
	if (h != body)
		memmove(h, body, n);
	p->nsbuf += (size_t)(h - start) + n;
	p->nsamples++;
	return p->zs && p->nsbuf >= PPROF_STAGE ? pprof_zs_flush(p) : 0;
}

int pprof_add_sample(struct pprof *p, const uint64_t *locs, size_t nlocs, const int64_t *values,
		     const struct pprof_label *labels, size_t nlabels)
{
	if (!p->nstypes || !values || (nlocs && !locs) || (nlabels && !labels) ||
	    nlocs > (1u << 24) || nlabels > (1u << 16))
		return -EINVAL;
	if (p->nomerge)
		return add_unmerged(p, locs, nlocs, values, labels, nlabels);
	for (size_t i = 0; i < nlocs; i++)
		if (!locs[i] || locs[i] > p->nlocs)
			return -EINVAL;
	/* The key is written at the pool's end: kept there if the sample is new. */
	if (vec_reserve((void **)&p->skey, &p->capskey, p->nskey + 5 * nlocs + 48 * nlabels,
			sizeof(*p->skey)))
		return -ENOMEM;
	uint8_t *kb = p->skey + p->nskey, *ke = kb;
	for (size_t j = 0; j < nlocs; j++)
		ke = put_v(ke, locs[j]); /* ids < 2^31: at most 5 bytes */
	size_t loc_len = (size_t)(ke - kb);
	for (size_t i = 0; i < nlabels; i++) {
		struct slabel l;
		int rc = label_of(p, &labels[i], &l);
		if (rc)
			return rc;
		/* intern may not move skey: kb and ke stay valid. */
		ke = put_label(ke, &l);
	}
	struct sample_key k = { kb, loc_len, (size_t)(ke - kb) - loc_len };
	uint64_t h = hash_bytes(4, kb, (size_t)(ke - kb)) ^ loc_len;
	int64_t i = ht_find(&p->sampletab, (uint32_t)h, sample_eq, p, &k);
	if (i >= 0) {
		/* Saturating: values can come from hostile memory (a Go heap's
		 * counts) and signed overflow is undefined. */
		for (size_t v = 0; v < p->nstypes; v++) {
			int64_t *acc = &p->vals[(size_t)i * p->nstypes + v];
			if (__builtin_add_overflow(*acc, values[v], acc))
				*acc = values[v] > 0 ? INT64_MAX : INT64_MIN;
		}
		return 0;
	}
	/* Room first, so a failure leaves the profile as it was. */
	if (vec_reserve((void **)&p->vals, &p->capvals, (p->nsamples + 1) * p->nstypes - 1,
			sizeof(*p->vals)) ||
	    vec_reserve((void **)&p->samples, &p->capsamples, p->nsamples, sizeof(*p->samples)) ||
	    ht_insert(&p->sampletab, (uint32_t)h, p->nsamples))
		return -ENOMEM;
	p->samples[p->nsamples] =
		(struct sample){ (uint32_t)p->nskey, (uint32_t)k.loc_len, (uint32_t)k.lab_len };
	p->nskey += k.loc_len + k.lab_len;
	memcpy(p->vals + p->nsamples * p->nstypes, values, p->nstypes * sizeof(*values));
	p->nsamples++;
	return 0;
}

size_t pprof_sample_count(const struct pprof *p)
{
	return p->nsamples;
}
