/*
 * fuzz_nodelabels.c - libFuzzer target for node_labels_parse (agent/meta/nodemeta.c):
 * the API server's Node object or a node labels file. A broken or hostile
 * answer must give an error or labels within the documented bounds, never
 * a crash or a read past the input; every label name built from the result
 * must be valid. Built with -Dfuzz=true:
 *   ./scripts/fuzz.sh 60 fuzz_nodelabels
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nodemeta.h"
#include "tests/lib/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pp_labels l = { 0 };
	struct pp_err err = { 0 };
	/* a copy of exactly size bytes: ASan catches any read past the input */
	char *text = malloc(size ? size : 1);

	if (!text)
		return 0;
	memcpy(text, data, size);
	int r = node_labels_parse(text, size, &l, &err);
	if (r < 0 && !err.msg[0])
		abort();	/* every error says what went wrong */
	if (l.n > NODE_LABELS_MAX)
		abort();
	for (size_t i = 0; i < l.n; i++) {
		char name[1024];
		if (strlen(l.v[i].value) > NODE_LABEL_VALUE_MAX || !l.v[i].name[0])
			abort();
		snprintf(name, sizeof(name), "__meta_kubernetes_node_label_%s", l.v[i].name);
		meta_label_sanitize(name);
		if (!pp_label_name_valid(name))
			abort();
	}
	pp_labels_free(&l);
	free(text);
	return 0;
}
