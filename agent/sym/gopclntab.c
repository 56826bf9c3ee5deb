/*
 * gopclntab.c - decoder for Go's pclntab; layouts from the Go 1.19 sources
 * (runtime/symtab.go, debug/gosym/pclntab.go, cmd/link/internal/ld/pcln.go)
 * and the Go 1.20 changes (_func.startLine, the 16-byte inlinedCall).
 */
#include "gopclntab.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bytes.h"

/* Go funcdata/pcdata indices (runtime/symtab.go). */
#define PCDATA_INLTREEINDEX 2
#define FUNCDATA_INLTREE 3

struct gopcln {
	const uint8_t *tab;
	size_t tab_len;
	const uint8_t *gofunc;
	size_t gofunc_len;
	int layout;	  /* 116, 118, 120 */
	unsigned quantum; /* minLC */
	uint64_t nfunc;
	uint64_t text_start;
	/* Sub-tables as [off, off + len) inside tab. */
	size_t funcname_off, funcname_len;
	size_t cu_off, cu_len;
	size_t file_off, file_len;
	size_t pc_off, pc_len;
	size_t pcln_off, pcln_len; /* pclntable: functab then _func records */
	size_t ftab_entry;	   /* size of one functab entry (8 or 16) */
	/* _func field offsets for this layout. */
	size_t f_pcsp, f_flag; /* pcsp offset, funcFlag byte */
	size_t f_nameoff, f_pcfile, f_pcln, f_npcdata, f_cuoff, f_nfuncdata, f_size;
	size_t inl_size; /* inlinedCall size, 0 = no inline decoding */
};

static inline bool rd8(const uint8_t *b, size_t len, size_t off, uint8_t *v)
{
	if (off >= len)
		return false;
	*v = b[off];
	return true;
}

static inline bool rd32(const uint8_t *b, size_t len, size_t off, uint32_t *v)
{
	if (off > len || len - off < 4)
		return false;
	*v = (uint32_t)b[off] | (uint32_t)b[off + 1] << 8 | (uint32_t)b[off + 2] << 16 |
	     (uint32_t)b[off + 3] << 24;
	return true;
}

static inline bool rd64(const uint8_t *b, size_t len, size_t off, uint64_t *v)
{
	uint32_t lo, hi;
	if (!rd32(b, len, off, &lo) || !rd32(b, len, off + 4, &hi))
		return false;
	*v = (uint64_t)hi << 32 | lo;
	return true;
}

/* A NUL-terminated string at [base + off] inside a sub-table, or NULL. */
static const char *cstr_at(const struct gopcln *t, size_t base, size_t blen, uint64_t off)
{
	if (off >= blen)
		return NULL;
	const uint8_t *s = t->tab + base + off;
	if (!memchr(s, 0, blen - off))
		return NULL;
	return (const char *)s;
}

static bool inline_plausible(const struct gopcln *t);

