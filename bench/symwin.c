/*
 * symwin.c - the per-process /proc and symbolizer work of a CPU window,
 * without BPF, encoding or pushing: for every pid given, what
 * cpu_profiles_build() does before building the profile (targets_refresh,
 * resolving 24 addresses in its executable mappings, sym_exe_info), once a
 * round, rounds 1.1 s apart (the symbolizer's maps age out between them, as
 * between windows). Prints the CPU time (user+sys) per round and process,
 * and of it the label reads (targets_refresh: stat, exe, cgroup); then,
 * apart, what finding a process's executable mapping costs (the frameless
 * tables do it for every process found): all of /proc/PID/maps read, or
 * one PROCMAP_QUERY (proc_maps_each_exec, stopping at the first).
 *
 *   cc -O2 $(find agent -mindepth 1 -maxdepth 1 -type d -printf ' -I%p') -Ibuild -o /tmp/symwin \
 *      bench/symwin.c build/libpushprof.a -lelf -lz -lzstd -lyaml -lpcre2-8 -lm -lpthread
 *   /tmp/symwin ROUNDS PID...
 * -DOLD_API builds it against a tree before 2026-12-02 whose
 * sym_resolve_user() and sym_exe_info() take no start time (the
 * start time read again by the symbolizer) and whose targets_refresh()
 * takes no since_ns (before 2026-12-07), for before/after runs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "procinfo.h"
#include "symbolize.h"
#include "targets.h"

static double cpu_ms(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
	       (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
}

#define NADDR 24

#ifndef OLD_API
static int first_exec(const struct proc_map *m, void *arg)
{
	(void)m, (void)arg;
	return 1;
}
#endif

int main(int argc, char **argv)
{
	if (argc < 3)
		return 2;
	int rounds = atoi(argv[1]), np = argc - 2;
	uint64_t(*addrs)[NADDR] = calloc((size_t)np, sizeof(*addrs));
	size_t *na = calloc((size_t)np, sizeof(*na));
	pid_t *pids = calloc((size_t)np, sizeof(*pids));
	for (int i = 0; i < np; i++) {
		struct proc_maps m;
		pids[i] = atoi(argv[i + 2]);
		if (proc_maps_read(pids[i], &m, NULL) < 0)
			continue;
		size_t nx = 0;
		for (size_t k = 0; k < m.n; k++)
			nx += m.v[k].perms[2] == 'x' && m.v[k].path[0] == '/';
		for (size_t k = 0, j = 0; k < m.n && nx; k++) {
			const struct proc_map *p = &m.v[k];
			if (p->perms[2] != 'x' || p->path[0] != '/')
				continue;
			size_t per = NADDR / nx + (j++ < NADDR % nx);
			for (size_t a = 0; a < per && na[i] < NADDR; a++)
				addrs[i][na[i]++] =
					p->start + (p->end - p->start) * (2 * a + 1) / (2 * per);
		}
		proc_maps_free(&m);
	}
	struct targets *t = NULL;
	struct symbolizer *s = NULL;
	if (targets_new(NULL, &t, NULL) < 0 || sym_new(NULL, &s, NULL) < 0)
		return 1;
	struct sym_batch b;
	sym_batch_init(&b);
	for (int r = 0; r <= rounds; r++) {
		double c0 = cpu_ms(), labels_ms = 0;
		for (int i = 0; i < np; i++) {
			double l0 = cpu_ms();
#ifdef OLD_API
			const struct target_proc *tp = targets_refresh(t, pids[i]);
#else
			/* every round re-reads, as a window re-reads a process it
			 * has not read since the window began */
			const struct target_proc *tp = targets_refresh(t, pids[i], 0);
#endif
			labels_ms += cpu_ms() - l0;
			struct sym_exe x;
			if (!tp)
				continue;
#ifdef OLD_API
			sym_resolve_user(s, pids[i], addrs[i], na[i], &b, NULL);
			if (tp->exe)
				sym_exe_info(s, pids[i], tp->exe, &x);
#else
			uint64_t st = tp->gone ? 0 : tp->start_time;
			sym_resolve_user(s, pids[i], st, addrs[i], na[i], &b, NULL);
			if (tp->exe)
				sym_exe_info(s, pids[i], st, tp->exe, &x);
#endif
		}
		double c1 = cpu_ms();
		/* what the frameless tables do for each process found: its
		 * executable's mapping, from the whole maps or asked of the
		 * kernel one executable mapping at a time (the first, here) */
		double whole_ms = 0, query_ms = 0;
#ifndef OLD_API
		for (int i = 0; i < np; i++) {
			struct proc_maps m;
			double q0 = cpu_ms();
			if (proc_maps_read(pids[i], &m, NULL) == 0)
				proc_maps_free(&m);
			double q1 = cpu_ms();
			proc_maps_each_exec(pids[i], first_exec, NULL);
			whole_ms += q1 - q0;
			query_ms += cpu_ms() - q1;
		}
#endif
		if (r) /* round 0 loads every file: the warm-up */
			printf("round=%d cpu_ms=%.2f us_per_process=%.1f labels_us_per_process=%.1f "
			       "exe_map_whole_us=%.1f exe_map_query_us=%.1f\n",
			       r, c1 - c0, (c1 - c0) * 1e3 / np, labels_ms * 1e3 / np,
			       whole_ms * 1e3 / np, query_ms * 1e3 / np);
		fflush(stdout);
		usleep(1100000);
	}
	sym_batch_free(&b);
	sym_free(s);
	targets_free(t);
	return 0;
}
