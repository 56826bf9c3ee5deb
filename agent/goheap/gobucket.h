/*
 * gobucket.h - one Go memory-profile bucket, read from a process and
 * checked: the one user-space decoder of the layout bpf/golayout.h states
 * (the BPF capture reads the same layout in bpf/oom.bpf.c). The goheap
 * walk (snapshots) and the OOM mirror both read buckets through it.
 *
 * A bucket is hostile input: its type must be memProfile and nstk at most
 * GO_MAX_STACK, or it is not a bucket; the stack is kept up to max_depth
 * PCs (the rest is only skipped over to reach the record).
 */
#ifndef PUSHPROF_GOBUCKET_H
#define PUSHPROF_GOBUCKET_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

#include "bpf/golayout.h"
#include "err.h"
#include "remotemem.h"

/* runtime.memRecordCycle, decoded (golayout.h: struct go_rt_memrec_cycle) */
struct go_memrec {
	uint64_t allocs, frees, alloc_bytes, free_bytes;
};

struct gobucket {
	uint64_t addr;	     /* where it is: its identity */
	uint64_t allnext;    /* the next (older) bucket, 0 = end of the list */
	uint64_t size;	     /* allocation size */
	uint64_t nstk;	     /* PCs the bucket has (<= GO_MAX_STACK) */
	uint32_t nkept;	     /* PCs in stk: nstk cut at max_depth */
	const uint64_t *stk; /* return PCs, leaf first; see gobucket_read() */
	/* with_record only: the memRecord */
	struct go_memrec active, future[3];
};

/* The read buffer a caller provides: a whole bucket of the deepest stack. */
#define GOBUCKET_BUF_WORDS (GO_BUCKET_BYTES(GO_MAX_STACK) / 8)

/* gobucket_read(): what is at addr is not a memory-profile bucket. */
#define GOBUCKET_EBAD (-EBADMSG)

/*
 * Read the bucket at addr through r into buf (GOBUCKET_BUF_WORDS words)
 * and decode it into *b. b->stk points into buf, or, with_record through
 * a cached r, into r's window (rmem_peek: no copy), valid until the next
 * read through r. with_record: also the
 * memRecord behind the whole stack (a snapshot); without, only header and
 * the kept PCs are read (the OOM mirror: records are read at OOM time).
 * Returns 0; GOBUCKET_EBAD with err "bucket 0x.. has type N, not a memory
 * profile bucket" or "bucket 0x.. claims N frames (limit 1024)"; -ESRCH
 * ("pid N: the process exited"); -ENOMEM; any other read error with err
 * "bucket 0x.. is not readable (...)".
 */
int gobucket_read(struct rmem *r, uint64_t addr, uint32_t max_depth, bool with_record,
		  uint64_t *buf, struct gobucket *b, struct pp_err *err);

#endif
