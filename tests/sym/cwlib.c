/* Shared library for the symbolizer test (libppsym.so / libppdl.so). */
#ifndef VARIANT
#define VARIANT 1
#endif
volatile int lib_sink;

__attribute__((noinline)) static int pp_lib_static(int x)
{
	for (int i = 0; i < 50; i++)
		lib_sink += x ^ i;
	return lib_sink;
}

__attribute__((noinline)) int pp_lib_gamma(int x)
{
	return pp_lib_static(x) + VARIANT;
}

#define CAT2(a, b) a##_v##b
#define CAT(a, b) CAT2(a, b)
__attribute__((noinline)) int CAT(pp_lib_zeta, VARIANT)(int x)
{
	return x * 7 + lib_sink;
}

__attribute__((noinline)) int pp_dl_epsilon(int x)
{
	return pp_lib_gamma(x) * 2;
}
