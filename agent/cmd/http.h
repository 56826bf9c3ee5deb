/*
 * http.h - the agent's HTTP endpoint (libmicrohttpd, one internal thread).
 *
 *   GET  /metrics                 self-metrics (metrics.h), Prometheus text format
 *   GET  /healthz                 200 while the agent's loop keeps beating (http_heartbeat)
 *   GET  /readyz                  200 once http_set_ready(true), else 503 + reason
 *   POST /api/v1/snapshot?pid=PID[&view=runtime|latest]
 *                                 a Go heap profile, application/octet-stream (pprof.gz);
 *                                 off unless configured; "Authorization: Bearer T"
 *                                 when a token file is set (401 otherwise, compared in
 *                                 constant time); 429 past the rate limits
 *
 * Handlers run on the server's thread: the snapshot callback must be safe to
 * call concurrently with the agent loop. Health and metrics carry nothing
 * secret and are open to whoever reaches the address. Slow or idle clients cannot
 * starve the probes: up to 1024 connections (at most a quarter of the fd
 * limit), 32 per client address, idle ones closed after 5 s.
 */
#ifndef PUSHPROF_HTTP_H
#define PUSHPROF_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "err.h"

/* Returns an HTTP status; on 200 *out (malloc'd) holds the body, otherwise
 * msg holds a one-line reason for the client. */
typedef int (*http_snapshot_fn)(void *arg, pid_t pid, const char *view, uint8_t **out, size_t *len,
				char *msg, size_t msg_len);

struct http_server;

/* POST /api/v1/snapshot: who may ask, how often (see docs/operations.md). */
struct http_snapshot_api {
	http_snapshot_fn fn; /* NULL: the API is off (404 with the reason) */
	void *arg;
	const char *token_file;		/* NULL or "": no token asked (config allows
					 * that on loopback-only listeners only) */
	uint64_t per_pid_interval_ns;	/* one snapshot of a pid per interval */
	uint32_t per_client_per_minute; /* per client address */
	uint32_t per_minute;		/* all clients */
};

struct http_opts {
	const char *address;		   /* required: "host:port" or "[v6]:port" */
	struct http_snapshot_api snapshot; /* copied; zeroed: the API is off
						 * (token_file must outlive the server) */
};

/*
 * Binds the address and starts the server's thread (libmicrohttpd's). 0
 * with *out set; or -EINVAL (address), -EADDRINUSE (cannot listen),
 * -ENOMEM, err filled, *out NULL. The functions below are thread-safe.
 */
int http_new(const struct http_opts *o, struct http_server **out, struct pp_err *err);
void http_set_ready(struct http_server *s, bool ready, const char *why);
/* The agent's loop is alive and did its work (a CPU window): /healthz answers
 * 503 once max_silence_ns pass without another call, so a stuck loop gets
 * the pod restarted. Before the first call /healthz is 200. */
void http_heartbeat(struct http_server *s, uint64_t max_silence_ns);
/* The port actually bound (useful with port 0). */
int http_port(const struct http_server *s);
/* NULL-safe: a snapshot under way ends first, then the thread is stopped. */
void http_free(struct http_server *s);

#endif
