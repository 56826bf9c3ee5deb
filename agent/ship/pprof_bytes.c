/*
 * pprof_bytes.c - what is done with a profile's bytes, wherever they come
 * from (this builder, a file given to `push`, a spooled batch): gzip and
 * gunzip via zlib, and the validator that applies Parca's rules
 * (shared/reference/parca-wire.md) before any network call.
 */
#include "pprof.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "proto/profile.pb-c.h"

/* Largest decompressed profile validate() accepts: Parca's max message. */
#define PPROF_MAX_PROFILE_BYTES (64u << 20)

/* ---- gzip ------------------------------------------------------------- */

bool pprof_is_gzip(const uint8_t *buf, size_t len)
{
	return len >= 2 && buf[0] == 0x1f && buf[1] == 0x8b;
}

int pprof_gzip(const uint8_t *in, size_t len, uint8_t **out, size_t *out_len, struct pp_err *err)
{
	z_stream zs = { 0 };
	uint8_t *buf;
	int zrc;

	*out = NULL;
	*out_len = 0;
	if (len > UINT32_MAX)
		return pp_errf(err, -E2BIG, "gzip: input of %zu bytes too large", len);
	/* windowBits 15 + 16: gzip header, as pprof files on disk have. Level 1,
	 * as Go's runtime/pprof writes profiles: on a 100,000-bucket heap
	 * profile level 6 spent ~2x the CPU for a few percent fewer bytes. */
	if (deflateInit2(&zs, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		return pp_errf(err, -ENOMEM, "gzip: deflateInit failed");
	size_t cap = deflateBound(&zs, len);
	buf = malloc(cap);
	if (!buf) {
		deflateEnd(&zs);
		return pp_errf(err, -ENOMEM, "gzip: out of memory (%zu bytes)", cap);
	}
	zs.next_in = (Bytef *)in;
	zs.avail_in = len;
	zs.next_out = buf;
	zs.avail_out = cap;
	zrc = deflate(&zs, Z_FINISH);
	if (zrc != Z_STREAM_END) {
		deflateEnd(&zs);
		free(buf);
		return pp_errf(err, -EIO, "gzip: deflate failed (%d)", zrc);
	}
	*out_len = zs.total_out;
	deflateEnd(&zs);
	*out = buf;
	return 0;
}

int pprof_gunzip(const uint8_t *in, size_t len, size_t max_out, uint8_t **out, size_t *out_len,
		 struct pp_err *err)
{
	z_stream zs = { 0 };
	uint8_t *buf = NULL;
	size_t cap = 0, used = 0;
	int zrc, rc;

	*out = NULL;
	*out_len = 0;
	if (!pprof_is_gzip(in, len))
		return pp_errf(err, -EINVAL, "gunzip: not gzip data");
	if (len > UINT32_MAX)
		return pp_errf(err, -E2BIG, "gunzip: input of %zu bytes too large", len);
	if (inflateInit2(&zs, 15 + 16) != Z_OK)
		return pp_errf(err, -ENOMEM, "gunzip: inflateInit failed");
	zs.next_in = (Bytef *)in;
	zs.avail_in = len;
	for (;;) {
		if (used == cap) {
			if (cap >= max_out) {
				rc = pp_errf(err, -EFBIG,
					     "gunzip: output exceeds the limit of %zu bytes",
					     max_out);
				goto fail;
			}
			size_t nc = cap ? cap * 2 : (len * 4 > 4096 ? len * 4 : 4096);
			if (nc > max_out || nc < cap)
				nc = max_out;
			uint8_t *nb = realloc(buf, nc ? nc : 1);
			if (!nb) {
				rc = pp_errf(err, -ENOMEM, "gunzip: out of memory (%zu bytes)", nc);
				goto fail;
			}
			buf = nb;
			cap = nc;
		}
		size_t room = cap - used;
		if (room > UINT32_MAX)
			room = UINT32_MAX;
		zs.next_out = buf + used;
		zs.avail_out = room;
		zrc = inflate(&zs, Z_NO_FLUSH);
		used += room - zs.avail_out;
		if (zrc == Z_STREAM_END) {
			/* Concatenated members are one stream, as Go's reader sees them. */
			if (zs.avail_in == 0)
				break;
			if (!pprof_is_gzip(zs.next_in, zs.avail_in)) {
				rc = pp_errf(err, -EINVAL,
					     "gunzip: trailing garbage after gzip data");
				goto fail;
			}
			if (inflateReset(&zs) != Z_OK) {
				rc = pp_errf(err, -EIO, "gunzip: inflateReset failed");
				goto fail;
			}
			continue;
		}
		if (zrc == Z_BUF_ERROR && zs.avail_in == 0) {
			rc = pp_errf(err, -EINVAL, "gunzip: truncated gzip data");
			goto fail;
		}
		if (zrc != Z_OK && zrc != Z_BUF_ERROR) {
			rc = pp_errf(err, -EINVAL, "gunzip: corrupt gzip data (%s)",
				     zs.msg ? zs.msg : "inflate error");
			goto fail;
		}
	}
	inflateEnd(&zs);
	*out = buf ? buf : malloc(1);
	if (!*out)
		return pp_errf(err, -ENOMEM, "gunzip: out of memory");
	*out_len = used;
	return 0;
fail:
	inflateEnd(&zs);
	free(buf);
	return rc;
}

/* ---- validation (Parca's rules, shared/reference/parca-wire.md) ------- */

static int check_str(const Perftools__Profiles__Profile *pr, int64_t idx, const char *what,
		     size_t n, struct pp_err *err)
{
	if (idx < 0 || (uint64_t)idx >= pr->n_string_table)
		return pp_errf(err, -EINVAL,
			       "pprof: %s[%zu] string index %lld out of range (table has %zu)",
			       what, n, (long long)idx, pr->n_string_table);
	return 0;
}

/* Profile type parts must be usable in a PromQL selector. */
static int check_type_part(const Perftools__Profiles__Profile *pr, int64_t idx, const char *what,
			   struct pp_err *err)
{
	const char *s = pr->string_table[idx];

	if (strpbrk(s, "-.:"))
		return pp_errf(err, -EINVAL, "pprof: %s \"%.64s\" contains '-', '.' or ':'", what,
			       s);
	return 0;
}

static int validate_profile(const Perftools__Profiles__Profile *pr, struct pp_err *err)
{
	int rc;

#define STR(idx, what, n)                                          \
	do {                                                       \
		if ((rc = check_str(pr, (idx), (what), (n), err))) \
			return rc;                                 \
	} while (0)

	if (pr->n_string_table == 0 || !pr->string_table[0] || pr->string_table[0][0])
		return pp_errf(err, -EINVAL, "pprof: string_table[0] must be \"\"");
	for (size_t i = 0; i < pr->n_sample_type; i++) {
		STR(pr->sample_type[i]->type, "sample_type.type", i);
		STR(pr->sample_type[i]->unit, "sample_type.unit", i);
		if ((rc = check_type_part(pr, pr->sample_type[i]->type, "sample type", err)) ||
		    (rc = check_type_part(pr, pr->sample_type[i]->unit, "sample unit", err)))
			return rc;
	}
	if (pr->period_type) {
		STR(pr->period_type->type, "period_type.type", 0);
		STR(pr->period_type->unit, "period_type.unit", 0);
		if ((rc = check_type_part(pr, pr->period_type->type, "period type", err)) ||
		    (rc = check_type_part(pr, pr->period_type->unit, "period unit", err)))
			return rc;
	}
	STR(pr->drop_frames, "drop_frames", 0);
	STR(pr->keep_frames, "keep_frames", 0);
	STR(pr->default_sample_type, "default_sample_type", 0);
	STR(pr->doc_url, "doc_url", 0);
	for (size_t i = 0; i < pr->n_comment; i++)
		STR(pr->comment[i], "comment", i);
	for (size_t i = 0; i < pr->n_mapping; i++) {
		const Perftools__Profiles__Mapping *m = pr->mapping[i];
		if (m->id != i + 1)
			return pp_errf(
				err, -EINVAL,
				"pprof: mapping[%zu] has id %llu, want %zu (sequential from 1)", i,
				(unsigned long long)m->id, i + 1);
		STR(m->filename, "mapping.filename", i);
		STR(m->build_id, "mapping.build_id", i);
	}
	for (size_t i = 0; i < pr->n_function; i++) {
		const Perftools__Profiles__Function *f = pr->function[i];
		if (f->id != i + 1)
			return pp_errf(
				err, -EINVAL,
				"pprof: function[%zu] has id %llu, want %zu (sequential from 1)", i,
				(unsigned long long)f->id, i + 1);
		STR(f->name, "function.name", i);
		STR(f->system_name, "function.system_name", i);
		STR(f->filename, "function.filename", i);
	}
	for (size_t i = 0; i < pr->n_location; i++) {
		const Perftools__Profiles__Location *l = pr->location[i];
		if (l->id != i + 1)
			return pp_errf(
				err, -EINVAL,
				"pprof: location[%zu] has id %llu, want %zu (sequential from 1)", i,
				(unsigned long long)l->id, i + 1);
		if (l->mapping_id > pr->n_mapping)
			return pp_errf(err, -EINVAL,
				       "pprof: location %zu refers to mapping %llu of %zu", i + 1,
				       (unsigned long long)l->mapping_id, pr->n_mapping);
		for (size_t j = 0; j < l->n_line; j++) {
			uint64_t f = l->line[j]->function_id;
			if (!f || f > pr->n_function)
				return pp_errf(err, -EINVAL,
					       "pprof: location %zu line %zu refers to function "
					       "%llu of %zu",
					       i + 1, j, (unsigned long long)f, pr->n_function);
		}
	}
	for (size_t i = 0; i < pr->n_sample; i++) {
		const Perftools__Profiles__Sample *s = pr->sample[i];
		if (s->n_value != pr->n_sample_type)
			return pp_errf(err, -EINVAL,
				       "pprof: sample %zu has %zu values for %zu sample types", i,
				       s->n_value, pr->n_sample_type);
		for (size_t j = 0; j < s->n_location_id; j++) {
			uint64_t l = s->location_id[j];
			if (!l || l > pr->n_location)
				return pp_errf(err, -EINVAL,
					       "pprof: sample %zu refers to location %llu of %zu",
					       i, (unsigned long long)l, pr->n_location);
		}
		for (size_t j = 0; j < s->n_label; j++) {
			STR(s->label[j]->key, "sample.label.key", i);
			STR(s->label[j]->str, "sample.label.str", i);
			STR(s->label[j]->num_unit, "sample.label.num_unit", i);
		}
	}
#undef STR
	return 0;
}

int pprof_validate(const uint8_t *buf, size_t len, struct pp_err *err)
{
	uint8_t *plain = NULL;
	size_t plen = len;
	int rc;

	if (!buf || !len)
		return pp_errf(err, -EINVAL, "pprof: empty input");
	if (pprof_is_gzip(buf, len)) {
		rc = pprof_gunzip(buf, len, PPROF_MAX_PROFILE_BYTES, &plain, &plen, err);
		if (rc)
			return rc;
		buf = plain;
	} else if (len > PPROF_MAX_PROFILE_BYTES) {
		return pp_errf(err, -EFBIG, "pprof: %zu bytes exceeds the limit of %u", len,
			       PPROF_MAX_PROFILE_BYTES);
	}
	Perftools__Profiles__Profile *pr = perftools__profiles__profile__unpack(NULL, plen, buf);
	if (!pr) {
		rc = pp_errf(err, -EINVAL, "pprof: not a protobuf-encoded profile");
	} else {
		rc = validate_profile(pr, err);
		perftools__profiles__profile__free_unpacked(pr, NULL);
	}
	free(plain);
	return rc;
}
