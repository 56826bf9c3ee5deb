/*
 * fileutil.h - reading small files the operator gives the agent (tokens,
 * certificates): bounded, regular files only, errors that name the file.
 */
#ifndef PUSHPROF_FILEUTIL_H
#define PUSHPROF_FILEUTIL_H

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

#endif
