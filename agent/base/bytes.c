/*
 * bytes.c - hex and varints (see bytes.h).
 */
#include "bytes.h"

size_t pp_hex(char *out, size_t outsz, const uint8_t *b, size_t n)
{
	static const char d[] = "0123456789abcdef";
	size_t i;

	if (!outsz)
		return 0;
	for (i = 0; i < n && 2 * i + 2 < outsz; i++) {
		out[2 * i] = d[b[i] >> 4];
		out[2 * i + 1] = d[b[i] & 15];
	}
	out[2 * i] = '\0';
	return i;
}

bool pp_uvarint(const uint8_t *b, size_t len, size_t *pos, uint64_t *v)
{
	uint64_t r = 0;

	for (unsigned shift = 0; shift < 64; shift += 7) {
		if (*pos >= len)
			return false;
		uint8_t c = b[(*pos)++];
		r |= (uint64_t)(c & 0x7f) << shift;
		if (!(c & 0x80)) {
			*v = r;
			return true;
		}
	}
	return false;
}
