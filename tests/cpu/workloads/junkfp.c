/* junkfp.c - CPU workload that spins with %rbp pointing at data, as
 * assembly using %rbp as a general register does: the frame-pointer walk
 * then reads a "saved frame pointer" of 0 and a "return address" that is
 * no code - half of the time a SHA-256 constant, half of the time a data
 * address (non-executable memory). main -> spin_junk; runs argv[1] seconds
 * (default 5). */
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

static uint64_t fake_const[2] = { 0, 0xe9b5dba5b5c0fbceull };
static uint64_t fake_data[2];

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

__attribute__((noinline)) void spin_junk(uint64_t *frame)
{
	/* %rbp = frame for the spin; restored before anything else runs */
	__asm__ volatile("push %%rbp\n\t"
			 "mov %0, %%rbp\n\t"
			 "1: dec %%rcx\n\t"
			 "jnz 1b\n\t"
			 "pop %%rbp"
			 : : "r"(frame), "c"(2000000ul) : "memory", "cc");
}

int main(int argc, char **argv)
{
	double end = now() + (argc > 1 ? atof(argv[1]) : 5);
	fake_data[1] = (uint64_t)(uintptr_t)&fake_data[0];	/* data, not code */
	while (now() < end) {
		spin_junk(fake_const);
		spin_junk(fake_data);
	}
	return 0;
}
