/*
 * agent.c - the run loop (see agent.h).
 *
 * Why ~800 lines in one file: it is one concept, the loop's lifetime.
 * agent_run() brings the modules up in dependency order (outbox before
 * its producers, symbolizer before the sampler, HTTP once there is
 * something to report), runs the one poll() loop that schedules every
 * periodic job (windows, scans, heap intervals, pressure, flushes,
 * signals), and tears down in the reverse order with the shutdown's
 * deadlines; the target callbacks and window() act on the same struct
 * agent. Split up, the start-up and teardown orders could no longer be
 * read side by side. What is not about the loop lives beside it: the
 * series labels in agent_labels.c, the snapshot API in agent_snapshot.c,
 * a window's metrics and log line in agent_window.c.
 */
#include "agent.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "agent_labels.h"
#include "agent_snapshot.h"
#include "agent_window.h"
#include "cpu.h"
#include "containers.h"
#include "nodemeta.h"
#include "debuginfo.h"
#include "frameless.h"
#include "givemem.h"
#include "cpu_profile.h"
#include "gotrack.h"
#include "http.h"
#include "log.h"
#include "metrics.h"
#include "oom.h"
#include "procev.h"
#include "outbox.h"
#include "relabel.h"
#include "symbolize.h"
#include "targets.h"
#include "version.h"
#include "ppclock.h"

/* Full /proc scans: every second without process events; with them (forks,
 * execs, renames and exits arrive as they happen) a scan only catches what
 * they do not tell, cgroup moves and the rare exit whose leader left first
 * (targets_exit), so every 60 s. Listing /proc and reading each process's
 * files was most of an idle agent's CPU time at one scan a second; at one
 * in 10 s the listing alone was a sixth of the loop's. */
#define SCAN_NS 1000000000ull
#define SCAN_EVENTS_NS 60000000000ull
#define RECHECK_NS 250000000ull /* exec'd targets: gotrack_recheck() spacing */
/* BPF process events: the first after a quiet stretch wakes the loop, which
 * drains them this much later (a fork and its exec in one drain) */
#define PROCEV_GATHER_NS 50000000ull

struct agent {
	const struct config *cfg;
	struct outbox *outbox;
	struct targets *targets;
	struct cpu_sampler *cpu;
	struct frameless *fl;	    /* NULL: PUSHPROF_FRAMELESS=off (or no cpu) */
	struct symbolizer *sym;	    /* NULL: profiles carry addresses only */
	struct http_server *http;   /* NULL: no http_address */
	struct gotrack *go;	    /* NULL: go_heap disabled */
	struct oom_watch *oom;	    /* NULL: go_heap.on_oom off or unavailable */
	struct procev *procev;	    /* BPF process events (no netlink connector) */
	bool procev_ready;	    /* drain at the young tick: procev_fd() woke the loop, or
				     * an event took its wake-up during the last drain */
	struct debuginfo *dbg;	    /* NULL: no remote store or debuginfo_upload off */
	struct agent_labeler lab;   /* the outbox's labeler: metadata, relabel_configs */
	struct agent_snapshot snap; /* POST /api/v1/snapshot */
	atomic_bool stopping;	    /* the loop is finishing: cut network waits short */
	struct cpu_window win;
	uint64_t window_start_mono;
	int64_t window_start_real;
	uint64_t windows;
	int allow_errors;
	size_t free_at; /* pp_give_back_memory() */
	int evfd;	      /* netlink process events (targets_events_open), or < 0 */
	uint64_t events_ns;   /* take_events(): last time */
	bool rescan;	      /* events were lost: the loop rescans /proc now */
	bool took_events;     /* take_events() read some: the loop's gotrack recheck */
	uint64_t between_ns;  /* the loop's CPU in take_events() during this window's build */
	unsigned profile_delay_ms; /* tests: PUSHPROF_TEST_PROFILE_DELAY_MS */
};

/* The process's CPU time, and the calling thread's own: the window work
 * without what the other threads (Go heap worker, OOM watcher, pushes)
 * did meanwhile. */
#define cpu_time_ns() ((uint64_t)pp_clock_ns(CLOCK_PROCESS_CPUTIME_ID))
#define thread_cpu_ns() ((uint64_t)pp_clock_ns(CLOCK_THREAD_CPUTIME_ID))

static void on_target_change(pid_t pid, bool matched, void *arg)
{
	struct agent *a = arg;
	if (a->go) {
		if (matched)
			gotrack_add(a->go, pid);
		else
			gotrack_remove(a->go, pid);
	}
	/* A live process that stops matching is disarmed; an exiting one is left
	 * to the watcher, which may be building its OOM profile right now. */
	if (a->oom && !matched && kill(pid, 0) == 0)
		oom_watch_untrack(a->oom, pid);
	if (!a->cpu)
		return;
	/* a new executable's leaf table first (a large one takes a few hundred
	 * ms): samples taken before it is installed would be walked plainly,
	 * with frameless leaves under their grand-callers */
	if (matched && a->fl)
		frameless_prepare(a->fl, pid);
	if (cpu_sampler_allow(a->cpu, pid, matched) < 0)
		a->allow_errors++;
	if (a->fl) {
		if (matched)
			frameless_track(a->fl, pid);
		else
			frameless_untrack(a->fl, pid);
	}
	/* Load a new target's files now: it may exit before its window ends. */
	if (matched && a->sym)
		sym_prepare(a->sym, pid, NULL);
	pp_log(PP_DEBUG, matched ? "target added" : "target removed", "pid=%d", (int)pid);
}

