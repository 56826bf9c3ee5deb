/*
 * grpcc.c - the one gRPC client: library lifetime and log hook, channels
 * and credentials, one call engine (see grpcc.h).
 *
 * Decisions worth knowing:
 * - A call waits on its channel's completion queue in 100 ms slices, so
 *   the caller's limit() (a shutdown bound) can cut a hanging call short.
 *   The call's own deadline ends it; a second past that deadline is a
 *   guard against a stuck queue, after which the call is cancelled.
 * - A unary call runs as one batch. A client stream waits for each message
 *   before asking next() for another, so it never sits in memory whole; its
 *   status is always collected (it says why a broken stream broke).
 * - Credentials never leave through grpc's log lines. With GRPC_TRACE set,
 *   grpc prints call metadata (`key=authorization value=42 65 61 ...
 *   'Bearer ...'`, `SEND_INITIAL_METADATA{authorization: Bearer ...}`), so
 *   every line the hook forwards is redacted twice over:
 *    - by value: every registered secret (the bearer header, the raw token,
 *      values of headers whose names look secret), as text and as grpc's
 *      hex dump of it;
 *    - by name: whatever follows "authorization" up to the end of the value
 *      (',', '}', newline), for a token the hook was not told about.
 *   Secrets are kept for the process's life (a rotated token may still sit
 *   in grpc's queues).
 */
#include "grpcc.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/slice.h>
#include <grpc/support/alloc.h>
#include <grpc/support/log.h>
#include <grpc/support/time.h>

#include "buildinfo.h"
#include "dynlib.h"
#include "fileutil.h"
#include "log.h"
#include "ppclock.h"

/* libgrpc is opened when the first channel is made (dynlib.h): every grpc_
 * and gpr_ function this file calls, through G (gpr_ is libgrpc's own
 * dependency, found through its handle) */
#define GRPC_FNS(X, t)                                                   \
	X(t, gpr_free)                                                   \
	X(t, gpr_inf_future)                                             \
	X(t, gpr_log_severity_string)                                    \
	X(t, gpr_now)                                                    \
	X(t, gpr_set_log_function)                                       \
	X(t, gpr_time_add)                                               \
	X(t, gpr_time_cmp)                                               \
	X(t, gpr_time_from_millis)                                       \
	X(t, gpr_time_from_nanos)                                        \
	X(t, gpr_time_from_seconds)                                      \
	X(t, grpc_byte_buffer_destroy)                                   \
	X(t, grpc_byte_buffer_reader_destroy)                            \
	X(t, grpc_byte_buffer_reader_init)                               \
	X(t, grpc_byte_buffer_reader_readall)                            \
	X(t, grpc_call_cancel)                                           \
	X(t, grpc_call_start_batch)                                      \
	X(t, grpc_call_unref)                                            \
	X(t, grpc_channel_create)                                        \
	X(t, grpc_channel_create_call)                                   \
	X(t, grpc_channel_credentials_release)                           \
	X(t, grpc_channel_destroy)                                       \
	X(t, grpc_completion_queue_create_for_next)                      \
	X(t, grpc_completion_queue_destroy)                              \
	X(t, grpc_completion_queue_next)                                 \
	X(t, grpc_completion_queue_shutdown)                             \
	X(t, grpc_empty_slice)                                           \
	X(t, grpc_init)                                                  \
	X(t, grpc_insecure_credentials_create)                           \
	X(t, grpc_metadata_array_destroy)                                \
	X(t, grpc_metadata_array_init)                                   \
	X(t, grpc_raw_byte_buffer_create)                                \
	X(t, grpc_shutdown)                                              \
	X(t, grpc_slice_from_copied_buffer)                              \
	X(t, grpc_slice_from_copied_string)                              \
	X(t, grpc_slice_from_static_string)                              \
	X(t, grpc_slice_unref)                                           \
	X(t, grpc_ssl_credentials_create)                                \
	X(t, grpc_tls_certificate_provider_release)                      \
	X(t, grpc_tls_certificate_provider_static_data_create)           \
	X(t, grpc_tls_certificate_verifier_no_op_create)                 \
	X(t, grpc_tls_certificate_verifier_release)                      \
	X(t, grpc_tls_credentials_create)                                \
	X(t, grpc_tls_credentials_options_create)                        \
	X(t, grpc_tls_credentials_options_set_certificate_provider)      \
	X(t, grpc_tls_credentials_options_set_certificate_verifier)      \
	X(t, grpc_tls_credentials_options_set_check_call_host)           \
	X(t, grpc_tls_credentials_options_set_verify_server_cert)        \
	X(t, grpc_tls_credentials_options_watch_identity_key_cert_pairs) \
	X(t, grpc_tls_credentials_options_watch_root_certs)              \
	X(t, grpc_tls_identity_pairs_add_pair)                           \
	X(t, grpc_tls_identity_pairs_create)                             \
	X(t, grpc_version_string)

