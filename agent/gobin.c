/*
 * gobin.c - Go executable analysis: detection, version, build ids, the
 * runtime's memory-profile variables (symtab or decoded from code), load
 * bias, symbolization, and the opt-in MemProfileRate write.
 */
#include "gobin.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <unistd.h>

#include "elfsym.h"
#include "gopclntab.h"
#include "procinfo.h"

#define MAX_SECTIONS 4096
#define MAX_NOTE_BYTES (64u << 10)
#define MAX_FUNC_CODE (256u << 10)

struct gsec {
	char name[40];
	uint64_t addr, size, offset;
	uint32_t type;
	uint64_t flags;
};

struct gobin_impl {
	int refs;		/* gobins sharing this analysis (gobin_share) */
	int fd;
	Elf *elf;
	struct gsec *secs;
	size_t nsecs;
	struct gosym *sym;	/* functions: names, ranges, file/line */
	dev_t st_dev;
	ino_t st_ino;
};

/* ---- Function table ---------------------------------------------------
 * The sym module's loader: .gopclntab (names, files, lines, inlined
 * frames; present even in stripped builds) and, outside the Go text,
 * ELF function symbols.
 */
struct gosym {
	struct elfsym *es;
};

static int gosym_open(int fd, struct gosym **out, struct pp_err *err)
{
	struct gosym *s = calloc(1, sizeof(*s));
	*out = NULL;
	if (!s)
		return -ENOMEM;
	int rc = elfsym_load_fd(fd, &s->es, err);
	if (rc) {
		free(s);
		return rc;
	}
	*out = s;
	return 0;
}

static void gosym_free(struct gosym *s)
{
	if (s) {
		elfsym_free(s->es);
		free(s);
	}
}

static int gosym_func_range(const struct gosym *s, const char *name, uint64_t *start,
			    uint64_t *end)
{
	const struct elfsym *e = s->es;
	if (e->pcln) {
		size_t n = gopcln_nfunc(e->pcln);
		for (size_t i = 0; i < n; i++) {
			struct gopcln_func f;
			if (gopcln_func_at(e->pcln, i, &f) == 0 && f.name && !strcmp(f.name, name)) {
				*start = f.entry;
				*end = f.end;
				return 0;
			}
		}
	}
	for (size_t i = 0; i < e->nsyms; i++) {
		const struct elfsym_sym *y = &e->syms[i];
		if (y->name < e->names_len && !strcmp(e->names + y->name, name) && y->size) {
			*start = y->addr;
			*end = y->addr + y->size;
			return 0;
		}
	}
	return -ENOENT;
}

#define MAX_PCLN_FRAMES 64

static size_t gosym_frames(const struct gosym *s, uint64_t pc, struct gobin_frame *fr,
			   size_t max)
{
	const struct elfsym *e = s->es;
	if (!max)
		return 0;
	if (e->pcln) {
		struct gopcln_frame pf[MAX_PCLN_FRAMES];
		struct gopcln_func f;
		int n = gopcln_lookup(e->pcln, pc, pf,
				      max < MAX_PCLN_FRAMES ? (int)max : MAX_PCLN_FRAMES);
		if (n > 0 && gopcln_find(e->pcln, pc, &f) >= 0) {
			for (int i = 0; i < n; i++)
				fr[i] = (struct gobin_frame){
					.function = pf[i].func ? pf[i].func : "?",
					.file = pf[i].file ? pf[i].file : "",
					.line = pf[i].line,
					.entry = f.entry,
				};
			return (size_t)n;
		}
	}
	uint64_t start;
	const char *name = elfsym_lookup(e, pc, &start);
	if (!name)
		return 0;
	fr[0] = (struct gobin_frame){.function = name, .file = "", .line = 0, .entry = start};
	return 1;
}

static int elf_once(void)
{
	static int ok = -1;
	if (ok < 0)
		ok = elf_version(EV_CURRENT) != EV_NONE;
	return ok ? 0 : -ENOSYS;
}

static const struct gsec *sec_by_name(const struct gobin_impl *im, const char *name)
{
	for (size_t i = 0; i < im->nsecs; i++)
		if (!strcmp(im->secs[i].name, name))
			return &im->secs[i];
	return NULL;
}

/* The PROGBITS section holding [addr, addr+len), or NULL. */
static const struct gsec *sec_of(const struct gobin_impl *im, uint64_t addr, uint64_t len)
{
	for (size_t i = 0; i < im->nsecs; i++) {
		const struct gsec *s = &im->secs[i];
		if (!(s->flags & SHF_ALLOC) || s->size == 0)
			continue;
		if (addr >= s->addr && addr - s->addr <= s->size && len <= s->size - (addr - s->addr))
			return s;
	}
	return NULL;
}

