#include "nodemeta.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* typecheck-gcc.h's curl_easy_setopt macro would swallow pp_curl.curl_easy_setopt */
#include "buildinfo.h"
#include "curl_lib.h"
#include "fileutil.h"
#include "log.h"

#define SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"
#define API_REFRESH_S 300
#define API_RETRY_S 30
#define FILE_CHECK_S 10
#define FETCH_TIMEOUT_S 10
#define FIRST_WAIT_S 3 /* node_meta_new waits this long for the first read */
#define JSON_DEPTH_MAX 64
#define LABEL_NAME_MAX 512

/* ---- the bounded JSON reader ---------------------------------------------- */

struct jp {
	const char *start, *p, *end;
	int depth;
	struct pp_err *err;
};

static int jfail(struct jp *j, const char *what)
{
	return pp_errf(j->err, -EINVAL, "node labels: JSON: %s at byte %zu", what,
		       (size_t)(j->p - j->start));
}

static void jws(struct jp *j)
{
	while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
		j->p++;
}

static int hex4(const char *p, unsigned *out)
{
	unsigned v = 0;
	for (int i = 0; i < 4; i++) {
		char c = p[i];
		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= (unsigned)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v |= (unsigned)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			v |= (unsigned)(c - 'A' + 10);
		else
			return -1;
	}
	*out = v;
	return 0;
}

