/*
 * config.c - strict YAML configuration loader (see config.h).
 *
 * libyaml's event API builds a small tree that keeps the line/column of
 * every node; a table-driven walker then maps it onto struct config so every
 * error can name FILE:LINE:COL. Parsing happens into a scratch struct that
 * replaces *c only when the whole file is valid.
 */
#include "config.h"

#include <ctype.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#define MAX_FILE_BYTES (4u << 20)	/* a config is a few KiB; refuse nonsense */
#define MAX_DEPTH 32			/* schema nests 3 deep; bound recursion */
#define MAX_NODES 100000		/* bounds the tree's memory (~10 MiB) */
#define MAX_MAP_ENTRIES 256		/* external_labels, headers */
#define MAX_LIST_ITEMS 4096		/* targets, pids, relabel_configs */
#define MAX_EXPANDED (64u << 10)	/* one string after ${VAR} expansion */
#define DEFAULT_KERNEL_MAX_STACK 127

#define NS_PER_MS 1000000ull
#define NS_PER_S 1000000000ull

/* ------------------------------------------------------------------ */
/* YAML tree                                                          */

enum ykind { Y_SCALAR, Y_SEQ, Y_MAP };

struct ynode {
	enum ykind kind;
	bool plain;		/* unquoted scalar: may be null, int or bool */
	unsigned line, col;	/* 1-based */
	const char *flag;	/* set by a command-line flag (config_override): no
				 * ${VAR} expansion, errors name the flag */
	char *s;		/* scalar text, NUL-terminated */
	size_t len;
	struct ynode **kids;	/* seq items, or map key,value,key,value... */
	size_t n, cap;
};

static void ynode_free(struct ynode *n)
{
	if (!n)
		return;
	for (size_t i = 0; i < n->n; i++)
		ynode_free(n->kids[i]);
	free(n->kids);
	free(n->s);
	free(n);
}

