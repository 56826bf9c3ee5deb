/*
 * pprof.c - in-memory pprof builder with interning, and its protobuf-c
 * encoding (pprof_encode reads the builder's arrays directly). What is done
 * with a finished profile's bytes (gzip, gunzip, validation) is in
 * pprof_bytes.c.
 *
 * Every entity lives in a growable array; its id is index + 1. A small
 * open-addressing hash table per entity kind maps a key to that index, so
 * interning is O(1) and identical samples (same location ids, same labels
 * in the same order) merge by adding values.
 */
#include "pprof.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "proto/profile.pb-c.h"
#include "grow.h"

/* Ids and string indexes are kept in uint32 slots in the hash tables. */
#define PPROF_MAX_ENTRIES 0x7fffffffu

/* ---- hashing ---------------------------------------------------------- */

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

struct ht_slot {
	uint32_t idx1; /* index + 1; 0 = empty */
	uint32_t h;
};

struct htab {
	struct ht_slot *s;
	uint32_t mask; /* capacity - 1 (power of two), 0 when unallocated */
	uint32_t n;
};

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
	struct pprof_line *lines;
	size_t nlines;
};

struct slabel {
	int64_t key, str, num, num_unit;
};

struct sample {
	uint64_t *locs;
	size_t nlocs;
	int64_t *values;
	struct slabel *labels;
	size_t nlabels;
};

struct value_type {
	int64_t type, unit;
};

struct pprof {
	char **strs;
	size_t nstrs, capstrs;
	struct htab strtab;

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

	struct sample *samples;
	size_t nsamples, capsamples;
	struct htab sampletab;
};

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
	uint32_t h = (uint32_t)hash_bytes(0, s, strlen(s));
	int64_t i = ht_find(&p->strtab, h, str_eq, p, s);
	if (i >= 0)
		return i;
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
	return p->nstrs++;
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
	free(p->strs);
	free(p->strtab.s);
	free(p->stypes);
	free(p->comments);
	free(p->maps);
	free(p->maptab.s);
	free(p->funcs);
	free(p->functab.s);
	for (size_t i = 0; i < p->nlocs; i++)
		free(p->locs[i].lines);
	free(p->locs);
	free(p->loctab.s);
	for (size_t i = 0; i < p->nsamples; i++) {
		free(p->samples[i].locs);
		free(p->samples[i].values);
		free(p->samples[i].labels);
	}
	free(p->samples);
	free(p->sampletab.s);
	free(p);
}

/* ---- profile-level fields --------------------------------------------- */

int pprof_add_sample_type(struct pprof *p, const char *type, const char *unit)
{
	/* Samples already added carry one value per type known at the time. */
	if (p->nsamples)
		return -EINVAL;
	int64_t t = intern(p, type), u = intern(p, unit);
	if (t < 0 || u < 0)
		return -ENOMEM;
	if (vec_reserve((void **)&p->stypes, &p->capstypes, p->nstypes, sizeof(*p->stypes)))
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

	if (c < 0)
		return -ENOMEM;
	if (vec_reserve((void **)&p->comments, &p->capcomments, p->ncomments, sizeof(*p->comments)))
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
	for (size_t i = 0; i < k->nlines; i++)
		if (l->lines[i].function_id != k->lines[i].function_id ||
		    l->lines[i].line != k->lines[i].line)
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
	struct pprof_line *copy = NULL;
	if (nlines) {
		copy = malloc(nlines * sizeof(*copy));
		if (!copy)
			return 0;
		memcpy(copy, lines, nlines * sizeof(*copy));
	}
	if (vec_reserve((void **)&p->locs, &p->caplocs, p->nlocs, sizeof(*p->locs)) ||
	    ht_insert(&p->loctab, (uint32_t)h, p->nlocs)) {
		free(copy);
		return 0;
	}
	p->locs[p->nlocs] = (struct location){ mapping_id, address, copy, nlines };
	return ++p->nlocs;
}

/* ---- samples ---------------------------------------------------------- */

struct sample_key {
	const uint64_t *locs;
	size_t nlocs;
	const struct slabel *labels;
	size_t nlabels;
};

static int sample_eq(const struct pprof *p, uint32_t idx, const void *key)
{
	const struct sample_key *k = key;
	const struct sample *s = &p->samples[idx];

	return s->nlocs == k->nlocs && s->nlabels == k->nlabels &&
	       (!k->nlocs || memcmp(s->locs, k->locs, k->nlocs * sizeof(*k->locs)) == 0) &&
	       (!k->nlabels || memcmp(s->labels, k->labels, k->nlabels * sizeof(*k->labels)) == 0);
}