/* Append one code point as UTF-8; *n counts bytes wanted even past cap. */
static void put_cp(char *out, size_t cap, size_t *n, unsigned cp)
{
	unsigned char b[4];
	size_t k;

	if (cp < 0x80) {
		b[0] = (unsigned char)cp;
		k = 1;
	} else if (cp < 0x800) {
		b[0] = (unsigned char)(0xc0 | cp >> 6);
		b[1] = (unsigned char)(0x80 | (cp & 0x3f));
		k = 2;
	} else if (cp < 0x10000) {
		b[0] = (unsigned char)(0xe0 | cp >> 12);
		b[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
		b[2] = (unsigned char)(0x80 | (cp & 0x3f));
		k = 3;
	} else {
		b[0] = (unsigned char)(0xf0 | cp >> 18);
		b[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3f));
		b[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
		b[3] = (unsigned char)(0x80 | (cp & 0x3f));
		k = 4;
	}
	for (size_t i = 0; i < k; i++, (*n)++)
		if (out && *n + 1 < cap)
			out[*n] = (char)b[i];
}

/*
 * A string at j->p (the opening quote), decoded into out (cap bytes with
 * the NUL; NULL: skip it). *fits false when it was longer or held \u0000.
 * 0 or -EINVAL.
 */
static int jstring(struct jp *j, char *out, size_t cap, bool *fits)
{
	size_t n = 0;
	bool nul = false; /* \u0000: no C string can hold it */

	if (j->p >= j->end || *j->p != '"')
		return jfail(j, "expected a string");
	j->p++;
	while (j->p < j->end && *j->p != '"') {
		unsigned char c = (unsigned char)*j->p;
		unsigned cp = c;
		if (c < 0x20)
			return jfail(j, "control character in a string");
		if (c == '\\') {
			if (j->end - j->p < 2)
				return jfail(j, "unfinished escape");
			char e = j->p[1];
			j->p += 2;
			switch (e) {
			case '"':
				cp = '"';
				break;
			case '\\':
				cp = '\\';
				break;
			case '/':
				cp = '/';
				break;
			case 'b':
				cp = '\b';
				break;
			case 'f':
				cp = '\f';
				break;
			case 'n':
				cp = '\n';
				break;
			case 'r':
				cp = '\r';
				break;
			case 't':
				cp = '\t';
				break;
			case 'u':
				if (j->end - j->p < 4 || hex4(j->p, &cp))
					return jfail(j, "bad \\u escape");
				j->p += 4;
				if (cp >= 0xd800 && cp < 0xdc00) {
					unsigned lo;
					if (j->end - j->p >= 6 && j->p[0] == '\\' &&
					    j->p[1] == 'u' && !hex4(j->p + 2, &lo) &&
					    lo >= 0xdc00 && lo < 0xe000) {
						cp = 0x10000 + ((cp - 0xd800) << 10) +
						     (lo - 0xdc00);
						j->p += 6;
					} else {
						cp = 0xfffd;
					}
				} else if (cp >= 0xdc00 && cp < 0xe000) {
					cp = 0xfffd;
				}
				break;
			default:
				return jfail(j, "bad escape");
			}
			nul |= cp == 0;
			put_cp(out, cap, &n, cp);
			continue;
		}
		/* raw bytes (UTF-8 passes through as it came) */
		if (out && n + 1 < cap)
			out[n] = (char)c;
		n++;
		j->p++;
	}
	if (j->p >= j->end)
		return jfail(j, "unterminated string");
	j->p++;
	if (out)
		out[n + 1 < cap ? n : cap - 1] = '\0';
	if (fits)
		*fits = n + 1 <= cap && !nul;
	return 0;
}

static int jskip(struct jp *j);

/*
 * Enter the object or array at j->p ('{' or '[', closed by `close`): 1
 * when it is empty (and already left), 0 when a member or element
 * follows, or -EINVAL when nested too deep.
 */
static int jenter(struct jp *j, char close)
{
	if (++j->depth > JSON_DEPTH_MAX)
		return jfail(j, "nested too deep");
	j->p++;
	jws(j);
	if (j->p < j->end && *j->p == close) {
		j->p++;
		j->depth--;
		return 1;
	}
	return 0;
}

/* After a member or element: 1 at ',' (another follows), 0 at `close`
 * (the object or array is left), else -EINVAL. */
static int jnext(struct jp *j, char close)
{
	jws(j);
	if (j->p < j->end && *j->p == ',') {
		j->p++;
		return 1;
	}
	if (j->p < j->end && *j->p == close) {
		j->p++;
		j->depth--;
		return 0;
	}
	return jfail(j, close == '}' ? "expected ',' or '}'" : "expected ',' or ']'");
}

/*
 * An object at j->p: for each member, key decoded into key[LABEL_NAME_MAX]
 * and fn called with j->p at the value, which fn must consume (NULL fn:
 * skip every value).
 */
typedef int (*member_fn)(struct jp *j, const char *key, bool key_fits, void *arg);

static int jobject(struct jp *j, member_fn fn, void *arg)
{
	char key[LABEL_NAME_MAX];
	int r;

	if ((r = jenter(j, '}')))
		return r < 0 ? r : 0;
	do {
		bool fits;
		jws(j);
		if ((r = jstring(j, key, sizeof(key), &fits)))
			return r;
		jws(j);
		if (j->p >= j->end || *j->p != ':')
			return jfail(j, "expected ':'");
		j->p++;
		jws(j);
		if ((r = fn ? fn(j, key, fits, arg) : jskip(j)))
			return r;
	} while ((r = jnext(j, '}')) > 0);
	return r;
}

static int jskip(struct jp *j)
{
	int r;

	jws(j);
	if (j->p >= j->end)
		return jfail(j, "expected a value");
	switch (*j->p) {
	case '{':
		return jobject(j, NULL, NULL);
	case '[':
		if ((r = jenter(j, ']')))
			return r < 0 ? r : 0;
		do {
			if ((r = jskip(j)))
				return r;
		} while ((r = jnext(j, ']')) > 0);
		return r;
	case '"':
		return jstring(j, NULL, 0, NULL);
	default: {
		static const char *const lits[] = { "true", "false", "null" };
		for (size_t i = 0; i < 3; i++) {
			size_t n = strlen(lits[i]);
			if ((size_t)(j->end - j->p) >= n && !memcmp(j->p, lits[i], n)) {
				j->p += n;
				return 0;
			}
		}
		const char *s = j->p;
		while (j->p < j->end && *j->p && strchr("+-0123456789.eE", *j->p))
			j->p++;
		return j->p > s ? 0 : jfail(j, "unexpected character");
	}
	}
}

struct lab_ctx {
	struct pp_labels *out;
	char value[NODE_LABEL_VALUE_MAX + 1];
	bool found;
};

static int on_label(struct jp *j, const char *key, bool key_fits, void *arg)
{
	struct lab_ctx *c = arg;
	bool fits;
	int r;

	if (j->p >= j->end || *j->p != '"')
		return jfail(j, "a label value that is not a string");
	if ((r = jstring(j, c->value, sizeof(c->value), &fits)))
		return r;
	if (!key_fits || !fits || !key[0] || c->out->n >= NODE_LABELS_MAX)
		return 0; /* not a label Kubernetes allows: skipped */
	return pp_labels_set(c->out, key, c->value) ? -ENOMEM : 0;
}

static int on_metadata(struct jp *j, const char *key, bool key_fits, void *arg)
{
	struct lab_ctx *c = arg;

	if (key_fits && !strcmp(key, "labels") && j->p < j->end && *j->p == '{') {
		c->found = true;
		return jobject(j, on_label, c);
	}
	return jskip(j);
}

static int on_node(struct jp *j, const char *key, bool key_fits, void *arg)
{
	if (key_fits && !strcmp(key, "metadata") && j->p < j->end && *j->p == '{')
		return jobject(j, on_metadata, arg);
	return jskip(j);
}

static int parse_lines(const char *text, size_t len, struct pp_labels *out, struct pp_err *err)
{
	const char *p = text, *end = text + len;
	unsigned line = 0;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *le = nl ? nl : end;
		line++;
		while (p < le && (*p == ' ' || *p == '\t'))
			p++;
		const char *e = le;
		while (e > p && (e[-1] == '\r' || e[-1] == ' ' || e[-1] == '\t'))
			e--;
		if (p < e && *p != '#') {
			const char *eq = memchr(p, '=', (size_t)(e - p));
			const char *ke = eq;
			while (eq && ke > p && (ke[-1] == ' ' || ke[-1] == '\t'))
				ke--;
			if (!eq || ke == p)
				return pp_errf(err, -EINVAL,
					       "node labels: line %u: expected name=value", line);
			const char *v = eq + 1;
			while (v < e && (*v == ' ' || *v == '\t'))
				v++;
			/* a NUL byte cannot be in a label: the line is skipped */
			if (!memchr(p, '\0', (size_t)(e - p)) &&
			    (size_t)(ke - p) < LABEL_NAME_MAX &&
			    (size_t)(e - v) <= NODE_LABEL_VALUE_MAX && out->n < NODE_LABELS_MAX) {
				char name[LABEL_NAME_MAX], value[NODE_LABEL_VALUE_MAX + 1];
				memcpy(name, p, (size_t)(ke - p));
				name[ke - p] = '\0';
				memcpy(value, v, (size_t)(e - v));
				value[e - v] = '\0';
				if (pp_labels_set(out, name, value))
					return pp_errf(err, -ENOMEM, "out of memory");
			}
		}
		p = le + 1;
	}
	return 0;
}

