/*
 * oom.c - the OOM watcher: BPF lifecycle, tracked processes and their
 * bucket mirrors, ring buffer consumption, and turning each capture into a
 * go_heap -> pprof (goheap.h does the decoding and the profile).
 *
 * Threading: one consumer thread does everything after oom_watch_new()
 * except the initial mirror of a newly tracked process (done by the
 * caller of oom_watch_track(), outside the lock). w->mu guards targets,
 * captures and results.
 */
#include "oom.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "bpf/oom.h"
#include "bpf/oom.skel.h"
#include "gobin.h"
#include "goheap.h"
#include "log.h"
#include "metrics.h"
#include "outbox.h"
#include "pprof.h"
#include "procinfo.h"

#define MIRROR_READ_FRAMES 32	/* frames read with the header in one call */

struct mirror_ent {
	uint64_t addr, size;
	uint64_t off;		/* into target.pcs */
	uint32_t nstk;		/* kept */
	uint32_t truncated;
};

struct target {
	pid_t pid;
	uint64_t start_ticks;
	struct gobin *g;
	char comm[16];
	char exe[4096];
	char cgroup[1024];
	int64_t rate;
	/* mirror, oldest first: e[n - 1] is the newest (the list head) */
	struct mirror_ent *e;
	size_t n, cap;
	uint64_t *pcs;
	size_t npcs, pcs_cap;
	uint64_t gen;
	bool frozen;		/* a capture is pending: the mirror must not move */
	bool busy;		/* the thread is reading it without the lock */
	bool dead;		/* untracked while busy: the thread frees it */
	bool read_failed;	/* the last mirror read failed: check the pid */
	bool budget_cut;	/* the mirror hit max_frames: captures stop at its end */
	int64_t alive_ms;	/* last time /proc said the pid is this process */
};

struct cap_bucket {
	uint64_t index, addr, size;
	uint32_t nstk, nkept;
	struct oom_counts c;
	uint64_t off;		/* into capture.pcs */
};

struct capture {
	uint64_t id;
	uint32_t tgid;
	struct oom_victim v;	/* latest state seen (MARK, BEGIN, END) */
	bool have_mark, have_begin, have_end;
	int vrank;	/* rank of the record c->v came from: MARK 1, BEGIN 2, END 3 */
	unsigned gone_seen;	/* consecutive reconciles that found the pid gone */
	struct target *t;	/* NULL when not tracked */
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
	struct timespec seen;	/* first record, CLOCK_MONOTONIC */
	struct timespec done_seen;	/* victims map said DONE, END not yet read */
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
	uint64_t timens_ticks;	/* boottime offset of our time namespace */

	pthread_mutex_t mu;
	pthread_t thr;
	bool thr_started;
	volatile bool stop;
	bool kick;		/* a target was added: mirror now */
	int efd;		/* results ready (oom_watch_fd) */
	int wake_fd;		/* in the ring's epoll set: kick or stop the thread */

	struct target **t;
	size_t nt, t_cap;
	struct capture **c;
	size_t nc, c_cap;
	struct oom_result **res;
	size_t nres, res_cap;
	uint64_t profiles, events;
	uint64_t delivered, deliver_failed;
	/* ids of captures already reported: a record that arrives after its
	 * capture was retired (a late MARK) must not start a new one */
	uint64_t retired[256];
	unsigned nretired;
};

/* ------------------------------------------------------------------ */

static const struct {
	uint32_t flag;
	const char *name;
} flag_names[] = {
	{ OOM_F_NOT_TRACKED, "not_tracked" },
	{ OOM_F_READ_ERROR, "read_error" },
	{ OOM_F_BUCKET_LIMIT, "bucket_limit" },
	{ OOM_F_STACK_TRUNCATED, "stack_truncated" },
	{ OOM_F_RING_FULL, "ring_full" },
	{ OOM_F_BAD_BUCKET, "bad_bucket" },
	{ OOM_F_PID_REUSED, "pid_reused" },
	{ OOM_F_NO_BUCKETS, "no_buckets" },
	{ OOM_F_FROM_EXIT, "captured_at_exit" },
	{ OOM_F_VICTIMS_FULL, "victims_full" },
	{ OOM_F_ABSENT_RECORD, "absent_records" },
};

const char *oom_flag_name(uint32_t flag)
{
	for (size_t i = 0; i < sizeof(flag_names) / sizeof(flag_names[0]); i++)
		if (flag_names[i].flag == flag)
			return flag_names[i].name;
	return NULL;
}

/* New buckets a capture may still copy whole past a mirror cut by
 * max_frames (bucket_limit then marks it incomplete). */
#define OOM_BUDGET_SLACK 1024

/* Flags that make a profile incomplete. */
#define OOM_F_INCOMPLETE (OOM_F_READ_ERROR | OOM_F_BUCKET_LIMIT | OOM_F_STACK_TRUNCATED | \
			  OOM_F_RING_FULL | OOM_F_BAD_BUCKET)

int oom_protect_self(int score_adj, struct pp_err *err)
{
	char buf[32];
	int fd, n, rc = 0;

	if (score_adj < -1000 || score_adj > 1000)
		return pp_errf(err, -EINVAL, "oom_score_adj %d out of range -1000..1000", score_adj);
	fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return pp_errf(err, -errno, "open /proc/self/oom_score_adj: %s", strerror(errno));
	n = snprintf(buf, sizeof(buf), "%d\n", score_adj);
	if (write(fd, buf, n) != n)
		rc = pp_errf(err, -errno, "write /proc/self/oom_score_adj=%d: %s%s", score_adj,
			     strerror(errno),
			     errno == EACCES || errno == EPERM
				     ? " (lowering it needs CAP_SYS_RESOURCE)" : "");
	close(fd);
	return rc;
}

static int64_t ts_ms(const struct timespec *a)
{
	return (int64_t)a->tv_sec * 1000 + a->tv_nsec / 1000000;
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts_ms(&ts);
}

static void wake_thread(struct oom_watch *w)
{
	uint64_t one = 1;

	if (w->wake_fd >= 0 && write(w->wake_fd, &one, sizeof(one)) < 0) {
		/* counter full: the thread is awake anyway */
	}
}

static int grow(void **p, size_t *cap, size_t need, size_t elem)
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

/* ------------------------------------------------------------------ */
/* Reading the target (mirror) */

static int remote_read(pid_t pid, uint64_t addr, void *buf, size_t len, size_t *got)
{
	struct iovec l = { buf, len }, r = { (void *)(uintptr_t)addr, len };
	ssize_t n = process_vm_readv(pid, &l, 1, &r, 1, 0);

	if (n < 0)
		return -errno;
	*got = (size_t)n;
	return 0;
}

static int mirror_push_pcs(struct target *t, const uint64_t *pcs, uint32_t n, uint64_t *off)
{
	if (grow((void **)&t->pcs, &t->pcs_cap, t->npcs + n, sizeof(uint64_t)))
		return -ENOMEM;
	memcpy(t->pcs + t->npcs, pcs, (size_t)n * 8);
	*off = t->npcs;
	t->npcs += n;
	return 0;
}

/* Drop the oldest entries beyond max and compact the PC pool when it is
 * mostly garbage. */
