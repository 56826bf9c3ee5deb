/*
 * relabel.h - Prometheus relabel_configs over a series' labels.
 *
 * Users filter and rename series exactly as they do in Prometheus 3 and
 * Parca Agent, so the semantics are Prometheus's model/relabel: source
 * label values joined with `separator` (default ";"), matched against
 * `regex` (default "(.*)"), which must match the whole value as Prometheus
 * wraps it, ^(?s:REGEX)$ ("." matches a newline too); `replacement`
 * (default "$1") and a replace rule's `target_label` are expanded like Go's
 * Regexp.Expand: $1, ${1}, $name, ${name} ((?P<name>...) groups), $$ for
 * "$"; a group that does not exist or did not take part is empty, and "$1x"
 * names the group "1x". Regexes are RE2 syntax (ppregex.h).
 *
 * Actions: replace (default), keep, drop, keepequal, dropequal (keep/drop
 * the series when the joined value equals / differs from target_label's
 * value), lowercase, uppercase (set target_label to the joined value with
 * Unicode simple case mapping, as Go's strings.ToLower/ToUpper), labelmap,
 * labeldrop, labelkeep and hashmod (md5 of the joined value, the last 8
 * bytes big-endian, modulo `modulus`). Action names are case-insensitive.
 *
 * Setting a label to "" deletes it (Prometheus's labels.Builder), so a
 * replace whose expanded replacement is empty deletes the target label.
 * Label names are Prometheus's legacy set ([a-zA-Z_][a-zA-Z0-9_]*): an
 * expanded target (replace, labelmap) outside it is skipped. After all
 * rules ran and the series is kept, relabel_apply() removes every label
 * starting with "__" except "__name__": that is how __meta_* labels are
 * offered to the rules without ever being sent.
 *
 * A regex match that hits ppregex's limits (a hostile value) counts as no
 * match for that rule and is logged; the other rules still run.
 *
 * relabel_add() validates and compiles one rule from its fields as written
 * (the config module hands them over key by key, without knowing what they
 * mean); relabel_dump() writes the rules back.
 */
#ifndef PUSHPROF_RELABEL_H
#define PUSHPROF_RELABEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "err.h"
#include "labels.h"

/*
 * One relabel_configs entry as written in YAML. NULL means "key absent"
 * (the default applies); a key given as YAML null is "" (Prometheus
 * decodes null to the zero value: `regex:` alone is the empty regex).
 */
enum relabel_action {
	RELABEL_REPLACE,
	RELABEL_KEEP,
	RELABEL_DROP,
	RELABEL_KEEPEQUAL,
	RELABEL_DROPEQUAL,
	RELABEL_LOWERCASE,
	RELABEL_UPPERCASE,
	RELABEL_LABELMAP,
	RELABEL_LABELDROP,
	RELABEL_LABELKEEP,
	RELABEL_HASHMOD,
};

struct relabel_rule_spec {
	const char *const *source_labels;
	size_t nsource_labels;
	bool has_source_labels; /* the key was given (even as []) */
	const char *separator;
	const char *regex;
	const char *target_label;
	const char *replacement;
	const char *modulus; /* decimal text */
	bool modulus_quoted; /* "8" is a string, not an integer */
	const char *action;
};

/* The keys relabel_add() understands, NULL-terminated (for "did you mean"). */
extern const char *const relabel_keys[];

/* Which key a relabel_add() error is about: field NULL for the rule as a
 * whole; index is the source_labels entry for field "source_labels". */
struct relabel_fault {
	const char *field;
	size_t index;
};

struct relabel; /* opaque: compiled rules */

/* No rules yet (relabel_apply() with none only strips the "__" labels).
 * 0 with *out set (the caller frees it with relabel_free()); or -ENOMEM
 * with err filled and *out NULL. */
int relabel_new(struct relabel **out, struct pp_err *err);
/* Validate and compile one rule, appended after the existing ones. On
 * failure err says why (without a position) and *fault (optional) which key. */
int relabel_add(struct relabel *r, const struct relabel_rule_spec *spec, struct pp_err *err,
		struct relabel_fault *fault);
size_t relabel_count(const struct relabel *r);
/* fn(rule index, label) for every source label of every rule, in order. */
void relabel_each_source(const struct relabel *r,
			 void (*fn)(size_t rule, const char *label, void *arg), void *arg);
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
 * Run every rule in order over labels (modified in place).
 * Returns 1 to keep the series, 0 when a keep/drop rule dropped it (labels
 * are then left as they were at that point), -ENOMEM on allocation failure.
 * r == NULL (no rules) only strips the "__" labels.
 */
int relabel_apply(const struct relabel *r, struct pp_labels *labels);

/* The hashmod value Prometheus computes for a joined source value. */
uint64_t relabel_hashmod(const char *val, size_t len, uint64_t modulus);

#endif
