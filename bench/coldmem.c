/*
 * coldmem - what touching memory costs on this machine when it has been
 * left alone for a while, next to touching it warm. On some VMs the host
 * makes the first access to a guest page that sat idle for a second or more
 * cost tens of microseconds (measured here: ~50 us per 4 KiB page after 3 s
 * idle vs ~0.1 us warm). A profiling agent does most of its work once per
 * window on data it has not touched since the last one, so on such a
 * machine its CPU time is dominated by this, not by its own code. The
 * benchmark prints this figure next to the agent's.
 *
 *   coldmem IDLE_SECONDS
 *   -> warm_us=W cold_us=C idle_s=S   (mean per random access, 64 MiB, 4 KiB pages)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define SIZE (64u << 20)
#define ACCESSES 2000

static double now_us(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static double probe(const volatile unsigned long *a, size_t n, unsigned *seed)
{
	unsigned long sum = 0;
	double t0 = now_us();
	for (int i = 0; i < ACCESSES; i++)
		sum += a[(size_t)rand_r(seed) % n];
	(void)sum;
	return (now_us() - t0) / ACCESSES;
}

int main(int argc, char **argv)
{
	int idle = argc > 1 ? atoi(argv[1]) : 3;
	size_t n = SIZE / sizeof(unsigned long);
	unsigned seed = 1;
	unsigned long *a = mmap(NULL, SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
				-1, 0);

	if (a == MAP_FAILED || idle < 0) {
		fprintf(stderr, "usage: coldmem IDLE_SECONDS (needs 64 MiB)\n");
		return 2;
	}
	madvise(a, SIZE, MADV_NOHUGEPAGE);	/* 4 KiB pages, like most of a heap */
	memset(a, 1, SIZE);
	probe(a, n, &seed);
	double warm = probe(a, n, &seed);
	sleep((unsigned)idle);
	double cold = probe(a, n, &seed);
	printf("warm_us=%.3f cold_us=%.3f idle_s=%d\n", warm, cold, idle);
	return 0;
}