/* Read len file bytes at link-time address addr (PROGBITS only). */
static int file_read_at(const struct gobin_impl *im, uint64_t addr, void *buf, size_t len)
{
	const struct gsec *s = sec_of(im, addr, len);
	if (!s || s->type == SHT_NOBITS)
		return -EFAULT;
	ssize_t r = pread(im->fd, buf, len, (off_t)(s->offset + (addr - s->addr)));
	if (r < 0)
		return -errno;
	return (size_t)r == len ? 0 : -EFAULT;
}

static int load_sections(struct gobin_impl *im, struct pp_err *err)
{
	size_t shnum, shstrndx;
	if (elf_getshdrnum(im->elf, &shnum) || elf_getshdrstrndx(im->elf, &shstrndx))
		return pp_errf(err, -ENOEXEC, "bad ELF section table: %s", elf_errmsg(-1));
	if (shnum > MAX_SECTIONS)
		return pp_errf(err, -ENOEXEC, "ELF has %zu sections (limit %d)", shnum, MAX_SECTIONS);
	im->secs = calloc(shnum ? shnum : 1, sizeof(*im->secs));
	if (!im->secs)
		return -ENOMEM;
	Elf_Scn *scn = NULL;
	while ((scn = elf_nextscn(im->elf, scn))) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || im->nsecs >= shnum)
			continue;
		const char *name = elf_strptr(im->elf, shstrndx, sh.sh_name);
		struct gsec *s = &im->secs[im->nsecs++];
		snprintf(s->name, sizeof(s->name), "%s", name ? name : "");
		s->addr = sh.sh_addr;
		s->size = sh.sh_size;
		s->offset = sh.sh_offset;
		s->type = sh.sh_type;
		s->flags = sh.sh_flags;
	}
	return 0;
}

static void hex(const uint8_t *p, size_t n, char *out, size_t outlen)
{
	size_t o = 0;
	for (size_t i = 0; i < n && o + 3 <= outlen; i++)
		o += (size_t)snprintf(out + o, outlen - o, "%02x", p[i]);
	if (outlen)
		out[o < outlen ? o : outlen - 1] = '\0';
}

/* GNU build id (NT_GNU_BUILD_ID) and Go build id ("Go\0\0", type 4). */
static void load_notes(struct gobin *g)
{
	struct gobin_impl *im = g->impl;
	Elf_Scn *scn = NULL;
	while ((scn = elf_nextscn(im->elf, scn))) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE || sh.sh_size > MAX_NOTE_BYTES)
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		if (!d || !d->d_buf)
			continue;
		size_t off = 0, name_off, desc_off;
		GElf_Nhdr nh;
		while (off < d->d_size &&
		       (off = gelf_getnote(d, off, &nh, &name_off, &desc_off)) > 0) {
			if (name_off >= d->d_size || desc_off > d->d_size ||
			    nh.n_descsz > d->d_size - desc_off)
				break;
			const char *nm = (const char *)d->d_buf + name_off;
			const uint8_t *desc = (const uint8_t *)d->d_buf + desc_off;
			if (nh.n_namesz == 4 && !memcmp(nm, "GNU", 4) && nh.n_type == NT_GNU_BUILD_ID)
				hex(desc, nh.n_descsz, g->gnu_build_id, sizeof(g->gnu_build_id));
			else if (nh.n_namesz == 4 && !memcmp(nm, "Go\0", 4) && nh.n_type == 4) {
				size_t n = nh.n_descsz < sizeof(g->go_build_id) - 1
					   ? nh.n_descsz : sizeof(g->go_build_id) - 1;
				memcpy(g->go_build_id, desc, n);
				g->go_build_id[n] = '\0';
				for (size_t i = 0; i < n; i++)
					if (g->go_build_id[i] < 0x20 || g->go_build_id[i] > 0x7e)
						g->go_build_id[i] = '?';
			}
		}
	}
}

static int uvarint(const uint8_t *p, size_t len, size_t *pos, uint64_t *v)
{
	uint64_t x = 0;
	for (unsigned shift = 0; shift < 64 && *pos < len; shift += 7) {
		uint8_t b = p[(*pos)++];
		x |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*v = x;
			return 0;
		}
	}
	return -EINVAL;
}

static void set_version(struct gobin *g, const uint8_t *s, uint64_t n)
{
	if (n == 0 || n >= sizeof(g->go_version) || n < 3 || memcmp(s, "go", 2) != 0)
		return;
	for (uint64_t i = 0; i < n; i++)
		if (s[i] < 0x20 || s[i] > 0x7e)
			return;
	memcpy(g->go_version, s, n);
	g->go_version[n] = '\0';
}

