/* sys.c - syscall-heavy workload: most of its CPU time is in the kernel
 * (reading /dev/zero, writing /dev/null). Runs for argv[1] seconds. */
#include <fcntl.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static char buf[1 << 16];

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

__attribute__((noinline)) void churn(int z, int n)
{
	for (int i = 0; i < 64; i++) {
		if (read(z, buf, sizeof(buf)) < 0 || write(n, buf, sizeof(buf)) < 0)
			exit(1);
	}
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 5, end = now() + secs;
	int z = open("/dev/zero", O_RDONLY), n = open("/dev/null", O_WRONLY);
	if (z < 0 || n < 0)
		return 1;
	while (now() < end)
		churn(z, n);
	return 0;
}
