/* libFuzzer target: .eh_frame bytes (agent/cpu/ehframe.c). The section is the
 * target's, hence hostile: parsing must stay in bounds and in budget, and
 * every row it yields must be sane for the BPF table (a range inside
 * [lo, hi), slots in range, the caller's %rbp slot below the return
 * address's). The first 8 input bytes are the section's address. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ehframe.h"
#include "tests/lib/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint64_t addr = 0x2000, lo = 0x1000, hi = 0x100000000ull;
	if (size >= 8) {
		memcpy(&addr, data, 8);
		data += 8;
		size -= 8;
	}
	struct ehf_rows rows = { .max = 4096 };
	struct ehf_stats st;
	uint64_t budget = 1u << 20;
	int r = ehframe_rows(data, size, addr, lo, hi, &rows, &budget, &st);
	if (r == 0) {
		if (st.fdes_used + st.fdes_given_up > st.fdes)
			__builtin_trap();
		for (size_t i = 0; i < rows.n; i++) {
			const struct ehf_row *w = &rows.v[i];
			if (w->start >= w->end || w->start < lo || w->end > hi || w->ra > EHF_MAX_SLOT ||
			    (w->fp && w->fp > w->ra))
				__builtin_trap();
		}
	}
	if (rows.n > rows.max || budget > (1u << 20))
		__builtin_trap();
	free(rows.v);
	return 0;
}