/* Whole-host mode: every process the target scanner evaluates (new, exec'd,
 * or its periodic re-check) may be a Go program to track. */
static void on_target_seen(pid_t pid, bool matched, void *arg)
{
	struct agent *a = arg;
	if (a->go && matched && targets_whole_host(a->targets))
		gotrack_consider(a->go, pid);
	/* every (re)evaluation: a target that exec'd another file gets its
	 * new table (the change callback stays silent for it) */
	if (a->fl && matched)
		frameless_track(a->fl, pid);
}

static void on_maprec(pid_t pid, uint64_t time_ns, const struct proc_map *m, void *arg)
{
	struct agent *a = arg;
	/* out of memory: the mapping stays unknown, as without its record */
	(void)sym_add_mapping(a->sym, pid, time_ns, m);
}

/* What the kernel recorded processes mapping since the last call (maprec.h)
 * to the symbolizer: a profiled process that maps a library after its last
 * maps read and exits before the next one still has it. Cheap when the
 * rings are empty (one load per CPU). */
static void drain_maprecs(struct agent *a)
{
	if (a->cpu && a->sym)
		cpu_sampler_drain_maps(a->cpu, on_maprec, a);
}

static void on_procev(enum procev_kind kind, pid_t pid, void *arg)
{
	struct agent *a = arg;
	if (kind == PROCEV_KIND_EXIT) {
		targets_exit(a->targets, pid);
		return;
	}
	/* whole host: a fork's child has its parent's facts until it execs */
	if (kind == PROCEV_KIND_FORK && targets_whole_host(a->targets))
		return;
	targets_event(a->targets, pid, pp_mono_ns(), on_target_change, a);
}

static void forget_pid(pid_t pid, void *arg)
{
	struct agent *a = arg;
	if (a->sym)
		sym_forget(a->sym, pid);
	if (a->fl)
		frameless_untrack(a->fl, pid);
	if (a->go)
		gotrack_remove(a->go, pid);
}

/* Netlink process events: targets in and out. Lost events mean a rescan
 * (the loop does it); events that named a process, gotrack's exec recheck. */
static void read_netlink(struct agent *a, uint64_t now)
{
	int n = targets_events_read(a->targets, now, on_target_change, a);
	if (n == -ENOBUFS)
		a->rescan = true;
	else if (n > 0)
		a->took_events = true;
	/* processes start: their mmap records come in now, and a ring holds
	 * ~200 (a node starting processes fast filled it between windows) */
	if (n != 0)
		drain_maprecs(a);
}

/* The BPF process events: the same contract as read_netlink. */
static void drain_procev(struct agent *a)
{
	int m = procev_drain(a->procev, on_procev, a);
	/* an event during the drain took the wake-up: the next tick drains
	 * without waiting for one (a busy host: once a second, as before) */
	a->procev_ready = !procev_armed(a->procev);
	if (m == -ENOBUFS) {
		targets_events_lost(a->targets);
		a->rescan = true;
	} else if (m > 0) {
		a->took_events = true;
	}
	if (m != 0)
		drain_maprecs(a); /* as read_netlink */
}

/* Process events now (at most every 50 ms): new targets are let through the
 * filter while a window is being built, which takes seconds on a loaded
 * node (a process that lives shorter than the build was never sampled). */
static void take_events(void *arg)
{
	struct agent *a = arg;
	uint64_t now = pp_mono_ns();
	if (now - a->events_ns < 50000000ull)
		return;
	a->events_ns = now;
	if (a->evfd >= 0)
		read_netlink(a, now);
	if (a->procev)
		drain_procev(a);
}

/* take_events() between two processes' profiles, its CPU time counted
 * apart: the window line tells the sample path from process events that
 * arrived during the build (a new executable's tables, its symbols). */
static void between_profiles(void *arg)
{
	struct agent *a = arg;
	uint64_t t0 = thread_cpu_ns();

	take_events(a);
	a->between_ns += thread_cpu_ns() - t0;
}

/* report_cpu's argument: the window's profiles of one protocol's
 * encoding (all = true: the stores all have that protocol) */
struct emit_ctx {
	struct agent *a;
	enum store_protocol protocol;
	bool all;
};

/* The CPU profiles' reporter (the main loop's thread): the outbox, to the
 * stores of the protocol they were encoded for. Never durable. */
static int report_cpu(void *arg, const struct pp_labels *labels, const uint8_t *gz, size_t len,
		      bool durable, struct pp_err *err)
{
	struct emit_ctx *e = arg;
	(void)durable;
	if (e->a->profile_delay_ms) /* tests: a build as slow as a loaded node's */
		usleep(e->a->profile_delay_ms * 1000u);
	return e->all ? outbox_submit(e->a->outbox, labels, gz, len, err)
		      : outbox_submit_protocol(e->a->outbox, e->protocol, labels, gz, len, err);
}

/* The reporter of the heap producers (gotrack's worker, the OOM watcher):
 * the outbox; durable ones (OOM captures) are on disk before it returns. */
