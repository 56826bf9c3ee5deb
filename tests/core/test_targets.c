/*
 * Unit test of agent/targets/targets.c's pid-reuse handling against real processes.
 *
 * A matched process exits and its pid goes to a new process that matches
 * too (set through /proc/sys/kernel/ns_last_pid, root). Whoever reads the
 * pid next - an event read late (the new process's fork, read after its
 * exec) or a scan - must report the old process unmatched and the new one
 * matched, so that per-pid state (the Go heap tracker's analysis of the
 * old binary) is dropped and rebuilt. Seen in CI: snapshots of the new
 * program never came when the fork event was read after the exec.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "targets.h"
#include "check.h"

struct calls {
	pid_t only;	/* a scan reports every `sleep` on the host: this one's */
	int n;
	pid_t pid[8];
	bool matched[8];
};

static void on_change(pid_t pid, bool matched, void *arg)
{
	struct calls *c = arg;

	if (pid != c->only)
		return;
	if (c->n < 8) {
		c->pid[c->n] = pid;
		c->matched[c->n] = matched;
	}
	c->n++;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* fork + exec `sleep 60`; waits until the exec is done (comm "sleep") */
static pid_t start_sleep(void)
{
	pid_t pid = fork();

	if (pid == 0) {
		execl("/bin/sleep", "sleep", "60", (char *)NULL);
		_exit(127);
	}
	for (int i = 0; pid > 0 && i < 2000; i++) {
		char path[64], comm[32] = "";
		FILE *f;

		snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
		f = fopen(path, "re");
		if (f) {
			if (!fgets(comm, sizeof(comm), f))
				comm[0] = '\0';
			fclose(f);
		}
		if (!strcmp(comm, "sleep\n"))
			return pid;
		usleep(1000);
	}
	return -1;
}

static void stop(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

/* A new `sleep` with pid `want` (after `want` exited), or -1. */
static pid_t start_sleep_as(pid_t want)
{
	for (int i = 0; i < 50; i++) {
		FILE *f = fopen("/proc/sys/kernel/ns_last_pid", "we");

		if (!f)
			return -1;
		fprintf(f, "%d", (int)want - 1);
		if (fclose(f))
			return -1;
		pid_t pid = start_sleep();
		if (pid == want)
			return pid;
		if (pid > 0)
			stop(pid);
	}
	return -1;
}

/* The exec'd `sleep` that now holds A's pid is reported as a new process by
 * `how`: 0 a late event (targets_check_pid), 1 a scan. */
static void reuse_case(int how)
{
	struct target_config e = { .exe_regex = "/sleep$" };
	struct pp_err err = { 0 };
	struct calls c = { 0 };
	const char *what = how ? "scan" : "event";

	struct pp_regex_opts ro = { .src = e.exe_regex };
	CHECK(pp_regex_new(&ro, &e.exe_re, &err) == 0, "compile: %s", err.msg);
	struct targets_opts to = { .entries = &e, .nentries = 1 };
	struct targets *t;
	targets_new(&to, &t, &err);
	pid_t a = start_sleep();
	CHECK(t && a > 0, "%s: start A", what);
	if (!t || a <= 0)
		goto out;
	c.only = a;
	CHECK(targets_check_pid(t, a, now_ns(), on_change, &c) == 0, "%s: check A", what);
	CHECK(c.n == 1 && c.pid[0] == a && c.matched[0], "%s: A matched (%d calls)", what, c.n);
	c.n = 0;
	CHECK(targets_check_pid(t, a, now_ns(), on_change, &c) == 0 && c.n == 0,
	      "%s: A again: no change (%d calls)", what, c.n);

	/* a start time is in clock ticks (10 ms): B must start in a later one */
	usleep(30000);
	stop(a);
	pid_t b = start_sleep_as(a);
	CHECK(b == a, "%s: pid %d reused by B (got %d)", what, (int)a, (int)b);
	if (b != a)
		goto out;
	c.n = 0;
	/* the scan re-reads a known process only now and then: force it */
	if (how)
		targets_events_lost(t);
	int rc = how ? targets_scan(t, now_ns(), on_change, &c, &err)
		     : targets_check_pid(t, b, now_ns(), on_change, &c);
	CHECK(rc == 0, "%s: re-read the pid: %s", what, err.msg);
	CHECK(c.n == 2 && c.pid[0] == a && !c.matched[0] && c.pid[1] == a && c.matched[1],
	      "%s: old process unmatched, then the new one matched (%d calls: %d %d)", what,
	      c.n, c.n > 0 ? c.matched[0] : -1, c.n > 1 ? c.matched[1] : -1);
	c.n = 0;
	CHECK(targets_check_pid(t, b, now_ns(), on_change, &c) == 0 && c.n == 0,
	      "%s: B again: no change (%d calls)", what, c.n);
	stop(b);
	c.n = 0;
	CHECK(targets_check_pid(t, b, now_ns(), on_change, &c) == 0 && c.n == 1 && !c.matched[0],
	      "%s: B gone: unmatched (%d calls)", what, c.n);
	a = 0;
out:
	if (a > 0)
		stop(a);
	targets_free(t);
	pp_regex_free(e.exe_re);
}

int main(void)
{
	reuse_case(0);
	reuse_case(1);
	return check_done();
}