/* .go.buildinfo: "\xff Go buildinf:", ptrsize, flags; flags&2 -> inline
 * varint strings at 32 (Go >= 1.18), else two pointers to Go strings. */
static void load_buildinfo(struct gobin *g)
{
	struct gobin_impl *im = g->impl;
	const struct gsec *s = sec_by_name(im, ".go.buildinfo");
	uint8_t buf[512];
	if (!s || s->type == SHT_NOBITS || s->size < 32)
		return;
	size_t n = s->size < sizeof(buf) ? (size_t)s->size : sizeof(buf);
	if (pread(im->fd, buf, n, (off_t)s->offset) != (ssize_t)n)
		return;
	if (memcmp(buf, "\xff Go buildinf:", 14) != 0)
		return;
	g->is_go = true;
	uint8_t ptrsize = buf[14], flags = buf[15];
	if (flags & 2) {
		size_t pos = 32;
		uint64_t len;
		if (!uvarint(buf, n, &pos, &len) && len <= n - pos)
			set_version(g, buf + pos, len);
		return;
	}
	if (ptrsize != 8 || (flags & 1))	/* big-endian or 32-bit: not handled */
		return;
	uint64_t vptr, hdr[2];
	memcpy(&vptr, buf + 16, 8);
	if (file_read_at(im, vptr, hdr, sizeof(hdr)) || hdr[1] == 0 || hdr[1] >= 64)
		return;
	uint8_t v[64];
	if (!file_read_at(im, hdr[0], v, hdr[1]))
		set_version(g, v, hdr[1]);
}

static int load_text(struct gobin *g, struct pp_err *err)
{
	size_t phnum;
	if (elf_getphdrnum(g->impl->elf, &phnum))
		return pp_errf(err, -ENOEXEC, "%s: no program headers", g->path);
	for (size_t i = 0; i < phnum && i < 256; i++) {
		GElf_Phdr ph;
		if (!gelf_getphdr(g->impl->elf, (int)i, &ph))
			continue;
		if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X)) {
			g->text_vaddr = ph.p_vaddr;
			g->text_memsz = ph.p_memsz;
			g->text_offset = ph.p_offset;
			return 0;
		}
	}
	return pp_errf(err, -ENOEXEC, "%s: no executable segment", g->path);
}

/* ---- Variables from .symtab ------------------------------------------ */

static void vars_from_symtab(struct gobin *g)
{
	struct gobin_impl *im = g->impl;
	Elf_Scn *scn = NULL;
	while ((scn = elf_nextscn(im->elf, scn))) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_SYMTAB || sh.sh_entsize == 0)
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		if (!d)
			continue;
		g->has_symtab = true;
		size_t n = sh.sh_size / sh.sh_entsize;
		struct gobin_vars v = {0};
		for (size_t i = 0; i < n; i++) {
			GElf_Sym sym;
			if (!gelf_getsym(d, (int)i, &sym) || GELF_ST_TYPE(sym.st_info) != STT_OBJECT)
				continue;
			const char *name = elf_strptr(im->elf, sh.sh_link, sym.st_name);
			if (!name || strncmp(name, "runtime.", 8) != 0)
				continue;
			if (!strcmp(name + 8, "mbuckets"))
				v.mbuckets = sym.st_value;
			else if (!strcmp(name + 8, "MemProfileRate"))
				v.mem_profile_rate = sym.st_value;
			else if (!strcmp(name + 8, "mProfCycle"))
				v.mprof_cycle = sym.st_value;
		}
		if (v.mbuckets && v.mem_profile_rate && v.mprof_cycle) {
			v.source = GOBIN_VARS_SYMTAB;
			g->vars = v;
		}
		return;
	}
}

/* ---- Variables decoded from runtime code (stripped binaries, amd64) ---- */

/*
 * RIP-relative moves between a register and a global, the way the Go
 * compiler reads and writes package variables: "MOV r32, [rip+disp32]"
 * (8B /r, no REX.W), "MOV r64, [rip+disp32]" (REX.W 8B /r),
 * "MOV [rip+disp32], r64" (REX.W 89 /r) and "LEA r64, [rip+disp32]"
 * (REX.W 8D /r, the address taken for an atomic store). Instruction boundaries are not
 * known, so every byte offset is tried; spurious matches are removed by
 * intersecting the targets over several functions that all use the
 * variable, by requiring an aligned address in a writable data section, and
 * finally by checking the live value.
 */
enum { LOAD32 = GOBIN_LOAD32, LOAD64 = GOBIN_LOAD64, STORE64 = GOBIN_STORE64,
       LEA64 = GOBIN_LEA64 };

struct targets {
	uint64_t v[64];
	size_t n;
};