static void mirror_trim(struct target *t, size_t max)
{
	size_t drop, live = 0;

	if (t->n <= max)
		return;
	drop = t->n - max;
	memmove(t->e, t->e + drop, max * sizeof(*t->e));
	t->n = max;
	for (size_t i = 0; i < t->n; i++)
		live += t->e[i].nstk;
	if (live * 2 < t->npcs) {
		uint64_t *np = malloc((live ? live : 1) * sizeof(uint64_t));
		size_t k = 0;

		if (!np)
			return;
		for (size_t i = 0; i < t->n; i++) {
			memcpy(np + k, t->pcs + t->e[i].off, t->e[i].nstk * 8);
			t->e[i].off = k;
			k += t->e[i].nstk;
		}
		free(t->pcs);
		t->pcs = np;
		t->npcs = k;
		t->pcs_cap = live ? live : 1;
	}
}

/* New buckets read from the target, newest first (outside the lock). */
struct mbatch {
	struct mirror_ent *ne;
	size_t nne, ne_cap;
	uint64_t *npcs;
	size_t nnp, np_cap;
	bool reached;		/* the walk met the old newest bucket */
	bool cut;		/* stopped at max_frames */
};

static void mbatch_free(struct mbatch *b)
{
	free(b->ne);
	free(b->npcs);
	memset(b, 0, sizeof(*b));
}

/*
 * Walk from the head until the newest mirrored bucket (`newest`, 0 when
 * the mirror is empty) and collect what is new. Touches no shared state:
 * runs without w->mu. Negative on errors (-ESRCH: the process is gone).
 */
static int mirror_read(const struct oom_watch *w, pid_t pid, uint64_t mbuckets_addr,
		       uint64_t newest, struct mbatch *b, struct pp_err *err)
{
	uint64_t head, cur;
	uint64_t buf[GO_BUCKET_HDR / 8 + MIRROR_READ_FRAMES];
	size_t got = 0;
	uint32_t maxb = w->o.max_buckets, maxd = w->o.max_stack_depth;
	int rc;

	memset(b, 0, sizeof(*b));
	rc = remote_read(pid, mbuckets_addr, &head, 8, &got);
	if (rc || got != 8)
		return pp_errf(err, rc ? rc : -EFAULT, "pid %d: read runtime.mbuckets: %s",
			       (int)pid, strerror(rc ? -rc : EFAULT));
	cur = head;
	while (cur) {
		uint64_t nstk, keep;

		if (cur == newest) {
			b->reached = true;
			break;
		}
		if (b->nne >= maxb)
			break;
		rc = remote_read(pid, cur, buf, sizeof(buf), &got);
		if (rc == -EFAULT || (rc == 0 && got < GO_BUCKET_HDR)) {
			/* the frames may cross into an unmapped page */
			rc = remote_read(pid, cur, buf, GO_BUCKET_HDR, &got);
		}
		if (rc || got < GO_BUCKET_HDR) {
			rc = pp_errf(err, rc ? rc : -EFAULT, "pid %d: read bucket %#" PRIx64 ": %s",
				     (int)pid, cur, strerror(rc ? -rc : EFAULT));
			goto fail;
		}
		nstk = buf[GO_BUCKET_NSTK / 8];
		if (buf[GO_BUCKET_TYP / 8] != GO_BUCKET_MEMPROF || nstk > GOHEAP_NSTK_LIMIT) {
			rc = pp_errf(err, -EINVAL, "pid %d: %#" PRIx64 " is not a memProfile bucket",
				     (int)pid, cur);
			goto fail;
		}
		keep = nstk < maxd ? nstk : maxd;
		if (w->o.max_frames && b->nnp + keep > w->o.max_frames) {
			b->cut = true;
			break;
		}
		if (grow((void **)&b->ne, &b->ne_cap, b->nne + 1, sizeof(*b->ne)) ||
		    grow((void **)&b->npcs, &b->np_cap, b->nnp + keep + 1, sizeof(uint64_t))) {
			rc = pp_errf(err, -ENOMEM, "out of memory mirroring pid %d", (int)pid);
			goto fail;
		}
		if (keep <= MIRROR_READ_FRAMES && got >= GO_BUCKET_HDR + keep * 8) {
			memcpy(b->npcs + b->nnp, buf + GO_BUCKET_HDR / 8, keep * 8);
		} else if (keep) {
			rc = remote_read(pid, cur + GO_BUCKET_STK, b->npcs + b->nnp, keep * 8, &got);
			if (rc || got != keep * 8) {
				rc = pp_errf(err, rc ? rc : -EFAULT, "pid %d: read stack of %#" PRIx64,
					     (int)pid, cur);
				goto fail;
			}
		}
		b->ne[b->nne++] = (struct mirror_ent){ .addr = cur, .size = buf[GO_BUCKET_SIZE / 8],
						       .off = b->nnp, .nstk = keep,
						       .truncated = nstk > keep };
		b->nnp += keep;
		cur = buf[GO_BUCKET_ALLNEXT / 8];
	}
	return 0;
fail:
	mbatch_free(b);
	return rc;
}

/*
 * Append a batch read against `newest` to the mirror (caller holds w->mu).
 * Returns the number of new buckets. A frozen target (capture pending) is
 * only appended to, never trimmed: positions from the head the BPF walk
 * used stay valid.
 */
static int mirror_apply(struct oom_watch *w, struct target *t, uint64_t newest,
			struct mbatch *b)
{
	if ((t->n ? t->e[t->n - 1].addr : 0) != newest)
		return 0;	/* the mirror moved meanwhile: next pass */
	if (newest && !b->reached) {
		if (t->frozen)
			return 0;
		/* the old mirror is unreachable within max_buckets: start over */
		t->n = 0;
		t->npcs = 0;
	}
	if (grow((void **)&t->e, &t->cap, t->n + b->nne, sizeof(*t->e)))
		return -ENOMEM;
	/* the batch is newest first; the mirror is oldest first */
	for (size_t i = b->nne; i-- > 0;) {
		struct mirror_ent m = b->ne[i];
		uint64_t off;

		if (mirror_push_pcs(t, b->npcs + m.off, m.nstk, &off))
			return -ENOMEM;
		m.off = off;
		t->e[t->n++] = m;
	}
	if (!t->frozen) {
		/* max_frames: keep the newest buckets whose stacks fit (one
		 * pass from the newest, over what is mirrored) */
		size_t keep = t->n;
		if (w->o.max_frames) {
			uint64_t frames = 0;
			for (keep = 0; keep < t->n; keep++) {
				frames += t->e[t->n - 1 - keep].nstk;
				if (frames > w->o.max_frames)
					break;
			}
		}
		if (b->cut || keep < t->n) {
			if (!t->budget_cut)
				pp_log(PP_WARN, "OOM mirror over budget: captures of this process "
				       "will be incomplete", "pid=%d max_frames=%" PRIu64,
				       (int)t->pid, w->o.max_frames);
			t->budget_cut = true;
		}
		mirror_trim(t, keep < w->o.max_buckets ? keep : w->o.max_buckets);
	}
	return (int)(b->nne > INT32_MAX ? INT32_MAX : b->nne);
}