int node_labels_parse(const char *text, size_t len, struct pp_labels *out, struct pp_err *err)
{
	struct jp j = { .start = text, .p = text, .end = text + len, .err = err };
	int r;

	jws(&j);
	if (j.p >= j.end || *j.p != '{')
		return parse_lines(text, len, out, err);
	struct lab_ctx *c = calloc(1, sizeof(*c));
	if (!c)
		return pp_errf(err, -ENOMEM, "out of memory");
	c->out = out;
	r = jobject(&j, on_node, c);
	if (!r) {
		jws(&j);
		if (j.p != j.end)
			r = jfail(&j, "text after the object");
		else if (!c->found)
			r = pp_errf(err, -EINVAL,
				    "node labels: JSON without metadata.labels "
				    "(expected a Node object, as `kubectl get node NAME -o json` "
				    "prints)");
	}
	if (r == -ENOMEM)
		pp_errf(err, -ENOMEM, "out of memory");
	free(c);
	return r;
}

/* ---- the refresher --------------------------------------------------------- */

struct node_meta {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	pthread_t th;
	bool started;
	atomic_bool stop;
	char *node;
	char *file;    /* file source, else NULL */
	char url[600]; /* API source: "" when not in a pod */
	char sa_dir[256];
	struct pp_labels labels; /* last good set, raw names; mu */
	bool active;		 /* a source is configured: node_name is set */
	bool first_done;	 /* the first read was tried; mu, cv */
	char last_err[256];	 /* logged once per change */
	struct pp_file_id file_id;
};