static int report_profile(void *arg, const struct pp_labels *labels, const uint8_t *gz, size_t len,
			  bool durable, struct pp_err *err)
{
	struct agent *a = arg;
	return durable ? outbox_submit_durable(a->outbox, labels, gz, len, err)
		       : outbox_submit(a->outbox, labels, gz, len, err);
}

/* SIGTERM/SIGINT are blocked (they go to the signalfd): while the loop is
 * inside a network call they wait here as pending signals. */
static bool stop_pending(void *arg)
{
	const atomic_bool *stopping = arg; /* set by the loop once it stops */
	sigset_t set;
	if (atomic_load(stopping))
		return true;
	return sigpending(&set) == 0 &&
	       (sigismember(&set, SIGTERM) == 1 || sigismember(&set, SIGINT) == 1);
}

/* A per-sample string label switch (cpu.thread_labels, cpu.cpu_label) in
 * the profiles for protocol p: auto (-1) is on, except for Pyroscope, which
 * makes a series of every string sample label. */
static bool sample_label_on(int v, enum store_protocol p)
{
	return v < 0 ? p != STORE_PYROSCOPE : v;
}

/* The switch for what the sampler records: on when any store's profiles
 * carry the label (a Pyroscope store's encoding leaves it out). */
static bool sample_label_any(const struct config *cfg, int v)
{
	bool on = sample_label_on(v, cfg->remote_store.protocol);
	for (size_t i = 0; i < cfg->nmore_stores; i++)
		on = on || sample_label_on(v, cfg->more_stores[i].protocol);
	return on;
}

/* A store's protocol and transport as the start line names them. */
static const char *wire_name(const struct remote_store_config *rs)
{
	if (rs->protocol != STORE_PYROSCOPE)
		return "parca/grpc";
	return rs->http ? "pyroscope/http" : "pyroscope/grpc";
}

/* A mapping left unnamed: its file, as mapped now, goes to the debuginfo
 * worker (a hash-set lookup when the build id is known). */
static void on_unresolved(pid_t pid, const struct sym_mapping *m, void *arg)
{
	struct agent *a = arg;
	char path[96];

	snprintf(path, sizeof(path), "/proc/%d/map_files/%llx-%llx", (int)pid,
		 (unsigned long long)m->start, (unsigned long long)m->limit);
	debuginfo_enqueue(a->dbg, m->build_id, path);
}

static void window(struct agent *a)
{
	struct pp_err err = { 0 };
	uint64_t cpu0 = cpu_time_ns(), tcpu0 = thread_cpu_ns();
	uint64_t end_mono = pp_mono_ns(), start_mono = a->window_start_mono;
	int64_t start_real = a->window_start_real;
	int64_t dur = (int64_t)(end_mono - start_mono);
	a->window_start_mono = end_mono;
	a->window_start_real = pp_clock_ns(CLOCK_REALTIME);
	a->windows++;
	a->between_ns = 0;

	if (cpu_sampler_drain(a->cpu, &a->win, &err) < 0) {
		pp_log(PP_ERROR, "cpu window drain failed", "error=%s", pp_q(err.msg));
		return;
	}
	drain_maprecs(a); /* mappings made up to the window's last sample */
	bool changed = false;
	pp_err_clear(&err);
	if (cpu_sampler_sync_cpus(a->cpu, &changed, &err) < 0)
		pp_log(PP_WARN, "cpu hotplug rescan failed", "error=%s", pp_q(err.msg));
	else if (changed)
		pp_log(PP_INFO, "online CPUs changed", "cpus=%u", cpu_sampler_ncpus(a->cpu));

	/* CPU profiles are encoded per protocol (names, sample types, thread
	 * labels): stores of both Parca and Pyroscope get a build each, the
	 * first store's protocol first (local_store keeps that one) */
	unsigned protos = outbox_protocols(a->outbox);
	enum store_protocol first = a->cfg->remote_store.protocol;
	struct cpu_profile_stats ps = { 0 };
	for (int k = 0; k < 2; k++) {
		enum store_protocol p = k ? (enum store_protocol) !first : first;
		if (k && !(protos & (1u << p)))
			break;
		struct emit_ctx ec = { .a = a, .protocol = p, .all = !(protos & ~(1u << p)) };
		struct cpu_profile_opts po = {
			.node = a->cfg->node,
			.external_labels = &a->cfg->external_labels,
			.frequency_hz = a->cfg->cpu.frequency_hz,
			.pyroscope = p == STORE_PYROSCOPE,
			.thread_labels = sample_label_on(a->cfg->cpu.thread_labels, p),
			.cpu_label = sample_label_on(a->cfg->cpu.cpu_label, p),
			.time_nanos = start_real,
			.duration_nanos = dur,
			.facts_since_ns = start_mono,
			.sym = a->sym,
			.unresolved = a->dbg && !k ? on_unresolved : NULL,
			.unresolved_arg = a,
			.between = between_profiles,
			.between_arg = a,
		};
		struct cpu_profile_stats ks;
		pp_err_clear(&err);
		if (cpu_profiles_build(&a->win, a->targets, &po,
				       &(struct pp_reporter){ report_cpu, &ec }, &ks, &err) < 0)
			pp_log(PP_ERROR, "building CPU profiles failed", "error=%s", pp_q(err.msg));
		if (!k) /* the window's figures, not each encoding's */
			ps = ks;
	}
	pp_err_clear(&err);
	int fr = outbox_flush(a->outbox, &err);
	targets_forget_gone(a->targets, forget_pid, a);
	pp_give_back_memory(&a->free_at);

	size_t matched = 0, procs = targets_count(a->targets, &matched);
	struct sym_stats sst = { 0 };
	if (a->sym)
		sym_get_stats(a->sym, &sst);
	agent_window_report(&(struct window_report){
		.window = a->windows,
		.win = &a->win,
		.cpu = a->cpu,
		.fl = a->fl,
		.ps = &ps,
		.matched = matched,
		.procs = procs,
		.dur_ns = dur,
		.cpu_ms = (double)(cpu_time_ns() - cpu0) / 1e6,
		.loop_cpu_ms = (double)(thread_cpu_ns() - tcpu0) / 1e6,
		.events_cpu_ms = (double)a->between_ns / 1e6,
		.sst = &sst,
		.flush_error = fr < 0 ? err.msg : NULL,
	});
}

