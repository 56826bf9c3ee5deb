#include "relabel.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <regex.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

#define MAX_RULES 4096
#define MAX_REGEX_LEN 4096
#define MAX_SOURCE_LABELS 64

struct rule {
	enum relabel_action action;
	char **source;
	size_t nsource;
	char *separator;
	char *regex_src;
	regex_t re;
	size_t nmatch;		/* re_nsub + 1 */
	size_t *group;		/* user group i (1-based) -> POSIX group group[i-1] */
	size_t ngroup;
	char *target;
	char *replacement;
	uint64_t modulus;
};

struct relabel {
	struct rule *v;
	size_t n, cap;
};

/* ---- MD5 (RFC 1321), only for hashmod ---------------------------------- */

static const uint32_t md5_k[64] = {
	0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee,
	0xf57c0faf, 0x4787c62a, 0xa8304613, 0xfd469501,
	0x698098d8, 0x8b44f7af, 0xffff5bb1, 0x895cd7be,
	0x6b901122, 0xfd987193, 0xa679438e, 0x49b40821,
	0xf61e2562, 0xc040b340, 0x265e5a51, 0xe9b6c7aa,
	0xd62f105d, 0x02441453, 0xd8a1e681, 0xe7d3fbc8,
	0x21e1cde6, 0xc33707d6, 0xf4d50d87, 0x455a14ed,
	0xa9e3e905, 0xfcefa3f8, 0x676f02d9, 0x8d2a4c8a,
	0xfffa3942, 0x8771f681, 0x6d9d6122, 0xfde5380c,
	0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70,
	0x289b7ec6, 0xeaa127fa, 0xd4ef3085, 0x04881d05,
	0xd9d4d039, 0xe6db99e5, 0x1fa27cf8, 0xc4ac5665,
	0xf4292244, 0x432aff97, 0xab9423a7, 0xfc93a039,
	0x655b59c3, 0x8f0ccc92, 0xffeff47d, 0x85845dd1,
	0x6fa87e4f, 0xfe2ce6e0, 0xa3014314, 0x4e0811a1,
	0xf7537e82, 0xbd3af235, 0x2ad7d2bb, 0xeb86d391,
};

static const uint8_t md5_r[64] = {
	7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22,
	5, 9, 14, 20, 5, 9, 14, 20, 5, 9, 14, 20, 5, 9, 14, 20,
	4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23,
	6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21,
};

