/*
 * elfsym.c - load symbols, segments, build ids and Go tables from an ELF.
 *
 * libelf parses and validates the ELF, program and section headers; section
 * contents are read here with explicit range checks (pread for files, memcpy
 * for memory) so the parsed objects own plain heap buffers only.
 */
#include "elfsym.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct src {
	int fd;			/* -1 for memory */
	const uint8_t *mem;
	uint64_t size;
};

static bool src_read(const struct src *s, uint64_t off, uint64_t len, void *dst)
{
	if (off > s->size || len > s->size - off)
		return false;
	if (s->fd < 0) {
		memcpy(dst, s->mem + off, len);
		return true;
	}
	uint8_t *p = dst;
	while (len) {
		ssize_t r = pread(s->fd, p, len > (1u << 30) ? (1u << 30) : len, (off_t)off);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return false;
		p += r;
		off += (uint64_t)r;
		len -= (uint64_t)r;
	}
	return true;
}

/* malloc'd copy of [off, off+len) (len may be 0 -> 1-byte buffer). */
static uint8_t *src_dup(const struct src *s, uint64_t off, uint64_t len)
{
	/* Bounds first: a hostile size must not even cause the allocation. */
	if (len > ELFSYM_MAX_SECTION || off > s->size || len > s->size - off)
		return NULL;
	uint8_t *p = malloc(len ? len : 1);
	if (!p)
		return NULL;
	if (!src_read(s, off, len, p)) {
		free(p);
		return NULL;
	}
	return p;
}

static bool elf_init_done;

static Elf *src_elf(const struct src *s)
{
	if (!elf_init_done) {
		if (elf_version(EV_CURRENT) == EV_NONE)
			return NULL;
		elf_init_done = true;
	}
	if (s->fd >= 0)
		return elf_begin(s->fd, ELF_C_READ, NULL);
	return elf_memory((char *)s->mem, s->size);
}

/* Section by exact name (or with the given suffix when suffix is true). */
static Elf_Scn *find_scn(Elf *elf, size_t shstrndx, const char *name, bool suffix, GElf_Shdr *sh)
{
	Elf_Scn *scn = NULL;
	size_t nl = strlen(name);
	while ((scn = elf_nextscn(elf, scn))) {
		if (!gelf_getshdr(scn, sh))
			continue;
		const char *n = elf_strptr(elf, shstrndx, sh->sh_name);
		if (!n)
			continue;
		if (suffix) {
			size_t l = strlen(n);
			if (l >= nl && !strcmp(n + l - nl, name))
				return scn;
		} else if (!strcmp(n, name)) {
			return scn;
		}
	}
	return NULL;
}

static Elf_Scn *scn_holding(Elf *elf, uint64_t addr, GElf_Shdr *sh)
{
	Elf_Scn *scn = NULL;
	while ((scn = elf_nextscn(elf, scn))) {
		if (!gelf_getshdr(scn, sh))
			continue;
		if ((sh->sh_flags & SHF_ALLOC) && sh->sh_type == SHT_PROGBITS &&
		    addr >= sh->sh_addr && addr - sh->sh_addr < sh->sh_size)
			return scn;
	}
	return NULL;
}

static void hex(char *out, size_t outsz, const uint8_t *b, size_t n)
{
	static const char d[] = "0123456789abcdef";
	size_t i;
	for (i = 0; i < n && 2 * i + 2 < outsz; i++) {
		out[2 * i] = d[b[i] >> 4];
		out[2 * i + 1] = d[b[i] & 15];
	}
	out[2 * i] = '\0';
}