/*
 * SIGHUP: load the config file again. An invalid one is rejected with its
 * error and the agent goes on with the old one; a valid one makes the loop
 * finish its window and return 1 so the caller restarts with it.
 */
static bool reload_config(const struct config *cfg, struct agent_opts *o)
{
	struct pp_err err = { 0 };
	struct config *next;

	if (!o || !cfg->path || o->builtin) {
		pp_log(PP_WARN,
		       "SIGHUP ignored: no config file to reload (running on the built-in "
		       "defaults and flags)",
		       NULL);
		return false;
	}
	next = calloc(1, sizeof(*next));
	if (!next || config_load_ov(cfg->path, &o->load, next, &err) < 0) {
		if (next)
			config_free(next); /* a no-op when the load failed */
		pp_log(PP_ERROR, "config reload rejected, keeping the running config",
		       "path=%s error=%s", pp_q(cfg->path), pp_q(next ? err.msg : "out of memory"));
		free(next);
		return false;
	}
	pp_log(PP_INFO, "config reloaded", "path=%s", pp_q(cfg->path));
	if (o->reload) { /* several SIGHUPs in one read: the newest file wins */
		config_free(o->reload);
		free(o->reload);
	}
	o->reload = next;
	return true;
}

void agent_block_signals(sigset_t *mask)
{
	sigset_t m;

	sigemptyset(&m);
	sigaddset(&m, SIGINT);
	sigaddset(&m, SIGTERM);
	sigaddset(&m, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &m, NULL);
	if (mask)
		*mask = m;
}