static struct {
	GRPC_FNS(DYNLIB_PTR, _)
} G;
static struct dynlib grpc_lib = DYNLIB_INIT(PP_SONAME_GRPC, "gRPC", G, GRPC_FNS);

#define MAX_PEM_BYTES (1u << 20)
#define MAX_METADATA 33 /* authorization + 32 headers */

struct grpcc_channel {
	grpc_channel *ch;
	grpc_completion_queue *cq;
};

/* ---- the log hook: redaction and the last error line ------------------- */

static pthread_mutex_t grpc_log_lock = PTHREAD_MUTEX_INITIALIZER;
static char grpc_last_error[200];
static uint64_t grpc_error_seq;
static uint64_t grpc_last_error_ns; /* CLOCK_MONOTONIC of grpc_last_error */

#define SECRETS_MAX 16
#define REDACTED "[REDACTED]"
static char *secrets[SECRETS_MAX]; /* under grpc_log_lock */
static unsigned secrets_next;

void grpcc_secret_register(const char *v)
{
	if (!v || strlen(v) < 4)
		return;
	pthread_mutex_lock(&grpc_log_lock);
	for (unsigned i = 0; i < SECRETS_MAX; i++) {
		if (secrets[i] && !strcmp(secrets[i], v)) {
			pthread_mutex_unlock(&grpc_log_lock);
			return;
		}
	}
	char *c = strdup(v);
	if (c) {
		unsigned i = secrets_next++ % SECRETS_MAX;
		if (secrets[i]) {
			explicit_bzero(secrets[i], strlen(secrets[i]));
			free(secrets[i]);
		}
		secrets[i] = c;
	}
	pthread_mutex_unlock(&grpc_log_lock);
}

/* Replace every occurrence of needle in buf (NUL-terminated, capacity cap). */
static void replace_all(char *buf, size_t cap, const char *needle, bool nocase)
{
	size_t nl = strlen(needle), rl = strlen(REDACTED);
	char *p = buf;

	if (!nl)
		return;
	while ((p = nocase ? strcasestr(p, needle) : strstr(p, needle))) {
		size_t tail = strlen(p + nl);
		if ((size_t)(p - buf) + rl + tail + 1 > cap) { /* no room: cut the line here */
			snprintf(p, cap - (size_t)(p - buf), "%s", REDACTED);
			return;
		}
		memmove(p + rl, p + nl, tail + 1);
		memcpy(p, REDACTED, rl);
		p += rl;
	}
}

/* grpc_dump_slice's hex form: "42 65 61" (lower-case, one space apart). */
static void hex_form(const char *v, char *out, size_t cap)
{
	size_t o = 0;

	out[0] = '\0';
	for (const unsigned char *q = (const unsigned char *)v; *q && o + 4 < cap; q++)
		o += (size_t)snprintf(out + o, cap - o,
				      q == (const unsigned char *)v ? "%02x" : " %02x", *q);
}

static void redact(char *buf, size_t cap)
{
	char hex[4096]; /* a longer secret cannot fit a whole log line */

	pthread_mutex_lock(&grpc_log_lock);
	for (unsigned i = 0; i < SECRETS_MAX; i++) {
		if (!secrets[i])
			continue;
		replace_all(buf, cap, secrets[i], false);
		hex_form(secrets[i], hex, sizeof(hex));
		replace_all(buf, cap, hex, true);
	}
	pthread_mutex_unlock(&grpc_log_lock);
	static const char name[] = "authorization";
	for (char *p = buf; (p = strcasestr(p, name));) {
		p += sizeof(name) - 1;
		size_t skip = strspn(p, ":= \t'\"");
		if (!strncmp(p + skip, "value=", 6))
			skip += 6;
		char *v = p + skip, *end = v + strcspn(v, ",}\n");
		if (end == v || !strncmp(v, REDACTED, strlen(REDACTED)))
			continue;
		size_t rl = strlen(REDACTED);
		if ((size_t)(v - buf) + rl + 1 > cap)
			break;
		memmove(v + rl, end, strlen(end) + 1);
		memcpy(v, REDACTED, rl);
		p = v + rl;
	}
}

