/*
 * cpu_drain.c - a window out of the sampler (see cpu.h): the counts map of
 * the set BPF just left, drained; the stacks its counts name, from the
 * persistent stack maps or the copies kept of them; eviction of stacks no
 * window names any more ("Stack copies", bpf/cpu_abi.h).
 */
#include "cpu.h"
#include "cpu_internal.h"
#include "grow.h"
#include "u64map.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "bpf/cpu.skel.h"

/* ---- window ---- */

static uint64_t id_slot(uint64_t id, size_t cap)
{
	id ^= id >> 29;
	id *= 0xbf58476d1ce4e5b9ull;
	id ^= id >> 32;
	return id & (cap - 1);
}

static int stacks_grow(struct cpu_window *w)
{
	size_t ncap = w->stacks_cap ? w->stacks_cap * 2 : 1024;
	struct cpu_stack_entry *n = calloc(ncap, sizeof(*n));
	if (!n)
		return -ENOMEM;
	for (size_t i = 0; i < w->stacks_cap; i++) {
		if (!w->stacks[i].id)
			continue;
		size_t j = id_slot(w->stacks[i].id, ncap);
		while (n[j].id)
			j = (j + 1) & (ncap - 1);
		n[j] = w->stacks[i];
	}
	free(w->stacks);
	w->stacks = n;
	w->stacks_cap = ncap;
	return 0;
}

static int stacks_put(struct cpu_window *w, uint64_t id, uint32_t len, const __u64 *frames,
		      uint32_t depth)
{
	if (id < CPU_STACK_RESERVED)
		return 0;
	if ((w->nstacks + 1) * 2 > w->stacks_cap && stacks_grow(w) < 0)
		return -ENOMEM;
	size_t j = id_slot(id, w->stacks_cap);
	while (w->stacks[j].id && w->stacks[j].id != id)
		j = (j + 1) & (w->stacks_cap - 1);
	if (w->stacks[j].id)
		return 0; /* already there: a window holds each id once */
	if (len > depth)
		len = depth;
	uint64_t *ips = malloc((len ? len : 1) * sizeof(*ips));
	if (!ips)
		return -ENOMEM;
	memcpy(ips, frames, len * sizeof(*ips));
	w->stacks[j].id = id;
	w->stacks[j].len = len;
	w->stacks[j].ips = ips;
	w->nstacks++;
	return 0;
}

const uint64_t *cpu_window_stack(const struct cpu_window *w, uint64_t id, uint32_t *len)
{
	*len = 0;
	if (id < CPU_STACK_RESERVED || !w->stacks_cap)
		return NULL;
	size_t j = id_slot(id, w->stacks_cap);
	while (w->stacks[j].id) {
		if (w->stacks[j].id == id) {
			*len = w->stacks[j].len;
			return w->stacks[j].ips;
		}
		j = (j + 1) & (w->stacks_cap - 1);
	}
	return NULL;
}

static void window_reset(struct cpu_window *w)
{
	for (size_t i = 0; i < w->stacks_cap; i++)
		free(w->stacks[i].ips);
	free(w->stacks);
	free(w->recs);
	memset(w, 0, sizeof(*w));
}

void cpu_window_free(struct cpu_window *w)
{
	if (w)
		window_reset(w);
}

/*
 * Drain a hash map with lookup_and_delete_batch; cb gets each chunk.
 * Only called on the idle set, so nothing writes it meanwhile.
 */
static int drain_map(int fd, size_t ksz, size_t vsz,
		     int (*cb)(void *keys, void *vals, __u32 n, void *arg), void *arg,
		     struct pp_err *err)
{
	__u32 chunk = 256;
	void *keys = NULL, *vals = NULL;
	__u64 in = 0, outb = 0;
	bool first = true;
	int r = 0;

	for (;;) {
		if (!keys) {
			keys = malloc(chunk * ksz);
			vals = malloc(chunk * vsz);
			if (!keys || !vals) {
				r = pp_errf(err, -ENOMEM, "out of memory draining a map");
				break;
			}
		}
		__u32 n = chunk;
		DECLARE_LIBBPF_OPTS(bpf_map_batch_opts, opts);
		int e = bpf_map_lookup_and_delete_batch(fd, first ? NULL : &in, &outb, keys, vals,
							&n, &opts);
		e = e ? -errno : 0;
		if (e == -ENOSPC && n == 0) {
			/* A bucket holds more than chunk entries: grow and retry. */
			free(keys);
			free(vals);
			keys = vals = NULL;
			chunk *= 4;
			if (chunk > (1u << 20)) {
				r = pp_errf(err, -ENOSPC, "draining a map: bucket too large");
				break;
			}
			continue;
		}
		if (e < 0 && e != -ENOENT) {
			r = pp_errf(err, e, "draining a BPF map: %s", strerror(-e));
			break;
		}
		if (n) {
			r = cb(keys, vals, n, arg);
			if (r < 0) {
				pp_errf(err, r, "out of memory draining a map");
				break;
			}
		}
		if (e == -ENOENT)
			break;
		in = outb;
		first = false;
	}
	free(keys);
	free(vals);
	return r;
}

