/*
 * check.h - the assertion helper of every C test (tests/<area>/test_*.c and
 * the C checks of probes such as pprof_gen).
 *
 *   CHECK(cond, fmt, ...)   counts a pass, or prints "FAIL file:line: <message> [cond]"
 *                           on stdout and counts a failure; the test goes on, so one
 *                           run reports every failure. fmt is printf's (checked).
 *   check_done()            prints "N passed, M failed" and returns main's exit
 *                           status: 0 only when nothing failed and something passed
 *                           (a test that checked nothing fails).
 *   check_failures          failures so far, for a test that stops early.
 *
 * Single-threaded: the counters are plain ints. Each test is one .c file, so
 * the static definitions here are that test's own.
 */
#ifndef PUSHPROF_TESTS_CHECK_H
#define PUSHPROF_TESTS_CHECK_H

#include <stdarg.h>
#include <stdio.h>

static int check_passes, check_failures;

static inline void check_report(int ok, const char *where, const char *cond, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static inline void check_report(int ok, const char *where, const char *cond, const char *fmt, ...)
{
	va_list ap;

	if (ok) {
		check_passes++;
		return;
	}
	check_failures++;
	printf("FAIL %s: ", where);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf(" [%s]\n", cond);
	fflush(stdout); /* keeps the order with the library's own stderr lines */
}

#define CHECK_STR2(x) #x
#define CHECK_STR(x) CHECK_STR2(x)
#define CHECK(cond, ...) \
	check_report(!!(cond), __FILE__ ":" CHECK_STR(__LINE__), #cond, __VA_ARGS__)

static inline int check_done(void)
{
	printf("%d passed, %d failed\n", check_passes, check_failures);
	fflush(stdout);
	return check_failures || !check_passes ? 1 : 0;
}

#endif
