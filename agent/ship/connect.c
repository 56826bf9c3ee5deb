/*
 * connect.c - Connect unary calls over libcurl (see connect.h).
 *
 * Decisions worth knowing:
 * - The answer body is read up to CONNECT_MAX_BODY: a store's error message
 *   is short, and a hostile or broken proxy must not make the agent buffer
 *   an unbounded page.
 * - A non-200 answer without a Connect JSON error (a load balancer's HTML
 *   page) is mapped from its HTTP status (status_from_http): every 5xx and
 *   429 are retried, 401/403 keep the profiles, 400/413 are refusals.
 * - TLS: remote_store's ca_file, cert_file/key_file, insecure_skip_verify;
 *   server_name is honoured by putting it in the URL and pinning the
 *   connection to address (CURLOPT_CONNECT_TO), so SNI and certificate
 *   checks use it exactly as the gRPC transport's override does.
 */
#include "connect.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <grpc/status.h>

#include "buildinfo.h"
#include "curl_lib.h"

#define CONNECT_MAX_BODY (64u << 10)

struct connect_client {
	CURL *h;
	char *base; /* scheme://host:port[/prefix] */
	struct curl_slist *connect_to;
	char errbuf[CURL_ERROR_SIZE];
	char *body; /* the answer, NUL-terminated */
	size_t body_len;
	bool body_cut;
	const struct connect_call *call; /* for the progress callback */
};

static size_t on_body(char *p, size_t sz, size_t n, void *arg)
{
	struct connect_client *c = arg;
	size_t len = sz * n, room = CONNECT_MAX_BODY - c->body_len;

	if (len > room) {
		c->body_cut = true;
		len = room;
	}
	memcpy(c->body + c->body_len, p, len);
	c->body_len += len;
	c->body[c->body_len] = '\0';
	return sz * n; /* the rest is read and dropped, not an error */
}

static int on_progress(void *arg, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
	struct connect_client *c = arg;

	(void)dt, (void)dn, (void)ut, (void)un;
	return c->call->stop && c->call->stop(c->call->stop_arg);
}

const char *connect_base_url(const struct connect_client *c)
{
	return c->base;
}

int connect_new(const struct connect_opts *o, struct connect_client **out, struct pp_err *err)
{
	const struct remote_store_config *rs = o->rs;
	struct connect_client *c;
	const char *scheme = rs->insecure ? "http" : "https";
	const char *prefix = rs->path_prefix ? rs->path_prefix : "";
	const char *host =
		rs->server_name && *rs->server_name && !rs->insecure ? rs->server_name : NULL;

	*out = NULL;
	int rc = pp_curl_load("remote_store.transport: http", err);
	if (rc)
		return rc;
	c = calloc(1, sizeof(*c));
	if (!c || !(c->body = malloc(CONNECT_MAX_BODY + 1)) || !(c->h = pp_curl.curl_easy_init()))
		goto nomem;

	/* address is host:port (checked by the config); with server_name, the
	 * URL names that host and the connection still goes to address */
	const char *colon = strrchr(rs->address, ':');
	size_t n = strlen(scheme) + strlen(rs->address) + strlen(prefix) +
		   (host ? strlen(host) : 0) + 16;
	c->base = malloc(n);
	if (!c->base)
		goto nomem;
	if (host && colon) {
		snprintf(c->base, n, "%s://%s%s%s", scheme, host, colon, prefix);
		char pin[600];
		snprintf(pin, sizeof(pin), "%s%s:%s", host, colon, rs->address);
		c->connect_to = pp_curl.curl_slist_append(NULL, pin);
		if (!c->connect_to)
			goto nomem;
	} else {
		snprintf(c->base, n, "%s://%s%s", scheme, rs->address, prefix);
	}

	pp_curl.curl_easy_setopt(c->h, CURLOPT_ERRORBUFFER, c->errbuf);
	pp_curl.curl_easy_setopt(c->h, CURLOPT_NOSIGNAL, 1L);
	pp_curl.curl_easy_setopt(c->h, CURLOPT_PROTOCOLS_STR, "http,https");
	pp_curl.curl_easy_setopt(c->h, CURLOPT_FOLLOWLOCATION, 0L); /* a redirect is an answer */
	pp_curl.curl_easy_setopt(c->h, CURLOPT_USERAGENT, "pushprof/" PUSHPROF_VERSION);
	pp_curl.curl_easy_setopt(c->h, CURLOPT_WRITEFUNCTION, on_body);
	pp_curl.curl_easy_setopt(c->h, CURLOPT_WRITEDATA, c);
	pp_curl.curl_easy_setopt(c->h, CURLOPT_NOPROGRESS, 0L);
	pp_curl.curl_easy_setopt(c->h, CURLOPT_XFERINFOFUNCTION, on_progress);
	pp_curl.curl_easy_setopt(c->h, CURLOPT_XFERINFODATA, c);
	if (c->connect_to)
		pp_curl.curl_easy_setopt(c->h, CURLOPT_CONNECT_TO, c->connect_to);
	if (!rs->insecure) {
		if (rs->ca_file && *rs->ca_file)
			pp_curl.curl_easy_setopt(c->h, CURLOPT_CAINFO, rs->ca_file);
		if (rs->cert_file && *rs->cert_file) {
			pp_curl.curl_easy_setopt(c->h, CURLOPT_SSLCERT, rs->cert_file);
			pp_curl.curl_easy_setopt(c->h, CURLOPT_SSLKEY, rs->key_file);
		}
		if (rs->insecure_skip_verify) {
			pp_curl.curl_easy_setopt(c->h, CURLOPT_SSL_VERIFYPEER, 0L);
			pp_curl.curl_easy_setopt(c->h, CURLOPT_SSL_VERIFYHOST, 0L);
		}
	}
	*out = c;
	return 0;
nomem:
	connect_free(c);
	return pp_errf(err, -ENOMEM, "out of memory");
}