static int take_counts(void *keys, void *vals, __u32 n, void *arg)
{
	struct cpu_window *w = arg;
	const struct cpu_sample_key *k = keys;
	const __u64 *v = vals;
	struct cpu_record *nr = realloc(w->recs, (w->nrecs + n) * sizeof(*nr));
	if (!nr)
		return -ENOMEM;
	w->recs = nr;
	for (__u32 i = 0; i < n; i++) {
		w->recs[w->nrecs].key = k[i];
		w->recs[w->nrecs].key.comm[sizeof(k[i].comm) - 1] = '\0';
		w->recs[w->nrecs].count = v[i];
		w->samples += v[i];
		w->nrecs++;
	}
	return 0;
}

static int read_stats(struct cpu_sampler *s, uint64_t *tot)
{
	int fd = bpf_map__fd(s->skel->maps.stats);
	__u64 *vals = calloc((size_t)s->possible, sizeof(__u64));
	if (!vals)
		return -ENOMEM;
	for (__u32 i = 0; i < CPU_STAT_MAX; i++) {
		tot[i] = 0;
		if (bpf_map_lookup_elem(fd, &i, vals) == 0)
			for (int c = 0; c < s->possible; c++)
				tot[i] += vals[c];
	}
	free(vals);
	return 0;
}

/*
 * Stack copies. The BPF stack maps persist across windows (bpf/cpu_abi.h),
 * so user space keeps a copy of every stack it has read, by id, and each
 * drain reads from BPF only the ids its counts name that it has no copy
 * of. An id is a content hash (with a probe slot), not a name within one
 * window: the same id names the same frames in every window, whichever
 * process ran them then (symbolization uses the process as it is at
 * window time, as it did when every window stored its stacks anew). A
 * different stack could take an id freed by a delete only if its 64-bit
 * hash or a probe slot of it equalled the id: the odds the fast path
 * (bpf/cpu_abi.h) already takes.
 *
 * A stack no count has named for a while (evict()) is deleted from its
 * map, and its copy kept for one more drain: a program run of the window
 * after may have found the stack just before the delete and counted under
 * its id (the lookup happened before the delete; the count lands in the
 * counts map of that window, drained next). That count resolves from the
 * kept copy, so the race never loses a sample's stack. Runs that read
 * `active` after the next flip started after the delete, so they either
 * stored the stack again (the map has it) or count under another id: a
 * copy older than one drain past its delete is never needed and is freed.
 * A count whose id is in neither the map nor the copies is counted as
 * lost (w->lost_evicted, the key's id becomes CPU_STACK_EVICTED), never
 * dropped or resolved to other frames. Memory: every copy not deleted is
 * of a stack stored in a map (only user space deletes), the deleted ones
 * were stored one drain ago: at most twice the maps' entries.
 */

/* Read stack id from its map into st: 0, -ENOENT when not stored, or a
 * negative errno. */
static int read_stack(const struct cpu_sampler *s, uint64_t id, struct cpu_stack *st)
{
	if (id & CPU_STACK_LARGE) {
		if (bpf_map_lookup_elem(s->stacks_fd, &id, st))
			return -errno;
		if (st->len > CPU_MAX_DEPTH)
			st->len = CPU_MAX_DEPTH;
		return 0;
	}
	struct cpu_stack_small sm;
	if (bpf_map_lookup_elem(s->sstacks_fd, &id, &sm))
		return -errno;
	st->len = sm.len > CPU_SMALL_DEPTH ? CPU_SMALL_DEPTH : sm.len;
	memcpy(st->ips, sm.ips, st->len * sizeof(st->ips[0]));
	return 0;
}

static __u64 *dup_ips(const __u64 *ips, uint32_t len)
{
	__u64 *p = malloc((len ? len : 1) * sizeof(*p));
	if (p)
		memcpy(p, ips, len * sizeof(*p));
	return p;
}

