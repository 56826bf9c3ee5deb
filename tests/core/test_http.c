/* The HTTP endpoint served by a real libmicrohttpd on loopback, queried over
 * a real TCP socket. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "http.h"
#include "metrics.h"
#include "check.h"

static char resp[65536];

static const char *request_h(int port, const char *method, const char *path, const char *hdr)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	resp[0] = '\0';
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		close(fd);
		return resp;
	}
	char req[512];
	int n = snprintf(req, sizeof(req), "%s %s HTTP/1.0\r\nHost: x\r\n%sContent-Length: 0\r\n\r\n",
			 method, path, hdr ? hdr : "");
	if (write(fd, req, (size_t)n) != n) {}
	size_t got = 0;
	ssize_t r;
	while ((r = read(fd, resp + got, sizeof(resp) - 1 - got)) > 0)
		got += (size_t)r;
	resp[got] = '\0';
	close(fd);
	return resp;
}

static const char *request(int port, const char *method, const char *path)
{
	return request_h(port, method, path, NULL);
}

/* set when the slow snapshot (pid 77) begins: the test waits for it, not
 * for a fixed time (a loaded host can hold the client off for longer) */
static atomic_int slow_started;

static int fake_snapshot(void *arg, pid_t pid, const char *view, uint8_t **out, size_t *len,
			 char *msg, size_t msg_len)
{
	(void)arg;
	if (pid == 999999) {
		snprintf(msg, msg_len, "no such process %d", pid);
		return 404;
	}
	if (pid == 77) {	/* a slow snapshot (a hostile process can make one) */
		atomic_store(&slow_started, 1);
		usleep(3000000);
	}
	*out = (uint8_t *)strdup(view);
	*len = strlen(view);
	return 200;
}

/* http_new with api (NULL: the API off); NULL when it failed (rc in *rc). */
static struct http_server *start(const char *address, const struct http_snapshot_api *api,
				 int *rc, struct pp_err *err)
{
	struct http_opts o = { .address = address };
	struct http_server *s = (struct http_server *)&o;	/* must be reset to NULL on failure */

	if (api)
		o.snapshot = *api;
	*rc = http_new(&o, &s, err);
	CHECK((*rc == 0) == (s != NULL), "http_new: %d with%s a server", *rc, s ? "" : "out");
	return s;
}

