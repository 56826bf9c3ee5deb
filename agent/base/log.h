/*
 * log.h - the agent's one log stream (stderr), in logfmt or JSON.
 *
 * A line is a level, a message and key=value fields:
 *   pp_log(PP_INFO, "window done", "samples=%u procs=%u", n, p);
 * Fields are written logfmt-style by the caller; a value holding spaces or
 * quotes must be passed through pp_q() (quotes and escapes it). In JSON mode
 * the fields are re-emitted as JSON members: what went through pp_q() as a
 * string (pp_q always quotes then, so a comm of "123" stays a string), a
 * bare value shaped like a JSON number (printf's %d, %llu, %.1f) as a
 * number, any other bare value as a string. Nothing is cut silently: a
 * line longer than the stack buffer is formatted on the heap, and a value
 * too long for pp_q's buffer ends in "...[+N bytes]". Never log secrets.
 */
#ifndef PUSHPROF_LOG_H
#define PUSHPROF_LOG_H

enum pp_log_level { PP_DEBUG, PP_INFO, PP_WARN, PP_ERROR };
enum pp_log_format { PP_LOG_LOGFMT, PP_LOG_JSON };

void pp_log_setup(enum pp_log_level min, enum pp_log_format fmt);
int pp_log_level_parse(const char *s, enum pp_log_level *out);
const char *pp_log_level_name(enum pp_log_level l);

void pp_log(enum pp_log_level level, const char *msg, const char *fields, ...)
	__attribute__((format(printf, 3, 4)));

/* Quote a logfmt value into one of a few rotating thread-local buffers
 * (valid until the fourth next call on the same thread). */
const char *pp_q(const char *s);

#endif
