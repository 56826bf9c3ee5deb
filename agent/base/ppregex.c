/*
 * ppregex.c - RE2 syntax on PCRE2 (see ppregex.h).
 *
 * The source is parsed here, once, as Go's regexp/syntax parses it, and
 * written out as a PCRE2 pattern that means the same; PCRE2 then only
 * ever sees constructs whose meaning both agree on, so nothing PCRE2-only
 * can slip through as "valid".
 *
 * Why one file of ~800 lines: the parser (most of it) and compile()
 * are one concept, the RE2 dialect. The rewritten pattern means what RE2
 * means only under the compile options chosen below (DOLLAR_ENDONLY,
 * ALT_CIRCUMFLEX, NEVER_UCP, LF newlines) and with the group numbering
 * the parser counted (checked after compiling); split, each half would
 * depend on the other's unwritten assumptions.
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "ppregex.h"
#include "grow.h"

#include <errno.h>
#include <stdarg.h>
#include <pcre2.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * Bounds of one match. The match limit counts backtracking steps (reached
 * in about 0.1 s by exponential backtracking on a loaded machine,
 * tests/relabel run_limits); the heap limit (KiB) bounds the backtracking
 * frames; the depth limit bounds nesting. RE2 itself runs in linear time,
 * so a pattern and subject that need more than this are hostile, not
 * useful.
 */
#define MATCH_LIMIT 1000000u
#define DEPTH_LIMIT 100000u
#define HEAP_LIMIT_KIB (32u * 1024)
#define MAX_REPEAT 1000 /* RE2's */
#define MAX_GROUPS 1000

struct pp_regex {
	pcre2_code *code;
	pcre2_match_context *mctx; /* limits; read-only once built */
	size_t ngroups;
	char **names; /* names[i] for group i+1, NULL if unnamed */
};

/* ---- output buffer ------------------------------------------------------- */

static void puts_(struct pp_buf *o, const char *s)
{
	pp_buf_add(o, s, strlen(s));
}

/* Insert s at offset at (<= o->n). */
static void insert(struct pp_buf *o, size_t at, const char *s)
{
	size_t len = strlen(s), tail = o->n - at;

	pp_buf_add(o, s, len); /* grows the buffer; the bytes are moved below */
	if (o->oom)
		return;
	memmove(o->p + at + len, o->p + at, tail);
	memcpy(o->p + at, s, len);
}

static void put_cp(struct pp_buf *o, unsigned long cp)
{
	char b[16];
	snprintf(b, sizeof(b), "\\x{%lx}", cp);
	puts_(o, b);
}

/* ---- the RE2 parser ------------------------------------------------------- */

struct parser {
	const char *s;
	size_t len, i;
	struct pp_buf o;
	char *why;
	size_t wlen;
	size_t ngroups;
	char **names;
	size_t ncap;
};

__attribute__((format(printf, 3, 4))) static int bad(struct parser *p, size_t at, const char *fmt,
						     ...)
{
	char msg[200];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	snprintf(p->why, p->wlen, "%s at offset %zu (regexes are RE2 syntax, as in Prometheus)",
		 msg, at);
	return -EINVAL;
}

/* One more capturing group, named (name: malloc'd, owned from here on) or
 * not (NULL): numbered as written, at most MAX_GROUPS. */
static int add_group(struct parser *p, size_t at, char *name)
{
	if (p->ngroups >= MAX_GROUPS) {
		free(name);
		return bad(p, at, "more than %d groups", MAX_GROUPS);
	}
	if (pp_grow(&p->names, &p->ncap, p->ngroups + 1, sizeof(*p->names), 8)) {
		free(name);
		return -ENOMEM;
	}
	p->names[p->ngroups++] = name;
	return 0;
}

static bool is_alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Escapes PCRE2 knows and RE2 does not: say what they are. */
static const char *pcre_only_escape(char c)
{
	switch (c) {
	case 'C':
		return "\\C (one byte)";
	case 'K':
		return "\\K (match reset)";
	case 'G':
		return "\\G (end of previous match)";
	case 'Z':
		return "\\Z (use \\z)";
	case 'R':
		return "\\R (newline sequence)";
	case 'X':
		return "\\X (grapheme cluster)";
	case 'h':
	case 'H':
		return "\\h / \\H (horizontal space)";
	case 'N':
		return "\\N (not a newline)";
	case 'k':
		return "named backreference \\k";
	case 'g':
		return "backreference \\g";
	case 'e':
		return "\\e (escape character)";
	case 'c':
		return "\\c (control character)";
	case 'o':
		return "\\o{...} (use \\x{...})";
	case 'u':
	case 'U':
	case 'L':
	case 'l':
		return "case-changing escape";
	case 'E':
		return "\\E without \\Q";
	case 'Q':
		return "\\Q inside a character class";
	default:
		return NULL;
	}
}

