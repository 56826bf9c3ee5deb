/*
 * log_probe - writes known log lines through agent/base/log.c, in the format
 * given as argv[1] (logfmt | json), for test_logs.py to parse with parsers
 * nobody here wrote (Python's json module; logfmt by its grammar).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

int main(int argc, char **argv)
{
	enum pp_log_format fmt = argc > 1 && !strcmp(argv[1], "json") ? PP_LOG_JSON : PP_LOG_LOGFMT;
	static char longval[20000], longpath[3000];

	pp_log_setup(PP_DEBUG, fmt);
	/* numbers as printf writes them, strings through pp_q: a comm that
	 * looks like a number stays a string */
	pp_log(PP_INFO, "types", "pid=%d samples=%llu ratio=%.2f neg=%d comm=%s cpu=%s hex=%s",
	       1234, 18446744073709551615ull, 0.25, -7, pp_q("1234"), "on", "0x1f");
	pp_log(PP_WARN, "quoting", "path=%s error=%s empty=%s",
	       pp_q("/tmp/a b/\"c\"\\d"), pp_q("line1\nline2"), pp_q(""));
	/* a line longer than the stack buffer: nothing cut */
	memset(longval, 'x', sizeof(longval) - 1);
	pp_log(PP_INFO, "long line", "n=%zu value=%s end=1", strlen(longval), longval);
	/* a value longer than pp_q's buffer: cut, and marked */
	memset(longpath, 'p', sizeof(longpath) - 1);
	longpath[0] = '/';
	longpath[10] = ' ';
	pp_log(PP_INFO, "long value", "n=%zu path=%s end=1", strlen(longpath), pp_q(longpath));
	return 0;
}
