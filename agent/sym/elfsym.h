/*
 * elfsym.h - what the symbolizer needs from one ELF file, read once.
 *
 * Loading copies out everything later lookups need (sorted function
 * symbols, PT_LOAD segments, build ids, Go version, the Go pclntab and
 * its inline-tree data), so no file descriptor or mmap stays open: a file
 * truncated or replaced afterwards cannot fault the agent, and memory use
 * is known (elfsym.bytes) for the cache's budget.
 *
 * The file itself is opened and parsed by elffile.c (elffile.h: safe
 * opens, bounds, and the rules for build ids and the Go version, which
 * elfsym copies unchanged); a caller that needs more of the file (gobin,
 * frameless) keeps its elffile and calls elfsym_new() on it, so
 * the file is parsed once; the modules that read the same executable
 * share one elfsym through elfshare.h. The Go tables are decoded by gopclntab.c, which
 * bounds every offset.
 */
#ifndef PUSHPROF_ELFSYM_H
#define PUSHPROF_ELFSYM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "elffile.h"
#include "err.h"
#include "fileutil.h"
#include "gopclntab.h"

struct elfsym_sym {
	uint64_t addr, size;
	uint32_t name; /* offset into elfsym.names */
};

struct elfsym {
	uint16_t e_type; /* ET_EXEC, ET_DYN, ... */
	/* The elffile's labels (elffile.h says how each is rendered). */
	char gnu_build_id[ELFFILE_BUILD_ID_HEX]; /* "" if none */
	char go_build_id[ELFFILE_GO_BUILD_ID];	 /* "" if none */
	char go_version[64]; /* runtime.buildVersion, "go1.19.8"; "" if not Go */
	/* What Parca Agent's __meta_process_executable_* labels say: the
	 * first string of .comment ("GCC: (Debian 12.2.0-14) 12.2.0"), "" if
	 * none; a PT_INTERP (dynamically linked); a .symtab (not stripped). */
	char comment[96];
	bool has_interp, has_symtab;

	struct elffile_load loads[ELFFILE_MAX_LOADS];
	size_t nloads;

	/* Function symbols (.symtab, else .dynsym), sorted by addr, one per
	 * address. For Go binaries, symbols inside the pclntab's text range
	 * are left out: the pclntab has them, with files and lines. */
	struct elfsym_sym *syms;
	size_t nsyms;
	char *names;
	size_t names_len;
	bool from_dynsym; /* only .dynsym was there (stripped library) */

	/* Go: NULL when the file has no usable .gopclntab. */
	struct gopcln *pcln;
	uint8_t *pcln_buf;
	size_t pcln_len;
	uint8_t *gofunc_buf; /* NULL: no inlined frames */
	size_t gofunc_len;
	uint64_t gofunc_addr; /* link-time address of go.func.* (0 unknown) */

	size_t bytes; /* heap memory held by this object */

	/* Sharing (elfshare.h): set when published there; the fields are
	 * the registry's (read and written under its lock). An elfsym not
	 * published has one owner. */
	bool shared;
	unsigned refs;
	struct pp_file_id id; /* of the file it was read from (elfshare.h) */
	struct elfsym *share_next;
};

/* Where an elfsym's symbols come from (elfsym_new): exactly one of */
struct elfsym_opts {
	const struct elffile *file;	/* a parsed file (not kept) */
	const char *path;		/* a path the operator gives (tools, tests): a plain
					 * open; a process's files go through elffile_new()'s
					 * ELFFILE_FROM_LINK or the symbolizer's own checks */
	const void *buf;		/* an image in memory (a vdso, a fuzz input), len */
	size_t len;			/* bytes; buf is not kept */
	/* buf: code of executable sections that no symbol covers gets a
	 * symbol per gap named "<gap_prefix>+0x<start>" (the vDSO's static
	 * helpers: stable names across processes instead of raw addresses);
	 * NULL: none */
	const char *gap_prefix;
};

/* Load symbols (ELF symbols, Go pclntab) as o says: 0 with *out set, or
 * -ENOMEM / -EINVAL (a broken symbol table, no source given) / the open's
 * and parse's codes, with err set and *out NULL. */
int elfsym_new(const struct elfsym_opts *o, struct elfsym **out, struct pp_err *err);
/* Drops the caller's reference: frees e unless it is published
 * (elfshare.h) and another module still holds it. NULL-safe. */
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
 * without loading the whole file (elffile_find_symbols() on the file open
 * at fd). -ENOENT if absent.
 */
int elfsym_find_symbol_fd(int fd, const char *name, uint64_t *value, uint64_t *size,
			  struct pp_err *err);

#endif