int gopcln_new(const struct gopcln_src *src, struct gopcln **out, struct pp_err *err)
{
	*out = NULL;
	if (!src || !src->tab)
		return pp_errf(err, -EINVAL, "gopclntab: no table");
	const uint8_t *b = src->tab;
	size_t len = src->tab_len;
	uint32_t magic;
	uint8_t pad1, pad2, minlc, ptrsize;
	if (!rd32(b, len, 0, &magic) || !rd8(b, len, 4, &pad1) || !rd8(b, len, 5, &pad2) ||
	    !rd8(b, len, 6, &minlc) || !rd8(b, len, 7, &ptrsize))
		return pp_errf(err, -EINVAL, "gopclntab: truncated header (%zu bytes)", len);
	int layout;
	switch (magic) {
	case GOPCLN_MAGIC_116:
		layout = 116;
		break;
	case GOPCLN_MAGIC_118:
		layout = 118;
		break;
	case GOPCLN_MAGIC_120:
		layout = 120;
		break;
	default:
		return pp_errf(err, -EINVAL, "gopclntab: unsupported magic 0x%08x", magic);
	}
	if (pad1 || pad2 || ptrsize != 8 || (minlc != 1 && minlc != 2 && minlc != 4))
		return pp_errf(err, -EINVAL,
			       "gopclntab: unsupported header (ptrsize %u, minLC %u): only 64-bit "
			       "little-endian tables are handled",
			       ptrsize, minlc);

	/* Header words after the first 8 bytes. */
	uint64_t w[8];
	int nw = layout == 116 ? 7 : 8;
	for (int i = 0; i < nw; i++)
		if (!rd64(b, len, 8 + 8 * (size_t)i, &w[i]))
			return pp_errf(err, -EINVAL, "gopclntab: truncated header");
	struct gopcln *t = calloc(1, sizeof(*t));
	if (!t)
		return pp_errf(err, -ENOMEM, "gopclntab: out of memory");
	t->tab = b;
	t->tab_len = len;
	t->layout = layout;
	t->quantum = minlc;
	t->nfunc = w[0];
	/* w[1] = nfiles (unused: cutab bounds come from offsets) */
	uint64_t offs[5];
	if (layout == 116) {
		t->text_start = src->text_start;
		memcpy(offs, &w[2], sizeof(offs));
	} else {
		/* Go 1.26 writes 0 here (the runtime takes moduledata.text). */
		t->text_start = w[2] ? w[2] : src->text_start;
		memcpy(offs, &w[3], sizeof(offs));
	}
	/* funcname, cu, filetab, pctab, pclntable: each must lie inside the
	 * table and they appear in this order (cmd/link writes them so). */
	for (int i = 0; i < 5; i++) {
		uint64_t end = i < 4 ? offs[i + 1] : len;
		if (offs[i] > len || end > len || offs[i] > end) {
			free(t);
			return pp_errf(err, -EINVAL,
				       "gopclntab: sub-table %d at %llu outside %zu bytes", i,
				       (unsigned long long)offs[i], len);
		}
	}
	t->funcname_off = offs[0];
	t->funcname_len = offs[1] - offs[0];
	t->cu_off = offs[1];
	t->cu_len = offs[2] - offs[1];
	t->file_off = offs[2];
	t->file_len = offs[3] - offs[2];
	t->pc_off = offs[3];
	t->pc_len = offs[4] - offs[3];
	t->pcln_off = offs[4];
	t->pcln_len = len - offs[4];
	t->ftab_entry = layout == 116 ? 16 : 8;
	if (t->nfunc == 0 || t->nfunc > t->pcln_len / t->ftab_entry - 1 ||
	    t->pcln_len < t->ftab_entry) {
		free(t);
		return pp_errf(err, -EINVAL, "gopclntab: %llu functions do not fit in %zu bytes",
			       (unsigned long long)w[0], len);
	}
	switch (layout) {
	case 116:
		t->f_pcsp = 20;
		t->f_flag = 41;
		t->f_nameoff = 8;
		t->f_pcfile = 24;
		t->f_pcln = 28;
		t->f_npcdata = 32;
		t->f_cuoff = 36;
		t->f_nfuncdata = 43;
		t->f_size = 44;
		break;
	case 118:
		t->f_pcsp = 16;
		t->f_flag = 37;
		t->f_nameoff = 4;
		t->f_pcfile = 20;
		t->f_pcln = 24;
		t->f_npcdata = 28;
		t->f_cuoff = 32;
		t->f_nfuncdata = 39;
		t->f_size = 40;
		t->inl_size = 20; /* Go 1.18-1.19 inlinedCall */
		break;
	case 120:
		t->f_pcsp = 16;
		t->f_flag = 41;
		t->f_nameoff = 4;
		t->f_pcfile = 20;
		t->f_pcln = 24;
		t->f_npcdata = 28;
		t->f_cuoff = 32;
		t->f_nfuncdata = 43;
		t->f_size = 44;
		t->inl_size = 16; /* Go 1.20+ inlinedCall */
		break;
	}
	if (src->gofunc && src->gofunc_len) {
		t->gofunc = src->gofunc;
		t->gofunc_len = src->gofunc_len;
	} else {
		t->inl_size = 0;
	}
	if (t->inl_size && !inline_plausible(t))
		t->inl_size = 0;
	*out = t;
	return 0;
}

