/*
 * gobin.h - what the agent needs to know about a Go executable to read its
 * heap profile from outside: is it Go, which version and build ids, where
 * the runtime's memory-profile variables live, and how to turn its PCs
 * into function/file/line.
 *
 * Variables are found through .symtab when present. Stripped builds
 * (-ldflags='-s -w') have none: there the functions of the runtime that
 * use each variable are located through .gopclntab and their RIP-relative
 * instructions decoded (amd64); every candidate found that way is checked
 * against the file (MemProfileRate's initial value is 512 KiB) and, once
 * attached, against the live process (mbuckets points at a memProfile
 * bucket). `vars.source` says which route was taken.
 *
 * Two kinds of addresses: link-time (ELF vaddr, as in the file) and runtime
 * (in the process: link-time + bias; bias != 0 only for PIE). Functions
 * taking a pid or reading memory use runtime addresses.
 *
 * Everything read from the file and from the process is hostile: sizes,
 * offsets and pointers are bounded and checked.
 */
#ifndef PUSHPROF_GOBIN_H
#define PUSHPROF_GOBIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "err.h"

/* The rate Go uses by default, and the one gobin_enable_profiling() writes. */
#define GOBIN_DEFAULT_RATE 524288

enum gobin_source {
	GOBIN_VARS_NONE = 0, /* not found */
	GOBIN_VARS_SYMTAB,   /* .symtab */
	GOBIN_VARS_CODE,     /* decoded from runtime functions (stripped binary) */
};

/* Link-time addresses of the runtime's memory-profile variables; 0 = unknown. */
struct gobin_vars {
	uint64_t mbuckets;	   /* *bucket, newest first, linked by allnext */
	uint64_t mem_profile_rate; /* int */
	uint64_t mprof_cycle;	   /* uint32: cycle << 1 | flushed */
	enum gobin_source source;
};

struct gobin_impl;

/*
 * Where reads of the target's memory go (a seam for tests and fuzz
 * targets, which supply a fake, hostile address space). Production leaves
 * gobin.mem NULL: process_vm_readv on the process.
 *
 * read() copies up to len bytes at runtime address addr into buf and
 * returns how many it copied from addr on: fewer than len when the range
 * runs into unreadable memory (as process_vm_readv), never more; or
 * -errno: -ESRCH the process is gone, -EFAULT nothing readable at addr,
 * -EPERM/-EACCES not allowed. It is called on whichever thread reads
 * through the gobin (goheap walks, gobin_read_*), must not keep buf, and
 * must be safe to call concurrently if the gobin is used that way. The
 * gobin does not own mem or ctx: both must outlive it. Reads only:
 * gobin_enable_profiling() always writes /proc/PID/mem.
 */
struct gobin_mem {
	ssize_t (*read)(void *ctx, uint64_t addr, void *buf, size_t len);
	void *ctx;
};

struct gobin {
	char *path; /* the file analyzed (e.g. /proc/PID/exe) */
	char *exe;  /* the executable's own path (label), or a copy of path */
	bool is_go;
	bool pie; /* ET_DYN: load bias applies */
	bool has_symtab;
	bool has_pclntab; /* functions, files, lines (and inlining) */
	/* The file's labels, elffile's (elffile.h says how each is rendered:
	 * the symbolizer reports the same for the same file). */
	char go_version[64];	/* "go1.19.8"; "" when unknown */
	char go_build_id[256];	/* the Go build id note; "" when absent */
	char gnu_build_id[129]; /* hex of NT_GNU_BUILD_ID; "" when absent */
	struct gobin_vars vars; /* link-time */

	/* The executable text segment (link-time), for pprof mappings. */
	uint64_t text_vaddr, text_memsz, text_offset;

	/*
	 * Filled by gobin_attach(): the process, its load bias and the
	 * runtime addresses of vars (0 = unknown). Callers that learnt the
	 * bias elsewhere (e.g. an OOM capture) may set bias themselves;
	 * gobin_symbolize() only needs bias.
	 */
	pid_t pid;
	uint64_t bias;
	uint64_t text_start, text_limit; /* runtime range of text */
	uint64_t mbuckets_addr, rate_addr, cycle_addr;

	/* NULL: process_vm_readv on the process (see struct gobin_mem).
	 * gobin_share() does not copy it: the new gobin reads its own pid. */
	const struct gobin_mem *mem;

	struct gobin_impl *impl;
};

struct gobin_opts {
	/* The file to analyze (a path the operator or a test gives, or
	 * /proc/PID/exe); opened the safe way (elffile_new, ELFFILE_FROM_LINK). */
	const char *path;
	/* With path NULL: the process whose executable (/proc/PID/exe) is
	 * analyzed and which the gobin is then attached to (gobin_attach()). */
	pid_t pid;
};