/* Walk one note area: GNU build id and Go build id. */
static void parse_notes(struct elfsym *e, const uint8_t *p, size_t len)
{
	size_t pos = 0;
	while (len - pos >= 12) {
		uint32_t namesz, descsz, type;
		memcpy(&namesz, p + pos, 4);
		memcpy(&descsz, p + pos + 4, 4);
		memcpy(&type, p + pos + 8, 4);
		pos += 12;
		size_t nsz = ((size_t)namesz + 3) & ~(size_t)3;
		size_t dsz = ((size_t)descsz + 3) & ~(size_t)3;
		if (namesz > len - pos || nsz > len - pos)
			return;
		const uint8_t *name = p + pos;
		pos += nsz;
		if (descsz > len - pos)
			return;
		const uint8_t *desc = p + pos;
		pos += dsz > len - pos ? len - pos : dsz;
		if (namesz == 4 && !memcmp(name, "GNU", 4) && type == NT_GNU_BUILD_ID &&
		    descsz > 0 && descsz <= 64 && !e->gnu_build_id[0])
			hex(e->gnu_build_id, sizeof(e->gnu_build_id), desc, descsz);
		else if (namesz == 4 && !memcmp(name, "Go\0\0", 4) && type == 4 && descsz > 0 &&
			 descsz < sizeof(e->go_build_id) && !e->go_build_id[0]) {
			size_t i;
			for (i = 0; i < descsz && desc[i] >= 0x20 && desc[i] < 0x7f; i++)
				e->go_build_id[i] = (char)desc[i];
			e->go_build_id[i] = '\0';
		}
	}
}

static void load_notes(struct elfsym *e, Elf *elf, const struct src *s)
{
	size_t n;
	if (elf_getphdrnum(elf, &n) == 0) {
		for (size_t i = 0; i < n && i < 256; i++) {
			GElf_Phdr ph;
			if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_NOTE || ph.p_filesz > 1 << 20)
				continue;
			uint8_t *b = src_dup(s, ph.p_offset, ph.p_filesz);
			if (b) {
				parse_notes(e, b, ph.p_filesz);
				free(b);
			}
		}
	}
	if (e->gnu_build_id[0] && (e->go_build_id[0] || !e->go_version[0]))
		return;
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	while ((scn = elf_nextscn(elf, scn))) {
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE || sh.sh_size > 1 << 20)
			continue;
		uint8_t *b = src_dup(s, sh.sh_offset, sh.sh_size);
		if (b) {
			parse_notes(e, b, sh.sh_size);
			free(b);
		}
	}
}

/* The first string of .comment, the toolchain's stamp; printable ASCII
 * only, at most sizeof(e->comment) - 1 bytes read. */
static void load_comment(struct elfsym *e, Elf *elf, size_t shstrndx, const struct src *s)
{
	GElf_Shdr sh;
	char b[sizeof(e->comment)];

	if (shstrndx == SHN_UNDEF || !find_scn(elf, shstrndx, ".comment", false, &sh) ||
	    sh.sh_type != SHT_PROGBITS || !sh.sh_size)
		return;
	uint64_t n = sh.sh_size < sizeof(b) - 1 ? sh.sh_size : sizeof(b) - 1;
	if (!src_read(s, sh.sh_offset, n, b))
		return;
	b[n] = '\0';
	size_t i = 0;
	while (b[i] >= 0x20 && b[i] < 0x7f)
		i++;
	if (i == n && sh.sh_size > n)
		return;		/* cut: not a whole string */
	b[i] = '\0';
	memcpy(e->comment, b, i + 1);
}

static bool vaddr_to_off(const struct elfsym *e, uint64_t va, uint64_t len, uint64_t *off)
{
	for (size_t i = 0; i < e->nloads; i++) {
		const struct elfsym_load *l = &e->loads[i];
		if (va >= l->vaddr && va - l->vaddr < l->filesz && len <= l->filesz - (va - l->vaddr)) {
			*off = l->offset + (va - l->vaddr);
			return true;
		}
	}
	return false;
}

bool elfsym_off_to_vaddr(const struct elfsym *e, uint64_t off, uint64_t *vaddr)
{
	for (size_t i = 0; i < e->nloads; i++) {
		const struct elfsym_load *l = &e->loads[i];
		if (off >= l->offset && off - l->offset < l->memsz) {
			*vaddr = l->vaddr + (off - l->offset);
			return true;
		}
	}
	return false;
}

