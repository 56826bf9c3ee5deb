/*
 * grpcc.h - the agent's one gRPC client (grpc C core): the library's
 * lifetime, the log hook that keeps credentials out of grpc's log lines,
 * channels and their credentials, and one call engine. The uploader
 * (WriteRaw / Pyroscope Push, the debuginfo service) and the CRI client
 * (containers.c) sit on top; nothing else calls grpc_*
 * functions (callers use <grpc/status.h>'s codes).
 *
 * Lifetime: libgrpc is not linked; the first grpcc_channel_new() opens it
 * (dynlib.h), and fails with "gRPC needs libgrpc.so.N: ..." when it cannot.
 * Every channel holds a reference on the library; the first channel
 * installs the log hook and runs grpc_init(), freeing the last channel runs
 * grpc_shutdown(). Safe from any thread.
 *
 * Log hook: grpc's log lines go to agent/base/log.h at debug level, redacted
 * by value (every grpcc_secret_register()ed string, as text and as grpc's
 * hex dump of it) and by name (whatever follows "authorization"). Its
 * error lines are also kept, numbered, for grpcc_errors_take().
 *
 * Threading: a channel has one completion queue and runs one call at a
 * time: callers serialise their calls on a channel (the uploader has one
 * caller, containers.c its mutex). Different channels run concurrently.
 */
#ifndef PUSHPROF_GRPCC_H
#define PUSHPROF_GRPCC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "labels.h"

struct grpcc_channel;

struct grpcc_channel_opts {
	const char *target; /* gRPC target ("host:port", "unix:///path"); required */
	/* TLS (false: plaintext, as for a unix socket) with, optionally, a CA,
	 * a client certificate and key (PEM files; set together), no server
	 * certificate verification, and a server name override */
	bool tls;
	const char *ca_file, *cert_file, *key_file;
	bool skip_verify;
	const char *server_name;
	/* the caller retries itself: grpc's retries off and its reconnect
	 * backoff 100 ms..5 s, so a server that comes back is reached by the
	 * caller's next attempt (false: grpc's defaults) */
	bool own_retries;
	int max_receive_bytes; /* 0: grpc's default (4 MiB) */
	const char *what;      /* error prefix for credentials, e.g. "remote_store" */
};

/*
 * 0 with *out set (the caller frees it with grpcc_channel_free()); or a
 * negative errno-style code with err filled and *out NULL: -EINVAL without
 * a target or when the TLS settings are inconsistent, the PEM file's read
 * error, -EIO when grpc cannot make the channel, -ENOMEM. Connects lazily:
 * an unreachable server is not an error here.
 */
int grpcc_channel_new(const struct grpcc_channel_opts *o, struct grpcc_channel **out,
		      struct pp_err *err);
/* NULL-safe. */
void grpcc_channel_free(struct grpcc_channel *c);

/*
 * Request messages come from next() one at a time (return 1 with *msg and
 * *len set, valid until the next call to next(); 0 after the last; negative
 * to abort the call), so a client stream never sits in memory whole. A
 * unary call sets msg/len instead and leaves next NULL.
 */
typedef int (*grpcc_next_fn)(void *arg, const uint8_t **msg, size_t *len);

struct grpcc_call {
	const char *method; /* "/package.Service/Method" */
	const uint8_t *msg; /* the one request of a unary call */
	size_t len;
	grpcc_next_fn next; /* or: the request stream */
	void *next_arg;
	const char *auth;		 /* "authorization" value (not logged); NULL none */
	const struct pp_labels *headers; /* more metadata, legal lower-case keys; NULL none */
	uint64_t timeout_ns;		 /* the call's gRPC deadline */
	bool want_resp;			 /* keep the one response message */
	/*
	 * Polled every 100 ms while the call waits: a CLOCK_MONOTONIC ns time
	 * past which the call is cancelled (0: none), so a shutdown can cut a
	 * hanging call short. NULL: the deadline alone ends the call.
	 */
	uint64_t (*limit)(void *arg);
	void *limit_arg;
};

struct grpcc_result {
	int status;	   /* grpc_status_code */
	char details[320]; /* the server's details, or grpc's error string */
	uint8_t *resp;	   /* want_resp and OK: malloc'd, caller frees */
	size_t resp_len;
	uint64_t bytes_sent; /* request bytes the transport took */
};

/*
 * Runs one call on c to its end. 0 when it ended with a status (any: the
 * caller weighs it; a call grpc would not start ends INTERNAL, one cut by
 * limit CANCELLED) and, when OK and want_resp, with the response in
 * res->resp. Negative with err set for local reasons: next()'s own
 * negative code (the call is cancelled), -EPROTO for an OK call without a
 * readable response message, -ENOMEM. res is always filled.
 */
int grpcc_call(struct grpcc_channel *c, const struct grpcc_call *call, struct grpcc_result *res,
	       struct pp_err *err);

/* "OK", "UNAVAILABLE", ... for a grpc_status_code. */
const char *grpcc_status_name(int status);

/* A legal metadata key (lower case, no "grpc-" check here) / non-binary value. */
bool grpcc_header_key_legal(const char *k);
bool grpcc_header_value_legal(const char *v);

/*
 * libgrpc's version ("29.0.0") in buf, returned. libgrpc is opened on first
 * use (the first channel): load false reports "not loaded" before that,
 * load true opens it. "unavailable (<why>)" when it cannot be opened.
 */
const char *grpcc_version(bool load, char *buf, size_t cap);

/* A string the log hook must never let out (kept for the process's life,
 * the last 16; shorter than 4 bytes: ignored). Safe from any thread. */
void grpcc_secret_register(const char *v);

/*
 * grpc's error lines are process-wide and name no channel: *seq is the
 * caller's position (start it at grpcc_errors_seq()). When an error line
 * was logged since, copies the newest into line, its CLOCK_MONOTONIC time
 * into *ns, advances *seq and returns true.
 */
uint64_t grpcc_errors_seq(void);
bool grpcc_errors_take(uint64_t *seq, char *line, size_t cap, uint64_t *ns);

#endif
