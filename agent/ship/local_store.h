/*
 * local_store.h - finished profiles kept as files in local_store.directory
 * (for `go tool pprof`, or a node without a store), beside whatever goes to
 * the remote stores: one file per profile,
 * "<UTC time>-<type>-<comm>-<pid>-<seq>.pb.gz", written whole or not at all
 * (a temporary name, then rename), the oldest removed when the directory
 * passes max_bytes.
 *
 * The outbox owns one and calls it under its lock: not thread-safe.
 */
#ifndef PUSHPROF_LOCAL_STORE_H
#define PUSHPROF_LOCAL_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "labels.h"

struct local_store;

struct local_store_opts {
	const char *dir;    /* required; must outlive the store. Created when
				 * missing, made 0700 when others could read it */
	uint64_t max_bytes; /* bound on the .pb.gz files' total (0: each file
				 * is removed once written; config sets it) */
};

/* 0 with *out set; or a negative code (the directory cannot be made
 * private, -ENOMEM), err filled, *out NULL. */
int local_store_new(const struct local_store_opts *o, struct local_store **out, struct pp_err *err);
void local_store_free(struct local_store *ls); /* NULL-safe */

/* One profile (gzip pprof; labels name the file: __name__, trigger, comm,
 * pid, as the producer set them). 0, or negative errno with err filled (no
 * file left behind). */
int local_store_write(struct local_store *ls, const struct pp_labels *labels, const uint8_t *gz,
		      size_t len, struct pp_err *err);

#endif
