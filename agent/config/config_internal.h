/*
 * config_internal.h - what the config loader's files share and nothing else
 * uses. Not an API: use config.h.
 *
 *   config.c         the entry points: defaults, parse and load (with the
 *                    checks across sections and of the files a config
 *                    names), free, and the dump check-config prints
 *   config_yaml.c    the bounded YAML tree: libyaml events -> nodes with
 *                    their line/column; lookups; command-line overrides
 *   config_walk.c    the table-driven walk of a mapping onto a struct, and
 *                    its messages: FILE:LINE:COL, every error of a run,
 *                    "did you mean" for unknown keys
 *   config_scalar.c  scalar values: strings with ${VAR} expansion, integers,
 *                    booleans and auto, names from a list, durations and
 *                    sizes, addresses, regexes
 *   config_schema.c  the schema: each section's table of keys, the top table
 *                    last, and the checkers of keys that need more than a type
 *   config_remote.c  remote_store: one store or a list, URL addresses, store
 *                    names, the checks across a store's keys
 *
 * A load runs on one thread and owns its tree and its struct ctx
 * (config_parse_ov's); nothing here is shared but the const tables.
 * Functions return 0 or a negative errno; the -EINVAL ones have put a
 * FILE:LINE:COL sentence in x->err (errat), -ENOMEM ones need not have.
 *
 * The functions moved here from config.c keep their short names inside these
 * files (so that history and blame follow them); the defines below give them
 * a config_ prefix for the linker. Include this header after every other.
 */
#ifndef PUSHPROF_CONFIG_INTERNAL_H
#define PUSHPROF_CONFIG_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"

#define NS_PER_MS 1000000ull
#define NS_PER_S 1000000000ull

/* --- the YAML tree (config_yaml.c) ------------------------------------ */

enum ykind { Y_SCALAR, Y_SEQ, Y_MAP };

struct ynode {
	enum ykind kind;
	bool plain;	    /* unquoted scalar: may be null, int or bool */
	unsigned line, col; /* 1-based */
	const char *flag;   /* set by a command-line flag (config_override): no
				 * ${VAR} expansion, errors name the flag */
	char *s;	    /* scalar text, NUL-terminated */
	size_t len;
	struct ynode **kids; /* seq items, or map key,value,key,value... */
	size_t n, cap;
};

#define ynode_free config_ynode_free
#define load_tree config_load_tree
#define is_null config_is_null
#define map_get config_map_get
#define map_val config_map_val
#define apply_override config_apply_override

void ynode_free(struct ynode *n);
/* Parse the one document in buf; *root stays NULL for an empty stream. */
int load_tree(const char *buf, size_t len, const char *name, struct pp_err *err,
	      struct ynode **root);
/* NULL, or a plain empty, ~ or null scalar: "key:" with no value. */
bool is_null(const struct ynode *n);
/* Value node of key in map v, or v itself (for a position) when absent. */
const struct ynode *map_get(const struct ynode *v, const char *key);
/* Value node of key in map v, NULL when v is not a map or lacks key. */
const struct ynode *map_val(const struct ynode *v, const char *key);
/* Set o->key (dotted) in the tree to o->value, creating mappings on the way. */
int apply_override(struct ynode **root, const struct config_override *o);

/* --- the walk and its messages (config_walk.c) ------------------------ */

struct ctx {
	const char *name;
	struct pp_err *err;
	uint32_t kernel_max_stack;
	/* every error of the schema walk, one per line, so that one run of
	 * check-config shows them all (the walk goes on to the next key) */
	char errs[2048];
	size_t errlen;
	unsigned nerr;
};

enum ftype { F_BOOL, F_U32, F_INT, F_DUR, F_SIZE, F_STR, F_MAP, F_CUSTOM };

#define Z_OK 1u	  /* duration/size: 0 is allowed besides min..max */
#define KSTACK 2u /* max is the kernel's perf_event_max_stack */

struct field;
typedef int (*custom_fn)(struct ctx *x, const struct ynode *v, void *base, const char *path);

struct field {
	const char *key;
	enum ftype type;
	size_t off;
	int64_t min, max;
	unsigned flags;
	const struct field *sub; /* F_MAP */
	custom_fn fn;		 /* F_CUSTOM, also F_MAP post-check */
};

typedef int (*labelcheck_fn)(struct ctx *x, const struct ynode *k, const char *path, char *name);

#define note_error config_note_error
#define errat config_errat
#define show config_show
#define close_enough config_close_enough
#define check_key config_check_key
#define walk_map config_walk_map
#define label_map config_label_map

