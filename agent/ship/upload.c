/*
 * upload.c - WriteRaw (or Pyroscope's Push) over agent/base/grpcc.h: one
 * channel per uploader, one synchronous unary call per request; or over
 * connect.h when remote_store.transport is http.
 *
 * Decisions worth knowing:
 * - A batch is split greedily, in order, into requests whose encoded size
 *   stays under max_request_bytes. A single series larger than that limit
 *   is sent alone in its own request (the limit keeps requests small; it is
 *   not the server's). A request above Parca's 64 MiB message limit is not
 *   sent at all: -E2BIG, nothing retried.
 * - Retries: UNAVAILABLE, DEADLINE_EXCEEDED and RESOURCE_EXHAUSTED only;
 *   at most UPLOAD_MAX_ATTEMPTS attempts per request, backoff 100 ms
 *   doubling to 5 s with "equal jitter" (half fixed, half random), and all
 *   attempts of one request within 3x the per-call timeout.
 * - grpc's own retry machinery is turned off (we retry ourselves) and its
 *   reconnect backoff is shortened to 100 ms..5 s so a server that comes
 *   back is reached by the next attempt (grpcc's own_retries).
 * - The credential (upload_auth.c) and secret-looking headers are
 *   registered with grpcc's log hook, which redacts them from grpc's log
 *   lines.
 * - A failed request's err carries grpc's last error line
 *   (e.g. "certificate verify failed", which the status does not carry: in
 *   grpc 1.51 a refused connection and a failed TLS handshake have the same
 *   details) and the hint drawn from it, but only a line this uploader can
 *   own: logged since its previous request (or its creation), and recent.
 *   The log is process-wide and names no channel, so that is the closest
 *   tie there is; another store's or an old attempt's line is not taken.
 * - Not thread-safe: one caller at a time per uploader.
 */
#include "upload.h"
#include "metrics.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <grpc/status.h>

#include "connect.h"
#include "upload_auth.h"
#include "grpcc.h"
#include "proto/profilestore.pb-c.h"
#include "proto/push.pb-c.h"
#include "ppclock.h"

#define WRITE_RAW_METHOD "/parca.profilestore.v1alpha1.ProfileStoreService/WriteRaw"
#define PUSH_METHOD "/push.v1.PusherService/Push"
#define UPLOAD_MAX_ATTEMPTS 5
#define BACKOFF_INITIAL_NS 100000000ull /* 100 ms */
#define BACKOFF_MAX_NS 5000000000ull	/* 5 s */
#define PARCA_MAX_MESSAGE (64u << 20)

struct uploader {
	struct grpcc_channel *channel;
	struct connect_client *conn; /* transport: http; then no channel */
	char *target;
	uint64_t timeout_ns, max_request_bytes;
	struct upload_auth cred; /* the Authorization value (upload_auth.h) */
	enum store_protocol protocol;
	char metric_label[96];		  /* uploader_set_metric_label(); "" none */
	const char *method, *method_name; /* gRPC path; its short name for logs */
	bool tls;			  /* remote_store.insecure is false */
	bool client_cert;		  /* remote_store.cert_file is set (mTLS) */
	struct pp_labels headers;	  /* lower-cased keys, checked legal */
	struct upload_stats stats;
	_Atomic uint64_t
		hard_deadline; /* CLOCK_MONOTONIC ns; 0 = none (shutdown bound); set from another thread */
	bool (*interrupt)(void *arg); /* true: the agent is stopping */
	void *interrupt_arg;
	uint64_t rng;
	/* grpc's error lines this uploader has taken as its own (see the top
	 * of the file): the global sequence number it has looked up to, and
	 * the newest line it took, with when it was logged */
	uint64_t grpc_err_seq;
	char grpc_err[200];
	uint64_t grpc_err_ns; /* CLOCK_MONOTONIC; 0 = none */
};

/* ---- grpc's error lines ------------------------------------------------ */