void gopcln_free(struct gopcln *t)
{
	free(t);
}

int gopcln_layout(const struct gopcln *t)
{
	return t->layout;
}
bool gopcln_has_inline(const struct gopcln *t)
{
	return t->inl_size != 0;
}
size_t gopcln_nfunc(const struct gopcln *t)
{
	return t->nfunc;
}

/* functab entry i: entry PC and _func offset (inside pclntable). */
static bool ftab(const struct gopcln *t, uint64_t i, uint64_t *entry, uint64_t *funcoff)
{
	const uint8_t *p = t->tab + t->pcln_off;
	size_t len = t->pcln_len;
	size_t o = (size_t)i * t->ftab_entry;
	if (t->layout == 116)
		return rd64(p, len, o, entry) && rd64(p, len, o + 8, funcoff);
	uint32_t e, f;
	if (!rd32(p, len, o, &e) || !rd32(p, len, o + 4, &f))
		return false;
	*entry = t->text_start + e;
	*funcoff = f;
	return true;
}

void gopcln_text_range(const struct gopcln *t, uint64_t *lo, uint64_t *hi)
{
	uint64_t f;
	if (!ftab(t, 0, lo, &f))
		*lo = 0;
	if (!ftab(t, t->nfunc, hi, &f))
		*hi = 0;
}

/* One _func record, validated to lie fully (incl. pcdata/funcdata arrays)
 * inside pclntable. */
struct fn {
	size_t off; /* of the record, relative to tab */
	uint64_t entry;
	uint32_t nameoff, pcfile, pcln, npcdata, cuoff;
	uint8_t nfuncdata;
};

static int fn_load(const struct gopcln *t, uint64_t i, struct fn *fn, uint64_t *end)
{
	uint64_t entry, foff, next, dummy;
	if (!ftab(t, i, &entry, &foff) || !ftab(t, i + 1, &next, &dummy))
		return -EINVAL;
	if (foff >= t->pcln_len || t->pcln_len - foff < t->f_size)
		return -EINVAL;
	const uint8_t *p = t->tab + t->pcln_off + foff;
	size_t len = t->pcln_len - foff;
	if (t->layout == 116) {
		uint64_t e;
		if (!rd64(p, len, 0, &e) || e != entry)
			return -EINVAL;
	} else {
		uint32_t e;
		if (!rd32(p, len, 0, &e) || t->text_start + e != entry)
			return -EINVAL;
	}
	fn->off = t->pcln_off + foff;
	fn->entry = entry;
	if (!rd32(p, len, t->f_nameoff, &fn->nameoff) || !rd32(p, len, t->f_pcfile, &fn->pcfile) ||
	    !rd32(p, len, t->f_pcln, &fn->pcln) || !rd32(p, len, t->f_npcdata, &fn->npcdata) ||
	    !rd32(p, len, t->f_cuoff, &fn->cuoff) || !rd8(p, len, t->f_nfuncdata, &fn->nfuncdata))
		return -EINVAL;
	/* pcdata (uint32 each) then funcdata (uint32 each from 1.18 on). */
	uint64_t need = t->f_size + 4ull * fn->npcdata;
	if (t->layout != 116)
		need += 4ull * fn->nfuncdata;
	if (need > len)
		fn->npcdata = 0, fn->nfuncdata = 0; /* corrupt: use no tables */
	if (end)
		*end = next;
	return 0;
}

static const char *fn_name(const struct gopcln *t, uint32_t nameoff)
{
	return cstr_at(t, t->funcname_off, t->funcname_len, nameoff);
}

