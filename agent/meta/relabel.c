#include "relabel.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <locale.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <wctype.h>

#include "log.h"
#include "md5.h"
#include "ppregex.h"
#include "grow.h"

#define MAX_RULES 4096
#define MAX_SOURCE_LABELS 64

/* A replacement or target_label template, split at load: literal text and
 * references to groups (resolved against the rule's regex then). */
struct tseg {
	char *lit; /* literal text, or NULL for a group reference */
	size_t len;
	int group; /* >= 0: the group; -1: a group that does not exist */
};

struct tmpl {
	struct tseg *v;
	size_t n, cap;
};

struct rule {
	enum relabel_action action;
	char **source;
	size_t nsource;
	char *separator;
	char *regex_src;
	struct pp_regex *re;
	char *target;
	char *replacement;
	struct tmpl t_target, t_replacement;
	uint64_t modulus;
};

struct relabel {
	struct rule *v;
	size_t n, cap;
};

const char *const relabel_keys[] = {
	"source_labels", "separator", "regex",	"target_label",
	"replacement",	 "modulus",   "action", NULL,
};

uint64_t relabel_hashmod(const char *val, size_t len, uint64_t modulus)
{
	uint8_t sum[16];
	uint64_t v = 0;

	if (!modulus)
		return 0;
	pp_md5(val, len, sum);
	for (int i = 8; i < 16; i++)
		v = v << 8 | sum[i];
	return v % modulus;
}

/* ---- templates (Go's Regexp.Expand) ---------------------------------------- */

/*
 * Length of the group name at s, as Go's regexp extract() reads it: Unicode
 * letters, decimal digits and '_'. Non-ASCII names can never name a group,
 * but their length decides where the literal text resumes.
 */
static size_t name_len(const char *s)
{
	size_t i = 0;
	static const struct pp_regex_opts word_re = { .src = "\\A[\\p{L}\\p{Nd}]" };
	struct pp_regex *word = NULL;

	while (s[i]) {
		unsigned char c = (unsigned char)s[i];
		if (c < 0x80) {
			if (!isalnum(c) && c != '_')
				break;
			i++;
			continue;
		}
		/* load time only: a name with non-ASCII letters */
		if (!word && pp_regex_new(&word_re, &word, NULL))
			break;
		ssize_t m[2];
		size_t rest = strlen(s + i);
		if (pp_regex_match(word, s + i, rest > 4 ? 4 : rest, m, 1) != 1)
			break;
		i += (size_t)m[1];
	}
	pp_regex_free(word);
	return i;
}

static void tmpl_free(struct tmpl *t)
{
	for (size_t i = 0; i < t->n; i++)
		free(t->v[i].lit);
	free(t->v);
	t->v = NULL;
	t->n = t->cap = 0;
}

static int tmpl_add(struct tmpl *t, const char *lit, size_t len, int group)
{
	if (lit && !len)
		return 0;
	if (pp_grow(&t->v, &t->cap, t->n + 1, sizeof(*t->v), 4))
		return -ENOMEM;
	t->v[t->n] = (struct tseg){ .lit = NULL, .len = len, .group = group };
	if (lit && !(t->v[t->n].lit = strndup(lit, len)))
		return -ENOMEM;
	t->n++;
	return 0;
}

/* Split src at its $ references; groups are looked up in re. */
static int tmpl_parse(struct tmpl *t, const char *src, const struct pp_regex *re)
{
	const char *p = src;
	int rc = 0;

	while (!rc && *p) {
		const char *d = strchr(p, '$');
		if (!d)
			return tmpl_add(t, p, strlen(p), 0);
		rc = tmpl_add(t, p, (size_t)(d - p), 0);
		p = d + 1;
		if (rc)
			break;
		if (*p == '$') {
			rc = tmpl_add(t, "$", 1, 0);
			p++;
			continue;
		}
		bool brace = *p == '{';
		const char *name = p + brace;
		size_t nl = name_len(name);
		if (!nl || (brace && name[nl] != '}')) {
			rc = tmpl_add(t, "$", 1, 0); /* malformed: '$' is literal */
			continue;
		}
		p = name + nl + brace;
		long num = 0;
		for (size_t i = 0; i < nl; i++) {
			if (name[i] < '0' || name[i] > '9' || num >= 100000000) {
				num = -1;
				break;
			}
			num = num * 10 + (name[i] - '0');
		}
		if (name[0] == '0' && nl > 1)
			num = -1; /* Go: no leading zeros, so a name */
		int g = -1;
		if (num >= 0)
			g = (size_t)num <= pp_regex_groups(re) ? (int)num : -1;
		else
			g = pp_regex_group_index(re, name, nl);
		rc = tmpl_add(t, NULL, 0, g);
	}
	return rc;
}