static void grpc_log_hook(gpr_log_func_args *a)
{
	char msg[4096];

	snprintf(msg, sizeof(msg), "%s", a->message ? a->message : "");
	redact(msg, sizeof(msg));
	if (a->severity == GPR_LOG_SEVERITY_ERROR) {
		pthread_mutex_lock(&grpc_log_lock);
		snprintf(grpc_last_error, sizeof(grpc_last_error), "%.199s", msg);
		grpc_error_seq++;
		grpc_last_error_ns = pp_mono_ns();
		pthread_mutex_unlock(&grpc_log_lock);
	}
	pp_log(PP_DEBUG, "grpc", "severity=%s src=%s:%d detail=%s",
	       G.gpr_log_severity_string(a->severity), pp_q(a->file ? a->file : "?"), a->line,
	       pp_q(msg));
	explicit_bzero(msg, sizeof(msg));
}

uint64_t grpcc_errors_seq(void)
{
	pthread_mutex_lock(&grpc_log_lock);
	uint64_t seq = grpc_error_seq;
	pthread_mutex_unlock(&grpc_log_lock);
	return seq;
}

bool grpcc_errors_take(uint64_t *seq, char *line, size_t cap, uint64_t *ns)
{
	bool taken = false;

	pthread_mutex_lock(&grpc_log_lock);
	if (grpc_error_seq != *seq) {
		snprintf(line, cap, "%s", grpc_last_error);
		*ns = grpc_last_error_ns;
		*seq = grpc_error_seq;
		taken = true;
	}
	pthread_mutex_unlock(&grpc_log_lock);
	return taken;
}

/* ---- process-wide grpc_init/grpc_shutdown ------------------------------ */

static pthread_mutex_t grpc_users_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned grpc_users;

static int grpc_ref(struct pp_err *err)
{
	int rc = dynlib_load(&grpc_lib, err);
	if (rc)
		return rc; /* err may be NULL: the code is returned, not read back */
	pthread_mutex_lock(&grpc_users_lock);
	if (grpc_users++ == 0) {
		G.gpr_set_log_function(grpc_log_hook);
		G.grpc_init();
	}
	pthread_mutex_unlock(&grpc_users_lock);
	return 0;
}

static void grpc_unref(void)
{
	pthread_mutex_lock(&grpc_users_lock);
	if (--grpc_users == 0)
		G.grpc_shutdown();
	pthread_mutex_unlock(&grpc_users_lock);
}

/* ---- channels ---------------------------------------------------------- */

static void free_secret(char *s)
{
	if (s) {
		explicit_bzero(s, strlen(s));
		free(s);
	}
}