static int name_ok(const char *s, size_t n)
{
	if (!n)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!is_alnum(s[i]) && s[i] != '_')
			return 0;
	return 1;
}

/*
 * One escape after '\' at p->i (pointing at the character after '\').
 * in_class: inside [...], where only characters and classes make sense.
 */
static int escape(struct parser *p, bool in_class)
{
	size_t at = p->i - 1;
	if (p->i >= p->len)
		return bad(p, at, "trailing backslash");
	char c = p->s[p->i++];

	if (c >= '1' && c <= '9') {
		/* Go: a lone \1-\9 is a backreference (refused); \12 is octal */
		if (c > '7' || p->i >= p->len || p->s[p->i] < '0' || p->s[p->i] > '7')
			return bad(p, at, "backreference \\%c is not supported", c);
	}
	if (c >= '0' && c <= '7') {
		unsigned long v = (unsigned long)(c - '0');
		for (int k = 0; k < 2 && p->i < p->len && p->s[p->i] >= '0' && p->s[p->i] <= '7';
		     k++)
			v = v * 8 + (unsigned long)(p->s[p->i++] - '0');
		put_cp(&p->o, v);
		return 0;
	}
	switch (c) {
	case 'a':
		put_cp(&p->o, 7);
		return 0;
	case 'f':
		put_cp(&p->o, 12);
		return 0;
	case 't':
		put_cp(&p->o, 9);
		return 0;
	case 'n':
		put_cp(&p->o, 10);
		return 0;
	case 'r':
		put_cp(&p->o, 13);
		return 0;
	case 'v':
		put_cp(&p->o, 11);
		return 0; /* PCRE2's \v is a class */
	case 'x': {
		unsigned long v = 0;
		if (p->i < p->len && p->s[p->i] == '{') {
			size_t j = p->i + 1, nd = 0;
			while (j < p->len && hexval(p->s[j]) >= 0) {
				v = v * 16 + (unsigned long)hexval(p->s[j++]);
				if (++nd > 8)
					break;
			}
			if (!nd || j >= p->len || p->s[j] != '}' || v > 0x10ffff)
				return bad(p, at, "invalid escape \\x{...}");
			p->i = j + 1;
		} else {
			if (p->i + 1 >= p->len || hexval(p->s[p->i]) < 0 ||
			    hexval(p->s[p->i + 1]) < 0)
				return bad(p, at,
					   "invalid escape \\x (two hex digits or \\x{...})");
			v = (unsigned long)(hexval(p->s[p->i]) * 16 + hexval(p->s[p->i + 1]));
			p->i += 2;
		}
		put_cp(&p->o, v);
		return 0;
	}
	case 'd':
	case 'D':
	case 'w':
	case 'W':
		pp_buf_add(&p->o, p->s + at, 2);
		return 0;
	case 's': /* RE2's \s is [\t\n\f\r ]: no vertical tab */
		puts_(&p->o, in_class ? "\\t\\n\\f\\r " : "[\\t\\n\\f\\r ]");
		return 0;
	case 'S':
		puts_(&p->o, in_class ? "\\x{0}-\\x{8}\\x{b}\\x{e}-\\x{1f}\\x{21}-\\x{10ffff}"
				      : "[^\\t\\n\\f\\r ]");
		return 0;
	case 'p':
	case 'P': {
		size_t st = p->i;
		if (st >= p->len)
			return bad(p, at, "invalid Unicode class \\%c", c);
		if (p->s[st] == '{') {
			size_t j = st + 1;
			if (j < p->len && p->s[j] == '^')
				j++;
			size_t ns = j;
			while (j < p->len && (is_alnum(p->s[j]) || p->s[j] == '_'))
				j++;
			/* RE2 names: categories (Lu) and scripts (Greek), "Any" -
			 * capitalised; PCRE2's loose names and X-properties are not */
			if (j == ns || j >= p->len || p->s[j] != '}' || p->s[ns] < 'A' ||
			    p->s[ns] > 'Z' || (p->s[ns] == 'X' && j - ns == 3))
				return bad(p, at, "invalid Unicode class \\%c{...}", c);
			p->i = j + 1;
		} else {
			if (p->s[st] < 'A' || p->s[st] > 'Z')
				return bad(p, at, "invalid Unicode class \\%c", c);
			p->i = st + 1;
		}
		pp_buf_add(&p->o, p->s + at, p->i - at);
		return 0;
	}
	case 'A':
	case 'z':
	case 'b':
	case 'B':
		if (in_class)
			return bad(p, at, "\\%c inside a character class", c);
		pp_buf_add(&p->o, p->s + at, 2);
		return 0;
	}
	if ((unsigned char)c < 0x80 && !is_alnum(c)) {
		pp_buf_add(&p->o, p->s + at, 2); /* escaped punctuation: the literal */
		return 0;
	}
	const char *what = pcre_only_escape(c);
	if (what)
		return bad(p, at, "%s is not supported", what);
	if ((unsigned char)c >= 0x80)
		return bad(p, at, "invalid escape (backslash before a non-ASCII character)");
	return bad(p, at, "invalid escape \\%c", c);
}

