#include "gotrack.h"
#include "gotrack_keep.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "gobin.h"
#include "givemem.h"
#include "goheap.h"
#include "log.h"
#include "oom.h"
#include "metrics.h"
#include "procinfo.h"
#include "ppclock.h"
#include "grow.h"

#define NOT_GO_CACHE 4096 /* not Go, or a Go binary that cannot be analyzed */
/*
 * go_heap.enable_profiling: runtime.MemProfileRate is a variable the Go
 * runtime assigns in its own init (0 when the linker dropped profiling), so
 * a rate written into a process that has just exec'd is overwritten. Wait
 * until the process is this old, then write; and read it back for a while.
 */
#define ENABLE_MIN_AGE_NS 300000000ull
#define ENABLE_VERIFY_NS 3000000000ull

struct tracked {
	pid_t pid;
	uint64_t start;	      /* proc_start_time: tells a reused pid apart */
	struct pp_file_id id; /* tells an exec apart (same pid, same start) */
	struct gobin *g;
	uint64_t last_pressure_ns; /* 0 = never */
	uint64_t enable_at_ns;	   /* enable_profiling pending until then (mono); 0 = not */
	uint64_t enabled_ns;	   /* when we wrote the rate (mono); 0 = never */
	unsigned enables;	   /* writes so far: verified (and rewritten) once only */
	bool queued;		   /* a snapshot job is with the worker */
	unsigned cuts;		   /* consecutive snapshots cut by the budget */
	uint64_t backoff_until_ns; /* no interval snapshot before (mono); 0 = none */
};

/*
 * A snapshot for the worker. The loop fills the first part; the job owns
 * its gobin (gobin_share: the tracked entry may go while the job runs).
 * The worker fills the result; the loop reads it in gotrack_collect().
 */
struct job {
	pid_t pid;
	uint64_t start;
	struct gobin *g;
	const char *trigger; /* a literal */
	enum goheap_view view;
	/* result */
	int rc;
	bool budget_cut;
	char reason[192];
};

#define MAX_JOBS 1024 /* queued + done; more tracked processes wait a turn */

/* A target that is not (yet) a Go program: it may exec one later. */
struct candidate {
	pid_t pid;
	uint64_t start;
	struct pp_file_id id;
	/* caught inside its execve() (gobin -EAGAIN) this many times in a
	 * row: looked at again at each recheck, up to EXEC_RETRIES */
	unsigned retries;
};

/* An exec completes in well under a millisecond; 8 rechecks (2 s) cover a
 * starved one. A process that still does not map its own executable after
 * that (it unmapped it) is treated as any other failure. */
#define EXEC_RETRIES 8

struct gotrack {
	const struct config *cfg;
	struct oom_watch *oom;
	struct tracked *v;
	size_t n, cap;
	struct candidate *cand;
	size_t ncand, cand_cap;
	uint64_t due_ns;			/* earliest enable_at_ns; UINT64_MAX = none */
	struct pp_file_id not_go[NOT_GO_CACHE]; /* ring of executables known not to be Go */
	struct gotrack_keep keep;		/* analyses of exited Go programs */
	size_t not_go_n, not_go_next;
	struct metric *m_tracked, *m_enabled;
	struct metric *m_cut, *m_backoff_skip;
	/* the snapshot worker (see gotrack.h) */
	struct pp_reporter rep; /* where profiles go (gotrack_new) */
	pthread_t thr;
	bool thr_started;
	int efd; /* eventfd: results are waiting */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct job *todo[MAX_JOBS], *done[MAX_JOBS]; /* under mu */
	size_t ntodo, ndone;
	bool stop;	    /* under mu */
	atomic_bool cancel; /* a running snapshot gives up at once */
};

