/* Unit test of agent/base/procinfo.c against this very process and a child. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "procinfo.h"
#include "check.h"

static void *sleeper(void *arg)
{
	(void)arg;
	for (;;)
		pause();
	return NULL;
}

/* The state and thread count of pid once its state is want (up to 5 s). */
static bool wait_state(pid_t pid, char want, struct proc_stat *st)
{
	for (int i = 0; i < 500; i++) {
		if (proc_stat(pid, st) == 0 && st->state == want)
			return true;
		usleep(10000);
	}
	return false;
}

static int cg_count_cb(const char *ctrls, const char *path, void *arg)
{
	(void)ctrls;
	if (path[0] == '/')
		(*(int *)arg)++;
	return 0;
}

/* proc_maps_each_exec against /proc/PID/maps read whole: the same
 * executable file mappings, in order, field by field; fn's value stops it. */
struct each_seen {
	const struct proc_maps *want; /* the exec file mappings, read whole */
	size_t n, stop_at;
	int bad;
};

static int each_cb(const struct proc_map *m, void *arg)
{
	struct each_seen *e = arg;
	size_t k = 0;
	const struct proc_map *w = NULL;
	for (size_t i = 0; i < e->want->n; i++) {
		const struct proc_map *x = &e->want->v[i];
		if (x->perms[2] != 'x' || !x->inode || x->path[0] != '/')
			continue;
		if (k++ == e->n) {
			w = x;
			break;
		}
	}
	if (!w || w->start != m->start || w->end != m->end || w->offset != m->offset ||
	    w->inode != m->inode || w->dev_major != m->dev_major || w->dev_minor != m->dev_minor ||
	    strcmp(w->perms, m->perms) || strcmp(w->path, m->path)) {
		if (!e->bad)
			printf("each_exec: #%zu %llx-%llx %s %s, maps say %s\n", e->n,
			       (unsigned long long)m->start, (unsigned long long)m->end, m->perms,
			       m->path, w ? w->path : "(none)");
		e->bad++;
	}
	e->n++;
	return e->n == e->stop_at ? 7 : 0;
}

static void each_exec_case(pid_t pid, const char *what)
{
	struct proc_maps mm = { 0 };
	CHECK(proc_maps_read(pid, &mm, NULL) == 0, "%s: maps read", what);
	size_t nx = 0;
	for (size_t i = 0; i < mm.n; i++)
		nx += mm.v[i].perms[2] == 'x' && mm.v[i].inode && mm.v[i].path[0] == '/';
	struct each_seen e = { .want = &mm };
	int r = proc_maps_each_exec(pid, each_cb, &e);
	if (r == -ENOTTY) {
		printf("%s: no PROCMAP_QUERY on this kernel (before 6.11): callers read the maps\n",
		       what);
		proc_maps_free(&mm);
		return;
	}
	CHECK(r == 0 && e.n == nx && nx > 0 && !e.bad,
	      "%s: every executable file mapping, as in the maps (%d; %zu of %zu, %d differ)", what,
	      r, e.n, nx, e.bad);
	struct each_seen first = { .want = &mm, .stop_at = 1 };
	r = proc_maps_each_exec(pid, each_cb, &first);
	CHECK(r == 7 && first.n == 1 && !first.bad, "%s: stops at fn's value (%d after %zu)", what,
	      r, first.n);
	proc_maps_free(&mm);
}