static void md5_block(uint32_t h[4], const uint8_t *p)
{
	uint32_t w[16], a = h[0], b = h[1], c = h[2], d = h[3];

	for (int i = 0; i < 16; i++)
		w[i] = (uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 |
		       (uint32_t)p[4 * i + 2] << 16 | (uint32_t)p[4 * i + 3] << 24;
	for (int i = 0; i < 64; i++) {
		uint32_t f;
		int g;
		if (i < 16) {
			f = (b & c) | (~b & d);
			g = i;
		} else if (i < 32) {
			f = (d & b) | (~d & c);
			g = (5 * i + 1) % 16;
		} else if (i < 48) {
			f = b ^ c ^ d;
			g = (3 * i + 5) % 16;
		} else {
			f = c ^ (b | ~d);
			g = (7 * i) % 16;
		}
		uint32_t t = d;
		d = c;
		c = b;
		uint32_t x = a + f + md5_k[i] + w[g];
		b = b + ((x << md5_r[i]) | (x >> (32 - md5_r[i])));
		a = t;
	}
	h[0] += a;
	h[1] += b;
	h[2] += c;
	h[3] += d;
}

static void md5(const void *data, size_t len, uint8_t out[16])
{
	uint32_t h[4] = { 0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476 };
	const uint8_t *p = data;
	uint8_t tail[128];
	size_t full = len / 64 * 64, rest = len - full, tlen;
	uint64_t bits = (uint64_t)len * 8;

	for (size_t i = 0; i < full; i += 64)
		md5_block(h, p + i);
	memset(tail, 0, sizeof(tail));
	memcpy(tail, p + full, rest);
	tail[rest] = 0x80;
	tlen = rest + 1 + 8 <= 64 ? 64 : 128;
	for (int i = 0; i < 8; i++)
		tail[tlen - 8 + i] = (uint8_t)(bits >> (8 * i));
	for (size_t i = 0; i < tlen; i += 64)
		md5_block(h, tail + i);
	for (int i = 0; i < 4; i++)
		for (int j = 0; j < 4; j++)
			out[4 * i + j] = (uint8_t)(h[i] >> (8 * j));
}

uint64_t relabel_hashmod(const char *val, size_t len, uint64_t modulus)
{
	uint8_t sum[16];
	uint64_t v = 0;

	if (!modulus)
		return 0;
	md5(val, len, sum);
	for (int i = 8; i < 16; i++)
		v = v << 8 | sum[i];
	return v % modulus;
}

/* ---- growable string ---------------------------------------------------- */

struct sb {
	char *p;
	size_t n, cap;
	bool oom;
};

static void sb_add(struct sb *s, const char *d, size_t len)
{
	if (s->oom)
		return;
	if (s->n + len + 1 > s->cap) {
		size_t cap = s->cap ? s->cap : 64;
		while (cap < s->n + len + 1)
			cap *= 2;
		char *np = realloc(s->p, cap);
		if (!np) {
			s->oom = true;
			return;
		}
		s->p = np;
		s->cap = cap;
	}
	memcpy(s->p + s->n, d, len);
	s->n += len;
	s->p[s->n] = '\0';
}

static const char *sb_str(struct sb *s)
{
	if (!s->p && !s->oom)
		sb_add(s, "", 0);
	return s->p;
}

/* ---- regex: RE2 subset -> POSIX ERE ----------------------------------- */

/*
 * Anchor as Prometheus does ("^(?:" re ")$") with a capturing group instead,
 * turn "(?:" into "(" and remember which POSIX groups the user can name.
 */
static int compile_regex(struct rule *r, const char *src, struct pp_err *err)
{
	size_t len = strlen(src), cap = 0;
	struct sb o = { 0 };
	size_t posix = 1;	/* group 1 is our anchor group */
	bool in_br = false, after_quant = false;
	int rc;

	if (len > MAX_REGEX_LEN)
		return pp_errf(err, -EINVAL, "regex longer than %d bytes", MAX_REGEX_LEN);
	sb_add(&o, "^(", 2);
	for (size_t i = 0; i < len; i++) {
		char c = src[i];
		if (in_br) {
			if (c == '[' && i + 1 < len && (src[i + 1] == ':' || src[i + 1] == '.' ||
							src[i + 1] == '=')) {
				/* [:class:] - copy through the closing ":]" */
				const char *end = strstr(src + i + 2, (char[]){ src[i + 1], ']', 0 });
				size_t stop = end ? (size_t)(end - src) + 2 : len;
				sb_add(&o, src + i, stop - i);
				i = stop - 1;
				continue;
			}
			sb_add(&o, &c, 1);
			if (c == ']')
				in_br = false;
			continue;
		}
		/*
		 * RE2 (and so Prometheus) rejects a repetition of a repetition
		 * ("a**", "a+{2}") and counts above 1000; glibc accepts them and
		 * can take exponential time compiling them, so refuse them too.
		 */
		bool quant = c == '*' || c == '+' || c == '?' || c == '{';
		if (quant && after_quant) {
			free(o.p);
			return pp_errf(err, -EINVAL, "regex \"%s\": bad repetition operator at "
				       "offset %zu", src, i);
		}
		if (c == '{') {
			const char *q = src + i + 1;
			while (*q && *q != '}') {
				if (isdigit((unsigned char)*q) && strtoul(q, NULL, 10) > 1000) {
					free(o.p);
					return pp_errf(err, -EINVAL, "regex \"%s\": repeat count "
						       "above 1000", src);
				}
				while (isdigit((unsigned char)*q))
					q++;
				if (*q && *q != '}')
					q++;
			}
		}
		after_quant = quant;
		if (c == '{') {
			/* copy the whole bound so its digits do not reset after_quant */
			const char *end = strchr(src + i, '}');
			size_t stop = end ? (size_t)(end - src) + 1 : len;
			sb_add(&o, src + i, stop - i);
			i = stop - 1;
			continue;
		}
		if (c == '\\' && i + 1 < len) {
			char n = src[i + 1];
			if (n == 'd')
				sb_add(&o, "[0-9]", 5);
			else if (n == 'D')
				sb_add(&o, "[^0-9]", 6);
			else
				sb_add(&o, src + i, 2);
			i++;
			continue;
		}
		if (c == '[') {
			in_br = true;
			sb_add(&o, "[", 1);
			if (i + 1 < len && src[i + 1] == '^')
				sb_add(&o, src + ++i, 1);
			if (i + 1 < len && src[i + 1] == ']')	/* literal ']' first */
				sb_add(&o, src + ++i, 1);
			continue;
		}
		if (c == '(') {
			posix++;
			if (i + 1 < len && src[i + 1] == '?') {
				if (i + 2 < len && src[i + 2] == ':') {
					i += 2;
					sb_add(&o, "(", 1);
					continue;
				}
				free(o.p);
				free(r->group);
				r->group = NULL;
				return pp_errf(err, -EINVAL,
					       "regex \"%s\": \"(?\" flags and named groups are "
					       "not supported (POSIX extended regex)", src);
			}
			if (r->ngroup == cap) {
				cap = cap ? cap * 2 : 8;
				size_t *ng = realloc(r->group, cap * sizeof(*ng));
				if (!ng) {
					free(o.p);
					return pp_errf(err, -ENOMEM, "out of memory");
				}
				r->group = ng;
			}
			r->group[r->ngroup++] = posix;
		}
		sb_add(&o, &c, 1);
	}
	sb_add(&o, ")$", 2);
	if (o.oom) {
		free(o.p);
		return pp_errf(err, -ENOMEM, "out of memory");
	}
	char why[160];
	if (regex_check_cost(src, why, sizeof(why))) {
		free(o.p);
		return pp_errf(err, -EINVAL, "regex \"%s\": %s", src, why);
	}
	rc = regcomp(&r->re, o.p, REG_EXTENDED);
	free(o.p);
	if (rc) {
		char msg[200];
		regerror(rc, &r->re, msg, sizeof(msg));
		return pp_errf(err, -EINVAL, "regex \"%s\": %s", src, msg);
	}
	r->nmatch = r->re.re_nsub + 1;
	return 0;
}

/* ---- template expansion (Go regexp.Expand rules) ---------------------- */

static bool is_word(char c)
{
	return isalnum((unsigned char)c) || c == '_';
}

static void expand(const struct rule *r, const char *tmpl, const char *val,
		   const regmatch_t *m, struct sb *out)
{
	const char *p = tmpl;

	while (*p) {
		const char *d = strchr(p, '$');
		if (!d) {
			sb_add(out, p, strlen(p));
			break;
		}
		sb_add(out, p, (size_t)(d - p));
		p = d + 1;
		if (*p == '$') {
			sb_add(out, "$", 1);
			p++;
			continue;
		}
		bool brace = *p == '{';
		const char *name = p + brace, *e = name;
		while (is_word(*e))
			e++;
		if (e == name || (brace && *e != '}')) {
			sb_add(out, "$", 1);	/* malformed: '$' is literal */
			continue;
		}
		p = e + brace;
		long num = 0;
		for (const char *q = name; q < e; q++) {
			if (!isdigit((unsigned char)*q) || num >= 100000000) {
				num = -1;
				break;
			}
			num = num * 10 + (*q - '0');
		}
		if (name[0] == '0' && e - name > 1)
			num = -1;
		if (num < 0 || (size_t)num > r->ngroup)
			continue;	/* named or missing group: nothing */
		size_t g = num == 0 ? 1 : r->group[num - 1];
		if (g < r->nmatch && m[g].rm_so >= 0)
			sb_add(out, val + m[g].rm_so, (size_t)(m[g].rm_eo - m[g].rm_so));
	}
}

static bool match(const struct rule *r, const char *s, regmatch_t *m)
{
	return regexec(&r->re, s, m ? r->nmatch : 0, m, 0) == 0;
}

/* ---- building rules ------------------------------------------------------ */

static const char *const action_names[] = {
	[RELABEL_REPLACE] = "replace",	   [RELABEL_KEEP] = "keep",
	[RELABEL_DROP] = "drop",	   [RELABEL_LABELMAP] = "labelmap",
	[RELABEL_LABELDROP] = "labeldrop", [RELABEL_LABELKEEP] = "labelkeep",
	[RELABEL_HASHMOD] = "hashmod",
};

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
				while (is_word(*p))
					p++;
				if (p == q || *p != '}')
					return false;
				p++;
			} else {
				const char *q = p;
				while (is_word(*p))
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
	if (r->regex_src)
		regfree(&r->re);
	free(r->regex_src);
	free(r->group);
	free(r->target);
	free(r->replacement);
	memset(r, 0, sizeof(*r));
}