int gotrack_new(const struct gotrack_opts *o, struct gotrack **out, struct pp_err *err)
{
	*out = NULL;
	if (!o || !o->cfg || !o->rep.fn)
		return pp_errf(err, -EINVAL, "gotrack: no config or reporter given");
	struct gotrack *t = calloc(1, sizeof(*t));

	if (!t)
		return pp_errf(err, -ENOMEM, "gotrack: out of memory");
	t->cfg = o->cfg;
	t->rep = o->rep;
	t->due_ns = UINT64_MAX;
	t->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (t->efd < 0) {
		int e = errno;
		free(t);
		return pp_errf(err, -e, "gotrack: eventfd: %s", strerror(e));
	}
	pthread_mutex_init(&t->mu, NULL);
	pthread_cond_init(&t->cv, NULL);
	atomic_init(&t->cancel, false);
	t->m_cut = metric_get("pushprof_go_heap_budget_exceeded_total",
			      "Go heap snapshots cut short by go_heap.budget (the process is then "
			      "backed off).",
			      METRIC_COUNTER, NULL);
	t->m_backoff_skip = metric_get("pushprof_go_heap_snapshots_backed_off_total",
				       "Periodic Go heap snapshots not taken because the process "
				       "exceeded go_heap.budget recently.",
				       METRIC_COUNTER, NULL);
	t->m_tracked = metric_get("pushprof_go_processes_tracked",
				  "Go processes tracked for heap profiles.", METRIC_GAUGE, NULL);
	t->m_enabled = metric_get("pushprof_go_profiling_enabled_total",
				  "Go processes whose MemProfileRate the agent set from 0 "
				  "(go_heap.enable_profiling).",
				  METRIC_COUNTER, NULL);
	*out = t;
	return 0;
}

void gotrack_set_oom(struct gotrack *t, struct oom_watch *w)
{
	t->oom = w;
}

static void job_free(struct job *j)
{
	if (j) {
		gobin_free(j->g);
		free(j);
	}
}

void gotrack_stop(struct gotrack *t)
{
	if (!t || !t->thr_started)
		return;
	atomic_store(&t->cancel, true);
	pthread_mutex_lock(&t->mu);
	t->stop = true;
	pthread_cond_signal(&t->cv);
	pthread_mutex_unlock(&t->mu);
	pthread_join(t->thr, NULL);
	t->thr_started = false;
}

void gotrack_free(struct gotrack *t)
{
	if (!t)
		return;
	gotrack_stop(t);
	for (size_t i = 0; i < t->ntodo; i++)
		job_free(t->todo[i]);
	for (size_t i = 0; i < t->ndone; i++)
		job_free(t->done[i]);
	close(t->efd);
	pthread_mutex_destroy(&t->mu);
	pthread_cond_destroy(&t->cv);
	for (size_t i = 0; i < t->n; i++)
		gobin_free(t->v[i].g);
	gotrack_keep_clear(&t->keep);
	free(t->v);
	free(t->cand);
	free(t);
}

static struct tracked *find(struct gotrack *t, pid_t pid)
{
	for (size_t i = 0; i < t->n; i++)
		if (t->v[i].pid == pid)
			return &t->v[i];
	return NULL;
}

static bool known_not_go(const struct gotrack *t, const struct pp_file_id *id)
{
	for (size_t i = 0; i < t->not_go_n; i++)
		if (pp_file_id_same(&t->not_go[i], id))
			return true;
	return false;
}

static struct candidate *find_cand(struct gotrack *t, pid_t pid)
{
	for (size_t i = 0; i < t->ncand; i++)
		if (t->cand[i].pid == pid)
			return &t->cand[i];
	return NULL;
}

static void cand_del(struct gotrack *t, pid_t pid)
{
	struct candidate *c = find_cand(t, pid);

	if (c)
		*c = t->cand[--t->ncand];
}

/* Remember a target that is not Go now, to notice when it execs one. */
static void cand_set(struct gotrack *t, pid_t pid, uint64_t start, const struct pp_file_id *id)
{
	struct candidate *c = find_cand(t, pid);

	if (!c) {
		if (pp_grow(&t->cand, &t->cand_cap, t->ncand + 1, sizeof(*t->cand), 64))
			return; /* an exec into Go then waits for a pid change */
		c = &t->cand[t->ncand++];
	}
	*c = (struct candidate){ .pid = pid, .start = start, .id = *id };
}