int agent_run(const struct config *cfg, struct agent_opts *o, struct pp_err *err)
{
	struct agent a;
	int r = 0, sfd = -1;
	sigset_t mask;

	memset(&a, 0, sizeof(a));
	a.evfd = -1;
	if (getenv("PUSHPROF_TEST_PROFILE_DELAY_MS"))
		a.profile_delay_ms = (unsigned)atoi(getenv("PUSHPROF_TEST_PROFILE_DELAY_MS"));
	a.cfg = cfg;
	a.lab.cfg = cfg;
	a.snap.cfg = cfg;
	uname(&a.lab.uts);
	/* Block before any thread exists (gRPC starts some), so that every
	 * thread inherits the mask and the signals reach only the signalfd.
	 * They stay blocked when this run ends (see agent.h): a SIGHUP that
	 * arrives between two runs of a reload waits, pending, for the next
	 * run's signalfd instead of taking its default action (exit 129). */
	agent_block_signals(&mask);
	sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sfd < 0)
		return pp_errf(err, -errno, "signalfd: %s", strerror(errno));
	{
		struct pp_err aerr = { 0 };
		if (oom_protect_self(cfg->oom_score_adj, &aerr) < 0)
			pp_log(PP_WARN, "cannot set oom_score_adj", "value=%d error=%s",
			       cfg->oom_score_adj, pp_q(aerr.msg));
	}

	r = outbox_new(&(struct outbox_opts){ .cfg = cfg }, &a.outbox, err);
	if (r)
		goto out;
	a.snap.outbox = a.outbox;
	{
		struct pp_err merr = { 0 };
		struct containers_opts co = { .socket = cfg->cri_socket };
		if (containers_new(&co, &a.lab.meta, &merr))
			pp_log(PP_WARN, "container metadata unavailable", "error=%s",
			       pp_q(merr.msg));
		pp_err_clear(&merr);
		struct node_meta_opts no = { .source = cfg->node_labels, .node = cfg->node };
		if (node_meta_new(&no, &a.lab.nodes, &merr))
			pp_log(PP_WARN, "node labels unavailable", "error=%s", pp_q(merr.msg));
	}
	/* debuginfo: to the first store that takes it (Parca's DebuginfoService;
	 * Pyroscope stores have debuginfo_upload off) */
	const struct remote_store_config *dstore = NULL;
	for (size_t i = 0; i < config_nstores(cfg) && !dstore; i++)
		if (config_store(cfg, i)->debuginfo_upload)
			dstore = config_store(cfg, i);
	if (dstore && cfg->cpu.enabled) {
		struct pp_err derr = { 0 };
		if (debuginfo_new(&(struct debuginfo_opts){ .rs = dstore }, &a.dbg, &derr))
			pp_log(PP_WARN, "debuginfo upload unavailable", "error=%s", pp_q(derr.msg));
	}
	outbox_set_labeler(a.outbox, agent_label_series, &a.lab);
	outbox_set_interrupt(a.outbox, stop_pending, &a.stopping);
	{
		/* pushes run beside the loop: a slow store never stretches a window */
		struct pp_err serr = { 0 };
		if (outbox_start_sender(a.outbox, &serr) < 0)
			pp_log(PP_WARN, "pushing from the loop thread", "error=%s", pp_q(serr.msg));
	}
	struct targets_opts to = { .entries = cfg->targets, .nentries = cfg->ntargets };
	r = targets_new(&to, &a.targets, err);
	if (r < 0)
		goto out;

	if (cfg->cpu.enabled) {
		struct cpu_sampler_opts so = {
			.frequency_hz = cfg->cpu.frequency_hz,
			.max_depth = cfg->cpu.max_stack_depth,
			.kernel_stacks = cfg->cpu.kernel_stacks,
			.cpu_label = sample_label_any(cfg, cfg->cpu.cpu_label),
			.filter = !targets_whole_host(a.targets),
			.interval_ns = cfg->cpu.interval_ns,
			/* tests: stacks deleted after N windows unnamed, or
			 * every one at every drain (the copies' delete race
			 * at its most frequent) */
			.stack_keep = getenv("PUSHPROF_STACK_KEEP")
					      ? (uint32_t)atoi(getenv("PUSHPROF_STACK_KEEP"))
					      : 0,
			.stack_evict_all = getenv("PUSHPROF_STACK_EVICT_ALL") != NULL,
		};
		r = cpu_sampler_new(&so, &a.cpu, err);
		if (r < 0)
			goto out;
		uint64_t mr_rec, mr_lost, mr_err;
		cpu_sampler_maprec_stats(a.cpu, &mr_rec, &mr_lost, &mr_err);
		if (mr_err)
			pp_log(PP_WARN,
			       "mmap records unavailable on some CPUs (perf_event_mlock_kb?): "
			       "libraries a short-lived process maps late may stay unnamed",
			       "cpus=%llu", (unsigned long long)mr_err);
		/* Frameless Go leaves, C/C++ prologues, epilogues and
		 * frameless leaves (bpf/cpu_abi.h); off: plain frame-pointer
		 * stacks, go: Go only (no .eh_frame tables), for comparisons */
		const char *fl = getenv("PUSHPROF_FRAMELESS");
		if (!(fl && !strcmp(fl, "off"))) {
			struct frameless_opts flo = { .cpu = a.cpu,
						      .go_only = fl && !strcmp(fl, "go") };
			r = frameless_new(&flo, &a.fl, err);
			if (r < 0)
				goto out;
		}
		struct sym_opts syo = { 0 };
		struct pp_err serr = { 0 };
		if (sym_new(&syo, &a.sym, &serr) < 0) {
			a.sym = NULL;
			pp_log(PP_WARN, "symbolizer unavailable, profiles carry addresses only",
			       "error=%s", pp_q(serr.msg));
		}
	}
	version_metric();
	if (cfg->http_address && cfg->http_address[0]) {
		struct pp_err herr = { 0 };
		const struct snapshot_api_config *sc = &cfg->snapshot_api;
		struct http_opts ho = {
			.address = cfg->http_address,
			.snapshot = {
				.fn = sc->enabled ? agent_http_snapshot : NULL, .arg = &a.snap,
				.token_file = sc->bearer_token_file,
				.per_pid_interval_ns = sc->per_pid_interval_ns,
				.per_client_per_minute = sc->per_client_per_minute,
				.per_minute = sc->per_minute,
			},
		};
		http_new(&ho, &a.http, &herr);
		/* without /healthz and /readyz nobody can tell it is alive: a
		 * kubelet would kill it anyway, a systemd unit should see why */
		if (!a.http && !cfg->http_optional) {
			r = pp_errf(err, -EADDRINUSE,
				    "%s (http_address %s; set http_optional: true "
				    "to run without the HTTP endpoint, or http_address: \"\" to "
				    "turn it "
				    "off)",
				    herr.msg, cfg->http_address);
			goto out;
		}
		if (!a.http)
			pp_log(PP_WARN, "http endpoint not started (http_optional: true)",
			       "address=%s error=%s", pp_q(cfg->http_address), pp_q(herr.msg));
	}

	/*
	 * With a kernel filter, process events make new targets count at once
	 * (subscribed before the first scan so nothing slips between). The
	 * whole host needs no filter updates: labels are read per window.
	 */
	if (cfg->go_heap.enabled) {
		struct gotrack_opts gto = { .cfg = cfg, .rep = { report_profile, &a } };
		r = gotrack_new(&gto, &a.go, err);
		if (r < 0)
			goto out;
	}
	if (a.go && cfg->go_heap.on_oom) {
		struct oom_watch_opts oo = {
			.max_buckets = cfg->go_heap.max_buckets,
			.max_stack_depth = cfg->go_heap.max_stack_depth,
			.max_frames = cfg->go_heap.budget.oom_max_frames,
			.budget = gotrack_budget(&cfg->go_heap),
			/* gotrack enables profiling (once the runtime is up) */
			.enable_profiling = false,
			/* buckets newer than the mirror are copied whole at OOM time:
			 * a second's worth is cheap, five refreshes a second per Go
			 * process are not */
			.mirror_interval_ns = 1000000000ull,
			.node = cfg->node,
			.extra_labels = &cfg->external_labels,
			.report = { report_profile, &a },
		};
		struct pp_err oerr = { 0 };
		if (oom_watch_new(&oo, &a.oom, &oerr) < 0) {
			a.oom = NULL;
			pp_log(PP_WARN, "OOM capture unavailable", "error=%s", pp_q(oerr.msg));
		} else {
			gotrack_set_oom(a.go, a.oom);
		}
	}
	/* Process events: the netlink proc connector (instant, needs
	 * CAP_NET_ADMIN in the host network namespace), else BPF tracepoints
	 * drained each second; PUSHPROF_PROC_EVENTS=netlink|bpf|off forces one. */
	const char *pe = getenv("PUSHPROF_PROC_EVENTS");
	bool want_events = (a.cpu || a.go) && !(pe && !strcmp(pe, "off"));
	int evfd = want_events && !(pe && !strcmp(pe, "bpf")) ? targets_events_open(a.targets)
							      : -ENOTSUP;
	const char *evsrc = "none";
	if (evfd >= 0) {
		evsrc = "netlink";
		a.evfd = evfd;
	} else if (want_events && !(pe && !strcmp(pe, "netlink"))) {
		struct pp_err perr = { 0 };
		if (procev_new(&a.procev, &perr) == 0) {
			targets_events_external(a.targets);
			evsrc = "bpf";
		} else {
			pp_log(PP_INFO, "process events unavailable, relying on /proc scans",
			       "netlink=%s bpf=%s", pp_q(strerror(-evfd)), pp_q(perr.msg));
		}
	} else if (want_events) {
		pp_log(PP_INFO, "process events unavailable, relying on /proc scans", "error=%s",
		       pp_q(strerror(-evfd)));
	}
	const uint64_t scan_every = evfd >= 0 || a.procev ? SCAN_EVENTS_NS : SCAN_NS;
	/* the whole host reports no target changes: the observer finds Go
	 * programs (at this first scan, then as they start or exec) */
	bool go_host = a.go && targets_whole_host(a.targets);
	if (go_host || a.fl)
		targets_set_observer(a.targets, on_target_seen, &a);
	uint64_t now = pp_mono_ns();
	r = targets_scan(a.targets, now, on_target_change, &a, err);
	if (r < 0)
		goto out;
	a.window_start_mono = pp_mono_ns();
	a.window_start_real = pp_clock_ns(CLOCK_REALTIME);
	/* ready = config loaded, BPF attached and the first window built (a
	 * sampler that attaches but cannot drain is not ready) */
	if (a.http)
		http_set_ready(a.http, !a.cpu, a.cpu ? "waiting for the first CPU window" : NULL);
	size_t matched = 0, procs = targets_count(a.targets, &matched);
	/* each store: remote_store=name=address,... with a list */
	char stores[1024] = "", protocols[256] = "";
	for (size_t i = 0, so = 0, po = 0; i < config_nstores(cfg); i++) {
		const struct remote_store_config *rs = config_store(cfg, i);
		const char *pr = wire_name(rs);
		int n1 = cfg->remote_store_list
				 ? snprintf(stores + so, sizeof(stores) - so, "%s%s=%s",
					    i ? "," : "", rs->name, rs->address)
				 : snprintf(stores + so, sizeof(stores) - so, "%s", rs->address);
		int n2 = snprintf(protocols + po, sizeof(protocols) - po, "%s%s", i ? "," : "", pr);
		so = n1 > 0 && (size_t)n1 < sizeof(stores) - so ? so + (size_t)n1 : so;
		po = n2 > 0 && (size_t)n2 < sizeof(protocols) - po ? po + (size_t)n2 : po;
	}
	if (!protocols[0])
		snprintf(protocols, sizeof(protocols), "%s", wire_name(&cfg->remote_store));
	pp_log(PP_INFO, "agent started",
	       "node=%s cpu=%s frequency_hz=%u interval_ms=%llu cpus=%u targets=%s matched=%zu "
	       "processes=%zu proc_events=%s bpf_prog_id=%d http_port=%d remote_store=%s "
	       "remote_protocol=%s local_store=%s spool=%s config=%s version=%s commit=%s",
	       pp_q(cfg->node ? cfg->node : ""), cfg->cpu.enabled ? "on" : "off",
	       cfg->cpu.frequency_hz, (unsigned long long)(cfg->cpu.interval_ns / 1000000),
	       a.cpu ? cpu_sampler_ncpus(a.cpu) : 0,
	       targets_whole_host(a.targets) ? "whole-host" : "filtered", matched, procs, evsrc,
	       a.cpu ? cpu_sampler_prog_id(a.cpu) : 0, a.http ? http_port(a.http) : 0,
	       pp_q(stores[0] ? stores : "none"), protocols,
	       pp_q(*cfg->local_store.directory ? cfg->local_store.directory : "none"),
	       pp_q(*cfg->spool.directory ? cfg->spool.directory : "none"),
	       pp_q(cfg->path ? cfg->path : ""), pp_q(version_string()), pp_q(version_commit()));

	relabel_each_source(cfg->relabel, agent_warn_meta, NULL);

	uint64_t start = a.window_start_mono, next_scan = start + scan_every;
	uint64_t next_young = scan_every > SCAN_NS ? start + SCAN_NS : UINT64_MAX;
	uint64_t interval = cfg->cpu.interval_ns ? cfg->cpu.interval_ns : 10000000000ull;
	uint64_t next_window = a.cpu ? start + interval : UINT64_MAX;
	uint64_t heap_every = a.go ? cfg->go_heap.interval_ns : 0;
	uint64_t next_heap = heap_every ? start + heap_every : UINT64_MAX;
	const struct pressure_config *pc = &cfg->go_heap.pressure;
	uint64_t press_every = a.go && pc->enabled ? pc->poll_interval_ns : 0;
	uint64_t next_press = press_every ? start + press_every : UINT64_MAX;
	uint64_t deadline = o && o->duration_ns ? start + o->duration_ns : UINT64_MAX;
	/* targets that exec stay matched silently: look at their executables
	 * after process events (at most every RECHECK_NS) and every scan */
	uint64_t next_recheck = UINT64_MAX, last_recheck = 0;
	/* Without CPU windows nothing else flushes on a schedule: the spool
	 * (e.g. OOM captures from a previous run) would wait for the next heap
	 * snapshot, forever with go_heap.interval 0. */
	uint64_t next_flush = a.cpu ? UINT64_MAX : start;
	bool stop = false, terminate = false;

	while (!stop) {
		now = pp_mono_ns();
		uint64_t wake = next_scan;
		if (next_window < wake)
			wake = next_window;
		if (next_heap < wake)
			wake = next_heap;
		if (next_press < wake)
			wake = next_press;
		if (deadline < wake)
			wake = deadline;
		if (a.go && gotrack_due(a.go) < next_recheck)
			next_recheck = gotrack_due(a.go);
		if (next_recheck < wake)
			wake = next_recheck;
		if (next_flush < wake)
			wake = next_flush;
		/* the young tick wakes the loop only with work: queued events,
		 * young targets to re-read, or BPF events to drain (a host where
		 * nothing starts or exits sleeps 60 times a minute less) */
		if (next_young < wake &&
		    (a.procev_ready || targets_young_work(a.targets, now)))
			wake = next_young;
		uint64_t prep_due = a.sym ? sym_prepare_due(a.sym) : UINT64_MAX;
		if (prep_due < wake)
			wake = prep_due;
		if (a.rescan || a.took_events) /* set by events read since */
			wake = now;
		int timeout = wake > now ? (int)((wake - now + 999999) / 1000000) : 0;
		/* the BPF ring only until its first event wakes the loop: it
		 * stays readable until the young tick drains it */
		int pefd = a.procev && !a.procev_ready ? procev_fd(a.procev) : -1;
		struct pollfd pfd[5] = { { .fd = sfd, .events = POLLIN },
					 { .fd = a.oom ? oom_watch_fd(a.oom) : -1,
					   .events = POLLIN },
					 { .fd = evfd, .events = POLLIN },
					 { .fd = a.go ? gotrack_fd(a.go) : -1, .events = POLLIN },
					 { .fd = pefd, .events = POLLIN } };
		int pr = poll(pfd, 5, timeout); /* negative fds are ignored */
		if (pr > 0 && (pfd[4].revents & POLLIN)) {
			/* drained 50 ms from now (a fork's exec comes with it), and
			 * not before a second after the last drain */
			uint64_t soon = pp_mono_ns() + PROCEV_GATHER_NS;
			a.procev_ready = true;
			if (next_young < soon)
				next_young = soon;
		}
		if (pr > 0 && (pfd[3].revents & POLLIN)) {
			/* heap snapshots finished on gotrack's worker (already in the
			 * outbox): pressure ones are pushed at once (the OOM killer may
			 * be near), periodic ones with the next window - or now when
			 * there are no CPU windows */
			size_t urgent = 0, fin = gotrack_collect(a.go, &urgent);
			struct pp_err ferr = { 0 };
			if ((urgent || (fin && !a.cpu)) && outbox_flush(a.outbox, &ferr) < 0)
				pp_log(PP_WARN, "push of heap snapshots failed", "error=%s",
				       pp_q(ferr.msg));
		}
		if (pr > 0 && (pfd[1].revents & POLLIN)) {
			/* an OOM capture: on disk first (durable), then pushed at once */
			struct pp_err oerr = { 0 };
			if (oom_watch_deliver(a.oom, &oerr) > 0 &&
			    outbox_flush(a.outbox, &oerr) < 0)
				pp_log(PP_WARN,
				       "push of an OOM profile failed; it stays in the spool",
				       "error=%s", pp_q(oerr.msg));
		}
		if (pr > 0 && evfd >= 0 && (pfd[2].revents & POLLIN))
			read_netlink(&a, pp_mono_ns());
		if (pr > 0 && (pfd[0].revents & POLLIN)) {
			struct signalfd_siginfo si;
			while (read(sfd, &si, sizeof(si)) == sizeof(si)) {
				if (si.ssi_signo == SIGHUP) {
					if (reload_config(cfg, o))
						stop = true;
					continue;
				}
				pp_log(PP_INFO, "signal received, finishing the window",
				       "signal=%u", si.ssi_signo);
				stop = terminate = true;
			}
		}
		now = pp_mono_ns();
		if (now >= deadline)
			stop = true;
		if (a.rescan) { /* events were lost: rescan now */
			a.rescan = false;
			next_scan = now;
		}
		if (a.took_events) { /* events named processes: recheck Go */
			a.took_events = false;
			if (a.go && !go_host && next_recheck == UINT64_MAX)
				next_recheck = last_recheck + RECHECK_NS;
		}
		if (now >= next_scan && !stop) {
			struct pp_err serr = { 0 };
			if (targets_scan(a.targets, now, on_target_change, &a, &serr) < 0)
				pp_log(PP_WARN, "target scan failed", "error=%s", pp_q(serr.msg));
			if (a.go)
				next_recheck = now;
			while (next_scan <= now)
				next_scan += scan_every;
			if (scan_every > SCAN_NS)
				next_young = now + SCAN_NS;
		}
		if (now >= next_young && !stop) {
			if (a.procev)
				drain_procev(&a);
			/* between full scans: the young may still join a cgroup */
			targets_recheck_young(a.targets, now, on_target_change, &a);
			next_young = now + SCAN_NS;
			/* mappings made without any process event (dlopen in a
			 * running program) fill a ring of ~200 records: drained
			 * each second, not only at the window */
			drain_maprecs(&a);
		}
		/* new targets' maps again once ld.so has mapped their libraries
		 * (what they map in between comes from the kernel's records) */
		if (a.sym && now >= sym_prepare_due(a.sym) && !stop) {
			sym_prepare_run(a.sym, now);
			drain_maprecs(&a);
		}
		if (now >= next_recheck && !stop) {
			gotrack_recheck(a.go);
			last_recheck = now;
			next_recheck = UINT64_MAX;
		}
		if (now >= next_press && !stop) {
			/* queued for gotrack's worker; pushed when collected, or with
			 * the next window */
			gotrack_check_pressure(a.go, now);
			while (next_press <= now)
				next_press += press_every;
		}
		if (now >= next_heap && !stop) {
			/* queued for gotrack's worker: the loop goes on at once */
			gotrack_snapshot_all(a.go);
			while (next_heap <= now)
				next_heap += heap_every;
		}
		if (now >= next_flush && !stop) {
			struct pp_err ferr = { 0 };
			if (outbox_flush(a.outbox, &ferr) < 0)
				pp_log(PP_WARN, "push failed", "error=%s", pp_q(ferr.msg));
			while (next_flush <= now)
				next_flush += interval;
		}
		/* SIGTERM must end within 5 s even with a hanging server: the last
		 * pushes get 3 s, then what is left goes to the spool */
		if (stop) {
			atomic_store(&a.stopping, true);
			outbox_set_deadline(a.outbox, pp_mono_ns() + 3000000000ull);
		}
		if (now >= next_window || (stop && a.cpu)) {
			window(&a);
			if (a.http && a.windows == 1)
				http_set_ready(a.http, true, NULL);
			/* windows stop coming: /healthz turns 503 (a stuck loop) */
			http_heartbeat(a.http, 3 * interval + 10000000000ull);
			while (next_window <= now)
				next_window += interval;
		}
	}
	if (terminate && o && o->reload) { /* SIGTERM/SIGINT wins over a reload */
		config_free(o->reload);
		free(o->reload);
		o->reload = NULL;
	}
	pp_log(PP_INFO, o && o->reload ? "agent restarting with the new config" : "agent stopped",
	       "windows=%llu", (unsigned long long)a.windows);
	r = o && o->reload ? 1 : 0;
