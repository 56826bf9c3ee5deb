/*
 * config_schema.c - the config's schema (config_internal.h): what each key
 * is and what it may hold.
 *
 * One table of struct field per section (cpu_fields, go_heap_fields, ...),
 * nested through F_MAP, and top_fields, the whole file's, last; config_walk.c
 * walks them. A key that needs more than a type and a range has an F_CUSTOM
 * checker here: names from a list, addresses, labels and headers, targets,
 * relabel_configs (handed to relabel.c, its verdict put at FILE:LINE:COL).
 * remote_store's own checks (a list of stores, URL addresses, store names)
 * are config_remote.c's; its keys' table is here with the others.
 */
#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "bpf/golayout.h" /* GO_MAX_STACK */
#include "bpf/cpu_abi.h"  /* CPU_HZ_*: the sampler's limits */
#include "config_internal.h"

#define MAX_LIST_ITEMS 4096 /* targets, pids, relabel_configs */

/* --- custom fields --------------------------------------------------- */

static const char *const level_names[] = { "debug", "info", "warn", "error" };
const char *const protocol_names[] = { "parca", "pyroscope" };
const char *const transport_names[] = { "grpc", "http" };

static int f_transport(struct ctx *x, const struct ynode *v, void *base, const char *path)
{
	int i, rc;

	if (is_null(v))
		return 0;
	rc = enum_value(x, v, path, transport_names, 2, &i);
	if (!rc)
		((struct remote_store_config *)base)->http = i == 1;
	return rc;
}

static int f_protocol(struct ctx *x, const struct ynode *v, void *base, const char *path)
{
	int i, rc;

	if (is_null(v))
		return 0;
	rc = enum_value(x, v, path, protocol_names, 2, &i);
	if (!rc)
		((struct remote_store_config *)base)->protocol = (enum store_protocol)i;
	return rc;
}

static int f_thread_labels(struct ctx *x, const struct ynode *v, void *base, const char *path)
{
	return get_auto_bool(x, v, path, &((struct cpu_config *)base)->thread_labels);
}

static int f_cpu_label(struct ctx *x, const struct ynode *v, void *base, const char *path)
{
	return get_auto_bool(x, v, path, &((struct cpu_config *)base)->cpu_label);
}

static const char *const format_names[] = { "logfmt", "json" };

static int f_log_level(struct ctx *x, const struct ynode *v, void *base, const char *path)
{
	int i;
	int rc;

	if (is_null(v))
		return 0;
	rc = enum_value(x, v, path, level_names, 4, &i);
	if (!rc)
		((struct config *)base)->log_level = (enum pp_log_level)i;
	return rc;
}

static int f_log_format(struct ctx *x, const struct ynode *v, void *base, const char *path)
{
	int i;
	int rc;

	if (is_null(v))
		return 0;
	rc = enum_value(x, v, path, format_names, 2, &i);
	if (!rc)
		((struct config *)base)->log_format = i ? PP_LOG_JSON : PP_LOG_LOGFMT;
	return rc;
}

static int f_http_address(struct ctx *x, const struct ynode *v, void *base, const char *path)
{
	struct config *c = base;
	char *s;
	int rc;

	rc = get_str_opt(x, v, path, &s);
	if (rc <= 0)
		return rc;
	if (!strncmp(s, "dns:", 4) || !strncmp(s, "unix:", 5) ||
	    !strncmp(s, "unix-abstract:", 14) || !strncmp(s, "ipv4:", 5) ||
	    !strncmp(s, "ipv6:", 5) || !strncmp(s, "vsock:", 6)) {
		free(s);
		return errat(x, v, "%s must be host:port (or \"\" to turn the HTTP server off)",
			     path);
	}
	rc = check_address(x, v, path, s);
	if (rc) {
		free(s);
		return rc;
	}
	free(c->http_address);
	c->http_address = s;
	return 0;
}

static int f_remote_address(struct ctx *x, const struct ynode *v, void *base, const char *path)
{
	struct remote_store_config *r = base;
	char *s;
	int rc;

	rc = get_str_opt(x, v, path, &s);
	if (rc <= 0)
		return rc;
	rc = check_address(x, v, path, s);
	if (rc) {
		free(s);
		return rc;
	}
	free(r->address);
	r->address = s;
	return 0;
}

