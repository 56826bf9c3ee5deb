/*
 * ppregex.h - the project's one regex implementation: RE2 syntax (what
 * Prometheus, Parca Agent and Go accept) executed by PCRE2.
 *
 * Users copy regexes from Prometheus and Parca Agent configs, so the
 * dialect is RE2's as Go's regexp/syntax parses it; PCRE2 runs it.
 * pp_regex_new() parses the source itself and refuses what RE2 refuses
 * but PCRE2 would accept, naming the construct: backreferences (\1,
 * (?P=n), \k, \g), lookaround ((?=, (?!, (?<=, (?<!), atomic groups (?>,
 * possessive quantifiers (a*+), recursion and subroutine calls ((?R),
 * (?1), (?&n)), conditionals, (*VERBS), \C, \K, \G, \Z, \R, \X, \h, \N,
 * comments, flags other than i, m, s, U, repetition of a repetition (a**)
 * and counts above 1000. What it accepts it rewrites into an equivalent
 * PCRE2 pattern where the two differ: \s is [\t\n\f\r ] (no \v), \v is
 * the vertical tab, octal escapes (\12) never become backreferences,
 * named groups are plain groups (names are kept here, for $name), a "{"
 * that is not a repetition is a literal, and $ is the end of the text
 * (PCRE2_DOLLAR_ENDONLY). Subjects are UTF-8; a byte that is not part of
 * valid UTF-8 matches as U+FFFD, as in Go, and submatch offsets still
 * point into the original bytes. (?m)^ matches after a final newline and
 * a repeated assertion (^*) is allowed, as in Go; a group name may repeat,
 * as in Go.
 *
 * tests/relabel/test_re2_diff.py runs this against Go's regexp on ~38,000
 * random regexes and values. Known differences: a repeated group that can
 * match empty, (a*)+ on "a", reports its last, empty iteration (PCRE2) not
 * the non-empty one (Go); "a(?i)*", which Go reads as "a*", is refused.
 *
 * Two ways to match:
 *  - PP_REGEX_FULL (relabel_configs): the whole string must match, as
 *    Prometheus 3 wraps a relabel regex: ^(?s:REGEX)$ - "." also matches
 *    a newline there.
 *  - 0 (targets: comm_regex, exe_regex, cgroup_regex): a search anywhere
 *    in the string, Go's MatchString; anchor with ^ and $ yourself.
 *
 * Matching is bounded: PCRE2's match limit (backtracking steps), depth
 * limit and heap limit are set, so a hostile subject cannot make one match
 * run for long or grow memory; hitting a limit is an error (-E2BIG), never
 * a silent non-match. A compiled regex is immutable: any number of threads
 * may match it at once (match data is per call).
 */
#ifndef PUSHPROF_PPREGEX_H
#define PUSHPROF_PPREGEX_H

/* (Not "regex.h": on the include path it would shadow the C library's.) */

#include <stddef.h>
#include <sys/types.h>

#include "err.h"

#define PP_REGEX_FULL 1u      /* anchored at both ends, (?s) */
#define PP_REGEX_MAX_LEN 4096 /* bytes of source */

struct pp_regex;

struct pp_regex_opts {
	const char *src; /* the regex (NUL-terminated, UTF-8); required */
	unsigned flags;	 /* PP_REGEX_FULL, or 0: a search */
};

/*
 * Compile o->src. 0 with *out set (the caller frees it with
 * pp_regex_free()); or, *out NULL and err filled, -EINVAL with a one-line
 * reason (which names the construct and its offset), or -ENOMEM.
 */
int pp_regex_new(const struct pp_regex_opts *o, struct pp_regex **out, struct pp_err *err);
/* NULL-safe. */
void pp_regex_free(struct pp_regex *re);

/* Capturing groups in the source (not counting group 0, the whole match). */
size_t pp_regex_groups(const struct pp_regex *re);
/* Index (>= 1) of the first group named name (len bytes), or -1. */
int pp_regex_group_index(const struct pp_regex *re, const char *name, size_t len);

/*
 * Match s (len bytes). 1 on a match, 0 on none, -E2BIG when a match limit
 * was hit, -ENOMEM. With m != NULL, m[2*i] and m[2*i+1] get the byte
 * offsets of group i (0 = the whole match) for i < nm, -1 for a group that
 * did not take part.
 */
int pp_regex_match(const struct pp_regex *re, const char *s, size_t len, ssize_t *m, size_t nm);

#endif
