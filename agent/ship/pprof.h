/*
 * pprof.h - build one pprof profile (google/pprof profile.proto) in memory
 * and encode it, gzip-compressed, the way Parca and `go tool pprof` read it.
 *
 * Strings, mappings, functions and locations are interned; ids are
 * sequential from 1 and string_table[0] is "". Every rule Parca's validator
 * applies (see shared/reference/parca-wire.md) holds for any sequence of
 * calls: a sample must carry exactly one value per sample type, and all ids
 * passed in must come from this builder.
 *
 * Functions returning uint64_t return an id, or 0 on allocation failure.
 */
#ifndef PUSHPROF_PPROF_H
#define PUSHPROF_PPROF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

struct pprof;

struct pprof_line {
	uint64_t function_id;
	int64_t line;
};

struct pprof_label {
	const char *key;
	const char *str; /* string label, or NULL for a numeric one */
	int64_t num;
	const char *num_unit; /* optional, numeric labels only */
};

/* An empty profile (string_table[0] == ""): 0 with *out set (caller frees
 * with pprof_free), or -ENOMEM with err filled and *out NULL. Not
 * thread-safe: one builder per thread. */
int pprof_new(struct pprof **out, struct pp_err *err);
void pprof_free(struct pprof *p); /* NULL-safe */

int pprof_add_sample_type(struct pprof *p, const char *type, const char *unit);
int pprof_set_period(struct pprof *p, const char *type, const char *unit, int64_t period);
void pprof_set_time(struct pprof *p, int64_t time_nanos, int64_t duration_nanos);
int pprof_add_comment(struct pprof *p, const char *comment);
/* Index into the sample types, for a profile with several (e.g. inuse_space). */
int pprof_set_default_sample_type(struct pprof *p, const char *type);

/* Interned by (start, limit, offset, file). */
uint64_t pprof_mapping(struct pprof *p, uint64_t start, uint64_t limit, uint64_t offset,
		       const char *file, const char *build_id, bool has_functions,
		       bool has_line_numbers);
/* Interned by (name, system_name, filename, start_line). */
uint64_t pprof_function(struct pprof *p, const char *name, const char *system_name,
			const char *filename, int64_t start_line);
/*
 * Interned by (mapping_id, address) when address != 0, else by the lines.
 * lines[0] is the innermost (inlined) frame, the last one its caller.
 * nlines == 0 leaves an unsymbolized address for the server to resolve.
 */
uint64_t pprof_location(struct pprof *p, uint64_t mapping_id, uint64_t address,
			const struct pprof_line *lines, size_t nlines);
/* locs[0] is the leaf. Identical stacks with identical labels are merged
 * (values added), unless pprof_set_merge(p, false). */
int pprof_add_sample(struct pprof *p, const uint64_t *locs, size_t nlocs, const int64_t *values,
		     const struct pprof_label *labels, size_t nlabels);

/* merge false: every pprof_add_sample() is a sample of its own, encoded
 * at once into one growing buffer (no merge table, no per-sample keys and
 * values kept apart): what runtime/pprof's heap profile does, one sample
 * per bucket. Only before the first sample: 0 or -EINVAL. */
int pprof_set_merge(struct pprof *p, bool merge);

/* For an unmerged profile that is only sent gzip'd: from now on the sample
 * types (set them first) and the samples are compressed as they come, so
 * the samples are never held whole (a 100,000-bucket heap profile: 3.7 MB
 * not written, ~300 KB of gzip instead). pprof_encode(p, false) then fails
 * (-EINVAL); gzip'd encoding works as before. Before the first sample:
 * 0, -EINVAL, -ENOMEM. */
int pprof_stream_gzip(struct pprof *p);

size_t pprof_sample_count(const struct pprof *p);

/* Serialize; gzip when asked. *out is malloc'd, caller frees. */
int pprof_encode(const struct pprof *p, bool gzip, uint8_t **out, size_t *len, struct pp_err *err);
/* Gzip'd, as pprof_encode(p, true, ...), for the last time: a streamed
 * profile's own deflate stream is finished instead of a copy of it (no
 * second 256 KiB deflate state, no copy of the first: a heap snapshot of
 * an idle program touched ~600 KiB to send ~1 KiB). A streamed p is spent
 * afterwards: encoding it again fails (-EINVAL). Other profiles are
 * encoded as by pprof_encode and stay encodable. */
int pprof_encode_last(struct pprof *p, uint8_t **out, size_t *len, struct pp_err *err);

/* Helpers shared by everything that handles pprof bytes. */
bool pprof_is_gzip(const uint8_t *buf, size_t len);
int pprof_gunzip(const uint8_t *in, size_t len, size_t max_out, uint8_t **out, size_t *out_len,
		 struct pp_err *err);
int pprof_gzip(const uint8_t *in, size_t len, uint8_t **out, size_t *out_len, struct pp_err *err);
/* Check bytes (plain or gzip) parse as a profile that passes Parca's rules. */
int pprof_validate(const uint8_t *buf, size_t len, struct pp_err *err);

#endif
