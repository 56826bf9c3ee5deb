/*
 * config_yaml.c - the config's YAML tree (config_internal.h).
 *
 * libyaml's event API builds a small tree of scalars, lists and mappings
 * that keeps the line/column of every node, so that every later error can
 * name FILE:LINE:COL. The tree is bounded (depth, node count; config.c
 * bounds the file) and takes one document; aliases, tags and NUL bytes are
 * refused, libyaml's own errors are put in plain words. Also here: the
 * lookups the checks use, and the command-line overrides (config_override)
 * set into the tree before the schema walk sees it.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "config_internal.h"
#include "grow.h"

#define MAX_DEPTH 32	 /* schema nests 3 deep; bound recursion */
#define MAX_NODES 100000 /* bounds the tree's memory (~10 MiB) */

/* ------------------------------------------------------------------ */
/* YAML tree                                                          */

void ynode_free(struct ynode *n)
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
	if (pp_grow(&p->kids, &p->cap, p->n + 1, sizeof(*p->kids), 8))
		return -ENOMEM;
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
				snprintf(hint, sizeof(hint),
					 "; tabs are not allowed for indentation in YAML");
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

/* Read the next event only for its type (and, mark given, where it starts). */
static int skip_event(struct builder *b, yaml_event_type_t *type, yaml_mark_t *mark)
{
	yaml_event_t ev;
	int rc = next_event(b, &ev);

	if (rc)
		return rc;
	*type = ev.type;
	if (mark)
		*mark = ev.start_mark;
	yaml_event_delete(&ev);
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
			rc = build_err(b, &ev->start_mark, "strings must not contain NUL bytes%s",
				       "");
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
	yaml_event_type_t end_type = ev->type == YAML_SEQUENCE_START_EVENT ? YAML_SEQUENCE_END_EVENT
									   : YAML_MAPPING_END_EVENT;
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
int load_tree(const char *buf, size_t len, const char *name, struct pp_err *err,
	      struct ynode **root)
{
	struct builder b = { .name = name, .buf = buf, .len = len, .err = err };
	yaml_event_type_t type;
	yaml_mark_t mark;
	yaml_event_t ev;
	int rc;

	*root = NULL;
	if (!yaml_parser_initialize(&b.p))
		return pp_errf(err, -ENOMEM, "%s: cannot initialise the YAML parser", name);
	yaml_parser_set_input_string(&b.p, (const unsigned char *)buf, len);
	rc = skip_event(&b, &type, NULL); /* STREAM-START */
	if (!rc)
		rc = skip_event(&b, &type, NULL); /* DOCUMENT-START */
	if (rc || type == YAML_STREAM_END_EVENT)  /* nothing but comments */
		goto out;
	rc = next_event(&b, &ev);
	if (!rc)
		rc = build(&b, &ev, 0, root);
	if (!rc)
		rc = skip_event(&b, &type, NULL); /* DOCUMENT-END */
	if (!rc)
		rc = skip_event(&b, &type, &mark);
	if (!rc && type == YAML_DOCUMENT_START_EVENT)
		rc = build_err(&b, &mark, "only one YAML document is allowed in a config file%s",
			       "");
out:
	if (rc) {
		ynode_free(*root);
		*root = NULL;
	}
	yaml_parser_delete(&b.p);
	return rc;
}

bool is_null(const struct ynode *n)
{
	if (!n)
		return true;
	if (n->kind != Y_SCALAR || !n->plain)
		return false;
	return n->len == 0 || !strcmp(n->s, "~") || !strcmp(n->s, "null") ||
	       !strcmp(n->s, "Null") || !strcmp(n->s, "NULL");
}

/* Value node of key in map v, or v itself (for a position) when absent. */
const struct ynode *map_get(const struct ynode *v, const char *key)
{
	if (v->kind == Y_MAP)
		for (size_t i = 0; i + 1 < v->n; i += 2)
			if (v->kids[i]->kind == Y_SCALAR && !strcmp(v->kids[i]->s, key))
				return v->kids[i];
	return v;
}

/* Value node of key in map v, NULL when v is not a map or lacks key. */
const struct ynode *map_val(const struct ynode *v, const char *key)
{
	if (v && v->kind == Y_MAP)
		for (size_t i = 0; i + 1 < v->n; i += 2)
			if (v->kids[i]->kind == Y_SCALAR && !strcmp(v->kids[i]->s, key))
				return v->kids[i + 1];
	return NULL;
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
int apply_override(struct ynode **root, const struct config_override *o)
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
			if (ynode_add(m, nv)) { /* the tree (holding k) is freed by the caller */
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
