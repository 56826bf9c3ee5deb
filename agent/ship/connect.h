/*
 * connect.h - unary calls in Connect's protocol over HTTP/1.1 (libcurl),
 * for stores reached through HTTP load balancers that do not carry gRPC
 * (hosted Grafana Pyroscope): remote_store.transport: http.
 *
 * A call is a POST of the serialized request message to
 * <scheme>://<address><path_prefix>/<package.Service>/<Method> with
 * Content-Type application/proto. The answer is the serialized response
 * (HTTP 200) or a JSON error {"code": "invalid_argument", "message": ...},
 * whose codes are gRPC's by name (connectrpc.com/docs/protocol). The
 * result is reported as a grpc_status_code so the uploader treats both
 * transports alike (retries, refusals, hints).
 *
 * One client per uploader; not thread-safe (the uploader's caller is one
 * thread at a time). The connection is kept alive between calls.
 */
#ifndef PUSHPROF_CONNECT_H
#define PUSHPROF_CONNECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "err.h"
#include "labels.h"

struct connect_client;

struct connect_opts {
	/* required: address, path_prefix and the TLS settings (copied) */
	const struct remote_store_config *rs;
};

/* 0 with *out set; or -EIO (libcurl cannot start) or -ENOMEM, err filled,
 * *out NULL. Connects lazily, at the first call; starts no thread. */
int connect_new(const struct connect_opts *o, struct connect_client **out, struct pp_err *err);
void connect_free(struct connect_client *c); /* NULL-safe */

struct connect_call {
	const char *method;		 /* "/push.v1.PusherService/Push" */
	const struct pp_labels *headers; /* extra headers (lower-case names) */
	const char *auth;		 /* Authorization value or NULL; never logged */
	const uint8_t *body;
	size_t len;
	uint64_t timeout_ns;
	/* Polled while the call runs (every ~100 ms): true aborts it. */
	bool (*stop)(void *arg);
	void *stop_arg;
};

/* Runs the call; *status gets a grpc_status_code (OK, or what the server or
 * the network said), details a one-line explanation. Returns 0 unless the
 * client itself failed (out of memory). */
int connect_unary(struct connect_client *c, const struct connect_call *call, int *status,
		  char *details, size_t details_len);

/* A non-200 answer: its grpc_status_code (from the Connect error's "code",
 * else from the HTTP status) and a one-line message (the error's "message",
 * else the start of the body) in msg. body is NUL-terminated, len bytes. */
int connect_parse_error(const char *body, size_t len, long http, char *msg, size_t cap);

/* The URL calls go to (for logs; no credentials in it). */
const char *connect_base_url(const struct connect_client *c);

#endif
