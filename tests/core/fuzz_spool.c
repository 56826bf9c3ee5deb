/* libFuzzer target: spool files are read back after restarts and may be
 * truncated or corrupt; decoding must never crash or over-read. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "spool.h"
#include "tests/lib/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct spool_batch b;

	if (spool_decode(data, size, &b, NULL) == 0) {
		uint8_t *enc;
		size_t len;
		if (spool_encode(&b, &enc, &len, NULL) == 0) {
			struct spool_batch again;
			if (spool_decode(enc, len, &again, NULL) != 0 || again.n != b.n)
				__builtin_trap();	/* a decoded batch must round-trip */
			spool_batch_free(&again);
			free(enc);
		}
		spool_batch_free(&b);
	}
	return 0;
}