static void targets_add(struct targets *t, uint64_t a)
{
	for (size_t i = 0; i < t->n; i++)
		if (t->v[i] == a)
			return;
	if (t->n < sizeof(t->v) / sizeof(t->v[0]))
		t->v[t->n++] = a;
}

static bool in_data(const struct gobin_impl *im, uint64_t a, unsigned size)
{
	const struct gsec *s = sec_of(im, a, size);
	return s && (s->flags & SHF_WRITE) && !(s->flags & SHF_EXECINSTR) &&
	       (!strcmp(s->name, ".bss") || !strcmp(s->name, ".noptrbss") ||
		!strcmp(s->name, ".data") || !strcmp(s->name, ".noptrdata"));
}

void gobin_scan_moves(const uint8_t *code, size_t len, uint64_t addr, int kind,
		      uint64_t *out, size_t *nout, size_t max)
{
	uint8_t opcode = kind == STORE64 ? 0x89 : kind == LEA64 ? 0x8D : 0x8B;
	*nout = 0;
	for (size_t i = 0; i + 7 <= len; i++) {
		size_t op;	/* index of the opcode byte */
		if (kind != LOAD32) {
			if ((code[i] & 0xF8) != 0x48)	/* REX.W, any R/X/B */
				continue;
			op = i + 1;
		} else {
			op = i;
			if (i > 0 && (code[i - 1] & 0xF8) == 0x48)
				continue;	/* REX.W before: a 64-bit move */
		}
		if (op + 6 > len || code[op] != opcode || (code[op + 1] & 0xC7) != 0x05)
			continue;
		int32_t disp;
		memcpy(&disp, code + op + 2, 4);
		uint64_t end = addr + op + 6;
		if (*nout < max)
			out[(*nout)++] = end + (int64_t)disp;
	}
}

static int func_code(const struct gobin *g, const char *name, uint8_t **code, size_t *len,
		     uint64_t *start)
{
	uint64_t s, e;
	if (!g->impl->sym || gosym_func_range(g->impl->sym, name, &s, &e) || e <= s)
		return -ENOENT;
	if (e - s > MAX_FUNC_CODE)
		return -E2BIG;
	*code = malloc(e - s);
	if (!*code)
		return -ENOMEM;
	if (file_read_at(g->impl, s, *code, e - s)) {
		free(*code);
		return -EFAULT;
	}
	*len = e - s;
	*start = s;
	return 0;
}

struct use {
	const char *func;
	int kind;
};

/* The single target used (as kind) by every function of uses[] that exists,
 * aligned and within a data section; 0 when not unique. *nfuncs: how many
 * functions were found. */
static uint64_t common_target(const struct gobin *g, const struct use *uses, size_t nuses,
			      unsigned align, unsigned *nfuncs)
{
	struct targets acc = {.n = 0};
	bool first = true;
	*nfuncs = 0;
	for (size_t f = 0; f < nuses; f++) {
		uint8_t *code;
		size_t len, n;
		uint64_t start, found[256];
		if (func_code(g, uses[f].func, &code, &len, &start))
			continue;
		gobin_scan_moves(code, len, start, uses[f].kind, found, &n, 256);
		free(code);
		struct targets t = {.n = 0};
		for (size_t i = 0; i < n; i++)
			if (found[i] % align == 0 && in_data(g->impl, found[i], align))
				targets_add(&t, found[i]);
		/* A function that no longer uses the variable this way (the Go
		 * version moved the code elsewhere) proves nothing either way. */
		if (t.n == 0)
			continue;
		(*nfuncs)++;
		if (first) {
			acc = t;
			first = false;
			continue;
		}
		struct targets x = {.n = 0};
		for (size_t i = 0; i < acc.n; i++)
			for (size_t j = 0; j < t.n; j++)
				if (acc.v[i] == t.v[j])
					targets_add(&x, acc.v[i]);
		acc = x;
	}
	return acc.n == 1 ? acc.v[0] : 0;
}