static int check_label_name(struct ctx *x, const struct ynode *k, const char *path, char *name)
{
	char b[64];

	if (!pp_label_name_valid(name))
		return errat(x, k, "%s: %s is not a valid label name ([a-zA-Z_][a-zA-Z0-9_]*)",
			     path, show(k, b, sizeof(b)));
	if (!strncmp(name, "__", 2))
		return errat(x, k, "%s: label names starting with '__' are reserved, got %s", path,
			     show(k, b, sizeof(b)));
	return 0;
}

static int f_external_labels(struct ctx *x, const struct ynode *v, void *base, const char *path)
{
	struct config *c = base;
	int rc = label_map(x, v, path, &c->external_labels, check_label_name);

	if (rc)
		return rc;
	/* An empty value would mean "no such label" to Parca: say so now. */
	for (size_t i = 0; i + 1 < v->n; i += 2) {
		const char *val = pp_labels_get(&c->external_labels, v->kids[i]->s);
		if (val && !*val)
			return errat(x, v->kids[i + 1], "%s.%s: label value is empty", path,
				     v->kids[i]->s);
	}
	return 0;
}

/* gRPC metadata keys: lower-case [0-9a-z_.-]; upper case is folded like grpc-go does. */
static int check_header_name(struct ctx *x, const struct ynode *k, const char *path, char *name)
{
	char b[64];

	for (char *p = name; *p; p++)
		*p = (char)tolower((unsigned char)*p);
	if (!*name)
		return errat(x, k, "%s: empty header name", path);
	for (const char *p = name; *p; p++)
		if (!(isdigit((unsigned char)*p) || (*p >= 'a' && *p <= 'z') || *p == '-' ||
		      *p == '_' || *p == '.'))
			return errat(x, k,
				     "%s: %s is not a valid gRPC metadata key "
				     "(letters, digits, '-', '_', '.')",
				     path, show(k, b, sizeof(b)));
	if (!strncmp(name, "grpc-", 5) || name[0] == ':' || !strcmp(name, "content-type") ||
	    !strcmp(name, "te") || !strcmp(name, "user-agent"))
		return errat(x, k, "%s: %s is reserved by gRPC", path, show(k, b, sizeof(b)));
	/* No secrets in the config by design: check-config prints it. */
	static const char *const secretish[] = { "auth",   "token",   "secret",
						 "passw",  "cookie",  "api-key",
						 "apikey", "api_key", "credential" };
	for (size_t i = 0; i < sizeof(secretish) / sizeof(secretish[0]); i++)
		if (strstr(name, secretish[i]))
			return errat(x, k,
				     "%s: %s looks like a credential; put credentials in "
				     "bearer_token_file, not in the config (the config is printed "
				     "by check-config)",
				     path, show(k, b, sizeof(b)));
	return 0;
}

static int f_headers(struct ctx *x, const struct ynode *v, void *base, const char *path)
{
	struct remote_store_config *r = base;
	int rc = label_map(x, v, path, &r->headers, check_header_name);

	if (rc)
		return rc;
	for (size_t i = 0; i < r->headers.n; i++)
		for (const char *p = r->headers.v[i].value; *p; p++)
			if ((unsigned char)*p < 0x20 || *p == 0x7f)
				return errat(x, v,
					     "%s.%s: header values must not contain control "
					     "characters",
					     path, r->headers.v[i].name);
	return 0;
}

/* A list of at most MAX_LIST_ITEMS `what` ("process ids"): 1, 0 for null
 * (nothing to read), or the error. */
static int want_list(struct ctx *x, const struct ynode *v, const char *path, const char *what)
{
	char b[64];

	if (is_null(v))
		return 0;
	if (v->kind != Y_SEQ)
		return errat(x, v, "%s: expected a list of %s, got %s", path, what,
			     show(v, b, sizeof(b)));
	if (v->n > MAX_LIST_ITEMS)
		return errat(x, v, "%s: more than %u entries", path, MAX_LIST_ITEMS);
	return 1;
}

/* --- targets --------------------------------------------------------- */