static void expand(const struct tmpl *t, const char *val, const ssize_t *m, struct pp_buf *out)
{
	out->n = 0;
	pp_buf_add(out, "", 0);
	for (size_t i = 0; i < t->n; i++) {
		const struct tseg *s = &t->v[i];
		if (s->lit)
			pp_buf_add(out, s->lit, s->len);
		else if (s->group >= 0 && m[2 * s->group] >= 0)
			pp_buf_add(out, val + m[2 * s->group],
				   (size_t)(m[2 * s->group + 1] - m[2 * s->group]));
	}
}

/* ---- building rules ------------------------------------------------------ */

static const char *const action_names[] = {
	[RELABEL_REPLACE] = "replace",	   [RELABEL_KEEP] = "keep",
	[RELABEL_DROP] = "drop",	   [RELABEL_KEEPEQUAL] = "keepequal",
	[RELABEL_DROPEQUAL] = "dropequal", [RELABEL_LOWERCASE] = "lowercase",
	[RELABEL_UPPERCASE] = "uppercase", [RELABEL_LABELMAP] = "labelmap",
	[RELABEL_LABELDROP] = "labeldrop", [RELABEL_LABELKEEP] = "labelkeep",
	[RELABEL_HASHMOD] = "hashmod",
};
#define NACTIONS (sizeof(action_names) / sizeof(action_names[0]))

/* Prometheus's relabelTarget: ^(?:(?:[a-zA-Z_]|\$(?:\{\w+\}|\w+))+\w*)+$ */
static bool target_template_valid(const char *s)
{
	const char *p = s;

	if (!*p)
		return false;
	while (*p) {
		if (isalpha((unsigned char)*p) || *p == '_') {
			p++;
		} else if (*p == '$') {
			p++;
			if (*p == '{') {
				const char *q = ++p;
				while (isalnum((unsigned char)*p) || *p == '_')
					p++;
				if (p == q || *p != '}')
					return false;
				p++;
			} else {
				const char *q = p;
				while (isalnum((unsigned char)*p) || *p == '_')
					p++;
				if (p == q)
					return false;
			}
		} else if (isdigit((unsigned char)*p) && p != s) {
			p++;
		} else {
			return false;
		}
	}
	return true;
}

static void rule_free(struct rule *r)
{
	for (size_t i = 0; i < r->nsource; i++)
		free(r->source[i]);
	free(r->source);
	free(r->separator);
	pp_regex_free(r->re);
	free(r->regex_src);
	free(r->target);
	free(r->replacement);
	tmpl_free(&r->t_target);
	tmpl_free(&r->t_replacement);
	memset(r, 0, sizeof(*r));
}

int relabel_new(struct relabel **out, struct pp_err *err)
{
	*out = calloc(1, sizeof(struct relabel));
	return *out ? 0 : pp_errf(err, -ENOMEM, "out of memory");
}

void relabel_each_source(const struct relabel *r,
			 void (*fn)(size_t rule, const char *label, void *arg), void *arg)
{
	for (size_t i = 0; r && i < r->n; i++)
		for (size_t j = 0; j < r->v[i].nsource; j++)
			fn(i, r->v[i].source[j], arg);
}

size_t relabel_count(const struct relabel *r)
{
	return r ? r->n : 0;
}

void relabel_free(struct relabel *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->n; i++)
		rule_free(&r->v[i]);
	free(r->v);
	free(r);
}

static int fault(struct relabel_fault *f, const char *field, size_t index);

/* A rule refused after its regex was compiled. */
static int invalid(struct rule *r, struct relabel_fault *f, const char *field, size_t index)
{
	rule_free(r);
	return fault(f, field, index);
}

static int fault(struct relabel_fault *f, const char *field, size_t index)
{
	if (f) {
		f->field = field;
		f->index = index;
	}
	return -EINVAL;
}

int relabel_add(struct relabel *rl, const struct relabel_rule_spec *s, struct pp_err *err,
		struct relabel_fault *flt)
{
	struct rule r = { .action = RELABEL_REPLACE };
	uint64_t modulus = 0;
	const char *act;
	struct pp_err rerr = { 0 };
	int rc;