struct relabel *relabel_new(void)
{
	return calloc(1, sizeof(struct relabel));
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

int relabel_add(struct relabel *rl, const struct relabel_rule_spec *s, struct pp_err *err)
{
	struct rule r = { .action = RELABEL_REPLACE };
	const char *act;
	int rc;

	if (rl->n >= MAX_RULES)
		return pp_errf(err, -E2BIG, "more than %d relabel rules", MAX_RULES);
	if (s->action && *s->action) {
		size_t i;
		for (i = 0; i < sizeof(action_names) / sizeof(action_names[0]); i++)
			if (strcasecmp(s->action, action_names[i]) == 0)
				break;
		if (i == sizeof(action_names) / sizeof(action_names[0]))
			return pp_errf(err, -EINVAL, "unknown relabel action \"%s\" (one of replace, "
				       "keep, drop, labelmap, labeldrop, labelkeep, hashmod)",
				       s->action);
		r.action = (enum relabel_action)i;
	}
	act = action_names[r.action];
	if (s->nsource_labels > MAX_SOURCE_LABELS)
		return pp_errf(err, -E2BIG, "more than %d source_labels", MAX_SOURCE_LABELS);
	for (size_t i = 0; i < s->nsource_labels; i++)
		if (!s->source_labels[i] || !pp_label_name_valid(s->source_labels[i]))
			return pp_errf(err, -EINVAL, "source_labels: \"%s\" is not a valid label name",
				       s->source_labels[i] ? s->source_labels[i] : "(null)");
	if ((r.action == RELABEL_REPLACE || r.action == RELABEL_HASHMOD) &&
	    (!s->target_label || !*s->target_label))
		return pp_errf(err, -EINVAL, "relabel action %s requires 'target_label'", act);
	if (r.action == RELABEL_REPLACE && !target_template_valid(s->target_label))
		return pp_errf(err, -EINVAL, "\"%s\" is invalid 'target_label' for replace action",
			       s->target_label);
	if (r.action == RELABEL_HASHMOD && !pp_label_name_valid(s->target_label))
		return pp_errf(err, -EINVAL, "\"%s\" is invalid 'target_label' for hashmod action",
			       s->target_label);
	if (r.action == RELABEL_HASHMOD && s->modulus == 0)
		return pp_errf(err, -EINVAL, "relabel action hashmod requires a non-zero 'modulus'");
	if (r.action == RELABEL_LABELMAP && s->replacement &&
	    !target_template_valid(s->replacement))
		return pp_errf(err, -EINVAL, "\"%s\" is invalid 'replacement' for labelmap action",
			       s->replacement);
	if ((r.action == RELABEL_LABELDROP || r.action == RELABEL_LABELKEEP) &&
	    (s->nsource_labels || (s->target_label && *s->target_label) || s->modulus ||
	     (s->separator && strcmp(s->separator, ";")) ||
	     (s->replacement && strcmp(s->replacement, "$1"))))
		return pp_errf(err, -EINVAL, "%s action requires only 'regex', and no other fields",
			       act);

	r.modulus = s->modulus;
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
	rc = compile_regex(&r, r.regex_src, err);
	if (rc) {
		free(r.regex_src);
		r.regex_src = NULL;	/* nothing compiled to free */
		rule_free(&r);
		return rc;
	}
	if (rl->n == rl->cap) {
		size_t cap = rl->cap ? rl->cap * 2 : 8;
		struct rule *nv = realloc(rl->v, cap * sizeof(*nv));
		if (!nv)
			goto oom;
		rl->v = nv;
		rl->cap = cap;
	}
	rl->v[rl->n++] = r;
	return 0;
oom:
	if (r.regex_src && !r.nmatch) {
		free(r.regex_src);
		r.regex_src = NULL;
	}
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

static int apply_one(const struct rule *r, struct pp_labels *l, regmatch_t *m)
{
	struct sb val = { 0 }, t = { 0 }, res = { 0 };
	int ret = 1;

	for (size_t i = 0; i < r->nsource; i++) {
		const char *v = pp_labels_get(l, r->source[i]);
		if (i)
			sb_add(&val, r->separator, strlen(r->separator));
		if (v)
			sb_add(&val, v, strlen(v));
	}
	const char *vs = sb_str(&val);
	if (!vs) {
		ret = -ENOMEM;
		goto out;
	}

	switch (r->action) {
	case RELABEL_DROP:
		ret = !match(r, vs, NULL);
		break;
	case RELABEL_KEEP:
		ret = match(r, vs, NULL);
		break;
	case RELABEL_REPLACE:
		if (!match(r, vs, m))
			break;
		expand(r, r->target, vs, m, &t);
		expand(r, r->replacement, vs, m, &res);
		if (!sb_str(&t) || !sb_str(&res)) {
			ret = -ENOMEM;
			break;
		}
		if (!pp_label_name_valid(t.p))
			break;
		if (set_or_del(l, t.p, res.p))
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
			if (!match(r, snap.v[i].name, m))
				continue;
			res.n = 0;
			expand(r, r->replacement, snap.v[i].name, m, &res);
			if (!sb_str(&res))
				ret = -ENOMEM;
			else if (pp_label_name_valid(res.p) && set_or_del(l, res.p, snap.v[i].value))
				ret = -ENOMEM;
		}
		pp_labels_free(&snap);
		break;
	}
	case RELABEL_LABELDROP:
	case RELABEL_LABELKEEP:
		for (size_t i = l->n; i-- > 0;) {
			bool mt = match(r, l->v[i].name, NULL);
			if (mt == (r->action == RELABEL_LABELDROP))
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
	regmatch_t *m;
	int ret = 1;

	for (size_t i = 0; r && i < r->n; i++)
		if (r->v[i].nmatch > maxm)
			maxm = r->v[i].nmatch;
	m = calloc(maxm, sizeof(*m));
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

/* ---- YAML ---------------------------------------------------------------- */

static bool y_null(const yaml_node_t *n)
{
	if (!n || n->type != YAML_SCALAR_NODE)
		return false;
	if (n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
		return false;
	const char *s = (const char *)n->data.scalar.value;
	return !*s || !strcmp(s, "~") || !strcmp(s, "null") || !strcmp(s, "Null") ||
	       !strcmp(s, "NULL");
}

static int yerr(struct pp_err *err, const char *name, const yaml_node_t *n, const char *fmt,
		const char *a)
{
	char msg[300];
	snprintf(msg, sizeof(msg), fmt, a);
	return pp_errf(err, -EINVAL, "%s:%zu:%zu: %s", name, n->start_mark.line + 1,
		       n->start_mark.column + 1, msg);
}

static int parse_rule(struct relabel *r, yaml_document_t *doc, yaml_node_t *map,
		      const char *name, struct pp_err *err)
{
	struct relabel_rule_spec s = { 0 };
	const char *src[MAX_SOURCE_LABELS];
	int rc;

	if (map->type != YAML_MAPPING_NODE)
		return yerr(err, name, map, "%s", "expected a mapping (one relabel rule)");
	for (yaml_node_pair_t *p = map->data.mapping.pairs.start;
	     p < map->data.mapping.pairs.top; p++) {
		yaml_node_t *k = yaml_document_get_node(doc, p->key);
		yaml_node_t *v = yaml_document_get_node(doc, p->value);
		if (!k || !v || k->type != YAML_SCALAR_NODE)
			return yerr(err, name, map, "%s", "expected string keys");
		const char *key = (const char *)k->data.scalar.value;
		if (!strcmp(key, "source_labels")) {
			if (y_null(v))
				continue;
			if (v->type != YAML_SEQUENCE_NODE)
				return yerr(err, name, v, "%s", "source_labels: expected a list");
			for (yaml_node_item_t *it = v->data.sequence.items.start;
			     it < v->data.sequence.items.top; it++) {
				yaml_node_t *e = yaml_document_get_node(doc, *it);
				if (!e || e->type != YAML_SCALAR_NODE)
					return yerr(err, name, v, "%s",
						    "source_labels: expected label names");
				if (s.nsource_labels == MAX_SOURCE_LABELS)
					return yerr(err, name, v, "%s", "source_labels: too many");
				src[s.nsource_labels++] = (const char *)e->data.scalar.value;
			}
			s.source_labels = src;
			continue;
		}
		static const char *const known[] = { "separator", "regex", "target_label",
						     "replacement", "action", "modulus" };
		bool ok = false;
		for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
			ok |= !strcmp(key, known[i]);
		if (!ok)
			return yerr(err, name, k, "unknown relabel key \"%s\"", key);
		if (v->type != YAML_SCALAR_NODE)
			return yerr(err, name, v, "%s: expected a scalar", key);
		const char *val = y_null(v) ? NULL : (const char *)v->data.scalar.value;
		if (!strcmp(key, "separator"))
			s.separator = val;
		else if (!strcmp(key, "regex"))
			s.regex = val;
		else if (!strcmp(key, "target_label"))
			s.target_label = val;
		else if (!strcmp(key, "replacement"))
			s.replacement = val;
		else if (!strcmp(key, "action"))
			s.action = val;
		else if (!strcmp(key, "modulus")) {
			char *end;
			if (!val || !isdigit((unsigned char)val[0]))
				return yerr(err, name, v, "modulus: expected a positive integer, got \"%s\"",
					    (const char *)v->data.scalar.value);
			errno = 0;
			s.modulus = strtoull(val, &end, 10);
			if (errno || *end)
				return yerr(err, name, v, "modulus: expected a positive integer, got \"%s\"",
					    val);
		}
	}
	rc = relabel_add(r, &s, err);
	if (rc)
		pp_err_wrap(err, "%s:%zu:%zu", name, map->start_mark.line + 1,
			    map->start_mark.column + 1);
	return rc;
}

int relabel_parse_yaml(struct relabel *r, const char *buf, size_t len, const char *name,
		       struct pp_err *err)
{
	yaml_parser_t parser;
	yaml_document_t doc;
	yaml_node_t *root;
	int rc = 0;

	if (!yaml_parser_initialize(&parser))
		return pp_errf(err, -ENOMEM, "out of memory");
	yaml_parser_set_input_string(&parser, (const unsigned char *)buf, len);
	if (!yaml_parser_load(&parser, &doc)) {
		rc = pp_errf(err, -EINVAL, "%s:%zu:%zu: %s", name, parser.problem_mark.line + 1,
			     parser.problem_mark.column + 1,
			     parser.problem ? parser.problem : "YAML error");
		yaml_parser_delete(&parser);
		return rc;
	}
	root = yaml_document_get_root_node(&doc);
	if (root && !y_null(root)) {
		if (root->type != YAML_SEQUENCE_NODE) {
			rc = yerr(err, name, root, "%s", "expected a list of relabel rules");
		} else {
			for (yaml_node_item_t *it = root->data.sequence.items.start;
			     !rc && it < root->data.sequence.items.top; it++)
				rc = parse_rule(r, &doc, yaml_document_get_node(&doc, *it), name,
						err);
		}
	}
	yaml_document_delete(&doc);
	yaml_parser_delete(&parser);
	return rc;
}

int regex_check_cost(const char *src, char *why, size_t wlen)
{
	size_t len = strlen(src);
	int counted = 0;
	bool after_quant = false;

	if (len > 1024) {
		snprintf(why, wlen, "longer than 1024 bytes (%zu)", len);
		return -EINVAL;
	}
	for (const char *p = src; *p; p++) {
		if (*p == '\\' && p[1]) {	/* an escaped character is a literal */
			p++;
			after_quant = false;
			continue;
		}
		if (*p == '[') {		/* a bracket expression: no operators inside */
			const char *q = p + 1;
			if (*q == '^')
				q++;
			if (*q == ']')
				q++;
			while (*q && *q != ']')
				q++;
			p = *q ? q : p;
			after_quant = false;
			continue;
		}
		bool quant = *p == '*' || *p == '+' || *p == '?' || *p == '{';
		if (quant && after_quant) {
			snprintf(why, wlen, "a repetition right after another at offset %zu "
				 "(its compilation can take unbounded memory)", (size_t)(p - src));
			return -EINVAL;
		}
		if (*p == '{') {
			char *end;
			unsigned long a = strtoul(p + 1, &end, 10), b = a;
			if (*end == ',')
				b = end[1] == '}' ? a : strtoul(end + 1, &end, 10);
			if (a > 255 || b > 255) {
				snprintf(why, wlen, "a repetition count above 255 at offset %zu",
					 (size_t)(p - src));
				return -EINVAL;
			}
			if (++counted > 2) {
				snprintf(why, wlen, "more than two counted repetitions {..} (their "
					 "copies multiply)");
				return -EINVAL;
			}
			const char *close = strchr(p, '}');
			if (close)
				p = close;
		}
		after_quant = quant;
	}
	return 0;
}
