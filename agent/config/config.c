/*
 * config.c - strict YAML configuration loader (see config.h): the entry
 * points.
 *
 * A file of at most MAX_FILE_BYTES becomes a YAML tree that keeps the
 * line/column of every node (config_yaml.c), command-line overrides are set
 * into it, and a table-driven walk (config_walk.c over config_schema.c's
 * tables) maps it onto struct config, so every error can name FILE:LINE:COL.
 * Parsing happens into a scratch struct, filled with the defaults first,
 * that replaces *c only when the whole file is valid, the checks across
 * sections included. Also here: the defaults, the check of the files a
 * config names, config_free, and config_dump (what check-config prints).
 * config_internal.h lists what each file owns.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bpf/cpu_abi.h" /* CPU_MAX_DEPTH */
#include "fileutil.h"
#include "procinfo.h"
#include "config_internal.h"

#define MAX_FILE_BYTES (4u << 20) /* a config is a few KiB; refuse nonsense */

/* ------------------------------------------------------------------ */
/* Public API                                                         */

/* The kernel's perf_event_max_stack, its default when unreadable. */
static uint32_t kernel_max_stack(void)
{
	uint32_t k = proc_perf_max_stack();

	return k ? k : CPU_MAX_DEPTH;
}

static int resolve_node(struct config *c, struct pp_err *err);

/* A remote store's defaults (the single mapping's and each list item's). */
int remote_defaults(struct remote_store_config *r)
{
	char **strs[] = { &r->name,
			  &r->address,
			  &r->ca_file,
			  &r->cert_file,
			  &r->key_file,
			  &r->server_name,
			  &r->bearer_token_file,
			  &r->tenant_id,
			  &r->basic_auth_username,
			  &r->path_prefix,
			  &r->basic_auth_password_file };

	r->timeout_ns = 10 * NS_PER_S;
	r->max_request_bytes = 4u << 20;
	r->debuginfo_upload = true;
	r->debuginfo_max_bytes_per_hour = 1ull << 30;
	for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++)
		if (!(*strs[i] = strdup("")))
			return -ENOMEM;
	return 0;
}

int config_defaults(struct config *c, struct pp_err *err)
{
	memset(c, 0, sizeof(*c));
	c->log_level = PP_INFO;
	c->log_format = PP_LOG_LOGFMT;
	c->oom_score_adj = -1000;
	c->local_store.max_bytes = 1ull << 30;
	c->spool.max_bytes = 256ull << 20;
	c->cpu.enabled = true;
	c->cpu.frequency_hz = 19;
	c->cpu.interval_ns = 10 * NS_PER_S;
	c->cpu.max_stack_depth = CPU_MAX_DEPTH;
	c->cpu.kernel_stacks = true;
	c->cpu.thread_labels = -1;
	c->cpu.cpu_label = -1;
	c->go_heap.enabled = true;
	c->go_heap.interval_ns = 60 * NS_PER_S;
	c->go_heap.on_oom = true;
	c->go_heap.max_buckets = 100000;
	c->go_heap.max_stack_depth = 128;
	c->go_heap.enable_profiling = false;
	c->go_heap.pressure.enabled = false;
	c->go_heap.pressure.threshold_percent = 80;
	c->go_heap.pressure.cooldown_ns = 300 * NS_PER_S;
	c->go_heap.pressure.poll_interval_ns = 1 * NS_PER_S;
	/* A real service with tens of thousands of buckets of a few dozen
	 * frames stays well inside; 100,000 buckets x 128 distinct PCs hit
	 * max_frames at ~16 MiB of sample data and ~1 s. */
	c->go_heap.budget.max_frames = 3000000;
	c->go_heap.budget.max_locations = 100000;
	c->go_heap.budget.max_read_bytes = 256ull << 20;
	c->go_heap.budget.max_duration_ns = 5 * NS_PER_S;
	c->go_heap.budget.backoff_ns = 600 * NS_PER_S;
	/* held per tracked process for as long as it lives (4 MiB, and as
	 * much again while a catch-up reads) */
	c->go_heap.budget.oom_max_frames = 500000;
	c->snapshot_api.enabled = false;
	c->snapshot_api.per_pid_interval_ns = 10 * NS_PER_S;
	c->snapshot_api.per_client_per_minute = 6;
	c->snapshot_api.per_minute = 30;

	uint32_t k = kernel_max_stack();
	if (c->cpu.max_stack_depth > k)
		c->cpu.max_stack_depth = k;

	struct {
		char **dst;
		const char *val;
	} strs[] = {
		{ &c->path, "" },
		{ &c->node, "" },
		{ &c->http_address, "127.0.0.1:7071" },
		{ &c->local_store.directory, "" },
		{ &c->spool.directory, "/var/lib/pushprof/spool" },
		{ &c->cri_socket, "" },
		{ &c->snapshot_api.bearer_token_file, "" },
		{ &c->node_labels, "auto" },
	};
	for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++) {
		*strs[i].dst = strdup(strs[i].val);
		if (!*strs[i].dst) {
			config_free(c);
			return pp_errf(err, -ENOMEM, "config: out of memory");
		}
	}
	if (remote_defaults(&c->remote_store)) {
		config_free(c);
		return pp_errf(err, -ENOMEM, "config: out of memory");
	}
	/* Same as the default file's "node: ${NODE_NAME:-}". */
	const char *env = getenv("NODE_NAME");
	if (env && *env && utf8_valid(env)) {
		char *n = strdup(env);
		if (!n) {
			config_free(c);
			return pp_errf(err, -ENOMEM, "config: out of memory");
		}
		free(c->node);
		c->node = n;
	}
	int rc = resolve_node(c, err);
	if (rc)
		config_free(c);
	return rc;
}

