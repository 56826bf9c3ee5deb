/* chain.c - CPU workload main -> a -> b -> c, c spinning; built with
 * -fno-omit-frame-pointer. Runs for argv[1] seconds (default 5). */
#include <stdlib.h>
#include <time.h>

static volatile unsigned long sink;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

__attribute__((noinline)) void c(void)
{
	for (int i = 0; i < 2000000; i++)
		sink += (unsigned long)i ^ (sink >> 3);
}

__attribute__((noinline)) void b(void)
{
	c();
	__asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void a(void)
{
	b();
	__asm__ volatile("" ::: "memory");
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 5, end = now() + secs;
	while (now() < end)
		a();
	return 0;
}
