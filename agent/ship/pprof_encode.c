/*
 * pprof_encode.c - a built profile (pprof.c) in the protobuf wire format:
 * written straight from the builder's arrays (see pprof.c's head comment),
 * plain into one exactly sized buffer or gzip'd through a 64 KiB chunk.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "grow.h"
#include "pprof_internal.h"

/* ---- encoding ----------------------------------------------------------
 * One pass function, run twice: with w->buf NULL it only counts bytes,
 * then it writes into a buffer of exactly that size. Field numbers are
 * proto/profile.proto's. */

struct pbw {
	uint8_t *buf; /* NULL: count only */
	size_t n;
	/* Streaming to gzip: buf is a chunk of cap bytes handed to deflate
	 * whenever the next message may not fit (no whole plain copy). */
	z_stream *z;
	size_t cap;
	uint8_t *out; /* the gzip bytes, total_out of outcap used */
	size_t outcap;
	bool failed;
};

static inline void w_v(struct pbw *w, uint64_t v)
{
	if (w->buf)
		w->n = (size_t)(put_v(w->buf + w->n, v) - w->buf);
	else
		w->n += vlen(v);
}

/* A varint field; proto3 leaves zeros out. int64s go as their uint64. */
static inline size_t fv_len(uint32_t f, uint64_t v)
{
	return v ? vlen((uint64_t)f << 3) + vlen(v) : 0;
}

static inline void w_fv(struct pbw *w, uint32_t f, uint64_t v)
{
	if (v) {
		w_v(w, (uint64_t)f << 3);
		w_v(w, v);
	}
}

/* A length-delimited field of body length n: key and length written, the
 * body is the caller's. false when counting (the body counted too). */
static inline bool w_fl(struct pbw *w, uint32_t f, size_t n)
{
	w_v(w, ((uint64_t)f << 3) | 2);
	w_v(w, n);
	if (!w->buf)
		w->n += n;
	return w->buf != NULL;
}

/* Hand the chunk to deflate (all of it, or finish the stream). */
static bool w_deflate(struct pbw *w, int flush)
{
	z_stream *z = w->z;
	int zrc;
	z->next_in = w->buf;
	z->avail_in = (uInt)w->n;
	do {
		if (w->outcap - z->total_out < 4096 &&
		    pp_grow(&w->out, &w->outcap, w->outcap + 4096, 1, 64 << 10))
			return !(w->failed = true);
		z->next_out = w->out + z->total_out;
		z->avail_out = (uInt)(w->outcap - z->total_out);
		zrc = deflate(z, flush);
		if (zrc != Z_OK && zrc != Z_STREAM_END && zrc != Z_BUF_ERROR)
			return !(w->failed = true);
	} while (z->avail_in || (flush == Z_FINISH && zrc != Z_STREAM_END));
	w->n = 0;
	return true;
}

/* Room for `need` more bytes in the chunk when streaming (a message may
 * span chunks: deflate sees one byte stream). Bounds: key and length 6
 * bytes, a varint 11. */
static bool w_room(struct pbw *w, size_t need)
{
	if (!w->z || w->n + need <= w->cap)
		return true;
	if (w->n && !w_deflate(w, Z_NO_FLUSH))
		return false;
	if (need > w->cap) {
		uint8_t *nb = realloc(w->buf, need);
		if (!nb)
			return !(w->failed = true);
		w->buf = nb;
		w->cap = need;
	}
	return true;
}

/* Label, ValueType, Mapping, Line and Function are messages of varint
 * fields 1..n: v[0..n-1]. */
static void w_msg(struct pbw *w, uint32_t f, const uint64_t *v, size_t n)
{
	size_t len = 0;
	if (!w_room(w, 6 + 11 * n))
		return;
	for (size_t i = 0; i < n; i++)
		len += fv_len((uint32_t)i + 1, v[i]);
	if (w_fl(w, f, len))
		for (size_t i = 0; i < n; i++)
			w_fv(w, (uint32_t)i + 1, v[i]);
}

static void w_vtype(struct pbw *w, uint32_t f, const struct value_type *t)
{
	w_msg(w, f, (const uint64_t[]){ (uint64_t)t->type, (uint64_t)t->unit }, 2);
}

static void w_sample(struct pbw *w, const struct pprof *p, size_t i)
{
	const struct sample *s = &p->samples[i];
	const int64_t *v = p->vals + i * p->nstypes;
	size_t lb = s->loc_len, vb = 0;

	for (size_t j = 0; j < p->nstypes; j++)
		vb += vlen((uint64_t)v[j]);
	/* Fields 1 and 2 have one key byte. */
	size_t n = (lb ? 1 + vlen(lb) + lb : 0) + (vb ? 1 + vlen(vb) + vb : 0) + s->lab_len;
	if (!w_room(w, 3 * 6 + n) || !w_fl(w, 2, n))
		return;
	if (lb && w_fl(w, 1, lb)) {
		memcpy(w->buf + w->n, p->skey + s->key_off, lb);
		w->n += lb;
	}
	if (vb && w_fl(w, 2, vb))
		for (size_t j = 0; j < p->nstypes; j++)
			w_v(w, (uint64_t)v[j]);
	memcpy(w->buf + w->n, p->skey + s->key_off + lb, s->lab_len);
	w->n += s->lab_len;
}

