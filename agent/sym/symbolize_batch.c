/*
 * symbolize_batch.c - the memory of the symbolizer's results (struct
 * sym_batch, symbolize.h): an arena for strings and frames copied out of
 * the caches, recycled from one call to the next.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "symbolize_internal.h"

void *sym_arena_alloc(struct batch_priv *p, size_t n)
{
	n = (n + sizeof(max_align_t) - 1) & ~(sizeof(max_align_t) - 1);
	struct chunk *c = p->chunks;
	if (!c || c->cap - c->used < n) {
		size_t cap = n > 65536 ? n : 65536;
		c = malloc(sizeof(*c) + cap);
		if (!c)
			return NULL;
		c->used = 0;
		c->cap = cap;
		c->next = p->chunks;
		p->chunks = c;
	}
	void *r = (char *)c->data + c->used;
	c->used += n;
	return r;
}

const char *sym_arena_str(struct batch_priv *p, const char *s)
{
	if (!s || !*s)
		return "";
	size_t l = strlen(s) + 1;
	char *d = sym_arena_alloc(p, l);
	if (!d)
		return NULL;
	memcpy(d, s, l);
	return d;
}

void sym_batch_init(struct sym_batch *b)
{
	memset(b, 0, sizeof(*b));
}

void sym_batch_free(struct sym_batch *b)
{
	struct batch_priv *p = b->priv;
	if (p) {
		for (struct chunk *c = p->chunks, *n; c; c = n) {
			n = c->next;
			free(c);
		}
		free(p);
	}
	free(b->r);
	free(b->mappings);
	memset(b, 0, sizeof(*b));
}

/* Empty the batch and size it for n results. */
int sym_batch_reset(struct sym_batch *b, size_t n)
{
	struct batch_priv *p = b->priv;
	if (!p) {
		p = calloc(1, sizeof(*p));
		if (!p)
			return -ENOMEM;
		b->priv = p;
	}
	/* Keep the newest chunk, drop the rest. */
	if (p->chunks) {
		for (struct chunk *c = p->chunks->next, *nx; c; c = nx) {
			nx = c->next;
			free(c);
		}
		p->chunks->next = NULL;
		p->chunks->used = 0;
	}
	if (n > p->rcap) {
		struct sym_result *r = realloc(b->r, n * sizeof(*r));
		if (!r)
			return -ENOMEM;
		b->r = r;
		p->rcap = n;
	}
	b->n = 0;
	b->nmappings = 0;
	return 0;
}

int sym_batch_add_mapping(struct sym_batch *b, const struct sym_mapping *m)
{
	struct batch_priv *p = b->priv;
	if (pp_grow(&b->mappings, &p->mcap, b->nmappings + 1, sizeof(*b->mappings), 16))
		return -ENOMEM;
	b->mappings[b->nmappings] = *m;
	return (int)b->nmappings++;
}

int sym_one_frame(struct batch_priv *bp, struct sym_result *r, const char *name,
		  enum sym_source src)
{
	struct sym_frame *f = sym_arena_alloc(bp, sizeof(*f));
	if (!f || !(f->func = sym_arena_str(bp, name)))
		return -ENOMEM;
	f->file = "";
	f->line = 0;
	f->inlined = false;
	r->frames = f;
	r->nframes = 1;
	r->source = src;
	return 0;
}

struct sym_result *sym_result_begin(struct symbolizer *s, struct sym_batch *out, size_t i,
				    uint64_t addr)
{
	struct sym_result *r = &out->r[i];

	memset(r, 0, sizeof(*r));
	r->addr = addr;
	r->mapping = -1;
	out->n = i + 1;
	s->st.lookups++;
	return r;
}
