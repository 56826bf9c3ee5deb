/*
 * symbolize_kernel.c - kernel addresses: /proc/kallsyms (modules kept as
 * separate mappings, each with its build id from /sys) for
 * sym_resolve_kernel() (symbolize.h).
 */
#include <errno.h>
#include <malloc.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileutil.h"
#include "ppclock.h"
#include "grow.h"

#include "symbolize_internal.h"

/* ---- kernel ------------------------------------------------------------ */

/* A symbol while kallsyms is read: its name as word ids in the temporary
 * token vector. */
struct kraw {
	uint64_t addr;
	uint32_t tok;
	uint16_t ntok;
	int16_t mod; /* -1: vmlinux */
};

static int kraw_cmp(const void *a, const void *b)
{
	const struct kraw *x = a, *y = b;
	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* The distinct words of the names while kallsyms is read: an open hash
 * table of word ids (+ 1; 0 = free), the words themselves in one blob. */
struct kwords {
	uint32_t *tab;
	size_t tcap; /* a power of two */
	uint32_t *woff, *count;
	size_t n, wcap, ccap;
	char *blob;
	size_t nb, bcap;
};

static uint64_t word_hash(const char *p, size_t n)
{
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ (uint8_t)p[i]) * 1099511628211ull;
	return h;
}

static int kwords_grow(struct kwords *w)
{
	size_t nc = w->tcap ? w->tcap * 2 : 1 << 14;
	uint32_t *t = calloc(nc, sizeof(*t));
	if (!t)
		return -ENOMEM;
	for (size_t i = 0; i < w->tcap; i++) {
		uint32_t id = w->tab[i];
		if (!id)
			continue;
		const char *s = w->blob + w->woff[id - 1];
		size_t j = word_hash(s, strlen(s)) & (nc - 1);
		while (t[j])
			j = (j + 1) & (nc - 1);
		t[j] = id;
	}
	free(w->tab);
	w->tab = t;
	w->tcap = nc;
	return 0;
}

/* The id of word p[0..n), added if new; -ENOMEM. */
static int64_t kwords_id(struct kwords *w, const char *p, size_t n)
{
	if ((w->n + 1) * 2 > w->tcap && kwords_grow(w) < 0)
		return -ENOMEM;
	size_t j = word_hash(p, n) & (w->tcap - 1);
	for (uint32_t id; (id = w->tab[j]); j = (j + 1) & (w->tcap - 1)) {
		const char *s = w->blob + w->woff[id - 1];
		if (!strncmp(s, p, n) && !s[n]) {
			w->count[id - 1]++;
			return id - 1;
		}
	}
	if (w->nb + n + 1 > UINT32_MAX || pp_grow(&w->blob, &w->bcap, w->nb + n + 1, 1, 1 << 16) ||
	    pp_grow(&w->woff, &w->wcap, w->n + 1, sizeof(*w->woff), 1 << 12) ||
	    pp_grow(&w->count, &w->ccap, w->n + 1, sizeof(*w->count), 1 << 12))
		return -ENOMEM;
	memcpy(w->blob + w->nb, p, n);
	w->blob[w->nb + n] = '\0';
	w->woff[w->n] = (uint32_t)w->nb;
	w->count[w->n] = 1;
	w->nb += n + 1;
	w->tab[j] = (uint32_t)++w->n;
	return (int64_t)w->n - 1;
}

static void kwords_free(struct kwords *w)
{
	free(w->tab);
	free(w->woff);
	free(w->count);
	free(w->blob);
}

/* Split name into words (leading separators, a run of others, trailing
 * separators: "__x64_" "sys_" "read"), appending their ids to *tok. */
static int tokenize(struct kwords *w, const char *name, uint32_t **tok, size_t *ntok, size_t *tcap)
{
	for (const char *p = name; *p;) {
		const char *q = p;
		while (*q == '_' || *q == '.')
			q++;
		while (*q && *q != '_' && *q != '.')
			q++;
		while (*q == '_' || *q == '.')
			q++;
		int64_t id = kwords_id(w, p, (size_t)(q - p));
		if (id < 0 || pp_grow(tok, tcap, *ntok + 1, sizeof(**tok), 1 << 16))
			return -ENOMEM;
		(*tok)[(*ntok)++] = (uint32_t)id;
		p = q;
	}
	return 0;
}

