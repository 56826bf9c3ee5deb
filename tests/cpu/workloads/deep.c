/* deep.c - CPU workload with stacks of three sizes, each in its own thread
 * (built with -fno-omit-frame-pointer): "short" runs main-side chain
 * s1 -> s2 -> s3 -> spin_short (a few frames: the agent's small stack
 * maps), "long" runs l1 -> ... -> l48 -> spin_long (about 55 frames: the
 * 1 KiB maps, bpf/cpu_abi.h), "rec" recurses 300 deep into spin_rec (beyond
 * any depth limit: truncated). Runs for argv[1] seconds (default 5). */
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

static volatile unsigned long sink;
static double end;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

#define SPIN(name)							\
	__attribute__((noinline)) void name(void)			\
	{								\
		for (int i = 0; i < 200000; i++)			\
			sink += (unsigned long)i ^ (sink >> 3);		\
	}
SPIN(spin_short)
SPIN(spin_long)
SPIN(spin_rec)

/* one frame that calls the next */
#define LINK(name, next)						\
	__attribute__((noinline)) void name(void)			\
	{								\
		next();							\
		__asm__ volatile("" ::: "memory");			\
	}
LINK(s3, spin_short)
LINK(s2, s3)
LINK(s1, s2)

LINK(l48, spin_long)
LINK(l47, l48)
LINK(l46, l47)
LINK(l45, l46)
LINK(l44, l45)
LINK(l43, l44)
LINK(l42, l43)
LINK(l41, l42)
LINK(l40, l41)
LINK(l39, l40)
LINK(l38, l39)
LINK(l37, l38)
LINK(l36, l37)
LINK(l35, l36)
LINK(l34, l35)
LINK(l33, l34)
LINK(l32, l33)
LINK(l31, l32)
LINK(l30, l31)
LINK(l29, l30)
LINK(l28, l29)
LINK(l27, l28)
LINK(l26, l27)
LINK(l25, l26)
LINK(l24, l25)
LINK(l23, l24)
LINK(l22, l23)
LINK(l21, l22)
LINK(l20, l21)
LINK(l19, l20)
LINK(l18, l19)
LINK(l17, l18)
LINK(l16, l17)
LINK(l15, l16)
LINK(l14, l15)
LINK(l13, l14)
LINK(l12, l13)
LINK(l11, l12)
LINK(l10, l11)
LINK(l9, l10)
LINK(l8, l9)
LINK(l7, l8)
LINK(l6, l7)
LINK(l5, l6)
LINK(l4, l5)
LINK(l3, l4)
LINK(l2, l3)
LINK(l1, l2)

__attribute__((noinline)) void rec(int n)
{
	if (n > 0)
		rec(n - 1);
	else
		spin_rec();
	__asm__ volatile("" ::: "memory");
}

static void *run_short(void *arg)
{
	(void)arg;
	while (now() < end)
		s1();
	return NULL;
}

static void *run_long(void *arg)
{
	(void)arg;
	while (now() < end)
		l1();
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t t[2];

	end = now() + (argc > 1 ? atof(argv[1]) : 5);
	pthread_create(&t[0], NULL, run_short, NULL);
	pthread_create(&t[1], NULL, run_long, NULL);
	while (now() < end)
		rec(300);
	pthread_join(t[0], NULL);
	pthread_join(t[1], NULL);
	return 0;
}
