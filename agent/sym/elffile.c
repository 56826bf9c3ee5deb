/*
 * elffile.c - open and parse an ELF file once: headers, segments, the
 * section table, notes, Go build info (see elffile.h).
 *
 * libelf parses and validates the ELF, program and section headers; section
 * contents are read here with explicit range checks (pread for files,
 * memcpy for memory images) into plain heap buffers.
 */
#include "elffile.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bytes.h"
#include "metrics.h"
#include "procinfo.h"

/* A symbol table read once per elffile (elfsym's functions and gobin's
 * variables come from the same copy). */
struct symtab_copy {
	const struct elffile_sec *sh; /* NULL: slot unused */
	uint8_t *syms, *strs;
	uint64_t strsz;
	long n; /* -1: unusable */
};

struct elffile_src {
	int fd; /* -1 for memory */
	bool own_fd;
	uint8_t *mem; /* our copy of a memory image */
	Elf *elf;
	struct symtab_copy tabs[2]; /* .symtab and .dynsym, when read */
};

bool elffile_read(const struct elffile *f, uint64_t off, uint64_t len, void *dst)
{
	const struct elffile_src *s = f->src;
	if (off > f->size || len > f->size - off)
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

uint8_t *elffile_dup(const struct elffile *f, uint64_t off, uint64_t len)
{
	/* Bounds first: a hostile size must not even cause the allocation. */
	if (len > ELFFILE_MAX_SECTION || off > f->size || len > f->size - off)
		return NULL;
	uint8_t *p = malloc(len ? len : 1);
	if (!p)
		return NULL;
	if (!elffile_read(f, off, len, p)) {
		free(p);
		return NULL;
	}
	return p;
}

const struct elffile_sec *elffile_section(const struct elffile *f, const char *name)
{
	for (size_t i = 0; i < f->nsecs; i++)
		if (!strcmp(f->secs[i].name, name))
			return &f->secs[i];
	return NULL;
}

const struct elffile_sec *elffile_section_ending(const struct elffile *f, const char *suffix)
{
	size_t nl = strlen(suffix);
	for (size_t i = 0; i < f->nsecs; i++) {
		size_t l = strlen(f->secs[i].name);
		if (l >= nl && !strcmp(f->secs[i].name + l - nl, suffix))
			return &f->secs[i];
	}
	return NULL;
}

const struct elffile_sec *elffile_section_holding(const struct elffile *f, uint64_t addr)
{
	for (size_t i = 0; i < f->nsecs; i++) {
		const struct elffile_sec *sh = &f->secs[i];
		if ((sh->flags & SHF_ALLOC) && sh->type == SHT_PROGBITS && addr >= sh->addr &&
		    addr - sh->addr < sh->size)
			return sh;
	}
	return NULL;
}

bool elffile_vaddr_to_off(const struct elffile *f, uint64_t va, uint64_t len, uint64_t *off)
{
	for (size_t i = 0; i < f->nloads; i++) {
		const struct elffile_load *l = &f->loads[i];
		if (va >= l->vaddr && va - l->vaddr < l->filesz &&
		    len <= l->filesz - (va - l->vaddr)) {
			*off = l->offset + (va - l->vaddr);
			return true;
		}
	}
	return false;
}

size_t elffile_read_code(const struct elffile *f, uint64_t addr, void *buf, size_t max)
{
	for (size_t i = 0; i < f->nloads; i++) {
		const struct elffile_load *l = &f->loads[i];
		if (!(l->flags & PF_X) || addr < l->vaddr || addr - l->vaddr >= l->filesz)
			continue;
		if (max > l->filesz - (addr - l->vaddr))
			max = l->filesz - (addr - l->vaddr);
		return elffile_read(f, l->offset + (addr - l->vaddr), max, buf) ? max : 0;
	}
	return 0;
}

/* ---- notes -------------------------------------------------------------- */

static void go_build_id(char *out, const uint8_t *desc, size_t n)
{
	size_t i = 0;
	while (i < n && desc[i] >= 0x20 && desc[i] < 0x7f)
		i++;
	if (i == n && n < ELFFILE_GO_BUILD_ID) {
		memcpy(out, desc, n);
		out[n] = '\0';
	} else if (i < n && 2 * n < ELFFILE_GO_BUILD_ID) {
		pp_hex(out, ELFFILE_GO_BUILD_ID, desc, n);
	}
}

void elffile_parse_notes(const uint8_t *p, size_t len, char *gnu, char *go)
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
		if (gnu && namesz == 4 && !memcmp(name, "GNU", 4) && type == NT_GNU_BUILD_ID &&
		    descsz > 0 && descsz <= 64 && !gnu[0])
			pp_hex(gnu, ELFFILE_BUILD_ID_HEX, desc, descsz);
		else if (go && namesz == 4 && !memcmp(name, "Go\0\0", 4) && type == 4 &&
			 descsz > 0 && !go[0])
			go_build_id(go, desc, descsz);
	}
}