static int publish_target(struct oom_watch *w, struct target *t, struct pp_err *err)
{
	struct oom_target v = {
		.mbuckets_addr = t->g->mbuckets_addr,
		.rate_addr = t->g->rate_addr,
		.mirror_head = t->n ? t->e[t->n - 1].addr : 0,
		.mirror_count = t->n,
		.mirror_gen = ++t->gen,
		.start_ticks = t->start_ticks,
		/* over budget: the BPF walk stops after the mirror (plus what a
		 * second can add) instead of copying whole buckets into the ring
		 * until it is full */
		.max_buckets = t->budget_cut && t->n + OOM_BUDGET_SLACK < w->o.max_buckets
			? (uint32_t)(t->n + OOM_BUDGET_SLACK) : w->o.max_buckets,
		.max_depth = w->o.max_stack_depth,
	};
	__u32 key = (__u32)t->pid;

	if (bpf_map_update_elem(w->targets_fd, &key, &v, BPF_ANY))
		return pp_errf(err, -errno, "pid %d: update BPF targets map: %s", (int)t->pid,
			       strerror(errno));
	return 0;
}

static void target_free(struct target *t)
{
	if (!t)
		return;
	gobin_free(t->g);
	free(t->e);
	free(t->pcs);
	free(t);
}

static struct target *find_target(struct oom_watch *w, pid_t pid, size_t *idx)
{
	for (size_t i = 0; i < w->nt; i++)
		if (w->t[i]->pid == pid) {
			if (idx)
				*idx = i;
			return w->t[i];
		}
	return NULL;
}

static void drop_target_at(struct oom_watch *w, size_t i)
{
	__u32 key = (__u32)w->t[i]->pid;

	bpf_map_delete_elem(w->targets_fd, &key);
	for (size_t k = 0; k < w->nc; k++)
		if (w->c[k]->t == w->t[i])
			w->c[k]->t = NULL;
	if (w->t[i]->busy)
		w->t[i]->dead = true;
	else
		target_free(w->t[i]);
	w->t[i] = w->t[--w->nt];
}

int oom_watch_track(struct oom_watch *w, pid_t pid, struct pp_err *err)
{
	return oom_watch_track_shared(w, pid, NULL, err);
}

int oom_watch_track_shared(struct oom_watch *w, pid_t pid, const struct gobin *shared,
			   struct pp_err *err)
{
	struct target *t;
	bool enabled = false;
	int rc;

	pthread_mutex_lock(&w->mu);
	t = find_target(w, pid, NULL);
	pthread_mutex_unlock(&w->mu);
	if (t)
		return 0;

	t = calloc(1, sizeof(*t));
	if (!t)
		return pp_errf(err, -ENOMEM, "out of memory");
	t->pid = pid;
	rc = shared ? gobin_share(shared, pid, &t->g, NULL) : -ENOENT;
	if (rc) {
		t->g = NULL;
		rc = gobin_open_pid(pid, &t->g, err);
	}
	if (rc)
		goto fail;
	if (!t->g->mbuckets_addr) {
		rc = pp_errf(err, -ENOENT, "pid %d: runtime.mbuckets not found", (int)pid);
		goto fail;
	}
	rc = proc_start_time(pid, &t->start_ticks);
	if (rc) {
		rc = pp_errf(err, rc, "pid %d: start time: %s", (int)pid, strerror(-rc));
		goto fail;
	}
	/* BPF sees start_boottime without our time namespace's offset */
	t->start_ticks = t->start_ticks >= w->timens_ticks ? t->start_ticks - w->timens_ticks : 0;
	proc_comm(pid, t->comm, sizeof(t->comm));
	snprintf(t->exe, sizeof(t->exe), "%s", t->g->exe ? t->g->exe : "");
	proc_cgroup(pid, NULL, t->cgroup, sizeof(t->cgroup));	/* the label every profile uses */
	if (gobin_read_rate(t->g, &t->rate, NULL))
		t->rate = -1;
	if (t->rate == 0 && w->o.enable_profiling) {
		int64_t old;

		rc = gobin_enable_profiling(t->g, GOBIN_DEFAULT_RATE, &old, err);
		if (rc < 0)
			goto fail;
		enabled = rc == 1;
		t->rate = GOBIN_DEFAULT_RATE;
	}
	/* the mirror is built by the thread: published empty, BPF copies
	 * whole buckets until it is there */

	pthread_mutex_lock(&w->mu);
	if (find_target(w, pid, NULL)) {
		pthread_mutex_unlock(&w->mu);
		target_free(t);
		return 0;
	}
	if (grow((void **)&w->t, &w->t_cap, w->nt + 1, sizeof(*w->t)) ||
	    w->nt >= (w->o.max_targets ? w->o.max_targets : 4096)) {
		pthread_mutex_unlock(&w->mu);
		rc = pp_errf(err, -ENOSPC, "pid %d: tracking limit (%u processes) reached", (int)pid,
			     w->o.max_targets);
		goto fail;
	}
	rc = publish_target(w, t, err);
	if (rc) {
		pthread_mutex_unlock(&w->mu);
		goto fail;
	}
	w->t[w->nt++] = t;
	w->kick = true;
	wake_thread(w);
	pthread_mutex_unlock(&w->mu);
	return enabled ? 1 : 0;
fail:
	target_free(t);
	return rc;
}

void oom_watch_untrack(struct oom_watch *w, pid_t pid)
{
	size_t i;

	pthread_mutex_lock(&w->mu);
	if (find_target(w, pid, &i) && !w->t[i]->frozen)
		drop_target_at(w, i);
	pthread_mutex_unlock(&w->mu);
}

bool oom_watch_tracked(struct oom_watch *w, pid_t pid)
{
	bool r;

	pthread_mutex_lock(&w->mu);
	r = find_target(w, pid, NULL) != NULL;
	pthread_mutex_unlock(&w->mu);
	return r;
}

size_t oom_watch_ntracked(struct oom_watch *w)
{
	size_t n;

	pthread_mutex_lock(&w->mu);
	n = w->nt;
	pthread_mutex_unlock(&w->mu);
	return n;
}

/* ------------------------------------------------------------------ */
/* Captures */

static struct capture *find_capture(struct oom_watch *w, uint64_t id)
{
	for (size_t i = 0; i < w->nc; i++)
		if (w->c[i]->id == id)
			return w->c[i];
	return NULL;
}

static void capture_free(struct capture *c)
{
	if (!c)
		return;
	free(c->nb);
	free(c->pcs);
	free(c->mc);
	free(c->mc_have);
	free(c);
}

static struct capture *get_capture(struct oom_watch *w, uint64_t id, uint32_t tgid)
{
	struct capture *c = find_capture(w, id);
	struct target *t;

	if (c)
		return c;
	if (grow((void **)&w->c, &w->c_cap, w->nc + 1, sizeof(*w->c)))
		return NULL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->id = id;
	c->tgid = tgid;
	clock_gettime(CLOCK_MONOTONIC, &c->seen);
	t = find_target(w, (pid_t)tgid, NULL);
	if (t) {
		c->t = t;
		t->frozen = true;
		memcpy(c->comm, t->comm, sizeof(c->comm));
		snprintf(c->exe, sizeof(c->exe), "%s", t->exe);
		snprintf(c->cgroup, sizeof(c->cgroup), "%s", t->cgroup);
	} else {
		/* best effort: the victim may still be there for a moment */
		proc_comm((pid_t)tgid, c->comm, sizeof(c->comm));
		proc_exe((pid_t)tgid, c->exe, sizeof(c->exe));
		proc_cgroup((pid_t)tgid, NULL, c->cgroup, sizeof(c->cgroup));
	}
	w->c[w->nc++] = c;
	return c;
}

