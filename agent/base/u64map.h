/*
 * u64map.h - an open-addressing map of nonzero uint64_t keys to uint32_t
 * values (a set when the values are ignored): the seen-sets of bucket
 * walks, PC -> index maps of the heap profile builder. Keys of 0 cannot be
 * stored (0 marks an empty slot). Not thread-safe.
 */
#ifndef PUSHPROF_U64MAP_H
#define PUSHPROF_U64MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct u64map {
	uint64_t *keys;
	uint32_t *vals;
	size_t cap, n; /* cap is a power of two */
};

/* Room for about `want` keys before the first growth. -ENOMEM. */
int u64map_init(struct u64map *m, size_t want);
/* Safe on a zeroed or freed map. */
void u64map_free(struct u64map *m);
/* Remove every key, keeping the room: puts of up to as many keys as it
 * held never allocate. */
void u64map_clear(struct u64map *m);
/* Insert or replace; key must not be 0. -ENOMEM. */
int u64map_put(struct u64map *m, uint64_t key, uint32_t val);

/* Inline: the heap profile builder looks up every frame of every stack. */
static inline uint64_t u64map_mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	x ^= x >> 33;
	return x;
}

/* Slot of key (existing or empty). */
static inline size_t u64map_slot(const struct u64map *m, uint64_t key)
{
	size_t i = u64map_mix(key) & (m->cap - 1);
	while (m->keys[i] && m->keys[i] != key)
		i = (i + 1) & (m->cap - 1);
	return i;
}

/* val may be NULL. */
static inline bool u64map_get(const struct u64map *m, uint64_t key, uint32_t *val)
{
	size_t i = u64map_slot(m, key);
	if (!m->keys[i])
		return false;
	if (val)
		*val = m->vals[i];
	return true;
}
#endif
