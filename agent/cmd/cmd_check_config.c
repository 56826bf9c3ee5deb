/*
 * cmd_check_config.c - `pushprof check-config FILE`: validate a config the
 * way the agent would load it and print the effective result, so a typo is
 * found before a rollout instead of by a crash-looping DaemonSet.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "config.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: pushprof check-config [--help] [--no-file-checks] FILE|-\n"
		   "\n"
		   "Validate the YAML config FILE strictly (unknown keys, types, ranges,\n"
		   "regexes, label names; a destination for the profiles: remote_store.address\n"
		   "or local_store.directory) and print the effective configuration, with every\n"
		   "default filled in and ${VAR} references expanded, as YAML on stdout.\n"
		   "FILE - reads the config from standard input.\n"
		   "\n"
		   "The files the config names (CA, client certificate and key, token files)\n"
		   "must exist and be readable, as `pushprof run` requires; every one that is\n"
		   "not is reported. --no-file-checks skips that (linting in CI, where the\n"
		   "secrets are not mounted).\n"
		   "\n"
		   "exit status: 0 valid, 2 invalid or unreadable (the error, as\n"
		   "FILE:LINE:COL: message, goes to stderr)\n");
}

/* A rule reading a __meta_* label the agent never sets reads "" forever:
 * most often a label of another agent's (node labels from the API server)
 * or a typo. Valid all the same, so a warning on stderr. */
static void warn_meta(size_t rule, const char *label, void *arg)
{
	if (!strncmp(label, "__meta_", 7) && !pp_meta_label_known(label))
		fprintf(stderr,
			"pushprof: warning: %s: relabel_configs[%zu].source_labels: %s is "
			"never set by pushprof, so it is always empty (docs/labels.md lists the "
			"__meta_* labels it sets)\n",
			(const char *)arg, rule, label);
}

/* The config from stdin (e.g. `helm template ... | pushprof check-config -`). */
static int load_stdin(const struct config_load_opts *o, struct config *c, struct pp_err *err)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);
	char chunk[8192];
	size_t n;
	int rc;

	if (!m)
		return pp_errf(err, -errno, "<stdin>: %s", strerror(errno));
	/* config_parse refuses more than its limit; stop reading a bit past it. */
	while ((n = fread(chunk, 1, sizeof(chunk), stdin)) > 0 && len < (8u << 20))
		fwrite(chunk, 1, n, m);
	if (ferror(stdin)) {
		fclose(m);
		free(buf);
		return pp_errf(err, -EIO, "cannot read config from stdin");
	}
	fclose(m);
	rc = config_parse_ov(buf, len, "<stdin>", o, c, err);
	free(buf);
	return rc;
}

int cmd_check_config(int argc, char **argv)
{
	const char *path = NULL;
	struct config c;
	struct pp_err err = { 0 };
	bool opts_done = false, file_checks = true;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!opts_done && (!strcmp(a, "--help") || !strcmp(a, "-h"))) {
			usage(stdout);
			return EXIT_OK;
		}
		if (!opts_done && !strcmp(a, "--no-file-checks")) {
			file_checks = false;
			continue;
		}
		if (!opts_done && !strcmp(a, "--")) {
			opts_done = true;
			continue;
		}
		if (!opts_done && a[0] == '-' && a[1]) {
			fprintf(stderr, "pushprof: check-config: unknown option '%s'\n\n", a);
			usage(stderr);
			return EXIT_USAGE;
		}
		if (path) {
			fprintf(stderr, "pushprof: check-config: takes one FILE\n\n");
			usage(stderr);
			return EXIT_USAGE;
		}
		path = a;
	}
	if (!path) {
		usage(stderr);
		return EXIT_USAGE;
	}
	/* as `pushprof run` loads it (less its flags) */
	const struct config_load_opts lo = {
		.need_destination = true,
		.check_files = file_checks,
		.files_hint = "(--no-file-checks skips this check)",
	};
	int lrc =
		strcmp(path, "-") ? config_load_ov(path, &lo, &c, &err) : load_stdin(&lo, &c, &err);
	if (lrc < 0) {
		fprintf(stderr, "pushprof: %s\n", err.msg[0] ? err.msg : "invalid config");
		return EXIT_USAGE;
	}
	relabel_each_source(c.relabel, warn_meta, (void *)path);
	int rc = config_dump(&c, stdout);
	config_free(&c);
	if (rc < 0 || fflush(stdout) != 0) {
		fprintf(stderr, "pushprof: check-config: cannot write to stdout\n");
		return EXIT_FAIL;
	}
	return EXIT_OK;
}