static const char *const posix_classes[] = {
	"alnum", "alpha", "ascii", "blank", "cntrl", "digit", "graph",
	"lower", "print", "punct", "space", "upper", "word",  "xdigit",
};

/* A bracket expression; p->i is just after '['. */
static int char_class(struct parser *p)
{
	size_t at = p->i - 1;
	bool first = true;

	pp_buf_add(&p->o, "[", 1);
	if (p->i < p->len && p->s[p->i] == '^')
		pp_buf_add(&p->o, p->s + p->i++, 1);
	for (;;) {
		if (p->i >= p->len)
			return bad(p, at, "missing closing ]");
		char c = p->s[p->i];
		if (c == ']' && !first) {
			p->i++;
			pp_buf_add(&p->o, "]", 1);
			return 0;
		}
		first = false;
		if (c == ']') {
			p->i++;
			puts_(&p->o, "\\]");
		} else if (c == '[' && p->i + 1 < p->len && p->s[p->i + 1] == ':') {
			/* [:name:] or [:^name:] when it closes; a literal '[' otherwise */
			const char *end = NULL;
			for (size_t j = p->i + 2; j + 1 < p->len; j++) {
				if (p->s[j] == ':' && p->s[j + 1] == ']') {
					end = p->s + j;
					break;
				}
				if (p->s[j] == ']')
					break;
			}
			if (!end) {
				p->i++;
				puts_(&p->o, "\\[");
				continue;
			}
			const char *nm = p->s + p->i + 2;
			if (*nm == '^')
				nm++;
			bool ok = false;
			for (size_t k = 0; k < sizeof(posix_classes) / sizeof(*posix_classes); k++)
				ok |= strlen(posix_classes[k]) == (size_t)(end - nm) &&
				      !strncmp(nm, posix_classes[k], (size_t)(end - nm));
			if (!ok)
				return bad(p, p->i, "invalid character class %.*s",
					   (int)(end + 2 - (p->s + p->i)), p->s + p->i);
			pp_buf_add(&p->o, p->s + p->i, (size_t)(end + 2 - (p->s + p->i)));
			p->i = (size_t)(end + 2 - p->s);
		} else if (c == '[') {
			p->i++;
			puts_(&p->o, "\\["); /* PCRE2 reads [. and [= as collating */
		} else if (c == '\\') {
			p->i++;
			int rc = escape(p, true);
			if (rc)
				return rc;
		} else if (c == ':' || c == '.' || c == '=') {
			/* PCRE2 reads "[:x:]" as a misplaced POSIX class; RE2 as text */
			pp_buf_add(&p->o, "\\", 1);
			pp_buf_add(&p->o, p->s + p->i++, 1);
		} else {
			pp_buf_add(&p->o, p->s + p->i++, 1);
		}
	}
}

