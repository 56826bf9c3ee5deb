/*
 * fileutil.h - reading small files: the ones the operator gives the agent
 * (tokens, certificates, profiles to push: bounded, regular files only,
 * errors that name the file) and the kernel's small files in /proc and
 * /sys (whose stat size is 0 or a page, so they are read to EOF into the
 * caller's buffer). Both share one read loop (EINTR retried, short reads
 * continued). Thread-safe: no shared state.
 */
#ifndef PUSHPROF_FILEUTIL_H
#define PUSHPROF_FILEUTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "err.h"

/*
 * The whole of path into *out (malloc'd, NUL-terminated; the caller frees,
 * with explicit_bzero first for secrets), its length into *len and its
 * stat into *st_out (both optional). Refuses what is not a regular file or
 * is larger than max bytes. `what` names the file in errors ("bearer token
 * file"). 0, or negative errno with err set.
 */
int pp_read_small_file(const char *path, size_t max, char **out, size_t *len, struct stat *st_out,
		       const char *what, struct pp_err *err);

/*
 * A kernel-made file (/proc/sys/kernel/perf_event_max_stack,
 * /sys/devices/system/cpu/online, /sys/kernel/notes) into buf: at most
 * size - 1 bytes, up to EOF, then a NUL (so text can be parsed in place;
 * binary content is fine, the length is returned). Bytes read, or
 * negative errno (-EINVAL when size is 0).
 */
ssize_t pp_read_kernel_file(const char *path, void *buf, size_t size);

/*
 * A kernel-made file of any length (/proc/PID/maps, status, environ) into
 * *out (malloc'd, NUL-terminated; the caller frees), its length into *len
 * (optional). Read to EOF, or cut at about max bytes. 0, or negative errno
 * (*out NULL).
 */
int pp_read_kernel_file_alloc(const char *path, size_t max, char **out, size_t *len);

/*
 * A directory only the agent may use (spool, local_store: profiles reveal
 * code and data layout): created with its parents when missing (parents
 * 0755, the directory 0700). An existing one must be a real directory (not
 * a symlink) owned by the agent's user; group/other permission bits are
 * removed (*repaired set, mode before into *old_mode when given). 0, or
 * negative errno with err naming `what` and the path.
 */
int pp_private_dir(const char *dir, const char *what, bool *repaired, unsigned *old_mode,
		   struct pp_err *err);

/*
 * A file's identity, to tell whether it changed since it was last read:
 * device and inode (a file renamed over it, a new executable), size and
 * modification time (rewritten in place). Pure functions.
 */
struct pp_file_id {
	uint64_t dev, ino;
	int64_t size, mtime_ns;
};

struct pp_file_id pp_file_id_of(const struct stat *st);
bool pp_file_id_same(const struct pp_file_id *a, const struct pp_file_id *b);

#endif
