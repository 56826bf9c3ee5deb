/*
 * cpuwork - a fixed-work CPU benchmark: one thread per online CPU, each
 * doing the same number of rounds of integer hashing through a few call
 * levels (so frame-pointer stacks are realistic). Prints its throughput;
 * higher is better.
 *
 *   cpuwork [ROUNDS_PER_THREAD]
 *
 * Output (one line, key=value after the first field):
 *   R rounds/s threads=N seconds=S cpu_seconds=C rounds_per_cpu_s=P check=X
 *
 * rounds/s is wall-clock throughput: what a user of the node sees, and what
 * a profiler's own CPU use takes away on a full machine. rounds_per_cpu_s
 * divides by the CPU time the threads were charged instead, so it is not
 * moved by other processes competing for the CPUs (a shared VM); what a
 * profiler costs inside the workload (sampling interrupt, BPF program,
 * cache pollution) still shows in it.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static long rounds = 4000;

struct worker_arg {
	uint64_t seed;
	double cpu_seconds;
};

__attribute__((noinline)) static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	return x ^ (x >> 33);
}

__attribute__((noinline)) static uint64_t round_(uint64_t seed)
{
	for (int i = 0; i < 100000; i++)
		seed = mix(seed + (uint64_t)i);
	return seed;
}

static double secs(const struct timespec *a, const struct timespec *b)
{
	return (double)(b->tv_sec - a->tv_sec) + (double)(b->tv_nsec - a->tv_nsec) / 1e9;
}

static void *worker(void *p)
{
	struct worker_arg *w = p;
	struct timespec c0, c1;
	uint64_t s = w->seed;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
	for (long r = 0; r < rounds; r++)
		s = round_(s);
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
	w->seed = s;
	w->cpu_seconds = secs(&c0, &c1);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc > 1)
		rounds = atol(argv[1]);
	if (rounds < 1 || rounds > 100000000) {
		fprintf(stderr, "usage: cpuwork [ROUNDS_PER_THREAD]  (1..100000000)\n");
		return 2;
	}
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	if (n < 1)
		n = 1;
	pthread_t *t = calloc((size_t)n, sizeof(*t));
	struct worker_arg *w = calloc((size_t)n, sizeof(*w));
	if (!t || !w) {
		perror("calloc");
		return 1;
	}
	struct timespec a, b;

	clock_gettime(CLOCK_MONOTONIC, &a);
	for (long i = 0; i < n; i++) {
		w[i].seed = (uint64_t)(i + 1);
		if (pthread_create(&t[i], NULL, worker, &w[i])) {
			perror("pthread_create");
			return 1;
		}
	}
	uint64_t x = 0;
	double cpu = 0;
	for (long i = 0; i < n; i++) {
		pthread_join(t[i], NULL);
		x ^= w[i].seed;
		cpu += w[i].cpu_seconds;
	}
	clock_gettime(CLOCK_MONOTONIC, &b);
	double wall = secs(&a, &b);
	double total = (double)rounds * (double)n;
	printf("%.1f rounds/s threads=%ld seconds=%.3f cpu_seconds=%.3f rounds_per_cpu_s=%.2f "
	       "check=%llx\n",
	       total / wall, n, wall, cpu, cpu > 0 ? total / cpu : 0.0,
	       (unsigned long long)(x & 0xff));
	free(t);
	free(w);
	return 0;
}