static void on_victim_rec(struct capture *c, const struct oom_rec_victim *r)
{
	int rank = r->h.type == OOM_REC_MARK ? 1 : r->h.type == OOM_REC_BEGIN ? 2 : 3;

	/* The kernel sends SIGKILL before it marks the victim, so another of
	 * the victim's threads can capture (BEGIN..END) on another CPU before
	 * the OOM killer's MARK reaches the ring: a late record never
	 * replaces a later state. */
	if (rank >= c->vrank) {
		c->v = r->v;
		c->vrank = rank;
	}
	if (!c->comm[0])
		memcpy(c->comm, r->v.comm, sizeof(c->comm));
	c->comm[sizeof(c->comm) - 1] = '\0';
	switch (r->h.type) {
	case OOM_REC_MARK:
		c->have_mark = true;
		break;
	case OOM_REC_BEGIN:
		c->have_begin = true;
		if (!c->mc && r->v.mirror_count && r->v.mirror_count <= OOM_MAX_BUCKETS) {
			c->mc = calloc(r->v.mirror_count, sizeof(*c->mc));
			c->mc_have = calloc(r->v.mirror_count, 1);
			if (c->mc && c->mc_have)
				c->mc_n = r->v.mirror_count;
		}
		break;
	case OOM_REC_END:
		c->have_end = true;
		break;
	}
}

static void on_bucket_rec(struct capture *c, const struct oom_rec_bucket *b)
{
	struct cap_bucket *cb;

	if (grow((void **)&c->nb, &c->nb_cap, c->nnb + 1, sizeof(*c->nb)) ||
	    grow((void **)&c->pcs, &c->pcs_cap, c->npcs + b->nkept + 1, sizeof(uint64_t))) {
		c->bad_records++;
		return;
	}
	cb = &c->nb[c->nnb++];
	*cb = (struct cap_bucket){ .index = b->index, .addr = b->addr, .size = b->size,
				   .nstk = b->nstk, .nkept = b->nkept, .c = b->c, .off = c->npcs };
	memcpy(c->pcs + c->npcs, b->stk, (size_t)b->nkept * 8);
	c->npcs += b->nkept;
}

static void on_counters_rec(struct capture *c, const struct oom_rec_counters *r)
{
	if (!c->mc || r->mirror_pos >= c->mc_n || r->n > c->mc_n - r->mirror_pos) {
		c->misaligned = true;
		return;
	}
	memcpy(c->mc + r->mirror_pos, r->c, (size_t)r->n * sizeof(struct oom_counts));
	memset(c->mc_have + r->mirror_pos, 1, r->n);
	/* check that the walk and the mirror agree on where this chunk starts */
	if (c->t) {
		struct target *t = c->t;
		size_t h = t->n;

		while (h > 0 && t->e[h - 1].addr != c->v.mirror_head)
			h--;
		if (h == 0 || r->mirror_pos >= h || t->e[h - 1 - r->mirror_pos].addr != r->first_addr)
			c->misaligned = true;
	}
}

static bool was_retired(const struct oom_watch *w, uint64_t id)
{
	size_t n = w->nretired < 256 ? w->nretired : 256;

	for (size_t i = 0; i < n; i++)
		if (w->retired[i] == id)
			return true;
	return false;
}