/*
 * How long before a request began a grpc error line may have been logged
 * and still explain the request's failure: grpc logs a failed handshake
 * once and then fails calls fast until its reconnect backoff (at most 5 s
 * here) has passed, when the next attempt logs again. An older line is
 * about a connection that has since been retried, or another server.
 */
#define GRPC_ERR_FRESH_NS 15000000000ull

/*
 * Take grpc's last error line as u's when it was logged since u last
 * looked; true when one was taken now. Lines from before u existed are
 * never u's (uploader_new starts u at the current sequence number).
 */
static bool grpc_errors_take(struct uploader *u)
{
	return grpcc_errors_take(&u->grpc_err_seq, u->grpc_err, sizeof(u->grpc_err),
				 &u->grpc_err_ns);
}

/* A header whose value must not be logged (API keys, tokens, cookies). */
static bool secret_header_name(const char *k)
{
	static const char *const words[] = { "auth",   "token",	  "key",	"secret",   "pass",
					     "cookie", "session", "credential", "signature" };
	for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
		if (strcasestr(k, words[i]))
			return true;
	return false;
}

/* ---- small helpers ---------------------------------------------------- */

static bool retryable(grpc_status_code c)
{
	return c == GRPC_STATUS_UNAVAILABLE || c == GRPC_STATUS_DEADLINE_EXCEEDED ||
	       c == GRPC_STATUS_RESOURCE_EXHAUSTED;
}