static bool uvarint64(const uint8_t *b, size_t len, size_t *pos, uint64_t *v)
{
	uint64_t r = 0;
	for (unsigned shift = 0; shift < 64; shift += 7) {
		if (*pos >= len)
			return false;
		uint8_t c = b[(*pos)++];
		r |= (uint64_t)(c & 0x7f) << shift;
		if (!(c & 0x80)) {
			*v = r;
			return true;
		}
	}
	return false;
}

static void set_version(struct elfsym *e, const uint8_t *s, uint64_t n)
{
	if (n < 3 || n >= sizeof(e->go_version) || memcmp(s, "go", 2) != 0)
		return;
	for (uint64_t i = 0; i < n; i++)
		if (s[i] < 0x20 || s[i] >= 0x7f)
			return;
	memcpy(e->go_version, s, n);
	e->go_version[n] = '\0';
}

/* runtime.buildVersion from the "\xff Go buildinf:" blob (debug/buildinfo). */
static void load_buildinfo(struct elfsym *e, Elf *elf, size_t shstrndx, const struct src *s)
{
	static const uint8_t magic[14] = "\xff Go buildinf:";
	GElf_Shdr sh;
	uint64_t off = 0, len = 0;
	if (find_scn(elf, shstrndx, ".go.buildinfo", false, &sh) && sh.sh_type == SHT_PROGBITS) {
		off = sh.sh_offset;
		len = sh.sh_size;
	} else {
		for (size_t i = 0; i < e->nloads; i++)
			if (e->loads[i].flags & PF_W) {
				off = e->loads[i].offset;
				len = e->loads[i].filesz;
				break;
			}
	}
	if (len > 64 * 1024)
		len = 64 * 1024;
	if (len < 32)
		return;
	uint8_t *b = src_dup(s, off, len);
	if (!b)
		return;
	for (size_t i = 0; i + 32 <= len; i += 16) {
		if (memcmp(b + i, magic, sizeof(magic)) != 0)
			continue;
		uint8_t ptrsize = b[i + 14], flags = b[i + 15];
		if (flags & 2) {	/* Go 1.18+: inline varint-prefixed strings */
			size_t pos = i + 32;
			uint64_t n;
			if (uvarint64(b, len, &pos, &n) && n <= len - pos)
				set_version(e, b + pos, n);
		} else if (ptrsize == 8 && !(flags & 1)) {	/* pointer to a string header */
			uint64_t sp, hdr_off, str[2], soff;
			memcpy(&sp, b + i + 16, 8);
			uint8_t tmp[64];
			if (vaddr_to_off(e, sp, 16, &hdr_off) && src_read(s, hdr_off, 16, str) &&
			    str[1] < sizeof(tmp) && vaddr_to_off(e, str[0], str[1], &soff) &&
			    src_read(s, soff, str[1], tmp))
				set_version(e, tmp, str[1]);
		}
		break;
	}
	free(b);
}

/* A symbol while sorting: by address, then alias preference (rank), then
 * table order (name offsets grow with it). */
struct tsym {
	uint64_t addr, size;
	uint32_t name;
	uint8_t rank;
};

static int tsym_cmp(const void *a, const void *b)
{
	const struct tsym *x = a, *y = b;
	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	return x->name < y->name ? -1 : x->name > y->name;
}

/* Section table entry i (validated by libelf). */
static bool shdr_at(Elf *elf, size_t i, GElf_Shdr *sh)
{
	Elf_Scn *scn = elf_getscn(elf, i);
	return scn && gelf_getshdr(scn, sh);
}

/*
 * Read a symbol table section and its string table (copies, bounded).
 * Returns the number of symbols or -1.
 */
