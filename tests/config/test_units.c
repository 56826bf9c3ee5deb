/*
 * test_units.c - the parsing helpers shared with the command line
 * (parse_duration, parse_size) and the in-memory API (config_parse,
 * config_defaults, config_free), which check-config does not reach alone.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "check.h"

static void durations(void)
{
	static const struct { const char *s; int rc; unsigned long long ns; } t[] = {
		{ "0", 0, 0 }, { "0s", 0, 0 }, { "1ns", 0, 1 }, { "7us", 0, 7000 },
		{ "7\xc2\xb5s", 0, 7000 }, { "500ms", 0, 500000000ull },
		{ "10s", 0, 10000000000ull }, { "1m", 0, 60000000000ull },
		{ "1h", 0, 3600000000000ull }, { "1m30s", 0, 90000000000ull },
		{ "1h2m3s4ms", 0, 3723004000000ull }, { "90s", 0, 90000000000ull },
		{ "2562047h", 0, 2562047ull * 3600000000000ull },
		{ "2562048h", -ERANGE, 0 }, { "99999999999999999999s", -ERANGE, 0 },
		{ "", -EINVAL, 0 }, { "10", -EINVAL, 0 }, { "s", -EINVAL, 0 },
		{ "1.5s", -EINVAL, 0 }, { "-1s", -EINVAL, 0 }, { "10 s", -EINVAL, 0 },
		{ "1d", -EINVAL, 0 }, { "10S", -EINVAL, 0 }, { "1m30", -EINVAL, 0 },
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		uint64_t ns = 12345;
		int rc = parse_duration(t[i].s, &ns);
		CHECK(rc == t[i].rc, "parse_duration(\"%s\") = %d, want %d", t[i].s, rc, t[i].rc);
		if (!rc && !t[i].rc)
			CHECK(ns == t[i].ns, "parse_duration(\"%s\") = %llu ns, want %llu", t[i].s,
			      (unsigned long long)ns, t[i].ns);
	}
	CHECK(parse_duration(NULL, NULL) == -EINVAL, "parse_duration(NULL)");
}

static void sizes(void)
{
	static const struct { const char *s; int rc; unsigned long long b; } t[] = {
		{ "0", 0, 0 }, { "4096", 0, 4096 }, { "4096B", 0, 4096 },
		{ "64KiB", 0, 65536 }, { "256MiB", 0, 268435456ull }, { "1GiB", 0, 1ull << 30 },
		{ "2TiB", 0, 2ull << 40 }, { "10KB", 0, 10000 }, { "4MB", 0, 4000000 },
		{ "1GB", 0, 1000000000ull }, { "8388607TiB", 0, 8388607ull << 40 },
		{ "8388608TiB", -ERANGE, 0 }, { "", -EINVAL, 0 }, { "MiB", -EINVAL, 0 },
		{ "1.5MiB", -EINVAL, 0 }, { "-1", -EINVAL, 0 }, { "4 MiB", -EINVAL, 0 },
		{ "4mib", -EINVAL, 0 }, { "4K", -EINVAL, 0 }, { "12XB", -EINVAL, 0 },
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		uint64_t b = 12345;
		int rc = parse_size(t[i].s, &b);
		CHECK(rc == t[i].rc, "parse_size(\"%s\") = %d, want %d", t[i].s, rc, t[i].rc);
		if (!rc && !t[i].rc)
			CHECK(b == t[i].b, "parse_size(\"%s\") = %llu, want %llu", t[i].s,
			      (unsigned long long)b, t[i].b);
	}
}

static void api(void)
{
	struct config c;
	struct pp_err err = { 0 };
	char host[256] = "";

	gethostname(host, sizeof(host) - 1);
	unsetenv("NODE_NAME");
	CHECK(config_defaults(&c, &err) == 0, "config_defaults: %s", err.msg);
	CHECK(!strcmp(c.node, host), "default node is the hostname (%s)", c.node);
	CHECK(c.cpu.frequency_hz == 19 && c.cpu.interval_ns == 10000000000ull,
	      "cpu defaults 19 Hz / 10s");
	CHECK(c.go_heap.interval_ns == 60000000000ull && c.go_heap.max_buckets == 100000 &&
	      c.go_heap.max_stack_depth == 128 && c.go_heap.on_oom, "go_heap defaults");
	CHECK(c.go_heap.budget.max_frames == 3000000 && c.go_heap.budget.max_locations == 100000 &&
	      c.go_heap.budget.max_read_bytes == 256ull << 20 &&
	      c.go_heap.budget.max_duration_ns == 5000000000ull &&
	      c.go_heap.budget.backoff_ns == 600000000000ull &&
	      c.go_heap.budget.oom_max_frames == 500000, "go_heap.budget defaults");
	CHECK(c.remote_store.max_request_bytes == 4u << 20 && !*c.remote_store.address,
	      "remote_store defaults");
	CHECK(c.oom_score_adj == -1000 && c.relabel == NULL && c.ntargets == 0, "misc defaults");
	config_free(&c);
	config_free(&c);	/* idempotent: config_free zeroes */

	setenv("NODE_NAME", "from-env", 1);
	CHECK(config_defaults(&c, &err) == 0 && !strcmp(c.node, "from-env"),
	      "default node from NODE_NAME (%s)", c.node);
	config_free(&c);
	unsetenv("NODE_NAME");

	static const char good[] =
		"cpu: {frequency_hz: 97, interval: 1m30s}\n"
		"targets:\n  - comm_regex: ^(api|web)$\n    pids: [7, 9]\n"
		"external_labels: {cluster: eu}\n";
	memset(&err, 0, sizeof(err));
	CHECK(config_parse(good, strlen(good), "mem", &c, &err) == 0, "config_parse: %s", err.msg);
	CHECK(c.cpu.frequency_hz == 97 && c.cpu.interval_ns == 90000000000ull, "cpu values");
	CHECK(c.ntargets == 1 && c.targets[0].npids == 2 && c.targets[0].pids[1] == 9,
	      "targets parsed");
	CHECK(c.ntargets == 1 && pp_regex_match(c.targets[0].comm_re, "web", 3, NULL, 0) == 1 &&
	      pp_regex_match(c.targets[0].comm_re, "webx", 4, NULL, 0) == 0,
	      "comm_regex compiled and matching");
	CHECK(!strcmp(pp_labels_get(&c.external_labels, "cluster"), "eu"), "external label");
	CHECK(!strcmp(c.path, "mem"), "path is the given name");
	config_free(&c);

	/* Not NUL-terminated input: only len bytes may be read (ASan checks). */
	char *buf = malloc(9);
	memcpy(buf, "node: abc", 9);
	CHECK(config_parse(buf, 9, "nonul", &c, &err) == 0 && !strcmp(c.node, "abc"),
	      "input without a terminating NUL");
	config_free(&c);
	free(buf);

	static const char bad[] = "cpu:\n  frequency_hz: 0\n";
	memset(&err, 0, sizeof(err));
	int rc = config_parse(bad, strlen(bad), "mem.yaml", &c, &err);
	CHECK(rc == -EINVAL, "invalid config returns -EINVAL (%d)", rc);
	CHECK(err.code == -EINVAL && strstr(err.msg, "mem.yaml:2:17: cpu.frequency_hz") == err.msg,
	      "error message: %s", err.msg);
	CHECK(c.node == NULL && c.targets == NULL, "failed parse leaves a zeroed config");
	config_free(&c);

	/* A failure after targets were partly built must free them (ASan/LSan). */
	static const char late[] = "targets: [{comm_regex: a}, {exe_regex: b}]\noom_score_adj: x\n";
	CHECK(config_parse(late, strlen(late), "late", &c, &err) == -EINVAL, "late failure");
	static const char mid[] = "targets: [{comm_regex: a, pids: [1, 2, x]}]\n";
	CHECK(config_parse(mid, strlen(mid), "mid", &c, &err) == -EINVAL, "failure inside pids");
	CHECK(config_parse(NULL, 0, NULL, &c, &err) == 0, "NULL/0 input = defaults");
	config_free(&c);
}

