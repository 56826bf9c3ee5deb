/*
 * fileutil.c - small file helpers: operator files (secrets, certificates,
 * profiles to push) and the kernel's one-value files in /proc and /sys.
 */
#include "fileutil.h"
#include "grow.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Up to want bytes from fd (fewer at EOF); -errno when a read fails. */
static ssize_t read_full(int fd, void *buf, size_t want)
{
	size_t n = 0;
	while (n < want) {
		ssize_t r = read(fd, (char *)buf + n, want - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			break;
		n += (size_t)r;
	}
	return (ssize_t)n;
}

int pp_read_small_file(const char *path, size_t max, char **out, size_t *len, struct stat *st_out,
		       const char *what, struct pp_err *err)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	*out = NULL;
	if (fd < 0)
		return pp_errf(err, -errno, "cannot open %s %s: %s", what, path, strerror(errno));
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		int e = errno ? errno : EINVAL;
		close(fd);
		return pp_errf(err, -e, "%s %s is not a regular file", what, path);
	}
	if ((uint64_t)st.st_size > max) {
		close(fd);
		return pp_errf(err, -EFBIG, "%s %s is larger than %zu bytes", what, path, max);
	}
	char *buf = malloc((size_t)st.st_size + 1);
	if (!buf) {
		close(fd);
		return pp_errf(err, -ENOMEM, "out of memory reading %s", path);
	}
	ssize_t n = read_full(fd, buf, (size_t)st.st_size);
	close(fd);
	if (n < 0) {
		free(buf);
		return pp_errf(err, (int)n, "reading %s %s: %s", what, path, strerror((int)-n));
	}
	buf[n] = '\0';
	*out = buf;
	if (len)
		*len = n;
	if (st_out)
		*st_out = st;
	return 0;
}

ssize_t pp_read_kernel_file(const char *path, void *buf, size_t size)
{
	if (size == 0)
		return -EINVAL;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = read_full(fd, buf, size - 1);
	close(fd);
	if (n >= 0)
		((char *)buf)[n] = '\0';
	return n;
}

int pp_read_kernel_file_alloc(const char *path, size_t max, char **out, size_t *len)
{
	char *buf = NULL;
	size_t cap = 0, n = 0;

	*out = NULL;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	for (;;) {
		if (cap - n < 2) {
			if (cap >= max)
				break;
			if (pp_grow(&buf, &cap, n + 2, 1, 4096)) {
				free(buf);
				close(fd);
				return -ENOMEM;
			}
		}
		size_t want = cap - n - 1;
		ssize_t r = read_full(fd, buf + n, want);
		if (r < 0) {
			free(buf);
			close(fd);
			return (int)r;
		}
		n += (size_t)r;
		if ((size_t)r < want)
			break; /* EOF */
	}
	close(fd);
	buf[n] = '\0';
	*out = buf;
	if (len)
		*len = n;
	return 0;
}

int pp_private_dir(const char *dir, const char *what, bool *repaired, unsigned *old_mode,
		   struct pp_err *err)
{
	char path[4096];
	struct stat st;

	if (repaired)
		*repaired = false;
	if (!dir || dir[0] != '/' || strlen(dir) >= sizeof(path))
		return pp_errf(err, -EINVAL, "%s: %s is not an absolute path", what,
			       dir ? dir : "");
	snprintf(path, sizeof(path), "%s", dir);
	for (char *p = path + 1; *p; p++) {
		if (*p == '/') {
			*p = '\0';
			mkdir(path, 0755);
			*p = '/';
		}
	}
	if (mkdir(path, 0700) && errno != EEXIST)
		return pp_errf(err, -errno, "%s: cannot create %s: %s", what, dir, strerror(errno));
	if (lstat(dir, &st))
		return pp_errf(err, -errno, "%s: %s: %s", what, dir, strerror(errno));
	if (S_ISLNK(st.st_mode))
		return pp_errf(err, -ELOOP,
			       "%s: %s is a symbolic link; refusing (point the config "
			       "at the real directory)",
			       what, dir);
	if (!S_ISDIR(st.st_mode))
		return pp_errf(err, -ENOTDIR, "%s: %s is not a directory", what, dir);
	if (st.st_uid != geteuid())
		return pp_errf(err, -EPERM,
			       "%s: %s is owned by uid %u, not by the agent (uid %u); "
			       "refusing: its owner could read the profiles or plant files",
			       what, dir, (unsigned)st.st_uid, (unsigned)geteuid());
	if (st.st_mode & 077) {
		if (old_mode)
			*old_mode = st.st_mode & 07777;
		if (chmod(dir, st.st_mode & 07700))
			return pp_errf(err, -errno,
				       "%s: %s is accessible to other users (mode %04o) "
				       "and cannot be repaired: %s",
				       what, dir, (unsigned)(st.st_mode & 07777), strerror(errno));
		if (repaired)
			*repaired = true;
	}
	if (access(dir, W_OK))
		return pp_errf(err, -errno, "%s: %s is not writable: %s", what, dir,
			       strerror(errno));
	return 0;
}

struct pp_file_id pp_file_id_of(const struct stat *st)
{
	return (struct pp_file_id){
		.dev = (uint64_t)st->st_dev,
		.ino = (uint64_t)st->st_ino,
		.size = (int64_t)st->st_size,
		.mtime_ns = (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec,
	};
}

bool pp_file_id_same(const struct pp_file_id *a, const struct pp_file_id *b)
{
	return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
	       a->mtime_ns == b->mtime_ns;
}
