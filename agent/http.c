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

#include "metrics.h"

#define HTTP_MAX_CONNS 1024		/* clients at once (capped by the fd limit) */
#define HTTP_PER_IP 32			/* clients at once from one address */
#define HTTP_IDLE_S 5			/* an idle connection is closed after */
#define HTTP_CONN_MEMORY (8u << 10)	/* request buffer per connection */

struct http_server {
	struct MHD_Daemon *d;
	http_snapshot_fn snapshot;
	void *arg;
	pthread_mutex_t lock;
	bool ready;
	char why[256];
	int port;
};

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, const char *type,
			     void *body, size_t len, enum MHD_ResponseMemoryMode mode)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(len, body, mode);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, "Content-Type", type);
	enum MHD_Result ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result text(struct MHD_Connection *c, unsigned status, const char *msg)
{
	char *b = NULL;
	if (asprintf(&b, "%s\n", msg) < 0)
		return MHD_NO;
	return reply(c, status, "text/plain; charset=utf-8", b, strlen(b), MHD_RESPMEM_MUST_FREE);
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
			      const char *method, const char *version, const char *upload,
			      size_t *upload_size, void **state)
{
	struct http_server *s = cls;
	static int marker;
	(void)version;
	(void)upload;

	if (*state == NULL) {	/* first call: headers only */
		*state = &marker;
		return MHD_YES;
	}
	if (*upload_size) {	/* request bodies are not used; discard */
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
	if (!strcmp(url, "/healthz") && get)
		return text(c, 200, "ok");
	if (!strcmp(url, "/readyz") && get) {
		char msg[300];
		pthread_mutex_lock(&s->lock);
		bool ready = s->ready;
		snprintf(msg, sizeof(msg), "%s", ready ? "ready" : s->why);
		pthread_mutex_unlock(&s->lock);
		return text(c, ready ? 200 : 503, msg);
	}
	if (!strcmp(url, "/api/v1/snapshot")) {
		if (strcmp(method, "POST"))
			return text(c, 405, "use POST");
		if (!s->snapshot)
			return text(c, 503, "heap snapshots are not enabled in this agent");
		const char *pid_s = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "pid");
		const char *view = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "view");
		char *end = NULL;
		long pid = pid_s ? strtol(pid_s, &end, 10) : 0;
		if (!pid_s || *end || pid <= 0 || pid > INT_MAX)
			return text(c, 400, "pid=PID (a positive integer) is required");
		if (view && strcmp(view, "runtime") && strcmp(view, "latest"))
			return text(c, 400, "view must be runtime or latest");
		uint8_t *out = NULL;
		size_t len = 0;
		char msg[512] = "";
		int st = s->snapshot(s->arg, (pid_t)pid, view ? view : "runtime", &out, &len, msg,
				     sizeof(msg));
		if (st == 200)
			return reply(c, 200, "application/octet-stream", out, len,
				     MHD_RESPMEM_MUST_FREE);
		free(out);
		return text(c, (unsigned)st, msg[0] ? msg : "snapshot failed");
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
				  .ai_socktype = SOCK_STREAM }, *res;
	int rc = getaddrinfo(host[0] ? host : NULL, colon + 1, &hints, &res);
	if (rc)
		return pp_errf(err, -EINVAL, "http_address %s: %s", address, gai_strerror(rc));
	memcpy(ss, res->ai_addr, res->ai_addrlen);
	*sl = res->ai_addrlen;
	freeaddrinfo(res);
	return 0;
}

struct http_server *http_start(const char *address, http_snapshot_fn snapshot, void *arg,
			       struct pp_err *err)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	struct http_server *s;

	if (parse_addr(address, &ss, &sl, err))
		return NULL;
	s = calloc(1, sizeof(*s));
	if (!s) {
		pp_errf(err, -ENOMEM, "http: out of memory");
		return NULL;
	}
	pthread_mutex_init(&s->lock, NULL);
	s->snapshot = snapshot;
	s->arg = arg;
	snprintf(s->why, sizeof(s->why), "starting");
	/*
	 * Probes must get through whatever else connects (issue 12 #5: 64
	 * trickling connections used to fill the old 64-connection select()
	 * loop and every kubelet probe failed). epoll (no FD_SETSIZE ceiling),
	 * room for HTTP_MAX_CONNS clients but never more than a quarter of the
	 * fd limit (perf events, BPF maps and /proc reads need the rest),
	 * HTTP_PER_IP per client address, idle connections closed after
	 * HTTP_IDLE_S, and a small per-connection buffer so that many slow
	 * clients cost little memory (a GET with its headers fits easily).
	 */
	unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_USE_ERROR_LOG;
	if (ss.ss_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	unsigned max_conns = HTTP_MAX_CONNS;
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
	    rl.rlim_cur / 4 < max_conns)
		max_conns = rl.rlim_cur / 4 > 16 ? (unsigned)(rl.rlim_cur / 4) : 16;
	s->d = MHD_start_daemon(flags, 0, NULL, NULL, handle, s,
				MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
				MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)HTTP_IDLE_S,
				MHD_OPTION_CONNECTION_LIMIT, max_conns,
				MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)HTTP_PER_IP,
				MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)HTTP_CONN_MEMORY,
				MHD_OPTION_END);
	if (!s->d) {
		pp_errf(err, -EADDRINUSE, "http: cannot listen on %s (in use or not permitted)",
			address);
		pthread_mutex_destroy(&s->lock);
		free(s);
		return NULL;
	}
	const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
	s->port = info ? info->port : 0;
	return s;
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

int http_port(const struct http_server *s)
{
	return s ? s->port : 0;
}

void http_stop(struct http_server *s)
{
	if (!s)
		return;
	MHD_stop_daemon(s->d);
	pthread_mutex_destroy(&s->lock);
	free(s);
}