struct target_tmp {
	struct target_config *t;
	const struct ynode *cgroup_re, *comm_re, *exe_re;
};

static int f_pids(struct ctx *x, const struct ynode *v, void *base, const char *path)
{
	struct target_config *t = base;
	char sub[200];
	int lr = want_list(x, v, path, "process ids");

	if (lr <= 0)
		return lr;
	if (!v->n)
		return errat(x, v, "%s: empty list (omit the key instead)", path);
	t->pids = calloc(v->n, sizeof(*t->pids));
	if (!t->pids)
		return -ENOMEM;
	for (size_t i = 0; i < v->n; i++) {
		int64_t pid;
		snprintf(sub, sizeof(sub), "%s[%zu]", path, i);
		int rc = get_i64(x, v->kids[i], sub, 1, 4194304 /* PID_MAX_LIMIT */, &pid);
		if (rc)
			return rc;
		t->pids[t->npids++] = (pid_t)pid;
	}
	return 0;
}

static int f_cgroup(struct ctx *x, const struct ynode *v, void *base, const char *path)
{
	struct target_config *t = base;
	int rc;

	if (is_null(v))
		return 0;
	rc = get_str(x, v, path, &t->cgroup);
	if (rc)
		return rc;
	if (t->cgroup[0] != '/') {
		free(t->cgroup);
		t->cgroup = NULL;
		return errat(x, v,
			     "%s must be an absolute cgroup path prefix like "
			     "/kubepods.slice or /system.slice/foo.service",
			     path);
	}
	return 0;
}

#define RE_FN(fname, member, re)                                                             \
	static int fname(struct ctx *x, const struct ynode *v, void *base, const char *path) \
	{                                                                                    \
		struct target_config *t = base;                                              \
		if (is_null(v))                                                              \
			return 0;                                                            \
		return compile_re(x, v, path, &t->member, &t->re);                           \
	}
RE_FN(f_cgroup_regex, cgroup_regex, cgroup_re)
RE_FN(f_comm_regex, comm_regex, comm_re)
RE_FN(f_exe_regex, exe_regex, exe_re)

static const struct field target_fields[] = {
	{ "cgroup", F_CUSTOM, 0, 0, 0, 0, NULL, f_cgroup },
	{ "cgroup_regex", F_CUSTOM, 0, 0, 0, 0, NULL, f_cgroup_regex },
	{ "comm_regex", F_CUSTOM, 0, 0, 0, 0, NULL, f_comm_regex },
	{ "exe_regex", F_CUSTOM, 0, 0, 0, 0, NULL, f_exe_regex },
	{ "pids", F_CUSTOM, 0, 0, 0, 0, NULL, f_pids },
	{ NULL, 0, 0, 0, 0, 0, NULL, NULL },
};

static int f_targets(struct ctx *x, const struct ynode *v, void *base, const char *path)
{
	struct config *c = base;
	char sub[200], b[64];
	int lr = want_list(x, v, path, "target selectors");

	if (lr <= 0)
		return lr;
	if (!v->n)
		return 0;
	c->targets = calloc(v->n, sizeof(*c->targets));
	if (!c->targets)
		return -ENOMEM;
	for (size_t i = 0; i < v->n; i++) {
		const struct ynode *e = v->kids[i];
		struct target_config *t = &c->targets[i];
		snprintf(sub, sizeof(sub), "%s[%zu]", path, i);
		c->ntargets = i + 1; /* so config_free sees partial entries */
		if (e->kind != Y_MAP)
			return errat(x, e,
				     "%s: expected a mapping with cgroup, cgroup_regex, "
				     "comm_regex, exe_regex or pids, got %s",
				     sub, show(e, b, sizeof(b)));
		int rc = walk_map(x, e, sub, target_fields, t);
		if (rc)
			return rc;
		if (!t->cgroup && !t->cgroup_regex && !t->comm_regex && !t->exe_regex && !t->npids)
			return errat(x, e,
				     "%s: empty selector would match every process "
				     "(omit targets to profile the whole host)",
				     sub);
	}
	return 0;
}

/* --- relabel_configs ------------------------------------------------ */