static long read_symtab(Elf *elf, const struct src *s, const GElf_Shdr *sh, uint8_t **syms,
			uint8_t **strs, uint64_t *strsz)
{
	GElf_Shdr str;
	if (sh->sh_entsize != sizeof(Elf64_Sym) || !shdr_at(elf, sh->sh_link, &str) ||
	    str.sh_type != SHT_STRTAB)
		return -1;
	*syms = src_dup(s, sh->sh_offset, sh->sh_size);
	*strs = src_dup(s, str.sh_offset, str.sh_size);
	if (!*syms || !*strs) {
		free(*syms);
		free(*strs);
		return -1;
	}
	*strsz = str.sh_size;
	return (long)(sh->sh_size / sizeof(Elf64_Sym));
}

static const char *sym_name(const uint8_t *strs, uint64_t strsz, uint32_t off)
{
	if (off >= strsz || !memchr(strs + off, 0, strsz - off))
		return NULL;
	return (const char *)strs + off;
}

/* Function symbols of one table into e (sorted, deduplicated). Also notes
 * go.func.* for the inline tree. */
static int load_syms(struct elfsym *e, Elf *elf, const struct src *s, const GElf_Shdr *sh,
		     uint64_t skip_lo, uint64_t skip_hi, uint64_t *gofunc)
{
	uint8_t *raw, *strs;
	uint64_t strsz;
	long n = read_symtab(elf, s, sh, &raw, &strs, &strsz);
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
		const char *name = sym_name(strs, strsz, sym.st_name);
		if (!name || !*name)
			continue;
		if (gofunc && !*gofunc && (!strcmp(name, "go.func.*") || !strcmp(name, "go:func.*")))
			*gofunc = sym.st_value;
		if ((type != STT_FUNC && type != STT_GNU_IFUNC) || sym.st_shndx == SHN_UNDEF ||
		    sym.st_value == 0)
			continue;
		if (sym.st_value >= skip_lo && sym.st_value < skip_hi)
			continue;
		if (nv == cap) {
			cap = cap ? 2 * cap : 256;
			void *nvp = realloc(v, cap * sizeof(*v));
			if (!nvp) { rc = -ENOMEM; goto out; }
			v = nvp;
			void *nrp = realloc(rank, cap);
			if (!nrp) { rc = -ENOMEM; goto out; }
			rank = nrp;
		}
		size_t l = strlen(name) + 1;
		if (names_len + l > UINT32_MAX) { rc = -E2BIG; goto out; }
		if (names_len + l > names_cap) {
			while (names_len + l > names_cap)
				names_cap = names_cap ? 2 * names_cap : 4096;
			void *np = realloc(names, names_cap);
			if (!np) { rc = -ENOMEM; goto out; }
			names = np;
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
		rank[nv] = !strncmp(name, "__vdso_", 7) ? 0 :
			   (uint8_t)(2 + us * 2 + (ELF64_ST_BIND(sym.st_info) == STB_LOCAL));
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
	free(raw);
	free(strs);
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
static uint64_t find_gofunc(Elf *elf, const struct src *s, uint64_t pcln_addr,
			    uint64_t funcname_off, uint64_t text_start, unsigned md_off)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	while ((scn = elf_nextscn(elf, scn))) {
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS ||
		    (sh.sh_flags & (SHF_ALLOC | SHF_WRITE)) != (SHF_ALLOC | SHF_WRITE) ||
		    sh.sh_size > 64u << 20 || sh.sh_size < 400)
			continue;
		uint8_t *b = src_dup(s, sh.sh_offset, sh.sh_size);
		if (!b)
			continue;
		uint64_t found = 0;
		for (uint64_t i = 0; i + 400 <= sh.sh_size && !found; i += 8) {
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
			GElf_Shdr rsh, gsh;
			if (gf >= ro && scn_holding(elf, ro, &rsh) && scn_holding(elf, gf, &gsh) &&
			    rsh.sh_addr == gsh.sh_addr && !(gsh.sh_flags & SHF_EXECINSTR))
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
 * fields; gopcln_open() validates the rest. Only called for Go binaries.
 * Fills sh with a pseudo section from the header to its section's end.
 */
static bool find_pcln_by_magic(const struct elfsym *e, Elf *elf, const struct src *s, GElf_Shdr *out)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	while ((scn = elf_nextscn(elf, scn))) {
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS ||
		    !(sh.sh_flags & SHF_ALLOC) || (sh.sh_flags & SHF_EXECINSTR) ||
		    sh.sh_size < 128 || sh.sh_size > 256u << 20)
			continue;
		uint8_t *b = src_dup(s, sh.sh_offset, sh.sh_size);
		if (!b)
			continue;
		bool found = false;
		for (uint64_t i = 0; i + 72 <= sh.sh_size && !found; i += 8) {
			uint32_t magic;
			memcpy(&magic, b + i, 4);
			if ((magic != GOPCLN_MAGIC_118 && magic != GOPCLN_MAGIC_120) || b[i + 4] ||
			    b[i + 5] || (b[i + 6] != 1 && b[i + 6] != 2 && b[i + 6] != 4) ||
			    b[i + 7] != 8)
				continue;
			uint64_t w[8];
			memcpy(w, b + i + 8, sizeof(w));
			uint64_t rest = sh.sh_size - i;
			bool ok = w[0] > 0 && w[0] < (1u << 24) && w[3] >= 72 && w[7] < rest;
			for (int k = 3; k < 7 && ok; k++)
				ok = w[k] <= w[k + 1];
			bool text_ok = false;
			for (size_t l = 0; l < e->nloads && ok; l++)
				if ((e->loads[l].flags & PF_X) && w[2] >= e->loads[l].vaddr &&
				    w[2] - e->loads[l].vaddr < e->loads[l].memsz)
					text_ok = true;
			if (ok && text_ok) {
				*out = sh;
				out->sh_addr += i;
				out->sh_offset += i;
				out->sh_size -= i;
				found = true;
			}
		}
		free(b);
		if (found)
			return true;
	}
	return false;
}

static void load_go(struct elfsym *e, Elf *elf, size_t shstrndx, const struct src *s,
		    uint64_t sym_gofunc)
{
	GElf_Shdr sh, text;
	bool have = find_scn(elf, shstrndx, ".gopclntab", true, &sh) != NULL;
	if (!have && (e->go_build_id[0] || e->go_version[0]))
		have = find_pcln_by_magic(e, elf, s, &sh);
	if (!have || sh.sh_type != SHT_PROGBITS || sh.sh_size < 64)
		return;
	uint8_t *tab = src_dup(s, sh.sh_offset, sh.sh_size);
	if (!tab)
		return;
	struct gopcln_src gs = { .tab = tab, .tab_len = sh.sh_size };
	if (find_scn(elf, shstrndx, ".text", false, &text))
		gs.text_start = text.sh_addr;
	if (e->go_version[0] && !strncmp(e->go_version, "go1.", 4))
		gs.go_minor = atoi(e->go_version + 4);	/* informational only */
	/* funcnameOffset: header word 3 (1.18+) or 2 (1.16). */
	uint32_t magic;
	memcpy(&magic, tab, 4);
	uint64_t fno;
	memcpy(&fno, tab + (magic == GOPCLN_MAGIC_116 ? 24 : 32), 8);
	uint64_t gofunc = 0, ts;
	memcpy(&ts, tab + 24, 8);
	GElf_Shdr msh;
	bool go126 = find_scn(elf, shstrndx, ".go.module", false, &msh) != NULL;
	if (go126 && magic != GOPCLN_MAGIC_116) {
		/*
		 * Go 1.26+ (untested here): moduledata has its own section,
		 * pcHeader.textStart is 0 (take moduledata.text, word 22), and
		 * the funcdata (go:func.*) follow the functab inside the pclntab.
		 */
		uint64_t mtext;
		if (ts == 0 && msh.sh_type == SHT_PROGBITS && msh.sh_size >= 184 &&
		    src_read(s, msh.sh_offset + 176, 8, &mtext)) {
			for (size_t l = 0; l < e->nloads; l++)
				if ((e->loads[l].flags & PF_X) && mtext >= e->loads[l].vaddr &&
				    mtext - e->loads[l].vaddr < e->loads[l].memsz)
					gs.text_start = mtext;
		}
		uint64_t nfunc, pclnoff;
		memcpy(&nfunc, tab + 8, 8);
		memcpy(&pclnoff, tab + 64, 8);
		if (nfunc < sh.sh_size / 8 && pclnoff < sh.sh_size &&
		    (nfunc + 1) * 8 <= sh.sh_size - pclnoff) {
			uint64_t off = pclnoff + (nfunc + 1) * 8;
			gs.gofunc = tab + off;	/* inside the table: no copy */
			gs.gofunc_len = sh.sh_size - off;
			e->gofunc_addr = sh.sh_addr + off;
		}
	} else if (magic != GOPCLN_MAGIC_116) {
		gofunc = find_gofunc(elf, s, sh.sh_addr, fno, ts,
				     magic == GOPCLN_MAGIC_120 ? 320 : 304);
		if (!gofunc)
			gofunc = sym_gofunc;
	}
	GElf_Shdr gsh;
	if (gofunc && scn_holding(elf, gofunc, &gsh)) {
		uint64_t n = gsh.sh_size - (gofunc - gsh.sh_addr);
		e->gofunc_buf = src_dup(s, gsh.sh_offset + (gofunc - gsh.sh_addr), n);
		if (e->gofunc_buf) {
			e->gofunc_len = n;
			e->gofunc_addr = gofunc;
			gs.gofunc = e->gofunc_buf;
			gs.gofunc_len = n;
			e->bytes += n;
		}
	}
	if (gopcln_open(&gs, &e->pcln, NULL) < 0) {
		free(tab);
		free(e->gofunc_buf);
		e->bytes -= e->gofunc_len;
		e->gofunc_buf = NULL;
		e->gofunc_len = 0;
		return;
	}
	e->pcln_buf = tab;
	e->pcln_len = sh.sh_size;
	e->bytes += sh.sh_size + 256;
}

static int load(const struct src *s, struct elfsym **out, struct pp_err *err)
{
	*out = NULL;
	Elf *elf = src_elf(s);
	if (!elf)
		return pp_errf(err, -EINVAL, "elf: %s", elf_errmsg(-1));
	int rc = 0;
	struct elfsym *e = NULL;
	GElf_Ehdr eh;
	if (elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &eh)) {
		rc = pp_errf(err, -EINVAL, "elf: not an ELF file");
		goto out;
	}
	if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB) {
		rc = pp_errf(err, -ENOTSUP, "elf: only 64-bit little-endian ELF is supported");
		goto out;
	}
	e = calloc(1, sizeof(*e));
	if (!e) {
		rc = pp_errf(err, -ENOMEM, "elf: out of memory");
		goto out;
	}
	e->bytes = sizeof(*e);
	e->e_type = eh.e_type;
	size_t nph;
	if (elf_getphdrnum(elf, &nph) == 0) {
		for (size_t i = 0; i < nph && e->nloads < ELFSYM_MAX_LOADS; i++) {
			GElf_Phdr ph;
			if (!gelf_getphdr(elf, (int)i, &ph))
				continue;
			if (ph.p_type == PT_INTERP)
				e->has_interp = true;
			if (ph.p_type != PT_LOAD)
				continue;
			e->loads[e->nloads++] = (struct elfsym_load){
				.vaddr = ph.p_vaddr, .offset = ph.p_offset, .filesz = ph.p_filesz,
				.memsz = ph.p_memsz, .flags = ph.p_flags };
		}
	}
	size_t shstrndx;
	if (elf_getshdrstrndx(elf, &shstrndx) != 0)
		shstrndx = SHN_UNDEF;
	load_buildinfo(e, elf, shstrndx, s);
	load_notes(e, elf, s);
	load_comment(e, elf, shstrndx, s);

	/* Symbol tables: .symtab if it has functions, else .dynsym. */
	uint64_t sym_gofunc = 0;
	GElf_Shdr symtab = { 0 }, dynsym = { 0 }, sh;
	Elf_Scn *scn = NULL;
	while ((scn = elf_nextscn(elf, scn))) {
		if (!gelf_getshdr(scn, &sh))
			continue;
		if (sh.sh_type == SHT_SYMTAB && !symtab.sh_type)
			symtab = sh;
		else if (sh.sh_type == SHT_DYNSYM && !dynsym.sh_type)
			dynsym = sh;
	}
	if (shstrndx != SHN_UNDEF) {
		/* Go first, so its text range can be skipped in the symbols. The
		 * symtab's go.func.* is only a fallback to moduledata; take it
		 * in a cheap pre-pass when a symtab exists. */
		load_go(e, elf, shstrndx, s, 0);
		if (e->pcln && !gopcln_has_inline(e->pcln) && gopcln_layout(e->pcln) != 116 &&
		    symtab.sh_type) {
			struct elfsym tmp = { 0 };
			if (load_syms(&tmp, elf, s, &symtab, 0, 0, &sym_gofunc) == 0 && sym_gofunc) {
				gopcln_close(e->pcln);
				free(e->pcln_buf);
				free(e->gofunc_buf);
				e->pcln = NULL;
				e->pcln_buf = e->gofunc_buf = NULL;
				e->pcln_len = e->gofunc_len = 0;
				e->gofunc_addr = 0;
				e->bytes = sizeof(*e);
				load_go(e, elf, shstrndx, s, sym_gofunc);
			}
			free(tmp.syms);
			free(tmp.names);
		}
	}
	uint64_t lo = 0, hi = 0;
	if (e->pcln)
		gopcln_text_range(e->pcln, &lo, &hi);
	e->has_symtab = symtab.sh_type != 0;
	if (symtab.sh_type)
		rc = load_syms(e, elf, s, &symtab, lo, hi, NULL);
	if (rc == 0 && e->nsyms == 0 && dynsym.sh_type) {
		free(e->syms);
		free(e->names);
		e->syms = NULL;
		e->names = NULL;
		rc = load_syms(e, elf, s, &dynsym, lo, hi, NULL);
		e->from_dynsym = true;
	}
	if (rc < 0) {
		pp_errf(err, rc, "elf: reading symbol table failed");
		goto out;
	}
	*out = e;
	e = NULL;