static int ynode_add(struct ynode *p, struct ynode *k)
{
	if (p->n == p->cap) {
		size_t cap = p->cap ? p->cap * 2 : 8;
		struct ynode **v = realloc(p->kids, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		p->kids = v;
		p->cap = cap;
	}
	p->kids[p->n++] = k;
	return 0;
}

struct builder {
	yaml_parser_t p;
	const char *name;
	const char *buf;
	size_t len;
	size_t nodes;
	struct pp_err *err;
};

/* Start of 1-based line `line` in buf, or NULL. */
static const char *line_start(const char *buf, size_t len, unsigned line)
{
	const char *p = buf, *end = buf + len;

	for (unsigned l = 1; l < line; l++) {
		p = memchr(p, '\n', (size_t)(end - p));
		if (!p)
			return NULL;
		p++;
	}
	return p;
}

static void offset_to_pos(const char *buf, size_t len, size_t off, unsigned *line, unsigned *col)
{
	*line = 1;
	*col = 1;
	for (size_t i = 0; i < off && i < len; i++) {
		if (buf[i] == '\n') {
			(*line)++;
			*col = 1;
		} else {
			(*col)++;
		}
	}
}

static int yaml_problem(struct builder *b)
{
	yaml_parser_t *p = &b->p;
	const char *problem = p->problem ? p->problem : "unknown problem";
	unsigned line, col;
	char ctx[160] = "", hint[80] = "";

	if (p->error == YAML_MEMORY_ERROR)
		return pp_errf(b->err, -ENOMEM, "%s: out of memory while parsing YAML", b->name);
	if (p->error == YAML_READER_ERROR) {
		offset_to_pos(b->buf, b->len, p->problem_offset, &line, &col);
	} else {
		line = (unsigned)p->problem_mark.line + 1;
		col = (unsigned)p->problem_mark.column + 1;
	}
	if (p->context)
		snprintf(ctx, sizeof(ctx), " (%s at %u:%u)", p->context,
			 (unsigned)p->context_mark.line + 1, (unsigned)p->context_mark.column + 1);
	/* libyaml's message for a tab is cryptic; say what it means. */
	const char *ls = line_start(b->buf, b->len, line);
	if (ls) {
		const char *end = b->buf + b->len;
		for (const char *q = ls; q < end && *q != '\n'; q++) {
			if (*q == '\t') {
				snprintf(hint, sizeof(hint), "; tabs are not allowed for indentation in YAML");
				break;
			}
			if (*q != ' ')
				break;
		}
	}
	return pp_errf(b->err, -EINVAL, "%s:%u:%u: invalid YAML: %s%s%s", b->name, line, col,
		       problem, ctx, hint);
}

static int next_event(struct builder *b, yaml_event_t *ev)
{
	if (!yaml_parser_parse(&b->p, ev))
		return yaml_problem(b);
	return 0;
}

static int build_err(struct builder *b, const yaml_mark_t *m, const char *fmt, const char *arg)
{
	char msg[256];

	snprintf(msg, sizeof(msg), fmt, arg);
	return pp_errf(b->err, -EINVAL, "%s:%u:%u: %s", b->name, (unsigned)m->line + 1,
		       (unsigned)m->column + 1, msg);
}

/* Build the node that starts with *ev (consumed here) and all its children. */
static int build(struct builder *b, yaml_event_t *ev, int depth, struct ynode **out)
{
	struct ynode *n = NULL;
	const yaml_char_t *tag = NULL;
	int rc = 0;

	*out = NULL;
	if (depth > MAX_DEPTH) {
		rc = build_err(b, &ev->start_mark, "nesting deeper than %s levels", "32");
		goto out_ev;
	}
	switch (ev->type) {
	case YAML_ALIAS_EVENT:
		rc = build_err(b, &ev->start_mark,
			       "YAML aliases (*%s) are not supported in the config",
			       (const char *)ev->data.alias.anchor);
		goto out_ev;
	case YAML_SCALAR_EVENT:
		tag = ev->data.scalar.tag;
		break;
	case YAML_SEQUENCE_START_EVENT:
		tag = ev->data.sequence_start.tag;
		break;
	case YAML_MAPPING_START_EVENT:
		tag = ev->data.mapping_start.tag;
		break;
	default:
		rc = build_err(b, &ev->start_mark, "unexpected YAML event%s", "");
		goto out_ev;
	}
	if (tag) {
		rc = build_err(b, &ev->start_mark, "YAML tags (%s) are not supported in the config",
			       (const char *)tag);
		goto out_ev;
	}
	if (++b->nodes > MAX_NODES) {
		rc = build_err(b, &ev->start_mark, "more than %s YAML nodes", "100000");
		goto out_ev;
	}
	n = calloc(1, sizeof(*n));
	if (!n) {
		rc = -ENOMEM;
		goto out_ev;
	}
	n->line = (unsigned)ev->start_mark.line + 1;
	n->col = (unsigned)ev->start_mark.column + 1;
	if (ev->type == YAML_SCALAR_EVENT) {
		n->kind = Y_SCALAR;
		n->plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
		n->len = ev->data.scalar.length;
		if (strlen((const char *)ev->data.scalar.value) != n->len) {
			rc = build_err(b, &ev->start_mark, "strings must not contain NUL bytes%s", "");
		} else {
			n->s = strdup((const char *)ev->data.scalar.value);
			rc = n->s ? 0 : -ENOMEM;
		}
		yaml_event_delete(ev);
		if (rc)
			goto out_node;
		*out = n;
		return 0;
	}
	yaml_event_type_t end_type = ev->type == YAML_SEQUENCE_START_EVENT ?
		YAML_SEQUENCE_END_EVENT : YAML_MAPPING_END_EVENT;
	n->kind = ev->type == YAML_SEQUENCE_START_EVENT ? Y_SEQ : Y_MAP;
	yaml_event_delete(ev);
	for (;;) {
		yaml_event_t cev;
		struct ynode *kid;

		rc = next_event(b, &cev);
		if (rc)
			goto out_node;
		if (cev.type == end_type) {
			yaml_event_delete(&cev);
			break;
		}
		rc = build(b, &cev, depth + 1, &kid);
		if (rc)
			goto out_node;
		rc = ynode_add(n, kid);
		if (rc) {
			ynode_free(kid);
			goto out_node;
		}
	}
	*out = n;
	return 0;
out_ev:
	yaml_event_delete(ev);
	return rc;
out_node:
	ynode_free(n);
	return rc;
}

/* Parse the one document in buf; *root stays NULL for an empty stream. */
static int load_tree(const char *buf, size_t len, const char *name, struct pp_err *err,
		     struct ynode **root)
{
	struct builder b = { .name = name, .buf = buf, .len = len, .err = err };
	yaml_event_t ev;
	int rc;

	*root = NULL;
	if (!yaml_parser_initialize(&b.p))
		return pp_errf(err, -ENOMEM, "%s: cannot initialise the YAML parser", name);
	yaml_parser_set_input_string(&b.p, (const unsigned char *)buf, len);
	rc = next_event(&b, &ev);		/* STREAM-START */
	if (rc)
		goto out;
	yaml_event_delete(&ev);
	rc = next_event(&b, &ev);
	if (rc)
		goto out;
	if (ev.type == YAML_STREAM_END_EVENT) {	/* nothing but comments */
		yaml_event_delete(&ev);
		goto out;
	}
	yaml_event_delete(&ev);			/* DOCUMENT-START */
	rc = next_event(&b, &ev);
	if (rc)
		goto out;
	rc = build(&b, &ev, 0, root);
	if (rc)
		goto out;
	rc = next_event(&b, &ev);		/* DOCUMENT-END */
	if (rc)
		goto out;
	yaml_event_delete(&ev);
	rc = next_event(&b, &ev);
	if (rc)
		goto out;
	if (ev.type == YAML_DOCUMENT_START_EVENT)
		rc = build_err(&b, &ev.start_mark,
			       "only one YAML document is allowed in a config file%s", "");
	yaml_event_delete(&ev);
out:
	if (rc) {
		ynode_free(*root);
		*root = NULL;
	}
	yaml_parser_delete(&b.p);
	return rc;
}

/* ------------------------------------------------------------------ */
/* Value helpers                                                      */

struct ctx {
	const char *name;
	struct pp_err *err;
	uint32_t kernel_max_stack;
	/* every error of the schema walk, one per line, so that one run of
	 * check-config shows them all (the walk goes on to the next key) */
	char errs[2048];
	size_t errlen;
	unsigned nerr;
};

/* Keep the error just recorded in x->err as one more of the walk's. */
static void note_error(struct ctx *x)
{
	const char *m = x->err && x->err->msg[0] ? x->err->msg : "invalid value";
	size_t room = sizeof(x->errs) - x->errlen;

	x->nerr++;
	if (room > 1) {
		int n = snprintf(x->errs + x->errlen, room, "%s%s", x->errlen ? "\n" : "", m);
		if (n > 0)
			x->errlen += (size_t)n < room ? (size_t)n : room - 1;
	}
}

__attribute__((format(printf, 3, 4)))
static int errat(struct ctx *x, const struct ynode *n, const char *fmt, ...)
{
	char msg[400];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (n && n->flag)
		return pp_errf(x->err, -EINVAL, "%s: %s", n->flag, msg);
	return pp_errf(x->err, -EINVAL, "%s:%u:%u: %s", x->name, n ? n->line : 1u,
		       n ? n->col : 1u, msg);
}

/* Short printable rendering of a node for messages. */
static const char *show(const struct ynode *n, char *buf, size_t sz)
{
	if (n->kind == Y_MAP)
		return "a mapping";
	if (n->kind == Y_SEQ)
		return "a list";
	size_t o = 0;
	buf[o++] = '\'';
	for (size_t i = 0; i < n->len && o + 8 < sz; i++) {
		unsigned char ch = (unsigned char)n->s[i];
		if (i == 40) {
			o += (size_t)snprintf(buf + o, sz - o, "...");
			break;
		}
		if (ch < 0x20 || ch == 0x7f)
			o += (size_t)snprintf(buf + o, sz - o, "\\x%02x", ch);
		else
			buf[o++] = (char)ch;
	}
	buf[o++] = '\'';
	buf[o] = '\0';
	return buf;
}

static bool is_null(const struct ynode *n)
{
	if (!n)
		return true;
	if (n->kind != Y_SCALAR || !n->plain)
		return false;
	return n->len == 0 || !strcmp(n->s, "~") || !strcmp(n->s, "null") ||
	       !strcmp(n->s, "Null") || !strcmp(n->s, "NULL");
}

static bool utf8_valid(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;

	while (*p) {
		unsigned c = *p, need;
		uint32_t cp;
		if (c < 0x80) {
			p++;
			continue;
		} else if ((c & 0xe0) == 0xc0) {
			need = 1;
			cp = c & 0x1f;
		} else if ((c & 0xf0) == 0xe0) {
			need = 2;
			cp = c & 0x0f;
		} else if ((c & 0xf8) == 0xf0) {
			need = 3;
			cp = c & 0x07;
		} else {
			return false;
		}
		p++;
		for (unsigned i = 0; i < need; i++, p++) {
			if ((*p & 0xc0) != 0x80)
				return false;
			cp = (cp << 6) | (*p & 0x3f);
		}
		if ((need == 1 && cp < 0x80) || (need == 2 && cp < 0x800) ||
		    (need == 3 && cp < 0x10000) || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return false;
	}
	return true;
}

/* Expand ${VAR}, ${VAR:-default} and $$ in s; lone '$' stays. */
static int expand_env(struct ctx *x, const struct ynode *n, const char *path, char **out)
{
	const char *s = n->s;
	size_t cap = n->len + 1, o = 0;
	char *r;

	if (n->flag) {		/* a flag's value is taken as written */
		*out = strdup(s);
		return *out ? 0 : -ENOMEM;
	}
	r = malloc(cap);
	if (!r)
		return -ENOMEM;
#define PUT(src, l)							\
	do {								\
		size_t l_ = (l);					\
		if (o + l_ + 1 > MAX_EXPANDED) {			\
			free(r);					\
			return errat(x, n, "%s is longer than %u bytes after ${VAR} expansion", \
				     path, MAX_EXPANDED);		\
		}							\
		if (o + l_ + 1 > cap) {					\
			while (o + l_ + 1 > cap)			\
				cap *= 2;				\
			char *nr_ = realloc(r, cap);			\
			if (!nr_) {					\
				free(r);				\
				return -ENOMEM;				\
			}						\
			r = nr_;					\
		}							\
		memcpy(r + o, (src), l_);				\
		o += l_;						\
	} while (0)

	for (size_t i = 0; i < n->len;) {
		if (s[i] != '$') {
			PUT(s + i, 1);
			i++;
			continue;
		}
		if (s[i + 1] == '$') {
			PUT("$", 1);
			i += 2;
			continue;
		}
		if (s[i + 1] != '{') {
			PUT("$", 1);
			i++;
			continue;
		}
		const char *close = strchr(s + i + 2, '}');
		if (!close) {
			free(r);
			return errat(x, n, "%s: unterminated '${' (write '$$' for a literal '$')", path);
		}
		const char *name = s + i + 2, *p = name;
		while (p < close && (isalnum((unsigned char)*p) || *p == '_'))
			p++;
		size_t nlen = (size_t)(p - name);
		bool has_def = p + 1 < close && p[0] == ':' && p[1] == '-';
		if (nlen == 0 || isdigit((unsigned char)name[0]) || (p != close && !has_def)) {
			free(r);
			return errat(x, n, "%s: bad variable reference '%.*s' (use ${NAME} or "
				     "${NAME:-default})", path, (int)(close - s - i + 1), s + i);
		}
		char var[256];
		if (nlen >= sizeof(var)) {
			free(r);
			return errat(x, n, "%s: variable name too long", path);
		}
		memcpy(var, name, nlen);
		var[nlen] = '\0';
		const char *val = getenv(var);
		if (has_def && (!val || !*val)) {
			PUT(p + 2, (size_t)(close - (p + 2)));
		} else if (val) {
			PUT(val, strlen(val));
		}
		i = (size_t)(close - s) + 1;
	}
#undef PUT
	r[o] = '\0';
	if (!utf8_valid(r)) {
		free(r);
		return errat(x, n, "%s is not valid UTF-8 after ${VAR} expansion", path);
	}
	*out = r;
	return 0;
}

static bool close_enough(const char *typed, const char *known)
{
	size_t lt = strlen(typed), lk = strlen(known);
	unsigned d = pp_edit_distance(typed, known);
	unsigned maxd = lk <= 4 ? 1 : lk <= 8 ? 2 : 3;

	if (d <= maxd)
		return true;
	/* "frequency" for "frequency_hz", "max_stack" for "max_stack_depth" */
	if (lt >= 4 && lt < lk && !strncasecmp(typed, known, lt))
		return true;
	return false;
}

/* ------------------------------------------------------------------ */
/* Scalars                                                            */

static int want_scalar(struct ctx *x, const struct ynode *n, const char *path, const char *what)
{
	char b[64];

	if (n->kind != Y_SCALAR)
		return errat(x, n, "%s: expected %s, got %s", path, what, show(n, b, sizeof(b)));
	return 0;
}

static int get_i64(struct ctx *x, const struct ynode *n, const char *path, int64_t min,
		   int64_t max, int64_t *out)
{
	char b[64];
	const char *s = n->s;
	bool neg = false;
	uint64_t v = 0;
	int rc = want_scalar(x, n, path, "an integer");

	if (rc)
		return rc;
	if (!n->plain)
		return errat(x, n, "%s: expected an integer, got the quoted string %s", path,
			     show(n, b, sizeof(b)));
	if (*s == '-' || *s == '+')
		neg = *s++ == '-';
	if (!*s)
		return errat(x, n, "%s: expected an integer, got %s", path, show(n, b, sizeof(b)));
	for (; *s; s++) {
		if (!isdigit((unsigned char)*s))
			return errat(x, n, "%s: expected an integer, got %s", path,
				     show(n, b, sizeof(b)));
		if (v > (UINT64_MAX - 9) / 10)
			return errat(x, n, "%s must be between %" PRId64 " and %" PRId64 ", got %s",
				     path, min, max, show(n, b, sizeof(b)));
		v = v * 10 + (uint64_t)(*s - '0');
	}
	if (v > (uint64_t)INT64_MAX)
		return errat(x, n, "%s must be between %" PRId64 " and %" PRId64 ", got %s",
			     path, min, max, show(n, b, sizeof(b)));
	int64_t sv = neg ? -(int64_t)v : (int64_t)v;
	if (sv < min || sv > max)
		return errat(x, n, "%s must be between %" PRId64 " and %" PRId64 ", got %" PRId64,
			     path, min, max, sv);
	*out = sv;
	return 0;
}

static int get_bool(struct ctx *x, const struct ynode *n, const char *path, bool *out)
{
	char b[64];
	int rc = want_scalar(x, n, path, "true or false");

	if (rc)
		return rc;
	if (n->plain && !strcmp(n->s, "true"))
		*out = true;
	else if (n->plain && !strcmp(n->s, "false"))
		*out = false;
	else
		return errat(x, n, "%s: expected true or false, got %s", path, show(n, b, sizeof(b)));
	return 0;
}

/* A string with no ${VAR} expansion (regexes, relabel rules). */
static int get_raw(struct ctx *x, const struct ynode *n, const char *path, char **out)
{
	int rc = want_scalar(x, n, path, "a string");
	char *s;

	if (rc)
		return rc;
	s = strdup(n->s);
	if (!s)
		return -ENOMEM;
	*out = s;
	return 0;
}

static int get_str(struct ctx *x, const struct ynode *n, const char *path, char **out)
{
	int rc = want_scalar(x, n, path, "a string");

	if (rc)
		return rc;
	return expand_env(x, n, path, out);
}

int parse_duration(const char *s, uint64_t *ns)
{
	static const struct { const char *u; uint64_t mult; } units[] = {
		{ "ns", 1 }, { "us", 1000 }, { "\xc2\xb5s", 1000 }, { "ms", NS_PER_MS },
		{ "s", NS_PER_S }, { "m", 60 * NS_PER_S }, { "h", 3600 * NS_PER_S },
	};
	uint64_t total = 0;

	if (!s || !*s)
		return -EINVAL;
	if (!strcmp(s, "0")) {
		*ns = 0;
		return 0;
	}
	while (*s) {
		uint64_t v = 0;
		if (!isdigit((unsigned char)*s))
			return -EINVAL;
		while (isdigit((unsigned char)*s)) {
			if (v > (UINT64_MAX - 9) / 10)
				return -ERANGE;
			v = v * 10 + (uint64_t)(*s++ - '0');
		}
		size_t best = 0;
		uint64_t mult = 0;
		for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
			size_t l = strlen(units[i].u);
			if (!strncmp(s, units[i].u, l) && l > best) {
				best = l;
				mult = units[i].mult;
			}
		}
		if (!best)
			return -EINVAL;
		s += best;
		if (v > (uint64_t)INT64_MAX / mult)
			return -ERANGE;
		if (total > (uint64_t)INT64_MAX - v * mult)
			return -ERANGE;
		total += v * mult;
	}
	*ns = total;
	return 0;
}

int parse_size(const char *s, uint64_t *bytes)
{
	static const struct { const char *u; uint64_t mult; } units[] = {
		{ "", 1 }, { "B", 1 },
		{ "KiB", 1ull << 10 }, { "MiB", 1ull << 20 }, { "GiB", 1ull << 30 },
		{ "TiB", 1ull << 40 },
		{ "KB", 1000ull }, { "MB", 1000000ull }, { "GB", 1000000000ull },
		{ "TB", 1000000000000ull },
	};
	uint64_t v = 0;

	if (!s || !isdigit((unsigned char)*s))
		return -EINVAL;
	while (isdigit((unsigned char)*s)) {
		if (v > (UINT64_MAX - 9) / 10)
			return -ERANGE;
		v = v * 10 + (uint64_t)(*s++ - '0');
	}
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (!strcmp(s, units[i].u)) {
			if (v > (uint64_t)INT64_MAX / units[i].mult)
				return -ERANGE;
			*bytes = v * units[i].mult;
			return 0;
		}
	}
	return -EINVAL;
}