out:
	http_free(a.http);
	if (a.oom) {
		struct pp_err oerr = { 0 };
		if (a.outbox)
			oom_watch_deliver(a.oom, &oerr);
		oom_watch_free(a.oom);
	}
	/* the worker hands profiles to the outbox: joined first; what it
	 * finished is collected so it is counted like any other */
	if (a.go) {
		gotrack_stop(a.go);
		gotrack_collect(a.go, NULL);
	}
	procev_free(a.procev);
	debuginfo_free(a.dbg);
	frameless_free(a.fl);
	cpu_sampler_free(a.cpu); /* detaches BPF */
	sym_free(a.sym);
	cpu_window_free(&a.win);
	if (a.outbox) {
		struct pp_err ferr = { 0 };
		/* The sender finishes what it was asked (within the deadline);
		 * what is still pending gets one more try here, then the spool. */
		outbox_stop_sender(a.outbox);
		if (outbox_stats(a.outbox)->pending && outbox_flush(a.outbox, &ferr) < 0)
			pp_log(PP_WARN, "final flush failed", "error=%s", pp_q(ferr.msg));
		outbox_free(a.outbox);
	}
	targets_free(a.targets);
	gotrack_free(a.go);
	containers_free(a.lab.meta);
	node_meta_free(a.lab.nodes);
	if (sfd >= 0)
		close(sfd);
	return r;
}
