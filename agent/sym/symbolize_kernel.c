/*
 * symbolize_kernel.c - kernel addresses: /proc/kallsyms (modules kept as
 * separate mappings, each with its build id from /sys) for
 * sym_resolve_kernel() (symbolize.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileutil.h"
#include "ppclock.h"
#include "grow.h"

#include "symbolize_internal.h"

/* ---- kernel ------------------------------------------------------------ */

static int ksym_cmp(const void *a, const void *b)
{
	const struct ksym *x = a, *y = b;
	return x->addr < y->addr ? -1 : x->addr > y->addr;
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

static int kallsyms_load(struct symbolizer *s, struct pp_err *err)
{
	FILE *fp = fopen(s->o.kallsyms_path, "re");
	if (!fp)
		return pp_errf(err, -errno, "kallsyms: open %s: %s", s->o.kallsyms_path,
			       strerror(errno));
	struct ksym *v = NULL;
	char *names = NULL;
	struct kmod *mods = NULL;
	size_t nv = 0, cap = 0, nl = 0, ncap = 0, nm = 0, mcap = 0;
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
		size_t l = strlen(name) + 1;
		if (pp_grow(&names, &ncap, nl + l, 1, 1 << 20) ||
		    pp_grow(&v, &cap, nv + 1, sizeof(*v), 1 << 16)) {
			rc = -ENOMEM;
			break;
		}
		if (nl + l > UINT32_MAX) {
			rc = -E2BIG;
			break;
		}
		memcpy(names + nl, name, l);
		v[nv++] = (struct ksym){ .addr = addr, .name = (uint32_t)nl, .mod = mod };
		nl += l;
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
	if (rc < 0) {
		free(v);
		free(names);
		free(mods);
		return rc;
	}
	qsort(v, nv, sizeof(*v), ksym_cmp);
	/* Trim the growth slack: this table lives as long as the agent. */
	struct ksym *tv = realloc(v, nv * sizeof(*v));
	if (tv) {
		v = tv;
		cap = nv;
	}
	char *tn = realloc(names, nl);
	if (tn) {
		names = tn;
		ncap = nl;
	}
	uint64_t *kidx = malloc((nv / KIDX_STEP + 1) * sizeof(*kidx));
	if (!kidx) {
		free(v);
		free(names);
		free(mods);
		return pp_errf(err, -ENOMEM, "kallsyms: out of memory");
	}
	size_t nkidx = 0;
	for (size_t i = 0; i < nv; i += KIDX_STEP)
		kidx[nkidx++] = v[i].addr;
	free(s->kidx);
	s->kidx = kidx;
	s->nkidx = nkidx;
	free(s->ksyms);
	free(s->knames);
	free(s->kmods);
	s->ksyms = v;
	s->nksyms = nv;
	s->knames = names;
	s->kmods = mods;
	s->nkmods = nm;
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
	s->kloaded = true;
	s->kloaded_ms = (pp_mono_ns() / 1000000);
	s->st.kernel_symbols = nv;
	s->kbytes = cap * sizeof(*v) + ncap + mcap * sizeof(*mods) + nkidx * sizeof(*kidx);
	return 0;
}

static const struct ksym *ksym_find(const struct symbolizer *s, uint64_t addr)
{
	size_t lo = 0, hi = s->nkidx;
	if (!s->nksyms || addr < s->ksyms[0].addr)
		return NULL;
	while (hi - lo > 1) { /* the block: kidx[lo] <= addr < kidx[lo + 1] */
		size_t mid = lo + (hi - lo) / 2;
		if (s->kidx[mid] <= addr)
			lo = mid;
		else
			hi = mid;
	}
	lo *= KIDX_STEP;
	hi = lo + KIDX_STEP < s->nksyms ? lo + KIDX_STEP : s->nksyms;
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;
		if (s->ksyms[mid].addr <= addr)
			lo = mid;
		else
			hi = mid;
	}
	if (addr - s->ksyms[lo].addr >= KSYM_MAX_DIST)
		return NULL;
	return &s->ksyms[lo];
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
	for (size_t i = 0; i < n; i++) {
		struct sym_result *r = sym_result_begin(s, out, i, addrs[i]);
		const struct ksym *k = ksym_find(s, addrs[i]);
		if (!k && !reloaded && (pp_mono_ns() / 1000000) - s->kloaded_ms > 60000) {
			/* A module may have been loaded since: reload, start over. */
			reloaded = true;
			if (kallsyms_load(s, NULL) == 0) {
				free(midx);
				return sym_resolve_kernel(s, addrs, n, out, err);
			}
		}
		if (!k)
			continue;
		struct kmod *km = k->mod < 0 ? &s->kernel : &s->kmods[k->mod];
		size_t mi = k->mod < 0 ? 0 : (size_t)k->mod + 1;
		if (midx[mi] < 0) {
			if (!km->bid_read) {
				char p[160];
				if (k->mod < 0)
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
		if (sym_one_frame(bp, r, s->knames + k->name, SYM_SRC_KALLSYMS) < 0) {
			rc = pp_errf(err, -ENOMEM, "symbolize: out of memory");
			break;
		}
		s->st.resolved++;
	}
	free(midx);
	return rc;
}
