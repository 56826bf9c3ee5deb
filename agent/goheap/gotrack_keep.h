/*
 * gotrack_keep.h - executable identities and the analyses of Go
 * executables kept after their last tracked process exited (gotrack.c).
 *
 * A program started again and again (a cron job, a probe, a CLI a script
 * runs) is then analyzed once, not at every start. Bounded: the
 * GOTRACK_KEEP most recently used analyses, each freed GOTRACK_KEEP_NS
 * after its last use. Not thread-safe: gotrack's loop thread only.
 */
#ifndef PUSHPROF_GOTRACK_KEEP_H
#define PUSHPROF_GOTRACK_KEEP_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "fileutil.h"
#include "gobin.h"

/* Fills id from stat(/proc/PID/exe). 0, or -errno (gone, kernel thread). */
int exe_id_of(pid_t pid, struct pp_file_id *id);

#define GOTRACK_KEEP 4
#define GOTRACK_KEEP_NS 60000000000ull

struct gotrack_keep {
	struct {
		struct pp_file_id id;
		struct gobin *g; /* NULL: a free slot */
		uint64_t at_ns;	 /* last used (monotonic) */
	} slot[GOTRACK_KEEP];
};

/* The kept analysis of id (still owned by k; share it with gobin_share()),
 * marked used at now; NULL when none. Expires old ones first. */
const struct gobin *gotrack_keep_find(struct gotrack_keep *k, const struct pp_file_id *id,
				      uint64_t now);
/* Keep g (taken: freed now or later) as id's analysis, in a free slot or
 * in place of the least recently used. */
void gotrack_keep_put(struct gotrack_keep *k, const struct pp_file_id *id, struct gobin *g,
		      uint64_t now);
/* Free analyses unused for GOTRACK_KEEP_NS. */
void gotrack_keep_expire(struct gotrack_keep *k, uint64_t now);
/* Free all of them. */
void gotrack_keep_clear(struct gotrack_keep *k);

#endif
