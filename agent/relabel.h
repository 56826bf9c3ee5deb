/*
 * relabel.h - Prometheus relabel_configs over a series' labels.
 *
 * Users filter and rename series exactly as they do in Prometheus and Parca
 * Agent, so the semantics follow Prometheus's model/relabel: source label
 * values joined with `separator` (default ";"), matched against `regex`
 * anchored at both ends (default "(.*)"), `replacement` (default "$1")
 * expanded like Go's Regexp.Expand ($1, ${1}, $$; "$1x" names the unknown
 * group "1x" and expands to nothing, as in Prometheus), actions replace
 * (default), keep, drop, labelmap, labeldrop, labelkeep and hashmod (md5 of
 * the joined value, last 8 bytes big-endian, modulo `modulus`).
 *
 * Regexes are POSIX extended (regcomp), not RE2: "(?:" groups are accepted
 * and turned into plain groups with $N numbering kept as the user wrote it,
 * "\d" / "\D" become "[0-9]" / "[^0-9]", "\w", "\s" work as in glibc.
 * Other RE2-only syntax ("(?i)", lazy quantifiers, "\pL") fails to compile
 * with a message. Submatch boundaries follow POSIX leftmost-longest rules,
 * which only differs from RE2 for ambiguous alternations.
 *
 * A label set to "" is deleted (Prometheus treats an empty value as absent).
 * After all rules ran and the series is kept, relabel_apply() removes every
 * label starting with "__" except "__name__": that is how __meta_* labels
 * are offered to the rules without ever being sent.
 *
 * Rules are built either from the config module's parsed fields through
 * relabel_add() (one struct relabel_rule_spec per list entry) or from a YAML
 * list with relabel_parse_yaml() (tests, tools).
 */
#ifndef PUSHPROF_RELABEL_H
#define PUSHPROF_RELABEL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "err.h"
#include "labels.h"

enum relabel_action {
	RELABEL_REPLACE,
	RELABEL_KEEP,
	RELABEL_DROP,
	RELABEL_LABELMAP,
	RELABEL_LABELDROP,
	RELABEL_LABELKEEP,
	RELABEL_HASHMOD,
};

/* One relabel_configs entry as written; NULL / 0 means "not set" (default). */
struct relabel_rule_spec {
	const char *const *source_labels;
	size_t nsource_labels;
	const char *separator;		/* NULL -> ";" */
	const char *regex;		/* NULL -> "(.*)" */
	const char *target_label;	/* required by replace and hashmod */
	const char *replacement;	/* NULL -> "$1" */
	uint64_t modulus;		/* required (> 0) by hashmod */
	const char *action;		/* NULL -> "replace"; case-insensitive */
};

struct relabel;				/* opaque: compiled rules */

struct relabel *relabel_new(void);
/* Validate and compile one rule, appended after the existing ones. */
int relabel_add(struct relabel *r, const struct relabel_rule_spec *spec, struct pp_err *err);
/* A YAML sequence of rule mappings (the value of relabel_configs). Adds to r. */
int relabel_parse_yaml(struct relabel *r, const char *buf, size_t len, const char *name,
		       struct pp_err *err);
size_t relabel_count(const struct relabel *r);
/*
 * Print the rules as YAML list items ("- action: ...") indented by `indent`
 * spaces, every key explicit and strings double-quoted; the caller prints
 * the "relabel_configs:" key (or "relabel_configs: []" when there are no
 * rules). Reading the output back gives the same rules and the same dump,
 * which is what `pushprof check-config` promises. Returns 0 or -EIO.
 */
int relabel_dump(const struct relabel *r, FILE *out, int indent);
void relabel_free(struct relabel *r);

/*
 * Refuse a POSIX extended regex whose compilation could take unbounded
 * memory (glibc copies the tree of a repeated group once per repetition,
 * so "a+++..." grows exponentially and "x{255}{255}{255}" multiplies):
 * longer than 1024 bytes, a repetition operator right after another, more
 * than two counted repetitions {..}, or a count above 255. Shared by every
 * regex the config compiles (targets, relabel_configs). 0, or -EINVAL with
 * the reason in why.
 */
int regex_check_cost(const char *src, char *why, size_t wlen);

/*
 * Run every rule in order over labels (modified in place).
 * Returns 1 to keep the series, 0 when a keep/drop rule dropped it (labels
 * are then left as they were at that point), -ENOMEM on allocation failure.
 * r == NULL (no rules) only strips the "__" labels.
 */
int relabel_apply(const struct relabel *r, struct pp_labels *labels);

/* The hashmod value Prometheus computes for a joined source value. */
uint64_t relabel_hashmod(const char *val, size_t len, uint64_t modulus);

#endif