static grpc_channel_credentials *make_creds(const struct grpcc_channel_opts *o, struct pp_err *err)
{
	const char *what = o->what ? o->what : "gRPC";
	char *ca = NULL, *cert = NULL, *key = NULL;
	grpc_channel_credentials *creds = NULL;

	if (!o->tls)
		return G.grpc_insecure_credentials_create();
	if ((o->cert_file && *o->cert_file) != (o->key_file && *o->key_file)) {
		pp_errf(err, -EINVAL, "%s: cert_file and key_file must be set together", what);
		return NULL;
	}
	if (o->ca_file && *o->ca_file &&
	    pp_read_small_file(o->ca_file, MAX_PEM_BYTES, &ca, NULL, NULL, "CA file", err))
		goto out;
	if (o->cert_file && *o->cert_file &&
	    (pp_read_small_file(o->cert_file, MAX_PEM_BYTES, &cert, NULL, NULL,
				"client certificate", err) ||
	     pp_read_small_file(o->key_file, MAX_PEM_BYTES, &key, NULL, NULL, "client key", err)))
		goto out;

	if (o->skip_verify) {
		/* The TLS credentials API is the one that can turn server
		 * certificate verification off (a no-op verifier and
		 * verify_server_cert = 0); encryption stays on. */
		grpc_tls_credentials_options *to = G.grpc_tls_credentials_options_create();
		G.grpc_tls_credentials_options_set_verify_server_cert(to, 0);
		grpc_tls_certificate_verifier *v = G.grpc_tls_certificate_verifier_no_op_create();
		G.grpc_tls_credentials_options_set_certificate_verifier(to, v);
		G.grpc_tls_certificate_verifier_release(v);
		G.grpc_tls_credentials_options_set_check_call_host(to, 0);
		if (ca || cert) {
			grpc_tls_identity_pairs *pairs = NULL;
			if (cert) {
				pairs = G.grpc_tls_identity_pairs_create();
				G.grpc_tls_identity_pairs_add_pair(pairs, key, cert);
			}
			grpc_tls_certificate_provider *p =
				G.grpc_tls_certificate_provider_static_data_create(ca, pairs);
			G.grpc_tls_credentials_options_set_certificate_provider(to, p);
			G.grpc_tls_certificate_provider_release(p);
			if (ca)
				G.grpc_tls_credentials_options_watch_root_certs(to);
			if (cert)
				G.grpc_tls_credentials_options_watch_identity_key_cert_pairs(to);
		}
		creds = G.grpc_tls_credentials_create(to);
	} else {
		grpc_ssl_pem_key_cert_pair pair = { key, cert };
		creds = G.grpc_ssl_credentials_create(ca, cert ? &pair : NULL, NULL, NULL);
	}
	if (!creds)
		pp_errf(err, -EINVAL, "%s: could not create TLS credentials", what);
out:
	free(ca);
	free(cert);
	free_secret(key);
	return creds;
}

int grpcc_channel_new(const struct grpcc_channel_opts *o, struct grpcc_channel **out,
		      struct pp_err *err)
{
	struct pp_err local = { 0 };
	struct grpcc_channel *c;

	*out = NULL;
	if (!err)
		err = &local; /* the code travels in it: keep one */
	if (!o->target || !*o->target)
		return pp_errf(err, -EINVAL, "%s: no gRPC target", o->what ? o->what : "grpc");
	int ref = grpc_ref(err);
	if (ref)
		return ref;
	c = calloc(1, sizeof(*c));
	if (!c) {
		grpc_unref();
		return pp_errf(err, -ENOMEM, "out of memory");
	}
	grpc_channel_credentials *creds = make_creds(o, err);
	if (!creds) {
		grpc_unref();
		free(c);
		return err->code ? err->code : -EINVAL;
	}
	grpc_arg args[8];
	size_t na = 0;
	args[na++] = (grpc_arg){ .type = GRPC_ARG_STRING,
				 .key = GRPC_ARG_PRIMARY_USER_AGENT_STRING,
				 .value.string = "pushprof/" PUSHPROF_VERSION };
	if (o->own_retries) {
		args[na++] = (grpc_arg){ .type = GRPC_ARG_INTEGER,
					 .key = GRPC_ARG_ENABLE_RETRIES,
					 .value.integer = 0 };
		args[na++] = (grpc_arg){ .type = GRPC_ARG_INTEGER,
					 .key = GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS,
					 .value.integer = 100 };
		args[na++] = (grpc_arg){ .type = GRPC_ARG_INTEGER,
					 .key = GRPC_ARG_MIN_RECONNECT_BACKOFF_MS,
					 .value.integer = 100 };
		args[na++] = (grpc_arg){ .type = GRPC_ARG_INTEGER,
					 .key = GRPC_ARG_MAX_RECONNECT_BACKOFF_MS,
					 .value.integer = 5000 };
	}
	if (o->max_receive_bytes)
		args[na++] = (grpc_arg){ .type = GRPC_ARG_INTEGER,
					 .key = GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH,
					 .value.integer = o->max_receive_bytes };
	if (o->tls && o->server_name && *o->server_name)
		args[na++] = (grpc_arg){ .type = GRPC_ARG_STRING,
					 .key = GRPC_SSL_TARGET_NAME_OVERRIDE_ARG,
					 .value.string = (char *)o->server_name };
	grpc_channel_args cargs = { na, args };
	c->ch = G.grpc_channel_create(o->target, creds, &cargs);
	G.grpc_channel_credentials_release(creds);
	c->cq = G.grpc_completion_queue_create_for_next(NULL);
	if (!c->ch || !c->cq) {
		grpcc_channel_free(c);
		return pp_errf(err, -EIO, "cannot create a gRPC channel to %s", o->target);
	}
	*out = c;
	return 0;
}

