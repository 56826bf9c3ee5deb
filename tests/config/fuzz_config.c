/*
 * fuzz_config.c - libFuzzer target for the config parser.
 *
 * Any input must either fail cleanly with a "NAME:LINE:COL: ..." message or
 * load; a loaded config must dump to YAML that loads again and dumps to the
 * very same text (the round trip check-config promises); loaded as `run`
 * loads it, it is refused exactly when it names no store. Built only with
 * -Dfuzz=true and clang:
 *   CC=clang meson setup build-fuzz -Dfuzz=true -Db_sanitize=address,undefined -Db_lundef=false
 *   ninja -C build-fuzz tests/config/fuzz_config
 *   UBSAN_OPTIONS=halt_on_error=1 build-fuzz/tests/config/fuzz_config -max_total_time=60 \
 *       -dict=tests/config/fuzz_config.dict CORPUS_DIR tests/config/valid tests/config/invalid
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "tests/lib/fuzz.h"

static char *dump(const struct config *c, size_t *len)
{
	char *buf = NULL;
	FILE *f = open_memstream(&buf, len);

	if (!f)
		abort();
	if (config_dump(c, f) < 0)
		abort();
	fclose(f);
	return buf;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct config c, c2;
	struct pp_err err = { 0 };
	size_t l1, l2;

	if (config_parse((const char *)data, size, "fuzz", &c, &err) < 0) {
		if (strncmp(err.msg, "fuzz:", 5) != 0) {
			fprintf(stderr, "error without position: %s\n", err.msg);
			abort();
		}
		config_free(&c);	/* must be safe after a failed parse */
		return 0;
	}
	/* as run loads it: refused, with a position, exactly when neither
	 * store is set */
	struct config c3;
	const struct config_load_opts run = { .need_destination = true };
	bool has_store = *c.remote_store.address || *c.local_store.directory;
	if (config_parse_ov((const char *)data, size, "fuzz", &run, &c3, &err) < 0) {
		if (has_store || strncmp(err.msg, "fuzz:", 5) != 0) {
			fprintf(stderr, "run load refused a config with a store, or without "
				"a position: %s\n", err.msg);
			abort();
		}
	} else if (!has_store) {
		fprintf(stderr, "run load took a config with nowhere to put profiles\n");
		abort();
	} else {
		config_free(&c3);
	}
	char *d1 = dump(&c, &l1);
	if (config_parse(d1, l1, "fuzz", &c2, &err) < 0) {
		fprintf(stderr, "dump does not load again: %s\n---\n%s\n", err.msg, d1);
		abort();
	}
	char *d2 = dump(&c2, &l2);
	if (l1 != l2 || memcmp(d1, d2, l1) != 0) {
		fprintf(stderr, "dump differs after a round trip\n---\n%s\n---\n%s\n", d1, d2);
		abort();
	}
	free(d1);
	free(d2);
	config_free(&c);
	config_free(&c2);
	return 0;
}