static void load_notes(struct elffile *f)
{
	size_t nph;
	if (elf_getphdrnum(f->src->elf, &nph) == 0) {
		for (size_t i = 0; i < nph && i < 256; i++) {
			GElf_Phdr ph;
			if (!gelf_getphdr(f->src->elf, (int)i, &ph) || ph.p_type != PT_NOTE ||
			    ph.p_filesz > 1 << 20)
				continue;
			uint8_t *b = elffile_dup(f, ph.p_offset, ph.p_filesz);
			if (b) {
				elffile_parse_notes(b, ph.p_filesz, f->gnu_build_id,
						    f->go_build_id);
				free(b);
			}
		}
	}
	/* Sections only when the segments left something out (a Go build
	 * id note outside PT_NOTE, say). */
	if (f->gnu_build_id[0] && (f->go_build_id[0] || !f->go_version[0]))
		return;
	for (size_t i = 0; i < f->nsecs; i++) {
		const struct elffile_sec *sh = &f->secs[i];
		if (sh->type != SHT_NOTE || sh->size > 1 << 20)
			continue;
		uint8_t *b = elffile_dup(f, sh->offset, sh->size);
		if (b) {
			elffile_parse_notes(b, sh->size, f->gnu_build_id, f->go_build_id);
			free(b);
		}
	}
}

/* The first string of .comment, the toolchain's stamp; printable ASCII
 * only, at most sizeof(f->comment) - 1 bytes read. */
static void load_comment(struct elffile *f)
{
	char b[sizeof(f->comment)];
	const struct elffile_sec *sh = elffile_section(f, ".comment");

	if (!sh || sh->type != SHT_PROGBITS || !sh->size)
		return;
	uint64_t n = sh->size < sizeof(b) - 1 ? sh->size : sizeof(b) - 1;
	if (!elffile_read(f, sh->offset, n, b))
		return;
	b[n] = '\0';
	size_t i = 0;
	while (b[i] >= 0x20 && b[i] < 0x7f)
		i++;
	if (i == n && sh->size > n)
		return; /* cut: not a whole string */
	b[i] = '\0';
	memcpy(f->comment, b, i + 1);
}

/* ---- Go build info ------------------------------------------------------ */

static void set_version(struct elffile *f, const uint8_t *s, uint64_t n)
{
	if (n < 3 || n >= sizeof(f->go_version) || memcmp(s, "go", 2) != 0)
		return;
	for (uint64_t i = 0; i < n; i++)
		if (s[i] < 0x20 || s[i] >= 0x7f)
			return;
	memcpy(f->go_version, s, n);
	f->go_version[n] = '\0';
}

/* runtime.buildVersion from the "\xff Go buildinf:" blob (debug/buildinfo):
 * ptrsize, flags; flags&2 -> inline varint strings at 32 (Go >= 1.18),
 * else a pointer to a Go string header (64-bit little-endian only). */