static size_t leb_put(uint8_t *out, uint32_t v)
{
	size_t n = 0;
	do {
		uint8_t b = v & 0x7f;
		v >>= 7;
		if (out)
			out[n] = b | (v ? 0x80 : 0);
		n++;
	} while (v);
	return n;
}

static uint32_t leb_get(const uint8_t **p)
{
	uint32_t v = 0;
	for (unsigned sh = 0; sh < 35; sh += 7) {
		uint8_t b = *(*p)++;
		v |= (uint32_t)(b & 0x7f) << sh;
		if (!(b & 0x80))
			break;
	}
	return v;
}

static int rank_cmp(const void *a, const void *b)
{
	const uint64_t *x = a, *y = b; /* count << 32 | id, most frequent first */
	return *x < *y ? 1 : *x > *y ? -1 : 0;
}

/* Encode symbol k of v (or padding, k == SIZE_MAX) into out (NULL: only
 * count); the bytes written. */
static size_t encode_one(const struct kraw *v, size_t k, bool mod_follows, const uint32_t *tok,
			 const uint32_t *rank, uint8_t *out)
{
	if (k == SIZE_MAX)
		return leb_put(out, 0);
	size_t n = leb_put(out, (uint32_t)v[k].ntok << 1 | mod_follows);
	if (mod_follows)
		n += leb_put(out ? out + n : NULL, (uint32_t)(v[k].mod + 1));
	for (uint32_t t = 0; t < v[k].ntok; t++)
		n += leb_put(out ? out + n : NULL, rank[tok[v[k].tok + t]]);
	return n;
}

/* Lay out the sorted symbols v[0..nv) in blocks, twice: to size (t NULL),
 * then to fill t; returns the code bytes, *nent entries and *nblk blocks.
 *  A symbol whose offset from its block's first would not
 * fit 32 bits starts a new block; the rest of the one before is padded. */
static size_t ktab_layout(const struct kraw *v, size_t nv, const uint32_t *tok,
			  const uint32_t *rank, struct ktab *t, size_t *nent, size_t *nblk)
{
	size_t pos = 0, ncode = 0, blk = 0;
	uint64_t base = 0;
	int16_t mod = 0;
	for (size_t k = 0; k < nv;) {
		bool first = pos % KBLK == 0;
		bool pad = !first && v[k].addr - base > UINT32_MAX;
		if (first) {
			base = v[k].addr;
			if (t) {
				t->base[blk] = base;
				t->off[blk] = (uint32_t)ncode;
			}
			blk++;
		}
		bool mod_follows = first || (!pad && v[k].mod != mod);
		if (t)
			t->delta[pos] = pad ? t->delta[pos - 1] : (uint32_t)(v[k].addr - base);
		ncode += encode_one(v, pad ? SIZE_MAX : k, mod_follows, tok, rank,
				    t ? t->code + ncode : NULL);
		if (!pad)
			mod = v[k++].mod;
		pos++;
	}
	*nent = pos;
	*nblk = blk;
	return ncode;
}

/* The GNU build id of the kernel's note area (/sys/kernel/notes). */
static void read_kernel_build_id(const char *path, char *out, size_t outsz)
{
	char id[ELFFILE_BUILD_ID_HEX] = "";
	out[0] = '\0';
	uint8_t buf[4096 + 1]; /* + the NUL pp_read_kernel_file adds */
	ssize_t len = pp_read_kernel_file(path, buf, sizeof(buf));
	if (len > 0)
		elffile_parse_notes(buf, (size_t)len, id, NULL);
	snprintf(out, outsz, "%s", id);
}

/* Sort v, give words ids by frequency (the common ones take one byte) and
 * build the table; NULL when out of memory. */