/* An empty node means the hostname. */
static int resolve_node(struct config *c, struct pp_err *err)
{
	char host[256];

	if (*c->node)
		return 0;
	if (gethostname(host, sizeof(host)) < 0)
		return pp_errf(err, -errno, "%s: node is empty and gethostname failed: %s", c->path,
			       strerror(errno));
	host[sizeof(host) - 1] = '\0';
	char *h = strdup(host);
	if (!h)
		return pp_errf(err, -ENOMEM, "config: out of memory");
	free(c->node);
	c->node = h;
	return 0;
}

int config_parse(const char *buf, size_t len, const char *name, struct config *c,
		 struct pp_err *err)
{
	return config_parse_ov(buf, len, name, NULL, c, err);
}

/*
 * An agent with neither store would build every profile and drop it: say
 * so at load, at the key that turned the last store off (or the flag that
 * did), else at the top of the file.
 */
static int check_destination(struct ctx *x, const struct ynode *root, const struct config *c)
{
	const struct ynode *at;

	if (*c->remote_store.address || *c->local_store.directory)
		return 0;
	at = map_val(map_val(root, "local_store"), "directory");
	if (!at)
		at = map_val(map_val(root, "remote_store"), "address");
	return errat(x, at ? at : root,
		     "nowhere to put profiles: remote_store.address and "
		     "local_store.directory are both empty; set one of them (or run with "
		     "--remote-store-address or --local-store)");
}

int config_parse_ov(const char *buf, size_t len, const char *name, const struct config_load_opts *o,
		    struct config *c, struct pp_err *err)
{
	const struct config_override *ov = o ? o->ov : NULL;
	size_t nov = o ? o->nov : 0;
	struct config tmp;
	struct ynode *root = NULL;
	struct ctx x = { .name = name ? name : "<config>", .err = err };
	int rc;

