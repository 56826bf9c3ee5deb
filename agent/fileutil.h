/*
 * fileutil.h - reading small files the operator gives the agent (tokens,
 * certificates): bounded, regular files only, errors that name the file.
 */
#ifndef PUSHPROF_FILEUTIL_H
#define PUSHPROF_FILEUTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>

#include "err.h"

/*
 * The whole of path into *out (malloc'd, NUL-terminated; the caller frees,
 * with explicit_bzero first for secrets), its length into *len and its
 * stat into *st_out (both optional). Refuses what is not a regular file or
 * is larger than max bytes. `what` names the file in errors ("bearer token
 * file"). 0, or negative errno with err set.
 */
int pp_read_small_file(const char *path, size_t max, char **out, size_t *len,
		       struct stat *st_out, const char *what, struct pp_err *err);

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

#endif
