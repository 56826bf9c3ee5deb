/*
 * remotemem.h - reading another process's memory: the one place the agent
 * calls process_vm_readv (or, in tests and fuzz targets, the fake address
 * space of a struct gobin_mem: see gobin.h).
 *
 * Two levels:
 *   rmem_read_some()  one read, as process_vm_readv: up to len bytes,
 *                     short at unreadable memory, or -errno; no message.
 *   struct rmem       a reader bound to one process that reads exactly
 *                     what is asked (a short read is -EFAULT), counts its
 *                     calls and bytes (the snapshot budget), words errors
 *                     into a struct pp_err, and optionally keeps a small
 *                     cache of windows for walks that touch many small
 *                     objects close together (the bucket list).
 *
 * Target memory is hostile and changes under us: every read is bounded by
 * the caller's buffer, nothing read is trusted beyond the call, and a
 * process that exits turns every later read into -ESRCH.
 *
 * Threading: an rmem is for one thread at a time; rmem_read_some() is
 * safe anywhere (gobin_mem readers must be too, see gobin.h).
 */
#ifndef PUSHPROF_REMOTEMEM_H
#define PUSHPROF_REMOTEMEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "err.h"

struct gobin_mem;

/* Up to len bytes at addr of pid (through mem when not NULL): the count
 * copied (fewer at unreadable memory, never more), or -ESRCH (gone),
 * -EFAULT (nothing readable at addr), -EPERM/-EACCES, -EIO (a mem reader
 * that claimed more than asked). */
ssize_t rmem_read_some(const struct gobin_mem *mem, pid_t pid, uint64_t addr, void *buf,
		       size_t len);

/* Exactly len bytes, else an error with a message: "pid N: the process
 * exited" (-ESRCH), "pid N: not allowed to read its memory" (-EPERM,
 * -EACCES), "pid N: short read at 0x..." (-EFAULT), or the errno's text. */
int rmem_read_exact(const struct gobin_mem *mem, pid_t pid, uint64_t addr, void *buf, size_t len,
		    struct pp_err *err);

#define RMEM_WINDOW (128u << 10) /* cached reads: bytes per window, most per read */
/* The first window of a walk, and of each jump to another part of the
 * heap; misses just below the last window double it up to RMEM_WINDOW. An
 * idle program's few buckets lie a few in each of several chunks: windows
 * of 128 KiB copied (and pinned the pages of) 480 KiB for 6 buckets. */
#define RMEM_WINDOW_FIRST (16u << 10)
#define RMEM_NWINDOWS 8
#define RMEM_AHEAD 1024 /* bytes a downward window reads past the request */

struct rmem_window {
	uint64_t start;
	size_t len;   /* valid bytes, 0 = empty */
	uint8_t *buf; /* RMEM_WINDOW bytes, allocated at first use */
};

struct rmem {
	const struct gobin_mem *mem; /* NULL: process_vm_readv on pid */
	pid_t pid;
	bool cached;
	uint64_t calls; /* reads issued */
	uint64_t bytes; /* bytes asked of those reads (what a budget counts) */
	/* cached only */
	struct rmem_window w[RMEM_NWINDOWS];
	unsigned next;	    /* round-robin victim */
	size_t win;	    /* the next window's size if the walk goes on down */
	uint64_t last_start; /* where the last window began */
	uint64_t last_miss; /* address of the previous miss: the walk's direction */
	unsigned ups;	    /* misses in a row above the one before */
	uint64_t run_top;   /* highest end of a miss since the last jump up */
	uint64_t floor;	    /* that of the run before: where windows stop */
};

/* No allocation here; rmem_free() releases the windows. */
void rmem_init(struct rmem *r, const struct gobin_mem *mem, pid_t pid, bool cached);
void rmem_free(struct rmem *r);

/*
 * Exactly len bytes at addr into out. Returns 0, or -ESRCH (gone), -EFAULT
 * (not all of it readable), -EPERM/-EACCES, -ENOMEM, -EINVAL (a cached
 * read longer than RMEM_WINDOW, or a range that wraps); err (may be NULL)
 * gets the message rmem_read_exact() words.
 *
 * Cached: buckets are allocated upwards in persistentalloc chunks and the
 * list runs newest first, i.e. mostly downwards, so a miss reads the
 * window that ends RMEM_AHEAD past the end of the request (the rest of an
 * object read header first) and the next objects are already there, not
 * reaching below the top of the previous downward run (a chunk already
 * walked); a walk that turns upwards gets windows that start at the
 * request instead. A window that reaches into unmapped memory falls back
 * to reading exactly the request.
 */
int rmem_read(struct rmem *r, uint64_t addr, void *out, size_t len, struct pp_err *err);

/*
 * rmem_read() without the copy, for cached readers: *at points at the len
 * bytes at addr inside one of r's windows (this process's copy: they do
 * not change under us), valid until the next call on r. The same returns
 * as rmem_read(), and -EINVAL for a reader that is not cached; *at is
 * NULL on error. The bytes are as aligned as addr is modulo 8 (windows
 * start at a page or at a request).
 */
int rmem_peek(struct rmem *r, uint64_t addr, size_t len, const uint8_t **at, struct pp_err *err);

#endif