static int ring_cb(void *ctx, void *data, size_t size)
{
	struct oom_watch *w = ctx;
	const struct oom_rec_hdr *h = data;
	struct capture *c;

	if (size < sizeof(*h))
		return 0;
	/* the retired list is only consulted for records of no live capture:
	 * a million-bucket capture streams a million records */
	c = find_capture(w, h->capture_id);
	if (!c && !was_retired(w, h->capture_id))
		c = get_capture(w, h->capture_id, h->tgid);
	if (!c)
		return 0;
	switch (h->type) {
	case OOM_REC_MARK:
	case OOM_REC_BEGIN:
	case OOM_REC_END:
		if (size == sizeof(struct oom_rec_victim))
			on_victim_rec(c, data);
		else
			c->bad_records++;
		break;
	case OOM_REC_BUCKET: {
		const struct oom_rec_bucket *b = data;
		size_t base = offsetof(struct oom_rec_bucket, stk);

		if (size >= base && b->nkept <= OOM_MAX_DEPTH && size == base + (size_t)b->nkept * 8)
			on_bucket_rec(c, b);
		else
			c->bad_records++;
		break;
	}
	case OOM_REC_COUNTERS: {
		const struct oom_rec_counters *r = data;
		size_t base = offsetof(struct oom_rec_counters, c);

		if (size >= base && r->n <= OOM_CHUNK_N &&
		    size == base + (size_t)r->n * sizeof(struct oom_counts))
			on_counters_rec(c, r);
		else
			c->bad_records++;
		break;
	}
	default:
		c->bad_records++;
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* Results */

static void reason_add(char *buf, size_t len, const char *what)
{
	size_t n = strlen(buf);

	if (strstr(buf, what))
		return;
	snprintf(buf + n, len - n, "%s%s", n ? "," : "", what);
}

static void push_result(struct oom_watch *w, struct oom_result *r)
{
	uint64_t one = 1;

	if (grow((void **)&w->res, &w->res_cap, w->nres + 1, sizeof(*w->res))) {
		oom_result_free(r);
		return;
	}
	w->res[w->nres++] = r;
	if (r->outcome == OOM_OUT_PROFILE)
		w->profiles++;
	else
		w->events++;
	if (write(w->efd, &one, sizeof(one)) < 0) {
		/* eventfd counter overflow cannot happen at this rate */
	}
}

static int add_rss_comments(struct pprof *p, const struct oom_result *r)
{
	char buf[512];

	snprintf(buf, sizeof(buf),
		 "oom victim pid=%d tid=%d comm=%s uid=%u oom_score_adj=%d total_vm=%" PRIu64
		 "kB anon_rss=%" PRIu64 "kB file_rss=%" PRIu64 "kB shmem_rss=%" PRIu64
		 "kB pgtables=%" PRIu64 "kB",
		 (int)r->pid, (int)r->tid, r->comm, r->uid, r->oom_score_adj, r->total_vm_kb,
		 r->anon_rss_kb, r->file_rss_kb, r->shmem_rss_kb, r->pgtables_kb);
	if (pprof_add_comment(p, buf))
		return -ENOMEM;
	snprintf(buf, sizeof(buf),
		 "oom capture buckets=%" PRIu64 " new_buckets=%" PRIu64 " absent_records=%" PRIu64
		 " capture_ns=%" PRIu64 " mark_to_capture_ns=%" PRIu64 " rate=%" PRId64
		 " complete=%s%s%s",
		 r->buckets, r->new_buckets, r->absent_records, r->capture_ns,
		 r->mark_to_capture_ns, r->rate,
		 r->complete ? "true" : "false", r->complete ? "" : " reason=", r->reason);
	return pprof_add_comment(p, buf) ? -ENOMEM : 0;
}

static int build_profile(struct oom_watch *w, struct capture *c, struct oom_result *r,
			 struct pp_err *err)
{
	struct target *t = c->t;
	struct go_heap h;
	struct pprof *p = NULL;
	struct go_memrec zero[3] = { 0 };
	char num[32];
	size_t hpos = 0;
	int rc = 0;

	goheap_init(&h);
	h.rate = c->v.rate >= 0 ? c->v.rate : t->rate;
	{
		/* the walk's start in CLOCK_REALTIME */
		struct timespec rt, mono;

		clock_gettime(CLOCK_REALTIME, &rt);
		clock_gettime(CLOCK_MONOTONIC, &mono);
		h.time_ns = (int64_t)rt.tv_sec * 1000000000LL + rt.tv_nsec -
			    ((int64_t)mono.tv_sec * 1000000000LL + mono.tv_nsec - (int64_t)c->v.start_ns);
		h.duration_ns = (int64_t)(c->v.end_ns - c->v.start_ns);
	}
	for (size_t i = 0; i < c->nnb; i++) {
		const struct cap_bucket *b = &c->nb[i];
		struct go_memrec a = { b->c.allocs, b->c.frees, b->c.alloc_bytes, b->c.free_bytes };

		rc = goheap_add_bucket(&h, b->addr, b->size, c->pcs + b->off, b->nkept,
				       b->nkept < b->nstk, &a, zero);
		if (rc)
			goto out;
	}
	if (c->mc_n) {
		uint64_t walked_mirror = c->v.buckets - c->v.new_buckets;
		uint64_t missing = 0;

		hpos = t->n;
		while (hpos > 0 && t->e[hpos - 1].addr != c->v.mirror_head)
			hpos--;
		if (hpos == 0 && walked_mirror) {
			c->misaligned = true;
			walked_mirror = 0;
		}
		if (walked_mirror > c->mc_n)
			walked_mirror = c->mc_n;
		for (uint64_t p = 0; p < walked_mirror; p++) {
			const struct mirror_ent *m;
			struct go_memrec a;

			if (!c->mc_have[p]) {
				missing++;
				continue;
			}
			if (p >= hpos) {
				c->misaligned = true;
				break;
			}
			m = &t->e[hpos - 1 - p];
			a = (struct go_memrec){ c->mc[p].allocs, c->mc[p].frees, c->mc[p].alloc_bytes,
						c->mc[p].free_bytes };
			if (m->truncated)
				r->flags |= OOM_F_STACK_TRUNCATED;
			rc = goheap_add_bucket(&h, m->addr, m->size, t->pcs + m->off, m->nstk,
					       m->truncated, &a, zero);
			if (rc)
				goto out;
		}
		if (missing)
			r->flags |= OOM_F_RING_FULL;
	}
	/* the victim chose its buckets: symbolizing them is bounded like a
	 * snapshot (the mirror bounds what is read, not what it costs) */
	int cut = goheap_apply_budget(&h, &w->o.budget);
	if (cut < 0) {
		rc = pp_errf(err, cut, "out of memory");
		goto out;
	}
	for (uint32_t f = 1; f; f <<= 1)
		if ((r->flags & f & OOM_F_INCOMPLETE) && oom_flag_name(f))
			reason_add(r->reason, sizeof(r->reason), oom_flag_name(f));
	if (c->misaligned)
		reason_add(r->reason, sizeof(r->reason), "mirror_mismatch");
	if (t->budget_cut)
		reason_add(r->reason, sizeof(r->reason), "budget_max_frames");
	if (cut)
		reason_add(r->reason, sizeof(r->reason), "budget_profile");
	if (c->bad_records)
		reason_add(r->reason, sizeof(r->reason), "bad_record");
	r->complete = r->reason[0] == '\0';
	if (!r->complete)
		goheap_set_incomplete(&h, "%s", r->reason);

	rc = goheap_to_pprof(&h, t->g, GOHEAP_VIEW_LATEST, &p, err);
	if (rc)
		goto out;
	rc = add_rss_comments(p, r);
	if (rc) {
		rc = pp_errf(err, rc, "out of memory");
		goto out;
	}
	rc = pprof_encode(p, true, &r->gz, &r->gz_len, err);
	if (rc)
		goto out;

	rc = goheap_series_labels(r->pid, t->g, w->node, "oom", GOHEAP_VIEW_LATEST, &w->extra,
				  &r->labels, err);
	if (rc)
		goto out;
	snprintf(num, sizeof(num), "%d", (int)r->pid);
	if (pp_labels_set(&r->labels, "pid", num) || pp_labels_set(&r->labels, "comm", r->comm) ||
	    pp_labels_set(&r->labels, "executable", r->exe) ||
	    pp_labels_set(&r->labels, "cgroup", r->cgroup) ||
	    pp_labels_set(&r->labels, "trigger", "oom") ||
	    pp_labels_set(&r->labels, "oom_complete", r->complete ? "true" : "false") ||
	    (!r->complete && pp_labels_set(&r->labels, "oom_incomplete_reason", r->reason))) {
		rc = pp_errf(err, -ENOMEM, "out of memory");
		goto out;
	}
	pp_labels_sort(&r->labels);
out:
	pprof_free(p);
	goheap_free(&h);
	/* this thread's malloc arena would keep the profile's memory: give it
	 * back, as gotrack's worker does after a snapshot */
	malloc_trim(0);
	return rc;
}

/*
 * Turn a finished capture into its one result. Runs WITHOUT w->mu (a
 * million-bucket profile takes seconds to build): the capture is only
 * touched by the watcher thread, its target is frozen (no API call frees
 * or changes it) and the mirror is only changed by this same thread.
 */
static struct oom_result *finalize(struct oom_watch *w, struct capture *c)
{
	struct oom_result *r = calloc(1, sizeof(*r));
	const struct oom_victim *v = &c->v;
	struct pp_err err = { 0 };

	if (!r)
		return NULL;
	r->pid = (pid_t)c->tgid;
	r->tid = (pid_t)v->tid;
	r->capture_id = c->id;
	memcpy(r->comm, c->comm[0] ? c->comm : v->comm, sizeof(r->comm));
	r->comm[sizeof(r->comm) - 1] = '\0';
	snprintf(r->exe, sizeof(r->exe), "%s", c->exe);
	snprintf(r->cgroup, sizeof(r->cgroup), "%s", c->cgroup);
	r->flags = v->flags;
	r->total_vm_kb = v->total_vm_kb;
	r->anon_rss_kb = v->anon_rss_kb;
	r->file_rss_kb = v->file_rss_kb;
	r->shmem_rss_kb = v->shmem_rss_kb;
	r->pgtables_kb = v->pgtables_kb;
	r->uid = v->uid;
	r->oom_score_adj = v->oom_score_adj;
	r->rate = v->rate;
	r->buckets = v->buckets;
	r->new_buckets = v->new_buckets;
	r->absent_records = v->absent_records;
	r->dropped = v->dropped;
	r->capture_ns = v->end_ns > v->start_ns ? v->end_ns - v->start_ns : 0;
	r->mark_to_capture_ns = v->start_ns > v->mark_ns && v->mark_ns ? v->start_ns - v->mark_ns : 0;
	r->outcome = OOM_OUT_EVENT;

	if (v->flags & OOM_F_VICTIMS_FULL) {
		snprintf(r->reason, sizeof(r->reason),
			 "victims_full: more simultaneous OOM victims than the BPF victims map "
			 "holds");
	} else if (v->state != OOM_ST_DONE) {
		if (v->state != OOM_ST_MARKED)
			snprintf(r->reason, sizeof(r->reason),
				 "capture_lost: the walk never finished");
		else if (v->retries)
			snprintf(r->reason, sizeof(r->reason),
				 "no_capture: each of %u tries found the profile's first words "
				 "unreadable (error %d)", v->retries, v->read_error);
		else
			snprintf(r->reason, sizeof(r->reason),
				 "no_capture: the victim exited before any of its threads reached "
				 "the capture points");
	} else if (v->flags & OOM_F_PID_REUSED) {
		snprintf(r->reason, sizeof(r->reason),
			 "pid_reused: the tracked process with this pid had exited");
	} else if (v->flags & OOM_F_NOT_TRACKED || !c->t) {
		snprintf(r->reason, sizeof(r->reason),
			 "not_tracked: victim is not a tracked Go process");
	} else if (v->flags & OOM_F_NO_BUCKETS) {
		if (v->rate == 0)
			snprintf(r->reason, sizeof(r->reason),
				 "profiling_disabled: runtime.MemProfileRate is 0 and there are no "
				 "buckets");
		else
			snprintf(r->reason, sizeof(r->reason), "no_buckets: runtime.mbuckets is empty");
	} else if (v->buckets == 0 && (v->flags & (OOM_F_READ_ERROR | OOM_F_BAD_BUCKET))) {
		snprintf(r->reason, sizeof(r->reason), "%s (error %d) before the first bucket",
			 v->flags & OOM_F_READ_ERROR ? "read_error" : "bad_bucket", v->read_error);
	} else if (build_profile(w, c, r, &err)) {
		r->outcome = OOM_OUT_EVENT;
		free(r->gz);
		r->gz = NULL;
		pp_labels_free(&r->labels);
		snprintf(r->reason, sizeof(r->reason), "profile_error: %.200s", err.msg);
	} else {
		r->outcome = OOM_OUT_PROFILE;
	}
	return r;
}

static void remove_capture(struct oom_watch *w, size_t i)
{
	struct capture *c = w->c[i];

	if (c->t) {
		bool other = false;

		for (size_t k = 0; k < w->nc; k++)
			if (k != i && w->c[k]->t == c->t)
				other = true;
		if (!other)
			c->t->frozen = false;
	}
	capture_free(c);
	w->c[i] = w->c[--w->nc];
}

/* start_ticks as BPF sees them (our time namespace's offset removed); 0 = any */
/* Hand over a finalized capture's result and forget the capture.
 * Caller holds w->mu. */
static void retire(struct oom_watch *w, struct capture *c, struct oom_result *r)
{
	__u32 k = c->tgid;
	struct oom_victim v;

	if (r)
		push_result(w, r);
	w->retired[w->nretired++ % 256] = c->id;
	/* keep the map entry (it blocks re-marks of the dying victim) until
	 * the process is gone; reconcile() frees the slot then */
	if (bpf_map_lookup_elem(w->victims_fd, &k, &v) == 0 && v.capture_id == c->id) {
		v.state = OOM_ST_REPORTED;
		bpf_map_update_elem(w->victims_fd, &k, &v, BPF_EXIST);
	}
	for (size_t i = 0; i < w->nc; i++)
		if (w->c[i] == c) {
			remove_capture(w, i);
			break;
		}
}

static bool pid_alive(const struct oom_watch *w, pid_t pid, uint64_t start_ticks)
{
	uint64_t st;

	if (proc_start_time(pid, &st))
		return false;
	st = st >= w->timens_ticks ? st - w->timens_ticks : 0;
	return !start_ticks || st == start_ticks;
}

/*
 * Reconcile with the victims map (the truth when ring records were lost)
 * and finish captures. Caller holds w->mu.
 */
static void reconcile(struct oom_watch *w)
{
	__u32 key, next, *prev = NULL;
	int64_t now = now_ms();

	/* victims the ring never told us about, or whose END was lost */
	while (bpf_map_get_next_key(w->victims_fd, prev, &next) == 0) {
		struct oom_victim v;
		struct capture *c;

		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(w->victims_fd, &key, &v))
			continue;
		if (v.state == OOM_ST_REPORTED || was_retired(w, v.capture_id))
			continue;
		c = find_capture(w, v.capture_id);
		if (!c && v.state != OOM_ST_FREE) {
			c = get_capture(w, v.capture_id, key);
			if (!c)
				continue;
			c->v = v;
			c->vrank = v.state == OOM_ST_DONE ? 3 : v.state == OOM_ST_CAPTURING ? 2 : 1;
		}
		if (!c)
			continue;
		if (v.state == OOM_ST_DONE && !c->have_end && !c->done_in_map) {
			c->done_in_map = true;
			clock_gettime(CLOCK_MONOTONIC, &c->done_seen);
		}
		if (c->done_in_map && !c->have_end && now - ts_ms(&c->done_seen) > 1000) {
			/* END was dropped: take the final state from the map */
			c->v = v;
			c->vrank = 3;
			c->v.flags |= OOM_F_RING_FULL;
			c->have_end = true;
		}
		if (!c->have_end && v.state != OOM_ST_DONE) {
			/* a read of a dying process's /proc entry can fail for a
			 * moment: gone means gone on 10 reconciles in a row */
			if (pid_alive(w, (pid_t)key, c->t ? c->t->start_ticks : 0))
				c->gone_seen = 0;
			else
				c->gone_seen++;
		}
		if (!c->have_end && v.state != OOM_ST_DONE && now - ts_ms(&c->seen) > 3000 &&
		    c->gone_seen >= 10) {
			/* marked, never captured, and gone */
			c->v = v;
			c->have_end = true;
		}
	}

	/* captures the map does not know (victims map full, or the entry was
	 * replaced): give up on them after a while, with what the ring said */
	for (size_t i = 0; i < w->nc; i++) {
		struct capture *c = w->c[i];
		__u32 k = c->tgid;
		struct oom_victim v;

		if (c->have_end || now - ts_ms(&c->seen) <= 3000)
			continue;
		if (bpf_map_lookup_elem(w->victims_fd, &k, &v) == 0 && v.capture_id == c->id)
			continue;
		c->have_end = true;
	}

	/* free victims slots whose process is gone and whose capture is done */
	prev = NULL;
	while (bpf_map_get_next_key(w->victims_fd, prev, &next) == 0) {
		struct oom_victim v;

		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(w->victims_fd, &key, &v))
			continue;
		if (v.state == OOM_ST_REPORTED &&
		    !pid_alive(w, (pid_t)key, v.start_boottime / 10000000ULL)) {
			bpf_map_delete_elem(w->victims_fd, &key);
			prev = NULL;	/* restart after a delete */
		}
	}
}