static void fmt_duration(uint64_t ns, char *buf, size_t sz)
{
	static const struct { const char *u; uint64_t mult; } units[] = {
		{ "h", 3600 * NS_PER_S }, { "m", 60 * NS_PER_S }, { "s", NS_PER_S },
		{ "ms", NS_PER_MS }, { "us", 1000 }, { "ns", 1 },
	};
	size_t o = 0;

	if (!ns) {
		snprintf(buf, sz, "0s");
		return;
	}
	buf[0] = '\0';
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]) && o < sz; i++) {
		uint64_t q = ns / units[i].mult;
		if (q) {
			o += (size_t)snprintf(buf + o, sz - o, "%" PRIu64 "%s", q, units[i].u);
			ns -= q * units[i].mult;
		}
	}
}

/* The exact unit with the smallest number: 4MiB, 10GB, 4096 -> 4KiB, 1000 -> 1KB. */
static void fmt_size(uint64_t b, char *buf, size_t sz)
{
	static const struct { const char *u; uint64_t mult; } units[] = {
		{ "TiB", 1ull << 40 }, { "GiB", 1ull << 30 }, { "MiB", 1ull << 20 },
		{ "KiB", 1ull << 10 }, { "TB", 1000000000000ull }, { "GB", 1000000000ull },
		{ "MB", 1000000ull }, { "KB", 1000ull },
	};
	const char *best = "";
	uint64_t q = b;

	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]) && b; i++) {
		if (b % units[i].mult == 0 && b / units[i].mult < q) {
			q = b / units[i].mult;
			best = units[i].u;
		}
	}
	snprintf(buf, sz, "%" PRIu64 "%s", q, best);
}

/* ------------------------------------------------------------------ */
/* Schema                                                             */

enum ftype { F_BOOL, F_U32, F_INT, F_DUR, F_SIZE, F_STR, F_MAP, F_CUSTOM };

#define Z_OK 1u		/* duration/size: 0 is allowed besides min..max */
#define KSTACK 2u	/* max is the kernel's perf_event_max_stack */