/*
 * The relabel module owns the rules (what the keys mean, which actions
 * exist, what each needs): this only hands it each entry's values as
 * written and puts its verdict at the right FILE:LINE:COL.
 */
static int relabel_unknown_key(struct ctx *x, const struct ynode *k, const char *path)
{
	char b[64], list[200] = "";
	size_t o = 0;

	for (const char *const *kk = relabel_keys; *kk; kk++)
		if (close_enough(k->s, *kk))
			return errat(x, k, "unknown key %s in %s (did you mean '%s'?)",
				     show(k, b, sizeof(b)), path, *kk);
	for (const char *const *kk = relabel_keys; *kk && o < sizeof(list); kk++)
		o += (size_t)snprintf(list + o, sizeof(list) - o, "%s%s", o ? ", " : "", *kk);
	return errat(x, k, "unknown key %s in %s (known keys: %s)", show(k, b, sizeof(b)), path,
		     list);
}

static int relabel_entry(struct ctx *x, const struct ynode *e, const char *sub, struct relabel *rl)
{
	struct relabel_rule_spec sp = { 0 };
	const char *src[64];
	const struct ynode *at[8] = { 0 }; /* value node of relabel_keys[i] */
	char b[64];
	int rc;

	if (e->kind != Y_MAP)
		return errat(x, e, "%s: expected a mapping, got %s", sub, show(e, b, sizeof(b)));
	for (size_t i = 0; i + 1 < e->n; i += 2) {
		const struct ynode *k = e->kids[i], *v = e->kids[i + 1];
		size_t ki = 0;
		rc = check_key(x, e, i, sub);
		if (rc)
			return rc;
		while (relabel_keys[ki] && strcmp(relabel_keys[ki], k->s))
			ki++;
		if (!relabel_keys[ki])
			return relabel_unknown_key(x, k, sub);
		at[ki] = v;
		/* YAML null is the empty value, as Prometheus decodes it */
		if (!strcmp(k->s, "source_labels")) {
			sp.has_source_labels = !is_null(v);
			if (is_null(v))
				continue;
			if (v->kind != Y_SEQ)
				return errat(x, v,
					     "%s.source_labels: expected a list of label names, "
					     "got %s",
					     sub, show(v, b, sizeof(b)));
			if (v->n > 64)
				return errat(x, v, "%s.source_labels: more than 64 labels", sub);
			for (size_t j = 0; j < v->n; j++) {
				if (v->kids[j]->kind != Y_SCALAR)
					return errat(x, v->kids[j],
						     "%s.source_labels[%zu]: expected a "
						     "label name, got %s",
						     sub, j, show(v->kids[j], b, sizeof(b)));
				src[j] = is_null(v->kids[j]) ? "" : v->kids[j]->s;
			}
			sp.source_labels = src;
			sp.nsource_labels = v->n;
			continue;
		}
		if (v->kind != Y_SCALAR)
			return errat(x, v, "%s.%s: expected a string, got %s", sub, k->s,
				     show(v, b, sizeof(b)));
		const char *val = is_null(v) ? "" : v->s;
		if (!strcmp(k->s, "separator"))
			sp.separator = val;
		else if (!strcmp(k->s, "regex"))
			sp.regex = val;
		else if (!strcmp(k->s, "target_label"))
			sp.target_label = val;
		else if (!strcmp(k->s, "replacement"))
			sp.replacement = val;
		else if (!strcmp(k->s, "action"))
			sp.action = val;
		else if (!strcmp(k->s, "modulus") && !is_null(v)) {
			sp.modulus = val;
			sp.modulus_quoted = !v->plain;
		}
	}
	struct pp_err rerr = { 0 };
	struct relabel_fault f;
	rc = relabel_add(rl, &sp, &rerr, &f);
	if (!rc)
		return 0;
	if (rc == -ENOMEM)
		return pp_errf(x->err, rc, "%s: out of memory", sub);
	const struct ynode *n = e;
	for (size_t ki = 0; f.field && relabel_keys[ki]; ki++)
		if (!strcmp(relabel_keys[ki], f.field) && at[ki])
			n = at[ki];
	if (f.field && !strcmp(f.field, "source_labels") && n->kind == Y_SEQ && f.index < n->n)
		return errat(x, n->kids[f.index], "%s.source_labels[%zu]: %s", sub, f.index,
			     rerr.msg);
	if (f.field && n != e)
		return errat(x, n, "%s.%s: %s", sub, f.field, rerr.msg);
	return errat(x, n, "%s: %s", sub, rerr.msg);
}

