/*
 * oom.c - the OOM watcher's lifecycle: loading bpf/oom.bpf.c, the watcher
 * thread (ring buffer, reconcile, finalize, mirror catch-up), tracking and
 * untracking processes, handing results to the reporter, stats. The
 * mirrors are oom_mirror.c's, the captures oom_capture.c's
 * (oom_internal.h ties them together).
 *
 * Threading: one consumer thread does everything after oom_watch_new()
 * except the initial analysis of a newly tracked process (done by the
 * caller of oom_watch_track(), outside the lock) and oom_watch_deliver()
 * (the caller's thread). w->mu guards targets, captures and results.
 */
#include "oom.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "bpf/oom.skel.h"
#include "gobin.h"
#include "log.h"
#include "metrics.h"
#include "oom_internal.h"
#include "procinfo.h"

int oom_protect_self(int score_adj, struct pp_err *err)
{
	char buf[32];
	int fd, n, rc = 0;

	if (score_adj < -1000 || score_adj > 1000)
		return pp_errf(err, -EINVAL, "oom_score_adj %d out of range -1000..1000",
			       score_adj);
	fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return pp_errf(err, -errno, "open /proc/self/oom_score_adj: %s", strerror(errno));
	n = snprintf(buf, sizeof(buf), "%d\n", score_adj);
	if (write(fd, buf, n) != n)
		rc = pp_errf(err, -errno, "write /proc/self/oom_score_adj=%d: %s%s", score_adj,
			     strerror(errno),
			     errno == EACCES || errno == EPERM
				     ? " (lowering it needs CAP_SYS_RESOURCE)"
				     : "");
	close(fd);
	return rc;
}

static void wake_thread(struct oom_watch *w)
{
	uint64_t one = 1;

	if (w->wake_fd >= 0 && write(w->wake_fd, &one, sizeof(one)) < 0) {
		/* counter full: the thread is awake anyway */
	}
}

struct target *oom_find_target(struct oom_watch *w, pid_t pid, size_t *idx)
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
		oom_target_free(w->t[i]);
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
	t = oom_find_target(w, pid, NULL);
	pthread_mutex_unlock(&w->mu);
	if (t)
		return 0;

	t = calloc(1, sizeof(*t));
	if (!t)
		return pp_errf(err, -ENOMEM, "out of memory");
	t->pid = pid;
	t->pidfd = -1;
	rc = shared ? gobin_share(shared, pid, &t->g, NULL) : -ENOENT;
	if (rc) {
		t->g = NULL;
		rc = gobin_new(&(struct gobin_opts){ .pid = pid }, &t->g, err);
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
	/* the pidfd names the process with this start time (read again after
	 * the open: the pid may have been reused in between); without one
	 * (no fds left, an old kernel) liveness is read from /proc */
	t->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	uint64_t again;
	if (t->pidfd >= 0 && (proc_start_time(pid, &again) || again != t->start_ticks)) {
		rc = pp_errf(err, -ESRCH, "pid %d: exited while being tracked", (int)pid);
		goto fail;
	}
	/* BPF sees start_boottime without our time namespace's offset */
	t->start_ticks = t->start_ticks >= w->timens_ticks ? t->start_ticks - w->timens_ticks : 0;
	proc_comm(pid, t->comm, sizeof(t->comm));
	char cg[1024]; /* the label every profile uses */
	proc_cgroup(pid, NULL, cg, sizeof(cg));
	if (!(t->cgroup = strdup(cg))) {
		rc = pp_errf(err, -ENOMEM, "out of memory");
		goto fail;
	}
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
	if (oom_find_target(w, pid, NULL)) {
		pthread_mutex_unlock(&w->mu);
		oom_target_free(t);
		return 0;
	}
	if (oom_grow((void **)&w->t, &w->t_cap, w->nt + 1, sizeof(*w->t)) ||
	    w->nt >= (w->o.max_targets ? w->o.max_targets : 4096)) {
		pthread_mutex_unlock(&w->mu);
		rc = pp_errf(err, -ENOSPC, "pid %d: tracking limit (%u processes) reached",
			     (int)pid, w->o.max_targets);
		goto fail;
	}
	rc = oom_publish_target(w, t, err);
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
	oom_target_free(t);
	return rc;
}

void oom_watch_untrack(struct oom_watch *w, pid_t pid)
{
	size_t i;

	pthread_mutex_lock(&w->mu);
	if (oom_find_target(w, pid, &i) && !w->t[i]->frozen)
		drop_target_at(w, i);
	pthread_mutex_unlock(&w->mu);
}