out:
	elfsym_free(e);
	elf_end(elf);
	return rc;
}

void elfsym_free(struct elfsym *e)
{
	if (!e)
		return;
	gopcln_close(e->pcln);
	free(e->pcln_buf);
	free(e->gofunc_buf);
	free(e->syms);
	free(e->names);
	free(e);
}

int elfsym_load_fd(int fd, struct elfsym **out, struct pp_err *err)
{
	struct stat st;
	if (fstat(fd, &st) < 0)
		return pp_errf(err, -errno, "elf: fstat: %s", strerror(errno));
	if (!S_ISREG(st.st_mode))
		return pp_errf(err, -EINVAL, "elf: not a regular file");
	struct src s = { .fd = fd, .size = (uint64_t)st.st_size };
	return load(&s, out, err);
}

int elfsym_load_path(const char *path, struct elfsym **out, struct pp_err *err)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return pp_errf(err, -errno, "elf: open %s: %s", path, strerror(errno));
	int rc = elfsym_load_fd(fd, out, err);
	close(fd);
	if (rc < 0)
		pp_err_wrap(err, "%s", path);
	return rc;
}

int elfsym_load_mem(const void *buf, size_t len, struct elfsym **out, struct pp_err *err)
{
	/* libelf's elf_memory wants a writable buffer; give it a copy. */
	uint8_t *copy = malloc(len ? len : 1);
	if (!copy)
		return pp_errf(err, -ENOMEM, "elf: out of memory");
	memcpy(copy, buf, len);
	struct src s = { .fd = -1, .mem = copy, .size = len };
	int rc = load(&s, out, err);
	free(copy);
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
		return NULL;	/* unsized last symbol: no known end */
	}
	if (start)
		*start = s->addr;
	return e->names + s->name;
}