int main(void)
{
	struct proc_maps maps;
	struct pp_err err = { 0 };
	char buf[4096];
	pid_t self = getpid();

	CHECK(proc_maps_read(self, &maps, &err) == 0, "maps: %s", err.msg);
	const struct proc_map *m = proc_maps_find(&maps, (uint64_t)(uintptr_t)&main);
	CHECK(m && strstr(m->path, "test_procinfo") && m->perms[2] == 'x', "main's mapping");
	CHECK(proc_maps_find(&maps, 0) == NULL, "no mapping at 0");
	CHECK(m && proc_maps_first_of(&maps, m->path) && proc_maps_first_of(&maps, m->path)->offset == 0,
	      "first mapping of the exe has offset 0");
	proc_maps_free(&maps);

	prctl(PR_SET_NAME, "pp test (x)", 0, 0, 0);
	CHECK(proc_comm(self, buf, sizeof(buf)) == 0 && strcmp(buf, "pp test (x)") == 0, "comm %s", buf);
	uint64_t t1 = 0;
	CHECK(proc_start_time(self, &t1) == 0 && t1 > 0, "start time with ')' and spaces in comm");
	CHECK(proc_exe(self, buf, sizeof(buf)) == 0 && strstr(buf, "test_procinfo"), "exe %s", buf);
	int n = 0;
	CHECK(proc_cgroup_each(self, cg_count_cb, &n) == 0 && n > 0, "cgroup lines");
	CHECK(proc_cgroup(self, NULL, buf, sizeof(buf)) == 0 && buf[0] == '/', "cgroup path %s", buf);
	CHECK(proc_cgroup(self, "memory", buf, sizeof(buf)) == 0 && buf[0] == '/', "memory cgroup %s", buf);
	struct proc_stat st;
	CHECK(proc_stat(self, &st) == 0 && st.state == 'R' && !(st.flags & 0x00200000UL) &&
	      st.start_time == t1, "stat of self: running, not a kernel thread, same start time");
	CHECK(proc_stat(2, &st) != 0 || (st.flags & 0x00200000UL), "pid 2 (kthreadd) is a kernel thread");
	pid_t tg = 0;
	CHECK(proc_tgid(self, &tg) == 0 && tg == self, "tgid");
	CHECK(proc_root_path(42, "/usr/bin/x", buf, sizeof(buf)) == 0 && strcmp(buf, "/proc/42/root/usr/bin/x") == 0, "root path");

	/* the kernel's stack limit, as the file says */
	FILE *f = fopen("/proc/sys/kernel/perf_event_max_stack", "r");
	unsigned want = 0;
	if (f) {
		if (fscanf(f, "%u", &want) != 1)
			want = 0;
		fclose(f);
	}
	CHECK(proc_perf_max_stack() == want && (want || !f),
	      "perf_event_max_stack: %u, the file says %u", proc_perf_max_stack(), want);

	/* A process that is gone reports -ESRCH everywhere. */
	pid_t child = fork();
	if (child == 0)
		_exit(0);
	waitpid(child, NULL, 0);
	CHECK(proc_maps_read(child, &maps, &err) == -ESRCH, "gone: maps");
	CHECK(proc_comm(child, buf, sizeof(buf)) == -ESRCH, "gone: comm");
	CHECK(proc_exe(child, buf, sizeof(buf)) == -ESRCH, "gone: exe");
	CHECK(proc_start_time(child, &t1) == -ESRCH, "gone: stat");

	/* Exited, not yet reaped (a zombie): gone for proc_comm_start, which
	 * the target scanner reads; /proc/PID/stat itself still reads. */
	child = fork();
	if (child == 0)
		_exit(0);
	CHECK(wait_state(child, 'Z', &st) && st.threads == 1, "zombie: state Z, %llu threads",
	      (unsigned long long)st.threads);
	CHECK(proc_comm_start(child, buf, 16, &t1) == -ESRCH, "zombie: gone for proc_comm_start");
	waitpid(child, NULL, 0);

	/* A leader that called pthread_exit while another thread runs shows Z
	 * too, but the process lives. */
	child = fork();
	if (child == 0) {
		pthread_t th;
		if (pthread_create(&th, NULL, sleeper, NULL) == 0)
			pthread_exit(NULL);
		_exit(1);
	}
	CHECK(wait_state(child, 'Z', &st) && st.threads == 2, "zombie leader: state Z, %llu threads",
	      (unsigned long long)st.threads);
	CHECK(proc_comm_start(child, buf, 16, &t1) == 0, "zombie leader with a live thread: alive");
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);

	/* the executable's mappings one query at a time: this process (libc,
	 * ld.so, the test) and a child that exec'd sleep */
	each_exec_case(getpid(), "each_exec self");
	child = fork();
	if (child == 0) {
		execl("/bin/sleep", "sleep", "30", (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 500; i++) {
		/* until the exec is done and ld.so too: the process sleeps
		 * (state S, in its nanosleep); before, the maps read and the
		 * queries could see libc mapped in between */
		char c[16] = "", line[512] = "", path[64];
		uint64_t t;
		snprintf(path, sizeof(path), "/proc/%d/stat", (int)child);
		FILE *sf = fopen(path, "r");
		if (sf) {
			if (!fgets(line, sizeof(line), sf))
				line[0] = 0;
			fclose(sf);
		}
		const char *rp = strrchr(line, ')');
		if (proc_comm_start(child, c, sizeof(c), &t) == 0 && !strcmp(c, "sleep") && rp &&
		    rp[1] == ' ' && rp[2] == 'S')
			break;
		usleep(10000);
	}
	each_exec_case(child, "each_exec sleep");
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	CHECK(proc_maps_each_exec(child, each_cb, &(struct each_seen){ 0 }) == -ESRCH,
	      "each_exec: a reaped process is gone");

	return check_done();
}