struct body {
	char *buf;
	size_t len;
	bool cut;
};

static size_t on_body(char *p, size_t sz, size_t n, void *arg)
{
	struct body *b = arg;
	size_t len = sz * n;

	if (b->len + len > NODE_BODY_MAX) {
		b->cut = true;
		return 0; /* abort: a Node object is never that large */
	}
	memcpy(b->buf + b->len, p, len);
	b->len += len;
	return len;
}

static int on_progress(void *arg, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
	struct node_meta *m = arg;

	(void)dt, (void)dn, (void)ut, (void)un;
	return atomic_load(&m->stop);
}

/* One GET of the node object into labels. */
static int fetch_api(struct node_meta *m, struct pp_labels *labels, struct pp_err *err)
{
	char path[300], ca[300], *tok = NULL, *auth = NULL;
	struct body b = { 0 };
	struct curl_slist *hdr = NULL;
	char errbuf[CURL_ERROR_SIZE] = "";
	size_t toklen;
	long status = 0;
	int r;

	snprintf(path, sizeof(path), "%s/token", m->sa_dir);
	snprintf(ca, sizeof(ca), "%s/ca.crt", m->sa_dir);
	r = pp_read_small_file(path, 64 << 10, &tok, &toklen, NULL, "service account token", err);
	if (r < 0)
		return r;
	while (toklen && (tok[toklen - 1] == '\n' || tok[toklen - 1] == '\r'))
		tok[--toklen] = '\0';
	auth = malloc(toklen + 32);
	b.buf = malloc(NODE_BODY_MAX);
	CURL *h = pp_curl.curl_easy_init();
	if (!auth || !b.buf || !h) {
		r = pp_errf(err, -ENOMEM, "out of memory");
		goto out;
	}
	snprintf(auth, toklen + 32, "Authorization: Bearer %s", tok);
	hdr = pp_curl.curl_slist_append(NULL, auth);
	struct curl_slist *h2 = hdr ? pp_curl.curl_slist_append(hdr, "Accept: application/json") : NULL;
	if (!h2) {
		r = pp_errf(err, -ENOMEM, "out of memory");
		goto out;
	}
	hdr = h2;
	pp_curl.curl_easy_setopt(h, CURLOPT_URL, m->url);
	pp_curl.curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
	pp_curl.curl_easy_setopt(h, CURLOPT_CAINFO, ca);
	pp_curl.curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
	pp_curl.curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	pp_curl.curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "https");
	pp_curl.curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
	pp_curl.curl_easy_setopt(h, CURLOPT_TIMEOUT, (long)FETCH_TIMEOUT_S);
	pp_curl.curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 5L);
	pp_curl.curl_easy_setopt(h, CURLOPT_USERAGENT, "pushprof/" PUSHPROF_VERSION);
	pp_curl.curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
	pp_curl.curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
	pp_curl.curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
	pp_curl.curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
	pp_curl.curl_easy_setopt(h, CURLOPT_XFERINFODATA, m);
	CURLcode cc = pp_curl.curl_easy_perform(h);
	if (cc != CURLE_OK) {
		r = b.cut ? pp_errf(err, -EFBIG, "GET %s: answer larger than %u bytes", m->url,
				    NODE_BODY_MAX)
			  : pp_errf(err, -EIO, "GET %s: %s", m->url,
				    errbuf[0] ? errbuf : pp_curl.curl_easy_strerror(cc));
		goto out;
	}
	pp_curl.curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
	if (status == 403 || status == 401)
		r = pp_errf(err, -EACCES,
			    "GET %s: HTTP %ld: the agent's service account needs "
			    "`get` on `nodes` (a ClusterRole; deploy/ has one)",
			    m->url, status);
	else if (status == 404)
		r = pp_errf(err, -ENOENT,
			    "GET %s: HTTP 404: no node %s (set NODE_NAME from "
			    "spec.nodeName)",
			    m->url, m->node);
	else if (status != 200)
		r = pp_errf(err, -EIO, "GET %s: HTTP %ld", m->url, status);
	else
		r = node_labels_parse(b.buf, b.len, labels, err);