void connect_free(struct connect_client *c)
{
	if (!c)
		return;
	if (c->h)
		pp_curl.curl_easy_cleanup(c->h);
	pp_curl.curl_slist_free_all(c->connect_to);
	free(c->base);
	free(c->body);
	free(c);
}

/* Connect's error codes are gRPC's, spelled in snake case. */
static const char *const code_names[] = {
	[GRPC_STATUS_CANCELLED] = "canceled",
	[GRPC_STATUS_UNKNOWN] = "unknown",
	[GRPC_STATUS_INVALID_ARGUMENT] = "invalid_argument",
	[GRPC_STATUS_DEADLINE_EXCEEDED] = "deadline_exceeded",
	[GRPC_STATUS_NOT_FOUND] = "not_found",
	[GRPC_STATUS_ALREADY_EXISTS] = "already_exists",
	[GRPC_STATUS_PERMISSION_DENIED] = "permission_denied",
	[GRPC_STATUS_RESOURCE_EXHAUSTED] = "resource_exhausted",
	[GRPC_STATUS_FAILED_PRECONDITION] = "failed_precondition",
	[GRPC_STATUS_ABORTED] = "aborted",
	[GRPC_STATUS_OUT_OF_RANGE] = "out_of_range",
	[GRPC_STATUS_UNIMPLEMENTED] = "unimplemented",
	[GRPC_STATUS_INTERNAL] = "internal",
	[GRPC_STATUS_UNAVAILABLE] = "unavailable",
	[GRPC_STATUS_DATA_LOSS] = "data_loss",
	[GRPC_STATUS_UNAUTHENTICATED] = "unauthenticated",
};

/*
 * The string value of top-level key in a JSON object, unescaped into out
 * (\uXXXX outside ASCII becomes '?'); false when absent. Bounded by the
 * body's length; not a general JSON parser, and needs not be: only the two
 * fields of a Connect error are read, from at most CONNECT_MAX_BODY bytes.
 */
static bool json_string(const char *body, const char *key, char *out, size_t cap)
{
	char pat[32];
	const char *p;
	size_t o = 0;

	snprintf(pat, sizeof(pat), "\"%s\"", key);
	if (!(p = strstr(body, pat)))
		return false;
	p += strlen(pat);
	while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')
		p++;
	if (*p++ != ':')
		return false;
	while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')
		p++;
	if (*p++ != '"')
		return false;
	for (; *p && *p != '"' && o + 1 < cap; p++) {
		char ch = *p;
		if (ch == '\\' && p[1]) {
			p++;
			switch (*p) {
			case 'n':
				ch = ' ';
				break;
			case 't':
				ch = ' ';
				break;
			case 'u':
				ch = '?';
				for (int i = 0; i < 4 && p[1]; i++)
					p++;
				break;
			default:
				ch = *p;
			}
		}
		out[o++] = (unsigned char)ch < 0x20 ? ' ' : ch;
	}
	out[o] = '\0';
	return true;
}

/*
 * An answer without a Connect error body came from something in between (a
 * proxy, a load balancer), not from the store's code. Connect's spec maps
 * such statuses to codes; pushprof departs from it where the spec's code
 * would drop profiles the store never saw: every 5xx is retried
 * (UNAVAILABLE), where the spec says "unknown" for 500 and 501.
 */
static int status_from_http(long http)
{
	switch (http) {
	case 400:
	case 413:
		return GRPC_STATUS_INVALID_ARGUMENT; /* never fits */
	case 401:
		return GRPC_STATUS_UNAUTHENTICATED;
	case 403:
		return GRPC_STATUS_PERMISSION_DENIED;
	case 404:
		return GRPC_STATUS_UNIMPLEMENTED;
	case 429:
		return GRPC_STATUS_UNAVAILABLE;
	default:
		return http >= 500 ? GRPC_STATUS_UNAVAILABLE : GRPC_STATUS_UNKNOWN;
	}
}

