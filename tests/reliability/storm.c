/* storm RATE SECONDS [PROG]: fork+exec PROG (default /bin/true) RATE times
 * a second for SECONDS, reaping as it goes; prints how many ran. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	double rate = argc > 1 ? atof(argv[1]) : 500, secs = argc > 2 ? atof(argv[2]) : 10;
	char *prog = argc > 3 ? argv[3] : "/bin/true";
	double t0 = now(), end = t0 + secs;
	long started = 0, failed = 0;

	while (now() < end) {
		double due = t0 + started / rate;
		if (now() < due) {
			struct timespec ts = { 0, (long)((due - now()) * 1e9) };
			nanosleep(&ts, NULL);
		}
		pid_t p = fork();
		if (p == 0) {
			execl(prog, prog, (char *)NULL);
			_exit(127);
		}
		if (p < 0)
			failed++;
		else
			started++;
		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
	}
	while (waitpid(-1, NULL, 0) > 0 || errno == EINTR)
		;
	double took = now() - t0;
	printf("started=%ld failed=%ld seconds=%.1f rate=%.0f\n", started, failed, took,
	       started / took);
	return 0;
}
