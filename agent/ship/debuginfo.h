/*
 * debuginfo.h - upload the ELF files whose frames could not be named
 * locally (stripped C/C++ code) to Parca's DebuginfoService, so the server
 * symbolizes them: ShouldInitiateUpload -> InitiateUpload -> Upload (client
 * stream: info, then chunks of up to 8 MiB) -> MarkUploadFinished.
 *
 * The run loop only enqueues (a mutex, a hash-set lookup, a bounded queue):
 * one background thread with its own gRPC channel does the work, so a slow
 * or absent debuginfo server never delays profile pushes. Each build id is
 * remembered: uploaded and "server said no" are final for the agent's life;
 * a failure is retried no sooner than retry_ns later. When a separate debug
 * file /usr/lib/debug/.build-id/xx/yyyy.debug exists it is sent instead of
 * the mapped file. hash = sha256 hex of the bytes sent (Parca compares it to
 * decide about re-uploads); files over 1e9 bytes are not sent.
 */
#ifndef PUSHPROF_DEBUGINFO_H
#define PUSHPROF_DEBUGINFO_H

#include <stdint.h>

#include "config.h"
#include "err.h"

struct debuginfo;

struct debuginfo_opts {
	/* required: the debuginfo server (address, TLS, credentials, timeout,
	 * debuginfo_max_bytes_per_hour; copied) */
	const struct remote_store_config *rs;
	unsigned queue_len;    /* pending files; 0 -> 64; more are dropped, not remembered */
	unsigned max_ids;      /* build ids remembered; 0 -> 4096 */
	uint64_t retry_ns;     /* after a failure; 0 -> 5 min */
	const char *debug_dir; /* NULL -> "/usr/lib/debug/.build-id" */
};

struct debuginfo_stats {
	uint64_t enqueued, uploaded, refused, failed, dropped, bytes;
};

/* Starts the background thread. 0 with *out set; or a negative code (the
 * server's settings cannot be used, -ENOMEM, the thread cannot start), err
 * filled, *out NULL. Every function below is thread-safe. */
int debuginfo_new(const struct debuginfo_opts *o, struct debuginfo **out, struct pp_err *err);
/* NULL-safe. Stops the thread: a call in flight gets ~2 s more at most. */
void debuginfo_free(struct debuginfo *d);
/* build_id: GNU build id in hex; path: a file the agent can open for it now
 * (e.g. /proc/PID/map_files/START-END). Cheap when the id is known. */
void debuginfo_enqueue(struct debuginfo *d, const char *build_id, const char *path);
void debuginfo_stats(struct debuginfo *d, struct debuginfo_stats *st);

#endif
