/*
 * version.h - what this binary is and what it runs with: `pushprof version`
 * and the pushprof_build_info metric print the same facts.
 */
#ifndef PUSHPROF_VERSION_INFO_H
#define PUSHPROF_VERSION_INFO_H

#include <stdio.h>

/* Build-time facts; static strings, never NULL. commit is `git describe`
 * of the source tree ("unknown" outside git), build_date the UTC time the
 * build was configured (or SOURCE_DATE_EPOCH's, for reproducible builds). */
const char *version_string(void);
const char *version_commit(void);
const char *version_build_date(void);

/* The multi-line report of `pushprof version`: the first line is
 * "pushprof VERSION", the others "key: value" (commit, build date, the
 * libbpf / grpc / libyaml / zstd / protobuf-c versions linked at run time, the
 * kernel from uname). */
void version_print(FILE *out);

/* Register pushprof_build_info{version, commit, ...} = 1 (idempotent). */
void version_metric(void);

#endif
