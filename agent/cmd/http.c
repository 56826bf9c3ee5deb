#include "http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <microhttpd.h>
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <netinet/in.h>
#include <strings.h>

#include "dynlib.h"
#include "fileutil.h"
#include "log.h"
#include "metrics.h"
#include "ppclock.h"

/* libmicrohttpd is opened when the endpoint starts (dynlib.h): the
 * functions this file calls, through M */
#define MHD_FNS(X, t)                         \
	X(t, MHD_add_response_header)         \
	X(t, MHD_create_response_from_buffer) \
	X(t, MHD_destroy_response)            \
	X(t, MHD_get_connection_info)         \
	X(t, MHD_get_daemon_info)             \
	X(t, MHD_lookup_connection_value)     \
	X(t, MHD_queue_response)              \
	X(t, MHD_resume_connection)           \
	X(t, MHD_start_daemon)                \
	X(t, MHD_stop_daemon)                 \
	X(t, MHD_suspend_connection)

static struct {
	MHD_FNS(DYNLIB_PTR, _)
} M;
static struct dynlib mhd_lib =
	DYNLIB_INIT(PP_SONAME_MHD, "the HTTP endpoint (http_address)", M, MHD_FNS);

#define HTTP_MAX_CONNS 1024	    /* clients at once (capped by the fd limit) */
#define HTTP_PER_IP 32		    /* clients at once from one address */
#define HTTP_IDLE_S 5		    /* an idle connection is closed after */
#define HTTP_CONN_MEMORY (8u << 10) /* request buffer per connection */

#define RATE_SLOTS 256 /* pids and client addresses remembered */
#define MAX_SNAPSHOT_TOKEN (16u << 10)

struct rate_slot {
	uint64_t key; /* pid, or a hash of the client address */
	uint64_t t0;  /* pid: last snapshot; client: window start */
	uint32_t n;   /* client: requests in the window */
};

struct http_server {
	struct MHD_Daemon *d;
	struct http_snapshot_api api;
	/* rate limits (MHD's one thread, but under lock for clarity) */
	struct rate_slot pids[RATE_SLOTS], clients[RATE_SLOTS];
	uint64_t global_t0;
	uint32_t global_n;
	uint64_t beat_ns, max_silence_ns; /* http_heartbeat; 0 = not yet */
	/* the one snapshot that may run (snap_job), on its own thread */
	pthread_t snap_th;
	bool snap_busy, snap_joinable;
	pthread_mutex_t lock;
	bool ready;
	char why[256];
	int port;
};

/* One response; hdr/val: an extra header (NULL: none). Takes body when
 * mode is MHD_RESPMEM_MUST_FREE, also on failure. */
static enum MHD_Result reply_h(struct MHD_Connection *c, unsigned status, const char *type,
			       void *body, size_t len, enum MHD_ResponseMemoryMode mode,
			       const char *hdr, const char *val)
{
	struct MHD_Response *r = M.MHD_create_response_from_buffer(len, body, mode);
	if (!r) {
		if (mode == MHD_RESPMEM_MUST_FREE)
			free(body);
		return MHD_NO;
	}
	M.MHD_add_response_header(r, "Content-Type", type);
	if (hdr)
		M.MHD_add_response_header(r, hdr, val);
	enum MHD_Result ret = M.MHD_queue_response(c, status, r);
	M.MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, const char *type,
			     void *body, size_t len, enum MHD_ResponseMemoryMode mode)
{
	return reply_h(c, status, type, body, len, mode, NULL, NULL);
}

static enum MHD_Result text_h(struct MHD_Connection *c, unsigned status, const char *msg,
			      const char *hdr, const char *val)
{
	char *b = NULL;
	if (asprintf(&b, "%s\n", msg) < 0)
		return MHD_NO;
	return reply_h(c, status, "text/plain; charset=utf-8", b, strlen(b), MHD_RESPMEM_MUST_FREE,
		       hdr, val);
}

static enum MHD_Result text(struct MHD_Connection *c, unsigned status, const char *msg)
{
	return text_h(c, status, msg, NULL, NULL);
}

/* A snapshot request refused before any work: counted by reason. */
static enum MHD_Result refuse(struct MHD_Connection *c, unsigned status, const char *msg,
			      const char *hdr, const char *val, const char *reason)
{
	metric_inc("pushprof_snapshot_api_refused_total",
		   "Snapshot API requests refused before any work, by reason.", reason, 1);
	return text_h(c, status, msg, hdr, val);
}