bool oom_watch_tracked(struct oom_watch *w, pid_t pid)
{
	bool r;

	pthread_mutex_lock(&w->mu);
	r = oom_find_target(w, pid, NULL) != NULL;
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

bool oom_pid_alive(const struct oom_watch *w, pid_t pid, uint64_t start_ticks)
{
	uint64_t st;

	if (proc_start_time(pid, &st))
		return false;
	st = st >= w->timens_ticks ? st - w->timens_ticks : 0;
	return !start_ticks || st == start_ticks;
}

/* Mark the targets whose process has exited (t->exited): one poll() of
 * every pidfd. Caller holds w->mu. */
static void poll_pidfds(struct oom_watch *w)
{
	size_t n = 0;

	if (oom_grow((void **)&w->pfds, &w->pfds_cap, w->nt + 1, sizeof(*w->pfds)))
		return; /* out of memory: the flags stay as they were */
	for (size_t i = 0; i < w->nt; i++)
		if (w->t[i]->pidfd >= 0)
			w->pfds[n++] = (struct pollfd){ .fd = w->t[i]->pidfd, .events = POLLIN };
	if (n == 0 || poll(w->pfds, n, 0) <= 0)
		return;
	n = 0;
	for (size_t i = 0; i < w->nt; i++)
		if (w->t[i]->pidfd >= 0)
			w->t[i]->exited = w->pfds[n++].revents != 0;
}

/*
 * Drop targets whose process is gone, and pick those whose mirror to catch
 * up (marked busy): every target whose next refresh is due within half a
 * period (idle ones wait longer, see OOM_IDLE_SHIFT_MAX). Caller holds w->mu.
 */
static size_t pick_targets(struct oom_watch *w, struct target ***out, size_t *cap, int64_t period)
{
	size_t n = 0;

	poll_pidfds(w);
	for (size_t i = 0; i < w->nt;) {
		struct target *t = w->t[i];

		if (t->frozen || t->busy) {
			i++;
			continue;
		}
		/* the agent untracks exited targets itself, so this is a safety
		 * net: the pidfd every pass; without one, /proc/PID/stat (for
		 * every target on every refresh it was most of an idle
		 * watcher's CPU) every 5 s or after a failed read */
		int64_t now = oom_now_ms();
		bool check = t->pidfd >= 0 || t->read_failed || now - t->alive_ms >= 5000;
		if (check && (t->pidfd >= 0 ? !t->exited
					    : oom_pid_alive(w, t->pid, t->start_ticks))) {
			t->alive_ms = now;
			t->read_failed = false;
		} else if (check) {
			/* an OOM victim's MARK may still be in the ring */
			__u32 k = (__u32)t->pid;
			struct oom_victim v;

			if (bpf_map_lookup_elem(w->victims_fd, &k, &v) == 0 &&
			    v.state != OOM_ST_FREE) {
				i++;
				continue;
			}
			drop_target_at(w, i);
			continue;
		}
		if (t->next_ms && now + period / 2 < t->next_ms) {
			i++;
			continue;
		}
		if (oom_grow((void **)out, cap, n + 1, sizeof(**out)) == 0) {
			t->busy = true;
			(*out)[n++] = t;
		}
		i++;
	}
	return n;
}

/*
 * How long the watcher may sleep, in ms: 50 while a capture is under way;
 * else until the first target is due, and at least a period after the
 * last refresh; at most 1 s (the reconcile) while a target has no pidfd
 * (its liveness is a /proc read, every 5 s) or for OOM_LOSSY_MS after ring
 * records were lost, else at most the idle interval (OOM_IDLE_SHIFT_MAX),
 * or OOM_EMPTY_MS without targets: nothing is due then, and what can
 * happen wakes it (a new target, a victim's ring record, the stop).
 *
 * Why the reconcile may wait longer than 1 s otherwise: it finds captures
 * the ring never reported, and a record is lost only when the ring is
 * full. The ring wakes the watcher when a record lands in a ring it had
 * caught up with (libbpf's adaptive wake-up), so a full ring has woken it
 * before any loss, and the pass that consumes it sees stat_ring_drops
 * grow. Caller holds w->mu.
 */
static int next_timeout(const struct oom_watch *w, int64_t period, int64_t last_refresh)
{
	int64_t now = oom_now_ms(), cap = 1000, at = last_refresh + period;
	int64_t due = INT64_MAX;

	if (w->nc)
		return 50;
	if (now >= w->lossy_until_ms)
		cap = w->nt ? period << OOM_IDLE_SHIFT_MAX : OOM_EMPTY_MS;
	for (size_t i = 0; i < w->nt; i++) {
		const struct target *t = w->t[i];

		if (t->pidfd < 0 && cap > 1000)
			cap = period < 1000 ? period : 1000;
		if (!t->frozen && t->next_ms < due)
			due = t->next_ms; /* 0: a new one, due now */
	}
	if (due > at)
		at = due;
	if (at - now > cap)
		return (int)cap;
	return at - now < 1 ? 1 : (int)(at - now);
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
		 * the reconcile that catches lost records (next_timeout): a
		 * watcher of idle Go programs wakes every 4 s, one without
		 * targets once a minute. */
		if (epoll_wait(ring_buffer__epoll_fd(w->rb), &ev, 1, timeout) > 0) {
			uint64_t v;

			if (read(w->wake_fd, &v, sizeof(v)) < 0) {
				/* nothing to drain: a ring record woke us */
			}
		}
		pthread_mutex_lock(&w->mu);
		ring_buffer__consume(w->rb);
		now = oom_now_ms();
		uint64_t drops = __atomic_load_n(&w->skel->bss->stat_ring_drops, __ATOMIC_RELAXED);

		if (drops != w->drops_seen) {
			/* records lost: reconcile now and every second a while */
			w->drops_seen = drops;
			w->lossy_until_ms = now + OOM_LOSSY_MS;
			last_reconcile = 0;
		}
		if (w->nc || now - last_reconcile >= 1000) {
			oom_reconcile(w);
			last_reconcile = now;
		}
		nfin = 0;
		for (size_t i = 0; i < w->nc; i++)
			if (w->c[i]->have_end &&
			    oom_grow((void **)&fin, &fin_cap, nfin + 1, sizeof(*fin)) == 0)
				fin[nfin++] = w->c[i];
		npicked = 0;
		if (now - last_refresh >= period || w->kick) {
			npicked = pick_targets(w, &picked, &picked_cap, period);
			w->kick = false;
			last_refresh = now;
		}
		pthread_mutex_unlock(&w->mu);

		for (size_t i = 0; i < nfin; i++) {
			struct oom_result *r = oom_finalize(w, fin[i]);

			pthread_mutex_lock(&w->mu);
			oom_retire(w, fin[i], r);
			pthread_mutex_unlock(&w->mu);
		}
		oom_mirror_refresh(w, picked, npicked, period);
		pthread_mutex_lock(&w->mu);
		timeout = next_timeout(w, period, last_refresh);
		pthread_mutex_unlock(&w->mu);
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
				(oom_rec_bytes(OOM_REC_COUNTERS, 0) + 8) +
			(1u << 20);
	uint64_t sz = 1u << 20;

	while (sz < need && sz < (32u << 20))
		sz <<= 1;
	return sz;
}

int oom_watch_new(const struct oom_watch_opts *opts, struct oom_watch **out, struct pp_err *err)
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
	w->rb = ring_buffer__new(bpf_map__fd(w->skel->maps.ring), oom_ring_cb, w, NULL);
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
	/* named for top -H and per-thread CPU figures (bench/window_ab.py) */
	pthread_setname_np(w->thr, "pushprof-oom");
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
		oom_target_free(w->t[i]);
	free(w->t);
	free(w->pfds);
	for (size_t i = 0; i < w->nc; i++)
		oom_capture_free(w->c[i]);
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
			 !stored       ? "store_failed"
			 : r->complete ? "complete"
				       : "incomplete");
	else
		snprintf(lbl, sizeof(lbl), "result=\"no_profile\",reason=\"%.*s\"",
			 (int)(n < 40 ? n : 40), r->reason);
	metric_inc("pushprof_oom_kills_total",
		   "OOM kills seen, by outcome: a profile (complete, incomplete, store_failed) "
		   "or none (no_profile, with the reason).",
		   lbl, 1);
}

int oom_watch_deliver(struct oom_watch *w, struct pp_err *err)
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
				if (!w->o.report.fn) {
					ok = false;
					pp_errf(err, -ENOSYS, "OOM profile of pid %d: no reporter",
						(int)r->pid);
					log_result(r, "OOM profile not stored");
				} else if (w->o.report.fn(w->o.report.arg, &r->labels, r->gz,
							  r->gz_len, true, &e)) {
					ok = false;
					pp_errf(err, e.code, "OOM profile of pid %d: %s",
						(int)r->pid, e.msg);
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
