/*
 * elffile.h - the one way the agent opens and reads an ELF file.
 *
 * An elffile is one parse of one file: its ELF header, PT_LOAD segments
 * and section table (validated by libelf, copied out), and what labels the
 * binary: build ids, Go version, toolchain stamp. Everything above it
 * works on this handle: elfsym.c (symbols, the Go pclntab) and gobin.c
 * (Go runtime variables) take the same elffile, so a binary both need is
 * opened and parsed once, and both report the same labels because there is
 * one place that computes them.
 *
 * ELF files are hostile input. Paths from a process (/proc/PID/exe,
 * map_files) are opened by elffile_new() (ELFFILE_FROM_LINK): no open that can block
 * (FIFO, device, FUSE), regular files on trusted filesystems only, a size
 * cap (procinfo.h, proc_open_link). Every range read is checked against
 * the file size, and no section larger than ELFFILE_MAX_SECTION is copied.
 * Only 64-bit little-endian ELF is accepted (x86-64 and arm64 Linux).
 *
 * Label rules (one rendering everywhere):
 * - gnu_build_id: lowercase hex of the first NT_GNU_BUILD_ID note's bytes
 *   (PT_NOTE segments first, then SHT_NOTE sections), 1 to 64 bytes.
 * - go_build_id: Go's build id note ("Go\0\0", type 4) as text, as
 *   `go tool buildid` prints it, when all of it is printable ASCII; a note
 *   with other bytes is rendered as lowercase hex of its bytes instead
 *   (up to 127 bytes; longer: none). Never cut, never altered.
 * - go_version: runtime.buildVersion from the "\xff Go buildinf:" blob,
 *   found through .go.buildinfo, or, when that section is missing (strip,
 *   objcopy), by scanning the first writable segment for the blob.
 *   "" when not found or not "go..." printable.
 * Thread safety: an elffile is used by one thread at a time.
 */
#ifndef PUSHPROF_ELFFILE_H
#define PUSHPROF_ELFFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "err.h"

/* Largest section copied out of a file (symbol tables, pclntab). */
#define ELFFILE_MAX_SECTION (512u << 20)
#define ELFFILE_MAX_LOADS 16
/* More sections than this: refused (no linked program comes near it). */
#define ELFFILE_MAX_SECTIONS 65536
#define ELFFILE_BUILD_ID_HEX (2 * 64 + 1)
#define ELFFILE_GO_BUILD_ID 256

struct elffile_load {
	uint64_t vaddr, offset, filesz, memsz;
	uint32_t flags; /* PF_R/PF_W/PF_X */
};

struct elffile_sec {
	const char *name; /* "" when unnamed; lives as long as the elffile */
	uint64_t addr, size, offset, flags, entsize;
	uint32_t type, link;
};

struct elffile_src;

struct elffile {
	uint16_t e_type;    /* ET_EXEC, ET_DYN, ... */
	uint16_t e_machine; /* EM_X86_64, EM_AARCH64, ... */
	uint64_t size;	    /* file (or image) size */

	struct elffile_load loads[ELFFILE_MAX_LOADS]; /* PT_LOAD, in order */
	size_t nloads;
	bool has_interp; /* PT_INTERP: dynamically linked */

	struct elffile_sec *secs; /* every section, in table order */
	size_t nsecs;
	bool has_symtab; /* a .symtab: not stripped */

	char gnu_build_id[ELFFILE_BUILD_ID_HEX]; /* "" if none */
	char go_build_id[ELFFILE_GO_BUILD_ID];	 /* "" if none */
	char go_version[64];			 /* "go1.19.8"; "" if not found */
	bool go_buildinfo;			 /* the "\xff Go buildinf:" blob was found */
	/* The first string of .comment ("GCC: (Debian 12.2.0-14) 12.2.0"),
	 * printable ASCII, "" if none or longer than the buffer. */
	char comment[96];

	struct elffile_src *src; /* private */
};

/* Where an elffile's bytes come from (elffile_new). */
enum elffile_from {
	/* fd: a file open at fd, borrowed (it must stay open until
	 * elffile_free(); the elffile reads it with pread). Fails with
	 * -EINVAL (not a regular file), -ENOEXEC (not an ELF file, not 64-bit
	 * little-endian, a broken header table), -ENOMEM. */
	ELFFILE_FROM_FD,
	/* link: a path that names a process's file (/proc/PID/exe,
	 * /proc/PID/map_files/...), opened the safe way (proc_open_link: no
	 * blocking open, regular files on trusted filesystems, at most
	 * max_size bytes); the elffile owns that fd; *st (optional) gets its
	 * stat. Opening fails as proc_open_link does (-ESRCH gone, -EINVAL not
	 * a regular file on a trusted filesystem, -EFBIG, -EACCES...), parsing
	 * as for fd; err names the path. */
	ELFFILE_FROM_LINK,
	/* mem: an image in memory (a vdso, a fuzz input); buf is copied, not kept */
	ELFFILE_FROM_MEM,
};

