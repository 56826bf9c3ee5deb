/*
 * config_scalar.c - the config's scalar values (config_internal.h).
 *
 * Strings with ${VAR} and ${VAR:-default} expanded (and checked to be
 * UTF-8), integers in a range, booleans (true/false only) and true/false/
 * auto, one name of a list, durations and sizes both ways (parse_duration
 * and parse_size are config.h's; fmt_* print what they read back), network
 * addresses, regexes. Each reader names the key's path and the node's
 * FILE:LINE:COL in its error (errat).
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_internal.h"
#include "grow.h"

#define MAX_EXPANDED (64u << 10) /* one string after ${VAR} expansion */

bool utf8_valid(const char *s)
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
	struct pp_buf r = { 0 }; /* out of memory: seen once, at the end */

	if (n->flag) { /* a flag's value is taken as written */
		*out = strdup(s);
		return *out ? 0 : -ENOMEM;
	}
#define PUT(src, l)                                                                             \
	do {                                                                                    \
		size_t l_ = (l);                                                                \
		if (r.n + l_ + 1 > MAX_EXPANDED) {                                              \
			free(r.p);                                                              \
			return errat(x, n, "%s is longer than %u bytes after ${VAR} expansion", \
				     path, MAX_EXPANDED);                                       \
		}                                                                               \
		pp_buf_add(&r, (src), l_);                                                      \
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
			free(r.p);
			return errat(x, n, "%s: unterminated '${' (write '$$' for a literal '$')",
				     path);
		}
		const char *name = s + i + 2, *p = name;
		while (p < close && (isalnum((unsigned char)*p) || *p == '_'))
			p++;
		size_t nlen = (size_t)(p - name);
		bool has_def = p + 1 < close && p[0] == ':' && p[1] == '-';
		if (nlen == 0 || isdigit((unsigned char)name[0]) || (p != close && !has_def)) {
			free(r.p);
			return errat(x, n,
				     "%s: bad variable reference '%.*s' (use ${NAME} or "
				     "${NAME:-default})",
				     path, (int)(close - s - i + 1), s + i);
		}
		char var[256];
		if (nlen >= sizeof(var)) {
			free(r.p);
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
	if (!pp_buf_str(&r)) {
		free(r.p);
		return -ENOMEM;
	}
	if (!utf8_valid(r.p)) {
		free(r.p);
		return errat(x, n, "%s is not valid UTF-8 after ${VAR} expansion", path);
	}
	*out = r.p;
	return 0;
}

/* ------------------------------------------------------------------ */
/* Scalars                                                            */

int want_scalar(struct ctx *x, const struct ynode *n, const char *path, const char *what)
{
	char b[64];

	if (n->kind != Y_SCALAR)
		return errat(x, n, "%s: expected %s, got %s", path, what, show(n, b, sizeof(b)));
	return 0;
}

int get_i64(struct ctx *x, const struct ynode *n, const char *path, int64_t min, int64_t max,
	    int64_t *out)
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
		return errat(x, n, "%s must be between %" PRId64 " and %" PRId64 ", got %s", path,
			     min, max, show(n, b, sizeof(b)));
	int64_t sv = neg ? -(int64_t)v : (int64_t)v;
	if (sv < min || sv > max)
		return errat(x, n, "%s must be between %" PRId64 " and %" PRId64 ", got %" PRId64,
			     path, min, max, sv);
	*out = sv;
	return 0;
}

int get_bool(struct ctx *x, const struct ynode *n, const char *path, bool *out)
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
		return errat(x, n, "%s: expected true or false, got %s", path,
			     show(n, b, sizeof(b)));
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

int get_str(struct ctx *x, const struct ynode *n, const char *path, char **out)
{
	int rc = want_scalar(x, n, path, "a string");

	if (rc)
		return rc;
	return expand_env(x, n, path, out);
}

int get_str_opt(struct ctx *x, const struct ynode *n, const char *path, char **out)
{
	if (is_null(n))
		return 0;
	int rc = get_str(x, n, path, out);
	return rc ? rc : 1;
}

int parse_duration(const char *s, uint64_t *ns)
{
	static const struct {
		const char *u;
		uint64_t mult;
	} units[] = {
		{ "ns", 1 },
		{ "us", 1000 },
		{ "\xc2\xb5s", 1000 },
		{ "ms", NS_PER_MS },
		{ "s", NS_PER_S },
		{ "m", 60 * NS_PER_S },
		{ "h", 3600 * NS_PER_S },
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
	static const struct {
		const char *u;
		uint64_t mult;
	} units[] = {
		{ "", 1 },
		{ "B", 1 },
		{ "KiB", 1ull << 10 },
		{ "MiB", 1ull << 20 },
		{ "GiB", 1ull << 30 },
		{ "TiB", 1ull << 40 },
		{ "KB", 1000ull },
		{ "MB", 1000000ull },
		{ "GB", 1000000000ull },
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

void fmt_duration(uint64_t ns, char *buf, size_t sz)
{
	static const struct {
		const char *u;
		uint64_t mult;
	} units[] = {
		{ "h", 3600 * NS_PER_S }, { "m", 60 * NS_PER_S }, { "s", NS_PER_S },
		{ "ms", NS_PER_MS },	  { "us", 1000 },	  { "ns", 1 },
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
void fmt_size(uint64_t b, char *buf, size_t sz)
{
	static const struct {
		const char *u;
		uint64_t mult;
	} units[] = {
		{ "TiB", 1ull << 40 }, { "GiB", 1ull << 30 },	   { "MiB", 1ull << 20 },
		{ "KiB", 1ull << 10 }, { "TB", 1000000000000ull }, { "GB", 1000000000ull },
		{ "MB", 1000000ull },  { "KB", 1000ull },
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

int enum_value(struct ctx *x, const struct ynode *v, const char *path, const char *const *names,
	       size_t nnames, int *out)
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

/* true, false or auto (-1) */
int get_auto_bool(struct ctx *x, const struct ynode *v, const char *path, int *out)
{
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

/* host:port, [v6]:port, or a gRPC target URI (dns:, unix:, ipv4:, ipv6:). */
int check_address(struct ctx *x, const struct ynode *v, const char *path, const char *a)
{
	static const char *const schemes[] = { "dns:",	"unix:", "unix-abstract:",
					       "ipv4:", "ipv6:", "vsock:" };
	const char *colon;
	char b[64];

	if (!*a || !strncmp(a, "http://", 7) || !strncmp(a, "https://", 8))
		return 0; /* a URL: checked by url_address() */
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

bool config_address_is_loopback(const char *address)
{
	char host[256];
	const char *colon;

	if (!address || !*address)
		return false;
	if (address[0] == '[') { /* [v6]:port */
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

/* targets regexes: RE2 syntax, searched anywhere in the string (ppregex.h) */
int compile_re(struct ctx *x, const struct ynode *v, const char *path, char **src,
	       struct pp_regex **re)
{
	struct pp_err rerr = { 0 };
	char *s;
	int rc = get_raw(x, v, path, &s);

	if (rc)
		return rc;
	struct pp_regex_opts ro = { .src = s };
	rc = pp_regex_new(&ro, re, &rerr);
	if (rc) {
		free(s);
		if (rc == -ENOMEM)
			return rc;
		return errat(x, v, "%s: invalid regular expression: %s", path, rerr.msg);
	}
	*src = s;
	return 0;
}
