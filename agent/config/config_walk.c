/*
 * config_walk.c - the table-driven walk of the config (config_internal.h).
 *
 * A YAML mapping is mapped onto a struct by a table of struct field (key,
 * type, offset, limits, a sub-table or a checker: config_schema.c's); keys
 * must be unique scalars, an unknown key gets a "did you mean". Every message
 * names FILE:LINE:COL (or the command-line flag that set the value), and the
 * walk goes on after an error so that one run of check-config shows them
 * all. Also the maps whose keys are free names (labels, headers).
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config_internal.h"

#define MAX_MAP_ENTRIES 256 /* external_labels, headers */

/* ------------------------------------------------------------------ */
/* Messages                                                           */

/* Keep the error just recorded in x->err as one more of the walk's. */
void note_error(struct ctx *x)
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

__attribute__((format(printf, 3, 4))) int errat(struct ctx *x, const struct ynode *n,
						const char *fmt, ...)
{
	char msg[400];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (n && n->flag)
		return pp_errf(x->err, -EINVAL, "%s: %s", n->flag, msg);
	return pp_errf(x->err, -EINVAL, "%s:%u:%u: %s", x->name, n ? n->line : 1u, n ? n->col : 1u,
		       msg);
}

/* Short printable rendering of a node for messages. */
const char *show(const struct ynode *n, char *buf, size_t sz)
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

bool close_enough(const char *typed, const char *known)
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
/* The walk                                                           */

#define FIELD_AT(base, off, T) ((T *)((char *)(base) + (off)))

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
		return 0; /* "key:" with no value keeps the default */
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
				return errat(
					x, v,
					"%s must be between %" PRId64 " and %" PRId64
					" (the kernel limit kernel.perf_event_max_stack is %u), "
					"got %" PRId64,
					path, f->min, max, x->kernel_max_stack, i);
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
			return errat(x, v, "%s: %s %s is too large", path,
				     dur ? "duration" : "size", show(v, b, sizeof(b)));
		if (rc)
			return errat(
				x, v,
				dur ? "%s: bad duration %s (use e.g. 500ms, 10s, 1m30s, 1h)"
				    : "%s: bad size %s (use e.g. 4096, 64KiB, 256MiB, 1GiB, 10MB)",
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
			return errat(x, v, "%s must be between %s and %s%s, got %s", path, lim1,
				     lim2, (f->flags & Z_OK) ? " (or 0 to turn it off)" : "",
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
					o += (size_t)snprintf(places + o, sizeof(places) - o,
							      "%s%s.%s", o ? " or " : "", f->key,
							      g->key);
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
	return errat(x, k, "unknown key %s %s (known keys: %s)", show(k, b, sizeof(b)), where,
		     list);
}

static int want_map(struct ctx *x, const struct ynode *n, const char *path)
{
	char b[64];

	if (n->kind != Y_MAP)
		return errat(x, n, "%s: expected a mapping, got %s",
			     path && *path ? path : "config", show(n, b, sizeof(b)));
	return 0;
}

/* Keys must be scalars; return the first earlier equal key, if any. */
int check_key(struct ctx *x, const struct ynode *map, size_t i, const char *path)
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
				     show(k, b, sizeof(b)), *path ? "in " : "at top level", path,
				     p->line, p->col);
	}
	return 0;
}

int walk_map(struct ctx *x, const struct ynode *n, const char *path, const struct field *fields,
	     void *base)
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
		if (x->nerr == before) /* a nested walk kept its own */
			note_error(x);
		if (!first)
			first = rc;
	}
	return first;
}

int label_map(struct ctx *x, const struct ynode *v, const char *path, struct pp_labels *dst,
	      labelcheck_fn check)
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