int gopcln_func_at(const struct gopcln *t, size_t i, struct gopcln_func *f)
{
	if (i >= t->nfunc)
		return -ERANGE;
	struct fn fn;
	uint64_t end;
	if (fn_load(t, i, &fn, &end) < 0)
		return -EINVAL;
	f->name = fn_name(t, fn.nameoff);
	f->entry = fn.entry;
	f->end = end;
	return 0;
}

long gopcln_find(const struct gopcln *t, uint64_t pc, struct gopcln_func *f)
{
	uint64_t lo_pc, hi_pc, dummy;
	if (!ftab(t, 0, &lo_pc, &dummy) || !ftab(t, t->nfunc, &hi_pc, &dummy))
		return -ENOENT;
	if (pc < lo_pc || pc >= hi_pc)
		return -ENOENT;
	/* Largest i with entry(i) <= pc. */
	uint64_t lo = 0, hi = t->nfunc;
	while (hi - lo > 1) {
		uint64_t mid = lo + (hi - lo) / 2, e;
		if (!ftab(t, mid, &e, &dummy))
			return -EINVAL;
		if (e <= pc)
			lo = mid;
		else
			hi = mid;
	}
	struct gopcln_func tmp;
	if (!f)
		f = &tmp;
	if (gopcln_func_at(t, lo, f) < 0)
		return -EINVAL;
	if (pc < f->entry || pc >= f->end)
		return -ENOENT; /* unsorted (corrupt) table */
	return (long)lo;
}

long gopcln_find_name(const struct gopcln *t, const char *name, struct gopcln_func *f)
{
	for (uint64_t i = 0; i < t->nfunc; i++) {
		struct gopcln_func tmp;
		if (gopcln_func_at(t, i, &tmp) == 0 && tmp.name && !strcmp(tmp.name, name)) {
			if (f)
				*f = tmp;
			return (long)i;
		}
	}
	return -ENOENT;
}

/* A pc-value table's varint: a uint32 (larger values are corrupt). */
static bool uvarint(const uint8_t *b, size_t len, size_t *pos, uint32_t *v)
{
	uint64_t x;
	if (!pp_uvarint(b, len, pos, &x) || x > UINT32_MAX)
		return false;
	*v = (uint32_t)x;
	return true;
}

/* Value of the pc-value table at off for targetpc, or -1 (runtime's
 * pcvalue without the cache). */
static int32_t pcvalue(const struct gopcln *t, const struct fn *fn, uint32_t off, uint64_t target)
{
	if (off == 0 || off >= t->pc_len)
		return -1;
	const uint8_t *b = t->tab + t->pc_off;
	size_t len = t->pc_len, pos = off;
	uint64_t pc = fn->entry;
	int32_t val = -1;
	bool first = true;
	for (;;) {
		uint32_t uv, pcd;
		if (pos >= len)
			return -1;
		if (b[pos] == 0 && !first)
			return -1; /* end of table without reaching target */
		if (!uvarint(b, len, &pos, &uv))
			return -1;
		/* wrapping add: hostile deltas must not be signed-overflow UB */
		val = (int32_t)((uint32_t)val + (-(uv & 1) ^ (uv >> 1)));
		if (!uvarint(b, len, &pos, &pcd))
			return -1;
		pc += (uint64_t)pcd * t->quantum;
		first = false;
		if (target < pc)
			return val;
	}
}

/* runtime/symtab.go funcFlag bits (Go 1.17+; the byte is padding, 0, in 1.16). */
#define FUNCFLAG_TOPFRAME 1
#define FUNCFLAG_SPWRITE 2

