/*
 * cmd_snapshot.c - `pushprof snapshot --pid PID`: one Go heap profile of a
 * running process, read from outside it, without a running agent. Writes
 * the gzip'd pprof to a file and/or pushes it like the agent would.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"
#include "config.h"
#include "gobin.h"
#include "goheap.h"
#include "gotrack.h"
#include "outbox.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: pushprof snapshot --pid PID [--output FILE.pb.gz] [--view runtime|latest]\n"
		"                         [--push] [--config FILE] [--enable-profiling]\n"
		"                         [--max-buckets N] [--max-stack-depth N]\n"
		"\n"
		"Read the heap profile of the running Go program PID from outside the\n"
		"process (its runtime's memory-profile buckets) and write it as gzip'd\n"
		"pprof, the same profile the program's own pprof.WriteHeapProfile writes.\n"
		"\n"
		"  --output FILE       where to write (default heap-PID.pb.gz; - = stdout)\n"
		"  --view runtime      what runtime.MemProfile reports now (default)\n"
		"  --view latest       active plus all unpublished cycles (newest allocations)\n"
		"  --push              send it to remote_store from the config\n"
		"  --config FILE       config (go_heap.*, external_labels, remote_store, node)\n"
		"  --enable-profiling  (or go_heap.enable_profiling: true in --config)\n"
		"                      if the program has memory profiling off\n"
		"                      (MemProfileRate 0), write 524288 into it: WRITES INTO\n"
		"                      THE TARGET'S MEMORY; later snapshots see allocations\n"
		"  --max-buckets N, --max-stack-depth N  override go_heap.* limits\n"
		"\n"
		"exit status: 0 ok, 1 failure, 2 usage, 3 no such process, 4 not a Go\n"
		"program, 5 memory profiling disabled, 6 permission denied\n");
}

static int exit_for(int rc)
{
	switch (rc) {
	case -ESRCH:
		return EXIT_NO_PROCESS;
	case -ENOEXEC:
		return EXIT_NOT_GO;
	case GOHEAP_EDISABLED:
		return EXIT_PROFILING_DISABLED;
	case -EPERM:
	case -EACCES:
		return EXIT_PERMISSION;
	default:
		return EXIT_FAIL;
	}
}

static int parse_u32(const char *s, uint32_t *out)
{
	char *end;
	errno = 0;
	unsigned long v = strtoul(s, &end, 10);
	if (errno || end == s || *end || v == 0 || v > UINT32_MAX || s[0] == '-')
		return -EINVAL;
	*out = (uint32_t)v;
	return 0;
}

static int write_out(const char *path, const uint8_t *buf, size_t len)
{
	FILE *f = strcmp(path, "-") ? fopen(path, "wb") : stdout;
	if (!f)
		return -errno;
	size_t n = fwrite(buf, 1, len, f);
	int rc = (n == len && fflush(f) == 0) ? 0 : -EIO;
	if (f != stdout && fclose(f) != 0)
		rc = -EIO;
	return rc;
}

int cmd_snapshot(int argc, char **argv)
{
	const char *output = NULL, *config_path = NULL, *view_s = "runtime";
	long pid = 0;
	bool push = false, enable = false;
	uint32_t max_buckets = 0, max_depth = 0;
	struct pp_err err = { 0 };

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage(stdout);
			return EXIT_OK;
		} else if (!strcmp(a, "--push")) {
			push = true;
			continue;
		} else if (!strcmp(a, "--enable-profiling")) {
			enable = true;
			continue;
		}
		if (!v || strncmp(a, "--", 2)) {
			fprintf(stderr, "pushprof: snapshot: %s '%s'\n\n",
				strncmp(a, "--", 2) ? "unexpected argument" : "missing value for",
				a);
			usage(stderr);
			return EXIT_USAGE;
		}
		i++;
		if (!strcmp(a, "--pid")) {
			char *end;
			pid = strtol(v, &end, 10);
			if (*end || end == v || pid <= 0 || pid > INT32_MAX) {
				fprintf(stderr, "pushprof: snapshot: bad --pid '%s'\n", v);
				return EXIT_USAGE;
			}
		} else if (!strcmp(a, "--output")) {
			output = v;
		} else if (!strcmp(a, "--view")) {
			view_s = v;
		} else if (!strcmp(a, "--config")) {
			config_path = v;
		} else if (!strcmp(a, "--max-buckets")) {
			if (parse_u32(v, &max_buckets)) {
				fprintf(stderr, "pushprof: snapshot: bad --max-buckets '%s'\n", v);
				return EXIT_USAGE;
			}
		} else if (!strcmp(a, "--max-stack-depth")) {
			if (parse_u32(v, &max_depth) || max_depth > GOHEAP_NSTK_LIMIT) {
				fprintf(stderr, "pushprof: snapshot: bad --max-stack-depth '%s'\n",
					v);
				return EXIT_USAGE;
			}
		} else {
			fprintf(stderr, "pushprof: snapshot: unknown option '%s'\n\n", a);
			usage(stderr);
			return EXIT_USAGE;
		}
	}
	enum goheap_view view;
	if (!pid || goheap_view_parse(view_s, &view)) {
		fprintf(stderr, "pushprof: snapshot: %s\n\n",
			!pid ? "--pid is required" : "--view must be runtime or latest");
		usage(stderr);
		return EXIT_USAGE;
	}

	struct config cfg;
	int rc = config_path ? config_load(config_path, &cfg, &err) : config_defaults(&cfg, &err);
	if (rc < 0) {
		fprintf(stderr, "pushprof: %s\n", err.msg[0] ? err.msg : "invalid config");
		return EXIT_USAGE;
	}
	if (push && (!cfg.remote_store.address || !cfg.remote_store.address[0])) {
		fprintf(stderr,
			"pushprof: snapshot: --push needs remote_store.address in --config\n");
		config_free(&cfg);
		return EXIT_USAGE;
	}
	if (!output && !push) {
		static char def[64];
		snprintf(def, sizeof(def), "heap-%ld.pb.gz", pid);
		output = def;
	}

	int status = EXIT_FAIL;
	struct gobin *g = NULL;
	struct goheap_snapshot snap = { 0 };
	struct outbox *ob = NULL;

	rc = gobin_new(&(struct gobin_opts){ .pid = (pid_t)pid }, &g, &err);
	if (rc) {
		fprintf(stderr, "pushprof: snapshot: %s\n", err.msg[0] ? err.msg : strerror(-rc));
		status = exit_for(rc);
		goto out;
	}
	/* go_heap.enable_profiling in --config means the same as the flag. */
	if (enable || cfg.go_heap.enable_profiling) {
		int64_t old = 0;
		rc = gobin_enable_profiling(g, GOBIN_DEFAULT_RATE, &old, &err);
		if (rc < 0) {
			fprintf(stderr, "pushprof: snapshot: enabling memory profiling: %s\n",
				err.msg);
			status = exit_for(rc);
			goto out;
		}
		if (rc == 1) {
			fprintf(stderr,
				"pushprof: snapshot: pid %ld: memory profiling was disabled; wrote "
				"runtime.MemProfileRate=%d at 0x%" PRIx64
				" (allocations from now on "
				"are sampled: take a later snapshot)\n",
				pid, GOBIN_DEFAULT_RATE, g->rate_addr);
			/* Nothing is sampled yet: a profile now would be empty. */
			status = EXIT_PROFILING_DISABLED;
			goto out;
		}
	}
	struct goheap_snapshot_opts o = {
		.view = view,
		.max_buckets = max_buckets ? max_buckets : cfg.go_heap.max_buckets,
		.max_depth = max_depth ? max_depth : cfg.go_heap.max_stack_depth,
		.budget = gotrack_budget(&cfg.go_heap),
		.trigger = "on_demand",
		.node = cfg.node,
		.external = &cfg.external_labels,
	};
	rc = goheap_snapshot((pid_t)pid, g, &o, &snap, &err);
	if (rc) {
		fprintf(stderr, "pushprof: snapshot: %s\n", err.msg[0] ? err.msg : strerror(-rc));
		status = exit_for(rc);
		goto out;
	}
	if (output && (rc = write_out(output, snap.gz, snap.len))) {
		fprintf(stderr, "pushprof: snapshot: writing %s: %s\n", output, strerror(-rc));
		goto out;
	}
	if (push) {
		/* a one-off delivery: now or an error, never through the agent's
		 * spool, whose backlog may be bound for another store (it would
		 * be replayed here) and which would keep this profile after exit */
		char *none = strdup("");
		if (!none) {
			fprintf(stderr, "pushprof: snapshot: out of memory\n");
			goto out;
		}
		free(cfg.spool.directory);
		cfg.spool.directory = none;
		if (outbox_new(&(struct outbox_opts){ .cfg = &cfg }, &ob, &err) ||
		    outbox_submit(ob, &snap.labels, snap.gz, snap.len, &err) ||
		    outbox_flush(ob, &err)) {
			fprintf(stderr, "pushprof: snapshot: push: %s\n",
				err.msg[0] ? err.msg : "failed");
			goto out;
		}
	}
	fprintf(stderr,
		"pushprof: snapshot: pid=%ld go=%s view=%s rate=%" PRId64 " buckets=%zu "
		"samples=%zu truncated_stacks=%" PRIu64 " complete=%s%s%s read_ms=%.2f "
		"total_ms=%.2f bytes=%zu frames=%" PRIu64 " locations=%" PRIu64
		" read_bytes=%" PRIu64 "%s%s%s\n",
		pid, g->go_version[0] ? g->go_version : "unknown", goheap_view_name(view),
		snap.rate, snap.buckets, snap.samples, snap.truncated_stacks,
		snap.complete ? "true" : "false",
		snap.complete ? "" : " reason=", snap.complete ? "" : snap.incomplete_reason,
		(double)snap.read_ns / 1e6, (double)snap.total_ns / 1e6, snap.len, snap.frames,
		snap.locations, snap.read_bytes, output && strcmp(output, "-") ? " output=" : "",
		output && strcmp(output, "-") ? output : "", push ? " pushed=true" : "");
	status = EXIT_OK;
out:
	outbox_free(ob);
	goheap_snapshot_free(&snap);
	gobin_free(g);
	config_free(&cfg);
	return status;
}
