/*
 * maprec_cost.c - what the kernel's mmap records (agent/cpu/maprec.h) cost:
 * the time of an executable file mmap + munmap in a process on the node
 * with and without a perf event per CPU asking for them (what the agent's
 * sampler events do), rounds alternating, and the agent's drain time per
 * record. Every executable mapping any process makes pays the first
 * difference (a process start makes 5-10 of them); the agent pays the drain.
 *
 * Build and run (as root, from the source tree, after `ninja -C build`):
 *   cc -O2 $(find agent -mindepth 1 -maxdepth 1 -type d -printf ' -I%p') -Ibuild \
 *      -o /tmp/maprec_cost bench/maprec_cost.c build/libpushprof.a \
 *      -lelf -lz -lzstd -lyaml -lpcre2-8 -lm -lpthread -lbpf
 *   /tmp/maprec_cost [ROUNDS [MAPS_PER_ROUND]]      (defaults 8 20000)
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "maprec.h"

#define MAX_CPUS 256

static double now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static unsigned long records;

static void count(pid_t pid, uint64_t t, const struct proc_map *m, void *arg)
{
	(void)pid, (void)t, (void)m, (void)arg;
	records++;
}

/* ns per mmap + munmap of fd's first page, executable, n times */
static double maps(int fd, int n)
{
	double t0 = now_ns();
	for (int i = 0; i < n; i++) {
		void *p = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
		if (p == MAP_FAILED) {
			perror("mmap");
			exit(1);
		}
		munmap(p, 4096);
	}
	return (now_ns() - t0) / n;
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 8, n = argc > 2 ? atoi(argv[2]) : 20000;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	if (fd < 0 || ncpu < 1 || ncpu > MAX_CPUS || rounds < 1 || n < 1)
		return 1;
	double off[64], on[64], drain[64];
	if (rounds > 64)
		rounds = 64;
	for (int r = 0; r < rounds; r++) {
		for (int k = 0; k < 2; k++) {
			bool with = (k == 0) == (r % 2 == 0); /* ABBA */
			int efd[MAX_CPUS];
			struct maprec_ring *ring[MAX_CPUS] = { 0 };
			if (with) {
				for (int c = 0; c < ncpu; c++) {
					struct perf_event_attr a;
					memset(&a, 0, sizeof(a));
					a.size = sizeof(a);
					a.type = PERF_TYPE_SOFTWARE;
					a.config = PERF_COUNT_SW_DUMMY;
					maprec_attr(&a);
					efd[c] = (int)syscall(SYS_perf_event_open, &a, -1, c, -1,
							      PERF_FLAG_FD_CLOEXEC);
					if (efd[c] < 0 || maprec_map(efd[c], &ring[c]) < 0) {
						fprintf(stderr, "perf event on cpu %d: %s\n", c,
							strerror(errno));
						return 1;
					}
				}
			}
			/* drained every 100 maps, as a ring (~200 records) needs on
			 * a node this busy; the drain is timed apart */
			double t = 0, td = 0;
			uint64_t lost = 0;
			records = 0;
			for (int done = 0; done < n; done += 100) {
				t += maps(fd, 100) * 100;
				double d0 = now_ns();
				for (int c = 0; with && c < ncpu; c++)
					maprec_drain(ring[c], 4096, count, NULL, &lost);
				td += now_ns() - d0;
			}
			if (with) {
				on[r] = t / n;
				drain[r] = records ? td / (double)records : 0;
				printf("round %d with records:    %.0f ns per mmap+munmap, %lu records "
				       "(%llu lost), drain %.0f ns per record\n",
				       r, on[r], records, (unsigned long long)lost, drain[r]);
				for (int c = 0; c < ncpu; c++) {
					maprec_unmap(ring[c]);
					close(efd[c]);
				}
			} else {
				off[r] = t / n;
				printf("round %d without records: %.0f ns per mmap+munmap\n", r, off[r]);
			}
		}
	}
	double ratio[64];
	for (int r = 0; r < rounds; r++)
		ratio[r] = on[r] / off[r];
	qsort(off, (size_t)rounds, sizeof(double), cmp);
	qsort(on, (size_t)rounds, sizeof(double), cmp);
	qsort(drain, (size_t)rounds, sizeof(double), cmp);
	qsort(ratio, (size_t)rounds, sizeof(double), cmp);
	printf("median: without %.0f ns, with %.0f ns (+%.0f ns per executable mapping made), "
	       "paired ratio %.3f; agent drain %.0f ns per record\n",
	       off[rounds / 2], on[rounds / 2], on[rounds / 2] - off[rounds / 2], ratio[rounds / 2],
	       drain[rounds / 2]);
	return 0;
}