static void sleep_ns(uint64_t ns)
{
	struct timespec ts = { ns / 1000000000ull, ns % 1000000000ull };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static uint64_t next_rand(struct uploader *u)
{
	/* xorshift64*: jitter only, not security */
	u->rng ^= u->rng >> 12;
	u->rng ^= u->rng << 25;
	u->rng ^= u->rng >> 27;
	return u->rng * 2685821657736338717ull;
}

/* ---- construction ----------------------------------------------------- */

int uploader_new(const struct uploader_opts *opts, struct uploader **out, struct pp_err *err)
{
	const struct remote_store_config *rs = opts->rs;
	struct pp_err local; /* every failure below fills err: its code is returned */
	struct uploader *u;

	if (!err)
		err = &local;
	*out = NULL;
	if (!rs->address || !*rs->address)
		return pp_errf(err, -EINVAL, "remote_store.address is empty");
	u = calloc(1, sizeof(*u));
	if (!u)
		return pp_errf(err, -ENOMEM, "out of memory");
	u->timeout_ns = rs->timeout_ns ? rs->timeout_ns : 10000000000ull;
	u->max_request_bytes = rs->max_request_bytes ? rs->max_request_bytes : (4u << 20);
	u->rng = pp_mono_ns() ^ ((uint64_t)getpid() << 32) ^ (uintptr_t)u;
	if (!u->rng)
		u->rng = 1;
	u->grpc_err_seq = grpcc_errors_seq(); /* earlier grpc lines are other channels' */
	u->target = strdup(rs->address);
	if (!u->target)
		goto nomem;
	u->protocol = rs->protocol;
	u->method = rs->protocol == STORE_PYROSCOPE ? PUSH_METHOD : WRITE_RAW_METHOD;
	u->method_name = rs->protocol == STORE_PYROSCOPE ? "Push" : "WriteRaw";

	for (size_t i = 0; i < rs->headers.n; i++) {
		char key[256];
		const char *k = rs->headers.v[i].name, *v = rs->headers.v[i].value;
		size_t kl = strlen(k);
		if (!kl || kl >= sizeof(key)) {
			pp_errf(err, -EINVAL, "remote_store.headers: bad header name length");
			goto fail;
		}
		for (size_t j = 0; j <= kl; j++)
			key[j] = (char)tolower((unsigned char)k[j]);
		if (!grpcc_header_key_legal(key) || !strcmp(key, "authorization") ||
		    !strncmp(key, "grpc-", 5) || (kl > 4 && !strcmp(key + kl - 4, "-bin"))) {
			pp_errf(err, -EINVAL,
				"remote_store.headers: header name \"%s\" is not allowed", key);
			goto fail;
		}
		if (!grpcc_header_value_legal(v)) {
			pp_errf(err, -EINVAL,
				"remote_store.headers: value of \"%s\" is not a legal "
				"header value",
				key);
			goto fail;
		}
		if (pp_labels_set(&u->headers, key, v))
			goto nomem;
		if (secret_header_name(key))
			grpcc_secret_register(v);
	}

	/* Grafana's multi-tenancy header (Pyroscope, Mimir, Loki) */
	if (rs->tenant_id && *rs->tenant_id) {
		if (!grpcc_header_value_legal(rs->tenant_id)) {
			pp_errf(err, -EINVAL, "remote_store.tenant_id is not a legal header value");
			goto fail;
		}
		if (pp_labels_set(&u->headers, "x-scope-orgid", rs->tenant_id))
			goto nomem;
	}

	if (upload_auth_load(&u->cred, rs, err))
		goto fail;

	u->tls = !rs->insecure;
	u->client_cert = rs->cert_file && *rs->cert_file;
	if (rs->http) {
		if (connect_new(&(struct connect_opts){ .rs = rs }, &u->conn, err))
			goto fail;
		*out = u;
		return 0;
	}
	struct grpcc_channel_opts o = {
		.tls = !rs->insecure,
		.ca_file = rs->ca_file,
		.cert_file = rs->cert_file,
		.key_file = rs->key_file,
		.skip_verify = rs->insecure_skip_verify,
		.server_name = rs->server_name,
		.own_retries = true,
		.what = "remote_store",
		.target = u->target,
	};
	if (grpcc_channel_new(&o, &u->channel, err))
		goto fail;
	*out = u;
	return 0;
nomem:
	pp_errf(err, -ENOMEM, "out of memory");
fail:
	free(u->target);
	upload_auth_free(&u->cred);
	pp_labels_free(&u->headers);
	free(u);
	return err->code < 0 ? err->code : -EINVAL;
}

void uploader_free(struct uploader *u)
{
	if (!u)
		return;
	grpcc_channel_free(u->channel);
	connect_free(u->conn);
	free(u->target);
	upload_auth_free(&u->cred);
	pp_labels_free(&u->headers);
	free(u);
}

void uploader_set_deadline(struct uploader *u, uint64_t mono_ns_deadline)
{
	u->hard_deadline = mono_ns_deadline;
}

void uploader_set_interrupt(struct uploader *u, bool (*fn)(void *arg), void *arg)
{
	u->interrupt = fn;
	u->interrupt_arg = arg;
}

const struct upload_stats *uploader_stats(const struct uploader *u)
{
	return &u->stats;
}

#define SHUTDOWN_GRACE_NS 2000000000ull

/* ---- one call --------------------------------------------------------- */

struct call_result {
	grpc_status_code status;
	char details[320];
};

/*
 * The bound on this call and its retries (CLOCK_MONOTONIC ns, 0 none), for
 * grpcc's limit and connect's stop: uploader_set_deadline()'s, or, once
 * the agent asks to stop, SHUTDOWN_GRACE_NS from then if that is sooner.
 */
static uint64_t call_limit(void *arg)
{
	struct uploader *u = arg;

	if (u->interrupt && u->interrupt(u->interrupt_arg)) {
		uint64_t cut = pp_mono_ns() + SHUTDOWN_GRACE_NS;
		if (!u->hard_deadline || cut < u->hard_deadline)
			u->hard_deadline = cut;
	}
	return u->hard_deadline;
}

/* connect.h's stop: past the shutdown bound */
static bool http_stop(void *arg)
{
	uint64_t limit = call_limit(arg);

	return limit && pp_mono_ns() >= limit;
}

static void call_once_http(struct uploader *u, const uint8_t *buf, size_t len, uint64_t timeout_ns,
			   struct call_result *res)
{
	struct connect_call c = {
		.method = u->method,
		.headers = &u->headers,
		.auth = u->cred.auth,
		.body = buf,
		.len = len,
		.timeout_ns = timeout_ns,
		.stop = http_stop,
		.stop_arg = u,
	};
	int st = GRPC_STATUS_UNKNOWN;

	connect_unary(u->conn, &c, &st, res->details, sizeof(res->details));
	res->status = (grpc_status_code)st;
}

static void call_once_grpc(struct uploader *u, const uint8_t *buf, size_t len, uint64_t timeout_ns,
			   struct call_result *res)
{
	struct grpcc_call c = {
		.method = u->method,
		.msg = buf,
		.len = len,
		.auth = u->cred.auth,
		.headers = &u->headers,
		.timeout_ns = timeout_ns,
		.limit = call_limit,
		.limit_arg = u,
	};
	struct grpcc_result r;

	grpcc_call(u->channel, &c, &r, NULL); /* no response kept: never fails locally */
	res->status = (grpc_status_code)r.status;
	snprintf(res->details, sizeof(res->details), "%s", r.details);
}

static void call_once(struct uploader *u, const uint8_t *buf, size_t len, uint64_t timeout_ns,
		      struct call_result *res)
{
	if (u->conn)
		call_once_http(u, buf, len, timeout_ns, res);
	else
		call_once_grpc(u, buf, len, timeout_ns, res);
}

/* Self-metrics: every attempt by status, bytes accepted, latency. */
static void count_call(const struct uploader *u, grpc_status_code status, size_t len, uint64_t ns)
{
	char lbl[200];
	const char *ml = *u->metric_label ? u->metric_label : NULL;

	snprintf(lbl, sizeof(lbl), "status=\"%s\"%s%s", grpcc_status_name(status), ml ? "," : "",
		 ml ? ml : "");
	metric_inc("pushprof_write_requests_total", "WriteRaw attempts by gRPC status.", lbl, 1);
	if (status == GRPC_STATUS_OK)
		metric_inc("pushprof_bytes_sent_total",
			   "Request bytes accepted by the remote store.", ml, (double)len);
	metric_observe(metric_get("pushprof_write_latency_seconds",
				  "Time of each WriteRaw attempt, seconds.", METRIC_HISTOGRAM, ml),
		       (double)ns / 1e9);
}

void uploader_set_metric_label(struct uploader *u, const char *labels)
{
	snprintf(u->metric_label, sizeof(u->metric_label), "%s", labels ? labels : "");
}

/*
 * What to do about a failed call, for the operator reading the log: the
 * common misconfigurations, recognised by status and by the words gRPC and
 * OpenSSL use ("" when nothing fits).
 */
static const char *hint(const struct uploader *u, grpc_status_code st, const char *details,
			const char *grpc_err)
{
	char both[1024];

	snprintf(both, sizeof(both), "%s %s", details ? details : "", grpc_err ? grpc_err : "");
	if (st == GRPC_STATUS_UNAUTHENTICATED || st == GRPC_STATUS_PERMISSION_DENIED) {
		if (u->cred.basic_user && u->cred.token_file)
			return " (hint: the server refused remote_store.basic_auth: check the "
			       "username and the password in basic_auth.password_file)";
		if (u->cred.basic_user)
			return " (hint: the server refused remote_store.basic_auth: check the "
			       "username and the password in PUSHPROF_BASIC_AUTH_PASSWORD)";
		if (u->cred.token_file)
			return " (hint: the server refused the token from "
			       "remote_store.bearer_token_file: check the file's contents)";
		if (u->cred.auth)
			return " (hint: the server refused the token from the environment "
			       "variable PUSHPROF_BEARER_TOKEN)";
		return " (hint: no credential is configured: set remote_store.bearer_token_file "
		       "or remote_store.basic_auth)";
	}
	if (u->tls && (strstr(both, "wrong version number") || strstr(both, "WRONG_VERSION") ||
		       strstr(both, "packet length too long")))
		return " (hint: TLS handshake with a server that speaks plaintext: set "
		       "remote_store.insecure: true, or --remote-store-insecure)";
	if (u->tls &&
	    (strstr(both, "CERTIFICATE_VERIFY_FAILED") ||
	     strstr(both, "certificate verify failed") || strstr(both, "SSL certificate problem")))
		return " (hint: the server's certificate is not trusted: set remote_store.ca_file "
		       "to "
		       "the CA that signed it)";
	/* a TLS channel sees the same words for a closed port and for a
	 * server that ended the handshake over the client certificate (the
	 * reason is only in the server's log): name both */
	if (u->tls && strstr(both, "handshaker shutdown"))
		return u->client_cert
			       ? " (hint: cannot connect to remote_store.address: nothing listens "
				 "there, a wrong port, a firewall, or the server refuses the client "
				 "certificate in remote_store.cert_file)"
			       : " (hint: cannot connect to remote_store.address: nothing listens "
				 "there, a wrong port, a firewall, or the server requires a client "
				 "certificate: set remote_store.cert_file and key_file)";
	if (!u->tls && (strstr(both, "Socket closed") || strstr(both, "Empty reply from server") ||
			strstr(both, "HTTP/0.9")))
		return " (hint: plaintext to a server that may want TLS: try "
		       "remote_store.insecure: "
		       "false)";
	if (strstr(both, "DNS resolution failed") || strstr(both, "Name or service not known") ||
	    strstr(both, "Could not resolve host"))
		return " (hint: the host name in remote_store.address does not resolve)";
	if (strstr(both, "Connection refused") ||
	    strstr(both, "failed to connect to all addresses"))
		return " (hint: cannot connect to remote_store.address: nothing listens there, a "
		       "wrong port, or a firewall)";
	return "";
}

/*
 * The server refused the data itself: sending it again cannot help. Both
 * stores answer INVALID_ARGUMENT for data they reject (Pyroscope: a profile
 * older than its ingestion window, a label it does not allow); Pyroscope
 * answers UNKNOWN for a pprof it cannot parse.
 */
static bool refused(const struct uploader *u, grpc_status_code st)
{
	return st == GRPC_STATUS_INVALID_ARGUMENT ||
	       (u->protocol == STORE_PYROSCOPE && st == GRPC_STATUS_UNKNOWN);
}

/* Send one encoded request with retries. */
static int send_request(struct uploader *u, const uint8_t *buf, size_t len, size_t nseries,
			struct pp_err *err)
{
	uint64_t start = pp_mono_ns(), budget_end = start + 3 * u->timeout_ns;
	if (u->hard_deadline && u->hard_deadline < budget_end)
		budget_end = u->hard_deadline > start ? u->hard_deadline : start + 1000000;
	uint64_t backoff = BACKOFF_INITIAL_NS;
	struct call_result res = { 0 };
	int attempt;

	for (attempt = 1;; attempt++) {
		uint64_t now = pp_mono_ns();
		uint64_t timeout = u->timeout_ns;
		if (budget_end - now < timeout)
			timeout = budget_end - now;
		uint64_t t0 = pp_mono_ns();
		call_once(u, buf, len, timeout, &res);
		count_call(u, res.status, len, pp_mono_ns() - t0);
		u->stats.last_status = (uint64_t)res.status;
		if (res.status == GRPC_STATUS_OK) {
			u->stats.requests_ok++;
			u->stats.bytes_sent += len;
			/* connected: what grpc logged before no longer says
			 * anything about this channel */
			grpc_errors_take(u);
			u->grpc_err[0] = '\0';
			u->grpc_err_ns = 0;
			return 0;
		}
		if (!retryable(res.status) || attempt >= UPLOAD_MAX_ATTEMPTS)
			break;
		uint64_t half = backoff / 2;
		uint64_t delay = half + next_rand(u) % (half + 1);
		now = pp_mono_ns();
		/* No point starting an attempt that has under 50 ms to live. */
		if (now + delay + 50000000ull >= budget_end)
			break;
		sleep_ns(delay);
		backoff = backoff * 2 > BACKOFF_MAX_NS ? BACKOFF_MAX_NS : backoff * 2;
		u->stats.retries++;
	}
	u->stats.requests_failed++;
	grpc_errors_take(u);
	/* gRPC logs a handshake failure once, then fails calls fast: a recent
	 * line of this uploader's, new or not, tells TLS problems */
	const char *grpc_err =
		u->grpc_err_ns && u->grpc_err_ns + GRPC_ERR_FRESH_NS >= start ? u->grpc_err : "";
	return pp_errf(err,
		       res.status == GRPC_STATUS_UNAUTHENTICATED     ? -EACCES
		       : refused(u, res.status)			     ? -EINVAL
		       : res.status == GRPC_STATUS_DEADLINE_EXCEEDED ? -ETIMEDOUT
								     : -EIO,
		       "%s to %s (%zu series, %zu bytes) failed: %s%s: %s (%d attempt%s in "
		       "%.1fs)%s%s",
		       u->method_name, u->target, nseries, len, grpcc_status_name(res.status),
		       /* first: the details that follow can be long */
		       hint(u, res.status, res.details, grpc_err),
		       res.details[0] ? res.details : "no details", attempt,
		       attempt == 1 ? "" : "s", (pp_mono_ns() - start) / 1e9,
		       *grpc_err ? "; grpc: " : "", grpc_err);
}

/* ---- batching --------------------------------------------------------- */

typedef Parca__Profilestore__V1alpha1__RawProfileSeries RawSeries;
typedef Parca__Profilestore__V1alpha1__Label RawLabel;
typedef Push__V1__RawProfileSeries PushSeries;
typedef Types__V1__LabelPair PushLabel;

/* One series as the store's protocol frames it: Parca's RawProfileSeries
 * (labels in a LabelSet) or Pyroscope's (LabelPairs, and an ID per sample). */
struct series_msg {
	RawSeries s;
	Parca__Profilestore__V1alpha1__LabelSet ls;
	Parca__Profilestore__V1alpha1__RawSample sample;
	Parca__Profilestore__V1alpha1__RawSample *samplep;
	RawLabel *labels;
	RawLabel **labelp;
	PushSeries ps;
	Push__V1__RawSample psample;
	Push__V1__RawSample *psamplep;
	PushLabel *plabels;
	PushLabel **plabelp;
	char id[37]; /* a random UUID: Pyroscope wants one per profile */
	struct pp_labels sorted;
	size_t field_bytes; /* size of this series inside its request */
};

static size_t varint_len(uint64_t v)
{
	size_t n = 1;

	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

static int check_series(const struct upload_series *s, size_t i, struct pp_err *err)
{
	const char *name;

	if (!s->labels || !s->profile || !s->len)
		return pp_errf(err, -EINVAL, "series %zu: missing labels or profile", i);
	name = pp_labels_get(s->labels, "__name__");
	if (!name || !*name)
		return pp_errf(err, -EINVAL, "series %zu: missing __name__ label", i);
	for (size_t j = 0; j < s->labels->n; j++)
		if (!pp_label_name_valid(s->labels->v[j].name))
			return pp_errf(err, -EINVAL, "series %zu: invalid label name \"%.64s\"", i,
				       s->labels->v[j].name);
	return 0;
}

/* A version 4 UUID from the uploader's generator (unique, not secret). */
static void make_id(struct uploader *u, char out[37])
{
	uint64_t a = next_rand(u), b = next_rand(u);

	a = (a & ~0xf000ull) | 0x4000ull;	/* version 4 */
	b = (b & ~(3ull << 62)) | (2ull << 62); /* variant 10 */
	snprintf(out, 37, "%08x-%04x-%04x-%04x-%012llx", (unsigned)(a >> 32),
		 (unsigned)(a >> 16 & 0xffff), (unsigned)(a & 0xffff), (unsigned)(b >> 48),
		 (unsigned long long)(b & 0xffffffffffffull));
}

static int build_push_series(struct uploader *u, struct series_msg *m,
			     const struct upload_series *s)
{
	size_t n = m->sorted.n;

	push__v1__raw_profile_series__init(&m->ps);
	push__v1__raw_sample__init(&m->psample);
	m->plabels = calloc(n ? n : 1, sizeof(*m->plabels));
	m->plabelp = calloc(n ? n : 1, sizeof(*m->plabelp));
	if (!m->plabels || !m->plabelp)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		types__v1__label_pair__init(&m->plabels[i]);
		m->plabels[i].name = m->sorted.v[i].name;
		m->plabels[i].value = m->sorted.v[i].value;
		m->plabelp[i] = &m->plabels[i];
	}
	make_id(u, m->id);
	m->psample.raw_profile.data = (uint8_t *)s->profile;
	m->psample.raw_profile.len = s->len;
	m->psample.id = m->id;
	m->psamplep = &m->psample;
	m->ps.n_labels = n;
	m->ps.labels = m->plabelp;
	m->ps.n_samples = 1;
	m->ps.samples = &m->psamplep;
	size_t sz = push__v1__raw_profile_series__get_packed_size(&m->ps);
	m->field_bytes = 1 + varint_len(sz) + sz;
	return 0;
}

static int build_series(struct uploader *u, struct series_msg *m, const struct upload_series *s)
{
	if (pp_labels_copy(&m->sorted, s->labels))
		return -ENOMEM;
	pp_labels_sort(&m->sorted);
	if (u->protocol == STORE_PYROSCOPE)
		return build_push_series(u, m, s);
	parca__profilestore__v1alpha1__raw_profile_series__init(&m->s);
	parca__profilestore__v1alpha1__label_set__init(&m->ls);
	parca__profilestore__v1alpha1__raw_sample__init(&m->sample);
	size_t n = m->sorted.n;
	m->labels = calloc(n ? n : 1, sizeof(*m->labels));
	m->labelp = calloc(n ? n : 1, sizeof(*m->labelp));
	if (!m->labels || !m->labelp)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		parca__profilestore__v1alpha1__label__init(&m->labels[i]);
		m->labels[i].name = m->sorted.v[i].name;
		m->labels[i].value = m->sorted.v[i].value;
		m->labelp[i] = &m->labels[i];
	}
	m->ls.n_labels = n;
	m->ls.labels = m->labelp;
	m->sample.raw_profile.data = (uint8_t *)s->profile;
	m->sample.raw_profile.len = s->len;
	m->samplep = &m->sample;
	m->s.labels = &m->ls;
	m->s.n_samples = 1;
	m->s.samples = &m->samplep;
	size_t sz = parca__profilestore__v1alpha1__raw_profile_series__get_packed_size(&m->s);
	m->field_bytes = 1 + varint_len(sz) + sz;
	return 0;
}