/*
 * Drop targets whose process is gone, and pick those whose mirror to catch
 * up (marked busy). Caller holds w->mu.
 */
static size_t pick_targets(struct oom_watch *w, struct target ***out, size_t *cap)
{
	size_t n = 0;

	for (size_t i = 0; i < w->nt;) {
		struct target *t = w->t[i];

		if (t->frozen || t->busy) {
			i++;
			continue;
		}
		/* /proc/PID/stat for every target on every refresh was most of an
		 * idle watcher's CPU: the agent untracks exited targets itself, so
		 * this is a safety net, run every 5 s or after a failed read */
		int64_t now = now_ms();
		bool check = t->read_failed || now - t->alive_ms >= 5000;
		if (check && pid_alive(w, t->pid, t->start_ticks)) {
			t->alive_ms = now;
			t->read_failed = false;
		} else if (check) {
			/* an OOM victim's MARK may still be in the ring */
			__u32 k = (__u32)t->pid;
			struct oom_victim v;

			if (bpf_map_lookup_elem(w->victims_fd, &k, &v) == 0 && v.state != OOM_ST_FREE) {
				i++;
				continue;
			}
			drop_target_at(w, i);
			continue;
		}
		if (grow((void **)out, cap, n + 1, sizeof(**out)) == 0) {
			t->busy = true;
			(*out)[n++] = t;
		}
		i++;
	}
	return n;
}