/*
 * The 64-bit little-endian ELF file open at fd: *s describes it (the Elf
 * reads through it: s must outlive *elfp), *elfp is the caller's
 * (elf_end). 0, or a negative errno with err set.
 */
static int fd_elf(int fd, struct src *s, Elf **elfp, struct pp_err *err)
{
	struct stat st;
	GElf_Ehdr eh;
	if (fstat(fd, &st) < 0)
		return pp_errf(err, -errno, "elf: fstat: %s", strerror(errno));
	*s = (struct src){ .fd = fd, .size = (uint64_t)st.st_size };
	Elf *elf = src_elf(s);
	if (!elf)
		return pp_errf(err, -EINVAL, "elf: %s", elf_errmsg(-1));
	if (elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &eh) ||
	    eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB) {
		elf_end(elf);
		return pp_errf(err, -EINVAL, "elf: not a 64-bit little-endian ELF file");
	}
	*elfp = elf;
	return 0;
}

int elfsym_find_symbol_fd(int fd, const char *name, uint64_t *value, uint64_t *size,
			  struct pp_err *err)
{
	struct src s;
	Elf *elf;
	int rc = fd_elf(fd, &s, &elf, err);
	if (rc < 0)
		return rc;
	rc = -ENOENT;
	for (int pass = 0; pass < 2 && rc == -ENOENT; pass++) {
		Elf_Scn *scn = NULL;
		GElf_Shdr sh;
		while ((scn = elf_nextscn(elf, scn)) && rc == -ENOENT) {
			if (!gelf_getshdr(scn, &sh) ||
			    sh.sh_type != (pass == 0 ? SHT_SYMTAB : SHT_DYNSYM))
				continue;
			uint8_t *raw, *strs;
			uint64_t strsz;
			long n = read_symtab(elf, &s, &sh, &raw, &strs, &strsz);
			for (long i = 1; i < n; i++) {
				Elf64_Sym sym;
				memcpy(&sym, raw + (size_t)i * sizeof(sym), sizeof(sym));
				const char *nm = sym_name(strs, strsz, sym.st_name);
				if (nm && sym.st_shndx != SHN_UNDEF && !strcmp(nm, name)) {
					*value = sym.st_value;
					if (size)
						*size = sym.st_size;
					rc = 0;
					break;
				}
			}
			if (n >= 0) {
				free(raw);
				free(strs);
			}
		}
	}
	if (rc == -ENOENT)
		pp_errf(err, -ENOENT, "elf: symbol %s not found", name);
	elf_end(elf);
	return rc;
}