struct field;
typedef int (*custom_fn)(struct ctx *x, const struct ynode *v, void *base, const char *path);

struct field {
	const char *key;
	enum ftype type;
	size_t off;
	int64_t min, max;
	unsigned flags;
	const struct field *sub;	/* F_MAP */
	custom_fn fn;			/* F_CUSTOM, also F_MAP post-check */
};

#define FIELD_AT(base, off, T) ((T *)((char *)(base) + (off)))

static int walk_map(struct ctx *x, const struct ynode *n, const char *path,
		    const struct field *fields, void *base);

static void join(char *out, size_t sz, const char *path, const char *key)
{
	if (path && *path)
		snprintf(out, sz, "%s.%s", path, key);
	else
		snprintf(out, sz, "%s", key);
}

static int apply(struct ctx *x, const struct field *f, const struct ynode *v, void *base,
		 const char *path)
{
	char b[64], lim1[32], lim2[32];
	int64_t i;
	uint64_t u;
	int rc;

	if (f->type != F_MAP && f->type != F_CUSTOM && is_null(v))
		return 0;	/* "key:" with no value keeps the default */
	switch (f->type) {
	case F_BOOL:
		return get_bool(x, v, path, FIELD_AT(base, f->off, bool));
	case F_U32:
	case F_INT: {
		int64_t max = f->max;
		if ((f->flags & KSTACK) && x->kernel_max_stack < max)
			max = x->kernel_max_stack;
		if (f->flags & KSTACK) {
			rc = get_i64(x, v, path, f->min, INT32_MAX, &i);
			if (rc)
				return rc;
			if (i < f->min || i > max)
				return errat(x, v, "%s must be between %" PRId64 " and %" PRId64
					     " (the kernel limit kernel.perf_event_max_stack is %u), "
					     "got %" PRId64, path, f->min, max,
					     x->kernel_max_stack, i);
		} else {
			rc = get_i64(x, v, path, f->min, max, &i);
			if (rc)
				return rc;
		}
		if (f->type == F_U32)
			*FIELD_AT(base, f->off, uint32_t) = (uint32_t)i;
		else
			*FIELD_AT(base, f->off, int) = (int)i;
		return 0;
	}
	case F_DUR:
	case F_SIZE: {
		bool dur = f->type == F_DUR;
		rc = want_scalar(x, v, path, dur ? "a duration" : "a size");
		if (rc)
			return rc;
		rc = dur ? parse_duration(v->s, &u) : parse_size(v->s, &u);
		if (rc == -ERANGE)
			return errat(x, v, "%s: %s %s is too large", path, dur ? "duration" : "size",
				     show(v, b, sizeof(b)));
		if (rc)
			return errat(x, v, dur ?
				     "%s: bad duration %s (use e.g. 500ms, 10s, 1m30s, 1h)" :
				     "%s: bad size %s (use e.g. 4096, 64KiB, 256MiB, 1GiB, 10MB)",
				     path, show(v, b, sizeof(b)));
		if (!(u == 0 && (f->flags & Z_OK)) &&
		    (u < (uint64_t)f->min || u > (uint64_t)f->max)) {
			if (dur) {
				fmt_duration((uint64_t)f->min, lim1, sizeof(lim1));
				fmt_duration((uint64_t)f->max, lim2, sizeof(lim2));
			} else {
				fmt_size((uint64_t)f->min, lim1, sizeof(lim1));
				fmt_size((uint64_t)f->max, lim2, sizeof(lim2));
			}
			return errat(x, v, "%s must be between %s and %s%s, got %s", path, lim1, lim2,
				     (f->flags & Z_OK) ? " (or 0 to turn it off)" : "",
				     show(v, b, sizeof(b)));
		}
		*FIELD_AT(base, f->off, uint64_t) = u;
		return 0;
	}
	case F_STR: {
		char *s, **dst = FIELD_AT(base, f->off, char *);
		rc = get_str(x, v, path, &s);
		if (rc)
			return rc;
		free(*dst);
		*dst = s;
		return 0;
	}
	case F_MAP: {
		rc = walk_map(x, v, path, f->sub, FIELD_AT(base, f->off, void));
		if (rc || !f->fn)
			return rc;
		/* post-check: the map node, base of the section */
		return f->fn(x, v, FIELD_AT(base, f->off, void), path);
	}
	case F_CUSTOM:
		return f->fn(x, v, base, path);
	}
	return -EINVAL;
}

static int unknown_key(struct ctx *x, const struct ynode *k, const char *path,
		       const struct field *fields)
{
	const char *best = NULL;
	unsigned bestd = UINT_MAX;
	char b[64];

	for (const struct field *f = fields; f->key; f++) {
		if (!close_enough(k->s, f->key))
			continue;
		unsigned d = pp_edit_distance(k->s, f->key);
		if (d < bestd) {
			bestd = d;
			best = f->key;
		}
	}
	char where[160];
	if (path && *path)
		snprintf(where, sizeof(where), "in %s", path);
	else
		snprintf(where, sizeof(where), "at top level");
	if (best)
		return errat(x, k, "unknown key %s %s (did you mean '%s'?)", show(k, b, sizeof(b)),
			     where, best);
	if (!path || !*path) {
		/* A section's key written at top level: "frequency_hz: 19". */
		char places[200];
		size_t o = 0;
		places[0] = '\0';
		for (const struct field *f = fields; f->key; f++) {
			if (f->type != F_MAP || f->sub == NULL)
				continue;
			for (const struct field *g = f->sub; g->key; g++)
				if (!strcmp(g->key, k->s) && o < sizeof(places))
					o += (size_t)snprintf(places + o, sizeof(places) - o, "%s%s.%s",
							      o ? " or " : "", f->key, g->key);
		}
		if (o)
			return errat(x, k, "unknown key %s at top level (did you mean %s?)",
				     show(k, b, sizeof(b)), places);
	}
	size_t o = 0;
	char list[256];
	list[0] = '\0';
	for (const struct field *f = fields; f->key && o < sizeof(list); f++)
		o += (size_t)snprintf(list + o, sizeof(list) - o, "%s%s", o ? ", " : "", f->key);
	return errat(x, k, "unknown key %s %s (known keys: %s)", show(k, b, sizeof(b)), where, list);
}

static int want_map(struct ctx *x, const struct ynode *n, const char *path)
{
	char b[64];

	if (n->kind != Y_MAP)
		return errat(x, n, "%s: expected a mapping, got %s", path && *path ? path : "config",
			     show(n, b, sizeof(b)));
	return 0;
}

/* Keys must be scalars; return the first earlier equal key, if any. */
static int check_key(struct ctx *x, const struct ynode *map, size_t i, const char *path)
{
	const struct ynode *k = map->kids[i];
	char b[64];

	if (k->kind != Y_SCALAR)
		return errat(x, k, "%s: keys must be strings, got %s", *path ? path : "config",
			     show(k, b, sizeof(b)));
	for (size_t j = 0; j < i; j += 2) {
		const struct ynode *p = map->kids[j];
		if (p->kind == Y_SCALAR && !strcmp(p->s, k->s))
			return errat(x, k, "duplicate key %s %s%s (first at line %u, column %u)",
				     show(k, b, sizeof(b)), *path ? "in " : "at top level",
				     path, p->line, p->col);
	}
	return 0;
}

static int walk_map(struct ctx *x, const struct ynode *n, const char *path,
		    const struct field *fields, void *base)
{
	char sub[200];
	int rc;

	if (is_null(n))
		return 0;
	rc = want_map(x, n, path);
	if (rc)
		return rc;
	int first = 0;
	for (size_t i = 0; i + 1 < n->n; i += 2) {
		const struct ynode *k = n->kids[i], *v = n->kids[i + 1];
		const struct field *f;
		unsigned before = x->nerr;

		rc = check_key(x, n, i, path);
		if (!rc) {
			for (f = fields; f->key; f++)
				if (!strcmp(f->key, k->s))
					break;
			if (!f->key) {
				rc = unknown_key(x, k, path, fields);
			} else {
				join(sub, sizeof(sub), path, f->key);
				rc = apply(x, f, v, base, sub);
			}
		}
		if (!rc)
			continue;
		if (rc == -ENOMEM)
			return rc;
		/* on to the next key: every error in one run */
		if (x->nerr == before)	/* a nested walk kept its own */
			note_error(x);
		if (!first)
			first = rc;
	}
	return first;
}