/* Keep the error just recorded in x->err as one more of the walk's. */
void note_error(struct ctx *x);
/* "FILE:LINE:COL: message" at node n (or "--flag: message") in x->err; -EINVAL. */
__attribute__((format(printf, 3, 4))) int errat(struct ctx *x, const struct ynode *n,
						const char *fmt, ...);
/* Short printable rendering of a node for messages, in buf. */
const char *show(const struct ynode *n, char *buf, size_t sz);
/* Whether typed is near enough to known for a "did you mean". */
bool close_enough(const char *typed, const char *known);
/* Key i of map: an error at it unless it is a scalar no earlier key equals. */
int check_key(struct ctx *x, const struct ynode *map, size_t i, const char *path);
/* Map n (null: nothing) onto base by fields; after an error the walk goes on
 * to the next key (note_error) and returns the first; -ENOMEM at once. */
int walk_map(struct ctx *x, const struct ynode *n, const char *path, const struct field *fields,
	     void *base);
/* A mapping (at most MAX_MAP_ENTRIES) of names, each checked by check, to
 * ${VAR}-expanded strings, into dst. */
int label_map(struct ctx *x, const struct ynode *v, const char *path, struct pp_labels *dst,
	      labelcheck_fn check);

/* --- scalars (config_scalar.c) ---------------------------------------- */

#define utf8_valid config_utf8_valid
#define want_scalar config_want_scalar
#define get_i64 config_get_i64
#define get_bool config_get_bool
#define get_str config_get_str
#define get_str_opt config_get_str_opt
#define fmt_duration config_fmt_duration
#define fmt_size config_fmt_size
#define enum_value config_enum_value
#define get_auto_bool config_get_auto_bool
#define check_address config_check_address
#define compile_re config_compile_re

bool utf8_valid(const char *s);
/* An error unless n is a scalar; what names the expected type. */
int want_scalar(struct ctx *x, const struct ynode *n, const char *path, const char *what);
int get_i64(struct ctx *x, const struct ynode *n, const char *path, int64_t min, int64_t max,
	    int64_t *out);
int get_bool(struct ctx *x, const struct ynode *n, const char *path, bool *out);
/* A string after ${VAR} expansion (a flag's value as written); *out is malloc'd. */
int get_str(struct ctx *x, const struct ynode *n, const char *path, char **out);
/* get_str() for a key that may be YAML null: 1 with *out set, 0 for null
 * (nothing read: the field keeps its default), or the error. */
int get_str_opt(struct ctx *x, const struct ynode *n, const char *path, char **out);
/* 1h30m, 4MiB: the forms parse_duration and parse_size read back. */
void fmt_duration(uint64_t ns, char *buf, size_t sz);
void fmt_size(uint64_t b, char *buf, size_t sz);
/* The index of v among names, with "did you mean" or the list when absent. */
int enum_value(struct ctx *x, const struct ynode *v, const char *path, const char *const *names,
	       size_t nnames, int *out);
/* true, false or auto (-1); null keeps *out. */
int get_auto_bool(struct ctx *x, const struct ynode *v, const char *path, int *out);
/* a (v's expanded text) is host:port, [v6]:port or a gRPC target URI; "" and
 * URLs pass (a URL is url_address's, config_remote.c). */
int check_address(struct ctx *x, const struct ynode *v, const char *path, const char *a);
/* A regex (RE2 syntax, no ${VAR} expansion): its source in *src, compiled in *re. */
int compile_re(struct ctx *x, const struct ynode *v, const char *path, char **src,
	       struct pp_regex **re);

/* --- the schema (config_schema.c) and remote_store (config_remote.c) --- */

#define protocol_names config_protocol_names
#define transport_names config_transport_names
#define remote_fields config_remote_fields
#define top_fields config_top_fields
#define f_store_name config_f_store_name
#define f_remote_store config_f_remote_store
#define remote_defaults config_remote_defaults

/* by enum store_protocol, and by remote_store_config.http */
extern const char *const protocol_names[];
extern const char *const transport_names[];
/* one store's keys; the whole config's */
extern const struct field remote_fields[];
extern const struct field top_fields[];
/* remote_store.name, and remote_store (a mapping or a list of them) */
int f_store_name(struct ctx *x, const struct ynode *v, void *base, const char *path);
int f_remote_store(struct ctx *x, const struct ynode *v, void *base, const char *path);
/* A remote store's defaults (config.c; the single mapping's and each list
 * item's); -ENOMEM. */
int remote_defaults(struct remote_store_config *r);

#endif
