/*
 * cpuwork - a fixed-work CPU benchmark: one thread per online CPU, each
 * doing the same number of rounds of integer hashing through a few call
 * levels (so frame-pointer stacks are realistic). Prints the throughput
 * in rounds per second; higher is better.
 *
 *   cpuwork [ROUNDS_PER_THREAD]
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static long rounds = 4000;

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

static void *worker(void *arg)
{
	uint64_t s = (uint64_t)(uintptr_t)arg;
	for (long r = 0; r < rounds; r++)
		s = round_(s);
	return (void *)(uintptr_t)s;
}

int main(int argc, char **argv)
{
	if (argc > 1)
		rounds = atol(argv[1]);
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	pthread_t *t = calloc((size_t)n, sizeof(*t));
	struct timespec a, b;

	clock_gettime(CLOCK_MONOTONIC, &a);
	for (long i = 0; i < n; i++)
		pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)(i + 1));
	uint64_t x = 0;
	for (long i = 0; i < n; i++) {
		void *r;
		pthread_join(t[i], &r);
		x ^= (uint64_t)(uintptr_t)r;
	}
	clock_gettime(CLOCK_MONOTONIC, &b);
	double secs = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
	printf("%.1f rounds/s threads=%ld seconds=%.3f check=%llx\n", (double)(rounds * n) / secs, n,
	       secs, (unsigned long long)(x & 0xff));
	free(t);
	return 0;
}