	if (flt)
		*flt = (struct relabel_fault){ 0 };
	if (rl->n >= MAX_RULES)
		return pp_errf(err, -E2BIG, "more than %d relabel rules", MAX_RULES);
	if (s->action) {
		size_t i;
		for (i = 0; i < NACTIONS; i++)
			if (strcasecmp(s->action, action_names[i]) == 0)
				break;
		if (!*s->action) {
			pp_errf(err, -EINVAL, "relabel action cannot be empty");
			return fault(flt, "action", 0);
		}
		if (i == NACTIONS) {
			for (i = 0; i < NACTIONS; i++)
				if (pp_edit_distance(s->action, action_names[i]) <= 2)
					break;
			if (i < NACTIONS)
				pp_errf(err, -EINVAL,
					"unknown relabel action \"%s\" (did you mean "
					"'%s'?)",
					s->action, action_names[i]);
			else
				pp_errf(err, -EINVAL,
					"unknown relabel action \"%s\" (one of replace, "
					"keep, drop, keepequal, dropequal, lowercase, uppercase, "
					"labelmap, labeldrop, labelkeep, hashmod)",
					s->action);
			return fault(flt, "action", 0);
		}
		r.action = (enum relabel_action)i;
	}
	act = action_names[r.action];
	enum relabel_action a = r.action;
	if (s->nsource_labels > MAX_SOURCE_LABELS) {
		pp_errf(err, -E2BIG, "more than %d source_labels", MAX_SOURCE_LABELS);
		return fault(flt, "source_labels", 0);
	}
	for (size_t i = 0; i < s->nsource_labels; i++)
		if (!s->source_labels[i] || !pp_label_name_valid(s->source_labels[i])) {
			pp_errf(err, -EINVAL, "\"%s\" is not a valid label name",
				s->source_labels[i] ? s->source_labels[i] : "");
			return fault(flt, "source_labels", i);
		}
	if (s->modulus) {
		char *end;
		errno = 0;
		modulus = strtoull(s->modulus, &end, 10);
		if (s->modulus_quoted || !isdigit((unsigned char)s->modulus[0]) || errno || *end) {
			pp_errf(err, -EINVAL, "expected a non-negative integer, got %s\"%s\"",
				s->modulus_quoted ? "the quoted string " : "", s->modulus);
			return fault(flt, "modulus", 0);
		}
	}
	/* The regex is compiled first, as Prometheus does when it reads the
	 * YAML, before Config.Validate */
	struct pp_regex_opts ro = { .src = s->regex ? s->regex : "(.*)", .flags = PP_REGEX_FULL };
	rc = pp_regex_new(&ro, &r.re, &rerr);
	if (rc == -ENOMEM)
		return pp_errf(err, rc, "out of memory");
	if (rc) {
		pp_errf(err, -EINVAL, "invalid regular expression \"%s\": %s",
			s->regex ? s->regex : "(.*)", rerr.msg);
		return fault(flt, "regex", 0);
	}
	/* Validation as Prometheus's Config.Validate, in its order */
	if (a == RELABEL_HASHMOD && !modulus) {
		pp_errf(err, -EINVAL,
			"relabel configuration for hashmod requires non-zero modulus");
		return invalid(&r, flt, s->modulus ? "modulus" : "action", 0);
	}
	bool needs_target = a == RELABEL_REPLACE || a == RELABEL_HASHMOD ||
			    a == RELABEL_LOWERCASE || a == RELABEL_UPPERCASE ||
			    a == RELABEL_KEEPEQUAL || a == RELABEL_DROPEQUAL;
	if (needs_target && (!s->target_label || !*s->target_label)) {
		pp_errf(err, -EINVAL,
			"relabel configuration for %s action requires "
			"'target_label' value",
			act);
		return invalid(&r, flt, s->target_label ? "target_label" : "action", 0);
	}
	if ((a == RELABEL_REPLACE && !target_template_valid(s->target_label)) ||
	    (needs_target && a != RELABEL_REPLACE && !pp_label_name_valid(s->target_label))) {
		pp_errf(err, -EINVAL, "\"%s\" is invalid 'target_label' for %s action",
			s->target_label, act);
		return invalid(&r, flt, "target_label", 0);
	}
	bool equal_or_case = a == RELABEL_LOWERCASE || a == RELABEL_UPPERCASE ||
			     a == RELABEL_KEEPEQUAL || a == RELABEL_DROPEQUAL;
	if (equal_or_case && s->replacement && strcmp(s->replacement, "$1")) {
		pp_errf(err, -EINVAL, "'replacement' can not be set for %s action", act);
		return invalid(&r, flt, "replacement", 0);
	}
	if (a == RELABEL_LABELMAP &&
	    !target_template_valid(s->replacement ? s->replacement : "$1")) {
		pp_errf(err, -EINVAL, "\"%s\" is invalid 'replacement' for %s action",
			s->replacement, act);
		return invalid(&r, flt, "replacement", 0);
	}
	if ((a == RELABEL_KEEPEQUAL || a == RELABEL_DROPEQUAL) &&
	    ((s->regex && strcmp(s->regex, "(.*)")) || modulus ||
	     (s->separator && strcmp(s->separator, ";")))) {
		pp_errf(err, -EINVAL,
			"%s action requires only 'source_labels' and `target_label`, "
			"and no other fields",
			act);
		return invalid(&r, flt, NULL, 0);
	}
	if ((a == RELABEL_LABELDROP || a == RELABEL_LABELKEEP) &&
	    (s->has_source_labels || (s->target_label && *s->target_label) || modulus ||
	     (s->separator && strcmp(s->separator, ";")) ||
	     (s->replacement && strcmp(s->replacement, "$1")))) {
		pp_errf(err, -EINVAL, "%s action requires only 'regex', and no other fields", act);
		return invalid(&r, flt, NULL, 0);
	}