static int f_relabel(struct ctx *x, const struct ynode *v, void *base, const char *path)
{
	struct config *cfg = base;
	char sub[200];
	int first = 0;
	int lr = want_list(x, v, path, "relabel rules");

	if (lr <= 0)
		return lr;
	if (!cfg->relabel && relabel_new(&cfg->relabel, NULL))
		return -ENOMEM;
	for (size_t i = 0; i < v->n; i++) {
		snprintf(sub, sizeof(sub), "%s[%zu]", path, i);
		int rc = relabel_entry(x, v->kids[i], sub, cfg->relabel);
		if (rc == -ENOMEM)
			return rc;
		if (rc) { /* on to the next rule: every error in one run */
			note_error(x);
			if (!first)
				first = rc;
		}
	}
	return first;
}

/* --- sections -------------------------------------------------------- */

#define OFF(T, m) offsetof(T, m)

static const struct field log_fields[] = {
	{ "level", F_CUSTOM, 0, 0, 0, 0, NULL, f_log_level },
	{ "format", F_CUSTOM, 0, 0, 0, 0, NULL, f_log_format },
	{ NULL, 0, 0, 0, 0, 0, NULL, NULL },
};

#define RS(m) OFF(struct remote_store_config, m)
static const struct field basic_auth_fields[] = {
	{ "username", F_STR, RS(basic_auth_username), 0, 0, 0, NULL, NULL },
	{ "password_file", F_STR, RS(basic_auth_password_file), 0, 0, 0, NULL, NULL },
	{ NULL, 0, 0, 0, 0, 0, NULL, NULL },
};

const struct field remote_fields[] = {
	{ "name", F_CUSTOM, 0, 0, 0, 0, NULL, f_store_name },
	{ "address", F_CUSTOM, 0, 0, 0, 0, NULL, f_remote_address },
	{ "protocol", F_CUSTOM, 0, 0, 0, 0, NULL, f_protocol },
	{ "transport", F_CUSTOM, 0, 0, 0, 0, NULL, f_transport },
	{ "path_prefix", F_STR, RS(path_prefix), 0, 0, 0, NULL, NULL },
	{ "tenant_id", F_STR, RS(tenant_id), 0, 0, 0, NULL, NULL },
	{ "basic_auth", F_MAP, 0, 0, 0, 0, basic_auth_fields, NULL },
	{ "insecure", F_BOOL, RS(insecure), 0, 0, 0, NULL, NULL },
	{ "ca_file", F_STR, RS(ca_file), 0, 0, 0, NULL, NULL },
	{ "cert_file", F_STR, RS(cert_file), 0, 0, 0, NULL, NULL },
	{ "key_file", F_STR, RS(key_file), 0, 0, 0, NULL, NULL },
	{ "server_name", F_STR, RS(server_name), 0, 0, 0, NULL, NULL },
	{ "insecure_skip_verify", F_BOOL, RS(insecure_skip_verify), 0, 0, 0, NULL, NULL },
	{ "bearer_token_file", F_STR, RS(bearer_token_file), 0, 0, 0, NULL, NULL },
	{ "headers", F_CUSTOM, 0, 0, 0, 0, NULL, f_headers },
	{ "timeout", F_DUR, RS(timeout_ns), 1 * NS_PER_MS, 3600 * NS_PER_S, 0, NULL, NULL },
	{ "max_request_bytes", F_SIZE, RS(max_request_bytes), 1 << 10, 1 << 30, 0, NULL, NULL },
	{ "debuginfo_upload", F_BOOL, RS(debuginfo_upload), 0, 0, 0, NULL, NULL },
	{ "debuginfo_max_bytes_per_hour", F_SIZE, RS(debuginfo_max_bytes_per_hour), 1 << 10,
	  INT64_MAX, 0, NULL, NULL },
	{ NULL, 0, 0, 0, 0, 0, NULL, NULL },
};

