/*
 * cworkload: a C process with known functions for the symbolizer test.
 * Built with -DVARIANT=N so two builds have different function names.
 * Prints "ADDR name %p" for its own functions, then READY, then serves
 * commands on stdin: "dlopen PATH" (prints ADDR lines of pp_dl_* from it),
 * "quit".
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#ifndef VARIANT
#define VARIANT 1
#endif
#define CAT2(a, b) a##_v##b
#define CAT(a, b) CAT2(a, b)
#define FN(name) CAT(name, VARIANT)

int pp_lib_gamma(int x);
volatile int sink;

__attribute__((noinline)) int FN(pp_func_alpha)(int x)
{
	for (int i = 0; i < 100; i++)
		sink += x * i;
	return sink;
}

__attribute__((noinline)) int FN(pp_func_beta)(int x)
{
	return FN(pp_func_alpha)(x + 1) * 3;
}

__attribute__((noinline)) static int pp_static_delta(int x)
{
	sink ^= x;
	return FN(pp_func_beta)(x) + sink;
}

int main(void)
{
	char line[4096];
	setvbuf(stdout, NULL, _IOLBF, 0);
	sink = pp_static_delta(1) + pp_lib_gamma(2);
	printf("ADDR %s %p\n", "alpha", (void *)FN(pp_func_alpha));
	printf("ADDR %s %p\n", "beta", (void *)FN(pp_func_beta));
	printf("ADDR %s %p\n", "delta", (void *)pp_static_delta);
	printf("ADDR pid %#lx\n", (unsigned long)getpid());
	printf("READY\n");
	while (fgets(line, sizeof(line), stdin)) {
		line[strcspn(line, "\n")] = '\0';
		if (!strncmp(line, "dlopen ", 7)) {
			void *h = dlopen(line + 7, RTLD_NOW);
			void *f = h ? dlsym(h, "pp_dl_epsilon") : NULL;
			printf("ADDR epsilon %p\nDONE\n", f);
		} else if (!strcmp(line, "quit")) {
			break;
		}
	}
	return 0;
}