/* --- custom fields --------------------------------------------------- */

static int enum_value(struct ctx *x, const struct ynode *v, const char *path,
		      const char *const *names, size_t nnames, int *out)
{
	char b[64], list[128] = "";
	size_t o = 0;
	int rc = want_scalar(x, v, path, "a string");

	if (rc)
		return rc;
	for (size_t i = 0; i < nnames; i++) {
		if (!strcmp(v->s, names[i])) {
			*out = (int)i;
			return 0;
		}
		o += (size_t)snprintf(list + o, sizeof(list) - o, "%s%s", i ? ", " : "", names[i]);
	}
	for (size_t i = 0; i < nnames; i++)
		if (close_enough(v->s, names[i]))
			return errat(x, v, "%s: unknown value %s (did you mean '%s'?)", path,
				     show(v, b, sizeof(b)), names[i]);
	return errat(x, v, "%s: unknown value %s (one of: %s)", path, show(v, b, sizeof(b)), list);
}

static const char *const level_names[] = { "debug", "info", "warn", "error" };
static const char *const protocol_names[] = { "parca", "pyroscope" };
static const char *const transport_names[] = { "grpc", "http" };

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

/* true, false or auto (-1) */
static int f_thread_labels(struct ctx *x, const struct ynode *v, void *base, const char *path)
{
	int *out = &((struct cpu_config *)base)->thread_labels;

	if (is_null(v))
		return 0;
	if (v->kind == Y_SCALAR && !strcmp(v->s, "auto")) {
		*out = -1;
		return 0;
	}
	bool b;
	int rc = get_bool(x, v, path, &b);
	if (!rc)
		*out = b;
	return rc;
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

/* host:port, [v6]:port, or a gRPC target URI (dns:, unix:, ipv4:, ipv6:). */
static int check_address(struct ctx *x, const struct ynode *v, const char *path, const char *a)
{
	static const char *const schemes[] = { "dns:", "unix:", "unix-abstract:", "ipv4:",
					       "ipv6:", "vsock:" };
	const char *colon;
	char b[64];

	if (!*a || !strncmp(a, "http://", 7) || !strncmp(a, "https://", 8))
		return 0;	/* a URL: checked by url_address() */
	for (size_t i = 0; i < sizeof(schemes) / sizeof(schemes[0]); i++)
		if (!strncmp(a, schemes[i], strlen(schemes[i])) && a[strlen(schemes[i])])
			return 0;
	colon = strrchr(a, ':');
	if (!colon || colon == a || (a[0] == '[' && colon[-1] != ']'))
		goto bad;
	if (!colon[1])
		goto bad;
	long port = 0;
	for (const char *p = colon + 1; *p; p++) {
		if (!isdigit((unsigned char)*p) || port > 65535)
			goto bad;
		port = port * 10 + (*p - '0');
	}
	if (port < 1 || port > 65535)
		goto bad;
	for (const char *p = a; p < colon; p++)
		if (isspace((unsigned char)*p) || *p == '/')
			goto bad;
	return 0;
bad:
	return errat(x, v, "%s: %s is not host:port (port 1..65535)", path, show(v, b, sizeof(b)));
}

static int f_http_address(struct ctx *x, const struct ynode *v, void *base, const char *path)
{
	struct config *c = base;
	char *s;
	int rc;

	if (is_null(v))
		return 0;
	rc = get_str(x, v, path, &s);
	if (rc)
		return rc;
	if (!strncmp(s, "dns:", 4) || !strncmp(s, "unix:", 5) || !strncmp(s, "unix-abstract:", 14) ||
	    !strncmp(s, "ipv4:", 5) || !strncmp(s, "ipv6:", 5) || !strncmp(s, "vsock:", 6)) {
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

bool config_address_is_loopback(const char *address)
{
	char host[256];
	const char *colon;

	if (!address || !*address)
		return false;
	if (address[0] == '[') {	/* [v6]:port */
		const char *e = strchr(address, ']');
		if (!e || (size_t)(e - address - 1) >= sizeof(host))
			return false;
		memcpy(host, address + 1, (size_t)(e - address - 1));
		host[e - address - 1] = '\0';
	} else {
		colon = strrchr(address, ':');
		size_t n = colon ? (size_t)(colon - address) : strlen(address);
		if (n >= sizeof(host))
			return false;
		memcpy(host, address, n);
		host[n] = '\0';
	}
	if (!strcmp(host, "localhost") || !strcmp(host, "::1"))
		return true;
	struct in_addr a4;
	return inet_pton(AF_INET, host, &a4) == 1 && (ntohl(a4.s_addr) >> 24) == 127;
}

static int f_remote_address(struct ctx *x, const struct ynode *v, void *base, const char *path)
{
	struct remote_store_config *r = base;
	char *s;
	int rc;

	if (is_null(v))
		return 0;
	rc = get_str(x, v, path, &s);
	if (rc)
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

typedef int (*labelcheck_fn)(struct ctx *x, const struct ynode *k, const char *path, char *name);

static int label_map(struct ctx *x, const struct ynode *v, const char *path,
		     struct pp_labels *dst, labelcheck_fn check)
{
	char b[64], sub[200];
	int rc;

	if (is_null(v))
		return 0;
	rc = want_map(x, v, path);
	if (rc)
		return rc;
	if (v->n / 2 > MAX_MAP_ENTRIES)
		return errat(x, v, "%s: more than %u entries", path, MAX_MAP_ENTRIES);
	for (size_t i = 0; i + 1 < v->n; i += 2) {
		const struct ynode *k = v->kids[i], *val = v->kids[i + 1];
		char *name, *value = NULL;

		rc = check_key(x, v, i, path);
		if (rc)
			return rc;
		name = strdup(k->s);
		if (!name)
			return -ENOMEM;
		rc = check(x, k, path, name);
		if (rc) {
			free(name);
			return rc;
		}
		if (pp_labels_get(dst, name)) {
			free(name);
			return errat(x, k, "duplicate key %s in %s", show(k, b, sizeof(b)), path);
		}
		join(sub, sizeof(sub), path, name);
		if (is_null(val)) {
			value = strdup("");
			rc = value ? 0 : -ENOMEM;
		} else {
			rc = get_str(x, val, sub, &value);
		}
		if (!rc)
			rc = pp_labels_set(dst, name, value);
		free(name);
		free(value);
		if (rc)
			return rc;
	}
	return 0;
}

static int check_label_name(struct ctx *x, const struct ynode *k, const char *path, char *name)
{
	char b[64];

	if (!pp_label_name_valid(name))
		return errat(x, k, "%s: %s is not a valid label name ([a-zA-Z_][a-zA-Z0-9_]*)",
			     path, show(k, b, sizeof(b)));
	if (!strncmp(name, "__", 2))
		return errat(x, k, "%s: label names starting with '__' are reserved, got %s",
			     path, show(k, b, sizeof(b)));
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
			return errat(x, k, "%s: %s is not a valid gRPC metadata key "
				     "(letters, digits, '-', '_', '.')", path, show(k, b, sizeof(b)));
	if (!strncmp(name, "grpc-", 5) || name[0] == ':' || !strcmp(name, "content-type") ||
	    !strcmp(name, "te") || !strcmp(name, "user-agent"))
		return errat(x, k, "%s: %s is reserved by gRPC", path, show(k, b, sizeof(b)));
	/* No secrets in the config by design: check-config prints it. */
	static const char *const secretish[] = { "auth", "token", "secret", "passw", "cookie",
						 "api-key", "apikey", "api_key", "credential" };
	for (size_t i = 0; i < sizeof(secretish) / sizeof(secretish[0]); i++)
		if (strstr(name, secretish[i]))
			return errat(x, k, "%s: %s looks like a credential; put credentials in "
				     "bearer_token_file, not in the config (the config is printed "
				     "by check-config)", path, show(k, b, sizeof(b)));
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
				return errat(x, v, "%s.%s: header values must not contain control "
					     "characters", path, r->headers.v[i].name);
	return 0;
}

/* --- targets --------------------------------------------------------- */

/* targets regexes: RE2 syntax, searched anywhere in the string (ppregex.h) */
static int compile_re(struct ctx *x, const struct ynode *v, const char *path, char **src,
		      struct pp_regex **re)
{
	char *s, why[256];
	int rc = get_raw(x, v, path, &s);

	if (rc)
		return rc;
	rc = pp_regex_compile(re, s, 0, why, sizeof(why));
	if (rc) {
		free(s);
		if (rc == -ENOMEM)
			return rc;
		return errat(x, v, "%s: invalid regular expression: %s", path, why);
	}
	*src = s;
	return 0;
}

struct target_tmp {
	struct target_config *t;
	const struct ynode *cgroup_re, *comm_re, *exe_re;
};

static int f_pids(struct ctx *x, const struct ynode *v, void *base, const char *path)
{
	struct target_config *t = base;
	char sub[200], b[64];

	if (is_null(v))
		return 0;
	if (v->kind != Y_SEQ)
		return errat(x, v, "%s: expected a list of process ids, got %s", path,
			     show(v, b, sizeof(b)));
	if (v->n > MAX_LIST_ITEMS)
		return errat(x, v, "%s: more than %u entries", path, MAX_LIST_ITEMS);
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
		return errat(x, v, "%s must be an absolute cgroup path prefix like "
			     "/kubepods.slice or /system.slice/foo.service", path);
	}
	return 0;
}

#define RE_FN(fname, member, re)						\
	static int fname(struct ctx *x, const struct ynode *v, void *base, const char *path) \
	{									\
		struct target_config *t = base;					\
		if (is_null(v))							\
			return 0;						\
		return compile_re(x, v, path, &t->member, &t->re);	\
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

static int f_targets(struct ctx *x, const struct ynode *v, void *base, const char *path)
{
	struct config *c = base;
	char sub[200], b[64];

	if (is_null(v))
		return 0;
	if (v->kind != Y_SEQ)
		return errat(x, v, "%s: expected a list of target selectors, got %s", path,
			     show(v, b, sizeof(b)));
	if (v->n > MAX_LIST_ITEMS)
		return errat(x, v, "%s: more than %u entries", path, MAX_LIST_ITEMS);
	if (!v->n)
		return 0;
	c->targets = calloc(v->n, sizeof(*c->targets));
	if (!c->targets)
		return -ENOMEM;
	for (size_t i = 0; i < v->n; i++) {
		const struct ynode *e = v->kids[i];
		struct target_config *t = &c->targets[i];
		snprintf(sub, sizeof(sub), "%s[%zu]", path, i);
		c->ntargets = i + 1;	/* so config_free sees partial entries */
		if (e->kind != Y_MAP)
			return errat(x, e, "%s: expected a mapping with cgroup, cgroup_regex, "
				     "comm_regex, exe_regex or pids, got %s", sub,
				     show(e, b, sizeof(b)));
		int rc = walk_map(x, e, sub, target_fields, t);
		if (rc)
			return rc;
		if (!t->cgroup && !t->cgroup_regex && !t->comm_regex && !t->exe_regex && !t->npids)
			return errat(x, e, "%s: empty selector would match every process "
				     "(omit targets to profile the whole host)", sub);
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

static int relabel_entry(struct ctx *x, const struct ynode *e, const char *sub,
			 struct relabel *rl)
{
	struct relabel_rule_spec sp = { 0 };
	const char *src[64];
	const struct ynode *at[8] = { 0 };	/* value node of relabel_keys[i] */
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
				return errat(x, v, "%s.source_labels: expected a list of label names, "
					     "got %s", sub, show(v, b, sizeof(b)));
			if (v->n > 64)
				return errat(x, v, "%s.source_labels: more than 64 labels", sub);
			for (size_t j = 0; j < v->n; j++) {
				if (v->kids[j]->kind != Y_SCALAR)
					return errat(x, v->kids[j], "%s.source_labels[%zu]: expected a "
						     "label name, got %s", sub, j,
						     show(v->kids[j], b, sizeof(b)));
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
	char sub[200], b[64];
	int first = 0;

	if (is_null(v))
		return 0;
	if (v->kind != Y_SEQ)
		return errat(x, v, "%s: expected a list of relabel rules, got %s", path,
			     show(v, b, sizeof(b)));
	if (v->n > MAX_LIST_ITEMS)
		return errat(x, v, "%s: more than %u entries", path, MAX_LIST_ITEMS);
	if (!cfg->relabel && !(cfg->relabel = relabel_new()))
		return -ENOMEM;
	for (size_t i = 0; i < v->n; i++) {
		snprintf(sub, sizeof(sub), "%s[%zu]", path, i);
		int rc = relabel_entry(x, v->kids[i], sub, cfg->relabel);
		if (rc == -ENOMEM)
			return rc;
		if (rc) {	/* on to the next rule: every error in one run */
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

/* Value node of key in map v, or v itself (for a position) when absent. */
static const struct ynode *map_get(const struct ynode *v, const char *key)
{
	if (v->kind == Y_MAP)
		for (size_t i = 0; i + 1 < v->n; i += 2)
			if (v->kids[i]->kind == Y_SCALAR && !strcmp(v->kids[i]->s, key))
				return v->kids[i];
	return v;
}

/* Value node of key in map v, NULL when v is not a map or lacks key. */
static const struct ynode *map_val(const struct ynode *v, const char *key)
{
	if (v && v->kind == Y_MAP)
		for (size_t i = 0; i + 1 < v->n; i += 2)
			if (v->kids[i]->kind == Y_SCALAR && !strcmp(v->kids[i]->s, key))
				return v->kids[i + 1];
	return NULL;
}

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
		return 0;	/* (before anything looks past the scheme) */
	const char *hp = r->address + (tls ? 8 : 7);
	size_t hl = strcspn(hp, "/?#");
	const char *rest = hp + hl;
	const struct ynode *at = map_val(v, "address") ? map_val(v, "address") : v;
	if (r->protocol != STORE_PYROSCOPE)
		return errat(x, at, "%s.address: a URL is for protocol: pyroscope (Connect over "
			     "HTTP); Parca is reached over gRPC at host:port", path);
	if (r->insecure && tls && map_val(v, "insecure") && r->insecure)
		return errat(x, map_get(v, "insecure"), "%s: insecure: true contradicts the "
			     "https:// address", path);
	if (strpbrk(rest, "?#"))
		return errat(x, at, "%s.address: a URL without query or fragment", path);
	if (*r->path_prefix && rest[0] && rest[1])
		return errat(x, map_get(v, "path_prefix"), "%s: the address URL has a path and "
			     "path_prefix is set too; use one", path);
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
		return errat(x, map_get(v, "address"), "%s.address: transport: http needs "
			     "host:port or a URL", path);
	if (r->http && (!strncmp(r->address, "dns:", 4) || !strncmp(r->address, "unix", 4) ||
			!strncmp(r->address, "ipv", 3) || !strncmp(r->address, "vsock:", 6)))
		return errat(x, map_get(v, "address"), "%s.address: gRPC name schemes (dns:, "
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
		return errat(x, map_get(v, "transport"), "%s.transport: http is for protocol: "
			     "pyroscope (Parca is reached over gRPC)", path);
	if (*r->path_prefix && (!r->http || r->path_prefix[0] != '/' ||
				strpbrk(r->path_prefix, " ?#\\\"") ||
				r->path_prefix[strlen(r->path_prefix) - 1] == '/'))
		return errat(x, map_get(v, "path_prefix"), "%s.path_prefix: a URL path such as "
			     "/pyroscope (starts with '/', no trailing '/'), with transport: http "
			     "only", path);
	if (*r->basic_auth_username && *r->bearer_token_file)
		return errat(x, map_get(v, "basic_auth"),
			     "%s: basic_auth and bearer_token_file both set the Authorization "
			     "header; use one", path);
	if (!*r->basic_auth_username && *r->basic_auth_password_file)
		return errat(x, map_get(v, "basic_auth"),
			     "%s.basic_auth: password_file without a username", path);
	if (r->insecure && (*r->ca_file || *r->cert_file || r->insecure_skip_verify))
		return errat(x, map_get(v, "insecure"),
			     "%s: insecure: true (plaintext) cannot be combined with "
			     "ca_file, cert_file or insecure_skip_verify", path);
	return 0;
}

#define RS(m) OFF(struct remote_store_config, m)
static const struct field basic_auth_fields[] = {
	{ "username", F_STR, RS(basic_auth_username), 0, 0, 0, NULL, NULL },
	{ "password_file", F_STR, RS(basic_auth_password_file), 0, 0, 0, NULL, NULL },
	{ NULL, 0, 0, 0, 0, 0, NULL, NULL },
};
static const struct field remote_fields[] = {
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

	if (is_null(v))
		return 0;
	rc = get_str(x, v, path, &s);
	if (rc)
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
	{ "frequency_hz", F_U32, CPU(frequency_hz), 1, 1000, 0, NULL, NULL },
	{ "interval", F_DUR, CPU(interval_ns), 100 * NS_PER_MS, 24 * 3600 * NS_PER_S, 0, NULL,
	  NULL },
	{ "max_stack_depth", F_U32, CPU(max_stack_depth), 1, INT32_MAX, KSTACK, NULL, NULL },
	{ "kernel_stacks", F_BOOL, CPU(kernel_stacks), 0, 0, 0, NULL, NULL },
	{ "thread_labels", F_CUSTOM, 0, 0, 0, 0, NULL, f_thread_labels },
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
	{ "backoff", F_DUR, GB(backoff_ns), 1 * NS_PER_S, 24 * 3600 * NS_PER_S, Z_OK, NULL,
	  NULL },
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
	{ "max_stack_depth", F_U32, GH(max_stack_depth), 1, 1024, 0, NULL, NULL },
	{ "enable_profiling", F_BOOL, GH(enable_profiling), 0, 0, 0, NULL, NULL },
	{ "pressure", F_MAP, GH(pressure), 0, 0, 0, pressure_fields, NULL },
	{ "budget", F_MAP, GH(budget), 0, 0, 0, budget_fields, NULL },
	{ NULL, 0, 0, 0, 0, 0, NULL, NULL },
};

#define SA(m) OFF(struct snapshot_api_config, m)
static const struct field snapshot_api_fields[] = {
	{ "enabled", F_BOOL, SA(enabled), 0, 0, 0, NULL, NULL },
	{ "bearer_token_file", F_STR, SA(bearer_token_file), 0, 0, 0, NULL, NULL },
	{ "per_pid_interval", F_DUR, SA(per_pid_interval_ns), 0, 24 * 3600 * NS_PER_S, Z_OK,
	  NULL, NULL },
	{ "per_client_per_minute", F_U32, SA(per_client_per_minute), 1, 100000, 0, NULL, NULL },
	{ "per_minute", F_U32, SA(per_minute), 1, 100000, 0, NULL, NULL },
	{ NULL, 0, 0, 0, 0, 0, NULL, NULL },
};

#define C(m) OFF(struct config, m)
static const struct field metadata_fields[] = {
	{ "cri_socket", F_STR, C(cri_socket), 0, 0, 0, NULL, NULL },
	{ NULL, 0, 0, 0, 0, 0, NULL, NULL },
};
static const struct field top_fields[] = {
	{ "node", F_STR, C(node), 0, 0, 0, NULL, NULL },
	{ "log", F_MAP, 0, 0, 0, 0, log_fields, NULL },
	{ "http_address", F_CUSTOM, 0, 0, 0, 0, NULL, f_http_address },
	{ "http_optional", F_BOOL, C(http_optional), 0, 0, 0, NULL, NULL },
	{ "external_labels", F_CUSTOM, 0, 0, 0, 0, NULL, f_external_labels },
	{ "remote_store", F_MAP, C(remote_store), 0, 0, 0, remote_fields, remote_post },
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

/* ------------------------------------------------------------------ */
/* Public API                                                         */

static uint32_t kernel_max_stack(void)
{
	char buf[32];
	ssize_t n;
	int fd = open("/proc/sys/kernel/perf_event_max_stack", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return DEFAULT_KERNEL_MAX_STACK;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return DEFAULT_KERNEL_MAX_STACK;
	buf[n] = '\0';
	char *end;
	unsigned long v = strtoul(buf, &end, 10);
	if (end == buf || v < 1 || v > 65535)
		return DEFAULT_KERNEL_MAX_STACK;
	return (uint32_t)v;
}

static int resolve_node(struct config *c, struct pp_err *err);

int config_defaults(struct config *c, struct pp_err *err)
{
	memset(c, 0, sizeof(*c));
	c->log_level = PP_INFO;
	c->log_format = PP_LOG_LOGFMT;
	c->oom_score_adj = -1000;
	c->remote_store.timeout_ns = 10 * NS_PER_S;
	c->remote_store.max_request_bytes = 4u << 20;
	c->remote_store.debuginfo_upload = true;
	c->remote_store.debuginfo_max_bytes_per_hour = 1ull << 30;
	c->local_store.max_bytes = 1ull << 30;
	c->spool.max_bytes = 256ull << 20;
	c->cpu.enabled = true;
	c->cpu.frequency_hz = 19;
	c->cpu.interval_ns = 10 * NS_PER_S;
	c->cpu.max_stack_depth = 127;
	c->cpu.kernel_stacks = true;
	c->cpu.thread_labels = -1;
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

	struct { char **dst; const char *val; } strs[] = {
		{ &c->path, "" }, { &c->node, "" }, { &c->http_address, "127.0.0.1:7071" },
		{ &c->remote_store.address, "" }, { &c->remote_store.ca_file, "" },
		{ &c->remote_store.cert_file, "" }, { &c->remote_store.key_file, "" },
		{ &c->remote_store.server_name, "" }, { &c->remote_store.bearer_token_file, "" },
		{ &c->remote_store.tenant_id, "" }, { &c->remote_store.basic_auth_username, "" },
		{ &c->remote_store.path_prefix, "" },
		{ &c->remote_store.basic_auth_password_file, "" },
		{ &c->local_store.directory, "" },
		{ &c->spool.directory, "/var/lib/pushprof/spool" },
		{ &c->cri_socket, "" }, { &c->snapshot_api.bearer_token_file, "" },
	};
	for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++) {
		*strs[i].dst = strdup(strs[i].val);
		if (!*strs[i].dst) {
			config_free(c);
			return pp_errf(err, -ENOMEM, "config: out of memory");
		}
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
		return pp_errf(err, -errno, "%s: node is empty and gethostname failed: %s",
			       c->path, strerror(errno));
	host[sizeof(host) - 1] = '\0';
	char *h = strdup(host);
	if (!h)
		return pp_errf(err, -ENOMEM, "config: out of memory");
	free(c->node);
	c->node = h;
	return 0;
}

static struct ynode *ynode_new(enum ykind kind, const char *text, bool plain, const char *flag)
{
	struct ynode *n = calloc(1, sizeof(*n));

	if (!n)
		return NULL;
	n->kind = kind;
	n->plain = plain;
	n->flag = flag;
	if (text) {
		n->s = strdup(text);
		n->len = strlen(text);
		if (!n->s) {
			free(n);
			return NULL;
		}
	}
	return n;
}

/*
 * Set o->key (a dotted path of mapping keys) in the tree to o->value,
 * creating the mappings on the way: the flag's value then meets the same
 * checks as the key would in the file. A non-mapping on the way is left for
 * the schema walk to report.
 */
static int apply_override(struct ynode **root, const struct config_override *o)
{
	if (!*root || is_null(*root)) {
		struct ynode *m = ynode_new(Y_MAP, NULL, false, NULL);
		if (!m)
			return -ENOMEM;
		ynode_free(*root);
		*root = m;
	}
	struct ynode *m = *root;
	const char *p = o->key;

	for (;;) {
		const char *dot = strchr(p, '.');
		size_t klen = dot ? (size_t)(dot - p) : strlen(p), at = 0;
		struct ynode *val = NULL;

		if (m->kind != Y_MAP)
			return 0;
		for (size_t i = 0; i + 1 < m->n; i += 2)
			if (m->kids[i]->len == klen && !memcmp(m->kids[i]->s, p, klen)) {
				val = m->kids[i + 1];
				at = i + 1;
			}
		struct ynode *nv = NULL;
		if (dot && val && !is_null(val)) {
			m = val;
			p = dot + 1;
			continue;
		}
		nv = dot ? ynode_new(Y_MAP, NULL, false, o->flag)
			 : ynode_new(Y_SCALAR, o->value, o->plain, o->flag);
		if (!nv)
			return -ENOMEM;
		if (val) {
			ynode_free(val);
			m->kids[at] = nv;
		} else {
			char key[64];
			snprintf(key, sizeof(key), "%.*s", (int)klen, p);
			struct ynode *k = ynode_new(Y_SCALAR, key, true, o->flag);
			if (!k || ynode_add(m, k)) {
				ynode_free(k);
				ynode_free(nv);
				return -ENOMEM;
			}
			if (ynode_add(m, nv)) {	/* the tree (holding k) is freed by the caller */
				ynode_free(nv);
				return -ENOMEM;
			}
		}
		if (!dot)
			return 0;
		m = nv;
		p = dot + 1;
	}
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
	return errat(x, at ? at : root, "nowhere to put profiles: remote_store.address and "
		     "local_store.directory are both empty; set one of them (or run with "
		     "--remote-store-address or --local-store)");
}

int config_parse_ov(const char *buf, size_t len, const char *name,
		    const struct config_load_opts *o, struct config *c, struct pp_err *err)
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
	if (!buf) {		/* libyaml asserts on a NULL input */
		buf = "";
		len = 0;
	}
	rc = load_tree(buf, len, x.name, err, &root);
	if (rc)
		goto fail;
	for (size_t i = 0; i < nov; i++) {
		rc = apply_override(&root, &ov[i]);
		if (rc)
			goto fail;
	}
	if (root && !is_null(root)) {
		if (root->kind != Y_MAP) {
			char b[64];
			rc = errat(&x, root, "the config must be a mapping of keys (node, cpu, "
				   "go_heap, ...), got %s", show(root, b, sizeof(b)));
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
		rc = errat(&x, at ? at : root, "local_store.directory and spool.directory must differ "
			   "(both are %s)", tmp.local_store.directory);
		goto fail;
	}
	if (tmp.snapshot_api.enabled) {
		const struct ynode *sa = map_val(root, "snapshot_api");
		const struct ynode *at = map_val(sa, "enabled");
		if (!*tmp.http_address) {
			rc = errat(&x, at ? at : root, "snapshot_api.enabled needs the HTTP endpoint "
				   "(http_address is \"\")");
			goto fail;
		}
		if (!*tmp.snapshot_api.bearer_token_file &&
		    !config_address_is_loopback(tmp.http_address)) {
			rc = errat(&x, at ? at : root, "snapshot_api.enabled on http_address %s, which "
				   "is reachable from other hosts, needs snapshot_api.bearer_token_file "
				   "(heap profiles name every function and allocation site of a "
				   "process); or listen on 127.0.0.1", tmp.http_address);
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
	size_t cap = MAX_FILE_BYTES + 1, len = 0;
	char *buf;
	int fd, rc;

	memset(c, 0, sizeof(*c));
	if (!path)
		return config_parse_ov(pushprof_default_config, strlen(pushprof_default_config),
				       CONFIG_BUILTIN_NAME, o, c, err);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return pp_errf(err, -errno, "cannot open config %s: %s", path, strerror(errno));
	buf = malloc(cap);
	if (!buf) {
		close(fd);
		return pp_errf(err, -ENOMEM, "%s: out of memory", path);
	}
	while (len < cap) {
		ssize_t n = read(fd, buf + len, cap - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = pp_errf(err, -errno, "cannot read config %s: %s", path, strerror(errno));
			goto out;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	if (len > MAX_FILE_BYTES)
		rc = pp_errf(err, -EFBIG, "%s: config is larger than %u bytes", path,
			     MAX_FILE_BYTES);
	else
		rc = config_parse_ov(buf, len, path, o, c, err);
out:
	free(buf);
	close(fd);
	return rc;
}

int config_check_files(const struct config *c, struct pp_err *err)
{
	const struct { const char *key, *path; } files[] = {
		{ "remote_store.ca_file", c->remote_store.ca_file },
		{ "remote_store.cert_file", c->remote_store.cert_file },
		{ "remote_store.key_file", c->remote_store.key_file },
		{ "remote_store.bearer_token_file", c->remote_store.bearer_token_file },
		{ "remote_store.basic_auth.password_file", c->remote_store.basic_auth_password_file },
		{ "snapshot_api.bearer_token_file", c->snapshot_api.bearer_token_file },
	};
	char msg[sizeof(err->msg)];
	size_t o = 0;
	int rc = 0;

	msg[0] = '\0';
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		const char *p = files[i].path, *why = NULL;
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
		int n = snprintf(msg + o, sizeof(msg) - o, "%s%s %s: %s", o ? "; " : "",
				 files[i].key, p, why ? why : strerror(e));
		if (n > 0)
			o = (size_t)n < sizeof(msg) - o ? o + (size_t)n : sizeof(msg) - 1;
	}
	if (rc)
		pp_errf(err, rc, "%s: cannot read the files it names: %s", c->path, msg);
	return rc;
}

void config_free(struct config *c)
{
	if (!c)
		return;
	free(c->path);
	free(c->node);
	free(c->http_address);
	free(c->cri_socket);
	free(c->snapshot_api.bearer_token_file);
	relabel_free(c->relabel);
	c->relabel = NULL;
	pp_labels_free(&c->external_labels);
	struct remote_store_config *r = &c->remote_store;
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
		case '"': fputs("\\\"", out); p++; continue;
		case '\\': fputs("\\\\", out); p++; continue;
		case '\n': fputs("\\n", out); p++; continue;
		case '\t': fputs("\\t", out); p++; continue;
		case '\r': fputs("\\r", out); p++; continue;
		case '$': fputs(env ? "$$" : "$", out); p++; continue;
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
		if (i < len) {		/* not UTF-8 after all: escape the byte */
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

int config_dump(const struct config *c, FILE *out)
{
	const struct remote_store_config *r = &c->remote_store;
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
	fputs("remote_store:\n", out);
	put_kv_str(out, 2, "address", r->address);
	fprintf(out, "  protocol: %s\n", protocol_names[r->protocol]);
	fprintf(out, "  transport: %s\n", transport_names[r->http]);
	put_kv_str(out, 2, "path_prefix", r->path_prefix);
	put_kv_bool(out, 2, "insecure", r->insecure);
	put_kv_str(out, 2, "ca_file", r->ca_file);
	put_kv_str(out, 2, "cert_file", r->cert_file);
	put_kv_str(out, 2, "key_file", r->key_file);
	put_kv_str(out, 2, "server_name", r->server_name);
	put_kv_bool(out, 2, "insecure_skip_verify", r->insecure_skip_verify);
	put_kv_str(out, 2, "bearer_token_file", r->bearer_token_file);
	put_kv_str(out, 2, "tenant_id", r->tenant_id);
	fputs("  basic_auth:\n", out);
	put_kv_str(out, 4, "username", r->basic_auth_username);
	put_kv_str(out, 4, "password_file", r->basic_auth_password_file);
	put_labels(out, 2, "headers", &r->headers);
	put_kv_dur(out, 2, "timeout", r->timeout_ns);
	put_kv_size(out, 2, "max_request_bytes", r->max_request_bytes);
	put_kv_bool(out, 2, "debuginfo_upload", r->debuginfo_upload);
	put_kv_size(out, 2, "debuginfo_max_bytes_per_hour", r->debuginfo_max_bytes_per_hour);
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
	if (c->cpu.thread_labels < 0)
		fputs("  thread_labels: auto\n", out);
	else
		put_kv_bool(out, 2, "thread_labels", c->cpu.thread_labels);
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
		const struct { const char *k, *v; } res[] = {
			{ "cgroup_regex", t->cgroup_regex }, { "comm_regex", t->comm_regex },
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
