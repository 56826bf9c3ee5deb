/*
 * main.c - `pushprof <command>`: dispatch only; each command lives in its
 * own cmd_*.c and returns its exit status.
 */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "version.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: pushprof <command> [options]\n"
		"\n"
		"commands:\n"
		"  run            run the agent (--config FILE, default " PUSHPROF_DEFAULT_CONFIG ")\n"
		"  check-config   validate a config file and print the effective config\n"
		"  push           send existing pprof files to a Parca-compatible server\n"
		"  snapshot       take a Go heap profile of a running process\n"
		"  version        print the version, commit, build date and library versions\n"
		"\n"
		"`pushprof <command> --help` describes a command's options.\n");
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return EXIT_USAGE;
	}
	const char *cmd = argv[1];
	if (!strcmp(cmd, "run"))
		return cmd_run(argc - 1, argv + 1);
	if (!strcmp(cmd, "check-config"))
		return cmd_check_config(argc - 1, argv + 1);
	if (!strcmp(cmd, "push"))
		return cmd_push(argc - 1, argv + 1);
	if (!strcmp(cmd, "snapshot"))
		return cmd_snapshot(argc - 1, argv + 1);
	if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) {
		version_print(stdout);
		return fflush(stdout) == 0 ? EXIT_OK : EXIT_FAIL;
	}
	if (!strcmp(cmd, "help") && argc > 2) {	/* `pushprof help run` = `pushprof run --help` */
		char *sub[] = { argv[2], "--help", NULL };
		if (!strcmp(argv[2], "run"))
			return cmd_run(2, sub);
		if (!strcmp(argv[2], "check-config"))
			return cmd_check_config(2, sub);
		if (!strcmp(argv[2], "push"))
			return cmd_push(2, sub);
		if (!strcmp(argv[2], "snapshot"))
			return cmd_snapshot(2, sub);
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