static void vars_from_code(struct gobin *g)
{
	/* mbuckets.Load() in MemProfile (memProfileInternal from 1.23) and
	 * mProf_FlushLocked, &mbuckets for the atomic store in stkbucket.
	 * MemProfile is dead code (absent) in programs that never read memory
	 * profiles. */
	static const struct use mb[] = {
		{"runtime.MemProfile", LOAD64}, {"runtime.memProfileInternal", LOAD64},
		{"runtime.mProf_FlushLocked", LOAD64}, {"runtime.stkbucket", LEA64},
	};
	/* mProfCycle.read() in MemProfile and the mProf_* hooks. */
	static const struct use cy[] = {
		{"runtime.MemProfile", LOAD32}, {"runtime.memProfileInternal", LOAD32},
		{"runtime.mProf_Flush", LOAD32},
		{"runtime.mProf_PostSweep", LOAD32}, {"runtime.mProf_Malloc", LOAD32},
		{"runtime.mProf_Free", LOAD32},
	};
	/* MemProfileRate: read by mallocgc and nextSample (inlined into
	 * profilealloc), written for GODEBUG=memprofilerate by parsedebugvars
	 * (1.19) or parsegodebug (1.23). */
	static const struct use rt[] = {
		{"runtime.mallocgc", LOAD64}, {"runtime.profilealloc", LOAD64},
		{"runtime.nextSample", LOAD64}, {"runtime.parsedebugvars", STORE64},
		{"runtime.parsegodebug", STORE64},
	};
	unsigned n1, n2, n3;
	struct gobin_vars v = {0};
	v.mbuckets = common_target(g, mb, sizeof(mb) / sizeof(mb[0]), 8, &n1);
	v.mprof_cycle = common_target(g, cy, sizeof(cy) / sizeof(cy[0]), 4, &n2);
	v.mem_profile_rate = common_target(g, rt, sizeof(rt) / sizeof(rt[0]), 8, &n3);
	/* One function alone is too weak a proof. */
	if (n1 < 2 || n2 < 2 || n3 < 2)
		return;
	if (v.mbuckets && v.mprof_cycle && v.mem_profile_rate &&
	    v.mbuckets != v.mem_profile_rate) {
		v.source = GOBIN_VARS_CODE;
		g->vars = v;
	}
}

/* ---- Open / attach ---------------------------------------------------- */

#define GOBIN_MAX_FILE (4ull << 30)

int gobin_open(const char *path, struct gobin **out, struct pp_err *err)
{
	int rc;
	*out = NULL;
	if ((rc = elf_once()))
		return pp_errf(err, rc, "libelf: %s", elf_errmsg(-1));
	struct gobin *g = calloc(1, sizeof(*g));
	if (!g)
		return -ENOMEM;
	g->impl = calloc(1, sizeof(*g->impl));
	if (g->impl) {
		g->impl->fd = -1;
		g->impl->refs = 1;
	}
	g->path = strdup(path);
	g->exe = strdup(path);
	if (!g->impl || !g->path || !g->exe) {
		gobin_free(g);
		return -ENOMEM;
	}
	/* usually /proc/PID/exe of a process that may be hostile: never an
	 * open that can block (FUSE), never anything but a regular file */
	struct stat st0;
	g->impl->fd = proc_open_link(path, GOBIN_MAX_FILE, &st0);
	if (g->impl->fd < 0) {
		rc = g->impl->fd == -ESRCH ? -ENOENT : g->impl->fd;
		gobin_free(g);
		return pp_errf(err, rc, "open %s: %s", path,
			       rc == -EINVAL ? "not a regular file on a trusted filesystem"
			       : rc == -EFBIG ? "larger than 4 GiB" : strerror(-rc));
	}
	struct stat st;
	if (fstat(g->impl->fd, &st) == 0) {
		g->impl->st_dev = st.st_dev;
		g->impl->st_ino = st.st_ino;
	}
	g->impl->elf = elf_begin(g->impl->fd, ELF_C_READ_MMAP, NULL);
	GElf_Ehdr eh;
	if (!g->impl->elf || elf_kind(g->impl->elf) != ELF_K_ELF || !gelf_getehdr(g->impl->elf, &eh)) {
		gobin_free(g);
		return pp_errf(err, -ENOEXEC, "%s: not an ELF file", path);
	}
	/* The bucket layout is the same on arm64; decoding instructions for
	 * stripped binaries is amd64 only. */
	if ((eh.e_machine != EM_X86_64 && eh.e_machine != EM_AARCH64) ||
	    gelf_getclass(g->impl->elf) != ELFCLASS64 ||
	    eh.e_ident[EI_DATA] != ELFDATA2LSB) {
		gobin_free(g);
		return pp_errf(err, -ENOEXEC, "%s: not a 64-bit little-endian x86-64/arm64 ELF "
			       "(machine %u)", path, (unsigned)eh.e_machine);
	}
	g->pie = eh.e_type == ET_DYN;
	if ((rc = load_sections(g->impl, err)) || (rc = load_text(g, err))) {
		gobin_free(g);
		return rc;
	}
	load_notes(g);
	load_buildinfo(g);
	if (sec_by_name(g->impl, ".gopclntab") || sec_by_name(g->impl, ".data.rel.ro.gopclntab") ||
	    g->go_build_id[0])
		g->is_go = true;
	if (!g->is_go) {
		gobin_free(g);
		return pp_errf(err, -ENOEXEC, "%s: not a Go program", path);
	}
	/* Symbolization; failure leaves the gobin usable for reading. */
	if (gosym_open(g->impl->fd, &g->impl->sym, NULL) == 0) {
		g->has_pclntab = g->impl->sym->es->pcln != NULL;
		if (!g->go_version[0])
			snprintf(g->go_version, sizeof(g->go_version), "%s",
				 g->impl->sym->es->go_version);
	}
	vars_from_symtab(g);
	if (g->vars.source == GOBIN_VARS_NONE)
		if (eh.e_machine == EM_X86_64)
			vars_from_code(g);
	/* Everything needed later was copied out: no fd or mmap stays open
	 * per tracked process. */
	elf_end(g->impl->elf);
	g->impl->elf = NULL;
	close(g->impl->fd);
	g->impl->fd = -1;
	free(g->impl->secs);
	g->impl->secs = NULL;
	g->impl->nsecs = 0;
	*out = g;
	return 0;
}

