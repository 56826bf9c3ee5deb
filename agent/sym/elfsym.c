/*
 * elfsym.c - symbols, segments and the Go tables of one ELF file, copied
 * out of an elffile (elffile.c opens, validates and reads the file).
 */
#include "elfsym.h"
#include "elfshare.h"
#include "grow.h"
#include "metrics.h"

#include <errno.h>
#include <elf.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

bool elfsym_off_to_vaddr(const struct elfsym *e, uint64_t off, uint64_t *vaddr)
{
	for (size_t i = 0; i < e->nloads; i++) {
		const struct elffile_load *l = &e->loads[i];
		if (off >= l->offset && off - l->offset < l->memsz) {
			*vaddr = l->vaddr + (off - l->offset);
			return true;
		}
	}
	return false;
}

/* A symbol while sorting: by address, then alias preference (rank), then
 * table order (name offsets grow with it). */
struct tsym {
	uint64_t addr, size;
	uint32_t name;
	uint8_t rank;
};

static int sym_addr_cmp(const void *a, const void *b)
{
	const struct elfsym_sym *x = a, *y = b;
	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static int tsym_cmp(const void *a, const void *b)
{
	const struct tsym *x = a, *y = b;
	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	return x->name < y->name ? -1 : x->name > y->name;
}

/* Function symbols of one table into e (sorted, deduplicated). Also notes
 * go.func.* for the inline tree. */
static int load_syms(struct elfsym *e, const struct elffile *f, const struct elffile_sec *sh,
		     uint64_t skip_lo, uint64_t skip_hi, uint64_t *gofunc)
{
	const uint8_t *raw, *strs;
	uint64_t strsz;
	long n = elffile_symtab(f, sh, &raw, &strs, &strsz);
	if (n < 0)
		return -EINVAL;
	size_t cap = 0, names_cap = 0;
	struct elfsym_sym *v = NULL;
	uint8_t *rank = NULL;
	char *names = NULL;
	size_t nv = 0, names_len = 0;
	int rc = 0;
	for (long i = 1; i < n; i++) {
		Elf64_Sym sym;
		memcpy(&sym, raw + (size_t)i * sizeof(sym), sizeof(sym));
		int type = ELF64_ST_TYPE(sym.st_info);
		const char *name = elffile_str(strs, strsz, sym.st_name);
		if (!name || !*name)
			continue;
		if (gofunc && !*gofunc &&
		    (!strcmp(name, "go.func.*") || !strcmp(name, "go:func.*")))
			*gofunc = sym.st_value;
		if ((type != STT_FUNC && type != STT_GNU_IFUNC) || sym.st_shndx == SHN_UNDEF ||
		    sym.st_value == 0)
			continue;
		if (sym.st_value >= skip_lo && sym.st_value < skip_hi)
			continue;
		if (nv == cap) {
			cap = cap ? 2 * cap : 256;
			void *nvp = realloc(v, cap * sizeof(*v));
			if (!nvp) {
				rc = -ENOMEM;
				goto out;
			}
			v = nvp;
			void *nrp = realloc(rank, cap);
			if (!nrp) {
				rc = -ENOMEM;
				goto out;
			}
			rank = nrp;
		}
		size_t l = strlen(name) + 1;
		if (names_len + l > UINT32_MAX) {
			rc = -E2BIG;
			goto out;
		}
		if (pp_grow(&names, &names_cap, names_len + l, 1, 4096)) {
			rc = -ENOMEM;
			goto out;
		}
		memcpy(names + names_len, name, l);
		v[nv].addr = sym.st_value;
		v[nv].size = sym.st_size;
		v[nv].name = (uint32_t)names_len;
		/* Which alias names an address: the vDSO's own names first
		 * (__vdso_clock_gettime over its weak alias clock_gettime, as
		 * perf names it; it then stays apart from libc's
		 * clock_gettime wrapper in a profile), then the fewest leading
		 * underscores (malloc over __libc_malloc, fgets over
		 * _IO_fgets), then global/weak over local; table order breaks
		 * ties. */
		unsigned us = 0;
		while (name[us] == '_' && us < 15)
			us++;
		rank[nv] =
			!strncmp(name, "__vdso_", 7)
				? 0
				: (uint8_t)(2 + us * 2 + (ELF64_ST_BIND(sym.st_info) == STB_LOCAL));
		names_len += l;
		nv++;
	}
	if (nv) {
		struct tsym *t = malloc(nv * sizeof(*t));
		if (!t) {
			rc = -ENOMEM;
			goto out;
		}
		for (size_t i = 0; i < nv; i++)
			t[i] = (struct tsym){ v[i].addr, v[i].size, v[i].name, rank[i] };
		qsort(t, nv, sizeof(*t), tsym_cmp);
		size_t w = 0;
		for (size_t i = 0; i < nv;) {
			size_t j = i;
			uint64_t size = 0;
			for (; j < nv && t[j].addr == t[i].addr; j++)
				if (t[j].size > size)
					size = t[j].size;
			/* t[i] is the best alias (tsym_cmp orders them) */
			v[w++] = (struct elfsym_sym){ t[i].addr, size, t[i].name };
			i = j;
		}
		free(t);
		nv = w;
		struct elfsym_sym *shr = realloc(v, nv * sizeof(*v));
		if (shr)
			v = shr;
	}
	e->syms = v;
	e->nsyms = nv;
	e->names = names;
	e->names_len = names_len;
	e->bytes += nv * sizeof(*v) + names_cap;
	v = NULL;
	names = NULL;
out:
	free(v);
	free(rank);
	free(names);
	return rc;
}

/*
 * moduledata.gofunc: find firstmoduledata in a writable section by its first
 * two words (pcHeader == pclntab address, funcnametab.ptr == pclntab +
 * funcnameOffset) and its `text` word (offset 176) == the pclntab's
 * textStart; then gofunc is the word after `rodata`, and both must lie in
 * one read-only section (.rodata; with the system linker, C rodata may come
 * first, so rodata need not be the section start). The offset follows the
 * pclntab layout: Go 1.18-1.19 304, Go 1.20+ 320 (covctrs and ecovctrs were
 * added before `end`); checked against Go 1.19 and 1.23.
 */
static uint64_t find_gofunc(const struct elffile *f, uint64_t pcln_addr, uint64_t funcname_off,
			    uint64_t text_start, unsigned md_off)
{
	for (size_t k = 0; k < f->nsecs; k++) {
		const struct elffile_sec *sh = &f->secs[k];
		if (sh->type != SHT_PROGBITS ||
		    (sh->flags & (SHF_ALLOC | SHF_WRITE)) != (SHF_ALLOC | SHF_WRITE) ||
		    sh->size > 64u << 20 || sh->size < 400)
			continue;
		uint8_t *b = elffile_dup(f, sh->offset, sh->size);
		if (!b)
			continue;
		uint64_t found = 0;
		for (uint64_t i = 0; i + 400 <= sh->size && !found; i += 8) {
			uint64_t w0, w1, text, ro, gf;
			memcpy(&w0, b + i, 8);
			if (w0 != pcln_addr)
				continue;
			memcpy(&w1, b + i + 8, 8);
			memcpy(&text, b + i + 176, 8);
			if (w1 != pcln_addr + funcname_off || text != text_start)
				continue;
			memcpy(&ro, b + i + md_off - 8, 8);
			memcpy(&gf, b + i + md_off, 8);
			const struct elffile_sec *rsh = elffile_section_holding(f, ro);
			const struct elffile_sec *gsh = elffile_section_holding(f, gf);
			if (gf >= ro && rsh && gsh && rsh->addr == gsh->addr &&
			    !(gsh->flags & SHF_EXECINSTR))
				found = gf;
		}
		free(b);
		if (found)
			return found;
	}
	return 0;
}

/*
 * Externally linked Go binaries (cgo with -buildmode=pie, or any build
 * linked by the system linker) have no .gopclntab section: the table sits
 * inside .data.rel.ro or .rodata. Find its header by magic and plausible
 * fields; gopcln_new() validates the rest. Only called for Go binaries.
 * Fills sh with a pseudo section from the header to its section's end.
 */
static bool find_pcln_by_magic(const struct elffile *f, struct elffile_sec *out)
{
	for (size_t k = 0; k < f->nsecs; k++) {
		const struct elffile_sec *sh = &f->secs[k];
		if (sh->type != SHT_PROGBITS || !(sh->flags & SHF_ALLOC) ||
		    (sh->flags & SHF_EXECINSTR) || sh->size < 128 || sh->size > 256u << 20)
			continue;
		uint8_t *b = elffile_dup(f, sh->offset, sh->size);
		if (!b)
			continue;
		bool found = false;
		for (uint64_t i = 0; i + 72 <= sh->size && !found; i += 8) {
			uint32_t magic;
			memcpy(&magic, b + i, 4);
			if ((magic != GOPCLN_MAGIC_118 && magic != GOPCLN_MAGIC_120) || b[i + 4] ||
			    b[i + 5] || (b[i + 6] != 1 && b[i + 6] != 2 && b[i + 6] != 4) ||
			    b[i + 7] != 8)
				continue;
			uint64_t w[8];
			memcpy(w, b + i + 8, sizeof(w));
			uint64_t rest = sh->size - i;
			bool ok = w[0] > 0 && w[0] < (1u << 24) && w[3] >= 72 && w[7] < rest;
			for (int j = 3; j < 7 && ok; j++)
				ok = w[j] <= w[j + 1];
			bool text_ok = false;
			for (size_t l = 0; l < f->nloads && ok; l++)
				if ((f->loads[l].flags & PF_X) && w[2] >= f->loads[l].vaddr &&
				    w[2] - f->loads[l].vaddr < f->loads[l].memsz)
					text_ok = true;
			if (ok && text_ok) {
				*out = *sh;
				out->addr += i;
				out->offset += i;
				out->size -= i;
				found = true;
			}
		}
		free(b);
		if (found)
			return true;
	}
	return false;
}

static void load_go(struct elfsym *e, const struct elffile *f, uint64_t sym_gofunc)
{
	struct elffile_sec sh;
	const struct elffile_sec *p = elffile_section_ending(f, ".gopclntab");
	bool have = p != NULL;
	if (have)
		sh = *p;
	else if (f->go_build_id[0] || f->go_version[0])
		have = find_pcln_by_magic(f, &sh);
	if (!have || sh.type != SHT_PROGBITS || sh.size < 64)
		return;
	uint8_t *tab = elffile_dup(f, sh.offset, sh.size);
	if (!tab)
		return;
	struct gopcln_src gs = { .tab = tab, .tab_len = sh.size };
	const struct elffile_sec *text = elffile_section(f, ".text");
	if (text)
		gs.text_start = text->addr;
	if (f->go_version[0] && !strncmp(f->go_version, "go1.", 4))
		gs.go_minor = atoi(f->go_version + 4); /* informational only */
	/* funcnameOffset: header word 3 (1.18+) or 2 (1.16). */
	uint32_t magic;
	memcpy(&magic, tab, 4);
	uint64_t fno;
	memcpy(&fno, tab + (magic == GOPCLN_MAGIC_116 ? 24 : 32), 8);
	uint64_t gofunc = 0, ts;
	memcpy(&ts, tab + 24, 8);
	const struct elffile_sec *msh = elffile_section(f, ".go.module");
	if (msh && magic != GOPCLN_MAGIC_116) {
		/*
		 * Go 1.26+ (untested here): moduledata has its own section,
		 * pcHeader.textStart is 0 (take moduledata.text, word 22), and
		 * the funcdata (go:func.*) follow the functab inside the pclntab.
		 */
		uint64_t mtext;
		if (ts == 0 && msh->type == SHT_PROGBITS && msh->size >= 184 &&
		    elffile_read(f, msh->offset + 176, 8, &mtext)) {
			for (size_t l = 0; l < f->nloads; l++)
				if ((f->loads[l].flags & PF_X) && mtext >= f->loads[l].vaddr &&
				    mtext - f->loads[l].vaddr < f->loads[l].memsz)
					gs.text_start = mtext;
		}
		uint64_t nfunc, pclnoff;
		memcpy(&nfunc, tab + 8, 8);
		memcpy(&pclnoff, tab + 64, 8);
		if (nfunc < sh.size / 8 && pclnoff < sh.size &&
		    (nfunc + 1) * 8 <= sh.size - pclnoff) {
			uint64_t off = pclnoff + (nfunc + 1) * 8;
			gs.gofunc = tab + off; /* inside the table: no copy */
			gs.gofunc_len = sh.size - off;
			e->gofunc_addr = sh.addr + off;
		}
	} else if (magic != GOPCLN_MAGIC_116) {
		gofunc = find_gofunc(f, sh.addr, fno, ts, magic == GOPCLN_MAGIC_120 ? 320 : 304);
		if (!gofunc)
			gofunc = sym_gofunc;
	}
	const struct elffile_sec *gsh = gofunc ? elffile_section_holding(f, gofunc) : NULL;
	if (gsh) {
		uint64_t n = gsh->size - (gofunc - gsh->addr);
		e->gofunc_buf = elffile_dup(f, gsh->offset + (gofunc - gsh->addr), n);
		if (e->gofunc_buf) {
			e->gofunc_len = n;
			e->gofunc_addr = gofunc;
			gs.gofunc = e->gofunc_buf;
			gs.gofunc_len = n;
			e->bytes += n;
		}
	}
	if (gopcln_new(&gs, &e->pcln, NULL) < 0) {
		free(tab);
		free(e->gofunc_buf);
		e->bytes -= e->gofunc_len;
		e->gofunc_buf = NULL;
		e->gofunc_len = 0;
		return;
	}
	e->pcln_buf = tab;
	e->pcln_len = sh.size;
	e->bytes += sh.size + 256;
}

static int load_file(const struct elffile *f, struct elfsym **out, struct pp_err *err)
{
	int rc = 0;
	struct elfsym *e = calloc(1, sizeof(*e));
	*out = NULL;
	if (!e)
		return pp_errf(err, -ENOMEM, "elf: out of memory");
	e->bytes = sizeof(*e);
	e->e_type = f->e_type;
	/* the labels: elffile's, so every module reports the same ones */
	memcpy(e->gnu_build_id, f->gnu_build_id, sizeof(e->gnu_build_id));
	memcpy(e->go_build_id, f->go_build_id, sizeof(e->go_build_id));
	memcpy(e->go_version, f->go_version, sizeof(e->go_version));
	memcpy(e->comment, f->comment, sizeof(e->comment));
	e->has_interp = f->has_interp;
	e->has_symtab = f->has_symtab;
	memcpy(e->loads, f->loads, sizeof(e->loads));
	e->nloads = f->nloads;

	/* Symbol tables: .symtab if it has functions, else .dynsym. */
	uint64_t sym_gofunc = 0;
	const struct elffile_sec *symtab = NULL, *dynsym = NULL;
	for (size_t i = 0; i < f->nsecs; i++) {
		if (f->secs[i].type == SHT_SYMTAB && !symtab)
			symtab = &f->secs[i];
		else if (f->secs[i].type == SHT_DYNSYM && !dynsym)
			dynsym = &f->secs[i];
	}
	/* Go first, so its text range can be skipped in the symbols. The
	 * symtab's go.func.* is only a fallback to moduledata; take it in a
	 * cheap pre-pass when a symtab exists. */
	load_go(e, f, 0);
	if (e->pcln && !gopcln_has_inline(e->pcln) && gopcln_layout(e->pcln) != 116 && symtab) {
		struct elfsym tmp = { 0 };
		if (load_syms(&tmp, f, symtab, 0, 0, &sym_gofunc) == 0 && sym_gofunc) {
			gopcln_free(e->pcln);
			free(e->pcln_buf);
			free(e->gofunc_buf);
			e->pcln = NULL;
			e->pcln_buf = e->gofunc_buf = NULL;
			e->pcln_len = e->gofunc_len = 0;
			e->gofunc_addr = 0;
			e->bytes = sizeof(*e);
			load_go(e, f, sym_gofunc);
		}
		free(tmp.syms);
		free(tmp.names);
	}
	uint64_t lo = 0, hi = 0;
	if (e->pcln)
		gopcln_text_range(e->pcln, &lo, &hi);
	if (symtab)
		rc = load_syms(e, f, symtab, lo, hi, NULL);
	if (rc == 0 && e->nsyms == 0 && dynsym) {
		free(e->syms);
		free(e->names);
		e->syms = NULL;
		e->names = NULL;
		rc = load_syms(e, f, dynsym, lo, hi, NULL);
		e->from_dynsym = true;
	}
	if (rc < 0) {
		elfsym_free(e);
		return pp_errf(err, rc, "elf: reading symbol table failed");
	}
	metric_inc("pushprof_elf_symbols_loaded_total",
		   "Symbol tables and Go pclntabs copied out of an ELF file (elfsym.c).", NULL, 1);
	*out = e;
	return 0;
}

void elfsym_free(struct elfsym *e)
{
	if (!e || (e->shared && !elfshare_release(e)))
		return;
	gopcln_free(e->pcln);
	free(e->pcln_buf);
	free(e->gofunc_buf);
	free(e->syms);
	free(e->names);
	free(e);
}

static int load_path(const char *path, struct elfsym **out, struct pp_err *err)
{
	struct elffile *f;
	*out = NULL;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return pp_errf(err, -errno, "elf: open %s: %s", path, strerror(errno));
	int rc = elffile_new(&(struct elffile_opts){ .from = ELFFILE_FROM_FD, .fd = fd }, &f, err);
	if (rc == 0) {
		rc = load_file(f, out, err);
		elffile_free(f);
	}
	close(fd);
	if (rc < 0)
		pp_err_wrap(err, "%s", path);
	return rc;
}

/*
 * Name the code of f's executable sections that no symbol covers, one
 * name per gap between symbols: "<prefix>+0x<gap start>". The vDSO exports
 * only its entry points; its static helpers (the pvclock reader of a KVM
 * guest, where most of clock_gettime's time goes) have no symbol, and a raw
 * address differs in every process (ASLR) while a gap's offset does not.
 */
static int name_gaps(struct elfsym *e, const struct elffile *f, const char *prefix)
{
	size_t n = e->nsyms, cap = n, extra = 0;
	struct elfsym_sym *v = NULL;

	for (size_t si = 0; si < f->nsecs; si++) {
		const struct elffile_sec *sec = &f->secs[si];
		if (sec->type != SHT_PROGBITS || !(sec->flags & SHF_EXECINSTR) || !sec->size ||
		    sec->addr + sec->size < sec->addr)
			continue;
		uint64_t at = sec->addr, end = sec->addr + sec->size;
		size_t i = 0;
		while (at < end && extra < 4096) {
			/* the first symbol ending after at */
			while (i < e->nsyms &&
			       e->syms[i].addr + (e->syms[i].size ? e->syms[i].size : 1) <= at)
				i++;
			uint64_t next =
				i < e->nsyms && e->syms[i].addr < end ? e->syms[i].addr : end;
			if (next > at) {
				char name[64];
				int l = snprintf(name, sizeof(name), "%s+0x%" PRIx64, prefix, at);
				if (l < 0 || (size_t)l >= sizeof(name) ||
				    e->names_len + (size_t)l + 1 > UINT32_MAX) {
					free(v);
					return -E2BIG;
				}
				/* names has no spare room recorded: grow from its length */
				size_t names_cap = e->names_len;
				if (pp_grow(&e->names, &names_cap, e->names_len + (size_t)l + 1, 1,
					    256) ||
				    pp_grow(&v, &cap, n + extra + 1, sizeof(*v), 16)) {
					free(v);
					return -ENOMEM;
				}
				if (!extra)
					memcpy(v, e->syms, n * sizeof(*v));
				memcpy(e->names + e->names_len, name, (size_t)l + 1);
				v[n + extra++] = (struct elfsym_sym){ at, next - at,
								      (uint32_t)e->names_len };
				e->names_len += (size_t)l + 1;
				e->bytes += (size_t)l + 1 + sizeof(*v);
			}
			if (i >= e->nsyms || e->syms[i].addr >= end)
				break;
			at = e->syms[i].addr + (e->syms[i].size ? e->syms[i].size : 1);
		}
	}
	if (!extra)
		return 0;
	qsort(v, n + extra, sizeof(*v), sym_addr_cmp);
	free(e->syms);
	e->syms = v;
	e->nsyms = n + extra;
	return 0;
}

static int load_mem(const void *buf, size_t len, const char *gap_prefix, struct elfsym **out,
		    struct pp_err *err)
{
	struct elffile *f;
	*out = NULL;
	int rc = elffile_new(&(struct elffile_opts){ .from = ELFFILE_FROM_MEM, .buf = buf, .len = len },
			     &f, err);
	if (rc < 0)
		return rc;
	rc = load_file(f, out, err);
	if (rc == 0 && gap_prefix) {
		rc = name_gaps(*out, f, gap_prefix);
		if (rc < 0) {
			elfsym_free(*out);
			*out = NULL;
			pp_errf(err, rc, "elf: naming code without symbols failed");
		}
	}
	elffile_free(f);
	return rc;
}

const char *elfsym_lookup(const struct elfsym *e, uint64_t vaddr, uint64_t *start)
{
	size_t lo = 0, hi = e->nsyms;
	if (!hi || vaddr < e->syms[0].addr)
		return NULL;
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;
		if (e->syms[mid].addr <= vaddr)
			lo = mid;
		else
			hi = mid;
	}
	const struct elfsym_sym *s = &e->syms[lo];
	if (s->size) {
		if (vaddr - s->addr >= s->size)
			return NULL;
	} else if (lo + 1 >= e->nsyms) {
		return NULL; /* unsized last symbol: no known end */
	}
	if (start)
		*start = s->addr;
	return e->names + s->name;
}

int elfsym_find_symbol_fd(int fd, const char *name, uint64_t *value, uint64_t *size,
			  struct pp_err *err)
{
	struct elffile *f;
	uint64_t sz = 0;
	int rc = elffile_new(&(struct elffile_opts){ .from = ELFFILE_FROM_FD, .fd = fd }, &f, err);
	if (rc < 0)
		return rc;
	if (elffile_find_symbols(f, &name, 1, value, &sz) == 1) {
		if (size)
			*size = sz;
		rc = 0;
	} else {
		rc = pp_errf(err, -ENOENT, "elf: symbol %s not found", name);
	}
	elffile_free(f);
	return rc;
}

int elfsym_new(const struct elfsym_opts *o, struct elfsym **out, struct pp_err *err)
{
	*out = NULL;
	if (o->file)
		return load_file(o->file, out, err);
	if (o->path)
		return load_path(o->path, out, err);
	if (o->buf)
		return load_mem(o->buf, o->len, o->gap_prefix, out, err);
	return pp_errf(err, -EINVAL, "elf: no source given");
}