/* Catch the picked mirrors up: read without the lock, apply with it. */
static void refresh_targets(struct oom_watch *w, struct target **picked, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct target *t = picked[i];
		struct pp_err err = { 0 };
		struct mbatch b;
		uint64_t newest;
		pid_t pid;
		uint64_t addr;
		int rc;

		pthread_mutex_lock(&w->mu);
		newest = t->n ? t->e[t->n - 1].addr : 0;
		pid = t->pid;
		addr = t->g->mbuckets_addr;
		pthread_mutex_unlock(&w->mu);

		rc = mirror_read(w, pid, addr, newest, &b, &err);

		pthread_mutex_lock(&w->mu);
		if (rc)
			t->read_failed = true;
		if (!t->dead && rc == 0 && (b.nne || (newest && !b.reached)) &&
		    mirror_apply(w, t, newest, &b) > 0)
			publish_target(w, t, &err);
		t->busy = false;
		if (t->dead)
			target_free(t);
		pthread_mutex_unlock(&w->mu);
		mbatch_free(&b);
	}
}

static void *thread_main(void *arg)
{
	struct oom_watch *w = arg;
	int64_t last_refresh = 0, last_reconcile = 0;
	struct target **picked = NULL;
	size_t picked_cap = 0, npicked;
	struct capture **fin = NULL;
	size_t fin_cap = 0, nfin;
	int64_t period = (int64_t)(w->o.mirror_interval_ns / 1000000);

	int timeout = 50;

	if (period <= 0)
		period = 200;
	while (!w->stop) {
		int64_t now;

		struct epoll_event ev;

		/* wait outside the lock; ring_cb runs inside consume, under it.
		 * Records wake us; the timeout only paces mirror refreshes and
		 * the reconcile that catches lost records, so an idle watcher
		 * (no Go targets, no capture) wakes once a second. */
		if (epoll_wait(ring_buffer__epoll_fd(w->rb), &ev, 1, timeout) > 0) {
			uint64_t v;

			if (read(w->wake_fd, &v, sizeof(v)) < 0) {
				/* nothing to drain: a ring record woke us */
			}
		}
		pthread_mutex_lock(&w->mu);
		ring_buffer__consume(w->rb);
		now = now_ms();
		if (w->nc || now - last_reconcile >= 1000) {
			reconcile(w);
			last_reconcile = now;
		}
		nfin = 0;
		for (size_t i = 0; i < w->nc; i++)
			if (w->c[i]->have_end &&
			    grow((void **)&fin, &fin_cap, nfin + 1, sizeof(*fin)) == 0)
				fin[nfin++] = w->c[i];
		npicked = 0;
		if (now - last_refresh >= period || w->kick) {
			npicked = pick_targets(w, &picked, &picked_cap);
			w->kick = false;
			last_refresh = now;
		}
		timeout = w->nc ? 50 : (int)(w->nt && period < 1000 ? period : 1000);
		pthread_mutex_unlock(&w->mu);

		for (size_t i = 0; i < nfin; i++) {
			struct oom_result *r = finalize(w, fin[i]);

			pthread_mutex_lock(&w->mu);
			retire(w, fin[i], r);
			pthread_mutex_unlock(&w->mu);
		}
		refresh_targets(w, picked, npicked);
	}
	free(picked);
	free(fin);
	return NULL;
}

/* ------------------------------------------------------------------ */

/* /proc/self/timens_offsets "boottime SECS NSECS", in USER_HZ ticks. */
static uint64_t timens_boottime_ticks(void)
{
	FILE *f = fopen("/proc/self/timens_offsets", "re");
	char name[32];
	long long sec, nsec;
	uint64_t ticks = 0;

	if (!f)
		return 0;
	while (fscanf(f, "%31s %lld %lld", name, &sec, &nsec) == 3)
		if (strcmp(name, "boottime") == 0 && sec >= 0 && nsec >= 0)
			ticks = (uint64_t)sec * 100 + (uint64_t)nsec / 10000000;
	fclose(f);
	return ticks;
}

static uint64_t ring_size_for(uint32_t max_buckets)
{
	uint64_t need = (uint64_t)max_buckets * sizeof(struct oom_counts) +
			((uint64_t)max_buckets / OOM_CHUNK_N + 1) *
				(offsetof(struct oom_rec_counters, c) + 8) +
			(1u << 20);
	uint64_t sz = 1u << 20;

	while (sz < need && sz < (32u << 20))
		sz <<= 1;
	return sz;
}

int oom_watch_new(const struct oom_watch_opts *opts, struct oom_watch **out,
		  struct pp_err *err)
{
	struct oom_watch *w;
	uint32_t max_targets;
	int rc, ncpu;

	*out = NULL;
	if (opts->max_buckets == 0)
		return pp_errf(err, -EINVAL, "max_buckets must be at least 1");
	if (opts->max_stack_depth == 0 || opts->max_stack_depth > OOM_MAX_DEPTH)
		return pp_errf(err, -EINVAL, "max_stack_depth %u out of range 1..%u",
			       opts->max_stack_depth, OOM_MAX_DEPTH);
	w = calloc(1, sizeof(*w));
	if (!w)
		return pp_errf(err, -ENOMEM, "out of memory");
	w->o = *opts;
	w->o.extra_labels = NULL;
	/* one bpf_loop walks at most 1 << 23 buckets; beyond: bucket_limit */
	if (w->o.max_buckets > OOM_MAX_BUCKETS)
		w->o.max_buckets = OOM_MAX_BUCKETS;
	w->efd = -1;
	w->wake_fd = -1;
	pthread_mutex_init(&w->mu, NULL);
	if (opts->node)
		snprintf(w->node, sizeof(w->node), "%s", opts->node);
	else if (gethostname(w->node, sizeof(w->node) - 1))
		snprintf(w->node, sizeof(w->node), "unknown");
	if (opts->extra_labels && pp_labels_copy(&w->extra, opts->extra_labels)) {
		rc = pp_errf(err, -ENOMEM, "out of memory");
		goto fail;
	}
	max_targets = opts->max_targets ? opts->max_targets : 4096;
	w->o.max_targets = max_targets;
	w->ring_bytes = opts->ring_bytes ? opts->ring_bytes : ring_size_for(opts->max_buckets);
	w->timens_ticks = timens_boottime_ticks();