out:
	if (h)
		pp_curl.curl_easy_cleanup(h);
	pp_curl.curl_slist_free_all(hdr);
	if (auth) {
		explicit_bzero(auth, toklen + 32);
		free(auth);
	}
	explicit_bzero(tok, toklen);
	free(tok);
	free(b.buf);
	return r;
}

/* The file again when it changed. 1: read, 0: unchanged, <0: error. */
static int read_file(struct node_meta *m, struct pp_labels *labels, struct pp_err *err)
{
	struct stat st;
	char *text;
	size_t len;

	if (stat(m->file, &st) == 0 && !m->last_err[0]) {
		struct pp_file_id id = pp_file_id_of(&st);
		if (pp_file_id_same(&id, &m->file_id))
			return 0;
	}
	int r = pp_read_small_file(m->file, NODE_BODY_MAX, &text, &len, &st, "node labels file",
				   err);
	if (r < 0)
		return r;
	m->file_id = pp_file_id_of(&st);
	r = node_labels_parse(text, len, labels, err);
	free(text);
	return r < 0 ? r : 1;
}

static void *refresher(void *arg)
{
	struct node_meta *m = arg;

	while (!atomic_load(&m->stop)) {
		struct pp_labels fresh = { 0 };
		struct pp_err err = { 0 };
		int r = m->file ? read_file(m, &fresh, &err) : fetch_api(m, &fresh, &err);
		unsigned wait = m->file ? FILE_CHECK_S : r < 0 ? API_RETRY_S : API_REFRESH_S;
		if (r < 0) {
			if (!atomic_load(&m->stop) &&
			    strncmp(err.msg, m->last_err, sizeof(m->last_err) - 1))
				pp_log(PP_WARN, "node labels unavailable, keeping the last ones",
				       "error=%s", pp_q(err.msg));
			snprintf(m->last_err, sizeof(m->last_err), "%.255s", err.msg);
		} else if (r > 0 || !m->file) {
			pp_log(m->last_err[0] || !m->labels.n ? PP_INFO : PP_DEBUG,
			       "node labels read", "node=%s labels=%zu source=%s", pp_q(m->node),
			       fresh.n, pp_q(m->file ? m->file : m->url));
			m->last_err[0] = '\0';
			pthread_mutex_lock(&m->mu);
			struct pp_labels old = m->labels;
			m->labels = fresh;
			fresh = old;
			pthread_mutex_unlock(&m->mu);
		}
		pp_labels_free(&fresh);

		struct timespec until;
		clock_gettime(CLOCK_MONOTONIC, &until);
		until.tv_sec += wait;
		pthread_mutex_lock(&m->mu);
		m->first_done = true;
		pthread_cond_broadcast(&m->cv);
		while (!atomic_load(&m->stop) &&
		       pthread_cond_timedwait(&m->cv, &m->mu, &until) != ETIMEDOUT)
			;
		pthread_mutex_unlock(&m->mu);
	}
	return NULL;
}

static bool node_name_ok(const char *n)
{
	if (!*n)
		return false;
	for (const char *p = n; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || *p == '-' || *p == '.'))
			return false;
	return strlen(n) <= 253;
}

