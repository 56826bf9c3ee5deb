/*
 * u64map.c - open addressing, linear probing, grown at half full.
 */
#include "u64map.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int u64map_init(struct u64map *m, size_t want)
{
	size_t cap = 64;
	while (cap < want * 2)
		cap <<= 1;
	m->keys = calloc(cap, sizeof(*m->keys));
	m->vals = calloc(cap, sizeof(*m->vals));
	m->cap = cap;
	m->n = 0;
	if (!m->keys || !m->vals) {
		free(m->keys);
		free(m->vals);
		m->keys = NULL;
		m->vals = NULL;
		return -ENOMEM;
	}
	return 0;
}

void u64map_free(struct u64map *m)
{
	free(m->keys);
	free(m->vals);
	m->keys = NULL;
	m->vals = NULL;
}

void u64map_clear(struct u64map *m)
{
	if (m->keys)
		memset(m->keys, 0, m->cap * sizeof(*m->keys));
	m->n = 0;
}

static int grow(struct u64map *m)
{
	struct u64map nm;
	if (u64map_init(&nm, m->cap))
		return -ENOMEM;
	for (size_t i = 0; i < m->cap; i++)
		if (m->keys[i]) {
			size_t j = u64map_slot(&nm, m->keys[i]);
			nm.keys[j] = m->keys[i];
			nm.vals[j] = m->vals[i];
			nm.n++;
		}
	u64map_free(m);
	*m = nm;
	return 0;
}

int u64map_put(struct u64map *m, uint64_t key, uint32_t val)
{
	if ((m->n + 1) * 2 > m->cap && grow(m))
		return -ENOMEM;
	size_t i = u64map_slot(m, key);
	if (!m->keys[i])
		m->n++;
	m->keys[i] = key;
	m->vals[i] = val;
	return 0;
}