static void remember_not_go(struct gotrack *t, const struct pp_file_id *id)
{
	t->not_go[t->not_go_next] = *id;
	t->not_go_next = (t->not_go_next + 1) % NOT_GO_CACHE;
	if (t->not_go_n < NOT_GO_CACHE)
		t->not_go_n++;
}

/* Age of a process from its start time (clock ticks since boot, in our
 * time namespace's view, as CLOCK_BOOTTIME). */
static uint64_t proc_age_ns(uint64_t start_ticks)
{
	struct timespec ts;
	long hz = sysconf(_SC_CLK_TCK);
	if (hz <= 0 || clock_gettime(CLOCK_BOOTTIME, &ts))
		return UINT64_MAX;
	uint64_t now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	uint64_t st = start_ticks / (uint64_t)hz * 1000000000ull +
		      start_ticks % (uint64_t)hz * (1000000000ull / (uint64_t)hz);
	return now > st ? now - st : 0;
}

/* go_heap.enable_profiling for one process whose runtime has started. */
static void enable_profiling(struct gotrack *t, struct tracked *e, uint64_t now)
{
	struct pp_err err = { 0 };
	int64_t old = 0;
	int w = gobin_enable_profiling(e->g, GOBIN_DEFAULT_RATE, &old, &err);

	e->enable_at_ns = 0;
	if (w == 1) {
		bool again = e->enables++ > 0;
		e->enabled_ns = now;
		metric_add(t->m_enabled, 1);
		pp_log(again ? PP_WARN : PP_INFO,
		       again ? "memory profiling was reset in a Go "
			       "process, enabled again"
			     : "enabled memory profiling in a Go process",
		       "pid=%d exe=%s wrote=runtime.MemProfileRate value=%d", (int)e->pid,
		       pp_q(e->g->exe ? e->g->exe : ""), GOBIN_DEFAULT_RATE);
	} else if (w < 0) {
		pp_log(PP_WARN, "cannot enable memory profiling", "pid=%d error=%s", (int)e->pid,
		       pp_q(err.msg));
	}
}

/*
 * remember: keep a target that is not Go as a candidate, so that
 * gotrack_recheck() notices when it execs a Go program (the target set
 * reports matched-state changes only, and a process moved into a targeted
 * cgroup before its exec - runc's init does exactly that - stays matched).
 * The whole-host scan looks at every process anyway and remembers none.
 */