int uploader_write(struct uploader *u, const struct upload_series *series, size_t n, size_t *sent,
		   struct pp_err *err)
{
	struct series_msg *msgs = NULL;
	RawSeries **ptrs = NULL;
	PushSeries **pptrs = NULL;
	uint8_t *buf = NULL;
	size_t done = 0;
	int rc = 0;

	if (sent)
		*sent = 0;
	if (!n)
		return 0;
	for (size_t i = 0; i < n; i++)
		if ((rc = check_series(&series[i], i, err)))
			return rc;
	if ((rc = upload_auth_refresh(&u->cred, err)))
		return rc;
	msgs = calloc(n, sizeof(*msgs));
	ptrs = calloc(n, sizeof(*ptrs));
	pptrs = calloc(n, sizeof(*pptrs));
	if (!msgs || !ptrs || !pptrs) {
		rc = pp_errf(err, -ENOMEM, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		if (build_series(u, &msgs[i], &series[i])) {
			rc = pp_errf(err, -ENOMEM, "out of memory");
			goto out;
		}
		ptrs[i] = &msgs[i].s;
		pptrs[i] = &msgs[i].ps;
	}

	while (done < n) {
		size_t first = done, bytes = msgs[done].field_bytes, end = done + 1;
		while (end < n && bytes + msgs[end].field_bytes <= u->max_request_bytes)
			bytes += msgs[end++].field_bytes;
		Parca__Profilestore__V1alpha1__WriteRawRequest req =
			PARCA__PROFILESTORE__V1ALPHA1__WRITE_RAW_REQUEST__INIT;
		Push__V1__PushRequest preq = PUSH__V1__PUSH_REQUEST__INIT;
		size_t len;
		if (u->protocol == STORE_PYROSCOPE) {
			preq.n_series = end - first;
			preq.series = &pptrs[first];
			len = push__v1__push_request__get_packed_size(&preq);
		} else {
			req.n_series = end - first;
			req.series = &ptrs[first];
			req.normalized = false; /* Parca ignores it; profiles are raw */
			len = parca__profilestore__v1alpha1__write_raw_request__get_packed_size(
				&req);
		}
		if (len > PARCA_MAX_MESSAGE) {
			rc = pp_errf(err, -E2BIG,
				     "series %zu is %zu bytes encoded, above the %u bytes a Parca "
				     "server accepts; not sent",
				     first, len, PARCA_MAX_MESSAGE);
			u->stats.requests_failed++;
			goto out;
		}
		free(buf);
		buf = malloc(len ? len : 1);
		if (!buf) {
			rc = pp_errf(err, -ENOMEM, "out of memory (%zu bytes)", len);
			goto out;
		}
		if (u->protocol == STORE_PYROSCOPE)
			push__v1__push_request__pack(&preq, buf);
		else
			parca__profilestore__v1alpha1__write_raw_request__pack(&req, buf);
		rc = send_request(u, buf, len, end - first, err);
		if (rc)
			goto out;
		done = end;
		if (sent)
			*sent = done;
	}
out:
	if (msgs) {
		for (size_t i = 0; i < n; i++) {
			pp_labels_free(&msgs[i].sorted);
			free(msgs[i].labels);
			free(msgs[i].labelp);
			free(msgs[i].plabels);
			free(msgs[i].plabelp);
		}
	}
	free(msgs);
	free(ptrs);
	free(pptrs);
	free(buf);
	return rc;
}

/* ---- any method: unary or client stream (debuginfo) ------------------- */

int uploader_call(struct uploader *u, const char *method, uploader_next_fn next, void *arg,
		  uint64_t timeout_ns, uint8_t **resp, size_t *resp_len, int *status_out,
		  struct pp_err *err)
{
	int rc;