	r.modulus = modulus;
	r.separator = strdup(s->separator ? s->separator : ";");
	r.replacement = strdup(s->replacement ? s->replacement : "$1");
	r.target = strdup(s->target_label ? s->target_label : "");
	r.regex_src = strdup(s->regex ? s->regex : "(.*)");
	r.source = calloc(s->nsource_labels ? s->nsource_labels : 1, sizeof(char *));
	if (!r.separator || !r.replacement || !r.target || !r.regex_src || !r.source)
		goto oom;
	for (size_t i = 0; i < s->nsource_labels; i++) {
		if (!(r.source[i] = strdup(s->source_labels[i])))
			goto oom;
		r.nsource++;
	}
	if (tmpl_parse(&r.t_target, r.target, r.re) ||
	    tmpl_parse(&r.t_replacement, r.replacement, r.re))
		goto oom;
	if (pp_grow(&rl->v, &rl->cap, rl->n + 1, sizeof(*rl->v), 8))
		goto oom;
	rl->v[rl->n++] = r;
	return 0;
oom:
	rule_free(&r);
	return pp_errf(err, -ENOMEM, "out of memory");
}

/* ---- dumping ----------------------------------------------------------------- */

static void put_quoted(FILE *out, const char *s)
{
	fputc('"', out);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		/* YAML folds NEL, LS, PS as line breaks and may drop a BOM: escape them */
		if (p[0] == 0xc2 && p[1] == 0x85) {
			fputs("\\N", out);
			p++;
			continue;
		}
		if (p[0] == 0xe2 && p[1] == 0x80 && (p[2] == 0xa8 || p[2] == 0xa9)) {
			fputs(p[2] == 0xa8 ? "\\L" : "\\P", out);
			p += 2;
			continue;
		}
		if (p[0] == 0xef && p[1] == 0xbb && p[2] == 0xbf) {
			fputs("\\uFEFF", out);
			p += 2;
			continue;
		}
		if (*p == '"' || *p == '\\')
			fprintf(out, "\\%c", *p);
		else if (*p < 0x20 || *p == 0x7f)
			fprintf(out, "\\x%02x", *p);
		else
			fputc(*p, out);
	}
	fputc('"', out);
}

int relabel_dump(const struct relabel *r, FILE *out, int indent)
{
	for (size_t i = 0; r && i < r->n; i++) {
		const struct rule *x = &r->v[i];
		fprintf(out, "%*s- action: %s\n", indent, "", action_names[x->action]);
		if (x->nsource) {
			fprintf(out, "%*s  source_labels: [", indent, "");
			for (size_t k = 0; k < x->nsource; k++) {
				if (k)
					fputs(", ", out);
				put_quoted(out, x->source[k]);
			}
			fputs("]\n", out);
		}
		fprintf(out, "%*s  separator: ", indent, "");
		put_quoted(out, x->separator);
		fprintf(out, "\n%*s  regex: ", indent, "");
		put_quoted(out, x->regex_src);
		if (x->target[0]) {
			fprintf(out, "\n%*s  target_label: ", indent, "");
			put_quoted(out, x->target);
		}
		fprintf(out, "\n%*s  replacement: ", indent, "");
		put_quoted(out, x->replacement);
		fputc('\n', out);
		if (x->modulus)
			fprintf(out, "%*s  modulus: %" PRIu64 "\n", indent, "", x->modulus);
	}
	return ferror(out) ? -EIO : 0;
}

