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
 *
 * Exits come as events too (targets_exit), from the netlink connector and
 * from BPF: a matched process that exits is reported unmatched at the next
 * targets_recheck_young(), without a /proc listing, also while it waits to
 * be reaped (a zombie); a process whose leader exited while another thread
 * runs on is not.
 *
 * The agent's loop sleeps through a quiet host: a filter has young-tick
 * work only while a target is young (targets_young_work), and the BPF
 * ring wakes a poll on procev_fd() with the first event after a drain
 * (wake_case: a fork while the poll sleeps must end it).
 *
 * A CPU window re-reads the label facts (comm, exe, cgroup) of each
 * process it holds, unless they were read since the window began
 * (refresh_case: a process renames itself; targets_refresh() with a
 * `since` before its last read keeps the old name, with one after it
 * reads the new one).
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "procev.h"
#include "procinfo.h"
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

	if (!c || pid != c->only)
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

/* state of pid once it is want (up to 5 s); false if it never is */
static bool wait_state(pid_t pid, char want)
{
	for (int i = 0; i < 500; i++) {
		struct proc_stat st;

		if (proc_stat(pid, &st) == 0 && st.state == want)
			return true;
		usleep(10000);
	}
	return false;
}

static void *sleeper(void *arg)
{
	(void)arg;
	for (;;)
		pause();
	return NULL;
}

/* A filter (t) and the whole host (h) fed by the same events. */
struct pair {
	struct targets *t, *h;
};

static void on_ev(enum procev_kind kind, pid_t pid, void *arg)
{
	struct pair *p = arg;

	if (kind == PROCEV_KIND_EXIT) {
		targets_exit(p->t, pid);
		targets_exit(p->h, pid);
	}
}

/* Take the exits the source has queued (pe: the BPF ring, else the
 * netlink connector) and check them, as the agent's young tick does (c
 * NULL: only take them). */
static void take_exits(struct pair *tp, struct procev *pe, struct calls *c)
{
	if (pe) {
		procev_drain(pe, on_ev, tp);
	} else {
		targets_events_read(tp->t, now_ns(), on_change, c);
		targets_events_read(tp->h, now_ns(), NULL, NULL);
	}
	if (!c)
		return;
	targets_recheck_young(tp->t, now_ns(), on_change, c);
	targets_recheck_young(tp->h, now_ns(), NULL, NULL);
}

static void exit_case(bool bpf)
{
	/* `sleep`, and the test's own fork by its name (a leader that exited
	 * has no /proc/PID/exe to match: the young re-read would unmatch it) */
	struct target_config e[2] = { { .exe_regex = "/sleep$" }, { .comm_regex = "^ppexitb$" } };
	struct pp_err err = { 0 };
	struct calls c = { 0 };
	struct procev *pe = NULL;
	const char *what = bpf ? "bpf exit" : "netlink exit";
	struct targets *t = NULL;

	struct pp_regex_opts ro = { .src = e[0].exe_regex }, ro2 = { .src = e[1].comm_regex };
	CHECK(pp_regex_new(&ro, &e[0].exe_re, &err) == 0 && pp_regex_new(&ro2, &e[1].comm_re, &err) == 0,
	      "compile: %s", err.msg);
	struct targets_opts to = { .entries = e, .nentries = 2 };
	struct pair tp = { 0 };
	targets_new(&to, &t, &err);
	targets_new(NULL, &tp.h, &err);
	tp.t = t;
	if (bpf) {
		CHECK(procev_new(&pe, &err) == 0, "%s: load the BPF events: %s", what, err.msg);
		if (!pe)
			goto out;
		targets_events_external(t);
		targets_events_external(tp.h);
	} else {
		CHECK(targets_events_open(t) >= 0 && targets_events_open(tp.h) >= 0,
		      "%s: subscribe to the connector", what);
	}

	/* A exits, its parent (this test) does not reap it yet */
	pid_t a = start_sleep();
	c.only = a;
	CHECK(targets_check_pid(t, a, now_ns(), on_change, &c) == 0 && c.n == 1 && c.matched[0],
	      "%s: A matched", what);
	targets_check_pid(tp.h, a, now_ns(), NULL, NULL);
	take_exits(&tp, pe, &c); /* what came before */
	c.n = 0;
	uint64_t tn = now_ns();
	CHECK(targets_young_work(t, tn) && !targets_young_work(t, tn + 6000000000ull),
	      "%s: filter: young work while A is young (< 5 s), none after", what);
	CHECK(!targets_young_work(tp.h, tn), "%s: whole host: no young work with nothing queued",
	      what);
	kill(a, SIGKILL);
	CHECK(wait_state(a, 'Z'), "%s: A a zombie", what);
	take_exits(&tp, pe, NULL); /* queue only: the tick comes next */
	CHECK(targets_young_work(tp.h, now_ns()), "%s: whole host: the exit wakes the young tick", what);
	take_exits(&tp, pe, &c);
	CHECK(c.n == 1 && !c.matched[0], "%s: A unmatched from its exit event, unreaped (%d calls)",
	      what, c.n);
	const struct target_proc *p = targets_get(t, a);
	CHECK(p && p->gone, "%s: A known and gone (kept for its last window)", what);
	/* the whole host re-reads no known process between scans: only the
	 * exit event can have told it */
	p = targets_get(tp.h, a);
	CHECK(p && p->gone, "%s: whole host: A gone without a scan", what);
	waitpid(a, NULL, 0);

	/* B's leader exits while another thread runs: B lives */
	pid_t b = fork();
	if (b == 0) {
		pthread_t th;
		prctl(PR_SET_NAME, "ppexitb", 0, 0, 0);
		if (pthread_create(&th, NULL, sleeper, NULL) == 0)
			pthread_exit(NULL);
		_exit(1);
	}
	c.only = b;
	c.n = 0;
	CHECK(wait_state(b, 'Z'), "%s: B's leader exited", what);
	CHECK(targets_check_pid(t, b, now_ns(), on_change, &c) == 0 && c.n == 1 && c.matched[0],
	      "%s: B matched", what);
	targets_check_pid(tp.h, b, now_ns(), NULL, NULL);
	c.n = 0;
	take_exits(&tp, pe, &c);
	CHECK(c.n == 0, "%s: B, its leader gone, still matched (%d calls)", what, c.n);
	p = targets_get(tp.h, b);
	CHECK(p && !p->gone, "%s: whole host: B alive", what);
	kill(b, SIGKILL);
	waitpid(b, NULL, 0);
	if (bpf) {
		/* the last thread's exit is BPF's event; the connector tells
		 * only the leader's (the scan catches that one) */
		take_exits(&tp, pe, &c);
		CHECK(c.n == 1 && !c.matched[0], "%s: B unmatched when its last thread exits (%d)",
		      what, c.n);
		p = targets_get(tp.h, b);
		CHECK(p && p->gone, "%s: whole host: B gone", what);
	}
out:
	procev_free(pe);
	targets_free(t);
	targets_free(tp.h);
	pp_regex_free(e[0].exe_re);
	pp_regex_free(e[1].comm_re);
}

