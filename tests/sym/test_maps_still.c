/*
 * test_maps_still.c - maps kept across windows must never name the wrong
 * file: proc_maps_still() (PROCMAP_QUERY) and the symbolizer's use of it,
 * against this very process. A file mapped in place of another at the same
 * address (same range, same permissions: only the inode differs), a range
 * unmapped, permissions changed: each must make the maps be read again.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "procinfo.h"
#include "symbolize.h"

static int tmpfile_of(const char *dir, const char *name, char c)
{
	char p[256], buf[8192];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	int fd = open(p, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	memset(buf, c, sizeof(buf));
	if (fd >= 0 && write(fd, buf, sizeof(buf)) != (ssize_t)sizeof(buf)) {
		close(fd);
		return -1;
	}
	return fd;
}

int main(void)
{
	pid_t self = getpid();
	struct proc_maps m;
	struct pp_err err = { 0 };
	char dir[] = "/tmp/pushprof-maps-still-XXXXXX";
	CHECK(mkdtemp(dir) != NULL, "mkdtemp");
	int fa = tmpfile_of(dir, "a", 'a'), fb = tmpfile_of(dir, "b", 'b');
	CHECK(fa >= 0 && fb >= 0, "temp files");

	char *x = mmap(NULL, 8192, PROT_READ, MAP_PRIVATE, fa, 0);
	CHECK(x != MAP_FAILED, "map a");
	CHECK(proc_maps_read(self, &m, &err) == 0, "maps: %s", err.msg);
	uint64_t code = (uint64_t)(uintptr_t)&main, data = (uint64_t)(uintptr_t)x + 100;
	int r = proc_maps_still(self, &m, &code, 1);
	if (r == -ENOTTY) {
		printf("no PROCMAP_QUERY on this kernel: the symbolizer reads the maps each "
		       "time\n");
		CHECK(1, "skipped");
		proc_maps_free(&m);
		return check_done();
	}
	CHECK(r == 1, "unchanged code mapping: still (%d)", r);
	CHECK(proc_maps_still(self, &m, &data, 1) == 1, "unchanged file mapping: still");

	/* another file in the very same place: only the inode tells */
	CHECK(mmap(x, 8192, PROT_READ, MAP_PRIVATE | MAP_FIXED, fb, 0) == x, "map b over a");
	CHECK(proc_maps_still(self, &m, &data, 1) == 0, "file replaced in place: not still");
	uint64_t both[2] = { code, data };
	CHECK(proc_maps_still(self, &m, both, 2) == 0, "one of two replaced: not still");
	proc_maps_free(&m);

	CHECK(proc_maps_read(self, &m, &err) == 0, "maps again: %s", err.msg);
	CHECK(proc_maps_still(self, &m, &data, 1) == 1, "read again: still");
	CHECK(mprotect(x, 4096, PROT_NONE) == 0, "mprotect");
	CHECK(proc_maps_still(self, &m, &data, 1) == 0, "permissions changed: not still");
	CHECK(munmap(x, 8192) == 0, "munmap");
	CHECK(proc_maps_still(self, &m, &data, 1) == 0, "unmapped: not still");
	uint64_t nowhere = 0x1000;
	CHECK(proc_maps_still(self, &m, &nowhere, 1) == 1, "outside every mapping, still: still");
	proc_maps_free(&m);

	/* an address outside every mapping, then mapped */
	char *y = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(y != MAP_FAILED && munmap(y, 8192) == 0, "a free range");
	CHECK(proc_maps_read(self, &m, &err) == 0, "maps: %s", err.msg);
	uint64_t ya = (uint64_t)(uintptr_t)y + 8;
	CHECK(proc_maps_still(self, &m, &ya, 1) == 1, "unmapped, still unmapped: still");
	CHECK(mmap(y, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1,
		   0) == y,
	      "map it");
	CHECK(proc_maps_still(self, &m, &ya, 1) == 0, "mapped since: not still");
	proc_maps_free(&m);
	/* anonymous data changing shape (a heap or stack growing) names
	 * nothing either way; turned into code it must be read again */
	CHECK(proc_maps_read(self, &m, &err) == 0, "maps: %s", err.msg);
	CHECK(mprotect(y + 4096, 4096, PROT_READ) == 0, "split the anonymous mapping");
	CHECK(proc_maps_still(self, &m, &ya, 1) == 1, "anonymous data reshaped: still");
	CHECK(mprotect(y, 4096, PROT_READ | PROT_EXEC) == 0, "anonymous data made executable");
	CHECK(proc_maps_still(self, &m, &ya, 1) == 0, "anonymous code now: not still");
	proc_maps_free(&m);
	munmap(y, 8192);

	/* the symbolizer: a steady process keeps its maps, a replaced file is
	 * seen at once */
	struct symbolizer *s = NULL;
	CHECK(sym_new(&(struct sym_opts){ .maps_max_age_ms = 1 }, &s, &err) == 0, "sym_new");
	struct sym_batch b;
	sym_batch_init(&b);
	x = mmap(NULL, 8192, PROT_READ, MAP_PRIVATE, fa, 0);
	data = (uint64_t)(uintptr_t)x + 100;
	struct stat sa, sb;
	CHECK(fstat(fa, &sa) == 0 && fstat(fb, &sb) == 0, "fstat");
	uint64_t addrs[2] = { code, data };
	CHECK(sym_resolve_user(s, self, 0, addrs, 2, &b, &err) == 0, "resolve: %s", err.msg);
	CHECK(b.n == 2 && b.r[0].nframes > 0 && b.r[1].mapping >= 0, "resolved");
	CHECK(b.r[1].mapping >= 0 && b.mappings[b.r[1].mapping].inode == (uint64_t)sa.st_ino,
	      "file a named");
	usleep(5000);
	CHECK(sym_resolve_user(s, self, 0, addrs, 2, &b, &err) == 0, "resolve again");
	struct sym_stats st;
	sym_get_stats(s, &st);
	CHECK(st.maps_kept == 1 && st.maps_reads == 1, "steady: maps kept (read %llu kept %llu)",
	      (unsigned long long)st.maps_reads, (unsigned long long)st.maps_kept);
	CHECK(b.r[0].nframes > 0 && !strcmp(b.r[0].frames[0].func, "main"), "main named: %s",
	      b.r[0].nframes ? b.r[0].frames[0].func : "-");
	CHECK(mmap(x, 8192, PROT_READ, MAP_PRIVATE | MAP_FIXED, fb, 0) == x, "map b over a");
	usleep(5000);
	CHECK(sym_resolve_user(s, self, 0, addrs, 2, &b, &err) == 0, "resolve after replace");
	sym_get_stats(s, &st);
	CHECK(st.maps_reads == 2, "replaced: maps read again (%llu)",
	      (unsigned long long)st.maps_reads);
	CHECK(b.r[1].mapping >= 0 && b.mappings[b.r[1].mapping].inode == (uint64_t)sb.st_ino,
	      "file b named, not a");
	sym_batch_free(&b);
	sym_free(s);
	munmap(x, 8192);
	close(fa);
	close(fb);
	char p[300];
	snprintf(p, sizeof(p), "%s/a", dir);
	unlink(p);
	snprintf(p, sizeof(p), "%s/b", dir);
	unlink(p);
	rmdir(dir);
	return check_done();
}
