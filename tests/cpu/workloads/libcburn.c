/* libcburn.c - CPU workload whose time is split between its own code
 * (main -> burn -> mix) and libc's rand() (exported functions, so named from
 * .dynsym of a stripped libc): frames in the executable and in a shared
 * library that ld.so maps after exec. Runs for argv[1] seconds (default 5). */
#include <stdlib.h>
#include <time.h>

static volatile unsigned long sink;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

__attribute__((noinline)) unsigned long mix(unsigned long x)
{
	for (int i = 0; i < 20000; i++)
		x = x * 6364136223846793005ul + (x >> 7);
	return x;
}

__attribute__((noinline)) void burn(void)
{
	unsigned long x = sink;
	for (int i = 0; i < 20000; i++)
		x += (unsigned long)rand();
	sink = mix(x);
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 5, end = now() + secs;
	while (now() < end)
		burn();
	return 0;
}