	memset(c, 0, sizeof(*c));
	if (len > MAX_FILE_BYTES)
		return pp_errf(err, -EFBIG, "%s: config is larger than %u bytes", x.name,
			       MAX_FILE_BYTES);
	rc = config_defaults(&tmp, err);
	if (rc)
		return rc;
	x.kernel_max_stack = kernel_max_stack();
	free(tmp.path);
	tmp.path = strdup(x.name);
	if (!tmp.path) {
		rc = pp_errf(err, -ENOMEM, "config: out of memory");
		goto fail;
	}
	if (!buf) { /* libyaml asserts on a NULL input */
		buf = "";
		len = 0;
	}
	rc = load_tree(buf, len, x.name, err, &root);
	if (rc)
		goto fail;
	for (size_t i = 0; i < nov; i++) {
		/* a flag means one store; which item of a list it was for, it
		 * cannot say */
		const struct ynode *rs = map_val(root, "remote_store");
		if (rs && rs->kind == Y_SEQ && !strncmp(ov[i].key, "remote_store.", 13)) {
			rc = pp_errf(err, -EINVAL,
				     "%s sets %s, but remote_store in %s:%u:%u is a "
				     "list of stores; set %s in the item it is for",
				     ov[i].flag, ov[i].key, x.name, rs->line, rs->col,
				     ov[i].key + 13);
			goto fail;
		}
		rc = apply_override(&root, &ov[i]);
		if (rc)
			goto fail;
	}
	if (root && !is_null(root)) {
		if (root->kind != Y_MAP) {
			char b[64];
			rc = errat(&x, root,
				   "the config must be a mapping of keys (node, cpu, "
				   "go_heap, ...), got %s",
				   show(root, b, sizeof(b)));
			goto fail;
		}
		rc = walk_map(&x, root, "", top_fields, &tmp);
		if (rc)
			goto fail;
	}
	if (*tmp.local_store.directory && !strcmp(tmp.local_store.directory, tmp.spool.directory)) {
		const struct ynode *at = map_val(map_val(root, "local_store"), "directory");
		if (!at)
			at = map_val(map_val(root, "spool"), "directory");
		rc = errat(&x, at ? at : root,
			   "local_store.directory and spool.directory must differ "
			   "(both are %s)",
			   tmp.local_store.directory);
		goto fail;
	}
	if (tmp.snapshot_api.enabled) {
		const struct ynode *sa = map_val(root, "snapshot_api");
		const struct ynode *at = map_val(sa, "enabled");
		if (!*tmp.http_address) {
			rc = errat(&x, at ? at : root,
				   "snapshot_api.enabled needs the HTTP endpoint "
				   "(http_address is \"\")");
			goto fail;
		}
		if (!*tmp.snapshot_api.bearer_token_file &&
		    !config_address_is_loopback(tmp.http_address)) {
			rc = errat(&x, at ? at : root,
				   "snapshot_api.enabled on http_address %s, which "
				   "is reachable from other hosts, needs "
				   "snapshot_api.bearer_token_file "
				   "(heap profiles name every function and allocation site of a "
				   "process); or listen on 127.0.0.1",
				   tmp.http_address);
			goto fail;
		}
	}
	/* after the other checks: with a key misspelt, "nowhere" may be
	 * only its consequence */
	if (o && o->need_destination) {
		rc = check_destination(&x, root, &tmp);
		if (rc)
			goto fail;
	}
	rc = resolve_node(&tmp, err);
	if (rc)
		goto fail;
	if (o && o->check_files) {
		rc = config_check_files(&tmp, err);
		if (rc) {
			if (o->files_hint && err) {
				char m[sizeof(err->msg)];
				snprintf(m, sizeof(m), "%s", err->msg);
				pp_errf(err, rc, "%s\n%s", m, o->files_hint);
			}
			goto fail;
		}
	}
	ynode_free(root);
	*c = tmp;
	return 0;
fail:
	if (rc == -ENOMEM && (!err || !err->msg[0]))
		pp_errf(err, rc, "%s: out of memory", x.name);
	else if (x.nerr > 1 && err) {
		/* all of them, one FILE:LINE:COL line each, as many whole
		 * lines as fit */
		char all[sizeof(err->msg)];
		int n = snprintf(all, sizeof(all), "%s", x.errs);
		if (n >= (int)sizeof(all)) {
			const char *more = "\n... (fix these and check again for the rest)";
			char *cut = all + sizeof(all) - strlen(more) - 1;
			*cut = '\0';
			char *nl = strrchr(all, '\n');
			if (nl)
				*nl = '\0';
			strcat(all, more);
		}
		pp_errf(err, rc, "%s", all);
	}
	ynode_free(root);
	config_free(&tmp);
	return rc;
}

int config_load(const char *path, struct config *c, struct pp_err *err)
{
	return config_load_ov(path, NULL, c, err);
}

int config_load_ov(const char *path, const struct config_load_opts *o, struct config *c,
		   struct pp_err *err)
{
	size_t len;
	char *buf;
	int rc;

