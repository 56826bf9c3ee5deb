/*
 * oom_internal.h - what the OOM watcher's files share and nothing else
 * uses: the watcher, its tracked processes (targets) with their bucket
 * mirrors, and the captures under way. Not an API: use oom.h.
 *
 *   oom.c          lifecycle: BPF load, the watcher thread, tracking,
 *                  results handed to the reporter, stats
 *   oom_mirror.c   the user-space mirror of each target's bucket headers
 *                  and stacks, and what is published to BPF
 *   oom_capture.c  ring buffer records -> captures -> one result each
 *                  (the profile built through goheap)
 *
 * Locking: w->mu guards targets, captures and results; which function
 * expects it held is said at each declaration.
 */
#ifndef PUSHPROF_OOM_INTERNAL_H
#define PUSHPROF_OOM_INTERNAL_H

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "bpf/oom_abi.h"
#include "oom.h"

struct oom_bpf;
struct ring_buffer;

struct mirror_ent {
	uint64_t addr, size;
	uint64_t off;  /* into target.pcs */
	uint32_t nstk; /* kept */
	uint32_t truncated;
};

struct target {
	pid_t pid;
	uint64_t start_ticks;
	struct gobin *g;
	char comm[16];
	/* the executable is g->exe; the cgroup path is heap-allocated (it was
	 * two fixed 5 KiB arrays per tracked program) */
	char *cgroup;
	int64_t rate;
	/* mirror, oldest first: e[n - 1] is the newest (the list head) */
	struct mirror_ent *e;
	size_t n, cap;
	uint64_t *pcs;
	size_t npcs, pcs_cap;
	uint64_t gen;
	bool frozen;	  /* a capture is pending: the mirror must not move */
	bool busy;	  /* the thread is reading it without the lock */
	bool dead;	  /* untracked while busy: the thread frees it */
	bool read_failed; /* the last mirror read failed: check the pid */
	bool budget_cut;  /* the mirror hit max_frames: captures stop at its end */
	int64_t alive_ms; /* last time /proc said the pid is this process */
	/* the process itself (pidfd_open), -1 when that failed: readable once
	 * it has exited, so liveness is one poll() for every target per pass
	 * instead of a /proc/PID/stat read each (and cannot name a reused
	 * pid). Without it, /proc/PID/stat every 5 s as before. */
	int pidfd;
	bool exited; /* the last poll found pidfd readable */
	/* idle programs are re-read less often (oom.c: pick_targets) */
	int64_t next_ms; /* no mirror refresh before this (oom_now_ms); 0 = next pass */
	unsigned idle;	 /* consecutive refreshes that found no new bucket */
};

/*
 * A mirror whose last `idle` refreshes found no new bucket waits
 * period << min(idle, OOM_IDLE_SHIFT_MAX) for the next (1 s, 2 s, then 4 s;
 * back to 1 s as soon as one finds a bucket): an idle Go program costs a
 * quarter of the reads (one process_vm_readv of the list head each), and a
 * capture of it copies at most four seconds' new buckets whole instead of
 * one second's (the ring has 1 MiB of slack for them). A target over its
 * frame budget keeps the base period (its capture stops OOM_BUDGET_SLACK
 * buckets past the mirror).
 *
 * Idle reads fall on the grid of their interval (multiples of 2 s or 4 s
 * of the monotonic clock; the first after a change of interval comes at
 * most half a period late), so idle programs are read together and the
 * watcher sleeps until the next target is due: one wake-up every 4 s for
 * any number of idle programs, not one a second (each costs more on a VM
 * than the reads it does). Exits still show within that: the pidfd poll
 * runs at every pass.
 */
#define OOM_IDLE_SHIFT_MAX 2

/* The watcher's longest sleep without targets (a node or a filter without
 * Go programs): it used to wake every second for a reconcile that finds
 * only captures whose ring records were lost, which OOM_LOSSY_MS covers. */
#define OOM_EMPTY_MS 60000

/* After ring records were lost, the watcher reconciles every second for
 * this long, idle targets or not (next_timeout in oom.c says why that is
 * enough): a capture whose every record was dropped is found within 1 s. */
#define OOM_LOSSY_MS 30000

struct cap_bucket {
	uint64_t index, addr, size;
	uint32_t nstk, nkept;
	struct oom_counts c;
	uint64_t off; /* into capture.pcs */
};

struct capture {
	uint64_t id;
	uint32_t tgid;
	struct oom_victim v; /* latest state seen (MARK, BEGIN, END) */
	bool have_mark, have_begin, have_end;
	int vrank;	    /* rank of the record c->v came from: MARK 1, BEGIN 2, END 3 */
	unsigned gone_seen; /* consecutive reconciles that found the pid gone */
	struct target *t;   /* NULL when not tracked */
	char comm[16], exe[4096], cgroup[1024];
	struct cap_bucket *nb;
	size_t nnb, nb_cap;
	uint64_t *pcs;
	size_t npcs, pcs_cap;
	/* counters by mirror position */
	struct oom_counts *mc;
	uint8_t *mc_have;
	uint64_t mc_n;
	bool misaligned;
	uint64_t bad_records;
	struct timespec seen;	   /* first record, CLOCK_MONOTONIC */
	struct timespec done_seen; /* victims map said DONE, END not yet read */
	bool done_in_map;
};