/* Constant time in the length of the expected value: the time taken says
 * nothing about how much of a guess was right. */
static bool same_secret(const char *got, size_t gl, const char *want, size_t wl)
{
	volatile unsigned char diff = (unsigned char)(gl != wl);

	for (size_t i = 0; i < wl; i++)
		diff |= (unsigned char)want[i] ^ (unsigned char)(i < gl ? got[i] : 0);
	return diff == 0;
}

/* 1 allowed (or no token configured), 0 not, negative when the token file
 * cannot be read (it is read at each request: rotation needs no restart). */
static int authorized(struct http_server *s, struct MHD_Connection *c)
{
	if (!s->api.token_file || !*s->api.token_file)
		return 1;
	char *tok = NULL;
	size_t tl = 0;
	struct pp_err err = { 0 };
	if (pp_read_small_file(s->api.token_file, MAX_SNAPSHOT_TOKEN, &tok, &tl, NULL,
			       "snapshot_api.bearer_token_file", &err) < 0) {
		pp_log(PP_ERROR, "snapshot API: cannot read the token file", "error=%s",
		       pp_q(err.msg));
		return -1;
	}
	while (tl && strchr(" \t\r\n", tok[tl - 1]))
		tok[--tl] = '\0';
	const char *h = M.MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
	int ok = 0;
	if (tl && h && !strncasecmp(h, "Bearer ", 7)) {
		const char *g = h + 7;
		ok = same_secret(g, strlen(g), tok, tl);
	}
	explicit_bzero(tok, tl);
	free(tok);
	return ok;
}

static uint64_t client_key(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci =
		M.MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	const struct sockaddr *sa = ci ? ci->client_addr : NULL;
	const unsigned char *p = NULL;
	size_t n = 0;
	uint64_t h = 1469598103934665603ull; /* FNV-1a of the address bytes, port excluded */

	if (sa && sa->sa_family == AF_INET) {
		p = (const unsigned char *)&((const struct sockaddr_in *)sa)->sin_addr;
		n = 4;
	} else if (sa && sa->sa_family == AF_INET6) {
		p = (const unsigned char *)&((const struct sockaddr_in6 *)sa)->sin6_addr;
		n = 16;
	}
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 1099511628211ull;
	return h ? h : 1;
}

/* The slot for key, or the oldest one to reuse (t0 smallest). */
static struct rate_slot *slot_for(struct rate_slot *v, uint64_t key)
{
	struct rate_slot *old = &v[0];

	for (size_t i = 0; i < RATE_SLOTS; i++) {
		if (v[i].key == key)
			return &v[i];
		if (v[i].t0 < old->t0)
			old = &v[i];
	}
	memset(old, 0, sizeof(*old));
	old->key = key;
	return old;
}

/*
 * 0: go ahead (and the request is counted); otherwise the seconds to wait,
 * with msg saying which limit. Limits: one snapshot per pid per
 * per_pid_interval, per_client_per_minute per client address, per_minute
 * in all (fixed one-minute windows).
 */
static unsigned rate_check(struct http_server *s, struct MHD_Connection *c, pid_t pid, char *msg,
			   size_t len)
{
	const uint64_t min = 60000000000ull, now = pp_mono_ns();
	unsigned wait = 0;

	pthread_mutex_lock(&s->lock);
	struct rate_slot *cl = slot_for(s->clients, client_key(c));
	struct rate_slot *ps = slot_for(s->pids, (uint64_t)pid + 1);
	if (!cl->t0 || now - cl->t0 >= min) {
		cl->t0 = now;
		cl->n = 0;
	}
	if (!s->global_t0 || now - s->global_t0 >= min) {
		s->global_t0 = now;
		s->global_n = 0;
	}
	if (ps->t0 && now - ps->t0 < s->api.per_pid_interval_ns) {
		wait = (unsigned)((s->api.per_pid_interval_ns - (now - ps->t0)) / 1000000000ull) +
		       1;
		snprintf(msg, len,
			 "pid %d was snapshotted less than %.0fs ago "
			 "(snapshot_api.per_pid_interval); retry in %us",
			 (int)pid, (double)s->api.per_pid_interval_ns / 1e9, wait);
	} else if (cl->n >= s->api.per_client_per_minute) {
		wait = (unsigned)((min - (now - cl->t0)) / 1000000000ull) + 1;
		snprintf(msg, len,
			 "more than %u snapshots a minute from this client "
			 "(snapshot_api.per_client_per_minute); retry in %us",
			 s->api.per_client_per_minute, wait);
	} else if (s->global_n >= s->api.per_minute) {
		wait = (unsigned)((min - (now - s->global_t0)) / 1000000000ull) + 1;
		snprintf(msg, len,
			 "more than %u snapshots a minute in all "
			 "(snapshot_api.per_minute); retry in %us",
			 s->api.per_minute, wait);
	} else {
		ps->t0 = now;
		cl->n++;
		s->global_n++;
	}
	pthread_mutex_unlock(&s->lock);
	return wait;
}

