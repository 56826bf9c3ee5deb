/*
 * cmd_run.c - `pushprof run [--config FILE] [--duration D]`: load the config
 * and run the agent loop until a signal (or D has passed).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "commands.h"
#include "config.h"
#include "log.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: pushprof run [--config FILE] [--duration D]\n"
		"\n"
		"Run the profiling agent: sample on-CPU stacks with eBPF and push one\n"
		"profile per process per cpu.interval.\n"
		"\n"
		"  --config FILE   config file (default " PUSHPROF_DEFAULT_CONFIG ")\n"
		"  --duration D    stop after D (e.g. 30s); SIGINT/SIGTERM stop too,\n"
		"                  after building and flushing the current window\n"
		"\n"
		"exit status: 0 stopped cleanly, 1 runtime failure, 2 bad flags or config\n");
}

int cmd_run(int argc, char **argv)
{
	const char *path = PUSHPROF_DEFAULT_CONFIG;
	struct agent_opts o = { 0 };
	struct pp_err err = { 0 };
	struct config c;

	agent_block_signals(NULL);	/* for the process's whole life: see agent.h */
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = NULL;
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage(stdout);
			return EXIT_OK;
		}
		if (!strcmp(a, "--config") || !strcmp(a, "--duration")) {
			if (i + 1 >= argc) {
				fprintf(stderr, "pushprof: run: %s needs a value\n\n", a);
				usage(stderr);
				return EXIT_USAGE;
			}
			v = argv[++i];
		} else if (!strncmp(a, "--config=", 9)) {
			v = a + 9;
			a = "--config";
		} else if (!strncmp(a, "--duration=", 11)) {
			v = a + 11;
			a = "--duration";
		} else {
			fprintf(stderr, "pushprof: run: unknown argument '%s'\n\n", a);
			usage(stderr);
			return EXIT_USAGE;
		}
		if (!strcmp(a, "--config")) {
			path = v;
		} else if (parse_duration(v, &o.duration_ns) < 0 || o.duration_ns == 0) {
			fprintf(stderr, "pushprof: run: invalid --duration '%s' (e.g. 30s, 2m)\n", v);
			return EXIT_USAGE;
		}
	}

	if (config_load(path, &c, &err) < 0) {
		fprintf(stderr, "pushprof: %s\n", err.msg[0] ? err.msg : "invalid config");
		return EXIT_USAGE;
	}
	pp_log_setup(c.log_level, c.log_format);
	int r;
	while ((r = agent_run(&c, &o, &err)) == 1) {	/* SIGHUP with a valid config */
		config_free(&c);
		c = *o.reload;
		free(o.reload);
		o.reload = NULL;
		pp_log_setup(c.log_level, c.log_format);
	}
	config_free(&c);
	if (r < 0) {
		pp_log(PP_ERROR, "agent failed", "error=%s", pp_q(err.msg));
		return r == -EINVAL ? EXIT_USAGE : EXIT_FAIL;
	}
	return EXIT_OK;
}