int gopcln_func_pcsp(const struct gopcln *t, size_t i, uint64_t *budget, struct gopcln_sprun *runs,
		     size_t max)
{
	if (i >= t->nfunc)
		return -ERANGE;
	struct fn fn;
	uint64_t end;
	uint32_t off;
	uint8_t flag = 0;
	if (fn_load(t, i, &fn, &end) < 0 || end <= fn.entry)
		return -EINVAL;
	if (!rd32(t->tab, t->tab_len, fn.off + t->f_pcsp, &off) ||
	    !rd8(t->tab, t->tab_len, fn.off + t->f_flag, &flag))
		return -EINVAL;
	if (flag & (FUNCFLAG_TOPFRAME | FUNCFLAG_SPWRITE))
		return 0;
	if (off == 0 || off >= t->pc_len)
		return 0;
	/* pcvalue's walk, keeping every run instead of finding one: up to the
	 * table's end (the code's end; the linker's alignment padding after
	 * it is in no table) or the function's end. */
	const uint8_t *b = t->tab + t->pc_off;
	size_t len = t->pc_len, pos = off, n = 0;
	uint64_t pc = fn.entry;
	int32_t val = -1;
	bool first = true;
	while (pc < end) {
		uint32_t uv, pcd;
		if (*budget == 0)
			return -E2BIG;
		(*budget)--;
		if (pos >= len)
			return -EINVAL;
		if (b[pos] == 0 && !first)
			break; /* end of table */
		if (!uvarint(b, len, &pos, &uv) || !uvarint(b, len, &pos, &pcd))
			return -EINVAL;
		val = (int32_t)((uint32_t)val + (-(uv & 1) ^ (uv >> 1)));
		first = false;
		if (pcd == 0)
			continue;
		uint64_t hi = pc + (uint64_t)pcd * t->quantum;
		if (hi > end || hi < pc)
			hi = end;
		if (n && runs[n - 1].sp == val && runs[n - 1].hi == pc) {
			runs[n - 1].hi = hi; /* the same value again: one run */
		} else {
			if (n == max)
				return -ENOSPC;
			runs[n++] = (struct gopcln_sprun){ .lo = pc, .hi = hi, .sp = val };
		}
		pc = hi;
	}
	return (int)n;
}

int gopcln_func_frameless(const struct gopcln *t, size_t i, uint64_t *budget)
{
	struct gopcln_sprun run[1];
	int n = gopcln_func_pcsp(t, i, budget, run, 1);
	if (n < 0)
		return n == -ENOSPC ? 0 : n; /* more than one run: SP moves */
	return n == 1 && run[0].sp == 0;
}

static int32_t pcdata(const struct gopcln *t, const struct fn *fn, uint32_t table, uint64_t pc)
{
	if (table >= fn->npcdata)
		return -1;
	uint32_t off;
	if (!rd32(t->tab, t->tab_len, fn->off + t->f_size + 4ull * table, &off))
		return -1;
	return pcvalue(t, fn, off, pc);
}

static const char *file_name(const struct gopcln *t, const struct fn *fn, int32_t fileno)
{
	if (fileno < 0)
		return NULL;
	/* cutab[cuOffset + fileno] is the file's offset in filetab. */
	uint64_t idx = (uint64_t)fn->cuoff + (uint32_t)fileno;
	uint32_t foff;
	if (idx > SIZE_MAX / 4 || !rd32(t->tab + t->cu_off, t->cu_len, idx * 4, &foff))
		return NULL;
	if (foff == UINT32_MAX)
		return NULL;
	return cstr_at(t, t->file_off, t->file_len, foff);
}

static void funcline(const struct gopcln *t, const struct fn *fn, uint64_t pc,
		     struct gopcln_frame *fr)
{
	int32_t fileno = pcvalue(t, fn, fn->pcfile, pc);
	int32_t line = pcvalue(t, fn, fn->pcln, pc);
	fr->file = file_name(t, fn, fileno);
	fr->line = line > 0 ? line : 0;
	if (!fr->file)
		fr->line = 0;
}

