/*
 * config_remote.c - remote_store in the config (config_internal.h).
 *
 * remote_store is one mapping or a list of them (remote_store[i] in
 * messages), each walked with config_schema.c's remote_fields and then
 * checked across its keys: transport, protocol, TLS and auth settings that
 * contradict each other, an address given as a URL (Grafana Alloy's form)
 * turned into host:port plus path_prefix and transport. Each store has a
 * name, given or derived from protocol and address, unique in a list.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_internal.h"

/*
 * address as a URL, the way Grafana Alloy's pyroscope.write takes it
 * ("https://profiles-prod-001.grafana.net", "http://pyroscope:4040/prefix"):
 * Connect over HTTP to host:port (80/443 when absent) with the URL's path as
 * path_prefix, TLS by the scheme. The scheme decides over `insecure` and
 * `transport` (the shipped file sets both), except that insecure: true with
 * https:// is a contradiction. Stored back as host:port + the keys, which is
 * what check-config prints.
 */
static int url_address(struct ctx *x, const struct ynode *v, struct remote_store_config *r,
		       const char *path)
{
	bool tls = !strncmp(r->address, "https://", 8);
	char b[64];

	if (!tls && strncmp(r->address, "http://", 7))
		return 0; /* (before anything looks past the scheme) */
	const char *hp = r->address + (tls ? 8 : 7);
	size_t hl = strcspn(hp, "/?#");
	const char *rest = hp + hl;
	const struct ynode *at = map_val(v, "address") ? map_val(v, "address") : v;
	if (r->protocol != STORE_PYROSCOPE)
		return errat(x, at,
			     "%s.address: a URL is for protocol: pyroscope (Connect over "
			     "HTTP); Parca is reached over gRPC at host:port",
			     path);
	if (r->insecure && tls && map_val(v, "insecure") && r->insecure)
		return errat(x, map_get(v, "insecure"),
			     "%s: insecure: true contradicts the "
			     "https:// address",
			     path);
	if (strpbrk(rest, "?#"))
		return errat(x, at, "%s.address: a URL without query or fragment", path);
	if (*r->path_prefix && rest[0] && rest[1])
		return errat(x, map_get(v, "path_prefix"),
			     "%s: the address URL has a path and "
			     "path_prefix is set too; use one",
			     path);
	char host[512];
	/* [v6]:port, [v6], host:port, host */
	const char *rb = hp[0] == '[' ? memchr(hp, ']', hl) : NULL;
	bool has_port = rb ? rb + 1 < hp + hl && rb[1] == ':' : memchr(hp, ':', hl) != NULL;
	if (!hl || hl > 400)
		return errat(x, at, "%s.address: %s has no host", path, show(at, b, sizeof(b)));
	snprintf(host, sizeof(host), "%.*s%s", (int)hl, hp, has_port ? "" : tls ? ":443" : ":80");
	int rc = check_address(x, at, path, host);
	if (rc)
		return rc;
	char *pp = NULL, *addr = strdup(host);
	if (rest[0] && rest[1]) {
		size_t pl = strlen(rest);
		while (pl > 1 && rest[pl - 1] == '/')
			pl--;
		pp = strndup(rest, pl);
	}
	if (!addr || (rest[0] && rest[1] && !pp)) {
		free(addr);
		free(pp);
		return errat(x, at, "out of memory");
	}
	free(r->address);
	r->address = addr;
	if (pp) {
		free(r->path_prefix);
		r->path_prefix = pp;
	}
	r->http = true;
	r->insecure = !tls;
	return 0;
}

static int remote_post(struct ctx *x, const struct ynode *v, void *base, const char *path)
{
	struct remote_store_config *r = base;
	int rc = url_address(x, v, r, path);

	if (rc)
		return rc;
	if (r->http && *r->address && !strchr(r->address, ':'))
		return errat(x, map_get(v, "address"),
			     "%s.address: transport: http needs "
			     "host:port or a URL",
			     path);
	if (r->http && (!strncmp(r->address, "dns:", 4) || !strncmp(r->address, "unix", 4) ||
			!strncmp(r->address, "ipv", 3) || !strncmp(r->address, "vsock:", 6)))
		return errat(x, map_get(v, "address"),
			     "%s.address: gRPC name schemes (dns:, "
			     "unix:, ...) do not apply to transport: http; give host:port or a URL",
			     path);

	if (!!*r->cert_file != !!*r->key_file)
		return errat(x, map_get(v, *r->cert_file ? "cert_file" : "key_file"),
			     "%s: cert_file and key_file must be set together", path);
	/* Pyroscope has no counterpart of Parca's DebuginfoService: off, so
	 * that switching protocol is the one line a user changes */
	if (r->protocol == STORE_PYROSCOPE)
		r->debuginfo_upload = false;
	if (r->http && r->protocol != STORE_PYROSCOPE)
		return errat(x, map_get(v, "transport"),
			     "%s.transport: http is for protocol: "
			     "pyroscope (Parca is reached over gRPC)",
			     path);
	if (*r->path_prefix &&
	    (!r->http || r->path_prefix[0] != '/' || strpbrk(r->path_prefix, " ?#\\\"") ||
	     r->path_prefix[strlen(r->path_prefix) - 1] == '/'))
		return errat(x, map_get(v, "path_prefix"),
			     "%s.path_prefix: a URL path such as "
			     "/pyroscope (starts with '/', no trailing '/'), with transport: http "
			     "only",
			     path);
	if (*r->basic_auth_username && *r->bearer_token_file)
		return errat(x, map_get(v, "basic_auth"),
			     "%s: basic_auth and bearer_token_file both set the Authorization "
			     "header; use one",
			     path);
	if (!*r->basic_auth_username && *r->basic_auth_password_file)
		return errat(x, map_get(v, "basic_auth"),
			     "%s.basic_auth: password_file without a username", path);
	if (r->insecure && (*r->ca_file || *r->cert_file || r->insecure_skip_verify))
		return errat(x, map_get(v, "insecure"),
			     "%s: insecure: true (plaintext) cannot be combined with "
			     "ca_file, cert_file or insecure_skip_verify",
			     path);
	return 0;
}

