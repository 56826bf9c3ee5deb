/*
 * stacks.c - a CPU workload that makes many distinct stacks on purpose
 * (bench/scale.py, axis "stacks"): round x walks a chain of BITS calls,
 * level i going through call site A or B by bit i of x, so the chains of
 * 2^BITS consecutive rounds are all different; the leaf spins briefly.
 *
 *   stacks SECS BITS
 *
 * Built with frame pointers and -O1 (no tail calls: every level keeps its
 * frame and return address).
 */
#include <stdlib.h>
#include <time.h>

static volatile unsigned long sink;

__attribute__((noinline)) static void leaf(unsigned long x)
{
	for (int i = 0; i < 200; i++)
		sink += x * (unsigned long)i;
}

__attribute__((noinline)) static void lb(int depth, unsigned long x);

__attribute__((noinline)) static void la(int depth, unsigned long x)
{
	if (depth == 0)
		leaf(x);
	else if (x & 1)
		la(depth - 1, x >> 1);
	else
		lb(depth - 1, x >> 1);
	sink++;
}

__attribute__((noinline)) static void lb(int depth, unsigned long x)
{
	if (depth == 0)
		leaf(x);
	else if (x & 1)
		la(depth - 1, x >> 1);
	else
		lb(depth - 1, x >> 1);
	sink++;
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 10;
	int bits = argc > 2 ? atoi(argv[2]) : 10;
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (unsigned long x = 0;; x++) {
		la(bits, x);
		if ((x & 1023) == 0) {
			clock_gettime(CLOCK_MONOTONIC, &t);
			if (t.tv_sec - t0.tv_sec + (t.tv_nsec - t0.tv_nsec) / 1e9 > secs)
				break;
		}
	}
	return 0;
}
