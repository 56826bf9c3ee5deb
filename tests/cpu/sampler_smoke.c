/*
 * sampler_smoke.c - load the real sampler, burn CPU in this process for a
 * while, drain twice, and check the counts add up: the samples drained equal
 * the samples the BPF counters say were recorded, stacks resolve, and this
 * process's own frames are there; stacks stay stored across windows (a
 * later round reads fewer than it names). Prints the figures for the report.
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cpu.h"
#include "check.h"

static volatile unsigned long sink;

static double secs_of(clockid_t c)
{
	struct timespec t;
	clock_gettime(c, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

/* Burn secs of CPU time (not wall time: the machine may be busy), giving
 * up after 10 s of wall time. */
__attribute__((noinline)) static void burn(double secs)
{
	double c0 = secs_of(CLOCK_THREAD_CPUTIME_ID), w0 = secs_of(CLOCK_MONOTONIC);
	do {
		for (int i = 0; i < 100000; i++)
			sink += (unsigned long)i * 7;
	} while (secs_of(CLOCK_THREAD_CPUTIME_ID) - c0 < secs &&
		 secs_of(CLOCK_MONOTONIC) - w0 < 10);
}

int main(void)
{
	struct pp_err err = {0};
	struct cpu_sampler *s;
	struct cpu_sampler_opts o = { .frequency_hz = 199, .max_depth = 127, .kernel_stacks = true,
				      .filter = true, .interval_ns = 1000000000ull };

	if (cpu_sampler_new(&o, &s, &err) < 0) {
		fprintf(stderr, "sampler: %s\n", err.msg);
		return 1;
	}
	cpu_sampler_allow(s, getpid(), true);
	struct cpu_window w = {0};
	uint64_t total_rec = 0, total_drained = 0;
	for (int round = 0; round < 3; round++) {
		burn(0.5);
		if (cpu_sampler_drain(s, &w, &err) < 0) {
			fprintf(stderr, "drain: %s\n", err.msg);
			return 1;
		}
		total_rec += w.stats[CPU_STAT_RECORDED];
		total_drained += w.samples;
		uint64_t mine = 0, resolved = 0;
		for (size_t i = 0; i < w.nrecs; i++) {
			const struct cpu_record *r = &w.recs[i];
			uint32_t n;
			if ((pid_t)r->key.tgid != getpid())
				continue;
			mine += r->count;
			if (cpu_window_stack(&w, r->key.user_stack, &n) && n > 2)
				resolved += r->count;
		}
		printf("round %d: records=%zu stacks=%zu read=%zu stored=%zu samples=%lu recorded=%lu "
		       "filtered=%lu runs=%lu idle=%lu stack_err=%lu mine=%lu resolved=%lu\n", round,
		       w.nrecs, w.nstacks, w.stacks_read, w.stacks_stored, (unsigned long)w.samples,
		       (unsigned long)w.stats[CPU_STAT_RECORDED],
		       (unsigned long)w.stats[CPU_STAT_FILTERED], (unsigned long)w.stats[CPU_STAT_RUNS],
		       (unsigned long)w.stats[CPU_STAT_IDLE], (unsigned long)w.stats[CPU_STAT_STACK_ERR],
		       (unsigned long)mine, (unsigned long)resolved);
		CHECK(!w.stats[CPU_STAT_STACKS_FULL] && !w.stats[CPU_STAT_COLLISION] &&
		      !w.stats[CPU_STAT_LOST_COUNTS_FULL] && !w.lost_evicted,
		      "round %d: no samples or stacks lost", round);
		/* the same loop again: its stacks are still stored and copied */
		CHECK(round == 0 || w.stacks_read < w.nstacks,
		      "round %d: stacks of an earlier window not read again (%zu of %zu)", round,
		      w.stacks_read, w.nstacks);
		/* 0.5 s of CPU at 199 Hz: ~100 samples expected */
		CHECK(mine >= 60 && resolved * 10 >= mine * 9,
		      "round %d: enough own samples (%lu), 90 %% of them with stacks (%lu)", round,
		      (unsigned long)mine, (unsigned long)resolved);
	}
	/*
	 * Hotplug paths without taking CPUs offline: pinned to CPU 1, this
	 * process is not sampled while only CPU 0 is attached, and is again
	 * once the real online list is re-applied.
	 */
	cpu_set_t one;
	CPU_ZERO(&one);
	CPU_SET(1, &one);
	if (cpu_sampler_ncpus(s) >= 2 && sched_setaffinity(0, sizeof(one), &one) == 0) {
		bool changed = false;
		uint64_t mine[2] = { 0, 0 };
		for (int phase = 0; phase < 2; phase++) {
			int r = phase == 0 ? cpu_sampler_set_cpus(s, "0", &changed, &err)
					   : cpu_sampler_sync_cpus(s, &changed, &err);
			CHECK(r >= 0 && changed, "set cpus phase %d: %d %s", phase, r, err.msg);
			if (cpu_sampler_drain(s, &w, &err) < 0)	/* start clean */
				return 1;
			total_rec += w.stats[CPU_STAT_RECORDED];
			total_drained += w.samples;
			burn(0.3);
			if (cpu_sampler_drain(s, &w, &err) < 0)
				return 1;
			total_rec += w.stats[CPU_STAT_RECORDED];
			total_drained += w.samples;
			for (size_t i = 0; i < w.nrecs; i++)
				if ((pid_t)w.recs[i].key.tgid == getpid())
					mine[phase] += w.recs[i].count;
		}
		printf("hotplug: cpu0 only -> own samples %lu; all online -> %lu (ncpus %u)\n",
		       (unsigned long)mine[0], (unsigned long)mine[1], cpu_sampler_ncpus(s));
		CHECK(mine[0] <= 2 && mine[1] >= 30, "detach/attach by CPU list");
	} else {
		printf("hotplug check skipped: needs 2 CPUs\n");
	}

	/* Stop sampling before the last drains. A run between a drain's flip
	 * and its counter read is counted in that drain but lands in the set
	 * the next drain takes (the agent's windows live with that: a window's
	 * `recorded` may include a sample of the next); with no CPU attached
	 * the last two drains leave nothing behind and the totals must agree. */
	int dr = cpu_sampler_set_cpus(s, "", NULL, &err);
	CHECK(dr == -ENODEV, "every CPU detached: %d", dr);
	for (int i = 0; i < 2; i++) {
		if (cpu_sampler_drain(s, &w, &err) < 0)
			return 1;
		total_rec += w.stats[CPU_STAT_RECORDED];
		total_drained += w.samples;
	}
	printf("total recorded=%lu drained=%lu\n", (unsigned long)total_rec,
	       (unsigned long)total_drained);
	CHECK(total_rec == total_drained, "everything recorded is drained");
	printf("prog_id=%d\n", cpu_sampler_prog_id(s));
	cpu_window_free(&w);
	cpu_sampler_free(s);
	return check_done();
}