#define STORE_NAME_MAX 64

static bool store_name_char(char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
	       ch == '_' || ch == '.' || ch == '-';
}

/* name: a label value and a directory name at once, so a plain word */
int f_store_name(struct ctx *x, const struct ynode *v, void *base, const char *path)
{
	struct remote_store_config *r = base;
	char *s;
	int rc;

	rc = get_str_opt(x, v, path, &s);
	if (rc <= 0)
		return rc;
	size_t n = strlen(s), ok = 0;
	while (ok < n && store_name_char(s[ok]))
		ok++;
	if (ok < n || n > STORE_NAME_MAX || !strcmp(s, ".") || !strcmp(s, "..")) {
		free(s);
		return errat(x, v,
			     "%s: use at most %d of A-Z a-z 0-9 _ . - (it names the store's "
			     "spool directory and its metrics), or \"\" for the default "
			     "<protocol>-<address>",
			     path, STORE_NAME_MAX);
	}
	free(r->name);
	r->name = s;
	return 0;
}

/* One store's mapping: the schema, then the checks across its keys. */
static int remote_one(struct ctx *x, const struct ynode *v, struct remote_store_config *r,
		      const char *path)
{
	int rc = walk_map(x, v, path, remote_fields, r);

	return rc ? rc : remote_post(x, v, r, path);
}

/* name "" -> "<protocol>-<address>", e.g. parca-127.0.0.1_7070 */
static int default_name(struct remote_store_config *r)
{
	char b[STORE_NAME_MAX + 1];

	if (*r->name || !*r->address)
		return 0;
	snprintf(b, sizeof(b), "%s-%s", protocol_names[r->protocol], r->address);
	for (char *p = b; *p; p++)
		if (!store_name_char(*p))
			*p = '_';
	free(r->name);
	return (r->name = strdup(b)) ? 0 : -ENOMEM;
}

/*
 * remote_store: one mapping (as always), or a list of them, each checked
 * as the mapping is (remote_store[i].key in messages), each pushed to on its
 * own (outbox.h). An empty list is no remote store.
 */
int f_remote_store(struct ctx *x, const struct ynode *v, void *base, const char *path)
{
	struct config *c = base;
	char sub[200], b[64];
	int rc;

	if (is_null(v) || v->kind != Y_SEQ) {
		rc = remote_one(x, v, &c->remote_store, path);
		return rc ? rc : default_name(&c->remote_store);
	}
	c->remote_store_list = true;
	if (v->n > 16)
		return errat(x, v, "%s: more than 16 stores", path);
	if (!v->n)
		return 0;
	if (v->n > 1 && !(c->more_stores = calloc(v->n - 1, sizeof(*c->more_stores))))
		return -ENOMEM;
	int first = 0;
	for (size_t i = 0; i < v->n; i++) {
		const struct ynode *e = v->kids[i];
		struct remote_store_config *r = i ? &c->more_stores[i - 1] : &c->remote_store;
		unsigned before = x->nerr;
		snprintf(sub, sizeof(sub), "%s[%zu]", path, i);
		if (i) {
			c->nmore_stores = i; /* so config_free sees partial entries */
			if (remote_defaults(r))
				return -ENOMEM;
		}
		if (e->kind != Y_MAP)
			rc = errat(x, e, "%s: expected a mapping (address, protocol, ...), got %s",
				   sub, show(e, b, sizeof(b)));
		else if (!(rc = remote_one(x, e, r, sub)) && !*r->address)
			rc = errat(x, map_get(e, "address"),
				   "%s.address: every store of a list "
				   "needs an address",
				   sub);
		if (!rc)
			rc = default_name(r);
		for (size_t j = 0; !rc && j < i; j++) {
			const struct remote_store_config *o = config_store(c, j);
			if (!strcmp(o->name, r->name))
				rc = errat(x, map_get(e, "name"),
					   "%s: the name %s is also %s[%zu]'s%s; "
					   "give each store its own name",
					   sub, r->name, path, j,
					   map_val(e, "name") ? ""
							      : " (derived from protocol and "
								"address)");
		}
		if (!rc)
			continue;
		if (rc == -ENOMEM)
			return rc;
		if (x->nerr == before) /* every item's errors in one run */
			note_error(x);
		if (!first)
			first = rc;
	}
	return first;
}