static int gone(int e)
{
	return (e == ENOENT || e == ESRCH) ? -ESRCH : -e;
}

int gobin_share(const struct gobin *g, pid_t pid, struct gobin **out, struct pp_err *err)
{
	char exe[4096];
	int rc;
	*out = NULL;
	if ((rc = proc_exe(pid, exe, sizeof(exe))))
		return pp_errf(err, rc == -ESRCH ? -ESRCH : rc, "pid %d: %s", (int)pid,
			       rc == -ESRCH ? "no such process" : strerror(-rc));
	/* The very file g analyzed (stat through /proc/PID/exe gives the
	 * identity gobin_open() recorded), not just the same path. */
	char link[64];
	struct stat st;
	snprintf(link, sizeof(link), "/proc/%d/exe", (int)pid);
	if (stat(link, &st) != 0)
		return pp_errf(err, gone(errno), "pid %d: %s", (int)pid, strerror(errno));
	if (st.st_dev != g->impl->st_dev || st.st_ino != g->impl->st_ino)
		return pp_errf(err, -ENOENT, "pid %d runs another executable than %s", (int)pid,
			       g->exe);
	struct gobin *n = malloc(sizeof(*n));
	if (!n)
		return -ENOMEM;
	*n = *g;
	n->path = strdup(g->path);
	n->exe = strdup(exe);
	n->impl = NULL;
	n->mem = NULL;
	if (!n->path || !n->exe) {
		gobin_free(n);
		return -ENOMEM;
	}
	n->pid = 0;
	n->bias = n->text_start = n->text_limit = 0;
	n->mbuckets_addr = n->rate_addr = n->cycle_addr = 0;
	__atomic_add_fetch(&g->impl->refs, 1, __ATOMIC_RELAXED);
	n->impl = g->impl;
	/* attach checks the mapping is this very file (device and inode) */
	if ((rc = gobin_attach(n, pid, err))) {
		gobin_free(n);
		return rc;
	}
	*out = n;
	return 0;
}

void gobin_file_id(const struct gobin *g, uint64_t *dev, uint64_t *ino)
{
	*dev = (uint64_t)g->impl->st_dev;
	*ino = (uint64_t)g->impl->st_ino;
}

ssize_t gobin_read_some(const struct gobin *g, pid_t pid, uint64_t addr, void *buf, size_t len)
{
	if (g && g->mem) {
		ssize_t n = g->mem->read(g->mem->ctx, addr, buf, len);
		/* a reader that claims more than asked for is broken: no bytes */
		return n > (ssize_t)len ? -EIO : n;
	}
	struct iovec l = {.iov_base = buf, .iov_len = len};
	struct iovec r = {.iov_base = (void *)(uintptr_t)addr, .iov_len = len};
	ssize_t n = process_vm_readv(pid, &l, 1, &r, 1, 0);
	return n < 0 ? -errno : n;
}

/* Exactly len bytes through gobin_read_some(), with a message. */
static int read_exact(const struct gobin *g, pid_t pid, uint64_t addr, void *buf, size_t len,
		      struct pp_err *err)
{
	ssize_t n = gobin_read_some(g, pid, addr, buf, len);
	if (n == (ssize_t)len)
		return 0;
	if (n >= 0)
		return pp_errf(err, -EFAULT, "pid %d: short read at 0x%" PRIx64, (int)pid, addr);
	int e = (int)-n;
	if (e == ESRCH)
		return pp_errf(err, -ESRCH, "pid %d: the process exited", (int)pid);
	if (e == EPERM || e == EACCES)
		return pp_errf(err, -e, "pid %d: not allowed to read its memory (%s)", (int)pid,
			       strerror(e));
	return pp_errf(err, -e, "pid %d: read 0x%" PRIx64 "+%zu: %s", (int)pid, addr, len,
		       strerror(e));
}

int gobin_read_mem(pid_t pid, uint64_t addr, void *buf, size_t len, struct pp_err *err)
{
	return read_exact(NULL, pid, addr, buf, len, err);
}

