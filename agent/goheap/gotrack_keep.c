/*
 * gotrack_keep.c - analyses of Go executables kept after their last
 * process exited (gotrack_keep.h).
 */
#include "gotrack_keep.h"

#include <errno.h>
#include <stdio.h>
#include <sys/stat.h>

int exe_id_of(pid_t pid, struct exe_id *id)
{
	char path[64];
	struct stat st;

	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
	if (stat(path, &st))
		return -errno;
	id->dev = st.st_dev;
	id->ino = st.st_ino;
	id->size = st.st_size;
	id->mtime = st.st_mtim;
	return 0;
}

bool exe_id_same(const struct exe_id *a, const struct exe_id *b)
{
	return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
	       a->mtime.tv_sec == b->mtime.tv_sec && a->mtime.tv_nsec == b->mtime.tv_nsec;
}

void gotrack_keep_expire(struct gotrack_keep *k, uint64_t now)
{
	for (size_t i = 0; i < GOTRACK_KEEP; i++)
		if (k->slot[i].g && now - k->slot[i].at_ns >= GOTRACK_KEEP_NS) {
			gobin_free(k->slot[i].g);
			k->slot[i].g = NULL;
		}
}

const struct gobin *gotrack_keep_find(struct gotrack_keep *k, const struct exe_id *id, uint64_t now)
{
	gotrack_keep_expire(k, now);
	for (size_t i = 0; i < GOTRACK_KEEP; i++)
		if (k->slot[i].g && exe_id_same(&k->slot[i].id, id)) {
			k->slot[i].at_ns = now;
			return k->slot[i].g;
		}
	return NULL;
}

void gotrack_keep_put(struct gotrack_keep *k, const struct exe_id *id, struct gobin *g,
		      uint64_t now)
{
	size_t v = 0;

	for (size_t i = 0; i < GOTRACK_KEEP; i++)
		if (k->slot[i].g && exe_id_same(&k->slot[i].id, id)) {
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