/* remote_store as a mapping or a list: config_nstores()/config_store() */
static void stores(void)
{
	struct config c;
	struct pp_err err = { 0 };

	static const char one[] = "remote_store: {address: \"p:7070\"}\n";
	CHECK(config_parse(one, strlen(one), "one", &c, &err) == 0, "mapping: %s", err.msg);
	CHECK(config_nstores(&c) == 1 && !c.remote_store_list && config_store(&c, 0) ==
	      &c.remote_store && !strcmp(c.remote_store.name, "parca-p_7070"),
	      "mapping: one store named parca-p_7070 (%s)", c.remote_store.name);
	config_free(&c);
	CHECK(config_parse(NULL, 0, NULL, &c, &err) == 0 && config_nstores(&c) == 0 &&
	      !*c.remote_store.name, "defaults: no store, no name");
	config_free(&c);

	static const char two[] = "remote_store:\n  - address: \"p:7070\"\n"
				  "  - {name: py, address: \"http://y:4040/x\", protocol: pyroscope}\n";
	CHECK(config_parse(two, strlen(two), "two", &c, &err) == 0, "list: %s", err.msg);
	const struct remote_store_config *y = config_nstores(&c) == 2 ? config_store(&c, 1) : NULL;
	CHECK(c.remote_store_list && y && y->protocol == STORE_PYROSCOPE && y->http &&
	      !strcmp(y->name, "py") && !strcmp(y->address, "y:4040") &&
	      !strcmp(y->path_prefix, "/x") && !y->debuginfo_upload &&
	      y->timeout_ns == 10000000000ull && c.remote_store.debuginfo_upload,
	      "list: two stores, each with its own keys and defaults");
	config_free(&c);

	static const char empty[] = "remote_store: []\n";
	CHECK(config_parse(empty, strlen(empty), "empty", &c, &err) == 0 &&
	      config_nstores(&c) == 0 && c.remote_store_list, "empty list: no store");
	config_free(&c);

	/* a failure in a later item frees the earlier ones (ASan/LSan) */
	static const char late[] = "remote_store:\n  - {address: \"a:1\", tenant_id: t}\n"
				   "  - {address: \"b:1\", headers: {x-a: b}}\n  - {address: 7}\n";
	memset(&err, 0, sizeof(err));
	CHECK(config_parse(late, strlen(late), "late", &c, &err) == -EINVAL &&
	      strstr(err.msg, "late:4:15: remote_store[2].address"), "late item error: %s",
	      err.msg);
	config_free(&c);

	/* a flag cannot say which item it is for */
	static const struct config_override ov = { "remote_store.address", "x:1", false,
						   "--remote-store-address" };
	struct config_load_opts lo = { .ov = &ov, .nov = 1 };
	memset(&err, 0, sizeof(err));
	CHECK(config_parse_ov(two, strlen(two), "two", &lo, &c, &err) == -EINVAL &&
	      strstr(err.msg, "--remote-store-address sets remote_store.address, but "
		     "remote_store in two:2:3 is a list"), "flag with a list: %s", err.msg);
	config_free(&c);
}

int main(void)
{
	durations();
	sizes();
	api();
	stores();
	return check_done();
}
