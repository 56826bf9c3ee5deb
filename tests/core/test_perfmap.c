/* Unit test of agent/sym/perfmap.c (and proc_root_open) against this process's
 * own /tmp/perf-PID.map: parsing, growth read incrementally (a partial last
 * line waits for its newline), later lines winning, replacement, and files
 * that must not be read: FIFO, device, over 64 MiB, symlink out of root
 * (for this process the root is /, so a symlink to a device stands in). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "perfmap.h"
#include "procinfo.h"
#include "check.h"

static char path[64];

static void append(const char *s)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (fd < 0 || write(fd, s, strlen(s)) != (ssize_t)strlen(s))
		abort();
	close(fd);
	/* a new mtime even on coarse timestamps: the size changes anyway */
}

static const char *name_at(const struct perfmap *pm, uint64_t a)
{
	const char *n = perfmap_lookup(pm, a);
	return n ? n : "(none)";
}

int main(void)
{
	struct perfmap pm;
	pid_t self = getpid(), ns;

	CHECK(proc_nspid(self, &ns) == 0 && ns > 0, "nspid");
	snprintf(path, sizeof(path), "/tmp/perf-%d.map", (int)ns);
	unlink(path);
	perfmap_init(&pm);
	CHECK(perfmap_refresh(&pm, self) == -ENOENT, "no file: -ENOENT");

	append("1000 100 first\nnot a line\nzz 10 bad\n2000 0 zero_size\n3000\n"
	       "0x4000 10 with_0x\n5000 10 sp ace name\r\nb000 10 tab\there\x1b[0m\n");
	CHECK(perfmap_refresh(&pm, self) == 1, "first read");
	CHECK(!strcmp(name_at(&pm, 0x1000), "first") && !strcmp(name_at(&pm, 0x10ff), "first") &&
	      !strcmp(name_at(&pm, 0x1100), "(none)") && !strcmp(name_at(&pm, 0xfff), "(none)"),
	      "range [start, start+size)");
	CHECK(!strcmp(name_at(&pm, 0x2000), "(none)"), "size 0 skipped");
	CHECK(!strcmp(name_at(&pm, 0x4005), "with_0x"), "0x prefix: %s", name_at(&pm, 0x4005));
	CHECK(!strcmp(name_at(&pm, 0x5000), "sp ace name"), "name with spaces, CR trimmed: '%s'",
	      name_at(&pm, 0x5000));
	CHECK(!strcmp(name_at(&pm, 0xb000), "tab?here?[0m"), "control characters replaced: '%s'",
	      name_at(&pm, 0xb000));
	CHECK(perfmap_refresh(&pm, self) == 0, "unchanged: nothing re-read");

	/* growth: a partial line is not read until its newline arrives */
	append("1000 80 second\n6000 10 part");
	CHECK(perfmap_refresh(&pm, self) == 1, "grown");
	CHECK(!strcmp(name_at(&pm, 0x1010), "second"), "later line wins: %s", name_at(&pm, 0x1010));
	CHECK(!strcmp(name_at(&pm, 0x1090), "(none)"), "the later, smaller range replaced it");
	CHECK(!strcmp(name_at(&pm, 0x6000), "(none)"), "partial line waits");
	append("ial\n");
	CHECK(perfmap_refresh(&pm, self) == 1, "grown again");
	CHECK(!strcmp(name_at(&pm, 0x6000), "partial"), "completed line read: %s",
	      name_at(&pm, 0x6000));
	/* a nested later entry inside an earlier larger one */
	append("7000 1000 outer\n7100 10 inner\n");
	perfmap_refresh(&pm, self);
	CHECK(!strcmp(name_at(&pm, 0x7105), "inner") && !strcmp(name_at(&pm, 0x7200), "outer"),
	      "nested: %s %s", name_at(&pm, 0x7105), name_at(&pm, 0x7200));
	/* an overlong line is skipped, the next one read */
	char *longl = malloc(3 * PERFMAP_MAX_LINE + 2);
	memset(longl, 'a', 3 * PERFMAP_MAX_LINE);
	memcpy(longl, "8000 10 ", 8);
	strcpy(longl + 3 * PERFMAP_MAX_LINE, "\n");
	append(longl);
	append("9000 10 after_long\n");
	free(longl);
	perfmap_refresh(&pm, self);
	CHECK(!strcmp(name_at(&pm, 0x8000), "(none)") && !strcmp(name_at(&pm, 0x9000), "after_long"),
	      "overlong line skipped: %.20s %s", name_at(&pm, 0x8000), name_at(&pm, 0x9000));

	/* replaced by a shorter file: read from the start */
	unlink(path);
	append("a000 10 replaced\n");
	CHECK(perfmap_refresh(&pm, self) == 1, "replaced");
	CHECK(!strcmp(name_at(&pm, 0x1000), "(none)") && !strcmp(name_at(&pm, 0xa000), "replaced"),
	      "old entries gone after replacement");

	/* files that must not be read (each returns at once) */
	struct stat st;
	unlink(path);
	CHECK(mkfifo(path, 0600) == 0, "mkfifo");
	time_t t0 = time(NULL);
	CHECK(perfmap_refresh(&pm, self) == -EINVAL && pm.n == 0, "FIFO refused");
	CHECK(proc_root_open(self, path, PERFMAP_MAX_FILE, &st) == -EINVAL, "FIFO: not opened");
	unlink(path);
	CHECK(symlink("/dev/zero", path) == 0, "symlink");
	CHECK(perfmap_refresh(&pm, self) == -ELOOP, "symlink to a device refused (no symlink followed)");
	unlink(path);
	CHECK(symlink("/proc/self/environ", path) == 0, "symlink");
	CHECK(perfmap_refresh(&pm, self) == -ELOOP, "symlink to a procfs file refused (no symlink followed)");
	unlink(path);
	CHECK(symlink("/proc/self/fd/0", path) == 0, "symlink");
	CHECK(perfmap_refresh(&pm, self) == -ELOOP, "symlink to a magic link refused");
	unlink(path);
	int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	CHECK(fd >= 0 && ftruncate(fd, (off_t)PERFMAP_MAX_FILE + 1) == 0, "sparse big file");
	if (fd >= 0)
		close(fd);
	CHECK(perfmap_refresh(&pm, self) == -EFBIG, "over 64 MiB refused");
	CHECK(time(NULL) - t0 < 5, "nothing blocked");
	unlink(path);
	perfmap_free(&pm);

	/* A FUSE mount whose daemon never answers (nobody reads /dev/fuse):
	 * even a lookup there waits forever. The path is refused from
	 * mountinfo before any lookup; alarm() turns a hang into a failure. */
	char dir[] = "/tmp/pp-fuse-XXXXXX", opts[96], in[128];
	int dev = open("/dev/fuse", O_RDWR | O_CLOEXEC);
	if (dev >= 0 && mkdtemp(dir)) {
		snprintf(opts, sizeof(opts), "fd=%d,rootmode=40000,user_id=0,group_id=0", dev);
		if (mount("stall", dir, "fuse.stall", 0, opts) == 0) {
			snprintf(in, sizeof(in), "%s/perf-1.map", dir);
			alarm(10);
			CHECK(proc_root_open(self, in, PERFMAP_MAX_FILE, &st) == -EINVAL,
			      "a path on a FUSE mount is refused without a lookup");
			snprintf(in, sizeof(in), "%s", dir);
			CHECK(proc_root_open(self, in, PERFMAP_MAX_FILE, &st) == -EINVAL,
			      "the FUSE mount point itself too");
			alarm(0);
			umount2(dir, MNT_DETACH);
		} else {
			printf("note: cannot mount FUSE here (%s): FUSE case skipped\n",
			       strerror(errno));
		}
		rmdir(dir);
	}
	if (dev >= 0)
		close(dev);
	CHECK(proc_root_open(self, "/tmp/../etc/passwd", PERFMAP_MAX_FILE, &st) == -EINVAL,
	      "a path with .. is refused");

	return check_done();
}