/* ---- applying -------------------------------------------------------------- */

/* Set, or delete when value is empty (Prometheus's labels.Builder). */
static int set_or_del(struct pp_labels *l, const char *name, const char *value)
{
	if (!*value) {
		pp_labels_del(l, name);
		return 0;
	}
	return pp_labels_set(l, name, value);
}

/* 1 match, 0 none; a limit hit is logged and counts as no match (relabel.h). */
static int match(const struct rule *r, const char *s, ssize_t *m)
{
	int rc = pp_regex_match(r->re, s, strlen(s), m, m ? pp_regex_groups(r->re) + 1 : 0);
	if (rc == -E2BIG) {
		/* logged on the 1st, 2nd, 4th, 8th... hit: visible, never a flood */
		static unsigned long hits;
		unsigned long n = __atomic_add_fetch(&hits, 1, __ATOMIC_RELAXED);
		if (!(n & (n - 1)))
			pp_log(PP_WARN,
			       "relabel: regex match limit hit, rule treated as not "
			       "matching",
			       "regex=%s value_bytes=%zu hits=%lu", pp_q(r->regex_src), strlen(s),
			       n);
		return 0;
	}
	return rc;
}

static locale_t utf8_locale;
static pthread_once_t utf8_once = PTHREAD_ONCE_INIT;

static void utf8_locale_init(void)
{
	utf8_locale = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0);
}

/*
 * Go's strings.ToLower / ToUpper: every rune through the simple Unicode case
 * mapping (glibc's C.UTF-8 tables; ASCII only if that locale is missing),
 * a byte outside valid UTF-8 becomes U+FFFD.
 */
