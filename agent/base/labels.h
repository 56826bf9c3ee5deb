/*
 * labels.h - a set of name=value labels, as Parca stores them per series.
 *
 * Owned strings; set() replaces an existing name; sort() orders by name,
 * which is what WriteRaw and series identity need.
 */
#ifndef PUSHPROF_LABELS_H
#define PUSHPROF_LABELS_H

#include <stdbool.h>
#include <stddef.h>

struct pp_label {
	char *name;
	char *value;
};

struct pp_labels {
	struct pp_label *v;
	size_t n, cap;
};

int pp_labels_set(struct pp_labels *l, const char *name, const char *value);
const char *pp_labels_get(const struct pp_labels *l, const char *name);
void pp_labels_del(struct pp_labels *l, const char *name);
int pp_labels_copy(struct pp_labels *dst, const struct pp_labels *src);
void pp_labels_sort(struct pp_labels *l);
void pp_labels_free(struct pp_labels *l);

/* Prometheus label name rule: [a-zA-Z_][a-zA-Z0-9_]*. */
bool pp_label_name_valid(const char *name);
/* Prometheus's label-name sanitising: every byte outside [a-zA-Z0-9_] -> '_'
 * (pod and node labels under __meta_kubernetes_*_label_). */
void meta_label_sanitize(char *name);
/* name is a __meta_* label the agent can set (docs/labels.md's table):
 * relabel rules reading any other one always see an empty value. */
bool pp_meta_label_known(const char *name);

#endif
