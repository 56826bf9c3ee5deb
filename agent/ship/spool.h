/*
 * spool.h - profiles that could not be delivered yet, kept on disk.
 *
 * One file per batch in spool.directory: written to a temp file, fsynced,
 * renamed to "<seq>.spool" (seq = nanoseconds since the epoch, so names sort
 * in submission order and survive restarts). Content is zstd-compressed.
 * The directory is bounded by max_bytes: when a new batch does not fit, the
 * oldest files go first and each drop is counted. A file that does not
 * decode is renamed to "<name>.corrupt" and never blocks the ones after it.
 * Delivery is at-least-once: a batch is removed only after it was accepted.
 */
#ifndef PUSHPROF_SPOOL_H
#define PUSHPROF_SPOOL_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "labels.h"

struct spool_item {
	struct pp_labels labels;
	uint8_t *profile; /* gzip pprof */
	size_t len;
};

struct spool_batch {
	struct spool_item *v;
	size_t n, cap;
};

struct spool_stats {
	uint64_t files, bytes; /* on disk now */
	uint64_t written, dropped_files, dropped_profiles, corrupt;
};

struct spool;

struct spool_opts {
	const char *dir;    /* required (copied); created (mode 0700) when missing,
				 * made 0700 when others could read it */
	uint64_t max_bytes; /* bound on the files' total; 0 keeps nothing
				 * (every spool_write() fails with -EFBIG) */
};

/* 0 with *out set; or a negative code (the directory cannot be made
 * private, -ENOMEM), err filled, *out NULL. Thread-safe afterwards (one
 * mutex): the outbox's sender thread and the caller may both use it. */
int spool_new(const struct spool_opts *o, struct spool **out, struct pp_err *err);
void spool_free(struct spool *s); /* NULL-safe */

int spool_write(struct spool *s, const struct spool_batch *b, struct pp_err *err);
/* The oldest file whose name sorts after `after` (NULL or "": the oldest of
 * all): its name into name (for spool_remove) and its batch into out
 * (replaced, not appended). Returns 1 when a batch was read, 0 when there is
 * none. Walking with after = the previous name reads several files without
 * removing them (the outbox sends them in one request). */
int spool_peek(struct spool *s, const char *after, char *name, size_t name_len,
	       struct spool_batch *out, struct pp_err *err);
int spool_remove(struct spool *s, const char *name);
const struct spool_stats *spool_stats(const struct spool *s);

/* Batch helpers (owned copies). */
int spool_batch_add(struct spool_batch *b, const struct pp_labels *labels, const uint8_t *p,
		    size_t len);
void spool_batch_free(struct spool_batch *b);
/* Append src's items to dst without copying them; src is left empty. */
int spool_batch_move(struct spool_batch *dst, struct spool_batch *src);
/* Free the first k items (delivered ones) and shift the rest down. */
void spool_batch_drop_head(struct spool_batch *b, size_t k);

/* Encoding exposed for tests and fuzzing. */
int spool_encode(const struct spool_batch *b, uint8_t **out, size_t *len, struct pp_err *err);
int spool_decode(const uint8_t *buf, size_t len, struct spool_batch *out, struct pp_err *err);

#endif