static int f_directory(struct ctx *x, const struct ynode *v, void *base, const char *path)
{
	struct store_config *st = base;
	char *s;
	int rc;

	rc = get_str_opt(x, v, path, &s);
	if (rc <= 0)
		return rc;
	if (*s && *s != '/') {
		free(s);
		return errat(x, v, "%s must be an absolute path (or \"\" to turn it off)", path);
	}
	free(st->directory);
	st->directory = s;
	return 0;
}

static const struct field store_fields[] = {
	{ "directory", F_CUSTOM, 0, 0, 0, 0, NULL, f_directory },
	{ "max_bytes", F_SIZE, OFF(struct store_config, max_bytes), 4 << 10, INT64_MAX, 0, NULL,
	  NULL },
	{ NULL, 0, 0, 0, 0, 0, NULL, NULL },
};

#define CPU(m) OFF(struct cpu_config, m)
static const struct field cpu_fields[] = {
	{ "enabled", F_BOOL, CPU(enabled), 0, 0, 0, NULL, NULL },
	{ "frequency_hz", F_U32, CPU(frequency_hz), CPU_HZ_MIN, CPU_HZ_MAX, 0, NULL, NULL },
	{ "interval", F_DUR, CPU(interval_ns), 100 * NS_PER_MS, 24 * 3600 * NS_PER_S, 0, NULL,
	  NULL },
	{ "max_stack_depth", F_U32, CPU(max_stack_depth), 1, INT32_MAX, KSTACK, NULL, NULL },
	{ "kernel_stacks", F_BOOL, CPU(kernel_stacks), 0, 0, 0, NULL, NULL },
	{ "thread_labels", F_CUSTOM, 0, 0, 0, 0, NULL, f_thread_labels },
	{ "cpu_label", F_CUSTOM, 0, 0, 0, 0, NULL, f_cpu_label },
	{ NULL, 0, 0, 0, 0, 0, NULL, NULL },
};

#define PR(m) OFF(struct pressure_config, m)
static const struct field pressure_fields[] = {
	{ "enabled", F_BOOL, PR(enabled), 0, 0, 0, NULL, NULL },
	{ "threshold_percent", F_U32, PR(threshold_percent), 1, 100, 0, NULL, NULL },
	{ "cooldown", F_DUR, PR(cooldown_ns), 1 * NS_PER_S, 24 * 3600 * NS_PER_S, Z_OK, NULL,
	  NULL },
	{ "poll_interval", F_DUR, PR(poll_interval_ns), 10 * NS_PER_MS, 60 * NS_PER_S, 0, NULL,
	  NULL },
	{ NULL, 0, 0, 0, 0, 0, NULL, NULL },
};

#define GB(m) OFF(struct go_heap_budget, m)
static const struct field budget_fields[] = {
	{ "max_frames", F_U32, GB(max_frames), 1000, 1000000000, 0, NULL, NULL },
	{ "max_locations", F_U32, GB(max_locations), 100, 100000000, 0, NULL, NULL },
	{ "max_read_bytes", F_SIZE, GB(max_read_bytes), 1 << 20, 1ll << 40, 0, NULL, NULL },
	{ "max_duration", F_DUR, GB(max_duration_ns), 10 * NS_PER_MS, 3600 * NS_PER_S, 0, NULL,
	  NULL },
	{ "backoff", F_DUR, GB(backoff_ns), 1 * NS_PER_S, 24 * 3600 * NS_PER_S, Z_OK, NULL, NULL },
	{ "oom_max_frames", F_U32, GB(oom_max_frames), 1000, 1000000000, 0, NULL, NULL },
	{ NULL, 0, 0, 0, 0, 0, NULL, NULL },
};