void grpcc_channel_free(struct grpcc_channel *c)
{
	if (!c)
		return;
	if (c->cq) {
		G.grpc_completion_queue_shutdown(c->cq);
		while (G.grpc_completion_queue_next(c->cq, G.gpr_inf_future(GPR_CLOCK_REALTIME),
						    NULL)
			       .type != GRPC_QUEUE_SHUTDOWN)
			;
		G.grpc_completion_queue_destroy(c->cq);
	}
	if (c->ch)
		G.grpc_channel_destroy(c->ch);
	grpc_unref();
	free(c);
}

/* ---- the call engine --------------------------------------------------- */

const char *grpcc_status_name(int c)
{
	static const char *const names[] = {
		"OK",
		"CANCELLED",
		"UNKNOWN",
		"INVALID_ARGUMENT",
		"DEADLINE_EXCEEDED",
		"NOT_FOUND",
		"ALREADY_EXISTS",
		"PERMISSION_DENIED",
		"RESOURCE_EXHAUSTED",
		"FAILED_PRECONDITION",
		"ABORTED",
		"OUT_OF_RANGE",
		"UNIMPLEMENTED",
		"INTERNAL",
		"UNAVAILABLE",
		"DATA_LOSS",
		"UNAUTHENTICATED",
	};
	if ((unsigned)c < sizeof(names) / sizeof(names[0]))
		return names[c];
	return "UNKNOWN_STATUS";
}

/* grpc's own rules (grpc_header_key_is_legal, grpc_header_nonbin_value_is_legal
 * in src/core/lib/surface/validate_metadata.cc), here so that checking a
 * config does not load libgrpc: a key is [0-9a-z_.-]+, a value printable
 * ASCII. */
bool grpcc_header_key_legal(const char *k)
{
	if (!*k)
		return false;
	for (; *k; k++)
		if (!((*k >= 'a' && *k <= 'z') || (*k >= '0' && *k <= '9') || *k == '-' ||
		      *k == '_' || *k == '.'))
			return false;
	return true;
}

bool grpcc_header_value_legal(const char *v)
{
	for (; *v; v++)
		if (*v < 0x20 || *v > 0x7e)
			return false;
	return true;
}

const char *grpcc_version(bool load, char *buf, size_t cap)
{
	struct pp_err e = { 0 };

	if (!load && !dynlib_loaded(&grpc_lib))
		snprintf(buf, cap, "not loaded");
	else if (dynlib_load(&grpc_lib, &e))
		snprintf(buf, cap, "unavailable (%s)", e.msg);
	else
		snprintf(buf, cap, "%s", G.grpc_version_string());
	return buf;
}

/* Per-call metadata: the authorization value first, then the headers. */
static size_t metadata_build(const struct grpcc_call *call, grpc_metadata *md, size_t max)
{
	size_t nmd = 0;

	if (call->auth && max) {
		md[nmd].key = G.grpc_slice_from_static_string("authorization");
		md[nmd].value = G.grpc_slice_from_copied_string(call->auth);
		nmd++;
	}
	for (size_t i = 0; call->headers && i < call->headers->n && nmd < max; i++) {
		md[nmd].key = G.grpc_slice_from_copied_string(call->headers->v[i].name);
		md[nmd].value = G.grpc_slice_from_copied_string(call->headers->v[i].value);
		nmd++;
	}
	return nmd;
}

static void metadata_free(const struct grpcc_call *call, grpc_metadata *md, size_t nmd)
{
	for (size_t i = 0; i < nmd; i++) {
		G.grpc_slice_unref(md[i].key);
		if (i == 0 && call->auth) /* scrub our copy of the token */
			explicit_bzero((void *)GRPC_SLICE_START_PTR(md[i].value),
				       GRPC_SLICE_LENGTH(md[i].value));
		G.grpc_slice_unref(md[i].value);
	}
}

/* Wait for the one outstanding batch; false when it failed or timed out
 * (the call is then cancelled and the batch drained). */