static struct ktab *ktab_build(struct kraw *v, size_t nv, const uint32_t *tok,
			       const struct kwords *w, size_t *nent)
{
	qsort(v, nv, sizeof(*v), kraw_cmp);
	uint64_t *order = malloc((w->n ? w->n : 1) * sizeof(*order));
	uint32_t *rank = malloc((w->n ? w->n : 1) * sizeof(*rank));
	struct ktab *t = NULL;
	if (!order || !rank)
		goto out;
	for (size_t i = 0; i < w->n; i++)
		order[i] = (uint64_t)w->count[i] << 32 | i;
	qsort(order, w->n, sizeof(*order), rank_cmp);
	for (size_t i = 0; i < w->n; i++)
		rank[(uint32_t)order[i]] = (uint32_t)i;
	size_t nblk, ncode = ktab_layout(v, nv, tok, rank, NULL, nent, &nblk);
	if (ncode > UINT32_MAX)
		goto out;
	size_t sz = sizeof(*t) + nblk * sizeof(uint64_t) +
		    (*nent + nblk + w->n) * sizeof(uint32_t) + ncode + w->nb;
	t = malloc(sz);
	if (!t)
		goto out;
	char *p = (char *)(t + 1);
	t->base = (uint64_t *)p;
	p += nblk * sizeof(uint64_t);
	t->delta = (uint32_t *)p;
	p += *nent * sizeof(uint32_t);
	t->off = (uint32_t *)p;
	p += nblk * sizeof(uint32_t);
	t->woff = (uint32_t *)p;
	p += w->n * sizeof(uint32_t);
	t->code = (uint8_t *)p;
	p += ncode;
	/* words in rank order, so that a block's names touch few pages */
	char *words = p;
	size_t nb = 0;
	for (size_t r = 0; r < w->n; r++) {
		const char *s = w->blob + w->woff[(uint32_t)order[r]];
		size_t l = strlen(s) + 1;
		memcpy(words + nb, s, l);
		t->woff[r] = (uint32_t)nb;
		nb += l;
	}
	t->words = words;
	t->nwords = w->n;
	ktab_layout(v, nv, tok, rank, t, nent, &t->nblk);
out:
	free(order);
	free(rank);
	return t;
}

