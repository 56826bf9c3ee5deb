/*
 * fuzz_relabel.c - libFuzzer target for relabel rule parsing and applying.
 *
 * The input is split at the first NUL: the part before is the value of a
 * config's relabel_configs (read through config_parse, the one way rules
 * are read), the part after a label set ("name=value" lines). Rules either
 * fail with a message or load; loaded rules are applied, and a kept result
 * must hold only valid label names, no empty values and no "__" label
 * except __name__. relabel_dump() output must parse back and dump to the
 * same text. Built with -Dfuzz=true:
 *   ./scripts/fuzz.sh 60 fuzz_relabel
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "relabel.h"
#include "tests/lib/fuzz.h"

/* rules (a relabel_configs value) -> compiled rules, or NULL with err set */
static struct relabel *load(const char *y, size_t len, struct pp_err *err)
{
	static const char key[] = "relabel_configs:\n";
	char *buf = malloc(sizeof(key) + len);
	struct config c = { 0 };
	struct relabel *r = NULL;

	if (!buf)
		abort();
	memcpy(buf, key, sizeof(key) - 1);
	memcpy(buf + sizeof(key) - 1, y, len);
	if (config_parse(buf, sizeof(key) - 1 + len, "fuzz", &c, err) == 0) {
		r = c.relabel;
		if (!r)
			relabel_new(&r, NULL);	/* NULL (out of memory) applies no rules */
		c.relabel = NULL;
		config_free(&c);
	}
	free(buf);
	return r;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *nul = memchr(data, 0, size);
	size_t ylen = nul ? (size_t)(nul - (const char *)data) : size;
	struct pp_err err = { 0 };
	struct pp_labels l = { 0 };
	struct relabel *r = load((const char *)data, ylen, &err);

	if (!r) {
		if (!err.msg[0])
			abort();	/* every failure says why */
		return 0;
	}
	/* the dump parses back to rules that dump identically */
	{
		char *d1 = NULL, *d2 = NULL;
		size_t l1 = 0, l2 = 0;
		FILE *f = open_memstream(&d1, &l1);
		relabel_dump(r, f, 0);
		fclose(f);
		/* no rules dump as nothing: an empty relabel_configs, null */
		struct relabel *r2 = load(d1, l1, &err);
		if (!r2) {
			fprintf(stderr, "dump does not load: %s\n%s", err.msg, d1);
			abort();
		}
		f = open_memstream(&d2, &l2);
		relabel_dump(r2, f, 0);
		fclose(f);
		if (l1 != l2 || memcmp(d1, d2, l1))
			abort();
		free(d1);
		free(d2);
		relabel_free(r2);
	}
	if (nul) {
		char *rest = strndup(nul + 1, size - ylen - 1);
		for (char *line = strtok(rest, "\n"); line; line = strtok(NULL, "\n")) {
			char *eq = strchr(line, '=');
			if (eq && eq != line) {
				*eq = '\0';
				pp_labels_set(&l, line, eq + 1);
			}
		}
		free(rest);
	}
	int k = relabel_apply(r, &l);
	if (k < 0)
		abort();
	if (k == 1) {
		for (size_t i = 0; i < l.n; i++) {
			const char *n = l.v[i].name;
			if (!l.v[i].value[0] || (n[0] == '_' && n[1] == '_' && strcmp(n, "__name__")))
				abort();
		}
	}
	pp_labels_free(&l);
	relabel_free(r);
	return 0;
}
