/*
 * oom_abi.h - what the OOM-capture BPF program (bpf/oom.bpf.c) and the agent
 * (agent/goheap/oom.c) exchange: the per-process map user space fills, the
 * per-victim state the BPF side keeps, and the ring buffer records a
 * capture streams.
 *
 * Why the shapes: a Go bucket's header and stack never change after the
 * bucket is created, and new buckets are prepended to runtime.mbuckets.
 * User space therefore mirrors headers + stacks ahead of time (process
 * reads), and at OOM time the BPF walk copies only one 32-byte counter
 * record per mirrored bucket (active + the three future cycles summed:
 * the `latest` view). Buckets newer than the mirror head (or past its
 * bottom) are copied whole. At 1,000,000 buckets that is 32 MB of
 * counters, which is what bounds the ring buffer (see agent/goheap/oom.h).
 *
 * Included by BPF C (vmlinux.h types) and by user space (<stdint.h>), so
 * only fixed-width types from the __u* family are used here.
 */
#ifndef PUSHPROF_BPF_OOM_ABI_H
#define PUSHPROF_BPF_OOM_ABI_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

/* Go's bucket layout: stated once, in golayout.h. */
#include "golayout.h"

/* A bucket claiming more PCs than Go ever records is a read error. */
#define OOM_MAX_DEPTH GO_MAX_STACK
/* Counter records per ring buffer chunk. */
#define OOM_CHUNK_N 256
/* Upper bound on buckets one capture walks (bpf_loop allows 1 << 23). */
#define OOM_MAX_BUCKETS (1u << 23)

/* Value of the `targets` hash map, keyed by tgid (u32); written by user space. */
struct oom_target {
	__u64 mbuckets_addr; /* runtime address of runtime.mbuckets */
	__u64 rate_addr;     /* runtime.MemProfileRate, 0 = unknown */
	__u64 mirror_head;   /* address of the newest mirrored bucket, 0 = none */
	__u64 mirror_count;  /* buckets mirrored from mirror_head downwards */
	__u64 mirror_gen;    /* bumped by user space on every update */
	__u64 start_ticks;   /* /proc/PID/stat start time (USER_HZ ticks); 0 = skip */
	__u32 max_buckets;   /* walk at most this many */
	__u32 max_depth;     /* frames kept per new bucket (<= OOM_MAX_DEPTH) */
};

enum oom_state {
	OOM_ST_FREE = 0,
	OOM_ST_MARKED = 1,    /* mark_victim seen */
	OOM_ST_CAPTURING = 2, /* one thread of the victim claimed it */
	OOM_ST_DONE = 3,      /* capture ended (see status) */
	OOM_ST_REPORTED = 4,  /* user space made its result; freed when the pid is gone */
};

/* Why a capture is incomplete or did not happen (bit flags). */
enum oom_flag {
	OOM_F_NOT_TRACKED = 1u << 0,	 /* victim not a tracked Go process */
	OOM_F_READ_ERROR = 1u << 1,	 /* bpf_probe_read_user failed */
	OOM_F_BUCKET_LIMIT = 1u << 2,	 /* more buckets than max_buckets */
	OOM_F_STACK_TRUNCATED = 1u << 3, /* a stack deeper than max_depth */
	OOM_F_RING_FULL = 1u << 4,	 /* ring buffer records dropped */
	OOM_F_BAD_BUCKET = 1u << 5,	 /* typ/nstk not a memProfile bucket */
	OOM_F_PID_REUSED = 1u << 6,	 /* targets entry is for an older process */
	OOM_F_NO_BUCKETS = 1u << 7,	 /* mbuckets empty (rate 0 or nothing sampled) */
	OOM_F_FROM_EXIT = 1u << 8,	 /* captured at exit, not at signal delivery */
	OOM_F_VICTIMS_FULL = 1u << 9,	 /* victims map full: no state kept */
	OOM_F_ABSENT_RECORD = 1u << 10,	 /* a counter record (partly) not resident:
						 * those words read as zeros (see oom.bpf.c) */
};

/* Value of the `victims` hash map, keyed by tgid; the source of truth
 * user space reconciles against, so nothing is lost when the ring is full. */
struct oom_victim {
	__u32 state;	  /* enum oom_state */
	__u32 flags;	  /* enum oom_flag */
	__u64 capture_id; /* unique per mark (global counter) */
	__u32 tgid, tid;  /* tid: the task mark_victim named */
	__u32 uid;
	__s32 oom_score_adj;
	char comm[16];
	/* RSS figures at mark time, in kB, like the tracepoint prints them */
	__u64 total_vm_kb, anon_rss_kb, file_rss_kb, shmem_rss_kb, pgtables_kb;
	__u64 mark_ns;				     /* bpf_ktime_get_ns at mark */
	__u64 start_ns, end_ns;			     /* the walk */
	__u64 buckets;				     /* walked */
	__u64 new_buckets;			     /* copied whole */
	__u64 dropped;				     /* ring records lost */
	__u64 head;				     /* mbuckets value at capture */
	__s64 rate;				     /* MemProfileRate at capture, -1 = unknown */
	__u64 mirror_head, mirror_count, mirror_gen; /* mirror the walk used */
	__s32 read_error;			     /* first bpf_probe_read_user error */
	__u32 retries;	      /* claims given back after an unmapped first read */
	__u64 start_boottime; /* the victim's group leader, ns: tells pid reuse */
	__u64 absent_records; /* counter records with words on absent pages */
};

enum oom_rec_type {
	OOM_REC_MARK = 1, /* struct oom_rec_victim: victim marked */
	OOM_REC_BEGIN,	  /* struct oom_rec_victim: walk starts */
	OOM_REC_BUCKET,	  /* struct oom_rec_bucket: a bucket copied whole */
	OOM_REC_COUNTERS, /* struct oom_rec_counters: mirrored buckets' counters */
	OOM_REC_END,	  /* struct oom_rec_victim: walk ended, final state */
};

struct oom_rec_hdr {
	__u32 type; /* enum oom_rec_type */
	__u32 tgid;
	__u64 capture_id;
};

/* A runtime.memRecordCycle (golayout.h): active + future[0..2] summed. */
struct oom_counts {
	__u64 allocs, frees, alloc_bytes, free_bytes;
};
_Static_assert(sizeof(struct oom_counts) == sizeof(struct go_rt_memrec_cycle), "oom_counts");

struct oom_rec_victim {
	struct oom_rec_hdr h;
	struct oom_victim v;
};

struct oom_rec_bucket {
	struct oom_rec_hdr h;
	__u64 index; /* position in the walk, 0 = newest */
	__u64 addr;
	__u64 size;  /* allocation size of the bucket */
	__u32 nstk;  /* frames in the process */
	__u32 nkept; /* frames in stk[] */
	struct oom_counts c;
	__u64 stk[OOM_MAX_DEPTH]; /* only nkept sent */
};

struct oom_rec_counters {
	struct oom_rec_hdr h;
	__u64 mirror_pos; /* mirror position of c[0]; 0 = mirror head */
	__u64 first_addr; /* address of that bucket, to check alignment */
	__u32 n;
	__u32 pad;
	struct oom_counts c[OOM_CHUNK_N]; /* only n sent */
};

#endif