static int kallsyms_load(struct symbolizer *s, struct pp_err *err)
{
	FILE *fp = fopen(s->o.kallsyms_path, "re");
	if (!fp)
		return pp_errf(err, -errno, "kallsyms: open %s: %s", s->o.kallsyms_path,
			       strerror(errno));
	struct kraw *v = NULL;
	uint32_t *tok = NULL;
	struct kwords w = { 0 };
	struct kmod *mods = NULL;
	struct ktab *t = NULL;
	size_t nv = 0, cap = 0, ntok = 0, tcap = 0, nm = 0, mcap = 0, nent = 0;
	size_t nonzero = 0;
	char line[1024];
	int rc = 0;
	while (fgets(line, sizeof(line), fp)) {
		char *end;
		uint64_t addr = strtoull(line, &end, 16);
		if (end == line || *end != ' ' || !end[1] || end[2] != ' ')
			continue;
		char type = end[1];
		if (type != 't' && type != 'T' && type != 'w' && type != 'W')
			continue;
		if (addr)
			nonzero++;
		char *name = end + 3;
		char *modp = strchr(name, '\t');
		char *nlp = strchr(name, '\n');
		if (nlp)
			*nlp = '\0';
		int32_t mod = -1;
		if (modp) {
			*modp++ = '\0';
			if (*modp == '[') {
				modp++;
				char *c = strchr(modp, ']');
				if (c)
					*c = '\0';
			}
			if (nm && !strcmp(mods[nm - 1].name, modp)) {
				mod = (int32_t)nm - 1;
			} else {
				for (size_t i = 0; i < nm; i++)
					if (!strcmp(mods[i].name, modp)) {
						mod = (int32_t)i;
						break;
					}
			}
			if (mod < 0) {
				if (nm >= INT16_MAX) /* no kernel has that many */
					continue;
				if (pp_grow(&mods, &mcap, nm + 1, sizeof(*mods), 64)) {
					rc = -ENOMEM;
					break;
				}
				memset(&mods[nm], 0, sizeof(mods[nm]));
				snprintf(mods[nm].name, sizeof(mods[nm].name), "%s", modp);
				mods[nm].lo = UINT64_MAX;
				mod = (int32_t)nm++;
			}
		}
		if (!*name)
			continue;
		size_t t0 = ntok;
		if (pp_grow(&v, &cap, nv + 1, sizeof(*v), 1 << 16) ||
		    tokenize(&w, name, &tok, &ntok, &tcap) < 0) {
			rc = -ENOMEM;
			break;
		}
		if (ntok > UINT32_MAX) {
			rc = -E2BIG;
			break;
		}
		v[nv++] = (struct kraw){ .addr = addr,
					 .tok = (uint32_t)t0,
					 .ntok = (uint16_t)(ntok - t0),
					 .mod = (int16_t)mod };
		if (mod >= 0) {
			if (addr < mods[mod].lo)
				mods[mod].lo = addr;
			if (addr > mods[mod].hi)
				mods[mod].hi = addr;
		}
	}
	fclose(fp);
	if (rc == 0 && nv && !nonzero)
		rc = pp_errf(err, -EPERM,
			     "kallsyms: all addresses are 0 (kptr_restrict; run as root)");
	else if (rc == 0 && !nv)
		rc = pp_errf(err, -EINVAL, "kallsyms: no text symbols in %s", s->o.kallsyms_path);
	else if (rc < 0)
		pp_errf(err, rc, "kallsyms: out of memory");
	if (rc == 0 && !(t = ktab_build(v, nv, tok, &w, &nent)))
		rc = pp_errf(err, -ENOMEM, "kallsyms: out of memory");
	uint64_t *kidx = NULL;
	size_t per = KIDX_STEP / KBLK, nkidx = t ? (t->nblk + per - 1) / per : 0;
	if (rc == 0 && !(kidx = malloc(nkidx * sizeof(*kidx))))
		rc = pp_errf(err, -ENOMEM, "kallsyms: out of memory");
	if (rc < 0) {
		free(t);
		free(v);
		free(tok);
		kwords_free(&w);
		free(mods);
		return rc;
	}
	for (size_t i = 0; i < nkidx; i++)
		kidx[i] = t->base[i * per];
	memset(&s->kernel, 0, sizeof(s->kernel));
	snprintf(s->kernel.name, sizeof(s->kernel.name), "kernel.kallsyms");
	s->kernel.lo = UINT64_MAX;
	for (size_t i = 0; i < nv; i++)
		if (v[i].mod < 0) {
			if (v[i].addr < s->kernel.lo)
				s->kernel.lo = v[i].addr;
			if (v[i].addr > s->kernel.hi)
				s->kernel.hi = v[i].addr;
		}
	size_t kbytes = sizeof(*t) + t->nblk * (sizeof(uint64_t) + sizeof(uint32_t)) +
			nent * sizeof(uint32_t) + t->nwords * sizeof(uint32_t) +
			(size_t)(t->words - (const char *)t->code) + w.nb + mcap * sizeof(*mods) +
			nkidx * sizeof(*kidx);
	free(v);
	free(tok);
	kwords_free(&w);
	free(s->kidx);
	s->kidx = kidx;
	s->nkidx = nkidx;
	free(s->ksyms);
	free(s->knames);
	free(s->kmods);
	s->ksyms = t;
	s->nksyms = nent;
	s->knames = NULL;
	s->kmods = mods;
	s->nkmods = nm;
	s->kloaded = true;
	s->kloaded_ms = (pp_mono_ns() / 1000000);
	s->st.kernel_symbols = nent;
	s->kbytes = kbytes;
	/* the load's temporaries (~6 MiB: the raw table, the word hash) sit
	 * in the heap's middle: give their pages back */
	malloc_trim(0);
	return 0;
}

/* The entry of the symbol at or before addr (within KSYM_MAX_DIST), or
 * SIZE_MAX. kidx first, then a block's base: a lookup touches few pages
 * of a table that went cold since the last window. */
static size_t ksym_find(const struct symbolizer *s, uint64_t addr)
{
	const struct ktab *t = s->ksyms;
	if (!s->nksyms || addr < t->base[0])
		return SIZE_MAX;
	size_t lo = 0, hi = s->nkidx;
	while (hi - lo > 1) { /* kidx[lo] <= addr < kidx[lo + 1] */
		size_t mid = lo + (hi - lo) / 2;
		if (s->kidx[mid] <= addr)
			lo = mid;
		else
			hi = mid;
	}
	lo *= KIDX_STEP / KBLK;
	hi = lo + KIDX_STEP / KBLK < t->nblk ? lo + KIDX_STEP / KBLK : t->nblk;
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;
		if (t->base[mid] <= addr)
			lo = mid;
		else
			hi = mid;
	}
	uint64_t d = addr - t->base[lo];
	size_t blk = lo;
	lo = blk * KBLK;
	hi = lo + KBLK < s->nksyms ? lo + KBLK : s->nksyms;
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;
		if (t->delta[mid] <= d)
			lo = mid;
		else
			hi = mid;
	}
	if (d - t->delta[lo] >= KSYM_MAX_DIST)
		return SIZE_MAX;
	return lo;
}