/* A new copy of id (stored in its map); -ENOMEM. */
static int copy_add(struct cpu_sampler *s, uint64_t id, const struct cpu_stack *st)
{
	if (s->ncopies == s->copies_cap) {
		size_t nc = s->copies_cap ? s->copies_cap * 2 : 1024;
		struct stack_copy *n = realloc(s->copies, nc * sizeof(*n));
		if (!n)
			return -ENOMEM;
		s->copies = n;
		s->copies_cap = nc;
	}
	__u64 *ips = dup_ips(st->ips, st->len);
	if (!ips || u64map_put(&s->idx, id, (uint32_t)s->ncopies) < 0) {
		free(ips);
		return -ENOMEM;
	}
	s->copies[s->ncopies++] =
		(struct stack_copy){ .id = id, .used = s->drains, .len = st->len, .ips = ips };
	s->stored[!!(id & CPU_STACK_LARGE)]++;
	return 0;
}

/* The frames of stack *id, which `n` samples of w name, into w: from the
 * copy, or read from BPF when there is none or the copy's stack was
 * deleted (BPF may have stored it again). Not found anywhere: lost. */
static int resolve(struct cpu_sampler *s, struct cpu_window *w, __u64 *id, uint64_t n,
		   struct cpu_stack *buf)
{
	uint32_t len, at = 0;
	if (*id < CPU_STACK_RESERVED || cpu_window_stack(w, *id, &len))
		return 0;
	bool have = u64map_get(&s->idx, *id, &at);
	if (!have || s->copies[at].deleted) {
		int r = read_stack(s, *id, buf);
		if (r < 0 && r != -ENOENT)
			return r;
		if (r == 0) {
			w->stacks_read++;
			if (!have) {
				if (copy_add(s, *id, buf) < 0)
					return -ENOMEM;
				have = u64map_get(&s->idx, *id, &at);
			} else {
				/* stored again: the same content (same hash),
				 * take the map's as the truth */
				__u64 *ips = dup_ips(buf->ips, buf->len);
				if (!ips)
					return -ENOMEM;
				free(s->copies[at].ips);
				s->copies[at].ips = ips;
				s->copies[at].len = buf->len;
				s->copies[at].deleted = 0;
				s->stored[!!(*id & CPU_STACK_LARGE)]++;
			}
		} else if (!have) {
			w->lost_evicted += n;
			*id = CPU_STACK_EVICTED;
			return 0;
		} else {
			w->stacks_from_copy++; /* the race above, resolved */
		}
	}
	struct stack_copy *c = &s->copies[at];
	c->used = s->drains;
	return stacks_put(w, c->id, c->len, c->ips, CPU_MAX_DEPTH);
}

/* Copies of stacks stored in a map but never read (a stack stored by a run
 * whose count was then lost to a full counts map): read them, so that
 * they age and get deleted like any other. Iterating may skip or repeat
 * keys stored meanwhile; the next sweep finds those. */
static int adopt_unread(struct cpu_sampler *s, int fd, struct cpu_stack *buf)
{
	uint64_t key, next;
	uint32_t at;
	int r = bpf_map_get_next_key(fd, NULL, &next);
	while (r == 0) {
		key = next;
		if (!u64map_get(&s->idx, key, &at)) {
			int e = read_stack(s, key, buf);
			if (e == 0 && copy_add(s, key, buf) < 0)
				return -ENOMEM;
			if (e < 0 && e != -ENOENT)
				return e;
		}
		r = bpf_map_get_next_key(fd, &key, &next);
	}
	return errno == ENOENT ? 0 : -errno;
}

/*
 * Forget copies kept one drain past their delete; delete stacks (keeping
 * their copies) that no count named for s->keep windows (STACK_KEEP_MAX
 * unless a test asks for fewer), and, in a map more than half full, the
 * ones named longest ago until it is half full, never one the window just
 * drained named. Half a map is room for
 * the stacks of the next window (the maps hold four windows of samples).
 * A stored stack costs nothing more in BPF (the maps are preallocated),
 * and every one kept spares an insert when it is sampled again. Then the
 * index is rebuilt.
 */