int pprof_add_sample(struct pprof *p, const uint64_t *locs, size_t nlocs, const int64_t *values,
		     const struct pprof_label *labels, size_t nlabels)
{
	struct slabel lbuf[16], *lab = lbuf;
	int rc = 0;

	if (!p->nstypes || !values || (nlocs && !locs) || (nlabels && !labels))
		return -EINVAL;
	for (size_t i = 0; i < nlocs; i++)
		if (!locs[i] || locs[i] > p->nlocs)
			return -EINVAL;
	if (nlabels > sizeof(lbuf) / sizeof(lbuf[0])) {
		lab = calloc(nlabels, sizeof(*lab));
		if (!lab)
			return -ENOMEM;
	}
	for (size_t i = 0; i < nlabels; i++) {
		memset(&lab[i], 0, sizeof(lab[i]));
		if (!labels[i].key || !*labels[i].key) {
			rc = -EINVAL;
			goto out;
		}
		lab[i].key = intern(p, labels[i].key);
		if (labels[i].str) {
			lab[i].str = intern(p, labels[i].str);
		} else {
			lab[i].num = labels[i].num;
			if (labels[i].num_unit)
				lab[i].num_unit = intern(p, labels[i].num_unit);
		}
		if (lab[i].key < 0 || lab[i].str < 0 || lab[i].num_unit < 0) {
			rc = -ENOMEM;
			goto out;
		}
	}

	uint64_t h = hash_bytes(4, locs ? (const void *)locs : "", nlocs * sizeof(*locs));
	h = hash_bytes(h, nlabels ? (const void *)lab : "", nlabels * sizeof(*lab));
	struct sample_key k = { locs, nlocs, lab, nlabels };
	int64_t i = ht_find(&p->sampletab, (uint32_t)h, sample_eq, p, &k);
	if (i >= 0) {
		/* Saturating: values can come from hostile memory (a Go heap's
		 * counts) and signed overflow is undefined. */
		for (size_t v = 0; v < p->nstypes; v++) {
			int64_t *acc = &p->samples[i].values[v];
			if (__builtin_add_overflow(*acc, values[v], acc))
				*acc = values[v] > 0 ? INT64_MAX : INT64_MIN;
		}
		goto out;
	}

	struct sample s = { 0 };
	s.nlocs = nlocs;
	s.nlabels = nlabels;
	s.locs = malloc(nlocs ? nlocs * sizeof(*locs) : 1);
	s.values = malloc(p->nstypes * sizeof(*values));
	s.labels = malloc(nlabels ? nlabels * sizeof(*lab) : 1);
	if (!s.locs || !s.values || !s.labels ||
	    vec_reserve((void **)&p->samples, &p->capsamples, p->nsamples, sizeof(*p->samples)) ||
	    ht_insert(&p->sampletab, (uint32_t)h, p->nsamples)) {
		free(s.locs);
		free(s.values);
		free(s.labels);
		rc = -ENOMEM;
		goto out;
	}
	if (nlocs)
		memcpy(s.locs, locs, nlocs * sizeof(*locs));
	memcpy(s.values, values, p->nstypes * sizeof(*values));
	if (nlabels)
		memcpy(s.labels, lab, nlabels * sizeof(*lab));
	p->samples[p->nsamples++] = s;
out:
	if (lab != lbuf)
		free(lab);
	return rc;
}

size_t pprof_sample_count(const struct pprof *p)
{
	return p->nsamples;
}

/* ---- encoding --------------------------------------------------------- */