/* "{n}", "{n,}" or "{n,m}" at p->i: 1 and the counts, 0 when it is a literal. */
static int counted(struct parser *p, long *lo, long *hi)
{
	size_t j = p->i + 1;
	long a = 0, b;
	size_t nd = 0;

	while (j < p->len && p->s[j] >= '0' && p->s[j] <= '9') {
		if (a <= 100000)
			a = a * 10 + (p->s[j] - '0');
		j++;
		nd++;
	}
	if (!nd || j >= p->len)
		return 0;
	b = a;
	if (p->s[j] == ',') {
		j++;
		if (j < p->len && p->s[j] == '}') {
			b = -1;
		} else {
			size_t md = 0;
			b = 0;
			while (j < p->len && p->s[j] >= '0' && p->s[j] <= '9') {
				if (b <= 100000)
					b = b * 10 + (p->s[j] - '0');
				j++;
				md++;
			}
			if (!md)
				return 0;
		}
	}
	if (j >= p->len || p->s[j] != '}')
		return 0;
	*lo = a;
	*hi = b;
	return (int)(j + 1 - p->i);
}

/* "(?" at p->i - 1 ('(') : groups, flags, and everything RE2 refuses. */
static int special_group(struct parser *p, size_t *depth)
{
	size_t at = p->i - 1;
	size_t j = p->i + 1; /* after "(?" */
	char c = j < p->len ? p->s[j] : '\0';

	if (c == 'P' || c == '<') {
		size_t ns = j + (c == 'P' ? 2 : 1);
		if (c == 'P' && (j + 1 >= p->len || p->s[j + 1] != '<')) {
			if (j + 1 < p->len && p->s[j + 1] == '=')
				return bad(p, at, "named backreference (?P=name) is not supported");
			if (j + 1 < p->len && p->s[j + 1] == '>')
				return bad(p, at, "subroutine call (?P>name) is not supported");
			return bad(p, at, "invalid group (?P");
		}
		if (c == '<' && j + 1 < p->len && (p->s[j + 1] == '=' || p->s[j + 1] == '!'))
			return bad(p, at, "lookbehind %s is not supported",
				   p->s[j + 1] == '=' ? "(?<=" : "(?<!");
		const char *gt = memchr(p->s + ns, '>', p->len - ns);
		if (!gt)
			return bad(p, at, "invalid named capture (missing >)");
		size_t nl = (size_t)(gt - (p->s + ns));
		if (!name_ok(p->s + ns, nl))
			return bad(p, at, "invalid named capture name \"%.*s\"", (int)nl,
				   p->s + ns);
		/* a name may repeat, as in Go (RE2 proper refuses it): $name is
		 * the first group of that name */
		char *name = strndup(p->s + ns, nl);
		int rc = name ? add_group(p, at, name) : -ENOMEM;
		if (rc < 0)
			return rc;
		pp_buf_add(&p->o, "(", 1); /* numbered as written; the name stays here */
		p->i = (size_t)(gt + 1 - p->s);
		(*depth)++;
		return 1;
	}
	switch (c) {
	case '=':
		return bad(p, at, "lookahead (?= is not supported");
	case '!':
		return bad(p, at, "negative lookahead (?! is not supported");
	case '>':
		return bad(p, at, "atomic group (?> is not supported");
	case '|':
		return bad(p, at, "branch reset group (?| is not supported");
	case '#':
		return bad(p, at, "comment (?# is not supported");
	case '(':
		return bad(p, at, "conditional group (?( is not supported");
	case '&':
		return bad(p, at, "subroutine call (?& is not supported");
	case 'R':
		return bad(p, at, "recursion (?R) is not supported");
	case 'C':
		return bad(p, at, "callout (?C is not supported");
	case '\'':
		return bad(p, at, "named group (?'name' is not supported (use (?P<name>...))");
	case '*':
		return bad(p, at, "non-atomic assertion (?* is not supported");
	}
	if ((c >= '0' && c <= '9') || c == '+' ||
	    (c == '-' && j + 1 < p->len && p->s[j + 1] >= '0' && p->s[j + 1] <= '9'))
		return bad(p, at, "recursion / subroutine call (?%c is not supported", c);

	/* flags, as Go's parsePerlFlags: [imsU]* (- [imsU]+)? then ':' or ')' */
	bool neg = false, saw = false;
	for (; j < p->len; j++) {
		c = p->s[j];
		if (c == 'i' || c == 'm' || c == 's' || c == 'U') {
			saw = true;
			continue;
		}
		if (c == '-' && !neg) {
			neg = true;
			saw = false;
			continue;
		}
		if ((c == ':' || c == ')') && (!neg || saw))
			break;
		if (c == ':' || c == ')' || c == '-')
			return bad(p, at, "missing flags after '-' in (?");
		return bad(p, at, "flag '%c' is not supported (RE2 has i, m, s, U)", c);
	}
	if (j >= p->len)
		return bad(p, at, "missing closing )");
	pp_buf_add(&p->o, p->s + at, j + 1 - at);
	p->i = j + 1;
	if (c == ':') {
		(*depth)++;
		return 1;
	}
	return 0; /* (?flags): no group, nothing to repeat */
}