int elfsym_read_section_fd(int fd, const char *name, uint64_t max, uint8_t **buf, size_t *len,
			   uint64_t *addr, struct pp_err *err)
{
	struct src s;
	Elf *elf;
	GElf_Shdr sh;
	size_t shstrndx;
	*buf = NULL;
	*len = 0;
	int rc = fd_elf(fd, &s, &elf, err);
	if (rc < 0)
		return rc;
	rc = -ENOENT;
	if (elf_getshdrstrndx(elf, &shstrndx) != 0) {
		rc = pp_errf(err, -EINVAL, "elf: no section header string table");
		goto out;
	}
	if (!find_scn(elf, shstrndx, name, false, &sh) || sh.sh_type == SHT_NOBITS) {
		pp_errf(err, -ENOENT, "elf: no section %s", name);
		goto out;
	}
	if (sh.sh_size > max) {
		rc = pp_errf(err, -E2BIG, "elf: section %s too large (%llu bytes)", name,
			     (unsigned long long)sh.sh_size);
		goto out;
	}
	*buf = src_dup(&s, sh.sh_offset, sh.sh_size);
	if (!*buf) {
		rc = pp_errf(err, -EINVAL, "elf: section %s out of the file", name);
		goto out;
	}
	*len = (size_t)sh.sh_size;
	*addr = sh.sh_addr;
	rc = 0;
out:
	elf_end(elf);
	return rc;
}