static int evict(struct cpu_sampler *s, struct cpu_window *w)
{
	/* copies by drains since a count named them (the last: that long or longer) */
	size_t hist[2][STACK_KEEP_MAX + 1] = { { 0 } }, over[2];
	/* a copy named more than cut drains ago is deleted, and quota of
	 * those named exactly cut drains ago, so that the map gets to half */
	uint64_t cut[2];
	size_t quota[2] = { 0, 0 };

	for (size_t i = 0; i < s->ncopies; i++) {
		const struct stack_copy *c = &s->copies[i];
		uint64_t age = s->drains - c->used;
		if (!c->deleted)
			hist[!!(c->id & CPU_STACK_LARGE)][age < s->keep ? age : s->keep]++;
	}
	for (int m = 0; m < 2; m++) {
		size_t half = s->nstacks / 2;
		over[m] = s->stored[m] > half ? s->stored[m] - half : 0;
		over[m] -= hist[m][s->keep] < over[m] ? hist[m][s->keep] : over[m];
		cut[m] = s->keep;
		for (uint64_t a = s->keep - 1; a >= 1 && over[m]; a--) {
			cut[m] = a;
			quota[m] = hist[m][a] < over[m] ? hist[m][a] : over[m];
			over[m] -= quota[m];
		}
	}
	size_t n = 0;
	int r = 0;
	for (size_t i = 0; i < s->ncopies; i++) {
		struct stack_copy *c = &s->copies[i];
		if (c->deleted) {
			free(c->ips);
			continue;
		}
		int m = !!(c->id & CPU_STACK_LARGE);
		uint64_t age = s->drains - c->used;
		/* after a failed delete the rest stay stored (the copies are
		 * compacted to the end all the same) */
		if (!r && (s->evict_all || age >= s->keep || age > cut[m] ||
			   (age == cut[m] && quota[m] && quota[m]--))) {
			if (bpf_map_delete_elem(m ? s->stacks_fd : s->sstacks_fd, &c->id) &&
			    errno != ENOENT) {
				r = -errno;
			} else {
				c->deleted = s->drains;
				s->stored[m]--;
				w->stacks_evicted++;
			}
		}
		s->copies[n++] = *c;
	}
	s->ncopies = n;
	/* the index: no more keys than before, so no allocation that could
	 * fail and leave it behind the copies; shrunk when far too large */
	if (s->idx.cap > 8 * n + 4096) {
		struct u64map small;
		if (u64map_init(&small, n) == 0) {
			u64map_free(&s->idx);
			s->idx = small;
		}
	}
	u64map_clear(&s->idx);
	for (size_t i = 0; i < n; i++)
		u64map_put(&s->idx, s->copies[i].id, (uint32_t)i);
	return r;
}

int cpu_sampler_drain(struct cpu_sampler *s, struct cpu_window *w, struct pp_err *err)
{
	window_reset(w);
	__u32 old = __atomic_load_n(&s->skel->bss->active, __ATOMIC_RELAXED) & 1;
	__atomic_store_n(&s->skel->bss->active, old ^ 1, __ATOMIC_SEQ_CST);
	/*
	 * Re-install the same inner map: the kernel then waits for an RCU grace
	 * period, after which no program run that read the old `active` is
	 * still going.
	 */
	int cfd = bpf_map__fd(s->skel->maps.counts_sets);
	int inner = s->counts_fd[old];
	if (bpf_map_update_elem(cfd, &old, &inner, BPF_ANY))
		return pp_errf(err, -errno, "syncing with the BPF program: %s", strerror(errno));

	uint64_t now[CPU_STAT_MAX];
	if (read_stats(s, now) < 0)
		return pp_errf(err, -ENOMEM, "out of memory");
	for (int i = 0; i < CPU_STAT_MAX; i++) {
		w->stats[i] = now[i] - s->last_stats[i];
		s->last_stats[i] = now[i];
	}

	int r = drain_map(s->counts_fd[old], sizeof(struct cpu_sample_key), sizeof(__u64),
			  take_counts, w, err);
	if (r < 0)
		return r;
	struct cpu_stack *buf = malloc(sizeof(*buf));
	if (!buf)
		return pp_errf(err, -ENOMEM, "out of memory");
	s->drains++;
	for (size_t i = 0; i < w->nrecs && r >= 0; i++) {
		struct cpu_record *rec = &w->recs[i];
		r = resolve(s, w, &rec->key.user_stack, rec->count, buf);
		if (r >= 0)
			r = resolve(s, w, &rec->key.kernel_stack, rec->count, buf);
	}
	/* what leaves stacks unread behind, and now and then in any case */
	if (r >= 0 && (w->stats[CPU_STAT_LOST_COUNTS_FULL] || w->stats[CPU_STAT_STACKS_FULL] ||
		       s->drains % 64 == 0)) {
		r = adopt_unread(s, s->sstacks_fd, buf);
		if (r >= 0)
			r = adopt_unread(s, s->stacks_fd, buf);
	}
	free(buf);
	if (r >= 0)
		r = evict(s, w);
	w->stacks_stored = s->stored[0] + s->stored[1];
	if (r < 0)
		return pp_errf(err, r, "reading the BPF stack maps: %s", strerror(-r));
	return 0;
}