static bool wait_batch(struct grpcc_channel *c, const struct grpcc_call *call, grpc_call *gc,
		       gpr_timespec *guard)
{
	grpc_event ev;

	for (;;) {
		gpr_timespec slice = G.gpr_time_add(G.gpr_now(GPR_CLOCK_MONOTONIC),
						    G.gpr_time_from_millis(100, GPR_TIMESPAN));
		if (G.gpr_time_cmp(slice, *guard) > 0)
			slice = *guard;
		ev = G.grpc_completion_queue_next(c->cq, slice, NULL);
		if (ev.type != GRPC_QUEUE_TIMEOUT || G.gpr_time_cmp(slice, *guard) >= 0)
			break;
		uint64_t limit = call->limit ? call->limit(call->limit_arg) : 0;
		if (limit) {
			uint64_t now = pp_mono_ns(), left = limit > now ? limit - now : 0;
			gpr_timespec cut =
				G.gpr_time_add(G.gpr_now(GPR_CLOCK_MONOTONIC),
					       G.gpr_time_from_nanos((int64_t)left, GPR_TIMESPAN));
			if (G.gpr_time_cmp(cut, *guard) < 0)
				*guard = cut;
		}
	}
	if (ev.type == GRPC_QUEUE_TIMEOUT) {
		G.grpc_call_cancel(gc, NULL);
		ev = G.grpc_completion_queue_next(c->cq, G.gpr_inf_future(GPR_CLOCK_REALTIME),
						  NULL);
		return false;
	}
	return ev.type == GRPC_OP_COMPLETE && ev.success;
}

/* Start one batch and wait for it. */
static bool run_batch(struct grpcc_channel *c, const struct grpcc_call *call, grpc_call *gc,
		      const grpc_op *ops, size_t nops, gpr_timespec *guard)
{
	return G.grpc_call_start_batch(gc, ops, nops, gc, NULL) == GRPC_CALL_OK &&
	       wait_batch(c, call, gc, guard);
}

int grpcc_call(struct grpcc_channel *c, const struct grpcc_call *call, struct grpcc_result *res,
	       struct pp_err *err)
{
	grpc_metadata md[MAX_METADATA];
	grpc_metadata_array initial_md, trailing_md;
	grpc_byte_buffer *recv = NULL;
	grpc_slice details = G.grpc_empty_slice();
	const char *error_string = NULL;
	grpc_status_code status = GRPC_STATUS_UNKNOWN;
	grpc_op ops[6];
	grpc_byte_buffer *unary = NULL;
	int rc = 0, nerr = 0;