/*
 * A snapshot runs on a thread of its own while its connection is suspended
 * (MHD_suspend_connection): the server's thread goes on answering probes
 * and metrics, however long the snapshot takes (a hostile process can make
 * it take seconds). One at a time; another request meanwhile gets 429.
 */
struct snap_job {
	struct http_server *s;
	struct MHD_Connection *c;
	pid_t pid;
	char view[16];
	int status;
	uint8_t *out;
	size_t len;
	char msg[512];
	bool done;
};

static int handler_marker; /* *state of a request that is not a snapshot job */

static void *snap_thread(void *arg)
{
	struct snap_job *j = arg;

	j->status = j->s->api.fn(j->s->api.arg, j->pid, j->view, &j->out, &j->len, j->msg,
				 sizeof(j->msg));
	pthread_mutex_lock(&j->s->lock);
	j->done = true;
	pthread_mutex_unlock(&j->s->lock);
	M.MHD_resume_connection(j->c);
	return NULL;
}

/* The job is over (answered, or its client went away): the thread is
 * joined, the slot freed. */
static void snap_join(struct http_server *s)
{
	pthread_mutex_lock(&s->lock);
	bool join = s->snap_joinable;
	s->snap_joinable = false;
	pthread_mutex_unlock(&s->lock);
	if (join)
		pthread_join(s->snap_th, NULL);
}

static void snap_finish(struct http_server *s, struct snap_job *j)
{
	snap_join(s);
	free(j->out);
	free(j);
	pthread_mutex_lock(&s->lock);
	s->snap_busy = false;
	pthread_mutex_unlock(&s->lock);
}

static enum MHD_Result snap_start(struct http_server *s, struct MHD_Connection *c, pid_t pid,
				  const char *view, void **state)
{
	pthread_mutex_lock(&s->lock);
	bool busy = s->snap_busy;
	s->snap_busy = true;
	pthread_mutex_unlock(&s->lock);
	if (busy)
		return refuse(c, 429, "a snapshot is running; one at a time", "Retry-After", "1",
			      "reason=\"busy\"");
	struct snap_job *j = calloc(1, sizeof(*j));
	if (!j) {
		pthread_mutex_lock(&s->lock);
		s->snap_busy = false;
		pthread_mutex_unlock(&s->lock);
		return text(c, 503, "out of memory");
	}
	j->s = s;
	j->c = c;
	j->pid = pid;
	snprintf(j->view, sizeof(j->view), "%s", view);
	*state = j;
	M.MHD_suspend_connection(c);
	pthread_mutex_lock(&s->lock);
	int rc = pthread_create(&s->snap_th, NULL, snap_thread, j);
	s->snap_joinable = rc == 0;
	if (rc) {
		j->status = 503;
		snprintf(j->msg, sizeof(j->msg), "cannot start a thread: %s", strerror(rc));
		j->done = true;
	}
	pthread_mutex_unlock(&s->lock);
	if (rc)
		M.MHD_resume_connection(c);
	return MHD_YES;
}

/* Called again once snap_thread resumed the connection. */
static enum MHD_Result snap_answer(struct http_server *s, struct MHD_Connection *c,
				   struct snap_job *j, void **state)
{
	enum MHD_Result ret;

	pthread_mutex_lock(&s->lock);
	bool done = j->done;
	pthread_mutex_unlock(&s->lock);
	if (!done)
		return MHD_YES;
	*state = &handler_marker;
	if (j->status == 200) {
		ret = reply(c, 200, "application/octet-stream", j->out, j->len,
			    MHD_RESPMEM_MUST_FREE);
		j->out = NULL;
	} else {
		ret = text(c, (unsigned)j->status, j->msg[0] ? j->msg : "snapshot failed");
	}
	snap_finish(s, j);
	return ret;
}