static int add(struct gotrack *t, pid_t pid, bool remember)
{
	struct pp_err err = { 0 };
	struct pp_file_id id;
	struct gobin *g = NULL;

	if (!t->cfg->go_heap.enabled)
		return 0;
	struct tracked *old = find(t, pid);
	uint64_t start = 0;
	if (exe_id_of(pid, &id))
		return 0; /* gone, or a kernel thread */
	if (old) {
		if (proc_start_time(pid, &start))
			return 0; /* gone: the caller removes it */
		if (old->start == start && pp_file_id_same(&old->id, &id))
			return 0;
		/* the pid now names another process (or the process exec'd):
		 * the old gobin describes another binary's memory layout */
		pp_log(PP_DEBUG,
		       old->start == start ? "go process exec'd, analyzing the new executable"
					   : "pid reused, tracking the new process afresh",
		       "pid=%d", (int)pid);
		if (t->oom && old->start == start)
			oom_watch_untrack(t->oom, pid);
		gotrack_remove(t, pid);
	}
	/* cheap checks first: whole-host scans call this for every process */
	if (known_not_go(t, &id)) {
		if (remember && (start || proc_start_time(pid, &start) == 0))
			cand_set(t, pid, start, &id);
		return 0;
	}
	if (!start && proc_start_time(pid, &start))
		return 0;
	/* replicas of one executable share its analysis and symbol tables */
	int rc = -ENOENT;
	for (size_t i = 0; i < t->n && rc; i++)
		if (pp_file_id_same(&t->v[i].id, &id))
			rc = gobin_share(t->v[i].g, pid, &g, NULL);
	const char *analysis = rc ? "kept" : "shared";
	const struct gobin *kept;
	if (rc && (kept = gotrack_keep_find(&t->keep, &id, pp_mono_ns())) != NULL)
		rc = gobin_share(kept, pid, &g, NULL); /* one that ran before */
	if (rc) {
		analysis = "new";
		g = NULL;
		rc = gobin_new(&(struct gobin_opts){ .pid = pid }, &g, &err);
	}
	if (rc == -ENOEXEC) {
		remember_not_go(t, &id);
		if (remember)
			cand_set(t, pid, start, &id);
		return 0;
	}
	if (rc == -ESRCH)
		return 0;
	struct candidate *c = find_cand(t, pid);
	unsigned tries = c && c->start == start ? c->retries : 0;
	if (rc == -EAGAIN && tries < EXEC_RETRIES) {
		/* inside its execve(): never remember this executable as not
		 * Go (every later process of it would go untracked); the
		 * whole-host scan comes back by itself */
		if (remember) {
			cand_set(t, pid, start, &id);
			if ((c = find_cand(t, pid)) != NULL)
				c->retries = tries + 1;
		}
		return 0;
	}
	if (rc) {
		/* once per executable: whole-host scans come back every second */
		remember_not_go(t, &id);
		if (remember)
			cand_set(t, pid, start, &id);
		pp_log(PP_WARN, "go process not tracked", "pid=%d error=%s", (int)pid,
		       pp_q(err.msg));
		gobin_free(g);
		return rc;
	}
	if (pp_grow(&t->v, &t->cap, t->n + 1, sizeof(*t->v), 16)) {
		gobin_free(g);
		return -ENOMEM;
	}
	cand_del(t, pid);
	t->v[t->n++] = (struct tracked){ .pid = pid, .start = start, .id = id, .g = g };
	if (t->cfg->go_heap.enable_profiling) {
		uint64_t age = proc_age_ns(start), now = pp_mono_ns();
		struct tracked *e = &t->v[t->n - 1];
		if (age >= ENABLE_MIN_AGE_NS) {
			enable_profiling(t, e, now);
		} else {
			e->enable_at_ns = now + (ENABLE_MIN_AGE_NS - age);
			if (e->enable_at_ns < t->due_ns)
				t->due_ns = e->enable_at_ns;
		}
	}
	metric_set(t->m_tracked, (double)t->n);
	/* armed for OOM capture before the line is logged: "tracking" means an
	 * OOM kill from now on is captured (a test that starts the leak on
	 * this line once saw the kill before the BPF targets entry existed) */
	const char *oom = "off";
	if (t->oom) {
		struct pp_err oerr = { 0 };
		oom = "armed";
		if (oom_watch_track_shared(t->oom, pid, g, &oerr) < 0) {
			oom = "failed";
			pp_log(PP_WARN, "go process not armed for OOM capture", "pid=%d error=%s",
			       (int)pid, pp_q(oerr.msg));
		}
	}
	pp_log(PP_DEBUG, "tracking go process", "pid=%d go=%s vars=%s analysis=%s oom=%s",
	       (int)pid, g->go_version[0] ? g->go_version : "unknown",
	       g->vars.source == GOBIN_VARS_SYMTAB ? "symtab" : "code", analysis, oom);
	return 1;
}

int gotrack_add(struct gotrack *t, pid_t pid)
{
	return add(t, pid, true);
}

uint64_t gotrack_due(const struct gotrack *t)
{
	return t->due_ns;
}

