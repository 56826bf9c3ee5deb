/*
 * config.h - the agent's YAML configuration: schema, defaults, validation.
 *
 * config_load() parses strictly: unknown keys (with a "did you mean" hint),
 * wrong types, out-of-range values and malformed YAML fail with
 * "FILE:LINE:COL: message" in err. ${VAR} and ${VAR:-default} expand in
 * string values. Durations are nanoseconds, sizes bytes. Every field has its
 * default filled in after a successful load; config_dump() prints the
 * effective config back as YAML (what `pushprof check-config` shows).
 */
#ifndef PUSHPROF_CONFIG_H
#define PUSHPROF_CONFIG_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "err.h"
#include "labels.h"
#include "log.h"
#include "ppregex.h"
#include "relabel.h"

/* The wire protocol of remote_store (upload.h). */
enum store_protocol {
	STORE_PARCA,	 /* parca.profilestore.v1alpha1.ProfileStoreService/WriteRaw */
	STORE_PYROSCOPE, /* push.v1.PusherService/Push (Grafana Pyroscope) */
};

struct remote_store_config {
	/* Names the store in logs, metrics (store="...") and its spool
	 * subdirectory: [A-Za-z0-9_.-], at most 64; default (name: "")
	 * "<protocol>-<address>" with other characters as '_', e.g.
	 * parca-127.0.0.1_7070. Unique within a list. */
	char *name;
	char *address;		      /* host:port; "" -> no push */
	enum store_protocol protocol; /* default parca */
	bool http;		      /* transport: Connect over HTTP/1.1 (connect.h), not gRPC */
	char *path_prefix;	      /* http transport: URL path before /<Service>/<Method> */
	bool insecure;		      /* plaintext HTTP/2 */
	char *ca_file, *cert_file, *key_file, *server_name;
	bool insecure_skip_verify;
	char *bearer_token_file;	       /* never the token itself */
	struct pp_labels headers;	       /* extra gRPC metadata */
	uint64_t timeout_ns;		       /* per call; default 10s */
	uint64_t max_request_bytes;	       /* default 4 MiB */
	bool debuginfo_upload;		       /* upload unsymbolized ELF files; default true */
	uint64_t debuginfo_max_bytes_per_hour; /* upload budget; default 1 GiB */
	char *tenant_id;		       /* sent as X-Scope-OrgID; "" none */
	/* HTTP basic auth: the password from basic_auth.password_file or env
	 * PUSHPROF_BASIC_AUTH_PASSWORD, never the config. */
	char *basic_auth_username, *basic_auth_password_file;
};

struct store_config {
	char *directory;
	uint64_t max_bytes;
};

struct cpu_config {
	bool enabled;
	uint32_t frequency_hz;	  /* CPU_HZ_MIN..CPU_HZ_MAX (bpf/cpu_abi.h), default 19 */
	uint64_t interval_ns;	  /* default 10s */
	uint32_t max_stack_depth; /* default 127; <= perf_event_max_stack */
	bool kernel_stacks;	  /* default true */
	/* thread_id/thread_name sample labels: -1 auto (on for Parca; off for
	 * Pyroscope, which makes a series of every string sample label), 0, 1 */
	int thread_labels;
	int cpu_label; /* `cpu` sample label: -1 auto (as thread_labels), 0, 1 */
};

struct pressure_config {
	bool enabled;
	uint32_t threshold_percent; /* of the memory cgroup's limit, default 80 */
	uint64_t cooldown_ns;	    /* default 5m */
	uint64_t poll_interval_ns;  /* default 1s */
};

/*
 * go_heap.budget: what one snapshot (periodic, pressure, on demand, CLI)
 * or one OOM mirror may cost, whatever the target's bucket list says.
 * Past any limit the profile is cut and flagged incomplete; a process cut
 * this way is not read again for `backoff` (doubling per cut, up to 8x).
 */
struct go_heap_budget {
	uint32_t max_frames;	  /* PCs over all buckets; default 3,000,000 */
	uint32_t max_locations;	  /* distinct PCs symbolized; default 100,000 */
	uint64_t max_read_bytes;  /* bytes read from the target; default 256 MiB */
	uint64_t max_duration_ns; /* wall time of the read + build; default 5s */
	uint64_t backoff_ns;	  /* default 10m; 0 = re-read every interval */
	uint32_t oom_max_frames;  /* PCs one OOM mirror holds; default 500,000 */
};

struct go_heap_config {
	bool enabled;
	uint64_t interval_ns; /* 0 = no periodic snapshots; default 60s */
	bool on_oom;
	uint32_t max_buckets;	  /* default 100000 */
	uint32_t max_stack_depth; /* default 128 */
	bool enable_profiling;	  /* write MemProfileRate into rate-0 programs */
	struct pressure_config pressure;
	struct go_heap_budget budget;
};

/* POST /api/v1/snapshot (on the HTTP endpoint): off unless enabled. */
struct snapshot_api_config {
	bool enabled;			/* default false */
	char *bearer_token_file;	/* "" = none; required unless http_address is loopback */
	uint64_t per_pid_interval_ns;	/* one snapshot of a pid per interval; default 10s */
	uint32_t per_client_per_minute; /* default 6 */
	uint32_t per_minute;		/* all clients together; default 30 */
};