struct oom_watch {
	struct oom_watch_opts o;
	char node[256];
	struct pp_labels extra;
	struct oom_bpf *skel;
	struct ring_buffer *rb;
	int targets_fd, victims_fd;
	uint64_t ring_bytes, kernel_bytes;
	uint64_t timens_ticks; /* boottime offset of our time namespace */

	pthread_mutex_t mu;
	pthread_t thr;
	bool thr_started;
	volatile bool stop;
	bool kick;   /* a target was added: mirror now */
	int efd;     /* results ready (oom_watch_fd) */
	int wake_fd; /* in the ring's epoll set: kick or stop the thread */

	struct target **t;
	size_t nt, t_cap;
	struct pollfd *pfds; /* pick_targets' liveness poll, one per target */
	size_t pfds_cap;
	struct capture **c;
	size_t nc, c_cap;
	struct oom_result **res;
	size_t nres, res_cap;
	uint64_t profiles, events;
	uint64_t delivered, deliver_failed;
	/* ring records lost (the BPF side's stat_ring_drops) as last seen,
	 * and until when the watcher reconciles every second because of it
	 * (next_timeout): a capture whose records were all dropped is found
	 * only by the reconcile */
	uint64_t drops_seen;
	int64_t lossy_until_ms;
	/* ids of captures already reported: a record that arrives after its
	 * capture was retired (a late MARK) must not start a new one */
	uint64_t retired[256];
	unsigned nretired;
};

/* New buckets a capture may still copy whole past a mirror cut by
 * max_frames (bucket_limit then marks it incomplete). */
#define OOM_BUDGET_SLACK 1024

/* Flags that make a profile incomplete. */
#define OOM_F_INCOMPLETE                                                                   \
	(OOM_F_READ_ERROR | OOM_F_BUCKET_LIMIT | OOM_F_STACK_TRUNCATED | OOM_F_RING_FULL | \
	 OOM_F_BAD_BUCKET)

/* Grow *p (elements of elem bytes) to hold need; -ENOMEM. */
static inline int oom_grow(void **p, size_t *cap, size_t need, size_t elem)
{
	size_t nc;
	void *np;

	if (need <= *cap)
		return 0;
	nc = *cap ? *cap : 16;
	while (nc < need) {
		if (nc > SIZE_MAX / 2 / elem)
			return -ENOMEM;
		nc *= 2;
	}
	np = realloc(*p, nc * elem);
	if (!np)
		return -ENOMEM;
	*p = np;
	*cap = nc;
	return 0;
}

static inline int64_t oom_ts_ms(const struct timespec *a)
{
	return (int64_t)a->tv_sec * 1000 + a->tv_nsec / 1000000;
}

static inline int64_t oom_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return oom_ts_ms(&ts);
}

/* ---- oom.c -------------------------------------------------------------- */

/* The tracked target of pid (caller holds w->mu); *idx its index. */
struct target *oom_find_target(struct oom_watch *w, pid_t pid, size_t *idx);
/* pid is still the process that started at start_ticks (0: any). */
bool oom_pid_alive(const struct oom_watch *w, pid_t pid, uint64_t start_ticks);

/* ---- oom_mirror.c ------------------------------------------------------- */

/* Frees the gobin and the mirror. NULL is fine. */
void oom_target_free(struct target *t);
/* Write t's oom_target into the BPF map (caller holds w->mu). */
int oom_publish_target(struct oom_watch *w, struct target *t, struct pp_err *err);
/* Catch the picked mirrors up (marked busy by the caller): read without
 * w->mu, apply and publish with it; frees targets untracked meanwhile.
 * Schedules each one's next read (t->next_ms) from period (ms). */
void oom_mirror_refresh(struct oom_watch *w, struct target **picked, size_t n, int64_t period);
/* The number of mirror entries from the oldest up to and including the
 * one at addr (the head a capture's walk used), 0 when not mirrored.
 * Mirror position p (0 = that head) is then t->e[pos - 1 - p]. */
size_t oom_mirror_head_pos(const struct target *t, uint64_t addr);

/* ---- oom_capture.c ------------------------------------------------------ */

/* libbpf ring_buffer callback (ctx: the watcher); runs under w->mu. */
/*
 * Record sizes (oom_capture.c holds the one table, from bpf/oom_abi.h):
 * oom_rec_bytes() is the size of a record of type with n elements (bucket
 * frames, counters), 0 for an unknown type or n past its maximum;
 * oom_rec_size_ok() says whether size is exactly what the record at data
 * (its header and count field) says it should be.
 */
size_t oom_rec_bytes(uint32_t type, uint32_t n);
bool oom_rec_size_ok(const void *data, size_t size);
int oom_ring_cb(void *ctx, void *data, size_t size);
/* Reconcile captures with the victims map (the truth when ring records
 * were lost) and mark those that are over. Caller holds w->mu. */
void oom_reconcile(struct oom_watch *w);
/* Turn a finished capture into its one result; runs WITHOUT w->mu (see
 * oom_capture.c). NULL when out of memory. */
struct oom_result *oom_finalize(struct oom_watch *w, struct capture *c);
/* Queue r (may be NULL) and forget c. Caller holds w->mu. */
void oom_retire(struct oom_watch *w, struct capture *c, struct oom_result *r);
void oom_capture_free(struct capture *c);

#endif