/* The name (into buf) and module (-1: vmlinux) of entry i. */
static void ksym_name(const struct ktab *t, size_t i, char *buf, size_t bufsz, int32_t *mod)
{
	const uint8_t *p = t->code + t->off[i / KBLK];
	buf[0] = '\0';
	*mod = -1;
	for (size_t k = i / KBLK * KBLK; k <= i; k++) {
		uint32_t h = leb_get(&p);
		if (h & 1)
			*mod = (int32_t)leb_get(&p) - 1;
		uint32_t ntok = h >> 1;
		if (!ntok)
			continue; /* padding: the name before */
		size_t n = 0;
		for (uint32_t j = 0; j < ntok; j++) {
			uint32_t id = leb_get(&p);
			const char *wd = id < t->nwords ? t->words + t->woff[id] : "";
			size_t l = strlen(wd);
			if (n + l >= bufsz)
				l = bufsz - 1 - n;
			memcpy(buf + n, wd, l);
			n += l;
		}
		buf[n] = '\0';
	}
}

int sym_resolve_kernel(struct symbolizer *s, const uint64_t *addrs, size_t n, struct sym_batch *out,
		       struct pp_err *err)
{
	if (sym_batch_reset(out, n) < 0)
		return pp_errf(err, -ENOMEM, "symbolize: out of memory");
	struct batch_priv *bp = out->priv;
	if (!s->kloaded) {
		int rc = kallsyms_load(s, err);
		if (rc < 0)
			return rc;
	}
	bool reloaded = false;
	int rc = 0;
	/* mapping index per module; [0] = vmlinux */
	int32_t *midx = malloc((s->nkmods + 1) * sizeof(*midx));
	if (!midx)
		return pp_errf(err, -ENOMEM, "symbolize: out of memory");
	for (size_t i = 0; i <= s->nkmods; i++)
		midx[i] = -1;
	char name[1024]; /* kallsyms lines are read into 1024 bytes */
	for (size_t i = 0; i < n; i++) {
		struct sym_result *r = sym_result_begin(s, out, i, addrs[i]);
		size_t k = ksym_find(s, addrs[i]);
		if (k == SIZE_MAX && !reloaded &&
		    (pp_mono_ns() / 1000000) - s->kloaded_ms > 60000) {
			/* A module may have been loaded since: reload, start over. */
			reloaded = true;
			if (kallsyms_load(s, NULL) == 0) {
				free(midx);
				return sym_resolve_kernel(s, addrs, n, out, err);
			}
		}
		if (k == SIZE_MAX)
			continue;
		int32_t mod;
		ksym_name(s->ksyms, k, name, sizeof(name), &mod);
		if (mod >= (int32_t)s->nkmods)
			mod = -1;
		struct kmod *km = mod < 0 ? &s->kernel : &s->kmods[mod];
		size_t mi = mod < 0 ? 0 : (size_t)mod + 1;
		if (midx[mi] < 0) {
			if (!km->bid_read) {
				char p[160];
				if (mod < 0)
					snprintf(p, sizeof(p), "/sys/kernel/notes");
				else
					snprintf(p, sizeof(p),
						 "/sys/module/%s/notes/.note.gnu.build-id",
						 km->name);
				read_kernel_build_id(p, km->build_id, sizeof(km->build_id));
				km->bid_read = true;
			}
			char path[80];
			snprintf(path, sizeof(path), "[%s]", km->name);
			struct sym_mapping sm = {
				.path = sym_arena_str(bp, path),
				.start = km->lo,
				.limit = km->hi + 1,
				.build_id = sym_arena_str(bp, km->build_id),
				.build_id_kind =
					km->build_id[0] ? SYM_BUILD_ID_GNU : SYM_BUILD_ID_NONE,
				.go_build_id = "",
				.go_version = "",
				.error = "",
				.has_functions = true,
				.executable = true,
			};
			if (!sm.path || !sm.build_id ||
			    (midx[mi] = sym_batch_add_mapping(out, &sm)) < 0) {
				rc = pp_errf(err, -ENOMEM, "symbolize: out of memory");
				break;
			}
		}
		r->mapping = midx[mi];
		if (sym_one_frame(bp, r, name, SYM_SRC_KALLSYMS) < 0) {
			rc = pp_errf(err, -ENOMEM, "symbolize: out of memory");
			break;
		}
		s->st.resolved++;
	}
	free(midx);
	return rc;
}