struct elffile_opts {
	enum elffile_from from;
	int fd;			/* ELFFILE_FROM_FD */
	const char *link;	/* ELFFILE_FROM_LINK */
	uint64_t max_size;	/* ELFFILE_FROM_LINK: the largest file opened */
	struct stat *st;	/* ELFFILE_FROM_LINK: optional, the opened file's stat */
	const void *buf;	/* ELFFILE_FROM_MEM */
	size_t len;		/* ELFFILE_FROM_MEM */
};

/* Open (as o says) and parse an ELF file: 0 with *out set, or a negative
 * code (above) with err set ("elf: ...") and *out NULL. */
int elffile_new(const struct elffile_opts *o, struct elffile **out, struct pp_err *err);
void elffile_free(struct elffile *f);	/* NULL-safe */

/* len bytes at file offset off into dst; false when out of the file or
 * unreadable. */
bool elffile_read(const struct elffile *f, uint64_t off, uint64_t len, void *dst);

/* malloc'd copy of [off, off+len) (the caller frees), NULL when out of the
 * file or len > ELFFILE_MAX_SECTION. len 0 gives a 1-byte buffer. */
uint8_t *elffile_dup(const struct elffile *f, uint64_t off, uint64_t len);

/* Section by exact name; NULL when absent. */
const struct elffile_sec *elffile_section(const struct elffile *f, const char *name);
/* First section whose name ends with suffix (".gopclntab" also finds
 * ".data.rel.ro.gopclntab"); NULL when none. */
const struct elffile_sec *elffile_section_ending(const struct elffile *f, const char *suffix);
/* The allocated PROGBITS section holding link-time address addr. */
const struct elffile_sec *elffile_section_holding(const struct elffile *f, uint64_t addr);

/* Link-time [va, va+len) -> file offset, through the PT_LOAD whose file
 * part holds all of it. */
bool elffile_vaddr_to_off(const struct elffile *f, uint64_t va, uint64_t len, uint64_t *off);

/* Code: up to max file bytes at link-time address addr of an executable
 * PT_LOAD into buf. Bytes read (short at the segment's end), 0 when none. */
size_t elffile_read_code(const struct elffile *f, uint64_t addr, void *buf, size_t max);

/*
 * A copy of section name: *buf (malloc'd, the caller frees), *len, *addr
 * its link-time address. -ENOENT absent (or SHT_NOBITS), -E2BIG larger
 * than max, -EINVAL outside the file.
 */
int elffile_read_section(const struct elffile *f, const char *name, uint64_t max, uint8_t **buf,
			 size_t *len, uint64_t *addr, struct pp_err *err);

/*
 * Symbol table sh (SHT_SYMTAB or SHT_DYNSYM) and its string table: *syms
 * (Elf64_Sym entries), *strs, *strsz. Copied on first use and kept by f
 * until elffile_free() (elfsym and gobin read the same copy: one read per
 * file). Number of symbols, or -1 (bad table, out of the file, too large,
 * a third symbol table).
 */
long elffile_symtab(const struct elffile *f, const struct elffile_sec *sh, const uint8_t **syms,
		    const uint8_t **strs, uint64_t *strsz);
/* Name at off in a string table copy; NULL when not a terminated string. */
const char *elffile_str(const uint8_t *strs, uint64_t strsz, uint32_t off);

/*
 * Defined symbols by exact name, any type: .symtab first, then .dynsym,
 * each table read once for all names. values[i] (and sizes[i] when sizes
 * is given) for names[i] found, untouched otherwise. Returns how many of
 * the n names were found.
 */
size_t elffile_find_symbols(const struct elffile *f, const char *const *names, size_t n,
			    uint64_t *values, uint64_t *sizes);

/*
 * The build ids in a note area (PT_NOTE / SHT_NOTE contents, or
 * /sys/kernel/notes): fills gnu (ELFFILE_BUILD_ID_HEX bytes) and go
 * (ELFFILE_GO_BUILD_ID bytes) by the rules above when still empty; either
 * may be NULL. Bounded by len; stops at the first malformed note.
 */
void elffile_parse_notes(const uint8_t *p, size_t len, char *gnu, char *go);

#endif
