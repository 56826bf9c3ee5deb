/*
 * goheap_scale.c - Go's arithmetic for heap sample values, bit for bit:
 * runtime/pprof's scaleHeapSample with math.Exp as Go computes it, and Go's float -> int64
 * conversion. Our profiles must equal the runtime's own exactly.
 *   scaleHeapSample: runtime/pprof/protomem.go:78 (1.19), :79 (1.23)
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "goheap.h"

/*
 * math.Exp as Go computes it on amd64 (math/exp_amd64.s, from SLEEF): not
 * correctly rounded, so glibc's exp() can differ in the last bit, which
 * scaleHeapSample's truncation to int64 turns into off-by-one values. The
 * FMA variant is used when the CPU has AVX and FMA, as Go decides. Other
 * architectures use Go's portable exp.go; there glibc's exp() is kept.
 */
#if defined(__x86_64__)
#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")
#endif
static bool go_use_fma(void)
{
	static int v = -1;
	if (v < 0) {
		__builtin_cpu_init();
		v = __builtin_cpu_supports("avx") && __builtin_cpu_supports("fma");
	}
	return v;
}

double goheap_go_exp(double x)
{
	static const double LOG2E = 1.4426950408889634073599246810018920;
	static const double LN2U = 0.69314718055966295651160180568695068359375;
	static const double LN2L = 0.28235290563031577122588448175013436025525412068e-12;
	static const double c[9] = { 0.5,
				     1.0,
				     2.0,
				     1.6666666666666666667e-1,
				     4.1666666666666666667e-2,
				     8.3333333333333333333e-3,
				     1.3888888888888888889e-3,
				     1.9841269841269841270e-4,
				     2.4801587301587301587e-5 };
	if (isnan(x) || isinf(x))
		return x < 0 ? 0 : x;
	if (x > 7.09782712893384e+02)
		return INFINITY;
	double t = LOG2E * x;
	if (t < -2147483648.0 || t > 2147483647.0) /* CVTSD2SL: integer indefinite */
		t = -2147483648.0;
	int32_t bx = (int32_t)nearbyint(t);
	double x1 = bx, p;
	if (go_use_fma()) {
		x = fma(-x1, LN2U, x);
		x = fma(-x1, LN2L, x);
		x *= 0.0625;
		p = fma(c[8], x, c[7]);
		p = fma(p, x, c[6]);
		p = fma(p, x, c[5]);
		p = fma(p, x, c[4]);
		p = fma(p, x, c[3]);
		p = fma(p, x, c[0]);
		p = fma(p, x, c[1]);
		x = x * p;
		x = x * (x + c[2]);
		x = x * (x + c[2]);
		x = x * (x + c[2]);
		x = fma(x + c[2], x, c[1]);
	} else {
		/* Separate multiplies and adds: no FMA in the baseline x86-64
		 * ISA, so the compiler cannot contract them. */
		x = x - LN2U * x1;
		x = x - LN2L * x1;
		x *= 0.0625;
		p = c[8] * x + c[7];
		p = p * x + c[6];
		p = p * x + c[5];
		p = p * x + c[4];
		p = p * x + c[3];
		p = p * x + c[0];
		p = p * x + c[1];
		x = x * p;
		x = x * (x + c[2]);
		x = x * (x + c[2]);
		x = x * (x + c[2]);
		x = x * (x + c[2]);
		x = x + c[1];
	}
	/* fr * 2**exponent */
	int32_t e = bx + 0x3FF;
	uint64_t bits;
	double m;
	if (e <= 0) {
		if (e < -52)
			return 0;
		bits = (uint64_t)(uint32_t)(e + 0x3FE) << 52;
		memcpy(&m, &bits, 8);
		x *= m;
		e = 1;
	} else if (e >= 0x7FF) {
		return INFINITY;
	}
	bits = (uint64_t)(uint32_t)e << 52;
	memcpy(&m, &bits, 8);
	return x * m;
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif
#else
double goheap_go_exp(double x)
{
	return exp(x);
}
#endif

/*
 * Go's int64(f) on amd64 (CVTTSD2SQ): NaN and values out of range give
 * the "integer indefinite" INT64_MIN. In C that conversion is undefined,
 * and hostile counts and rates (e.g. rate 2^62, average size 1) reach it.
 */
static int64_t go_int64(double f)
{
	if (!(f >= -9223372036854775808.0 && f < 9223372036854775808.0))
		return INT64_MIN;
	return (int64_t)f;
}

/* runtime/pprof scaleHeapSample. */
void goheap_scale_heap_sample(int64_t count, int64_t size, int64_t rate, int64_t *oc, int64_t *os)
{
	if (count == 0 || size == 0) {
		*oc = *os = 0;
		return;
	}
	if (rate <= 1) {
		*oc = count;
		*os = size;
		return;
	}
	double avg = (double)size / (double)count;
	double scale = 1 / (1 - goheap_go_exp(-avg / (double)rate));
	*oc = go_int64((double)count * scale);
	*os = go_int64((double)size * scale);
}
