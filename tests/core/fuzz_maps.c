/* libFuzzer target: /proc/PID/maps text. The kernel writes it, but the
 * paths in it are the target's own file names (any bytes but NUL, '\n'
 * escaped); a parsed map must be sane and lookups must stay in bounds. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "procinfo.h"
#include "tests/lib/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *buf = malloc(size + 1);
	struct proc_maps m;

	if (!buf)
		return 0;
	memcpy(buf, data, size);
	buf[size] = '\0';
	if (proc_maps_parse(buf, "fuzz", &m, NULL) == 0) {
		for (size_t i = 0; i < m.n; i++) {
			if (!m.v[i].path)
				__builtin_trap();	/* every entry has a path ("" if anonymous) */
			(void)proc_maps_find(&m, m.v[i].start);
		}
		(void)proc_maps_find(&m, 0x400000);
		proc_maps_free(&m);
	}
	free(buf);
	return 0;
}
