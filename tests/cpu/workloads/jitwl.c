/* jitwl.c - a miniature JIT for the perf-map tests: copies a spin loop into
 * anonymous executable memory, runs it for argv[1] seconds and, per
 * argv[2], leaves at /tmp/perf-<its pid>.map (its pid as it sees it, so in
 * its own PID namespace):
 *   map           a perf map naming the code "jit_hot_code" (after an
 *                 earlier line naming it "jit_stale_name": later lines win;
 *                 malformed lines around it)
 *   memfd         the code in a memfd mapped twice (writable, then
 *                 executable, as .NET does), named "jit_hot_code"
 *   symlink PATH  a symlink to PATH
 *   fifo          a FIFO
 *   none          nothing, and no look at /tmp at all (its /tmp may be a
 *                 mount where any lookup hangs)
 * Built static so it runs in a bare chroot. */
#define _GNU_SOURCE	/* memfd_create */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* mov $0x40000, %ecx; 1: dec %ecx; jnz 1b; ret */
static const unsigned char code[] = { 0xb9, 0x00, 0x00, 0x04, 0x00, 0xff, 0xc9, 0x75, 0xfc, 0xc3 };

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

__attribute__((noinline)) void run(void (*fn)(void), double end)
{
	while (now() < end)
		for (int i = 0; i < 16; i++)
			fn();
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 5;
	const char *mode = argc > 2 ? argv[2] : "map";
	char path[64];

	unsigned char *mem;
	if (!strcmp(mode, "memfd")) {
		int fd = memfd_create("jitwl", MFD_CLOEXEC);
		if (fd < 0 || ftruncate(fd, 4096))
			return 1;
		unsigned char *w = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		mem = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_SHARED, fd, 0);
		if (w == MAP_FAILED || mem == MAP_FAILED)
			return 1;
		memcpy(w, code, sizeof(code));
	} else {
		mem = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (mem == MAP_FAILED)
			return 1;
		memcpy(mem, code, sizeof(code));
		if (mprotect(mem, 4096, PROT_READ | PROT_EXEC))
			return 1;
	}
	snprintf(path, sizeof(path), "/tmp/perf-%d.map", (int)getpid());
	if (strcmp(mode, "none") != 0) {
		mkdir("/tmp", 01777);
		unlink(path);
	}
	if (!strcmp(mode, "map") || !strcmp(mode, "memfd")) {
		FILE *f = fopen(path, "w");
		if (!f)
			return 1;
		fprintf(f, "%lx %zx jit_stale_name\n", (unsigned long)mem, sizeof(code));
		fprintf(f, "not a line\nzz 10 bad_start\n%lx 0 zero_size\n%lx\n",
			(unsigned long)mem, (unsigned long)mem);
		fprintf(f, "%lx %zx jit_hot_code\n", (unsigned long)mem, sizeof(code));
		fclose(f);
	} else if (!strcmp(mode, "symlink") && argc > 3) {
		if (symlink(argv[3], path))
			return 1;
	} else if (!strcmp(mode, "fifo")) {
		if (mkfifo(path, 0600))
			return 1;
	}
	printf("ready %s\n", path);
	fflush(stdout);
	run((void (*)(void))mem, now() + secs);
	return 0;
}
