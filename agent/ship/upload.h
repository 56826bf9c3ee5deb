/*
 * upload.h - the remote store's client: Parca's
 * ProfileStoreService/WriteRaw (or Pyroscope's Push) over agent/base/grpcc.h,
 * or Connect over HTTP (connect.h).
 *
 * uploader_write() sends a batch synchronously: one RawProfileSeries per
 * label set (labels sorted), split into several requests when the batch
 * exceeds remote_store.max_request_bytes, retried with exponential backoff
 * and jitter on UNAVAILABLE, DEADLINE_EXCEEDED and RESOURCE_EXHAUSTED, never
 * on INVALID_ARGUMENT or UNAUTHENTICATED (the server's message is kept in
 * err). The bearer token is read from remote_store.bearer_token_file (re-read
 * when it changes) or env PUSHPROF_BEARER_TOKEN and is never logged.
 *
 * Handing a profile over (queueing, spooling, local store) lives elsewhere;
 * this module only sends now.
 */
#ifndef PUSHPROF_UPLOAD_H
#define PUSHPROF_UPLOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "err.h"
#include "labels.h"

struct uploader;

struct upload_series {
	const struct pp_labels *labels; /* must include __name__ */
	const uint8_t *profile;		/* gzip-compressed pprof */
	size_t len;
};

struct upload_stats {
	uint64_t requests_ok, requests_failed, retries, bytes_sent;
	uint64_t last_status; /* grpc_status_code of the last call */
};

struct uploader_opts {
	const struct remote_store_config *rs; /* required; copied (what is kept) */
};

/*
 * Checks the headers and credentials and sets up the channel (gRPC) or the
 * Connect client (transport: http); connects lazily. 0 with *out set; or a
 * negative code (-EINVAL: a setting that cannot be used, -ENOMEM, what the
 * token file or TLS files gave), err filled, *out NULL. Starts no thread.
 * One caller at a time (the outbox calls it from one thread per store).
 */
int uploader_new(const struct uploader_opts *opts, struct uploader **out, struct pp_err *err);
void uploader_free(struct uploader *u); /* NULL-safe */

/* 0 when every series was accepted; negative with err set otherwise:
 * -EACCES (UNAUTHENTICATED), -EINVAL (INVALID_ARGUMENT: the server refused
 * the data), -E2BIG (a series above Parca's message limit), -ETIMEDOUT (the
 * last attempt hit remote_store.timeout: the server may be slow rather than
 * down, and may have stored the request), -EIO (anything else).
 * *sent (optional) tells how many leading series were delivered. */
int uploader_write(struct uploader *u, const struct upload_series *series, size_t n, size_t *sent,
		   struct pp_err *err);
/* No call (retries included) runs past this CLOCK_MONOTONIC time; 0 lifts
 * it. The agent sets it when it stops, so a hanging server cannot hold a
 * shutdown for 3 x timeout: what is not sent by then is spooled. */
void uploader_set_deadline(struct uploader *u, uint64_t mono_ns_deadline);
/* Polled (every 100 ms) while a call waits: when fn says the agent is
 * stopping, the call and its retries get 2 s more at most. */
void uploader_set_interrupt(struct uploader *u, bool (*fn)(void *arg), void *arg);
const struct upload_stats *uploader_stats(const struct uploader *u);
/* Extra labels (e.g. store="name", copied) on this uploader's request
 * metrics; NULL: none (the default). */
void uploader_set_metric_label(struct uploader *u, const char *labels);

/*
 * Any other method of the same server (the debuginfo upload uses it), on
 * this uploader's channel with its credentials, headers and bearer token:
 * request messages come from next() one at a time (return 1 with *msg and
 * *len set, valid until the next call; 0 after the last; negative to abort
 * the call), so a client stream never sits in memory whole; exactly one
 * response message is returned in *resp (malloc'd, caller frees). Unary
 * calls give one message. No retries here; timeout_ns bounds the whole call
 * and the deadline/interrupt above apply. Negative with err naming the
 * method and the gRPC status otherwise; *status (optional) gets that status.
 */
typedef int (*uploader_next_fn)(void *arg, const uint8_t **msg, size_t *len);
int uploader_call(struct uploader *u, const char *method, uploader_next_fn next, void *arg,
		  uint64_t timeout_ns, uint8_t **resp, size_t *resp_len, int *status,
		  struct pp_err *err);

#endif