int main(void)
{
	int rc;
	struct pp_err err = { 0 };
	struct http_snapshot_api api = { .fn = fake_snapshot, .per_pid_interval_ns = 10000000000ull,
					 .per_client_per_minute = 5, .per_minute = 100 };
	struct http_server *s = start("127.0.0.1:0", &api, &rc, &err);

	CHECK(s, "start: %s", err.msg);
	if (!s)
		return 1;
	int port = http_port(s);
	CHECK(port > 0, "bound port %d", port);

	struct metric *m = metric_get("pushprof_test_total", "A test counter.", METRIC_COUNTER, "cause=\"x\"");
	metric_add(m, 41);
	metric_add(m, 1);
	metric_set(metric_get("pushprof_test_gauge", "A gauge.", METRIC_GAUGE, NULL), 2.5);

	request(port, "GET", "/metrics");
	CHECK(strstr(resp, "200 OK") && strstr(resp, "# TYPE pushprof_test_total counter") &&
	      strstr(resp, "pushprof_test_total{cause=\"x\"} 42\n") && strstr(resp, "pushprof_test_gauge 2.5\n"),
	      "metrics: %s", resp);
	request(port, "GET", "/healthz");
	CHECK(strstr(resp, "200 OK"), "healthz");
	/* the loop beats with a 1.5 s allowance (room for a loaded host to
	 * answer the request): ok while it beats, 503 when it stops */
	http_heartbeat(s, 1500000000ull);
	request(port, "GET", "/healthz");
	CHECK(strstr(resp, "200 OK"), "healthz right after a beat: %s", resp);
	usleep(2000000);
	request(port, "GET", "/healthz");
	CHECK(strstr(resp, " 503 ") && strstr(resp, "stalled"), "healthz after silence: %s", resp);
	http_heartbeat(s, 1500000000ull);
	request(port, "GET", "/healthz");
	CHECK(strstr(resp, "200 OK"), "healthz beats again: %s", resp);
	http_heartbeat(s, 3600000000000ull);
	http_set_ready(s, false, "waiting for the first window");
	request(port, "GET", "/readyz");
	CHECK(strstr(resp, " 503 ") && strstr(resp, "waiting for the first window"), "not ready: %s", resp);
	http_set_ready(s, true, NULL);
	request(port, "GET", "/readyz");
	CHECK(strstr(resp, "200 OK"), "ready");
	request(port, "POST", "/api/v1/snapshot?pid=12&view=latest");
	CHECK(strstr(resp, "200 OK") && strstr(resp, "application/octet-stream") && strstr(resp, "\r\n\r\nlatest"), "snapshot: %s", resp);
	request(port, "POST", "/api/v1/snapshot?pid=abc");
	CHECK(strstr(resp, " 400 "), "bad pid");
	request(port, "POST", "/api/v1/snapshot?pid=1&view=bogus");
	CHECK(strstr(resp, " 400 "), "bad view");
	request(port, "GET", "/api/v1/snapshot?pid=1");
	CHECK(strstr(resp, " 405 "), "GET snapshot");
	request(port, "POST", "/api/v1/snapshot?pid=999999");
	CHECK(strstr(resp, " 404 ") && strstr(resp, "no such process"), "callback status kept");
	request(port, "GET", "/nope");
	CHECK(strstr(resp, " 404 "), "404");

	/* rate limits: the same pid again within per_pid_interval; then more
	 * than per_client_per_minute (5: pids 12, 999999, 13, 14, 15) */
	request(port, "POST", "/api/v1/snapshot?pid=12");
	CHECK(strstr(resp, " 429 ") && strstr(resp, "Retry-After: ") &&
	      strstr(resp, "per_pid_interval"), "same pid again: %s", resp);
	for (int pid = 13; pid <= 15; pid++) {
		char path[64];
		snprintf(path, sizeof(path), "/api/v1/snapshot?pid=%d", pid);
		request(port, "POST", path);
		CHECK(strstr(resp, "200 OK"), "pid %d: %s", pid, resp);
	}
	request(port, "POST", "/api/v1/snapshot?pid=16");
	CHECK(strstr(resp, " 429 ") && strstr(resp, "per_client_per_minute"), "per client: %s", resp);
	http_free(s);

	/* a slow snapshot runs off the server's thread: probes answer at once
	 * meanwhile, a second snapshot gets 429, the slow one still gets its 200 */
	api.per_client_per_minute = 100;
	s = start("127.0.0.1:0", &api, &rc, &err);
	port = http_port(s);
	atomic_store(&slow_started, 0);
	pid_t child = fork();
	if (child == 0) {
		request(port, "POST", "/api/v1/snapshot?pid=77");
		_exit(strstr(resp, "200 OK") && strstr(resp, "\r\n\r\nruntime") ? 0 : 1);
	}
	for (int i = 0; i < 1000 && !atomic_load(&slow_started); i++)
		usleep(10000);
	CHECK(atomic_load(&slow_started), "the slow snapshot began (within 10 s)");
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	request(port, "GET", "/healthz");
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
	/* "at once": well inside the 3 s snapshot, which a probe waiting
	 * for it would sit out */
	CHECK(strstr(resp, "200 OK") && ms < 1000, "healthz during a slow snapshot: %.1f ms: %s", ms,
	      resp);
	request(port, "POST", "/api/v1/snapshot?pid=78");
	CHECK(strstr(resp, " 429 ") && strstr(resp, "one at a time"), "second snapshot: %s", resp);
	int wst = 0;
	waitpid(child, &wst, 0);
	CHECK(WIFEXITED(wst) && WEXITSTATUS(wst) == 0, "the slow snapshot was answered 200");
	request(port, "POST", "/api/v1/snapshot?pid=79");
	CHECK(strstr(resp, "200 OK"), "the next snapshot after it: %s", resp);
	/* a client that goes away mid-snapshot, then the server stops */
	child = fork();
	if (child == 0) {
		alarm(1);	/* killed while its snapshot (pid 77 again, 3 s) runs */
		request(port, "POST", "/api/v1/snapshot?pid=77");
		_exit(0);
	}
	waitpid(child, &wst, 0);
	http_free(s);

	/* the API off: 404 with the reason; health still answers */
	s = start("127.0.0.1:0", NULL, &rc, &err);
	port = http_port(s);
	request(port, "POST", "/api/v1/snapshot?pid=12");
	CHECK(strstr(resp, " 404 ") && strstr(resp, "snapshot_api.enabled"), "API off: %s", resp);
	request(port, "GET", "/healthz");
	CHECK(strstr(resp, "200 OK"), "healthz with the API off");
	http_free(s);

	/* a token file: 401 without it or with a wrong one, 200 with it */
	char tokf[] = "/tmp/pushprof-http-tok-XXXXXX";
	int tfd = mkstemp(tokf);
	if (write(tfd, "s3cret-tok\n", 11) != 11) {}
	close(tfd);
	api.token_file = tokf;
	api.per_client_per_minute = 100;
	s = start("127.0.0.1:0", &api, &rc, &err);
	port = http_port(s);
	request(port, "POST", "/api/v1/snapshot?pid=20");
	CHECK(strstr(resp, " 401 ") && strstr(resp, "WWW-Authenticate: Bearer"), "no token: %s", resp);
	request_h(port, "POST", "/api/v1/snapshot?pid=21", "Authorization: Bearer s3cret-to\r\n");
	CHECK(strstr(resp, " 401 "), "a prefix of the token: %s", resp);
	request_h(port, "POST", "/api/v1/snapshot?pid=22", "Authorization: Bearer s3cret-tok2\r\n");
	CHECK(strstr(resp, " 401 "), "a longer token: %s", resp);
	request_h(port, "POST", "/api/v1/snapshot?pid=23", "Authorization: Bearer s3cret-tok\r\n");
	CHECK(strstr(resp, "200 OK"), "right token: %s", resp);
	request(port, "GET", "/metrics");
	CHECK(strstr(resp, "200 OK") && strstr(resp, "reason=\"unauthorized\"} 3"),
	      "metrics stay open and count refusals: %s", resp);
	unlink(tokf);
	request_h(port, "POST", "/api/v1/snapshot?pid=24", "Authorization: Bearer s3cret-tok\r\n");
	CHECK(strstr(resp, " 503 "), "token file gone: 503, not open: %s", resp);
	http_free(s);
	s = NULL;

	struct http_server *dup = start("127.0.0.1:bad", NULL, &rc, &err);
	CHECK(!dup && rc == -EINVAL && strstr(err.msg, "127.0.0.1:bad"), "bad address: %s",
	      err.msg);
	char addr[64];
	s = start("127.0.0.1:0", NULL, &rc, &err);
	snprintf(addr, sizeof(addr), "127.0.0.1:%d", http_port(s));
	dup = start(addr, NULL, &rc, &err);
	CHECK(!dup && rc == -EADDRINUSE && strstr(err.msg, "cannot listen"), "port in use: %s",
	      err.msg);

	http_free(s);
	metrics_reset();
	return check_done();
}