	*resp = NULL;
	*resp_len = 0;
	if (status_out)
		*status_out = GRPC_STATUS_UNKNOWN;
	if (!u->channel)
		return pp_errf(err, -ENOTSUP, "%s: not available over remote_store.transport: http",
			       method);
	if ((rc = upload_auth_refresh(&u->cred, err)))
		return rc;
	uint64_t now = pp_mono_ns();
	if (u->hard_deadline && (u->hard_deadline <= now || u->hard_deadline - now < timeout_ns))
		timeout_ns = u->hard_deadline > now ? u->hard_deadline - now : 1000000;
	struct grpcc_call c = {
		.method = method,
		.next = next,
		.next_arg = arg,
		.auth = u->cred.auth,
		.headers = &u->headers,
		.timeout_ns = timeout_ns,
		.want_resp = true,
		.limit = call_limit,
		.limit_arg = u,
	};
	struct grpcc_result r;
	rc = grpcc_call(u->channel, &c, &r, err);
	u->stats.bytes_sent += r.bytes_sent;
	if (status_out)
		*status_out = r.status;
	u->stats.last_status = (uint64_t)r.status;
	if (rc)
		return rc;
	if (r.status != GRPC_STATUS_OK) {
		u->stats.requests_failed++;
		return pp_errf(err,
			       r.status == GRPC_STATUS_UNAUTHENTICATED	  ? -EACCES
			       : r.status == GRPC_STATUS_INVALID_ARGUMENT ? -EINVAL
									  : -EIO,
			       "%s to %s failed: %s: %s", method, u->target,
			       grpcc_status_name(r.status),
			       r.details[0] ? r.details : "no details");
	}
	*resp = r.resp;
	*resp_len = r.resp_len;
	u->stats.requests_ok++;
	return 0;
}