static int verify_live(struct gobin *g, struct pp_err *err)
{
	int64_t rate;
	uint64_t head;
	int rc;
	if ((rc = gobin_read_rate(g, &rate, err)))
		return rc;
	if (rate < 0 || rate > ((int64_t)1 << 40))
		return pp_errf(err, -ENOENT, "pid %d: candidate runtime.MemProfileRate at 0x%" PRIx64
			       " holds %" PRId64 ", not a rate", (int)g->pid, g->rate_addr, rate);
	if ((rc = gobin_read_mbuckets(g, &head, err)))
		return rc;
	if (head) {
		uint64_t hdr[6];
		if (read_exact(g, g->pid, head, hdr, sizeof(hdr), NULL) || hdr[2] != 1 ||
		    hdr[5] == 0 || hdr[5] > 1024)
			return pp_errf(err, -ENOENT, "pid %d: candidate runtime.mbuckets at 0x%" PRIx64
				       " does not point at a memory-profile bucket",
				       (int)g->pid, g->mbuckets_addr);
	}
	return 0;
}

/* Not gone, not a zombie (an exiting process has no mappings left). */
static bool proc_alive(pid_t pid)
{
	struct proc_stat st;
	return proc_stat(pid, &st) == 0 && st.state != 'Z' && st.state != 'X';
}

int gobin_attach(struct gobin *g, pid_t pid, struct pp_err *err)
{
	struct proc_maps maps = {0};
	int rc = proc_maps_read(pid, &maps, err);
	if (rc)
		return rc == -ESRCH ? pp_errf(err, -ESRCH, "pid %d: no such process", (int)pid) : rc;
	const struct proc_map *text = NULL;
	for (size_t i = 0; i < maps.n; i++) {
		const struct proc_map *m = &maps.v[i];
		/* Same file: device and inode, or (overlayfs reports the lower
		 * layer's in maps) the executable's path. */
		bool same = (m->inode == (uint64_t)g->impl->st_ino &&
			     m->dev_major == major(g->impl->st_dev) &&
			     m->dev_minor == minor(g->impl->st_dev)) ||
			    (g->exe && m->path && !strcmp(m->path, g->exe));
		if (m->perms[2] != 'x' || !same)
			continue;
		if (m->offset <= g->text_offset + (g->text_memsz ? g->text_memsz - 1 : 0) &&
		    m->offset + (m->end - m->start) > g->text_offset) {
			text = m;
			break;
		}
	}
	if (!text) {
		/* An exiting process loses its mappings before it turns zombie:
		 * no mappings at all, or gone a moment later, means it exited. */
		bool empty = maps.n == 0;
		proc_maps_free(&maps);
		if (!empty && proc_alive(pid))
			usleep(20000);
		if (empty || !proc_alive(pid))
			return pp_errf(err, -ESRCH, "pid %d: the process exited", (int)pid);
		return pp_errf(err, -ENOENT, "pid %d: %s is not mapped executable", (int)pid,
			       g->exe);
	}
	g->pid = pid;
	g->bias = proc_map_bias(text, g->text_vaddr, g->text_offset);
	if (!g->pie && g->bias != 0) {
		proc_maps_free(&maps);
		return pp_errf(err, -ENOENT, "pid %d: non-PIE executable loaded at a bias", (int)pid);
	}
	g->text_start = text->start;
	g->text_limit = text->end;
	proc_maps_free(&maps);
	g->mbuckets_addr = g->vars.mbuckets ? g->vars.mbuckets + g->bias : 0;
	g->rate_addr = g->vars.mem_profile_rate ? g->vars.mem_profile_rate + g->bias : 0;
	g->cycle_addr = g->vars.mprof_cycle ? g->vars.mprof_cycle + g->bias : 0;
	if (g->vars.source == GOBIN_VARS_NONE)
		return pp_errf(err, -ENOENT,
			       "%s: runtime.mbuckets/MemProfileRate/mProfCycle not found (%s)",
			       g->exe, g->has_symtab ? "not in .symtab" :
			       "stripped, and not recognized in the runtime's code");
	if (g->vars.source == GOBIN_VARS_CODE && (rc = verify_live(g, err))) {
		g->mbuckets_addr = g->rate_addr = g->cycle_addr = 0;
		return rc;
	}
	return 0;
}

/* PF_KTHREAD in the flags field (9) of /proc/PID/stat. */
static bool is_kernel_thread(pid_t pid)
{
	struct proc_stat st;
	return proc_stat(pid, &st) == 0 && st.state != 'Z' && st.state != 'X' &&
	       (st.flags & 0x00200000UL);	/* PF_KTHREAD */
}