/* Bytes as they are, through the chunk when streaming. */
static void w_bytes(struct pbw *w, const uint8_t *d, size_t len)
{
	if (!w->buf) {
		w->n += len;
		return;
	}
	while (len && !w->failed) {
		size_t k = w->z ? w->cap - w->n : len;
		if (!k) {
			w_deflate(w, Z_NO_FLUSH);
			continue;
		}
		k = k < len ? k : len;
		memcpy(w->buf + w->n, d, k);
		w->n += k;
		d += k;
		len -= k;
	}
}

static void w_mapping(struct pbw *w, const struct mapping *m, uint64_t id)
{
	/* has_filenames and has_inline_frames go as has_line_numbers. */
	w_msg(w, 3,
	      (const uint64_t[]){ id, m->start, m->limit, m->offset, (uint64_t)m->file,
				  (uint64_t)m->build_id, m->has_functions, m->has_line_numbers,
				  m->has_line_numbers, m->has_line_numbers },
	      10);
}

static void w_location(struct pbw *w, const struct pprof *p, size_t i)
{
	const struct location *l = &p->locs[i];
	/* NULL + 0 is undefined: no lines at all leaves p->lines NULL. */
	const struct pprof_line *ln = l->nlines ? p->lines + l->line_off : NULL;
	struct pbw lw = { 0 };

	for (uint32_t j = 0; j < l->nlines; j++)
		w_msg(&lw, 4, (const uint64_t[]){ ln[j].function_id, (uint64_t)ln[j].line }, 2);
	if (!w_room(w, 6 + 3 * 11 + lw.n) ||
	    !w_fl(w, 4, fv_len(1, i + 1) + fv_len(2, l->mapping_id) + fv_len(3, l->address) + lw.n))
		return;
	w_fv(w, 1, i + 1);
	w_fv(w, 2, l->mapping_id);
	w_fv(w, 3, l->address);
	for (uint32_t j = 0; j < l->nlines; j++)
		w_msg(w, 4, (const uint64_t[]){ ln[j].function_id, (uint64_t)ln[j].line }, 2);
}

static void w_function(struct pbw *w, const struct function *f, uint64_t id)
{
	w_msg(w, 5,
	      (const uint64_t[]){ id, (uint64_t)f->name, (uint64_t)f->system_name,
				  (uint64_t)f->filename, (uint64_t)f->start_line },
	      5);
}

static void encode_to(const struct pprof *p, struct pbw *w)
{
	size_t cb = 0;

	for (size_t i = 0; !p->zs && i < p->nstypes; i++) /* streamed: sent already */
		w_vtype(w, 1, &p->stypes[i]);
	if (p->nomerge)
		w_bytes(w, p->sbuf, p->nsbuf);
	else
		for (size_t i = 0; i < p->nsamples; i++)
			w_sample(w, p, i);
	for (size_t i = 0; i < p->nmaps; i++)
		w_mapping(w, &p->maps[i], i + 1);
	for (size_t i = 0; i < p->nlocs; i++)
		w_location(w, p, i);
	for (size_t i = 0; i < p->nfuncs; i++)
		w_function(w, &p->funcs[i], i + 1);
	for (size_t i = 0; i < p->nstrs; i++) {
		size_t sl = strlen(p->strs[i]);
		if (w_room(w, 6 + sl) && w_fl(w, 6, sl)) {
			memcpy(w->buf + w->n, p->strs[i], sl);
			w->n += sl;
		}
	}
	if (!w_room(w, 6 * 11 + 3 * 6 + 2 * 11 + 11 * p->ncomments))
		return;
	w_fv(w, 9, (uint64_t)p->time_nanos);
	w_fv(w, 10, (uint64_t)p->duration_nanos);
	if (p->period_type.type || p->period_type.unit || p->period)
		w_vtype(w, 11, &p->period_type);
	w_fv(w, 12, (uint64_t)p->period);
	for (size_t i = 0; i < p->ncomments; i++)
		cb += vlen((uint64_t)p->comments[i]);
	if (cb && w_fl(w, 13, cb))
		for (size_t i = 0; i < p->ncomments; i++)
			w_v(w, (uint64_t)p->comments[i]);
	w_fv(w, 14, (uint64_t)p->default_sample_type);
}

/* Gzip level 1 (as pprof_gzip), the profile streamed through a 64 KiB
 * chunk. */
struct pprof_zs {
	z_stream z;
	uint8_t *out; /* z.total_out bytes of outcap */
	size_t outcap;
	bool failed;
	bool spent; /* finished by pprof_encode_last(): nothing more to encode */
};

void pprof_zs_free(struct pprof_zs *zs)
{
	if (!zs)
		return;
	deflateEnd(&zs->z);
	free(zs->out);
	free(zs);
}