/* A process matches an entry when every key that is set matches. */
struct target_config {
	char *cgroup; /* path prefix, NULL = unset */
	/* RE2 syntax, unanchored (ppregex.h); sources NULL = unset */
	char *cgroup_regex, *comm_regex, *exe_regex;
	struct pp_regex *cgroup_re, *comm_re, *exe_re; /* compiled when set */
	pid_t *pids;
	size_t npids;
};

struct config {
	char *path; /* file it came from */
	char *node; /* default $NODE_NAME, else the hostname */
	enum pp_log_level log_level;
	enum pp_log_format log_format;
	char *http_address;
	bool http_optional; /* false: exit when http_address cannot be bound */
	struct pp_labels external_labels;
	/* remote_store: the mapping, or the first item when it is a list;
	 * the other items in more_stores (see config_store()) */
	struct remote_store_config remote_store;
	struct remote_store_config *more_stores;
	size_t nmore_stores;
	bool remote_store_list;		 /* written as a YAML sequence */
	struct store_config local_store; /* directory "" -> off */
	struct store_config spool;
	struct cpu_config cpu;
	struct go_heap_config go_heap;
	struct snapshot_api_config snapshot_api;
	int oom_score_adj; /* applied to the agent itself, default -1000 */
	struct target_config *targets;
	size_t ntargets;
	char *cri_socket;  /* metadata.cri_socket: "" auto, "none" off */
	char *node_labels; /* metadata.node_labels: "auto", "none", a file (nodemeta.h) */
	/* relabel_configs: parsed and validated by the relabel module (relabel.h) */
	struct relabel *relabel;
};

/*
 * A command-line flag that overrides one config key. It is set in the YAML
 * tree before the schema walk, so it meets the same checks as the key in
 * the file (a bad value is an error naming the flag); it is not ${VAR}
 * expanded.
 */
struct config_override {
	const char *key;   /* dotted path, e.g. "remote_store.address" */
	const char *value; /* scalar text */
	bool plain;	   /* a YAML plain scalar (bools, numbers); else a string */
	const char *flag;  /* e.g. "--remote-store-address", for messages */
};

/* The config file as shipped (config/pushprof.yaml), compiled in: what
 * `pushprof run` uses when no --config is given and the default path does
 * not exist. */
extern const char pushprof_default_config[];
#define CONFIG_BUILTIN_NAME "built-in defaults (config/pushprof.yaml)"

/*
 * How a config is loaded beyond its schema. `run`, its SIGHUP reload and
 * `check-config` load with need_destination (and check_files unless told
 * not to), so a config check-config passes is one run starts with; the
 * one-shot commands (snapshot, push) deliver elsewhere or not at all and
 * only parse.
 */
struct config_load_opts {
	const struct config_override *ov; /* flags over the file, in order */
	size_t nov;
	/* An agent's config: profiles must go somewhere. Neither
	 * remote_store.address nor local_store.directory is an error
	 * ("nowhere to put profiles", FILE:LINE:COL), never a run that
	 * discards every profile. */
	bool need_destination;
	/* config_check_files() on the valid result; its failure fails the load */
	bool check_files;
	/* appended (on a line of its own) to a check_files failure, e.g. how
	 * to skip the check; NULL: nothing */
	const char *files_hint;
};

/* Fill every field with its default (no file). */
int config_defaults(struct config *c, struct pp_err *err);
/* The schema alone (no load options). On failure *c is left zeroed
 * (config_free on it is a no-op). */
int config_load(const char *path, struct config *c, struct pp_err *err);
/* Parse from memory; name is used in error positions. For tests and fuzzing. */
int config_parse(const char *buf, size_t len, const char *name, struct config *c,
		 struct pp_err *err);
/* The same with load options (o NULL: none); path NULL: the built-in
 * defaults (pushprof_default_config). */
int config_load_ov(const char *path, const struct config_load_opts *o, struct config *c,
		   struct pp_err *err);
int config_parse_ov(const char *buf, size_t len, const char *name, const struct config_load_opts *o,
		    struct config *c, struct pp_err *err);
void config_free(struct config *c); /* frees everything and zeroes *c */
int config_dump(const struct config *c, FILE *out);

/*
 * Check that every file the config names (remote_store.ca_file, cert_file,
 * key_file, bearer_token_file; snapshot_api.bearer_token_file) is a regular
 * file this process can open for reading. 0 when all are; else -ENOENT (or
 * the first errno) with every failure in one message, so one run shows
 * them all. Opens with O_NONBLOCK and closes at once: reads nothing.
 * Loads with config_load_opts.check_files run it.
 */
int config_check_files(const struct config *c, struct pp_err *err);

/* True when a listener on host:port can only be reached from this host
 * (127.0.0.0/8, ::1, localhost); ":port", 0.0.0.0 and [::] are not. */
bool config_address_is_loopback(const char *address);

/*
 * The remote stores profiles are pushed to: none (remote_store.address
 * ""), the one mapping, or each item of a list, in the config's order.
 * config_store(c, 0) is c->remote_store.
 */
size_t config_nstores(const struct config *c);
const struct remote_store_config *config_store(const struct config *c, size_t i);

/* Parsing helpers shared with the command line ("10s", "4MiB"). */
int parse_duration(const char *s, uint64_t *ns);
int parse_size(const char *s, uint64_t *bytes);

#endif