void gotrack_recheck(struct gotrack *t)
{
	pid_t again[64];
	size_t nagain = 0;
	uint64_t now = pp_mono_ns();

	t->due_ns = UINT64_MAX;
	for (size_t i = 0; i < t->n; i++) {
		struct tracked *e = &t->v[i];
		int64_t rate;
		if (e->enable_at_ns && now >= e->enable_at_ns)
			enable_profiling(t, e, now);
		else if (e->enables == 1 && now - e->enabled_ns < ENABLE_VERIFY_NS &&
			 gobin_read_rate(e->g, &rate, NULL) == 0 && rate == 0)
			enable_profiling(t, e, now); /* the runtime's init came after us */
		if (e->enable_at_ns && e->enable_at_ns < t->due_ns)
			t->due_ns = e->enable_at_ns;
	}

	for (size_t i = 0; i < t->ncand;) {
		struct candidate *c = &t->cand[i];
		struct pp_file_id id;
		uint64_t st;
		/* one stat per candidate: reading /proc/PID/stat for each (the
		 * start time) on every recheck was most of a targeted agent's
		 * CPU where processes start often; the start time is read only
		 * for an executable that changed */
		bool gone = exe_id_of(c->pid, &id) != 0;
		bool changed = !gone && !pp_file_id_same(&c->id, &id);
		if (gone || (changed && (proc_start_time(c->pid, &st) || st != c->start))) {
			/* gone or reused: the target set reports that by itself */
			*c = t->cand[--t->ncand];
			continue;
		}
		if ((changed || c->retries) && nagain < sizeof(again) / sizeof(again[0]))
			again[nagain++] = c->pid;
		i++;
	}
	for (size_t i = 0; i < t->n; i++) {
		struct pp_file_id id;
		if (exe_id_of(t->v[i].pid, &id) == 0 && !pp_file_id_same(&t->v[i].id, &id) &&
		    nagain < sizeof(again) / sizeof(again[0]))
			again[nagain++] = t->v[i].pid;
	}
	for (size_t i = 0; i < nagain; i++)
		add(t, again[i], true);
}

void gotrack_remove(struct gotrack *t, pid_t pid)
{
	struct tracked *e = find(t, pid);

	cand_del(t, pid);
	if (!e)
		return;
	struct gobin *g = e->g;
	struct pp_file_id id = e->id;
	*e = t->v[--t->n];
	bool shared = false; /* a replica still runs: later ones share from it */
	for (size_t i = 0; i < t->n && !shared; i++)
		shared = pp_file_id_same(&t->v[i].id, &id);
	if (shared)
		gobin_free(g);
	else
		gotrack_keep_put(&t->keep, &id, g, pp_mono_ns());
	metric_set(t->m_tracked, (double)t->n);
}

size_t gotrack_count(const struct gotrack *t)
{
	return t->n;
}

struct goheap_budget gotrack_budget(const struct go_heap_config *gh)
{
	return (struct goheap_budget){
		.max_frames = gh->budget.max_frames,
		.max_locations = gh->budget.max_locations,
		.max_read_bytes = gh->budget.max_read_bytes,
		.max_duration_ns = gh->budget.max_duration_ns,
	};
}

/* Run one job on the worker: snapshot, hand the profile to the reporter,
 * count and log. Touches nothing of t but the read-only config, the
 * reporter, metrics, and the cancel flag. */
