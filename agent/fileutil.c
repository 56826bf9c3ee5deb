/*
 * fileutil.c - small file helpers shared by the modules that read secrets
 * and certificates (upload.c, http.c).
 */
#include "fileutil.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int pp_read_small_file(const char *path, size_t max, char **out, size_t *len,
		       struct stat *st_out, const char *what, struct pp_err *err)
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
	size_t n = 0;
	while (n < (size_t)st.st_size) {
		ssize_t r = read(fd, buf + n, (size_t)st.st_size - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		n += r;
	}
	close(fd);
	buf[n] = '\0';
	*out = buf;
	if (len)
		*len = n;
	if (st_out)
		*st_out = st;
	return 0;
}
