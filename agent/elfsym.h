/*
 * elfsym.h - what the symbolizer needs from one ELF file, read once.
 *
 * Loading copies out everything later lookups need (sorted function
 * symbols, PT_LOAD segments, build ids, Go version, the Go pclntab and
 * its inline-tree data), so no file descriptor or mmap stays open: a file
 * truncated or replaced afterwards cannot fault the agent, and memory use
 * is known (elfsym.bytes) for the cache's budget.
 *
 * ELF files are hostile input. libelf validates headers; every section
 * and segment range is checked against the file size and a per-section cap
 * before it is read; the Go tables are decoded by gopclntab.c, which bounds
 * every offset. Only 64-bit little-endian ELF is accepted (the agent runs on
 * x86-64 and arm64 Linux).
 */
#ifndef PUSHPROF_ELFSYM_H
#define PUSHPROF_ELFSYM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "gopclntab.h"

/* Largest section copied out of a file (symbol tables, pclntab). */
#define ELFSYM_MAX_SECTION (512u << 20)
#define ELFSYM_MAX_LOADS 16

struct elfsym_load {
	uint64_t vaddr, offset, filesz, memsz;
	uint32_t flags;		/* PF_R/PF_W/PF_X */
};

struct elfsym_sym {
	uint64_t addr, size;
	uint32_t name;		/* offset into elfsym.names */
};

struct elfsym {
	uint16_t e_type;		/* ET_EXEC, ET_DYN, ... */
	char gnu_build_id[2 * 64 + 1];	/* hex of NT_GNU_BUILD_ID, "" if none */
	char go_build_id[256];		/* Go's build id note ("Go\0\0" type 4), "" if none */
	char go_version[64];		/* runtime.buildVersion, "go1.19.8"; "" if not Go */
	/* What Parca Agent's __meta_process_executable_* labels say: the
	 * first string of .comment ("GCC: (Debian 12.2.0-14) 12.2.0"), "" if
	 * none; a PT_INTERP (dynamically linked); a .symtab (not stripped). */
	char comment[96];
	bool has_interp, has_symtab;

	struct elfsym_load loads[ELFSYM_MAX_LOADS];
	size_t nloads;

	/* Function symbols (.symtab, else .dynsym), sorted by addr, one per
	 * address. For Go binaries, symbols inside the pclntab's text range
	 * are left out: the pclntab has them, with files and lines. */
	struct elfsym_sym *syms;
	size_t nsyms;
	char *names;
	size_t names_len;
	bool from_dynsym;	/* only .dynsym was there (stripped library) */

	/* Go: NULL when the file has no usable .gopclntab. */
	struct gopcln *pcln;
	uint8_t *pcln_buf;
	size_t pcln_len;
	uint8_t *gofunc_buf;	/* NULL: no inlined frames */
	size_t gofunc_len;
	uint64_t gofunc_addr;	/* link-time address of go.func.* (0 unknown) */

	size_t bytes;		/* heap memory held by this object */
};

/* Load from an open file (read with pread; fd is not kept). */
int elfsym_load_fd(int fd, struct elfsym **out, struct pp_err *err);
int elfsym_load_path(const char *path, struct elfsym **out, struct pp_err *err);
/* Load from memory (the fuzz target, a vdso image). buf is not kept. */
int elfsym_load_mem(const void *buf, size_t len, struct elfsym **out, struct pp_err *err);
void elfsym_free(struct elfsym *e);

/*
 * File offset -> link-time virtual address, through the PT_LOAD segment
 * whose file range holds off. False if none does. For an address A in a
 * mapping (start, offset) of a process: vaddr of (A - start + offset).
 */
bool elfsym_off_to_vaddr(const struct elfsym *e, uint64_t off, uint64_t *vaddr);

/* Symbol holding vaddr (size 0 symbols extend to the next one) -> its
 * name and start; NULL when none. */
const char *elfsym_lookup(const struct elfsym *e, uint64_t vaddr, uint64_t *start);

/*
 * Any symbol (function or data, .symtab then .dynsym) by exact name,
 * without loading the whole file: for data symbols such as
 * runtime.mbuckets. -ENOENT if absent.
 */
int elfsym_find_symbol_fd(int fd, const char *name, uint64_t *value, uint64_t *size,
			  struct pp_err *err);

/*
 * A copy of section name (exact) of the file open at fd: *buf (malloc'd,
 * the caller frees), *len, *addr its link-time address. -ENOENT when
 * absent (or SHT_NOBITS), -E2BIG when larger than max, -EINVAL when not a
 * 64-bit little-endian ELF file or the section lies outside the file.
 */
int elfsym_read_section_fd(int fd, const char *name, uint64_t max, uint8_t **buf, size_t *len,
			   uint64_t *addr, struct pp_err *err);

#endif