static void run_job(struct gotrack *t, struct job *j)
{
	struct pp_err err = { 0 };
	struct goheap_snapshot s = { 0 };
	const struct go_heap_config *gh = &t->cfg->go_heap;
	struct goheap_snapshot_opts opts = {
		.view = j->view,
		.max_buckets = gh->max_buckets,
		.max_depth = gh->max_stack_depth,
		.budget = gotrack_budget(gh),
		.cancel = &t->cancel,
		.trigger = j->trigger,
		.node = t->cfg->node,
		.external = &t->cfg->external_labels,
	};
	char lbl[96];
	int rc = goheap_snapshot(j->pid, j->g, &opts, &s, &err);

	j->rc = rc;
	if (rc == -ESRCH) {
		goheap_snapshot_free(&s);
		return;
	}
	const char *result = rc == 0		      ? (s.complete ? "complete" : "incomplete")
			     : rc == GOHEAP_EDISABLED ? "profiling_disabled"
						      : "error";
	snprintf(lbl, sizeof(lbl), "trigger=\"%s\",result=\"%s\"", j->trigger, result);
	metric_inc("pushprof_go_heap_snapshots_total", "Go heap snapshots taken, by outcome.", lbl,
		   1);
	if (rc == GOHEAP_EDISABLED) {
		/* say so once per process, not every interval */
		pp_log(PP_DEBUG, "go heap: memory profiling disabled in process", "pid=%d",
		       (int)j->pid);
	} else if (rc) {
		pp_log(PP_WARN, "go heap snapshot failed", "pid=%d trigger=%s error=%s",
		       (int)j->pid, j->trigger, pp_q(err.msg));
	} else {
		j->budget_cut = s.budget_cut;
		snprintf(j->reason, sizeof(j->reason), "%s", s.incomplete_reason);
		if (t->rep.fn(t->rep.arg, &s.labels, s.gz, s.len, false, &err))
			pp_log(PP_WARN, "cannot hand over a heap profile", "pid=%d error=%s",
			       (int)j->pid, pp_q(err.msg));
		pp_log(strcmp(j->trigger, "interval") ? PP_INFO : PP_DEBUG, "go heap snapshot",
		       "pid=%d trigger=%s view=%s buckets=%zu samples=%zu complete=%s%s%s "
		       "frames=%" PRIu64 " locations=%" PRIu64 " read_bytes=%" PRIu64
		       " read_ms=%.2f total_ms=%.2f bytes=%zu",
		       (int)j->pid, j->trigger, goheap_view_name(j->view), s.buckets, s.samples,
		       s.complete ? "true" : "false",
		       s.complete ? "" : " reason=", s.complete ? "" : pp_q(s.incomplete_reason),
		       s.frames, s.locations, s.read_bytes, (double)s.read_ns / 1e6,
		       (double)s.total_ns / 1e6, s.len);
	}
	goheap_snapshot_free(&s);
}

/* Not niced: pressure snapshots race the OOM killer. The loop and the HTTP
 * thread do little work each and get the other core or their turn. */
static void *worker(void *arg)
{
	struct gotrack *t = arg;
	size_t free_at = 0; /* pp_give_back_memory() */

	pthread_mutex_lock(&t->mu);
	for (;;) {
		while (!t->stop && !t->ntodo)
			pthread_cond_wait(&t->cv, &t->mu);
		if (t->stop)
			break;
		struct job *j = t->todo[0];
		memmove(t->todo, t->todo + 1, --t->ntodo * sizeof(*t->todo));
		pthread_mutex_unlock(&t->mu);
		run_job(t, j);
		/* glibc keeps what a thread freed in that thread's arena: a
		 * large snapshot's (budgeted) peak would stay resident. Given
		 * back after a burst, and once the queue is empty: trimming
		 * after each of the 50 snapshots that one heap interval queues
		 * on a node cost them half their CPU in faults and TLB
		 * shootdowns (givemem.h). */
		pp_give_back_memory(&free_at);
		pthread_mutex_lock(&t->mu);
		t->done[t->ndone++] = j; /* room: todo + done <= MAX_JOBS */
		/* The loop pushes interval snapshots with its next window: it
		 * is woken once the queue is empty, not for each of the 50 an
		 * interval queues on a node (a wake-up of an idle loop costs
		 * more on a VM than collecting). Other triggers (pressure: the
		 * OOM killer may be near) at once; half-full, so that enqueue()
		 * keeps room. */
		if (!t->ntodo || strcmp(j->trigger, "interval") || t->ndone >= MAX_JOBS / 2) {
			uint64_t one = 1;
			if (write(t->efd, &one, sizeof(one)) < 0) {
				/* the counter cannot overflow at MAX_JOBS: nothing to do */
			}
		}
		if (!t->ntodo && !t->stop) {
			pthread_mutex_unlock(&t->mu);
			pp_trim_memory(&free_at);
			pthread_mutex_lock(&t->mu);
		}
	}
	pthread_mutex_unlock(&t->mu);
	return NULL;
}

/* Hand e's snapshot to the worker (started on first use). */
static void enqueue(struct gotrack *t, struct tracked *e, const char *trigger,
		    enum goheap_view view)
{
	struct pp_err err = { 0 };
	struct job *j;