static int translate(struct parser *p)
{
	size_t depth = 0;
	bool can_repeat = false, after_repeat = false;
	/* output offset of the assertion (^ $ \b \B \A \z) just written, or
	 * -1: RE2 repeats an assertion ("^*"), PCRE2 only a group holding one */
	ssize_t assert_out = -1;

	while (p->i < p->len) {
		size_t at = p->i;
		char c = p->s[p->i];
		bool was_repeat = after_repeat;
		ssize_t was_assert = assert_out;
		after_repeat = false;
		assert_out = -1;

		if (c == '*' || c == '+' || c == '?' ||
		    (c == '{' && counted(p, &(long){ 0 }, &(long){ 0 }))) {
			long lo = 0, hi = 0;
			size_t n = 1;
			if (c == '{') {
				n = (size_t)counted(p, &lo, &hi);
				if (lo > MAX_REPEAT || hi > MAX_REPEAT)
					return bad(p, at, "repeat count above %d", MAX_REPEAT);
				if (hi >= 0 && hi < lo)
					return bad(p, at, "invalid repeat count (min > max)");
			}
			if (was_repeat)
				return bad(p, at,
					   c == '+' ? "possessive quantifier (%.*s after a "
						      "repetition) is not supported"
						    : "invalid nested repetition "
						      "operator %.*s",
					   (int)n, p->s + at);
			if (!can_repeat)
				return bad(p, at, "missing argument to repetition operator %.*s",
					   (int)n, p->s + at);
			if (was_assert >= 0) {
				insert(&p->o, (size_t)was_assert, "(?:");
				pp_buf_add(&p->o, ")", 1);
			}
			pp_buf_add(&p->o, p->s + at, n);
			p->i += n;
			if (p->i < p->len && p->s[p->i] == '?') /* non-greedy */
				pp_buf_add(&p->o, p->s + p->i++, 1);
			after_repeat = true;
			continue;
		}
		p->i++;
		switch (c) {
		case '\\':
			if (p->i < p->len && p->s[p->i] == 'Q') {
				/* \Q...\E: literal text */
				const char *e = NULL;
				size_t st = p->i + 1;
				for (size_t j = st; j + 1 < p->len; j++)
					if (p->s[j] == '\\' && p->s[j + 1] == 'E') {
						e = p->s + j;
						break;
					}
				size_t stop = e ? (size_t)(e - p->s) : p->len;
				for (size_t j = st; j < stop; j++) {
					unsigned char b = (unsigned char)p->s[j];
					if (b >= 0x80 || is_alnum((char)b))
						pp_buf_add(&p->o, p->s + j, 1);
					else
						put_cp(&p->o, b);
				}
				if (stop > st)
					can_repeat = true;
				p->i = e ? stop + 2 : p->len;
				continue;
			}
			{
				size_t before = p->o.n;
				bool as = p->i < p->len && strchr("AzbB", p->s[p->i]) && p->s[p->i];
				int rc = escape(p, false);
				if (rc)
					return rc;
				if (as)
					assert_out = (ssize_t)before;
			}
			can_repeat = true;
			break;
		case '[': {
			int rc = char_class(p);
			if (rc)
				return rc;
			can_repeat = true;
			break;
		}
		case '(':
			if (p->i < p->len && p->s[p->i] == '*')
				return bad(p, at, "(*VERB) and (*OPTION) are not supported");
			if (p->i < p->len && p->s[p->i] == '?') {
				int rc = special_group(p, &depth);
				if (rc < 0)
					return rc;
				can_repeat = false;
				break;
			}
			int grc = add_group(p, at, NULL);
			if (grc < 0)
				return grc;
			pp_buf_add(&p->o, "(", 1);
			depth++;
			can_repeat = false;
			break;
		case ')':
			if (!depth)
				return bad(p, at, "unexpected )");
			depth--;
			pp_buf_add(&p->o, ")", 1);
			can_repeat = true;
			break;
		case '|':
			pp_buf_add(&p->o, "|", 1);
			can_repeat = false;
			break;
		case '{': /* not a repetition (checked above): a literal */
			puts_(&p->o, "\\{");
			can_repeat = true;
			break;
		default:
			if (c == '^' || c == '$')
				assert_out = (ssize_t)p->o.n;
			pp_buf_add(&p->o, &c, 1);
			can_repeat = true;
			break;
		}
	}
	if (depth)
		return bad(p, p->len, "missing closing )");
	return p->o.oom ? -ENOMEM : 0;
}

