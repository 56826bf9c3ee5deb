/* cframes.c - C workload for the .eh_frame tables (bpf/cpu_abi.h, "C and C++:
 * prologues, epilogues, frameless leaves"). Built with -O2
 * -fno-omit-frame-pointer -momit-leaf-frame-pointer:
 *  - leaf() is hot and has no frame pointer (and a stack array, so its CFA
 *    is %rsp + a frame size, not just the return address); it is called
 *    by hotA() and hotB() in a 70/30 split of the calls;
 *  - mid() is a non-leaf with a frame pointer and a tiny body, called
 *    from pro() at a very high rate, so that a good share of its samples
 *    land on its `push %rbp`, `mov %rsp,%rbp`, `pop %rbp` and `ret`; it
 *    calls tip(), a frameless leaf with no stack use at all.
 * Chains: main -> hotA|hotB -> leaf, main -> pro -> mid [-> tip].
 * Runs for argv[1] seconds (default 5). */
#include <stdlib.h>
#include <time.h>

static volatile unsigned long sink;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

__attribute__((noinline)) unsigned long leaf(unsigned long x)
{
	volatile unsigned long buf[40];	/* > the red zone: `sub $N,%rsp` */
	for (int i = 0; i < 40; i++)
		buf[i] = x + (unsigned long)i;
	for (int r = 0; r < 200; r++)
		for (int i = 0; i < 40; i++)
			x = (x ^ buf[i]) * 0x9e3779b97f4a7c15ULL + (x >> 7);
	return x;
}

__attribute__((noinline)) void hotA(void)
{
	for (int i = 0; i < 7; i++)
		sink += leaf(sink + (unsigned long)i);
	__asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void hotB(void)
{
	for (int i = 0; i < 3; i++)
		sink += leaf(sink ^ (unsigned long)i);
	__asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) unsigned long tip(unsigned long x)
{
	return x * 3 + 1;
}

/* a frame pointer (not a leaf), almost nothing but prologue and epilogue */
__attribute__((noinline)) unsigned long mid(unsigned long x)
{
	unsigned long r = tip(x);
	__asm__ volatile("" : "+r"(r));	/* no tail call: the frame stays */
	return r;
}

__attribute__((noinline)) void pro(void)
{
	unsigned long x = sink;
	for (int i = 0; i < 20000; i++)
		x = mid(x);
	sink = x;
	__asm__ volatile("" ::: "memory");
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 5, end = now() + secs;
	while (now() < end) {
		hotA();
		hotB();
		pro();
	}
	return 0;
}
