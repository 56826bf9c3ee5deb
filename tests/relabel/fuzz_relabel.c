/*
 * fuzz_relabel.c - libFuzzer target for relabel rule parsing and applying.
 *
 * The input is split at the first NUL: the part before is a YAML list of
 * relabel rules, the part after a label set ("name=value" lines). Rules
 * either fail with a "fuzz:..." or plain message, or load; loaded rules are
 * applied, and a kept result must hold only valid label names, no empty
 * values and no "__" label except __name__. Built with -Dfuzz=true:
 *   ./scripts/fuzz.sh 60 fuzz_relabel
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "relabel.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *nul = memchr(data, 0, size);
	size_t ylen = nul ? (size_t)(nul - (const char *)data) : size;
	struct relabel *r = relabel_new();
	struct pp_err err = { 0 };
	struct pp_labels l = { 0 };

	if (!r)
		abort();
	if (relabel_parse_yaml(r, (const char *)data, ylen, "fuzz", &err) < 0) {
		if (!err.msg[0])
			abort();	/* every failure says why */
		relabel_free(r);
		return 0;
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