int connect_parse_error(const char *body, size_t len, long http, char *msg, size_t cap)
{
	char code[40];
	int st = -1;

	if (json_string(body, "code", code, sizeof(code)))
		for (size_t i = 0; i < sizeof(code_names) / sizeof(code_names[0]); i++)
			if (code_names[i] && !strcmp(code, code_names[i]))
				st = (int)i;
	if (!json_string(body, "message", msg, cap)) {
		/* not a Connect error: show the start of what came back */
		size_t k = 0;
		for (size_t i = 0; i < len && body[i] && k + 1 < cap && k < 160; i++)
			msg[k++] = (unsigned char)body[i] < 0x20 ? ' ' : body[i];
		msg[k] = '\0';
	}
	return st >= 0 ? st : status_from_http(http);
}

int connect_unary(struct connect_client *c, const struct connect_call *call, int *status,
		  char *details, size_t details_len)
{
	struct curl_slist *hdr = NULL;
	char line[1024], url[1200];
	int rc = 0;

	details[0] = '\0';
	c->body_len = 0;
	c->body[0] = '\0';
	c->body_cut = false;
	c->errbuf[0] = '\0';
	c->call = call;

	snprintf(url, sizeof(url), "%s%s", c->base, call->method);
	uint64_t ms = call->timeout_ns / 1000000 ? call->timeout_ns / 1000000 : 1;
	snprintf(line, sizeof(line), "Connect-Timeout-Ms: %llu", (unsigned long long)ms);
	struct curl_slist *t;
#define ADD(s)                                            \
	do {                                              \
		if (!(t = pp_curl.curl_slist_append(hdr, (s)))) \
			goto nomem;                       \
		hdr = t;                                  \
	} while (0)
	ADD("Content-Type: application/proto");
	ADD("Connect-Protocol-Version: 1");
	ADD("Expect:"); /* no 100-continue round trip */
	ADD(line);
	for (size_t i = 0; call->headers && i < call->headers->n; i++) {
		snprintf(line, sizeof(line), "%s: %s", call->headers->v[i].name,
			 call->headers->v[i].value);
		ADD(line);
	}
	if (call->auth) {
		char *a = malloc(strlen(call->auth) + sizeof("Authorization: "));
		if (!a)
			goto nomem;
		sprintf(a, "Authorization: %s", call->auth);
		t = pp_curl.curl_slist_append(hdr, a);
		explicit_bzero(a, strlen(a));
		free(a);
		if (!t)
			goto nomem;
		hdr = t;
	}
#undef ADD
	pp_curl.curl_easy_setopt(c->h, CURLOPT_URL, url);
	pp_curl.curl_easy_setopt(c->h, CURLOPT_HTTPHEADER, hdr);
	pp_curl.curl_easy_setopt(c->h, CURLOPT_POSTFIELDS, (const char *)call->body);
	pp_curl.curl_easy_setopt(c->h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)call->len);
	pp_curl.curl_easy_setopt(c->h, CURLOPT_TIMEOUT_MS, (long)ms);
	pp_curl.curl_easy_setopt(c->h, CURLOPT_CONNECTTIMEOUT_MS, (long)ms);

	CURLcode cc = pp_curl.curl_easy_perform(c->h);
	long http = 0;
	pp_curl.curl_easy_getinfo(c->h, CURLINFO_RESPONSE_CODE, &http);
	if (cc != CURLE_OK) {
		*status = cc == CURLE_OPERATION_TIMEDOUT || cc == CURLE_ABORTED_BY_CALLBACK
				  ? GRPC_STATUS_DEADLINE_EXCEEDED
				  : GRPC_STATUS_UNAVAILABLE;
		snprintf(details, details_len, "%s: %s%s%s", url, pp_curl.curl_easy_strerror(cc),
			 c->errbuf[0] ? ": " : "", c->errbuf);
	} else if (http == 200) {
		*status = GRPC_STATUS_OK;
	} else {
		char msg[512];
		*status = connect_parse_error(c->body, c->body_len, http, msg, sizeof(msg));
		snprintf(details, details_len, "HTTP %ld from %s: %s", http, url, msg);
	}
	goto out;
nomem:
	rc = -ENOMEM;
	*status = GRPC_STATUS_INTERNAL;
	snprintf(details, details_len, "out of memory");
out:
	pp_curl.curl_easy_setopt(c->h, CURLOPT_HTTPHEADER, NULL);
	/* scrub the header copies that held the credential */
	for (struct curl_slist *s = hdr; s; s = s->next)
		if (!strncmp(s->data, "Authorization:", 14))
			explicit_bzero(s->data, strlen(s->data));
	pp_curl.curl_slist_free_all(hdr);
	c->call = NULL;
	return rc;
}
