/*
 * elfshare.c - the registry of loaded ELF symbols by file identity
 * (elfshare.h).
 */
#include "elfshare.h"

#include <pthread.h>
#include <stdint.h>

#include "metrics.h"

#define SHARE_BUCKETS 256

static pthread_mutex_t share_mu = PTHREAD_MUTEX_INITIALIZER;
static struct elfsym *share_tab[SHARE_BUCKETS]; /* chains through share_next */

static size_t bucket(const struct pp_file_id *id)
{
	uint64_t h = (id->dev * 0x9e3779b97f4a7c15ull) ^ (id->ino * 0xc2b2ae3d27d4eb4full);
	return (size_t)(h >> 32) & (SHARE_BUCKETS - 1);
}

/* Under share_mu: the published entry for id with a new reference, or NULL. */
static struct elfsym *find_locked(const struct pp_file_id *id)
{
	for (struct elfsym *e = share_tab[bucket(id)]; e; e = e->share_next)
		if (pp_file_id_same(&e->id, id)) {
			e->refs++;
			return e;
		}
	return NULL;
}

static void count_hit(void)
{
	metric_inc("pushprof_elf_symbols_shared_total",
		   "Loaded ELF symbols one module took from another instead of reading the file "
		   "again (elfshare.c).",
		   NULL, 1);
}

struct elfsym *elfshare_find(const struct pp_file_id *id)
{
	pthread_mutex_lock(&share_mu);
	struct elfsym *e = find_locked(id);
	pthread_mutex_unlock(&share_mu);
	if (e)
		count_hit();
	return e;
}

int elfshare_load(const struct elffile *f, const struct pp_file_id *id, struct elfsym **out,
		  struct pp_err *err)
{
	*out = elfshare_find(id);
	if (*out)
		return 0;
	/* outside the lock: a load takes tens of milliseconds for a large
	 * program, and other threads' lookups must not wait for it */
	struct elfsym *e;
	int rc = elfsym_new(&(struct elfsym_opts){ .file = f }, &e, err);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&share_mu);
	struct elfsym *other = find_locked(id);
	if (!other) {
		e->id = *id;
		e->shared = true;
		e->refs = 1;
		size_t b = bucket(id);
		e->share_next = share_tab[b];
		share_tab[b] = e;
	}
	pthread_mutex_unlock(&share_mu);
	if (other) {
		/* another thread published the same file meanwhile: one copy */
		elfsym_free(e);
		e = other;
	}
	*out = e;
	return 0;
}

bool elfshare_release(struct elfsym *e)
{
	pthread_mutex_lock(&share_mu);
	bool last = --e->refs == 0;
	if (last) {
		struct elfsym **pp = &share_tab[bucket(&e->id)];
		while (*pp && *pp != e)
			pp = &(*pp)->share_next;
		if (*pp)
			*pp = e->share_next;
	}
	pthread_mutex_unlock(&share_mu);
	return last;
}