int gobin_open_pid(pid_t pid, struct gobin **out, struct pp_err *err)
{
	char path[64], exe[4096];
	int rc;
	*out = NULL;
	snprintf(path, sizeof(path), "/proc/%d", (int)pid);
	if (pid <= 0 || access(path, F_OK) != 0)
		return pp_errf(err, -ESRCH, "pid %d: no such process", (int)pid);
	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
	rc = proc_exe(pid, exe, sizeof(exe));
	if (rc == -ESRCH) {
		/* /proc/PID is there but has no executable: a kernel thread, or
		 * a process exiting right now. */
		if (is_kernel_thread(pid))
			return pp_errf(err, -ENOEXEC, "pid %d: not a Go program (a kernel thread)",
				       (int)pid);
		return pp_errf(err, -ESRCH, "pid %d: no such process (it exited)", (int)pid);
	}
	if (rc)
		return pp_errf(err, rc, "pid %d: cannot read /proc/%d/exe: %s", (int)pid, (int)pid,
			       strerror(-rc));
	struct gobin *g;
	rc = gobin_open(path, &g, err);
	if (rc == -ENOENT) {
		pp_err_clear(err);
		return pp_errf(err, -ESRCH, "pid %d: no such process (or a kernel thread)", (int)pid);
	}
	if (rc == -ENOEXEC) {
		pp_err_clear(err);
		return pp_errf(err, -ENOEXEC, "pid %d (%s): not a Go program", (int)pid, exe);
	}
	if (rc)
		return rc;
	free(g->exe);
	g->exe = strdup(exe);
	if (!g->exe) {
		gobin_free(g);
		return -ENOMEM;
	}
	if ((rc = gobin_attach(g, pid, err))) {
		gobin_free(g);
		return rc;
	}
	*out = g;
	return 0;
}

void gobin_free(struct gobin *g)
{
	if (!g)
		return;
	if (g->impl && __atomic_sub_fetch(&g->impl->refs, 1, __ATOMIC_ACQ_REL) == 0) {
		gosym_free(g->impl->sym);
		if (g->impl->elf)
			elf_end(g->impl->elf);
		if (g->impl->fd >= 0)
			close(g->impl->fd);
		free(g->impl->secs);
		free(g->impl);
	}
	free(g->path);
	free(g->exe);
	free(g);
}

/* ---- Live values ------------------------------------------------------ */

int gobin_read_rate(const struct gobin *g, int64_t *rate, struct pp_err *err)
{
	if (!g->rate_addr)
		return pp_errf(err, -ENOENT, "runtime.MemProfileRate not located");
	return read_exact(g, g->pid, g->rate_addr, rate, sizeof(*rate), err);
}

int gobin_read_cycle(const struct gobin *g, uint32_t *raw, struct pp_err *err)
{
	if (!g->cycle_addr)
		return pp_errf(err, -ENOENT, "runtime.mProfCycle not located");
	return read_exact(g, g->pid, g->cycle_addr, raw, sizeof(*raw), err);
}

int gobin_read_mbuckets(const struct gobin *g, uint64_t *head, struct pp_err *err)
{
	if (!g->mbuckets_addr)
		return pp_errf(err, -ENOENT, "runtime.mbuckets not located");
	return read_exact(g, g->pid, g->mbuckets_addr, head, sizeof(*head), err);
}

int gobin_enable_profiling(const struct gobin *g, int64_t rate, int64_t *old,
			   struct pp_err *err)
{
	int rc;
	if (rate <= 0)
		return pp_errf(err, -EINVAL, "rate %" PRId64 " is not positive", rate);
	if ((rc = gobin_read_rate(g, old, err)))
		return rc;
	if (*old != 0)
		return 0;
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/mem", (int)g->pid);
	int fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		return pp_errf(err, gone(e), "open %s for writing: %s", path, strerror(e));
	}
	ssize_t n = pwrite(fd, &rate, sizeof(rate), (off_t)g->rate_addr);
	int e = errno;
	close(fd);
	if (n != (ssize_t)sizeof(rate))
		return pp_errf(err, n < 0 ? gone(e) : -EIO,
			       "pid %d: writing runtime.MemProfileRate at 0x%" PRIx64 ": %s",
			       (int)g->pid, g->rate_addr, n < 0 ? strerror(e) : "short write");
	return 1;
}

/* ---- Symbolization ---------------------------------------------------- */

size_t gobin_symbolize(const struct gobin *g, uint64_t pc, struct gobin_frame *frames,
		       size_t max)
{
	if (!g->impl->sym || max == 0 || pc < g->bias)
		return 0;
	size_t n = gosym_frames(g->impl->sym, pc - g->bias, frames, max);
	for (size_t i = 0; i < n; i++)
		frames[i].entry += g->bias;
	return n;
}
