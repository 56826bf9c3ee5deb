/*
 * commands.h - the subcommands of `pushprof`, one file each (cmd_*.c).
 * Each returns the process exit status.
 */
#ifndef PUSHPROF_COMMANDS_H
#define PUSHPROF_COMMANDS_H

#define PUSHPROF_DEFAULT_CONFIG "/etc/pushprof/pushprof.yaml"

/* Exit statuses shared by the commands. */
enum {
	EXIT_OK = 0,
	EXIT_FAIL = 1,	/* runtime failure */
	EXIT_USAGE = 2, /* bad flags or invalid config */
	/* snapshot */
	EXIT_NO_PROCESS = 3,
	EXIT_NOT_GO = 4,
	EXIT_PROFILING_DISABLED = 5,
	EXIT_PERMISSION = 6,
};

int cmd_run(int argc, char **argv);
int cmd_check_config(int argc, char **argv);
int cmd_push(int argc, char **argv);
int cmd_snapshot(int argc, char **argv);

#endif