/* MHD_OPTION_NOTIFY_COMPLETED: a client that went away mid-snapshot. */
static void request_done(void *cls, struct MHD_Connection *c, void **state,
			 enum MHD_RequestTerminationCode why)
{
	(void)c;
	(void)why;
	if (*state && *state != &handler_marker) {
		struct snap_job *j = *state;
		*state = NULL;
		snap_finish(cls, j);
	}
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
			      const char *method, const char *version, const char *upload,
			      size_t *upload_size, void **state)
{
	struct http_server *s = cls;
	(void)version;
	(void)upload;

	if (*state == NULL) { /* first call: headers only */
		*state = &handler_marker;
		return MHD_YES;
	}
	if (*state != &handler_marker) /* a snapshot job, resumed */
		return snap_answer(s, c, *state, state);
	if (*upload_size) { /* request bodies are not used; discard */
		*upload_size = 0;
		return MHD_YES;
	}
	metric_inc("pushprof_http_requests_total", "HTTP requests served.", NULL, 1);

	bool get = !strcmp(method, "GET") || !strcmp(method, "HEAD");
	if (!strcmp(url, "/metrics") && get) {
		char *out;
		size_t len;
		if (metrics_render(&out, &len))
			return text(c, 500, "cannot render metrics");
		return reply(c, 200, "text/plain; version=0.0.4; charset=utf-8", out, len,
			     MHD_RESPMEM_MUST_FREE);
	}
	if (!strcmp(url, "/healthz") && get) {
		pthread_mutex_lock(&s->lock);
		uint64_t beat = s->beat_ns, max = s->max_silence_ns, now = pp_mono_ns();
		pthread_mutex_unlock(&s->lock);
		if (beat && now - beat > max) {
			char msg[160];
			snprintf(msg, sizeof(msg),
				 "stalled: the agent's loop has done no work for "
				 "%.0fs (limit %.0fs)",
				 (double)(now - beat) / 1e9, (double)max / 1e9);
			return text(c, 503, msg);
		}
		return text(c, 200, "ok");
	}
	if (!strcmp(url, "/readyz") && get) {
		char msg[300];
		pthread_mutex_lock(&s->lock);
		bool ready = s->ready;
		snprintf(msg, sizeof(msg), "%s", ready ? "ready" : s->why);
		pthread_mutex_unlock(&s->lock);
		return text(c, ready ? 200 : 503, msg);
	}
	if (!strcmp(url, "/api/v1/snapshot")) {
		if (!s->api.fn)
			return text(c, 404,
				    "the snapshot API is off in this agent "
				    "(snapshot_api.enabled: false)");
		if (strcmp(method, "POST"))
			return text(c, 405, "use POST");
		int a = authorized(s, c);
		if (a < 0)
			return text(c, 503, "cannot read snapshot_api.bearer_token_file");
		if (!a)
			return refuse(c, 401, "bearer token required", "WWW-Authenticate", "Bearer",
				      "reason=\"unauthorized\"");
		const char *pid_s = M.MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "pid");
		const char *view = M.MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "view");
		char *end = NULL;
		long pid = pid_s ? strtol(pid_s, &end, 10) : 0;
		if (!pid_s || *end || pid <= 0 || pid > INT_MAX)
			return text(c, 400, "pid=PID (a positive integer) is required");
		if (view && strcmp(view, "runtime") && strcmp(view, "latest"))
			return text(c, 400, "view must be runtime or latest");
		char msg[512] = "";
		unsigned retry = rate_check(s, c, (pid_t)pid, msg, sizeof(msg));
		if (retry) {
			char ra[16];
			snprintf(ra, sizeof(ra), "%u", retry);
			return refuse(c, 429, msg, "Retry-After", ra, "reason=\"rate_limited\"");
		}
		return snap_start(s, c, (pid_t)pid, view ? view : "runtime", state);
	}
	return text(c, 404, "not found: try /metrics, /healthz, /readyz, POST /api/v1/snapshot");
}

static int parse_addr(const char *address, struct sockaddr_storage *ss, socklen_t *sl,
		      struct pp_err *err)
{
	char host[256];
	const char *colon = strrchr(address, ':');

