/*
 * gotrack_keep.c - analyses of Go executables kept after their last
 * process exited (gotrack_keep.h).
 */
#include "gotrack_keep.h"

#include <errno.h>
#include <stdio.h>
#include <sys/stat.h>

int exe_id_of(pid_t pid, struct pp_file_id *id)
{
	char path[64];
	struct stat st;

	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
	if (stat(path, &st))
		return -errno;
	*id = pp_file_id_of(&st);
	return 0;
}

void gotrack_keep_expire(struct gotrack_keep *k, uint64_t now)
{
	for (size_t i = 0; i < GOTRACK_KEEP; i++)
		if (k->slot[i].g && now - k->slot[i].at_ns >= GOTRACK_KEEP_NS) {
			gobin_free(k->slot[i].g);
			k->slot[i].g = NULL;
		}
}

const struct gobin *gotrack_keep_find(struct gotrack_keep *k, const struct pp_file_id *id,
				      uint64_t now)
{
	gotrack_keep_expire(k, now);
	for (size_t i = 0; i < GOTRACK_KEEP; i++)
		if (k->slot[i].g && pp_file_id_same(&k->slot[i].id, id)) {
			k->slot[i].at_ns = now;
			return k->slot[i].g;
		}
	return NULL;
}

void gotrack_keep_put(struct gotrack_keep *k, const struct pp_file_id *id, struct gobin *g,
		      uint64_t now)
{
	size_t v = 0;

	for (size_t i = 0; i < GOTRACK_KEEP; i++)
		if (k->slot[i].g && pp_file_id_same(&k->slot[i].id, id)) {
			/* kept already (g was shared from it) */
			k->slot[i].at_ns = now;
			gobin_free(g);
			return;
		}
	for (size_t i = 0; i < GOTRACK_KEEP; i++) {
		if (!k->slot[i].g) {
			v = i;
			break;
		}
		if (k->slot[i].at_ns < k->slot[v].at_ns)
			v = i;
	}
	gobin_free(k->slot[v].g);
	k->slot[v].id = *id;
	k->slot[v].g = g;
	k->slot[v].at_ns = now;
}

void gotrack_keep_clear(struct gotrack_keep *k)
{
	for (size_t i = 0; i < GOTRACK_KEEP; i++) {
		gobin_free(k->slot[i].g);
		k->slot[i].g = NULL;
	}
}