static void load_buildinfo(struct elffile *f)
{
	static const uint8_t magic[14] = "\xff Go buildinf:";
	const struct elffile_sec *sh = elffile_section(f, ".go.buildinfo");
	uint64_t off = 0, len = 0;
	if (sh && sh->type == SHT_PROGBITS) {
		off = sh->offset;
		len = sh->size;
	} else {
		for (size_t i = 0; i < f->nloads; i++)
			if (f->loads[i].flags & PF_W) {
				off = f->loads[i].offset;
				len = f->loads[i].filesz;
				break;
			}
	}
	if (len > 64 * 1024)
		len = 64 * 1024;
	if (len < 32)
		return;
	uint8_t *b = elffile_dup(f, off, len);
	if (!b)
		return;
	for (size_t i = 0; i + 32 <= len; i += 16) {
		if (memcmp(b + i, magic, sizeof(magic)) != 0)
			continue;
		f->go_buildinfo = true;
		uint8_t ptrsize = b[i + 14], flags = b[i + 15];
		if (flags & 2) {
			size_t pos = i + 32;
			uint64_t n;
			if (pp_uvarint(b, len, &pos, &n) && n <= len - pos)
				set_version(f, b + pos, n);
		} else if (ptrsize == 8 && !(flags & 1)) {
			uint64_t sp, hdr_off, str[2], soff;
			memcpy(&sp, b + i + 16, 8);
			uint8_t tmp[64];
			if (elffile_vaddr_to_off(f, sp, 16, &hdr_off) &&
			    elffile_read(f, hdr_off, 16, str) && str[1] < sizeof(tmp) &&
			    elffile_vaddr_to_off(f, str[0], str[1], &soff) &&
			    elffile_read(f, soff, str[1], tmp))
				set_version(f, tmp, str[1]);
		}
		break;
	}
	free(b);
}

/* ---- symbols and sections ----------------------------------------------- */

const char *elffile_str(const uint8_t *strs, uint64_t strsz, uint32_t off)
{
	if (off >= strsz || !memchr(strs + off, 0, strsz - off))
		return NULL;
	return (const char *)strs + off;
}

long elffile_symtab(const struct elffile *f, const struct elffile_sec *sh, const uint8_t **syms,
		    const uint8_t **strs, uint64_t *strsz)
{
	struct symtab_copy *c = NULL;
	for (size_t i = 0; i < 2 && !c; i++)
		if (f->src->tabs[i].sh == sh || !f->src->tabs[i].sh)
			c = &f->src->tabs[i];
	if (!c)
		return -1; /* a third table: not one elfsym or gobin reads */
	if (!c->sh) {
		c->sh = sh;
		c->n = -1;
		if (sh->entsize == sizeof(Elf64_Sym) && sh->link < f->nsecs &&
		    f->secs[sh->link].type == SHT_STRTAB) {
			const struct elffile_sec *str = &f->secs[sh->link];
			c->syms = elffile_dup(f, sh->offset, sh->size);
			c->strs = elffile_dup(f, str->offset, str->size);
			if (c->syms && c->strs) {
				c->strsz = str->size;
				c->n = (long)(sh->size / sizeof(Elf64_Sym));
			}
		}
	}
	if (c->n < 0)
		return -1;
	*syms = c->syms;
	*strs = c->strs;
	*strsz = c->strsz;
	return c->n;
}

size_t elffile_find_symbols(const struct elffile *f, const char *const *names, size_t n,
			    uint64_t *values, uint64_t *sizes)
{
	size_t found = 0;
	bool *got = calloc(n ? n : 1, sizeof(*got));
	if (!got)
		return 0;
	for (int pass = 0; pass < 2 && found < n; pass++) {
		for (size_t k = 0; k < f->nsecs && found < n; k++) {
			const struct elffile_sec *sh = &f->secs[k];
			if (sh->type != (pass == 0 ? SHT_SYMTAB : SHT_DYNSYM))
				continue;
			const uint8_t *raw, *strs;
			uint64_t strsz;
			long ns = elffile_symtab(f, sh, &raw, &strs, &strsz);
			for (long i = 1; i < ns && found < n; i++) {
				Elf64_Sym sym;
				memcpy(&sym, raw + (size_t)i * sizeof(sym), sizeof(sym));
				const char *nm = elffile_str(strs, strsz, sym.st_name);
				if (!nm || sym.st_shndx == SHN_UNDEF)
					continue;
				for (size_t j = 0; j < n; j++)
					if (!got[j] && !strcmp(nm, names[j])) {
						got[j] = true;
						values[j] = sym.st_value;
						if (sizes)
							sizes[j] = sym.st_size;
						found++;
					}
			}
		}
	}
	free(got);
	return found;
}