	if (!colon || !colon[1])
		return pp_errf(err, -EINVAL, "http_address %s: expected host:port", address);
	size_t hl = (size_t)(colon - address);
	if (hl >= sizeof(host))
		return pp_errf(err, -EINVAL, "http_address %s: host too long", address);
	memcpy(host, address, hl);
	host[hl] = '\0';
	if (host[0] == '[' && hl > 1 && host[hl - 1] == ']') {
		memmove(host, host + 1, hl - 2);
		host[hl - 2] = '\0';
	}
	struct addrinfo hints = { .ai_flags = AI_PASSIVE | AI_NUMERICSERV,
				  .ai_socktype = SOCK_STREAM },
			*res;
	int rc = getaddrinfo(host[0] ? host : NULL, colon + 1, &hints, &res);
	if (rc)
		return pp_errf(err, -EINVAL, "http_address %s: %s", address, gai_strerror(rc));
	memcpy(ss, res->ai_addr, res->ai_addrlen);
	*sl = res->ai_addrlen;
	freeaddrinfo(res);
	return 0;
}

int http_new(const struct http_opts *o, struct http_server **out, struct pp_err *err)
{
	const char *address = o->address;
	struct sockaddr_storage ss;
	socklen_t sl;
	struct http_server *s;
	int r;

	*out = NULL;
	r = parse_addr(address, &ss, &sl, err);
	if (r)
		return r;
	r = dynlib_load(&mhd_lib, err);
	if (r)
		return r;
	s = calloc(1, sizeof(*s));
	if (!s)
		return pp_errf(err, -ENOMEM, "http: out of memory");
	pthread_mutex_init(&s->lock, NULL);
	s->api = o->snapshot;
	snprintf(s->why, sizeof(s->why), "starting");
	/*
	 * Probes must get through whatever else connects (slow clients: 64
	 * trickling connections used to fill the old 64-connection select()
	 * loop and every kubelet probe failed). epoll (no FD_SETSIZE ceiling),
	 * room for HTTP_MAX_CONNS clients but never more than a quarter of the
	 * fd limit (perf events, BPF maps and /proc reads need the rest),
	 * HTTP_PER_IP per client address, idle connections closed after
	 * HTTP_IDLE_S, and a small per-connection buffer so that many slow
	 * clients cost little memory (a GET with its headers fits easily).
	 */
	unsigned flags =
		MHD_USE_EPOLL_INTERNAL_THREAD | MHD_USE_ERROR_LOG | MHD_ALLOW_SUSPEND_RESUME;
	if (ss.ss_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	unsigned max_conns = HTTP_MAX_CONNS;
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
	    rl.rlim_cur / 4 < max_conns)
		max_conns = rl.rlim_cur / 4 > 16 ? (unsigned)(rl.rlim_cur / 4) : 16;
	s->d = M.MHD_start_daemon(flags, 0, NULL, NULL, handle, s, MHD_OPTION_SOCK_ADDR,
				  (struct sockaddr *)&ss, MHD_OPTION_CONNECTION_TIMEOUT,
				  (unsigned)HTTP_IDLE_S, MHD_OPTION_CONNECTION_LIMIT, max_conns,
				  MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)HTTP_PER_IP,
				  MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)HTTP_CONN_MEMORY,
				  MHD_OPTION_NOTIFY_COMPLETED, request_done, s, MHD_OPTION_END);
	if (!s->d) {
		pthread_mutex_destroy(&s->lock);
		free(s);
		return pp_errf(err, -EADDRINUSE,
			       "http: cannot listen on %s (in use or not "
			       "permitted)",
			       address);
	}
	const union MHD_DaemonInfo *info = M.MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
	s->port = info ? info->port : 0;
	*out = s;
	return 0;
}

void http_set_ready(struct http_server *s, bool ready, const char *why)
{
	if (!s)
		return;
	pthread_mutex_lock(&s->lock);
	s->ready = ready;
	snprintf(s->why, sizeof(s->why), "%s", why ? why : "");
	pthread_mutex_unlock(&s->lock);
}

void http_heartbeat(struct http_server *s, uint64_t max_silence_ns)
{
	if (!s)
		return;
	pthread_mutex_lock(&s->lock);
	s->beat_ns = pp_mono_ns();
	s->max_silence_ns = max_silence_ns;
	pthread_mutex_unlock(&s->lock);
}

int http_port(const struct http_server *s)
{
	return s ? s->port : 0;
}

void http_free(struct http_server *s)
{
	if (!s)
		return;
	snap_join(s); /* a snapshot under way ends first (it resumes its connection) */
	M.MHD_stop_daemon(s->d);
	pthread_mutex_destroy(&s->lock);
	free(s);
}