/* ---- compile / match ------------------------------------------------------ */

void pp_regex_free(struct pp_regex *re)
{
	if (!re)
		return;
	pcre2_code_free(re->code);
	pcre2_match_context_free(re->mctx);
	for (size_t i = 0; i < re->ngroups; i++)
		free(re->names[i]);
	free(re->names);
	free(re);
}

static int compile(struct pp_regex **out, const char *src, unsigned flags, char *why, size_t wlen)
{
	struct parser p = { .s = src, .len = strlen(src), .why = why, .wlen = wlen };
	struct pp_regex *re = NULL;
	pcre2_compile_context *cctx = NULL;
	int rc;

	*out = NULL;
	if (wlen)
		why[0] = '\0';
	if (p.len > PP_REGEX_MAX_LEN) {
		snprintf(why, wlen, "longer than %d bytes", PP_REGEX_MAX_LEN);
		return -EINVAL;
	}
	if (flags & PP_REGEX_FULL)
		puts_(&p.o, "\\A(?s:");
	rc = translate(&p);
	if (flags & PP_REGEX_FULL)
		puts_(&p.o, ")\\z");
	if (!rc && p.o.oom)
		rc = -ENOMEM;
	if (rc)
		goto fail;
	re = calloc(1, sizeof(*re));
	cctx = pcre2_compile_context_create(NULL);
	if (!re || !cctx) {
		rc = -ENOMEM;
		goto fail;
	}
	/* "." and (?m) as in Go; with ALT_CIRCUMFLEX, (?m)^ also matches
	 * after a newline that ends the text, as Go's does */
	pcre2_set_newline(cctx, PCRE2_NEWLINE_LF);
	pcre2_set_parens_nest_limit(cctx, 1000); /* Go's nesting limit */
	int ec;
	PCRE2_SIZE eoff;
	re->code = pcre2_compile((PCRE2_SPTR)p.o.p, p.o.n,
				 PCRE2_UTF | PCRE2_DOLLAR_ENDONLY | PCRE2_NEVER_BACKSLASH_C |
					 PCRE2_NEVER_UCP | PCRE2_ALT_CIRCUMFLEX,
				 &ec, &eoff, cctx);
	if (!re->code) {
		PCRE2_UCHAR msg[160];
		pcre2_get_error_message(ec, msg, sizeof(msg));
		/* offsets are in the rewritten pattern: name the message only */
		snprintf(why, wlen, "%s", (const char *)msg);
		rc = -EINVAL;
		goto fail;
	}
	uint32_t ncap = 0;
	pcre2_pattern_info(re->code, PCRE2_INFO_CAPTURECOUNT, &ncap);
	if (ncap != p.ngroups) { /* the rewrite must keep the numbering */
		snprintf(why, wlen, "internal error: %u groups compiled, %zu written", ncap,
			 p.ngroups);
		rc = -EINVAL;
		goto fail;
	}
	re->mctx = pcre2_match_context_create(NULL);
	if (!re->mctx) {
		rc = -ENOMEM;
		goto fail;
	}
	pcre2_set_match_limit(re->mctx, MATCH_LIMIT);
	pcre2_set_depth_limit(re->mctx, DEPTH_LIMIT);
	pcre2_set_heap_limit(re->mctx, HEAP_LIMIT_KIB);
	re->ngroups = p.ngroups;
	re->names = p.names;
	p.names = NULL;
	pcre2_compile_context_free(cctx);
	free(p.o.p);
	*out = re;
	return 0;
fail:
	if (rc == -ENOMEM)
		snprintf(why, wlen, "out of memory");
	pcre2_compile_context_free(cctx);
	pp_regex_free(re);
	for (size_t i = 0; i < p.ngroups && p.names; i++)
		free(p.names[i]);
	free(p.names);
	free(p.o.p);
	return rc;
}