#define GH(m) OFF(struct go_heap_config, m)
static const struct field go_heap_fields[] = {
	{ "enabled", F_BOOL, GH(enabled), 0, 0, 0, NULL, NULL },
	{ "interval", F_DUR, GH(interval_ns), 1 * NS_PER_S, 24 * 3600 * NS_PER_S, Z_OK, NULL,
	  NULL },
	{ "on_oom", F_BOOL, GH(on_oom), 0, 0, 0, NULL, NULL },
	{ "max_buckets", F_U32, GH(max_buckets), 1, 10000000, 0, NULL, NULL },
	{ "max_stack_depth", F_U32, GH(max_stack_depth), 1, GO_MAX_STACK, 0, NULL, NULL },
	{ "enable_profiling", F_BOOL, GH(enable_profiling), 0, 0, 0, NULL, NULL },
	{ "pressure", F_MAP, GH(pressure), 0, 0, 0, pressure_fields, NULL },
	{ "budget", F_MAP, GH(budget), 0, 0, 0, budget_fields, NULL },
	{ NULL, 0, 0, 0, 0, 0, NULL, NULL },
};

#define SA(m) OFF(struct snapshot_api_config, m)
static const struct field snapshot_api_fields[] = {
	{ "enabled", F_BOOL, SA(enabled), 0, 0, 0, NULL, NULL },
	{ "bearer_token_file", F_STR, SA(bearer_token_file), 0, 0, 0, NULL, NULL },
	{ "per_pid_interval", F_DUR, SA(per_pid_interval_ns), 0, 24 * 3600 * NS_PER_S, Z_OK, NULL,
	  NULL },
	{ "per_client_per_minute", F_U32, SA(per_client_per_minute), 1, 100000, 0, NULL, NULL },
	{ "per_minute", F_U32, SA(per_minute), 1, 100000, 0, NULL, NULL },
	{ NULL, 0, 0, 0, 0, 0, NULL, NULL },
};

/* auto, none or an absolute file path (nodemeta.h) */
static int f_node_labels(struct ctx *x, const struct ynode *v, void *base, const char *path)
{
	struct config *c = base;
	char *s;
	int rc;

	rc = get_str_opt(x, v, path, &s);
	if (rc <= 0)
		return rc;
	if (strcmp(s, "auto") && strcmp(s, "none") && *s != '/') {
		free(s);
		return errat(x, v,
			     "%s must be auto (the API server, in a pod), none, or an "
			     "absolute path of a file with the node's labels",
			     path);
	}
	free(c->node_labels);
	c->node_labels = s;
	return 0;
}

#define C(m) OFF(struct config, m)
static const struct field metadata_fields[] = {
	{ "cri_socket", F_STR, C(cri_socket), 0, 0, 0, NULL, NULL },
	{ "node_labels", F_CUSTOM, 0, 0, 0, 0, NULL, f_node_labels },
	{ NULL, 0, 0, 0, 0, 0, NULL, NULL },
};
const struct field top_fields[] = {
	{ "node", F_STR, C(node), 0, 0, 0, NULL, NULL },
	{ "log", F_MAP, 0, 0, 0, 0, log_fields, NULL },
	{ "http_address", F_CUSTOM, 0, 0, 0, 0, NULL, f_http_address },
	{ "http_optional", F_BOOL, C(http_optional), 0, 0, 0, NULL, NULL },
	{ "external_labels", F_CUSTOM, 0, 0, 0, 0, NULL, f_external_labels },
	{ "remote_store", F_CUSTOM, 0, 0, 0, 0, NULL, f_remote_store },
	{ "local_store", F_MAP, C(local_store), 0, 0, 0, store_fields, NULL },
	{ "spool", F_MAP, C(spool), 0, 0, 0, store_fields, NULL },
	{ "cpu", F_MAP, C(cpu), 0, 0, 0, cpu_fields, NULL },
	{ "go_heap", F_MAP, C(go_heap), 0, 0, 0, go_heap_fields, NULL },
	{ "snapshot_api", F_MAP, C(snapshot_api), 0, 0, 0, snapshot_api_fields, NULL },
	{ "oom_score_adj", F_INT, C(oom_score_adj), -1000, 1000, 0, NULL, NULL },
	{ "targets", F_CUSTOM, 0, 0, 0, 0, NULL, f_targets },
	{ "relabel_configs", F_CUSTOM, 0, 0, 0, 0, NULL, f_relabel },
	{ "metadata", F_MAP, 0, 0, 0, 0, metadata_fields, NULL },
	{ NULL, 0, 0, 0, 0, 0, NULL, NULL },
};