int elffile_read_section(const struct elffile *f, const char *name, uint64_t max, uint8_t **buf,
			 size_t *len, uint64_t *addr, struct pp_err *err)
{
	const struct elffile_sec *sh = elffile_section(f, name);
	*buf = NULL;
	*len = 0;
	if (!sh || sh->type == SHT_NOBITS)
		return pp_errf(err, -ENOENT, "elf: no section %s", name);
	if (sh->size > max)
		return pp_errf(err, -E2BIG, "elf: section %s too large (%llu bytes)", name,
			       (unsigned long long)sh->size);
	*buf = elffile_dup(f, sh->offset, sh->size);
	if (!*buf)
		return pp_errf(err, -EINVAL, "elf: section %s out of the file", name);
	*len = (size_t)sh->size;
	*addr = sh->addr;
	return 0;
}

/* ---- open / close ------------------------------------------------------- */

static int load_tables(struct elffile *f, struct pp_err *err)
{
	Elf *elf = f->src->elf;
	GElf_Ehdr eh;
	if (elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &eh))
		return pp_errf(err, -ENOEXEC, "elf: not an ELF file");
	if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB)
		return pp_errf(err, -ENOEXEC, "elf: only 64-bit little-endian ELF is supported");
	f->e_type = eh.e_type;
	f->e_machine = eh.e_machine;
	size_t nph;
	if (elf_getphdrnum(elf, &nph) == 0) {
		for (size_t i = 0; i < nph && f->nloads < ELFFILE_MAX_LOADS; i++) {
			GElf_Phdr ph;
			if (!gelf_getphdr(elf, (int)i, &ph))
				continue;
			if (ph.p_type == PT_INTERP)
				f->has_interp = true;
			if (ph.p_type != PT_LOAD)
				continue;
			f->loads[f->nloads++] = (struct elffile_load){ .vaddr = ph.p_vaddr,
								       .offset = ph.p_offset,
								       .filesz = ph.p_filesz,
								       .memsz = ph.p_memsz,
								       .flags = ph.p_flags };
		}
	}
	size_t shnum, shstrndx;
	if (elf_getshdrnum(elf, &shnum) != 0)
		shnum = 0;
	if (shnum > ELFFILE_MAX_SECTIONS)
		return pp_errf(err, -ENOEXEC, "elf: %zu sections (limit %d)", shnum,
			       ELFFILE_MAX_SECTIONS);
	if (elf_getshdrstrndx(elf, &shstrndx) != 0)
		shstrndx = SHN_UNDEF;
	f->secs = calloc(shnum ? shnum : 1, sizeof(*f->secs));
	if (!f->secs)
		return pp_errf(err, -ENOMEM, "elf: out of memory");
	/* secs[i] is table entry i, so sh_link indexes it; entry 0 and any
	 * header libelf cannot read stay empty (SHT_NULL, no name) */
	f->nsecs = shnum;
	for (size_t i = 0; i < shnum; i++)
		f->secs[i].name = "";
	Elf_Scn *scn = NULL;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		size_t ndx = elf_ndxscn(scn);
		if (ndx >= shnum || !gelf_getshdr(scn, &sh))
			continue;
		const char *name =
			shstrndx != SHN_UNDEF ? elf_strptr(elf, shstrndx, sh.sh_name) : NULL;
		f->secs[ndx] = (struct elffile_sec){ .name = name ? name : "",
						     .addr = sh.sh_addr,
						     .size = sh.sh_size,
						     .offset = sh.sh_offset,
						     .flags = sh.sh_flags,
						     .entsize = sh.sh_entsize,
						     .type = sh.sh_type,
						     .link = sh.sh_link };
		if (sh.sh_type == SHT_SYMTAB)
			f->has_symtab = true;
	}
	return 0;
}

static pthread_once_t elf_once = PTHREAD_ONCE_INIT;
static bool elf_ok;

static void elf_init(void)
{
	elf_ok = elf_version(EV_CURRENT) != EV_NONE;
}

static void src_free(struct elffile_src *src)
{
	if (src->elf)
		elf_end(src->elf);
	if (src->own_fd)
		close(src->fd);
	free(src->mem);
	for (size_t i = 0; i < 2; i++) {
		free(src->tabs[i].syms);
		free(src->tabs[i].strs);
	}
	free(src);
}

