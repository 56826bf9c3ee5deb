/* vdsoloop.c - CPU workload spending its time in the vDSO: main -> tick ->
 * clock_gettime (served by __vdso_clock_gettime without entering the
 * kernel). Runs for argv[1] seconds (default 5). */
#include <stdlib.h>
#include <time.h>

static volatile long sink;

__attribute__((noinline)) double tick(void)
{
	struct timespec ts;
	for (int i = 0; i < 1000; i++) {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		sink += ts.tv_nsec;
	}
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	double end = tick() + (argc > 1 ? atof(argv[1]) : 5);
	while (tick() < end)
		;
	return 0;
}