	memset(c, 0, sizeof(*c));
	if (!path)
		return config_parse_ov(pushprof_default_config, strlen(pushprof_default_config),
				       CONFIG_BUILTIN_NAME, o, c, err);
	/* to EOF, not by its stat size: a pipe or /dev/stdin is a config too.
	 * Cut past MAX_FILE_BYTES, which config_parse_ov() then refuses. */
	rc = pp_read_kernel_file_alloc(path, MAX_FILE_BYTES + 2, &buf, &len);
	if (rc == -ENOMEM)
		return pp_errf(err, rc, "%s: out of memory", path);
	if (rc)
		return pp_errf(err, rc, "cannot open config %s: %s", path, strerror(-rc));
	rc = config_parse_ov(buf, len, path, o, c, err);
	free(buf);
	return rc;
}

int config_check_files(const struct config *c, struct pp_err *err)
{
	/* the files of each store (remote_store or remote_store[i]), then the API's */
	static const char *const rs_keys[] = { "ca_file", "cert_file", "key_file",
					       "bearer_token_file", "basic_auth.password_file" };
	size_t nrs = c->nmore_stores + 1, nrk = sizeof(rs_keys) / sizeof(rs_keys[0]);
	char msg[sizeof(err->msg)], key[96];
	size_t o = 0;
	int rc = 0;

	msg[0] = '\0';
	for (size_t i = 0; i < nrs * nrk + 1; i++) {
		const char *p, *why = NULL;
		if (i == nrs * nrk) {
			p = c->snapshot_api.bearer_token_file;
			snprintf(key, sizeof(key), "snapshot_api.bearer_token_file");
		} else {
			const struct remote_store_config *r = config_store(c, i / nrk);
			const char *const v[] = { r->ca_file, r->cert_file, r->key_file,
						  r->bearer_token_file,
						  r->basic_auth_password_file };
			p = v[i % nrk];
			if (c->remote_store_list)
				snprintf(key, sizeof(key), "remote_store[%zu].%s", i / nrk,
					 rs_keys[i % nrk]);
			else
				snprintf(key, sizeof(key), "remote_store.%s", rs_keys[i % nrk]);
		}
		struct stat st;
		int e = 0;

		if (!p || !*p)
			continue;
		int fd = open(p, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
		if (fd < 0)
			e = errno;
		else if (fstat(fd, &st) < 0)
			e = errno;
		else if (!S_ISREG(st.st_mode))
			why = "not a regular file";
		if (fd >= 0)
			close(fd);
		if (!e && !why)
			continue;
		if (!rc)
			rc = e ? -e : -EINVAL;
		int n = snprintf(msg + o, sizeof(msg) - o, "%s%s %s: %s", o ? "; " : "", key, p,
				 why ? why : strerror(e));
		if (n > 0)
			o = (size_t)n < sizeof(msg) - o ? o + (size_t)n : sizeof(msg) - 1;
	}
	if (rc)
		pp_errf(err, rc, "%s: cannot read the files it names: %s", c->path, msg);
	return rc;
}

static void target_free(struct target_config *t)
{
	free(t->cgroup);
	pp_regex_free(t->cgroup_re);
	pp_regex_free(t->comm_re);
	pp_regex_free(t->exe_re);
	free(t->cgroup_regex);
	free(t->comm_regex);
	free(t->exe_regex);
	free(t->pids);
	memset(t, 0, sizeof(*t));
}

static void remote_free(struct remote_store_config *r)
{
	free(r->name);
	free(r->address);
	free(r->ca_file);
	free(r->cert_file);
	free(r->key_file);
	free(r->server_name);
	free(r->bearer_token_file);
	free(r->tenant_id);
	free(r->path_prefix);
	free(r->basic_auth_username);
	free(r->basic_auth_password_file);
	pp_labels_free(&r->headers);
	memset(r, 0, sizeof(*r));
}

size_t config_nstores(const struct config *c)
{
	if (!c->remote_store.address || !*c->remote_store.address)
		return 0;
	return 1 + c->nmore_stores;
}

const struct remote_store_config *config_store(const struct config *c, size_t i)
{
	return i == 0 ? &c->remote_store : &c->more_stores[i - 1];
}

void config_free(struct config *c)
{
	if (!c)
		return;
	free(c->path);
	free(c->node);
	free(c->http_address);
	free(c->cri_socket);
	free(c->node_labels);
	free(c->snapshot_api.bearer_token_file);
	relabel_free(c->relabel);
	c->relabel = NULL;
	pp_labels_free(&c->external_labels);
	remote_free(&c->remote_store);
	for (size_t i = 0; i < c->nmore_stores; i++)
		remote_free(&c->more_stores[i]);
	free(c->more_stores);
	free(c->local_store.directory);
	free(c->spool.directory);
	for (size_t i = 0; i < c->ntargets; i++)
		target_free(&c->targets[i]);
	free(c->targets);
	memset(c, 0, sizeof(*c));
}

/* ------------------------------------------------------------------ */
/* Dump                                                               */

/*
 * Double-quoted YAML scalar; '$' doubled where the parser expands ${VAR}.
 * Code points YAML does not allow raw (C0/C1 controls, BOM, U+FFFE/F) or
 * would fold as line breaks (U+0085, U+2028, U+2029) are escaped.
 */
static void put_str(FILE *out, const char *s, bool env)
{
	const unsigned char *p = (const unsigned char *)(s ? s : "");

	fputc('"', out);
	while (*p) {
		unsigned c = *p;
		switch (c) {
		case '"':
			fputs("\\\"", out);
			p++;
			continue;
		case '\\':
			fputs("\\\\", out);
			p++;
			continue;
		case '\n':
			fputs("\\n", out);
			p++;
			continue;
		case '\t':
			fputs("\\t", out);
			p++;
			continue;
		case '\r':
			fputs("\\r", out);
			p++;
			continue;
		case '$':
			fputs(env ? "$$" : "$", out);
			p++;
			continue;
		}
		if (c < 0x20 || c == 0x7f) {
			fprintf(out, "\\x%02x", c);
			p++;
			continue;
		}
		if (c < 0x80) {
			fputc((int)c, out);
			p++;
			continue;
		}
		/* Strings are valid UTF-8 here (libyaml and expand_env check). */
		unsigned len = (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : 4;
		uint32_t cp = c & (len == 2 ? 0x1f : len == 3 ? 0x0f : 0x07);
		unsigned i;
		for (i = 1; i < len && (p[i] & 0xc0) == 0x80; i++)
			cp = (cp << 6) | (p[i] & 0x3f);
		if (i < len) { /* not UTF-8 after all: escape the byte */
			fprintf(out, "\\x%02x", c);
			p++;
			continue;
		}
		if (cp <= 0x9f)
			fprintf(out, "\\x%02x", (unsigned)cp);
		else if (cp == 0x2028 || cp == 0x2029 || cp == 0xfeff || cp == 0xfffe ||
			 cp == 0xffff)
			fprintf(out, "\\u%04x", (unsigned)cp);
		else
			fwrite(p, 1, len, out);
		p += len;
	}
	fputc('"', out);
}

static void put_kv_str(FILE *out, int ind, const char *k, const char *v)
{
	fprintf(out, "%*s%s: ", ind, "", k);
	put_str(out, v, true);
	fputc('\n', out);
}

static void put_kv_dur(FILE *out, int ind, const char *k, uint64_t ns)
{
	char b[64];

	fmt_duration(ns, b, sizeof(b));
	fprintf(out, "%*s%s: %s\n", ind, "", k, b);
}

static void put_kv_size(FILE *out, int ind, const char *k, uint64_t v)
{
	char b[64];

	fmt_size(v, b, sizeof(b));
	fprintf(out, "%*s%s: %s\n", ind, "", k, b);
}

static void put_kv_bool(FILE *out, int ind, const char *k, bool v)
{
	fprintf(out, "%*s%s: %s\n", ind, "", k, v ? "true" : "false");
}

/* true, false or auto (-1), as get_auto_bool reads it */
static void put_kv_auto_bool(FILE *out, int ind, const char *k, int v)
{
	fprintf(out, "%*s%s: %s\n", ind, "", k, v < 0 ? "auto" : v ? "true" : "false");
}

static void put_labels(FILE *out, int ind, const char *k, const struct pp_labels *l)
{
	if (!l->n) {
		fprintf(out, "%*s%s: {}\n", ind, "", k);
		return;
	}
	fprintf(out, "%*s%s:\n", ind, "", k);
	for (size_t i = 0; i < l->n; i++) {
		fprintf(out, "%*s", ind + 2, "");
		put_str(out, l->v[i].name, false);
		fputs(": ", out);
		put_str(out, l->v[i].value, true);
		fputc('\n', out);
	}
}

/* One store's keys at indent ind; lead (a list item's "  - ") replaces
 * the first line's indent. */
static void dump_remote(FILE *out, int ind, const struct remote_store_config *r, const char *lead)
{
	if (lead)
		fputs(lead, out);
	put_kv_str(out, lead ? 0 : ind, "name", r->name);
	put_kv_str(out, ind, "address", r->address);
	fprintf(out, "%*sprotocol: %s\n", ind, "", protocol_names[r->protocol]);
	fprintf(out, "%*stransport: %s\n", ind, "", transport_names[r->http]);
	put_kv_str(out, ind, "path_prefix", r->path_prefix);
	put_kv_bool(out, ind, "insecure", r->insecure);
	put_kv_str(out, ind, "ca_file", r->ca_file);
	put_kv_str(out, ind, "cert_file", r->cert_file);
	put_kv_str(out, ind, "key_file", r->key_file);
	put_kv_str(out, ind, "server_name", r->server_name);
	put_kv_bool(out, ind, "insecure_skip_verify", r->insecure_skip_verify);
	put_kv_str(out, ind, "bearer_token_file", r->bearer_token_file);
	put_kv_str(out, ind, "tenant_id", r->tenant_id);
	fprintf(out, "%*sbasic_auth:\n", ind, "");
	put_kv_str(out, ind + 2, "username", r->basic_auth_username);
	put_kv_str(out, ind + 2, "password_file", r->basic_auth_password_file);
	put_labels(out, ind, "headers", &r->headers);
	put_kv_dur(out, ind, "timeout", r->timeout_ns);
	put_kv_size(out, ind, "max_request_bytes", r->max_request_bytes);
	put_kv_bool(out, ind, "debuginfo_upload", r->debuginfo_upload);
	put_kv_size(out, ind, "debuginfo_max_bytes_per_hour", r->debuginfo_max_bytes_per_hour);
}

int config_dump(const struct config *c, FILE *out)
{
	const struct go_heap_config *g = &c->go_heap;

	fprintf(out, "# effective configuration");
	if (c->path && *c->path) {
		fputs(" of ", out);
		for (const char *p = c->path; *p; p++)
			fputc((unsigned char)*p < 0x20 ? '?' : *p, out);
	}
	fputc('\n', out);
	put_kv_str(out, 0, "node", c->node);
	fprintf(out, "log:\n  level: %s\n  format: %s\n", pp_log_level_name(c->log_level),
		c->log_format == PP_LOG_JSON ? "json" : "logfmt");
	put_kv_str(out, 0, "http_address", c->http_address);
	fprintf(out, "http_optional: %s\n", c->http_optional ? "true" : "false");
	put_labels(out, 0, "external_labels", &c->external_labels);
	if (!c->remote_store_list) {
		fputs("remote_store:\n", out);
		dump_remote(out, 2, &c->remote_store, NULL);
	} else if (!config_nstores(c)) {
		fputs("remote_store: []\n", out);
	} else {
		fputs("remote_store:\n", out);
		for (size_t i = 0; i < config_nstores(c); i++)
			dump_remote(out, 4, config_store(c, i), "  - ");
	}
	fputs("local_store:\n", out);
	put_kv_str(out, 2, "directory", c->local_store.directory);
	put_kv_size(out, 2, "max_bytes", c->local_store.max_bytes);
	fputs("spool:\n", out);
	put_kv_str(out, 2, "directory", c->spool.directory);
	put_kv_size(out, 2, "max_bytes", c->spool.max_bytes);
	fputs("cpu:\n", out);
	put_kv_bool(out, 2, "enabled", c->cpu.enabled);
	fprintf(out, "  frequency_hz: %u\n", c->cpu.frequency_hz);
	put_kv_dur(out, 2, "interval", c->cpu.interval_ns);
	fprintf(out, "  max_stack_depth: %u\n", c->cpu.max_stack_depth);
	put_kv_bool(out, 2, "kernel_stacks", c->cpu.kernel_stacks);
	put_kv_auto_bool(out, 2, "thread_labels", c->cpu.thread_labels);
	put_kv_auto_bool(out, 2, "cpu_label", c->cpu.cpu_label);
	fputs("go_heap:\n", out);
	put_kv_bool(out, 2, "enabled", g->enabled);
	put_kv_dur(out, 2, "interval", g->interval_ns);
	put_kv_bool(out, 2, "on_oom", g->on_oom);
	fprintf(out, "  max_buckets: %u\n", g->max_buckets);
	fprintf(out, "  max_stack_depth: %u\n", g->max_stack_depth);
	put_kv_bool(out, 2, "enable_profiling", g->enable_profiling);
	fputs("  pressure:\n", out);
	put_kv_bool(out, 4, "enabled", g->pressure.enabled);
	fprintf(out, "    threshold_percent: %u\n", g->pressure.threshold_percent);
	put_kv_dur(out, 4, "cooldown", g->pressure.cooldown_ns);
	put_kv_dur(out, 4, "poll_interval", g->pressure.poll_interval_ns);
	fputs("  budget:\n", out);
	fprintf(out, "    max_frames: %u\n", g->budget.max_frames);
	fprintf(out, "    max_locations: %u\n", g->budget.max_locations);
	put_kv_size(out, 4, "max_read_bytes", g->budget.max_read_bytes);
	put_kv_dur(out, 4, "max_duration", g->budget.max_duration_ns);
	put_kv_dur(out, 4, "backoff", g->budget.backoff_ns);
	fprintf(out, "    oom_max_frames: %u\n", g->budget.oom_max_frames);
	fputs("snapshot_api:\n", out);
	put_kv_bool(out, 2, "enabled", c->snapshot_api.enabled);
	put_kv_str(out, 2, "bearer_token_file", c->snapshot_api.bearer_token_file);
	put_kv_dur(out, 2, "per_pid_interval", c->snapshot_api.per_pid_interval_ns);
	fprintf(out, "  per_client_per_minute: %u\n", c->snapshot_api.per_client_per_minute);
	fprintf(out, "  per_minute: %u\n", c->snapshot_api.per_minute);
	fprintf(out, "oom_score_adj: %d\n", c->oom_score_adj);
	fputs("metadata:\n", out);
	put_kv_str(out, 2, "cri_socket", c->cri_socket ? c->cri_socket : "");
	put_kv_str(out, 2, "node_labels", c->node_labels ? c->node_labels : "auto");
	if (!c->ntargets)
		fputs("targets: []\n", out);
	else
		fputs("targets:\n", out);
	for (size_t i = 0; i < c->ntargets; i++) {
		const struct target_config *t = &c->targets[i];
		const char *lead = "  - ";
		if (t->cgroup) {
			fprintf(out, "%scgroup: ", lead);
			put_str(out, t->cgroup, true);
			fputc('\n', out);
			lead = "    ";
		}
		const struct {
			const char *k, *v;
		} res[] = {
			{ "cgroup_regex", t->cgroup_regex },
			{ "comm_regex", t->comm_regex },
			{ "exe_regex", t->exe_regex },
		};
		for (size_t j = 0; j < 3; j++) {
			if (!res[j].v)
				continue;
			fprintf(out, "%s%s: ", lead, res[j].k);
			put_str(out, res[j].v, false);
			fputc('\n', out);
			lead = "    ";
		}
		if (t->npids) {
			fprintf(out, "%spids: [", lead);
			for (size_t j = 0; j < t->npids; j++)
				fprintf(out, "%s%d", j ? ", " : "", (int)t->pids[j]);
			fputs("]\n", out);
		}
	}
	if (relabel_count(c->relabel)) {
		fputs("relabel_configs:\n", out);
		relabel_dump(c->relabel, out, 2);
	} else {
		fputs("relabel_configs: []\n", out);
	}
	return ferror(out) ? -EIO : 0;
}
