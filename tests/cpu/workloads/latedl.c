/*
 * latedl.c - a program that loads a library late and exits soon after:
 * it sleeps WAIT seconds (past the agent's last timed re-read of its maps,
 * 2 s after exec), dlopen()s libz, compresses for BURN seconds (wall time)
 * and exits. What tests/cpu/test_cpu_exited.py names "late".
 * Usage: latedl [WAIT [BURN]]   (defaults 2.6 0.4)
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

typedef int (*compress_fn)(unsigned char *, unsigned long *, const unsigned char *,
			   unsigned long);

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	double wait = argc > 1 ? atof(argv[1]) : 2.6, burn = argc > 2 ? atof(argv[2]) : 0.4;
	static unsigned char in[1 << 16], out[1 << 17];

	usleep((useconds_t)(wait * 1e6));
	void *h = dlopen("libz.so.1", RTLD_NOW);
	compress_fn c = h ? (compress_fn)dlsym(h, "compress") : NULL;
	if (!c) {
		fprintf(stderr, "latedl: no libz.so.1: %s\n", dlerror());
		return 1;
	}
	for (size_t i = 0; i < sizeof(in); i++)
		in[i] = (unsigned char)(i * 7 ^ i >> 3);
	double t0 = now();
	while (now() - t0 < burn) {
		unsigned long n = sizeof(out);
		c(out, &n, in, sizeof(in));
	}
	return 0;
}
