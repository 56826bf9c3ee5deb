#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

static enum pp_log_level min_level = PP_INFO;
static enum pp_log_format format = PP_LOG_LOGFMT;

static const char *names[] = { "debug", "info", "warn", "error" };

void pp_log_setup(enum pp_log_level min, enum pp_log_format fmt)
{
	min_level = min;
	format = fmt;
}

int pp_log_level_parse(const char *s, enum pp_log_level *out)
{
	for (unsigned i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (strcasecmp(s, names[i]) == 0) {
			*out = (enum pp_log_level)i;
			return 0;
		}
	}
	return -1;
}

const char *pp_log_level_name(enum pp_log_level l)
{
	return (unsigned)l < 4 ? names[l] : "info";
}

const char *pp_q(const char *s)
{
	static __thread char bufs[4][1024];
	static __thread unsigned next;
	/* room for the closing quote, a cut marker and the NUL */
	char *b = bufs[next++ % 4], *p = b, *end = b + sizeof(bufs[0]) - 24;
	int needs = (*s == '\0') || format == PP_LOG_JSON;

	for (const char *c = s; *c; c++)
		if (*c == ' ' || *c == '"' || *c == '=' || *c == '\\' || (unsigned char)*c < 0x20)
			needs = 1;
	if (!needs)
		return s; /* as it is: nothing to cut */
	*p++ = '"';
	for (; *s && p < end - 1; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\') {
			*p++ = '\\';
			*p++ = (char)c;
		} else if (c == '\n') {
			*p++ = '\\';
			*p++ = 'n';
		} else if (c < 0x20) {
			*p++ = '?';
		} else {
			*p++ = (char)c;
		}
	}
	if (*s) /* cut: say so, and by how much */
		p += snprintf(p, 22, "...[+%zu bytes]", strlen(s));
	*p++ = '"';
	*p = '\0';
	return b;
}

static void json_char(FILE *f, unsigned char c)
{
	if (c == '"' || c == '\\')
		fprintf(f, "\\%c", c);
	else if (c < 0x20)
		fprintf(f, "\\u%04x", c);
	else
		fputc(c, f);
}

static void json_str(FILE *f, const char *s, size_t n)
{
	fputc('"', f);
	for (size_t i = 0; i < n; i++)
		json_char(f, (unsigned char)s[i]);
	fputc('"', f);
}

/* s[0..n) is a JSON number: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? */
static int json_number(const char *s, size_t n)
{
	size_t i = 0;

	if (i < n && s[i] == '-')
		i++;
	if (i >= n || s[i] < '0' || s[i] > '9')
		return 0;
	if (s[i] == '0')
		i++;
	else
		while (i < n && s[i] >= '0' && s[i] <= '9')
			i++;
	if (i < n && s[i] == '.') {
		size_t d = ++i;
		while (i < n && s[i] >= '0' && s[i] <= '9')
			i++;
		if (i == d)
			return 0;
	}
	if (i < n && (s[i] == 'e' || s[i] == 'E')) {
		i++;
		if (i < n && (s[i] == '+' || s[i] == '-'))
			i++;
		size_t d = i;
		while (i < n && s[i] >= '0' && s[i] <= '9')
			i++;
		if (i == d)
			return 0;
	}
	return i == n;
}

/* Re-emit logfmt fields as JSON members: key=value or key="quoted \" value",
 * streamed (no value is too long). */
static void json_fields(FILE *f, const char *p)
{
	while (*p) {
		while (*p == ' ')
			p++;
		const char *k = p;
		while (*p && *p != '=' && *p != ' ')
			p++;
		size_t klen = (size_t)(p - k);
		if (!klen)
			break;
		fputc(',', f);
		json_str(f, k, klen);
		fputc(':', f);
		if (*p != '=') { /* a bare key */
			fputs("\"\"", f);
			continue;
		}
		p++;
		if (*p == '"') {
			fputc('"', f);
			for (p++; *p && *p != '"'; p++) {
				if (*p == '\\' && p[1]) {
					p++;
					json_char(f, *p == 'n' ? '\n' : (unsigned char)*p);
				} else {
					json_char(f, (unsigned char)*p);
				}
			}
			if (*p == '"')
				p++;
			fputc('"', f);
		} else {
			const char *v = p;
			while (*p && *p != ' ')
				p++;
			if (json_number(v, (size_t)(p - v)))
				fwrite(v, 1, (size_t)(p - v), f);
			else
				json_str(f, v, (size_t)(p - v));
		}
	}
}

void pp_log(enum pp_log_level level, const char *msg, const char *fields, ...)
{
	char stackbuf[4096] = "", *buf = stackbuf, *heap = NULL;
	char ts[64];
	struct timespec now;
	struct tm tm;
	va_list ap;

	if (level < min_level)
		return;
	if (fields) {
		va_start(ap, fields);
		int n = vsnprintf(stackbuf, sizeof(stackbuf), fields, ap);
		va_end(ap);
		/* longer than the stack buffer: the whole line from the heap
		 * (on allocation failure the cut line, marked) */
		if (n >= (int)sizeof(stackbuf)) {
			heap = malloc((size_t)n + 1);
			if (heap) {
				va_start(ap, fields);
				vsnprintf(heap, (size_t)n + 1, fields, ap);
				va_end(ap);
				buf = heap;
			} else {
				memcpy(stackbuf + sizeof(stackbuf) - 16, " log_cut=true", 14);
			}
		}
	}
	clock_gettime(CLOCK_REALTIME, &now);
	gmtime_r(&now.tv_sec, &tm);
	snprintf(ts, sizeof(ts), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900,
		 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
		 now.tv_nsec / 1000000);

	flockfile(stderr);
	if (format == PP_LOG_JSON) {
		fprintf(stderr, "{\"ts\":\"%s\",\"level\":\"%s\",\"msg\":", ts, names[level]);
		json_str(stderr, msg, strlen(msg));
		json_fields(stderr, buf);
		fputs("}\n", stderr);
	} else {
		fprintf(stderr, "ts=%s level=%s msg=%s%s%s\n", ts, names[level], pp_q(msg),
			buf[0] ? " " : "", buf);
	}
	funlockfile(stderr);
	free(heap);
}