	if (e->queued)
		return; /* the previous one is still running: no pile-up */
	if (!t->thr_started) {
		if (pthread_create(&t->thr, NULL, worker, t)) {
			pp_log(PP_WARN, "cannot start the heap snapshot thread", "error=%s",
			       pp_q(strerror(errno)));
			return;
		}
		t->thr_started = true;
		pthread_setname_np(t->thr, "pushprof-goheap"); /* for top -H */
	}
	if (!(j = calloc(1, sizeof(*j))))
		return;
	*j = (struct job){ .pid = e->pid, .start = e->start, .trigger = trigger, .view = view };
	if (gobin_share(e->g, e->pid, &j->g, &err)) {
		/* gone or exec'd: the next scan or recheck handles it */
		pp_log(PP_DEBUG, "go heap snapshot not queued", "pid=%d error=%s", (int)e->pid,
		       pp_q(err.msg));
		free(j);
		return;
	}
	pthread_mutex_lock(&t->mu);
	if (t->ntodo + t->ndone >= MAX_JOBS) {
		pthread_mutex_unlock(&t->mu);
		job_free(j);
		return;
	}
	if (strcmp(trigger, "interval")) {
		/* pressure: ahead of the periodic ones (the OOM killer may be near) */
		memmove(t->todo + 1, t->todo, t->ntodo * sizeof(*t->todo));
		t->todo[0] = j;
		t->ntodo++;
	} else {
		t->todo[t->ntodo++] = j;
	}
	pthread_cond_signal(&t->cv);
	pthread_mutex_unlock(&t->mu);
	e->queued = true;
}

int gotrack_fd(const struct gotrack *t)
{
	return t->efd;
}

size_t gotrack_collect(struct gotrack *t, size_t *urgent)
{
	struct job *v[MAX_JOBS];
	size_t n;
	uint64_t cnt, now = pp_mono_ns();

	if (read(t->efd, &cnt, sizeof(cnt)) < 0) {
		/* EAGAIN: nothing new signalled; collect anyway */
	}
	pthread_mutex_lock(&t->mu);
	n = t->ndone;
	memcpy(v, t->done, n * sizeof(*v));
	t->ndone = 0;
	pthread_mutex_unlock(&t->mu);
	if (urgent)
		*urgent = 0;
	for (size_t i = 0; i < n; i++) {
		struct job *j = v[i];
		struct tracked *e = find(t, j->pid);
		if (urgent && strcmp(j->trigger, "interval"))
			(*urgent)++;
		if (e && e->start == j->start) {
			e->queued = false;
			if (j->rc == -ESRCH) {
				gotrack_remove(t, j->pid);
			} else if (j->budget_cut) {
				/* Not read again for backoff, doubling per cut up to
				 * 8x: a hostile or pathological process costs one
				 * bounded snapshot per backoff, not one per interval. */
				uint64_t bo = t->cfg->go_heap.budget.backoff_ns;
				unsigned sh = e->cuts < 3 ? e->cuts : 3;
				metric_add(t->m_cut, 1);
				if (e->cuts++ == 0 || !bo)
					pp_log(PP_WARN, "go heap snapshot over budget, backing off",
					       "pid=%d reason=%s backoff_s=%.0f", (int)j->pid,
					       pp_q(j->reason), (double)(bo << sh) / 1e9);
				e->backoff_until_ns = bo ? now + (bo << sh) : 0;
			} else if (j->rc == 0) {
				e->cuts = 0;
				e->backoff_until_ns = 0;
			}
		}
		job_free(j);
	}
	return n;
}

/* Still the process that was analyzed? */
static bool same_process(const struct tracked *e)
{
	uint64_t st;
	return proc_start_time(e->pid, &st) == 0 && st == e->start;
}