/*
 * With a path: analyze that ELF file. -ENOENT / -EACCES when it cannot be
 * opened, -ENOEXEC when it is not an ELF or not a Go program (is_go false
 * never comes back with 0). Variables not found leave vars.* 0 (err
 * explains nothing then: check vars.source).
 * With a pid: analyze /proc/PID/exe and attach. -ESRCH: no such process;
 * -ENOEXEC: not Go; -EACCES/-EPERM: not allowed; -ENOENT: a Go program
 * whose profile variables could not be located (err says which); -EAGAIN:
 * caught inside its execve() (the executable is not mapped yet): ask again
 * a moment later, do not remember the executable as untrackable.
 * Either: 0 with *out set, or negative with err filled and *out NULL;
 * -EINVAL without a path or pid. No thread. The symbols are shared with
 * other modules holding the same file (elfshare.h).
 */
int gobin_new(const struct gobin_opts *o, struct gobin **out, struct pp_err *err);

/*
 * Bind to a running process of this executable: bias from /proc/PID/maps,
 * runtime addresses, and for code-derived candidates a check against the
 * live memory. -ESRCH when the process is gone; -EAGAIN when it is inside
 * its execve() (see gobin_new).
 */
int gobin_attach(struct gobin *g, pid_t pid, struct pp_err *err);

/* Drops this gobin; the shared analysis goes with the last one. NULL-safe. */
void gobin_free(struct gobin *g);

/*
 * For another process running the same executable (replicas): a gobin
 * that shares g's analysis and symbol tables (reference counted, safe
 * across threads), attached to pid. Saves reading the ELF again and
 * holding its .gopclntab once per process. Key a cache on gobin_file_id()
 * (the executable's device and inode); attaching fails (-ENOENT) when pid
 * does not map that very file.
 */
int gobin_share(const struct gobin *g, pid_t pid, struct gobin **out, struct pp_err *err);
void gobin_file_id(const struct gobin *g, uint64_t *dev, uint64_t *ino);

/* Read the live values (attached gobin). -ESRCH when the process is gone,
 * -EFAULT when the address is not readable. */
int gobin_read_rate(const struct gobin *g, int64_t *rate, struct pp_err *err);
int gobin_read_cycle(const struct gobin *g, uint32_t *raw, struct pp_err *err);
int gobin_read_mbuckets(const struct gobin *g, uint64_t *head, struct pp_err *err);

/*
 * Opt-in (go_heap.enable_profiling): when runtime.MemProfileRate is 0,
 * write `rate` (normally GOBIN_DEFAULT_RATE) into it through
 * /proc/PID/mem so later allocations are sampled. This writes into the
 * target's memory: callers log it per process. *old gets the previous value;
 * returns 0 without writing when the rate is already non-zero (*old != 0),
 * 1 when it wrote.
 */
int gobin_enable_profiling(const struct gobin *g, int64_t rate, int64_t *old, struct pp_err *err);

/* Exactly len bytes of pid's memory (rmem_read_exact, remotemem.h): -ESRCH
 * (gone), -EFAULT (unmapped or short), -EPERM/-EACCES, with a message. */
int gobin_read_mem(pid_t pid, uint64_t addr, void *buf, size_t len, struct pp_err *err);

/*
 * rmem_read_some() (remotemem.h, the one place target memory is read)
 * through g->mem when set, else process_vm_readv on pid (g may be NULL). Up to len bytes at addr;
 * returns the count copied (short at unreadable memory) or -errno, as
 * struct gobin_mem's read(). No message: callers word their own.
 */
ssize_t gobin_read_some(const struct gobin *g, pid_t pid, uint64_t addr, void *buf, size_t len);

/*
 * The targets of RIP-relative register moves found at every byte offset of
 * code (at link-time address addr), at most max. Exposed for tests.
 */
enum { GOBIN_LOAD32, GOBIN_LOAD64, GOBIN_STORE64, GOBIN_LEA64 };
void gobin_scan_moves(const uint8_t *code, size_t len, uint64_t addr, int kind, uint64_t *out,
		      size_t *nout, size_t max);

/* One frame of a PC; the strings live as long as the gobin. */
struct gobin_frame {
	const char *function; /* "main.leak" */
	const char *file;     /* "" when unknown */
	int64_t line;	      /* 0 when unknown */
	uint64_t entry;	      /* runtime entry of the physical function */
};

/*
 * Frames at runtime address `pc` (pass return PC - 1 for return addresses),
 * innermost (inlined) first, the physical function last. Returns the number
 * of frames written (<= max), 0 when pc is not in a known function.
 */
size_t gobin_symbolize(const struct gobin *g, uint64_t pc, struct gobin_frame *frames, size_t max);

#endif