int node_meta_new(const struct node_meta_opts *o, struct node_meta **out, struct pp_err *err)
{
	static const struct node_meta_opts defaults = { 0 };
	const char *source, *node;
	struct node_meta *m;
	pthread_condattr_t ca;

	*out = NULL;
	if (!o)
		o = &defaults;
	source = o->source;
	node = o->node;
	if (!source || !*source)
		source = "auto";
	if (strcmp(source, "auto") && strcmp(source, "none") && source[0] != '/')
		return pp_errf(err, -EINVAL,
			       "metadata.node_labels: %s is not auto, none or an "
			       "absolute file path",
			       source);
	m = calloc(1, sizeof(*m));
	if (!m || !(m->node = strdup(node ? node : ""))) {
		free(m);
		return pp_errf(err, -ENOMEM, "out of memory");
	}
	pthread_mutex_init(&m->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&m->cv, &ca);
	pthread_condattr_destroy(&ca);
	if (!strcmp(source, "none"))
		goto done;
	if (source[0] == '/') {
		if (!(m->file = strdup(source))) {
			node_meta_free(m);
			return pp_errf(err, -ENOMEM, "out of memory");
		}
	} else {
		const char *host = getenv("KUBERNETES_SERVICE_HOST");
		const char *port = getenv("KUBERNETES_SERVICE_PORT");
		const char *sa = getenv("PUSHPROF_SERVICEACCOUNT_DIR");
		if (!host || !*host)
			goto done; /* not in a pod: no API server to ask */
		if (!node_name_ok(m->node)) {
			pp_log(PP_WARN,
			       "node labels: the node name is not a Kubernetes node name, "
			       "not asking the API server",
			       "node=%s", pp_q(m->node));
			goto done;
		}
		bool v6 = strchr(host, ':') != NULL;
		snprintf(m->url, sizeof(m->url), "https://%s%.200s%s:%.10s/api/v1/nodes/%s",
			 v6 ? "[" : "", host, v6 ? "]" : "", port && *port ? port : "443", m->node);
		snprintf(m->sa_dir, sizeof(m->sa_dir), "%s", sa && *sa ? sa : SA_DIR);
		char tok[300];
		snprintf(tok, sizeof(tok), "%s/token", m->sa_dir);
		if (access(tok, F_OK) != 0) {
			/* a pod without a token (automountServiceAccountToken: false,
			 * the chart's rbac.nodeLabels: false) has chosen no API access */
			pp_log(PP_INFO, "node labels off: no service account token mounted",
			       "path=%s", pp_q(tok));
			m->url[0] = '\0';
			goto done;
		}
		int rc = pp_curl_load("node labels (node_labels.from_api)", err);
		if (rc) {
			node_meta_free(m);
			return rc;
		}
	}
	m->active = true;
	if (pthread_create(&m->th, NULL, refresher, m)) {
		node_meta_free(m);
		return pp_errf(err, -EAGAIN, "cannot start the node labels thread");
	}
	pthread_setname_np(m->th, "pushprof-meta"); /* for top -H */
	m->started = true;
	/* the first profiles should carry the labels: wait a little for them */
	struct timespec until;
	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += FIRST_WAIT_S;
	pthread_mutex_lock(&m->mu);
	while (!m->first_done && pthread_cond_timedwait(&m->cv, &m->mu, &until) != ETIMEDOUT)
		;
	pthread_mutex_unlock(&m->mu);
done:
	*out = m;
	return 0;
}

void node_meta_free(struct node_meta *m)
{
	if (!m)
		return;
	if (m->started) {
		pthread_mutex_lock(&m->mu);
		atomic_store(&m->stop, true);
		pthread_cond_broadcast(&m->cv);
		pthread_mutex_unlock(&m->mu);
		pthread_join(m->th, NULL);
	}
	pp_labels_free(&m->labels);
	pthread_cond_destroy(&m->cv);
	pthread_mutex_destroy(&m->mu);
	free(m->node);
	free(m->file);
	free(m);
}

int node_meta_labels(struct node_meta *m, struct pp_labels *out)
{
	char name[LABEL_NAME_MAX + 32];
	int rc = 0;

	if (!m || !m->active)
		return 0;
	if (m->node[0])
		rc |= pp_labels_set(out, "__meta_kubernetes_node_name", m->node);
	pthread_mutex_lock(&m->mu);
	for (size_t i = 0; i < m->labels.n; i++) {
		snprintf(name, sizeof(name), "__meta_kubernetes_node_label_%s",
			 m->labels.v[i].name);
		meta_label_sanitize(name);
		rc |= pp_labels_set(out, name, m->labels.v[i].value);
	}
	pthread_mutex_unlock(&m->mu);
	return rc ? -ENOMEM : 0;
}