int pprof_zs_flush(struct pprof *p)
{
	struct pprof_zs *s = p->zs;
	if (s->spent) /* a sample after pprof_encode_last() */
		return -EINVAL;
	struct pbw w = { .buf = p->sbuf,
			 .n = p->nsbuf,
			 .z = &s->z,
			 .out = s->out,
			 .outcap = s->outcap,
			 .failed = s->failed };
	if (!w.failed && w.n)
		w_deflate(&w, Z_NO_FLUSH);
	s->out = w.out;
	s->outcap = w.outcap;
	s->failed = w.failed;
	p->nsbuf = 0;
	return s->failed ? -ENOMEM : 0;
}

int pprof_stream_gzip(struct pprof *p)
{
	if (!p->nomerge || p->nsamples || p->zs)
		return -EINVAL;
	struct pprof_zs *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	if (deflateInit2(&s->z, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
		free(s);
		return -ENOMEM;
	}
	/* The sample types come first on the wire: staged now, counted then
	 * written. */
	struct pbw w = { 0 };
	for (size_t i = 0; i < p->nstypes; i++)
		w_vtype(&w, 1, &p->stypes[i]);
	if (pprof_sbuf_room(p, w.n)) {
		pprof_zs_free(s);
		return -ENOMEM;
	}
	w = (struct pbw){ .buf = p->sbuf };
	for (size_t i = 0; i < p->nstypes; i++)
		w_vtype(&w, 1, &p->stypes[i]);
	p->nsbuf = w.n;
	p->zs = s;
	return 0;
}

/* own: p's stream, finished in place (pprof_encode_last), else NULL. */
static int encode_gzip(const struct pprof *p, struct pprof_zs *own, uint8_t **out, size_t *len,
		       struct pp_err *err)
{
	z_stream zs = { 0 };
	struct pbw w = { .z = &zs, .cap = 64 << 10 };
	int rc = 0;
	if (p->zs && p->zs->spent)
		return pp_errf(err, -EINVAL, "pprof: a streamed profile was already encoded for good");
	if (own) {
		/* Go on in p's own stream: no second deflate state (256 KiB)
		 * and no copy of the first; p is spent afterwards. */
		if (own->failed)
			return pp_errf(err, -ENOMEM, "pprof: out of memory compressing samples");
		w.z = &own->z;
		w.out = own->out;
		w.outcap = own->outcap;
		own->out = NULL; /* w's now: handed to the caller or freed below */
		own->outcap = 0;
		own->spent = true;
	} else if (p->zs) {
		/* Go on from a copy of the stream: p stays encodable. */
		if (p->zs->failed)
			return pp_errf(err, -ENOMEM, "pprof: out of memory compressing samples");
		w.outcap = p->zs->outcap > w.cap ? p->zs->outcap : w.cap;
		if (!(w.out = malloc(w.outcap)))
			return pp_errf(err, -ENOMEM, "pprof: out of memory");
		if (deflateCopy(&zs, &p->zs->z) != Z_OK) {
			free(w.out);
			return pp_errf(err, -ENOMEM, "gzip: deflateCopy failed");
		}
		if (zs.total_out) /* else out may still be NULL */
			memcpy(w.out, p->zs->out, zs.total_out);
	} else if (deflateInit2(&zs, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
		return pp_errf(err, -ENOMEM, "gzip: deflateInit failed");
	}
	if (!(w.buf = malloc(w.cap)))
		w.failed = true;
	else
		encode_to(p, &w);
	if (!w.failed)
		w_deflate(&w, Z_FINISH);
	if (w.failed) {
		rc = pp_errf(err, -ENOMEM, "pprof: out of memory compressing %zu samples",
			     p->nsamples);
		free(w.out);
	} else {
		*out = w.out;
		*len = w.z->total_out;
	}
	if (!own) /* p's own stream ends with p (pprof_free) */
		deflateEnd(&zs);
	free(w.buf);
	return rc;
}

int pprof_encode(const struct pprof *p, bool gzip, uint8_t **out, size_t *len, struct pp_err *err)
{
	struct pbw w = { 0 };
	*out = NULL;
	*len = 0;
	if (gzip)
		return encode_gzip(p, NULL, out, len, err);
	if (p->zs)
		return pp_errf(err, -EINVAL, "pprof: a streamed profile is encoded gzip'd only");
	encode_to(p, &w);
	size_t n = w.n;
	if (!(w.buf = malloc(n ? n : 1)))
		return pp_errf(err, -ENOMEM,
			       "pprof: out of memory encoding %zu samples (%zu bytes)", p->nsamples,
			       n);
	w.n = 0;
	encode_to(p, &w);
	if (w.n != n) {
		free(w.buf);
		return pp_errf(err, -EIO, "pprof: encoded size mismatch");
	}
	*out = w.buf;
	*len = n;
	return 0;
}

int pprof_encode_last(struct pprof *p, uint8_t **out, size_t *len, struct pp_err *err)
{
	*out = NULL;
	*len = 0;
	return encode_gzip(p, p->zs && !p->zs->spent ? p->zs : NULL, out, len, err);
}