void gotrack_snapshot_all(struct gotrack *t)
{
	pid_t reused[64];
	size_t nreused = 0;
	uint64_t now = pp_mono_ns();

	gotrack_keep_expire(&t->keep, now);
	for (size_t i = 0; i < t->n;) {
		pid_t pid = t->v[i].pid;
		if (!same_process(&t->v[i])) {
			/* exited, or exited and the pid came back as another process */
			if (nreused < sizeof(reused) / sizeof(reused[0]))
				reused[nreused++] = pid;
			gotrack_remove(t, pid);
			continue;
		}
		if (t->v[i].backoff_until_ns && now < t->v[i].backoff_until_ns)
			metric_add(t->m_backoff_skip, 1);
		else
			enqueue(t, &t->v[i], "interval", GOHEAP_VIEW_RUNTIME);
		i++;
	}
	/* a live process under a reused pid is still a target: analyze it */
	for (size_t i = 0; i < nreused; i++)
		gotrack_add(t, reused[i]);
}

int gotrack_consider(struct gotrack *t, pid_t pid)
{
	return add(t, pid, false);
}

static int read_u64_file(const char *path, uint64_t *v)
{
	char buf[64];
	FILE *f = fopen(path, "re");

	if (!f)
		return -errno;
	if (!fgets(buf, sizeof(buf), f)) {
		fclose(f);
		return -EIO;
	}
	fclose(f);
	if (!strncmp(buf, "max", 3)) {
		*v = UINT64_MAX;
		return 0;
	}
	char *end;
	errno = 0;
	unsigned long long x = strtoull(buf, &end, 10);
	if (errno || end == buf)
		return -EINVAL;
	*v = x;
	return 0;
}

int gotrack_memcg_usage(pid_t pid, uint64_t *usage, uint64_t *limit)
{
	char cg[2048], path[2300];
	int rc;

	/* cgroup v2 first, when the process has a v2 path and the files exist */
	if (proc_cgroup(pid, NULL, cg, sizeof(cg)) == 0) {
		snprintf(path, sizeof(path), "/sys/fs/cgroup%s/memory.current", cg);
		if (read_u64_file(path, usage) == 0) {
			snprintf(path, sizeof(path), "/sys/fs/cgroup%s/memory.max", cg);
			return read_u64_file(path, limit);
		}
	}
	rc = proc_cgroup(pid, "memory", cg, sizeof(cg));
	if (rc)
		return rc;
	snprintf(path, sizeof(path), "/sys/fs/cgroup/memory%s/memory.usage_in_bytes", cg);
	if ((rc = read_u64_file(path, usage)))
		return rc;
	snprintf(path, sizeof(path), "/sys/fs/cgroup/memory%s/memory.limit_in_bytes", cg);
	if ((rc = read_u64_file(path, limit)))
		return rc;
	/* v1 reports "no limit" as a huge page-rounded number */
	if (*limit >= (1ull << 60))
		*limit = UINT64_MAX;
	return 0;
}

int gotrack_check_pressure(struct gotrack *t, uint64_t now_ns)
{
	const struct pressure_config *p = &t->cfg->go_heap.pressure;
	int taken = 0;

	if (!p->enabled)
		return 0;
	for (size_t i = 0; i < t->n; i++) {
		struct tracked *e = &t->v[i];
		uint64_t usage, limit;
		if (e->last_pressure_ns && now_ns - e->last_pressure_ns < p->cooldown_ns)
			continue;
		if (gotrack_memcg_usage(e->pid, &usage, &limit) || limit == UINT64_MAX || !limit)
			continue;
		if (usage * 100 < (uint64_t)p->threshold_percent * limit)
			continue;
		if (e->queued)
			continue; /* a snapshot of it is under way: look again next poll */
		e->last_pressure_ns = now_ns;
		pp_log(PP_INFO, "memory pressure: taking a heap snapshot before the OOM killer",
		       "pid=%d usage=%" PRIu64 " limit=%" PRIu64 " threshold_percent=%u",
		       (int)e->pid, usage, limit, p->threshold_percent);
		/* a process backed off for its budget is still worth one bounded
		 * look before the OOM killer comes */
		enqueue(t, e, "pressure", GOHEAP_VIEW_LATEST);
		taken++;
	}
	return taken;
}