	w->skel = oom_bpf__open();
	if (!w->skel) {
		rc = pp_errf(err, -errno ? -errno : -EINVAL, "open OOM BPF object: %s",
			     strerror(errno));
		goto fail;
	}
	bpf_map__set_max_entries(w->skel->maps.targets, max_targets);
	rc = bpf_map__set_max_entries(w->skel->maps.ring, (uint32_t)w->ring_bytes);
	if (rc) {
		rc = pp_errf(err, rc, "ring buffer size %" PRIu64 ": %s", w->ring_bytes,
			     strerror(-rc));
		goto fail;
	}
	if (opts->exit_hook_only)
		bpf_program__set_autoattach(w->skel->progs.oom_signal_deliver, false);
	rc = oom_bpf__load(w->skel);
	if (rc) {
		rc = pp_errf(err, rc, "load OOM BPF programs (kernel >= 6.16 with BTF needed): %s",
			     strerror(-rc));
		goto fail;
	}
	rc = oom_bpf__attach(w->skel);
	if (rc) {
		rc = pp_errf(err, rc, "attach OOM tracepoints: %s", strerror(-rc));
		goto fail;
	}
	w->targets_fd = bpf_map__fd(w->skel->maps.targets);
	w->victims_fd = bpf_map__fd(w->skel->maps.victims);
	w->rb = ring_buffer__new(bpf_map__fd(w->skel->maps.ring), ring_cb, w, NULL);
	if (!w->rb) {
		rc = pp_errf(err, -errno, "ring buffer: %s", strerror(errno));
		goto fail;
	}
	ncpu = libbpf_num_possible_cpus();
	if (ncpu < 1)
		ncpu = 1;
	w->kernel_bytes = w->ring_bytes +
			  (uint64_t)max_targets * (sizeof(struct oom_target) + 4 + 64) +
			  (uint64_t)bpf_map__max_entries(w->skel->maps.victims) *
				  (sizeof(struct oom_victim) + 4 + 64) +
			  (uint64_t)ncpu * bpf_map__value_size(w->skel->maps.scratch);
	w->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	w->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (w->efd < 0 || w->wake_fd < 0) {
		rc = pp_errf(err, -errno, "eventfd: %s", strerror(errno));
		goto fail;
	}
	{
		/* the thread only ever calls epoll_wait + ring_buffer__consume on
		 * this set, never ring_buffer__poll, so an extra fd is fine */
		struct epoll_event ev = { .events = EPOLLIN, .data.u64 = UINT64_MAX };

		if (epoll_ctl(ring_buffer__epoll_fd(w->rb), EPOLL_CTL_ADD, w->wake_fd, &ev) < 0) {
			rc = pp_errf(err, -errno, "epoll_ctl: %s", strerror(errno));
			goto fail;
		}
	}
	rc = pthread_create(&w->thr, NULL, thread_main, w);
	if (rc) {
		rc = pp_errf(err, -rc, "start OOM thread: %s", strerror(rc));
		goto fail;
	}
	w->thr_started = true;
	*out = w;
	return 0;
fail:
	oom_watch_free(w);
	return rc;
}

void oom_watch_free(struct oom_watch *w)
{
	if (!w)
		return;
	if (w->thr_started) {
		w->stop = true;
		wake_thread(w);
		pthread_join(w->thr, NULL);
	}
	ring_buffer__free(w->rb);
	oom_bpf__destroy(w->skel);
	for (size_t i = 0; i < w->nt; i++)
		target_free(w->t[i]);
	free(w->t);
	for (size_t i = 0; i < w->nc; i++)
		capture_free(w->c[i]);
	free(w->c);
	for (size_t i = 0; i < w->nres; i++)
		oom_result_free(w->res[i]);
	free(w->res);
	pp_labels_free(&w->extra);
	if (w->efd >= 0)
		close(w->efd);
	if (w->wake_fd >= 0)
		close(w->wake_fd);
	pthread_mutex_destroy(&w->mu);
	free(w);
}

int oom_watch_fd(const struct oom_watch *w)
{
	return w->efd;
}

size_t oom_watch_take(struct oom_watch *w, struct oom_result **out, size_t max)
{
	size_t n;
	uint64_t v;

	pthread_mutex_lock(&w->mu);
	n = w->nres < max ? w->nres : max;
	if (n)
		memcpy(out, w->res, n * sizeof(*out));
	if (n && w->nres > n)
		memmove(w->res, w->res + n, (w->nres - n) * sizeof(*w->res));
	w->nres -= n;
	if (w->nres == 0 && read(w->efd, &v, sizeof(v)) < 0) {
		/* nothing to clear */
	}
	pthread_mutex_unlock(&w->mu);
	return n;
}

void oom_result_free(struct oom_result *r)
{
	if (!r)
		return;
	free(r->gz);
	pp_labels_free(&r->labels);
	free(r);
}

static void log_result(const struct oom_result *r, const char *what)
{
	pp_log(r->outcome == OOM_OUT_PROFILE && r->complete ? PP_INFO : PP_WARN, what,
	       "pid=%d comm=%s exe=%s cgroup=%s complete=%s reason=%s buckets=%" PRIu64
	       " absent_records=%" PRIu64 " capture_ns=%" PRIu64 " anon_rss_kb=%" PRIu64
	       " rate=%" PRId64,
	       (int)r->pid, pp_q(r->comm), pp_q(r->exe), pp_q(r->cgroup),
	       r->complete ? "true" : "false", pp_q(r->reason), r->buckets, r->absent_records,
	       r->capture_ns, r->anon_rss_kb, r->rate);
}

/* pushprof_oom_kills_total: every result, by what came of it (the reason
 * up to its ':' - a fixed set, see oom_result.reason). */
static void count_result(const struct oom_result *r, bool stored)
{
	char lbl[96];
	size_t n = strcspn(r->reason, " :,");

	if (r->outcome == OOM_OUT_PROFILE)
		snprintf(lbl, sizeof(lbl), "result=\"%s\"",
			 !stored ? "store_failed" : r->complete ? "complete" : "incomplete");
	else
		snprintf(lbl, sizeof(lbl), "result=\"no_profile\",reason=\"%.*s\"",
			 (int)(n < 40 ? n : 40), r->reason);
	metric_inc("pushprof_oom_kills_total",
		   "OOM kills seen, by outcome: a profile (complete, incomplete, store_failed) "
		   "or none (no_profile, with the reason).", lbl, 1);
}

int oom_watch_deliver(struct oom_watch *w, struct outbox *o, struct pp_err *err)
{
	struct oom_result *res[16];
	size_t n;
	int done = 0;

	while ((n = oom_watch_take(w, res, 16)) > 0) {
		for (size_t i = 0; i < n; i++) {
			struct oom_result *r = res[i];
			struct pp_err e = { 0 };
			bool ok = true;

			if (r->outcome == OOM_OUT_PROFILE) {
				if (outbox_submit_durable(o, &r->labels, r->gz, r->gz_len, &e)) {
					ok = false;
					pp_errf(err, e.code, "OOM profile of pid %d: %s", (int)r->pid,
						e.msg);
					log_result(r, "OOM profile not stored");
				} else {
					log_result(r, "OOM profile captured");
				}
			} else {
				log_result(r, "OOM kill without a profile");
			}
			count_result(r, ok);
			pthread_mutex_lock(&w->mu);
			if (ok)
				w->delivered++;
			else
				w->deliver_failed++;
			pthread_mutex_unlock(&w->mu);
			oom_result_free(r);
			done++;
		}
	}
	return done;
}

void oom_watch_stats(struct oom_watch *w, struct oom_watch_stats *st)
{
	memset(st, 0, sizeof(*st));
	pthread_mutex_lock(&w->mu);
	st->marks = w->skel->bss->stat_marks;
	st->dup_marks = w->skel->bss->stat_dup_marks;
	st->captures = w->skel->bss->stat_captures;
	st->ring_drops = w->skel->bss->stat_ring_drops;
	st->victims_full = w->skel->bss->stat_victims_full;
	st->profiles = w->profiles;
	st->events = w->events;
	st->delivered = w->delivered;
	st->deliver_failed = w->deliver_failed;
	st->kernel_bytes = w->kernel_bytes;
	for (size_t i = 0; i < w->nt; i++)
		st->mirrored_buckets += w->t[i]->n;
	pthread_mutex_unlock(&w->mu);
}
