/* cmd_run.c - placeholder until its module lands (being written this session). */
#include <stdio.h>
#include "commands.h"

int cmd_run(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	fprintf(stderr, "pushprof: this command is not built yet\n");
	return EXIT_FAIL;
}