/* Parse what src reads (src is the new elffile's, or freed on failure). */
static int open_src(struct elffile_src *src, uint64_t size, struct elffile **out,
		    struct pp_err *err)
{
	*out = NULL;
	pthread_once(&elf_once, elf_init); /* elfsym, gobin, frameless: any thread */
	if (!elf_ok) {
		src_free(src);
		return pp_errf(err, -ENOSYS, "elf: libelf: %s", elf_errmsg(-1));
	}
	struct elffile *f = calloc(1, sizeof(*f));
	if (!f) {
		src_free(src);
		return pp_errf(err, -ENOMEM, "elf: out of memory");
	}
	f->src = src;
	f->size = size;
	src->elf = src->fd >= 0 ? elf_begin(src->fd, ELF_C_READ, NULL)
				: elf_memory((char *)src->mem, size);
	int rc;
	if (!src->elf)
		rc = pp_errf(err, -ENOEXEC, "elf: %s", elf_errmsg(-1));
	else
		rc = load_tables(f, err);
	if (rc < 0) {
		elffile_free(f);
		return rc;
	}
	load_buildinfo(f);
	load_notes(f);
	load_comment(f);
	*out = f;
	return 0;
}

static int open_fd(int fd, bool own, struct elffile **out, struct pp_err *err)
{
	struct stat st;
	*out = NULL;
	if (fstat(fd, &st) < 0) {
		int e = errno;
		if (own)
			close(fd);
		return pp_errf(err, -e, "elf: fstat: %s", strerror(e));
	}
	if (!S_ISREG(st.st_mode)) {
		if (own)
			close(fd);
		return pp_errf(err, -EINVAL, "elf: not a regular file");
	}
	struct elffile_src *src = calloc(1, sizeof(*src));
	if (!src) {
		if (own)
			close(fd);
		return pp_errf(err, -ENOMEM, "elf: out of memory");
	}
	src->fd = fd;
	src->own_fd = own;
	int rc = open_src(src, (uint64_t)st.st_size, out, err);
	if (rc == 0)
		metric_inc("pushprof_elf_files_parsed_total",
			   "ELF files opened and their headers, sections and notes parsed "
			   "(elffile.c; images in memory not counted).",
			   NULL, 1);
	return rc;
}

static int open_link(const char *path, uint64_t max_size, struct elffile **out, struct stat *st,
		     struct pp_err *err)
{
	struct stat st0;
	*out = NULL;
	int fd = proc_open_link(path, max_size, st ? st : &st0);
	if (fd < 0)
		return pp_errf(err, fd, "open %s: %s", path,
			       fd == -EINVAL  ? "not a regular file on a trusted filesystem"
			       : fd == -EFBIG ? "larger than the limit"
					      : strerror(-fd));
	int rc = open_fd(fd, true, out, err);
	if (rc < 0)
		pp_err_wrap(err, "%s", path);
	return rc;
}

static int open_mem(const void *buf, size_t len, struct elffile **out, struct pp_err *err)
{
	*out = NULL;
	struct elffile_src *src = calloc(1, sizeof(*src));
	/* libelf's elf_memory wants a writable buffer; give it a copy. */
	uint8_t *copy = malloc(len ? len : 1);
	if (!src || !copy) {
		free(src);
		free(copy);
		return pp_errf(err, -ENOMEM, "elf: out of memory");
	}
	memcpy(copy, buf, len);
	src->fd = -1;
	src->mem = copy;
	return open_src(src, len, out, err);
}

int elffile_new(const struct elffile_opts *o, struct elffile **out, struct pp_err *err)
{
	*out = NULL;
	switch (o->from) {
	case ELFFILE_FROM_FD:
		return open_fd(o->fd, false, out, err);
	case ELFFILE_FROM_LINK:
		return open_link(o->link, o->max_size, out, o->st, err);
	case ELFFILE_FROM_MEM:
		return open_mem(o->buf, o->len, out, err);
	}
	return pp_errf(err, -EINVAL, "elf: no source given");
}

void elffile_free(struct elffile *f)
{
	if (!f)
		return;
	if (f->src)
		src_free(f->src);
	free(f->secs);
	free(f);
}