/* The inline tree entry ix: name offset and parentPc. */
static bool inl_entry(const struct gopcln *t, const struct fn *fn, int32_t ix, uint32_t *nameoff,
		      int32_t *parent_pc)
{
	if (ix < 0 || !t->inl_size || FUNCDATA_INLTREE >= fn->nfuncdata)
		return false;
	uint32_t tree;
	if (!rd32(t->tab, t->tab_len,
		  fn->off + t->f_size + 4ull * fn->npcdata + 4ull * FUNCDATA_INLTREE, &tree) ||
	    tree == UINT32_MAX)
		return false;
	uint64_t at = (uint64_t)tree + (uint64_t)(uint32_t)ix * t->inl_size;
	uint32_t no, ppc;
	if (at > t->gofunc_len)
		return false;
	if (t->inl_size == 20) { /* parent i16, funcID, _, file, line, func_, parentPc */
		if (!rd32(t->gofunc, t->gofunc_len, at + 12, &no) ||
		    !rd32(t->gofunc, t->gofunc_len, at + 16, &ppc))
			return false;
	} else { /* funcID, _[3], nameOff, parentPc, startLine */
		if (!rd32(t->gofunc, t->gofunc_len, at + 4, &no) ||
		    !rd32(t->gofunc, t->gofunc_len, at + 8, &ppc))
			return false;
	}
	*nameoff = no;
	*parent_pc = (int32_t)ppc;
	return true;
}

/*
 * gofunc comes from heuristics (moduledata scan, symbol, Go 1.26 layout):
 * before trusting it, decode the first inline-tree entry of a sample of
 * functions. Each must name a function (printable, NUL-terminated in
 * funcnametab) and have parentPc inside its function. A wrong base turns
 * into "no inlined frames", never into made-up ones.
 */
static bool inline_plausible(const struct gopcln *t)
{
	uint64_t step = t->nfunc / 512 + 1, checked = 0, bad = 0;
	for (uint64_t i = 0; i < t->nfunc; i += step) {
		struct fn fn;
		uint64_t end;
		uint32_t tree, nameoff;
		int32_t ppc;
		if (fn_load(t, i, &fn, &end) < 0 || FUNCDATA_INLTREE >= fn.nfuncdata)
			continue;
		if (!rd32(t->tab, t->tab_len,
			  fn.off + t->f_size + 4ull * fn.npcdata + 4ull * FUNCDATA_INLTREE,
			  &tree) ||
		    tree == UINT32_MAX)
			continue;
		checked++;
		const char *name = NULL;
		if (inl_entry(t, &fn, 0, &nameoff, &ppc))
			name = fn_name(t, nameoff);
		if (!name || name[0] < 0x21 || name[0] > 0x7e || ppc < 0 ||
		    (uint64_t)ppc >= end - fn.entry)
			bad++;
	}
	return checked == 0 || bad * 10 <= checked;
}

int gopcln_lookup(const struct gopcln *t, uint64_t pc, struct gopcln_frame *frames, int max)
{
	struct gopcln_func f;
	long i = gopcln_find(t, pc, &f);
	if (i < 0)
		return (int)i;
	if (max <= 0)
		return 0;
	struct fn fn;
	if (fn_load(t, (uint64_t)i, &fn, NULL) < 0)
		return -EINVAL;
	int n = 0;
	uint64_t tracepc = pc;
	/* Same walk as the runtime's traceback: the inline index at tracepc
	 * names the innermost inlined call; its parentPc is an instruction
	 * whose position is the call site, in the caller. The bound on the
	 * loop also stops cycles in a corrupt tree. */
	while (t->inl_size && n < max - 1) {
		int32_t ix = pcdata(t, &fn, PCDATA_INLTREEINDEX, tracepc);
		uint32_t nameoff;
		int32_t ppc;
		if (ix < 0 || !inl_entry(t, &fn, ix, &nameoff, &ppc))
			break;
		struct gopcln_frame *fr = &frames[n++];
		fr->func = fn_name(t, nameoff);
		fr->inlined = true;
		funcline(t, &fn, tracepc, fr);
		if (ppc < 0 || (uint64_t)ppc >= f.end - f.entry)
			break; /* corrupt: stop here, physical frame below */
		tracepc = f.entry + (uint64_t)ppc;
	}
	struct gopcln_frame *fr = &frames[n++];
	fr->func = f.name;
	fr->inlined = false;
	funcline(t, &fn, tracepc, fr);
	return n;
}
