/*
 * fuzz_pprof - libFuzzer target for the two functions that take hostile
 * pprof bytes: pprof_validate (plain or gzip) and pprof_gunzip (bounded).
 * Build: CC=clang meson setup build-fuzz -Dfuzz=true -Db_sanitize=address,undefined
 * Run:   build-fuzz/tests/pprof/fuzz_pprof -max_total_time=60 CORPUS_DIR
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pprof.h"
#include "tests/lib/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pp_err err = { 0 };
	uint8_t *out = NULL;
	size_t out_len = 0;

	pprof_validate(data, size, &err);

	/* gunzip with a small, input-chosen bound: must never exceed it */
	size_t max_out = size ? (size_t)data[0] * 64 + 1 : 1;
	if (pprof_gunzip(data, size, max_out, &out, &out_len, &err) == 0) {
		if (out_len > max_out)
			abort();
		/* what decompressed must validate the same either way */
		int a = pprof_validate(out, out_len, &err);
		uint8_t *gz = NULL;
		size_t gzlen = 0;
		if (pprof_gzip(out, out_len, &gz, &gzlen, &err) == 0) {
			int b = pprof_validate(gz, gzlen, &err);
			if ((a == 0) != (b == 0))
				abort();
			free(gz);
		}
		free(out);
	} else if (out) {
		abort();	/* failure must not hand back a buffer */
	}
	return 0;
}
