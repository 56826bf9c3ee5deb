#include "log.h"

#include <stdarg.h>
#include <stdio.h>
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
	static __thread char bufs[4][512];
	static __thread unsigned next;
	char *b = bufs[next++ % 4], *p = b, *end = b + sizeof(bufs[0]) - 3;
	int needs = (*s == '\0');

	for (const char *c = s; *c; c++)
		if (*c == ' ' || *c == '"' || *c == '=' || *c == '\\' || (unsigned char)*c < 0x20)
			needs = 1;
	if (!needs)
		return s;
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
	*p++ = '"';
	*p = '\0';
	return b;
}

static void json_str(FILE *f, const char *s, size_t n)
{
	fputc('"', f);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

/* Re-emit logfmt fields as JSON members: key=value or key="quoted \" value". */
static void json_fields(FILE *f, const char *p)
{
	char val[1024];

	while (*p) {
		while (*p == ' ')
			p++;
		const char *k = p;
		while (*p && *p != '=' && *p != ' ')
			p++;
		size_t klen = (size_t)(p - k);
		if (!klen)
			break;
		size_t vlen = 0;
		if (*p == '=') {
			p++;
			if (*p == '"') {
				p++;
				while (*p && *p != '"' && vlen < sizeof(val) - 1) {
					if (*p == '\\' && p[1]) {
						p++;
						val[vlen++] = *p == 'n' ? '\n' : *p;
					} else {
						val[vlen++] = *p;
					}
					p++;
				}
				if (*p == '"')
					p++;
			} else {
				while (*p && *p != ' ' && vlen < sizeof(val) - 1)
					val[vlen++] = *p++;
			}
		}
		fputc(',', f);
		json_str(f, k, klen);
		fputc(':', f);
		json_str(f, val, vlen);
	}
}

void pp_log(enum pp_log_level level, const char *msg, const char *fields, ...)
{
	char buf[4096] = "";
	char ts[64];
	struct timespec now;
	struct tm tm;
	va_list ap;

	if (level < min_level)
		return;
	if (fields) {
		va_start(ap, fields);
		vsnprintf(buf, sizeof(buf), fields, ap);
		va_end(ap);
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
}
