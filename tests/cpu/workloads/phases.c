/* phases.c - CPU workload that runs main -> phase -> spin_a for argv[2]
 * seconds, sleeps argv[3] seconds, and again, for argv[1] seconds in all
 * (defaults 12, 1.5, 3.5): the agent's stored stacks of spin_a age out and
 * are evicted while it sleeps, and are stored again when it wakes. Built
 * with -fno-omit-frame-pointer. */
#include <stdlib.h>
#include <time.h>

static volatile unsigned long sink;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

__attribute__((noinline)) void spin_a(void)
{
	for (int i = 0; i < 2000000; i++)
		sink += (unsigned long)i ^ (sink >> 3);
}

__attribute__((noinline)) void phase(double secs)
{
	double end = now() + secs;
	while (now() < end)
		spin_a();
	__asm__ volatile("" ::: "memory");
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 12, on = argc > 2 ? atof(argv[2]) : 1.5;
	double off = argc > 3 ? atof(argv[3]) : 3.5, end = now() + secs;
	while (now() < end) {
		phase(on);
		struct timespec ts = { (time_t)off, (long)((off - (time_t)off) * 1e9) };
		nanosleep(&ts, NULL);
	}
	return 0;
}