	memset(res, 0, sizeof(*res));
	res->status = GRPC_STATUS_UNKNOWN;
	G.grpc_metadata_array_init(&initial_md);
	G.grpc_metadata_array_init(&trailing_md);
	size_t nmd = metadata_build(call, md, MAX_METADATA);
	gpr_timespec deadline =
		G.gpr_time_add(G.gpr_now(GPR_CLOCK_MONOTONIC),
			       G.gpr_time_from_nanos((int64_t)call->timeout_ns, GPR_TIMESPAN));
	gpr_timespec guard = G.gpr_time_add(deadline, G.gpr_time_from_seconds(1, GPR_TIMESPAN));
	/* create_call takes its own reference on the method slice */
	grpc_slice method_slice = G.grpc_slice_from_copied_string(call->method);
	grpc_call *gc = G.grpc_channel_create_call(c->ch, NULL, GRPC_PROPAGATE_DEFAULTS, c->cq,
						   method_slice, NULL, deadline, NULL);
	G.grpc_slice_unref(method_slice);
	if (!gc) {
		res->status = GRPC_STATUS_INTERNAL;
		snprintf(res->details, sizeof(res->details), "cannot create a call");
		goto out;
	}
	memset(ops, 0, sizeof(ops));
	size_t nops = 0;
	ops[nops].op = GRPC_OP_SEND_INITIAL_METADATA;
	ops[nops].data.send_initial_metadata.count = nmd;
	ops[nops++].data.send_initial_metadata.metadata = nmd ? md : NULL;
	bool stream_ok = true;
	if (call->next) {
		/* a stream: each message waited for before next() is asked again */
		stream_ok = run_batch(c, call, gc, ops, nops, &guard);
		memset(ops, 0, sizeof(ops));
		nops = 0;
	} else {
		/* unary: the whole call in one batch */
		grpc_slice payload =
			G.grpc_slice_from_copied_buffer((const char *)call->msg, call->len);
		unary = G.grpc_raw_byte_buffer_create(&payload, 1);
		G.grpc_slice_unref(payload);
		ops[nops].op = GRPC_OP_SEND_MESSAGE;
		ops[nops++].data.send_message.send_message = unary;
	}
	while (call->next && stream_ok) {
		const uint8_t *msg = NULL;
		size_t len = 0;
		int n = call->next(call->next_arg, &msg, &len);
		if (n < 0) {
			nerr = n;
			G.grpc_call_cancel(gc, NULL);
			stream_ok = false;
			break;
		}
		if (n == 0)
			break;
		grpc_slice payload = G.grpc_slice_from_copied_buffer((const char *)msg, len);
		grpc_byte_buffer *send = G.grpc_raw_byte_buffer_create(&payload, 1);
		G.grpc_slice_unref(payload);
		grpc_op op = { .op = GRPC_OP_SEND_MESSAGE, .data.send_message.send_message = send };
		stream_ok = run_batch(c, call, gc, &op, 1, &guard);
		G.grpc_byte_buffer_destroy(send);
		if (stream_ok)
			res->bytes_sent += len;
	}
	/* Always collect the status: it says why a broken stream broke. */
	if (stream_ok)
		ops[nops++].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
	ops[nops].op = GRPC_OP_RECV_INITIAL_METADATA;
	ops[nops++].data.recv_initial_metadata.recv_initial_metadata = &initial_md;
	ops[nops].op = GRPC_OP_RECV_MESSAGE;
	ops[nops++].data.recv_message.recv_message = &recv;
	ops[nops].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
	ops[nops].data.recv_status_on_client.trailing_metadata = &trailing_md;
	ops[nops].data.recv_status_on_client.status = &status;
	ops[nops].data.recv_status_on_client.status_details = &details;
	ops[nops++].data.recv_status_on_client.error_string = &error_string;
	grpc_call_error ce = G.grpc_call_start_batch(gc, ops, nops, gc, NULL);
	if (ce != GRPC_CALL_OK) {
		res->status = GRPC_STATUS_INTERNAL;
		snprintf(res->details, sizeof(res->details), "grpc_call_start_batch failed (%d)",
			 (int)ce);
		goto out;
	}
	/* the status batch completes once the call ends (its deadline ends
	 * it anyway); the guard and limit() bound the wait */
	wait_batch(c, call, gc, &guard);
	res->status = status;
	if (unary && status == GRPC_STATUS_OK)
		res->bytes_sent = call->len;
	size_t dl = GRPC_SLICE_LENGTH(details);
	if (dl) {
		if (dl >= sizeof(res->details))
			dl = sizeof(res->details) - 1;
		memcpy(res->details, GRPC_SLICE_START_PTR(details), dl);
		res->details[dl] = '\0';
	} else if (error_string) {
		snprintf(res->details, sizeof(res->details), "%s", error_string);
	}
	if (nerr) {
		rc = pp_errf(err, nerr, "%s: request not produced (%s)", call->method,
			     strerror(-nerr));
		goto out;
	}
	if (status != GRPC_STATUS_OK || !call->want_resp)
		goto out;
	grpc_byte_buffer_reader reader;
	if (!recv || !G.grpc_byte_buffer_reader_init(&reader, recv)) {
		rc = pp_errf(err, -EPROTO, "%s: %s", call->method,
			     recv ? "unreadable response" : "no response message");
		goto out;
	}
	grpc_slice all = G.grpc_byte_buffer_reader_readall(&reader);
	G.grpc_byte_buffer_reader_destroy(&reader);
	size_t rl = GRPC_SLICE_LENGTH(all);
	res->resp = malloc(rl ? rl : 1);
	if (res->resp) {
		memcpy(res->resp, GRPC_SLICE_START_PTR(all), rl);
		res->resp_len = rl;
	} else {
		rc = pp_errf(err, -ENOMEM, "out of memory");
	}
	G.grpc_slice_unref(all);
out:
	if (error_string)
		G.gpr_free((void *)error_string);
	G.grpc_slice_unref(details);
	if (recv)
		G.grpc_byte_buffer_destroy(recv);
	if (unary)
		G.grpc_byte_buffer_destroy(unary);
	G.grpc_metadata_array_destroy(&initial_md);
	G.grpc_metadata_array_destroy(&trailing_md);
	metadata_free(call, md, nmd);
	if (gc)
		G.grpc_call_unref(gc);
	return rc;
}