int pprof_encode(const struct pprof *p, bool gzip, uint8_t **out, size_t *len, struct pp_err *err)
{
	Perftools__Profiles__Profile prof = PERFTOOLS__PROFILES__PROFILE__INIT;
	Perftools__Profiles__ValueType period_type = PERFTOOLS__PROFILES__VALUE_TYPE__INIT;
	Perftools__Profiles__ValueType *vt = NULL, **vtp = NULL;
	Perftools__Profiles__Sample *sm = NULL, **smp = NULL;
	Perftools__Profiles__Label *lb = NULL, **lbp = NULL;
	Perftools__Profiles__Mapping *mp = NULL, **mpp = NULL;
	Perftools__Profiles__Location *lc = NULL, **lcp = NULL;
	Perftools__Profiles__Line *ln = NULL, **lnp = NULL;
	Perftools__Profiles__Function *fn = NULL, **fnp = NULL;
	uint8_t *buf = NULL;
	size_t nlab = 0, nline = 0;
	int rc = -ENOMEM;

	*out = NULL;
	*len = 0;
	for (size_t i = 0; i < p->nsamples; i++)
		nlab += p->samples[i].nlabels;
	for (size_t i = 0; i < p->nlocs; i++)
		nline += p->locs[i].nlines;

#define ALLOC(arr, ptrs, n)                                  \
	do {                                                 \
		arr = calloc((n) ? (n) : 1, sizeof(*arr));   \
		ptrs = calloc((n) ? (n) : 1, sizeof(*ptrs)); \
		if (!arr || !ptrs)                           \
			goto fail;                           \
	} while (0)
	ALLOC(vt, vtp, p->nstypes);
	ALLOC(sm, smp, p->nsamples);
	ALLOC(lb, lbp, nlab);
	ALLOC(mp, mpp, p->nmaps);
	ALLOC(lc, lcp, p->nlocs);
	ALLOC(ln, lnp, nline);
	ALLOC(fn, fnp, p->nfuncs);
#undef ALLOC

	for (size_t i = 0; i < p->nstypes; i++) {
		perftools__profiles__value_type__init(&vt[i]);
		vt[i].type = p->stypes[i].type;
		vt[i].unit = p->stypes[i].unit;
		vtp[i] = &vt[i];
	}
	size_t li = 0;
	for (size_t i = 0; i < p->nsamples; i++) {
		const struct sample *s = &p->samples[i];
		perftools__profiles__sample__init(&sm[i]);
		sm[i].n_location_id = s->nlocs;
		sm[i].location_id = s->locs;
		sm[i].n_value = p->nstypes;
		sm[i].value = s->values;
		sm[i].n_label = s->nlabels;
		sm[i].label = &lbp[li];
		for (size_t j = 0; j < s->nlabels; j++, li++) {
			perftools__profiles__label__init(&lb[li]);
			lb[li].key = s->labels[j].key;
			lb[li].str = s->labels[j].str;
			lb[li].num = s->labels[j].num;
			lb[li].num_unit = s->labels[j].num_unit;
			lbp[li] = &lb[li];
		}
		smp[i] = &sm[i];
	}
	for (size_t i = 0; i < p->nmaps; i++) {
		const struct mapping *m = &p->maps[i];
		perftools__profiles__mapping__init(&mp[i]);
		mp[i].id = i + 1;
		mp[i].memory_start = m->start;
		mp[i].memory_limit = m->limit;
		mp[i].file_offset = m->offset;
		mp[i].filename = m->file;
		mp[i].build_id = m->build_id;
		mp[i].has_functions = m->has_functions;
		mp[i].has_filenames = m->has_line_numbers;
		mp[i].has_line_numbers = m->has_line_numbers;
		mp[i].has_inline_frames = m->has_line_numbers;
		mpp[i] = &mp[i];
	}
	li = 0;
	for (size_t i = 0; i < p->nlocs; i++) {
		const struct location *l = &p->locs[i];
		perftools__profiles__location__init(&lc[i]);
		lc[i].id = i + 1;
		lc[i].mapping_id = l->mapping_id;
		lc[i].address = l->address;
		lc[i].n_line = l->nlines;
		lc[i].line = &lnp[li];
		for (size_t j = 0; j < l->nlines; j++, li++) {
			perftools__profiles__line__init(&ln[li]);
			ln[li].function_id = l->lines[j].function_id;
			ln[li].line = l->lines[j].line;
			lnp[li] = &ln[li];
		}
		lcp[i] = &lc[i];
	}
	for (size_t i = 0; i < p->nfuncs; i++) {
		perftools__profiles__function__init(&fn[i]);
		fn[i].id = i + 1;
		fn[i].name = p->funcs[i].name;
		fn[i].system_name = p->funcs[i].system_name;
		fn[i].filename = p->funcs[i].filename;
		fn[i].start_line = p->funcs[i].start_line;
		fnp[i] = &fn[i];
	}

	prof.n_sample_type = p->nstypes;
	prof.sample_type = vtp;
	prof.n_sample = p->nsamples;
	prof.sample = smp;
	prof.n_mapping = p->nmaps;
	prof.mapping = mpp;
	prof.n_location = p->nlocs;
	prof.location = lcp;
	prof.n_function = p->nfuncs;
	prof.function = fnp;
	prof.n_string_table = p->nstrs;
	prof.string_table = p->strs;
	prof.time_nanos = p->time_nanos;
	prof.duration_nanos = p->duration_nanos;
	if (p->period_type.type || p->period_type.unit || p->period) {
		period_type.type = p->period_type.type;
		period_type.unit = p->period_type.unit;
		prof.period_type = &period_type;
	}
	prof.period = p->period;
	prof.n_comment = p->ncomments;
	prof.comment = p->comments;
	prof.default_sample_type = p->default_sample_type;

	size_t n = perftools__profiles__profile__get_packed_size(&prof);
	buf = malloc(n ? n : 1);
	if (!buf)
		goto fail;
	if (perftools__profiles__profile__pack(&prof, buf) != n) {
		rc = pp_errf(err, -EIO, "pprof: packed size mismatch");
		goto done;
	}
	if (gzip) {
		rc = pprof_gzip(buf, n, out, len, err);
	} else {
		*out = buf;
		*len = n;
		buf = NULL;
		rc = 0;
	}
	goto done;
fail:
	rc = pp_errf(err, -ENOMEM, "pprof: out of memory encoding %zu samples", p->nsamples);
done:
	free(buf);
	free(vt);
	free(vtp);
	free(sm);
	free(smp);
	free(lb);
	free(lbp);
	free(mp);
	free(mpp);
	free(lc);
	free(lcp);
	free(ln);
	free(lnp);
	free(fn);
	free(fnp);
	return rc;
}