int pp_regex_new(const struct pp_regex_opts *o, struct pp_regex **out, struct pp_err *err)
{
	char why[sizeof(err->msg)];
	int rc;

	*out = NULL;
	if (!o->src)
		return pp_errf(err, -EINVAL, "no regex");
	rc = compile(out, o->src, o->flags, why, sizeof(why));
	return rc ? pp_errf(err, rc, "%s", why) : 0;
}

size_t pp_regex_groups(const struct pp_regex *re)
{
	return re->ngroups;
}

int pp_regex_group_index(const struct pp_regex *re, const char *name, size_t len)
{
	for (size_t i = 0; i < re->ngroups; i++)
		if (re->names[i] && strlen(re->names[i]) == len && !memcmp(re->names[i], name, len))
			return (int)i + 1;
	return -1;
}

/* Length of the valid UTF-8 sequence at s (Go's rules: no overlongs, no
 * surrogates, <= U+10FFFF), or 0 when the byte starts none. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	unsigned char c = s[0];
	if (c < 0x80)
		return 1;
	size_t need;
	uint32_t cp, min;
	if (c >= 0xc2 && c <= 0xdf) {
		need = 1, cp = c & 0x1f, min = 0x80;
	} else if ((c & 0xf0) == 0xe0) {
		need = 2, cp = c & 0x0f, min = 0x800;
	} else if (c >= 0xf0 && c <= 0xf4) {
		need = 3, cp = c & 0x07, min = 0x10000;
	} else {
		return 0;
	}
	if (n < need + 1)
		return 0;
	for (size_t k = 1; k <= need; k++) {
		if ((s[k] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[k] & 0x3f);
	}
	if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return need + 1;
}

int pp_regex_match(const struct pp_regex *re, const char *s, size_t len, ssize_t *m, size_t nm)
{
	const char *subj = s;
	size_t slen = len, *map = NULL;
	char *fixed = NULL;
	int ret;

	/* Go reads each byte outside valid UTF-8 as U+FFFD: do the same on a
	 * copy, and map offsets back to the caller's bytes. */
	for (size_t i = 0; i < len;) {
		size_t l = utf8_len((const unsigned char *)s + i, len - i);
		if (!l) {
			slen = 0;
			fixed = malloc(len * 3 + 1);
			map = malloc((len * 3 + 1) * sizeof(*map));
			if (!fixed || !map) {
				free(fixed);
				free(map);
				return -ENOMEM;
			}
			for (size_t j = 0; j < len;) {
				size_t k = utf8_len((const unsigned char *)s + j, len - j);
				if (!k) {
					memcpy(fixed + slen, "\xef\xbf\xbd", 3);
					for (int q = 0; q < 3; q++)
						map[slen + (size_t)q] = j;
					slen += 3;
					j++;
				} else {
					memcpy(fixed + slen, s + j, k);
					for (size_t q = 0; q < k; q++)
						map[slen + q] = j + q;
					slen += k;
					j += k;
				}
			}
			map[slen] = len;
			subj = fixed;
			break;
		}
		i += l;
	}
	pcre2_match_data *md = pcre2_match_data_create_from_pattern(re->code, NULL);
	if (!md) {
		free(fixed);
		free(map);
		return -ENOMEM;
	}
	int rc = pcre2_match(re->code, (PCRE2_SPTR)subj, slen, 0, PCRE2_NO_UTF_CHECK, md, re->mctx);
	if (rc == PCRE2_ERROR_NOMATCH) {
		ret = 0;
	} else if (rc == PCRE2_ERROR_MATCHLIMIT || rc == PCRE2_ERROR_DEPTHLIMIT ||
		   rc == PCRE2_ERROR_HEAPLIMIT) {
		ret = -E2BIG;
	} else if (rc == PCRE2_ERROR_NOMEMORY) {
		ret = -ENOMEM;
	} else if (rc < 0) {
		ret = -EINVAL;
	} else {
		ret = 1;
		PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
		uint32_t npairs = pcre2_get_ovector_count(md);
		for (size_t g = 0; m && g < nm; g++) {
			if (g >= npairs || ov[2 * g] == PCRE2_UNSET) {
				m[2 * g] = m[2 * g + 1] = -1;
				continue;
			}
			size_t a = ov[2 * g], b = ov[2 * g + 1];
			if (map) {
				a = map[a];
				b = map[b];
			}
			m[2 * g] = (ssize_t)a;
			m[2 * g + 1] = (ssize_t)b;
		}
	}
	pcre2_match_data_free(md);
	free(fixed);
	free(map);
	return ret;
}
