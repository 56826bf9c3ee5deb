/*
 * fuzz_connect.c - libFuzzer target for the Connect error parser
 * (agent/ship/connect.c, connect_parse_error): the body of a non-200 answer
 * comes from the store or anything between (a proxy's page), so any bytes
 * must give a known gRPC status and a bounded, one-line, NUL-terminated
 * message. The first two input bytes choose the HTTP status.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "connect.h"
#include "tests/lib/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	long http = 100 + (data[0] << 8 | data[1]) % 500;
	size_t len = size - 2;
	char *body = malloc(len + 1);
	char msg[64];

	if (!body)
		return 0;
	memcpy(body, data + 2, len);
	body[len] = '\0';
	memset(msg, 'x', sizeof(msg));
	int st = connect_parse_error(body, len, http, msg, sizeof(msg));
	if (st < 1 || st > 16)	/* never OK, always a defined code */
		abort();
	size_t n = strnlen(msg, sizeof(msg));
	if (n == sizeof(msg))
		abort();
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)msg[i] < 0x20)
			abort();
	free(body);
	return 0;
}
