/*
 * main.c - `pushprof <command>`: dispatch only; each command lives in its
 * own cmd_*.c and returns its exit status.
 */
#include <stdio.h>
#include <string.h>

#include "givemem.h"
#include "commands.h"
#include "version.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: pushprof <command> [options]\n"
		   "\n"
		   "commands:\n"
		   "  run            run the agent (--config FILE, default " PUSHPROF_DEFAULT_CONFIG
		   ")\n"
		   "  check-config   validate a config file and print the effective config\n"
		   "  push           send existing pprof files to a Parca-compatible server\n"
		   "  snapshot       take a Go heap profile of a running process\n"
		   "  version        print the version, commit, build date and library versions\n"
		   "\n"
		   "`pushprof <command> --help` describes a command's options.\n");
}

static const struct {
	const char *name;
	int (*fn)(int argc, char **argv);
} commands[] = {
	{ "run", cmd_run },
	{ "check-config", cmd_check_config },
	{ "push", cmd_push },
	{ "snapshot", cmd_snapshot },
};

static int (*command(const char *name))(int, char **)
{
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (!strcmp(name, commands[i].name))
			return commands[i].fn;
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return EXIT_USAGE;
	}
	const char *cmd = argv[1];
	int (*fn)(int, char **) = command(cmd);

	pp_malloc_policy(); /* before any thread: base/givemem.h */

	if (fn)
		return fn(argc - 1, argv + 1);
	if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) {
		version_print(stdout);
		return fflush(stdout) == 0 ? EXIT_OK : EXIT_FAIL;
	}
	if (!strcmp(cmd, "help") && argc > 2) { /* `pushprof help run` = `pushprof run --help` */
		char *sub[] = { argv[2], "--help", NULL };

		if ((fn = command(argv[2])))
			return fn(2, sub);
		if (!strcmp(argv[2], "version") || !strcmp(argv[2], "help")) {
			usage(stdout);
			return EXIT_OK;
		}
		fprintf(stderr, "pushprof: help: unknown command '%s'\n\n", argv[2]);
		usage(stderr);
		return EXIT_USAGE;
	}
	if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
		usage(stdout);
		return EXIT_OK;
	}
	fprintf(stderr, "pushprof: unknown command '%s'\n\n", cmd);
	usage(stderr);
	return EXIT_USAGE;
}
