/*
 * err.h - error context carried from where a failure happens to the one
 * place that reports it.
 *
 * Library modules never print and never exit: they return a negative
 * errno-style code and, when the caller passed a struct pp_err, a sentence
 * saying what failed and where ("config.yaml:3:5: unknown key ...").
 * Commands (agent/cmd_*.c) and the agent loop decide what to log and how
 * to exit.
 */
#ifndef PUSHPROF_ERR_H
#define PUSHPROF_ERR_H

#include <stdarg.h>

struct pp_err {
	int code; /* negative errno-style code, 0 when unset */
	char msg[512];
};

/* Record the error, replacing any earlier one (err NULL: nothing kept), and return code. */
int pp_errf(struct pp_err *err, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Prefix the existing message with more context: "while X: <old msg>". */
int pp_err_wrap(struct pp_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static inline void pp_err_clear(struct pp_err *err)
{
	if (err) {
		err->code = 0;
		err->msg[0] = '\0';
	}
}

/*
 * Levenshtein distance for "did you mean" suggestions: case-insensitive,
 * '-' equal to '_' (a typed "frequency-hz" is one key away from none).
 * Inputs over 64 bytes are never close: 1000.
 */
unsigned pp_edit_distance(const char *a, const char *b);

#endif