/* A process event while the agent's poll sleeps on procev_fd() ends the
 * poll: the first record after a drain wakes it (records were written
 * without a wake-up before, and the poll slept until its timeout). */
static void wake_case(void)
{
	struct pp_err err = { 0 };
	struct procev *pe = NULL;
	struct pair tp = { 0 };

	CHECK(targets_new(NULL, &tp.h, &err) == 0, "wake: table: %s", err.msg);
	tp.t = tp.h;
	CHECK(procev_new(&pe, &err) == 0, "wake: load the BPF events: %s", err.msg);
	if (!pe) {
		targets_free(tp.h);
		return;
	}
	/* the child forks again 300 ms from now, while the poll below sleeps */
	pid_t c = fork();
	if (c == 0) {
		usleep(300000);
		pid_t g = fork();
		if (g == 0)
			_exit(0);
		waitpid(g, NULL, 0);
		_exit(0);
	}
	procev_drain(pe, on_ev, &tp); /* the child's own fork; arms the wake-up */
	struct pollfd pfd = { .fd = procev_fd(pe), .events = POLLIN };
	uint64_t t0 = now_ns();
	int pr = poll(&pfd, 1, 5000);
	uint64_t took_ms = (now_ns() - t0) / 1000000;
	CHECK(pr == 1 && (pfd.revents & POLLIN) && took_ms < 4000,
	      "wake: an event wakes the poll (poll %d after %llu ms)", pr,
	      (unsigned long long)took_ms);
	/* the event that woke it took the wake-up: the next one would wake
	 * no one until a drain arms it again (the agent drains at once when
	 * one took it during a drain) */
	CHECK(!procev_armed(pe), "wake: the event took the wake-up");
	procev_drain(pe, on_ev, &tp);
	waitpid(c, NULL, 0);
	procev_free(pe);
	targets_free(tp.h);
}

static void refresh_case(void)
{
	struct targets *t = NULL;
	int go[2], done[2];

	CHECK(targets_new(NULL, &t, NULL) == 0, "refresh: targets_new");
	CHECK(pipe(go) == 0 && pipe(done) == 0, "refresh: pipes");
	pid_t c = fork();
	if (c == 0) {
		char b;
		prctl(PR_SET_NAME, "pp-before", 0, 0, 0);
		if (write(done[1], "r", 1) != 1 || read(go[0], &b, 1) != 1)
			_exit(1);
		prctl(PR_SET_NAME, "pp-after", 0, 0, 0);
		if (write(done[1], "r", 1) != 1)
			_exit(1);
		pause();
		_exit(0);
	}
	char b;
	CHECK(read(done[0], &b, 1) == 1, "refresh: child named");
	const struct target_proc *p = targets_refresh(t, c, 0);
	CHECK(p && !strcmp(p->comm, "pp-before"), "refresh: first read (%s)", p ? p->comm : "-");
	uint64_t read1 = p ? p->read_ns : 0;
	CHECK(read1 && read1 <= now_ns(), "refresh: the read is stamped");
	CHECK(write(go[1], "g", 1) == 1 && read(done[0], &b, 1) == 1, "refresh: child renamed");
	/* read during the window (since before the read): current, not read */
	p = targets_refresh(t, c, read1 - 1000000);
	CHECK(p && !strcmp(p->comm, "pp-before") && p->read_ns == read1,
	      "refresh: read since the window began: kept (%s)", p ? p->comm : "-");
	/* not read since the window began: read again */
	p = targets_refresh(t, c, now_ns());
	CHECK(p && !strcmp(p->comm, "pp-after") && p->read_ns > read1,
	      "refresh: read before the window: read again (%s)", p ? p->comm : "-");
	kill(c, SIGKILL);
	waitpid(c, NULL, 0);
	/* gone: the last facts are kept, whatever since says */
	p = targets_refresh(t, c, 0);
	CHECK(p && p->gone && !strcmp(p->comm, "pp-after"), "refresh: gone keeps the last facts");
	close(go[0]), close(go[1]), close(done[0]), close(done[1]);
	targets_free(t);
}

int main(void)
{
	reuse_case(0);
	reuse_case(1);
	exit_case(false);
	exit_case(true);
	wake_case();
	refresh_case();
	return check_done();
}