static void change_case(const char *s, bool upper, struct pp_buf *out)
{
	const unsigned char *p = (const unsigned char *)s;

	pthread_once(&utf8_once, utf8_locale_init);
	out->n = 0;
	pp_buf_add(out, "", 0);
	while (*p) {
		uint32_t cp;
		size_t n = 1;
		if (*p < 0x80) {
			cp = *p;
		} else {
			size_t need = (*p & 0xe0) == 0xc0   ? 1
				      : (*p & 0xf0) == 0xe0 ? 2
				      : (*p & 0xf8) == 0xf0 ? 3
							    : 0;
			uint32_t min = need == 1 ? 0x80 : need == 2 ? 0x800 : 0x10000;
			cp = *p & (0x3f >> need);
			for (size_t k = 1; need && k <= need; k++) {
				if ((p[k] & 0xc0) != 0x80) {
					need = 0;
					break;
				}
				cp = cp << 6 | (p[k] & 0x3f);
			}
			if (!need || cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
				cp = 0xfffd;
			else
				n = need + 1;
		}
		if (utf8_locale)
			cp = upper ? (uint32_t)towupper_l((wint_t)cp, utf8_locale)
				   : (uint32_t)towlower_l((wint_t)cp, utf8_locale);
		else if (cp < 0x80)
			cp = (uint32_t)(upper ? toupper((int)cp) : tolower((int)cp));
		char b[4];
		size_t bl;
		if (cp < 0x80) {
			b[0] = (char)cp, bl = 1;
		} else if (cp < 0x800) {
			b[0] = (char)(0xc0 | cp >> 6), b[1] = (char)(0x80 | (cp & 0x3f)), bl = 2;
		} else if (cp < 0x10000) {
			b[0] = (char)(0xe0 | cp >> 12), b[1] = (char)(0x80 | (cp >> 6 & 0x3f));
			b[2] = (char)(0x80 | (cp & 0x3f)), bl = 3;
		} else {
			b[0] = (char)(0xf0 | cp >> 18), b[1] = (char)(0x80 | (cp >> 12 & 0x3f));
			b[2] = (char)(0x80 | (cp >> 6 & 0x3f)), b[3] = (char)(0x80 | (cp & 0x3f));
			bl = 4;
		}
		pp_buf_add(out, b, bl);
		p += n;
	}
}

static int apply_one(const struct rule *r, struct pp_labels *l, ssize_t *m)
{
	struct pp_buf val = { 0 }, t = { 0 }, res = { 0 };
	int ret = 1, mr;

	for (size_t i = 0; i < r->nsource; i++) {
		const char *v = pp_labels_get(l, r->source[i]);
		if (i)
			pp_buf_add(&val, r->separator, strlen(r->separator));
		if (v)
			pp_buf_add(&val, v, strlen(v));
	}
	const char *vs = pp_buf_str(&val);
	if (!vs) {
		ret = -ENOMEM;
		goto out;
	}

	switch (r->action) {
	case RELABEL_DROP:
		mr = match(r, vs, NULL);
		ret = mr < 0 ? mr : !mr;
		break;
	case RELABEL_KEEP:
		ret = match(r, vs, NULL);
		break;
	case RELABEL_KEEPEQUAL:
	case RELABEL_DROPEQUAL: {
		const char *tv = pp_labels_get(l, r->target);
		bool eq = !strcmp(tv ? tv : "", vs);
		ret = eq == (r->action == RELABEL_KEEPEQUAL);
		break;
	}
	case RELABEL_REPLACE:
		mr = match(r, vs, m);
		if (mr <= 0) {
			ret = mr < 0 ? mr : 1;
			break;
		}
		expand(&r->t_target, vs, m, &t);
		expand(&r->t_replacement, vs, m, &res);
		if (t.oom || res.oom) {
			ret = -ENOMEM;
			break;
		}
		if (!pp_label_name_valid(t.p))
			break;
		if (set_or_del(l, t.p, res.p))
			ret = -ENOMEM;
		break;
	case RELABEL_LOWERCASE:
	case RELABEL_UPPERCASE:
		change_case(vs, r->action == RELABEL_UPPERCASE, &res);
		if (res.oom || set_or_del(l, r->target, res.p))
			ret = -ENOMEM;
		break;
	case RELABEL_HASHMOD: {
		char num[24];
		snprintf(num, sizeof(num), "%" PRIu64, relabel_hashmod(vs, val.n, r->modulus));
		if (pp_labels_set(l, r->target, num))
			ret = -ENOMEM;
		break;
	}
	case RELABEL_LABELMAP: {
		/* Rules see a snapshot, as labels.Builder.Range gives. */
		struct pp_labels snap = { 0 };
		if (pp_labels_copy(&snap, l)) {
			pp_labels_free(&snap);
			ret = -ENOMEM;
			break;
		}
		for (size_t i = 0; i < snap.n && ret == 1; i++) {
			mr = match(r, snap.v[i].name, m);
			if (mr <= 0) {
				ret = mr < 0 ? mr : 1;
				continue;
			}
			expand(&r->t_replacement, snap.v[i].name, m, &res);
			if (res.oom)
				ret = -ENOMEM;
			else if (pp_label_name_valid(res.p) &&
				 set_or_del(l, res.p, snap.v[i].value))
				ret = -ENOMEM;
		}
		pp_labels_free(&snap);
		break;
	}
	case RELABEL_LABELDROP:
	case RELABEL_LABELKEEP:
		for (size_t i = l->n; i-- > 0 && ret == 1;) {
			mr = match(r, l->v[i].name, NULL);
			if (mr < 0)
				ret = mr;
			else if ((mr == 1) == (r->action == RELABEL_LABELDROP))
				pp_labels_del(l, l->v[i].name);
		}
		break;
	}
out:
	free(val.p);
	free(t.p);
	free(res.p);
	return ret;
}

int relabel_apply(const struct relabel *r, struct pp_labels *labels)
{
	size_t maxm = 1;
	ssize_t *m;
	int ret = 1;

	for (size_t i = 0; r && i < r->n; i++)
		if (pp_regex_groups(r->v[i].re) + 1 > maxm)
			maxm = pp_regex_groups(r->v[i].re) + 1;
	m = calloc(2 * maxm, sizeof(*m));
	if (!m)
		return -ENOMEM;
	for (size_t i = 0; r && i < r->n && ret == 1; i++)
		ret = apply_one(&r->v[i], labels, m);
	free(m);
	if (ret != 1)
		return ret;
	for (size_t i = labels->n; i-- > 0;) {
		const char *n = labels->v[i].name;
		if ((n[0] == '_' && n[1] == '_' && strcmp(n, "__name__")) || !*labels->v[i].value)
			pp_labels_del(labels, n);
	}
	return 1;
}
