/*
 * golayout.h - the Go runtime's memory-profile data as it lies in a Go
 * program's memory: the one statement of it, for the BPF capture
 * (bpf/oom.bpf.c, through bpf/oom_abi.h) and for user space (agent/goheap/gobucket.c
 * decodes buckets with it; agent/goheap/gobin.c locates the globals).
 *
 * For amd64 and arm64 (8-byte uintptr, little-endian). Checked against
 * the runtime sources of go1.19.8 and go1.23.5, the two releases the tests
 * build with (/usr/lib/go-1.19/src, /usr/lib/go-1.23/src): every item
 * cites its line in both as "mprof.go:N (1.19), :M (1.23)", and
 * tests/goheap/test_golayout.py checks each citation against those
 * sources; the truth tests compare our profiles with the runtime's own for
 * both. A Go release that changes any of this must be stated here first.
 *
 * Included by BPF C (vmlinux.h types) and by user space (<linux/types.h>),
 * so only the __u* types.
 *
 * A memory-profile bucket is one allocation of persistentalloc'd memory:
 *
 *   struct go_rt_bucket   header (48 bytes)
 *   uintptr stk[nstk]     return PCs, leaf first (bucket.stk())
 *   struct go_rt_memrecord  the counters (bucket.mp(), 128 bytes)
 *
 * Buckets are created by stkbucket and never freed or changed afterwards
 * except for the memRecord; runtime.mbuckets points at the newest, and
 * allnext links each to the one created before it.
 */
#ifndef PUSHPROF_BPF_GOLAYOUT_H
#define PUSHPROF_BPF_GOLAYOUT_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

/*
 * runtime.bucket: runtime/mprof.go:62 (1.19), :75 (1.23)
 *   next *bucket; allnext *bucket; typ bucketType; hash uintptr;
 *   size uintptr; nstk uintptr
 * (1.23's leading `_ sys.NotInHeap` has size 0; 1.19 says //go:notinheap).
 */
struct go_rt_bucket {
	__u64 next;    /* hash chain: not used by us */
	__u64 allnext; /* the bucket created before this one, 0 = last */
	__u64 typ;     /* bucketType (int) */
	__u64 hash;
	__u64 size; /* allocation size: buckets are keyed by stack and size */
	__u64 nstk; /* PCs that follow the header */
};

#define GO_BUCKET_NEXT 0
#define GO_BUCKET_ALLNEXT 8
#define GO_BUCKET_TYP 16
#define GO_BUCKET_HASH 24
#define GO_BUCKET_SIZE 32
#define GO_BUCKET_NSTK 40
#define GO_BUCKET_HDR 48 /* unsafe.Sizeof(bucket{}) */
/* bucket.stk(): mprof.go:232 (1.19), :247 (1.23) - the PCs follow the header */
#define GO_BUCKET_STK GO_BUCKET_HDR

/* memProfile bucketType = 1 + iota: mprof.go:34 (1.19), :37 (1.23) */
#define GO_BUCKET_MEMPROF 1

/*
 * The most PCs a bucket holds: maxStack = 32 up to 1.22, and from 1.23 on
 * maxProfStackDepth = 1024, which bucket.stk() enforces:
 *   maxStack: mprof.go:42 (1.19)
 *   maxProfStackDepth: mprof.go:57 (1.23)
 * A larger nstk is not a bucket.
 */
#define GO_MAX_STACK 1024

/* runtime.memRecordCycle: mprof.go:134 (1.19), :148 (1.23)
 *   allocs, frees uintptr; alloc_bytes, free_bytes uintptr */
struct go_rt_memrec_cycle {
	__u64 allocs, frees, alloc_bytes, free_bytes;
};

/*
 * runtime.memRecord: mprof.go:73 (1.19), :87 (1.23)
 *   active memRecordCycle: mprof.go:118 (1.19), :132 (1.23)
 *     what the last completed GC published;
 *   future [3]memRecordCycle: mprof.go:130 (1.19), :144 (1.23)
 *     cycles not yet published, indexed by cycle % 3.
 * It follows the stack: bucket.mp(): mprof.go:238 (1.19), :257 (1.23)
 */
struct go_rt_memrecord {
	struct go_rt_memrec_cycle active;
	struct go_rt_memrec_cycle future[3];
};

#define GO_MEMREC_CYCLE_SIZE 32
#define GO_MEMRECORD_SIZE 128 /* active + future[3] */

/*
 * The globals (agent/goheap/gobin.c finds their addresses):
 *   runtime.mbuckets: mprof.go:155 (1.19), :169 (1.23)
 *     atomic.UnsafePointer (*bucket), the newest bucket
 *   runtime.mProfCycle: mprof.go:160 (1.19), :174 (1.23)
 *   type mProfCycleHolder: mprof.go:171 (1.19), :185 (1.23)
 *     value atomic.Uint32: cycle << 1 | flushed
 *   index := cycle % 3 in MemProfile: mprof.go:657 (1.19), :1016 (1.23)
 *     the future cycle runtime.MemProfile flushes (goheap's `runtime` view)
 *   runtime.MemProfileRate: mprof.go:587 (1.19), :938 (1.23)
 *     int
 */
#define GO_MPROF_CYCLE_BYTES 4
#define GO_MEMPROFILERATE_BYTES 8

#define GO_BUCKET_BYTES(nstk) (GO_BUCKET_HDR + 8 * (nstk) + GO_MEMRECORD_SIZE)

_Static_assert(sizeof(struct go_rt_bucket) == GO_BUCKET_HDR, "runtime.bucket header");
_Static_assert(__builtin_offsetof(struct go_rt_bucket, allnext) == GO_BUCKET_ALLNEXT,
	       "bucket.allnext");
_Static_assert(__builtin_offsetof(struct go_rt_bucket, typ) == GO_BUCKET_TYP, "bucket.typ");
_Static_assert(__builtin_offsetof(struct go_rt_bucket, size) == GO_BUCKET_SIZE, "bucket.size");
_Static_assert(__builtin_offsetof(struct go_rt_bucket, nstk) == GO_BUCKET_NSTK, "bucket.nstk");
_Static_assert(sizeof(struct go_rt_memrec_cycle) == GO_MEMREC_CYCLE_SIZE, "memRecordCycle");
_Static_assert(sizeof(struct go_rt_memrecord) == GO_MEMRECORD_SIZE, "memRecord");

#endif
