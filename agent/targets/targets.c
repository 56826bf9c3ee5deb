/*
 * targets.c - process discovery and target matching (see targets.h).
 */
#include "targets.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <linux/cn_proc.h>
#include <linux/connector.h>
#include <linux/netlink.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "procinfo.h"
#include "grow.h"
#include "ppclock.h"

#define YOUNG_NS (5ull * 1000000000ull)
/* Known processes are re-read in turn for cgroup moves and renames (exec,
 * fork and renames arrive as process events when those work). The whole
 * host with events needs neither: no filter to update, and each sampled
 * process is re-read when its window is built; its re-read is a safety net
 * (an idle node's loop spent a third of its time re-reading idle processes
 * every minute). */
#define RECHECK_NS (10ull * 1000000000ull)
#define RECHECK_EVENTS_NS (60ull * 1000000000ull)
#define RECHECK_HOST_EVENTS_NS (600ull * 1000000000ull)
#define MAX_CGROUP_LINES 32

struct targets {
	const struct target_config *entries;
	size_t nentries;
	struct target_proc *v; /* sorted by pid */
	size_t n, cap;
	bool need_cgroups;
	int ev_fd;	     /* proc connector, -1 = none */
	uint64_t recheck_ns; /* RECHECK_NS, or RECHECK_EVENTS_NS with events */
	bool recheck_all;    /* events were lost: the next scan reads everyone */
	targets_change_fn observer;
	void *observer_arg;
	/* whole host: pids from events, evaluated at the next recheck if they
	 * still live (a busy node execs thousands of short-lived processes a
	 * second; nothing here needs them before the next second) */
	pid_t *pending;
	size_t npending, pending_cap;
	/* known live processes an exit event named, checked at the next
	 * recheck (targets_exit) */
	pid_t *exits;
	size_t nexits, exits_cap;
	/* the youngest process's first_seen_ns + YOUNG_NS: a filter has young
	 * targets to re-read until then (targets_young_work) */
	uint64_t young_until_ns;
};

/* p was first seen at now_ns: young (re-read every second) for YOUNG_NS */
static void first_seen(struct targets *t, struct target_proc *p, uint64_t now_ns)
{
	p->first_seen_ns = now_ns;
	if (now_ns + YOUNG_NS > t->young_until_ns)
		t->young_until_ns = now_ns + YOUNG_NS;
}

void targets_set_observer(struct targets *t, targets_change_fn fn, void *arg)
{
	t->observer = fn;
	t->observer_arg = arg;
}

static void observe(const struct targets *t, const struct target_proc *p)
{
	if (t->observer && !p->gone)
		t->observer(p->pid, p->matched, t->observer_arg);
}

static int evaluate(struct targets *t, struct target_proc *p, bool match);

/* Re-read a known process and report: the change callback when its matched
 * state changed (an exit counts as unmatched), then the observer. -ENOMEM
 * is the only error; an exit marks it gone. p must not move meanwhile (the
 * callbacks do not touch the table).
 *
 * A new start time means the pid names another process now: the old one
 * exited and its pid was reused before anything here saw it gone (events
 * are read after the fact: the fork of the new process can be read when it
 * has already exec'd a matching program). The old process is reported
 * unmatched first, so that whatever the callback keeps for the pid (Go heap
 * tracking, symbols) is dropped before the new process is reported. */
static int reevaluate(struct targets *t, struct target_proc *p, targets_change_fn cb, void *arg)
{
	bool match = !targets_whole_host(t);
	bool was = p->matched && !p->gone;
	uint64_t old_start = p->start_time;
	int e = evaluate(t, p, match);
	if (e == -ENOMEM)
		return e;
	if (e < 0)
		p->gone = true;
	bool is = p->matched && !p->gone;
	if (match && cb && was && is && old_start && p->start_time != old_start) {
		cb(p->pid, false, arg);
		was = false;
	}
	if (match && cb && is != was)
		cb(p->pid, is, arg);
	observe(t, p);
	return 0;
}

int targets_new(const struct targets_opts *o, struct targets **out, struct pp_err *err)
{
	struct targets *t = calloc(1, sizeof(*t));

	*out = NULL;
	if (!t)
		return pp_errf(err, -ENOMEM, "out of memory");
	t->entries = o ? o->entries : NULL;
	t->nentries = o && o->entries ? o->nentries : 0;
	t->ev_fd = -1;
	t->recheck_ns = RECHECK_NS;
	for (size_t i = 0; i < t->nentries; i++)
		if (t->entries[i].cgroup || t->entries[i].cgroup_regex)
			t->need_cgroups = true;
	*out = t;
	return 0;
}

static void proc_clear(struct target_proc *p)
{
	free(p->exe);
	free(p->cgroup);
	p->exe = p->cgroup = NULL;
}

void targets_free(struct targets *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->n; i++)
		proc_clear(&t->v[i]);
	if (t->ev_fd >= 0)
		close(t->ev_fd);
	free(t->v);
	free(t->pending);
	free(t->exits);
	free(t);
}

bool targets_whole_host(const struct targets *t)
{
	return t->nentries == 0;
}

/* A match limit hit (a hostile comm or path) or no memory: not a match. */
static bool re_hit(const struct pp_regex *re, const char *s)
{
	return pp_regex_match(re, s, strlen(s), NULL, 0) == 1;
}

bool target_entry_matches(const struct target_config *e, const struct target_facts *f)
{
	if (e->npids) {
		bool hit = false;
		for (size_t i = 0; i < e->npids && !hit; i++)
			hit = e->pids[i] == f->pid;
		if (!hit)
			return false;
	}
	if (e->comm_regex && (!f->comm || !re_hit(e->comm_re, f->comm)))
		return false;
	if (e->exe_regex && (!f->exe || !*f->exe || !re_hit(e->exe_re, f->exe)))
		return false;
	if (e->cgroup) {
		size_t pl = strlen(e->cgroup);
		bool hit = false;
		for (size_t i = 0; i < f->ncgroups && !hit; i++)
			hit = strncmp(f->cgroup_paths[i], e->cgroup, pl) == 0;
		if (!hit)
			return false;
	}
	if (e->cgroup_regex) {
		bool hit = false;
		for (size_t i = 0; i < f->ncgroups && !hit; i++)
			hit = re_hit(e->cgroup_re, f->cgroup_paths[i]);
		if (!hit)
			return false;
	}
	return true;
}

bool targets_match(const struct target_config *entries, size_t n, const struct target_facts *f)
{
	if (n == 0)
		return true;
	for (size_t i = 0; i < n; i++)
		if (target_entry_matches(&entries[i], f))
			return true;
	return false;
}

struct cg_lines {
	char *paths[MAX_CGROUP_LINES];
	size_t n;
};

static int cg_collect(const char *ctrls, const char *path, void *arg)
{
	struct cg_lines *l = arg;
	(void)ctrls;
	if (l->n >= MAX_CGROUP_LINES)
		return 0;
	char *p = strdup(path);
	if (!p)
		return -ENOMEM;
	l->paths[l->n++] = p;
	return 0;
}

static void cg_free(struct cg_lines *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->paths[i]);
	l->n = 0;
}

/* Read the facts of p->pid into p and decide whether it matches.
 * Returns -ESRCH/-ENOENT when the process is gone. */
static int evaluate(struct targets *t, struct target_proc *p, bool match)
{
	char comm[16], exe[4096], cg[4096];
	uint64_t st = 0;
	/* comm and start time from one read of /proc/PID/stat: this runs for
	 * every sampled process at each window, and on every scan */
	int r = proc_comm_start(p->pid, comm, sizeof(comm), &st);
	if (r < 0)
		return r;
	p->start_time = st;
	if (proc_exe(p->pid, exe, sizeof(exe)) < 0)
		exe[0] = '\0'; /* kernel thread, or raced with exit */
	if (proc_cgroup(p->pid, NULL, cg, sizeof(cg)) < 0)
		cg[0] = '\0';
	char *nexe = strdup(exe), *ncg = strdup(cg);
	if (!nexe || !ncg) {
		free(nexe);
		free(ncg);
		return -ENOMEM;
	}
	free(p->exe);
	free(p->cgroup);
	p->exe = nexe;
	p->cgroup = ncg;
	memcpy(p->comm, comm, sizeof(p->comm));
	p->comm[sizeof(p->comm) - 1] = '\0';
	p->read_ns = pp_mono_ns();

	if (!match)
		return 0;
	struct cg_lines lines = { .n = 0 };
	if (t->need_cgroups && proc_cgroup_each(p->pid, cg_collect, &lines) < 0) {
		cg_free(&lines);
		/* unreadable cgroups: only entries without cgroup keys can match */
	}
	struct target_facts f = {
		.pid = p->pid,
		.comm = p->comm,
		.exe = p->exe,
		.cgroup_paths = (const char *const *)lines.paths,
		.ncgroups = lines.n,
	};
	p->matched = targets_match(t->entries, t->nentries, &f);
	cg_free(&lines);
	return 0;
}

int targets_match_pid(const struct target_config *entries, size_t n, pid_t pid)
{
	char comm[16], exe[4096];

	if (n == 0)
		return 1;
	int r = proc_comm(pid, comm, sizeof(comm));
	if (r < 0)
		return r;
	if (proc_exe(pid, exe, sizeof(exe)) < 0)
		exe[0] = '\0';
	struct cg_lines lines = { .n = 0 };
	if (proc_cgroup_each(pid, cg_collect, &lines) < 0)
		cg_free(&lines); /* only entries without cgroup keys can match */
	struct target_facts f = {
		.pid = pid,
		.comm = comm,
		.exe = exe,
		.cgroup_paths = (const char *const *)lines.paths,
		.ncgroups = lines.n,
	};
	bool m = targets_match(entries, n, &f);
	cg_free(&lines);
	return m;
}

static int cmp_pid(const void *a, const void *b)
{
	pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
	return (x > y) - (x < y);
}

static int list_pids(pid_t **out, size_t *n)
{
	DIR *d = opendir("/proc");
	if (!d)
		return -errno;
	size_t cap = 512, cnt = 0;
	pid_t *v = malloc(cap * sizeof(*v));
	if (!v) {
		closedir(d);
		return -ENOMEM;
	}
	struct dirent *de;
	while ((de = readdir(d))) {
		const char *s = de->d_name;
		if (!isdigit((unsigned char)s[0]))
			continue;
		char *end;
		long pid = strtol(s, &end, 10);
		if (*end || pid <= 0 || pid > 0x3fffffff)
			continue;
		if (pp_grow(&v, &cap, cnt + 1, sizeof(*v), 512)) {
			free(v);
			closedir(d);
			return -ENOMEM;
		}
		v[cnt++] = (pid_t)pid;
	}
	closedir(d);
	qsort(v, cnt, sizeof(*v), cmp_pid);
	*out = v;
	*n = cnt;
	return 0;
}

static struct target_proc *find(const struct targets *t, pid_t pid)
{
	size_t lo = 0, hi = t->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (t->v[mid].pid == pid)
			return &t->v[mid];
		if (t->v[mid].pid < pid)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

const struct target_proc *targets_get(const struct targets *t, pid_t pid)
{
	return find(t, pid);
}

static int reserve(struct targets *t, size_t n)
{
	if (n <= t->cap)
		return 0;
	return pp_grow(&t->v, &t->cap, n, sizeof(*t->v), 256);
}

int targets_scan(struct targets *t, uint64_t now_ns, targets_change_fn cb, void *arg,
		 struct pp_err *err)
{
	pid_t *pids = NULL;
	size_t npids = 0;
	int r = list_pids(&pids, &npids);
	if (r < 0)
		return pp_errf(err, r, "listing /proc: %s", strerror(-r));

	/* Merge the sorted listing with the sorted table into a new table. */
	struct target_proc *old = t->v;
	size_t oldn = t->n, i = 0, j = 0;
	t->v = NULL;
	t->n = t->cap = 0;
	if (reserve(t, npids + oldn + 1) < 0) {
		t->v = old;
		t->n = t->cap = oldn;
		free(pids);
		return pp_errf(err, -ENOMEM, "out of memory");
	}
	bool match = !targets_whole_host(t);
	while (i < oldn || j < npids) {
		if (j == npids || (i < oldn && old[i].pid < pids[j])) {
			/* In the table, not in /proc: exited. */
			struct target_proc p = old[i++];
			if (!p.gone) {
				p.gone = true;
				if (p.matched && match && cb)
					cb(p.pid, false, arg);
			}
			t->v[t->n++] = p;
			continue;
		}
		struct target_proc p;
		bool known = i < oldn && old[i].pid == pids[j];
		bool was = false;
		if (known) {
			p = old[i++];
			was = p.matched && !p.gone;
			if (p.gone) {
				/* pid reused after we saw it exit: a new process. */
				proc_clear(&p);
				known = false;
			}
		}
		if (!known) {
			memset(&p, 0, sizeof(p));
			p.pid = pids[j];
			first_seen(t, &p, now_ns);
			/* Spread later re-checks over the re-check period. */
			p.checked_ns = now_ns - (uint64_t)(p.pid % 10) * (t->recheck_ns / 10);
			p.matched = !match;
		}
		j++;
		bool evaluated = false;
		if (!known || t->recheck_all || now_ns - p.first_seen_ns < YOUNG_NS ||
		    now_ns - p.checked_ns >= t->recheck_ns) {
			evaluated = true;
			uint64_t st_before = p.start_time;
			int e = evaluate(t, &p, match);
			if (e == -ENOMEM) {
				r = pp_errf(err, e, "out of memory");
			} else if (e < 0) {
				p.gone = true; /* raced with exit */
			} else {
				if (known)
					p.checked_ns = now_ns;
				if (known && st_before && p.start_time != st_before) {
					first_seen(t, &p, now_ns); /* pid reused */
					if (match && cb && was && p.matched) {
						cb(p.pid, false, arg); /* as reevaluate() */
						was = false;
					}
				}
			}
		}
		bool is = p.matched && !p.gone;
		if (match && cb && is != was)
			cb(p.pid, is, arg);
		if (evaluated)
			observe(t, &p);
		t->v[t->n++] = p;
	}
	t->recheck_all = false;
	free(old);
	free(pids);
	return r;
}

/* The processes exit events named: gone when /proc says so (exited, a
 * zombie, or the pid now names a process started since), reported as an
 * exit is by a scan. A process that still lives (a thread's exit, a leader
 * whose other threads run on) is left alone. */
static void check_exits(struct targets *t, targets_change_fn cb, void *arg)
{
	bool match = !targets_whole_host(t);

	for (size_t i = 0; i < t->nexits; i++) {
		struct target_proc *p = find(t, t->exits[i]);
		char comm[16];
		uint64_t st = 0;

		if (!p || p->gone)
			continue;
		int r = proc_comm_start(p->pid, comm, sizeof(comm), &st);
		if (r == 0 && (!p->start_time || st == p->start_time))
			continue;
		if (r < 0 && r != -ESRCH && r != -ENOENT)
			continue; /* unreadable for another reason: the scan decides */
		p->gone = true;
		if (match && cb && p->matched)
			cb(p->pid, false, arg);
	}
	t->nexits = 0;
}

int targets_recheck_young(struct targets *t, uint64_t now_ns, targets_change_fn cb, void *arg)
{
	bool match = !targets_whole_host(t);

	check_exits(t, cb, arg);

	for (size_t i = 0; i < t->npending; i++) {
		pid_t pid = t->pending[i];
		char probe[24];

		snprintf(probe, sizeof(probe), "/proc/%d", (int)pid);
		if (access(probe, F_OK) == 0 &&
		    targets_check_pid(t, pid, now_ns, cb, arg) == -ENOMEM)
			return -ENOMEM;
	}
	t->npending = 0;
	/* the whole host needs no filter updates, and labels are re-read for
	 * every sampled process when its window is built */
	if (!match)
		return 0;

	for (size_t i = 0; i < t->n; i++) {
		struct target_proc *p = &t->v[i];
		if (p->gone || now_ns - p->first_seen_ns >= YOUNG_NS)
			continue;
		if (reevaluate(t, p, cb, arg) == -ENOMEM)
			return -ENOMEM;
		if (!p->gone)
			p->checked_ns = now_ns;
	}
	return 0;
}

bool targets_young_work(const struct targets *t, uint64_t now_ns)
{
	return t->npending || t->nexits || (!targets_whole_host(t) && now_ns < t->young_until_ns);
}

const struct target_proc *targets_refresh(struct targets *t, pid_t pid, uint64_t since_ns)
{
	struct target_proc *p = find(t, pid);
	if (p) {
		if (p->gone || (since_ns && p->read_ns >= since_ns))
			return p;
		if (evaluate(t, p, false) < 0)
			p->gone = true;
		return p;
	}
	struct target_proc np;
	memset(&np, 0, sizeof(np));
	np.pid = pid;
	if (evaluate(t, &np, false) < 0) {
		proc_clear(&np);
		return NULL;
	}
	np.matched = targets_whole_host(t);
	if (reserve(t, t->n + 1) < 0) {
		proc_clear(&np);
		return NULL;
	}
	size_t k = 0;
	while (k < t->n && t->v[k].pid < pid)
		k++;
	memmove(&t->v[k + 1], &t->v[k], (t->n - k) * sizeof(*t->v));
	t->v[k] = np;
	t->n++;
	return &t->v[k];
}

void targets_forget_gone(struct targets *t, void (*cb)(pid_t pid, void *arg), void *arg)
{
	size_t k = 0;
	for (size_t i = 0; i < t->n; i++) {
		if (t->v[i].gone && t->v[i].gone_kept) {
			if (cb)
				cb(t->v[i].pid, arg);
			proc_clear(&t->v[i]);
		} else {
			/* found gone since the last call: it may have exited
			 * after this window's drain, with samples in the next */
			t->v[i].gone_kept = t->v[i].gone;
			t->v[k++] = t->v[i];
		}
	}
	t->n = k;
}

size_t targets_count(const struct targets *t, size_t *matched)
{
	size_t m = 0, alive = 0;
	for (size_t i = 0; i < t->n; i++) {
		if (t->v[i].gone)
			continue;
		alive++;
		if (t->v[i].matched)
			m++;
	}
	if (matched)
		*matched = m;
	return alive;
}

int targets_check_pid(struct targets *t, pid_t pid, uint64_t now_ns, targets_change_fn cb,
		      void *arg)
{
	bool match = !targets_whole_host(t);
	struct target_proc *p = find(t, pid);
	if (!p) {
		if (reserve(t, t->n + 1) < 0)
			return -ENOMEM;
		size_t k = t->n;
		while (k > 0 && t->v[k - 1].pid > pid)
			k--;
		memmove(&t->v[k + 1], &t->v[k], (t->n - k) * sizeof(*t->v));
		p = &t->v[k];
		memset(p, 0, sizeof(*p));
		p->pid = pid;
		first_seen(t, p, now_ns);
		p->checked_ns = now_ns - (uint64_t)(pid % 10) * (t->recheck_ns / 10);
		p->matched = !match;
		t->n++;
	} else if (p->gone) {
		/* pid reused: a new process in the slot of one that exited. */
		proc_clear(p);
		memset(p, 0, sizeof(*p));
		p->pid = pid;
		first_seen(t, p, now_ns);
		p->checked_ns = now_ns - (uint64_t)(pid % 10) * (t->recheck_ns / 10);
		p->matched = !match;
	}
	return reevaluate(t, p, cb, arg);
}

/* Process events arrive: known processes are re-read less often. */
static void events_on(struct targets *t)
{
	t->recheck_ns = targets_whole_host(t) ? RECHECK_HOST_EVENTS_NS : RECHECK_EVENTS_NS;
}

int targets_events_open(struct targets *t)
{
	if (t->ev_fd >= 0)
		return t->ev_fd;
	int fd = socket(PF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_CONNECTOR);
	if (fd < 0)
		return -errno;
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK, .nl_groups = CN_IDX_PROC, .nl_pid = 0 };
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = -errno;
		close(fd);
		return e;
	}
	struct {
		struct nlmsghdr nl;
		struct cn_msg cn;
		enum proc_cn_mcast_op op;
	} __attribute__((packed)) msg;
	memset(&msg, 0, sizeof(msg));
	msg.nl.nlmsg_len = sizeof(msg);
	msg.nl.nlmsg_type = NLMSG_DONE;
	msg.cn.id.idx = CN_IDX_PROC;
	msg.cn.id.val = CN_VAL_PROC;
	msg.cn.len = sizeof(enum proc_cn_mcast_op);
	msg.op = PROC_CN_MCAST_LISTEN;
	if (send(fd, &msg, sizeof(msg), 0) < 0) {
		int e = -errno;
		close(fd);
		return e;
	}
	t->ev_fd = fd;
	events_on(t);
	return fd;
}

void targets_events_external(struct targets *t)
{
	events_on(t);
}

void targets_events_lost(struct targets *t)
{
	t->recheck_all = true;
}

#define PENDING_MAX 65536

int targets_event(struct targets *t, pid_t pid, uint64_t now_ns, targets_change_fn cb, void *arg)
{
	if (!targets_whole_host(t))
		return targets_check_pid(t, pid, now_ns, cb, arg);
	for (size_t i = t->npending; i > 0 && i + 8 > t->npending; i--)
		if (t->pending[i - 1] == pid)
			return 0; /* fork then exec: once is enough */
	if (t->npending >= PENDING_MAX ||
	    pp_grow(&t->pending, &t->pending_cap, t->npending + 1, sizeof(*t->pending), 256)) {
		t->recheck_all = true; /* the next scan reads everyone */
		return 0;
	}
	t->pending[t->npending++] = pid;
	return 0;
}

void targets_exit(struct targets *t, pid_t pid)
{
	const struct target_proc *p = find(t, pid);

	if (!p || p->gone)
		return; /* most exits: processes that came and went unseen */
	for (size_t i = t->nexits; i > 0 && i + 8 > t->nexits; i--)
		if (t->exits[i - 1] == pid)
			return;
	/* no room: the next scan finds it gone */
	if (t->nexits < PENDING_MAX &&
	    !pp_grow(&t->exits, &t->exits_cap, t->nexits + 1, sizeof(*t->exits), 64))
		t->exits[t->nexits++] = pid;
}

int targets_events_read(struct targets *t, uint64_t now_ns, targets_change_fn cb, void *arg)
{
	/* Aligned for nlmsghdr; bounded parsing of every message below. */
	char buf[8192] __attribute__((aligned(NLMSG_ALIGNTO)));
	int lost = 0, seen = 0;

	if (t->ev_fd < 0)
		return 0;
	for (;;) {
		ssize_t n = recv(t->ev_fd, buf, sizeof(buf), 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == ENOBUFS) {
				lost = -ENOBUFS;
				t->recheck_all = true; /* an exec may be among them */
				continue;
			}
			break; /* EAGAIN: drained */
		}
		size_t len = (size_t)n;
		for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, len);
		     h = NLMSG_NEXT(h, len)) {
			if (h->nlmsg_type == NLMSG_ERROR || h->nlmsg_type == NLMSG_NOOP)
				continue;
			if (h->nlmsg_len < NLMSG_LENGTH(sizeof(struct cn_msg)))
				continue;
			struct cn_msg *cn = NLMSG_DATA(h);
			if (cn->id.idx != CN_IDX_PROC || cn->id.val != CN_VAL_PROC ||
			    cn->len < sizeof(struct proc_event) ||
			    h->nlmsg_len <
				    NLMSG_LENGTH(sizeof(struct cn_msg) + sizeof(struct proc_event)))
				continue;
			/* cn->data is only 4-byte aligned: copy out. */
			struct proc_event ev;
			memcpy(&ev, cn->data, sizeof(ev));
			pid_t pid = 0;
			/* whole host: a fork's child has its parent's facts until
			 * it execs (or the next scan), and nothing to filter */
			if (ev.what == PROC_EVENT_FORK && !targets_whole_host(t) &&
			    ev.event_data.fork.child_pid == ev.event_data.fork.child_tgid)
				pid = ev.event_data.fork.child_tgid; /* a process, not a thread */
			else if (ev.what == PROC_EVENT_EXEC)
				pid = ev.event_data.exec.process_tgid;
			else if (ev.what == PROC_EVENT_COMM &&
				 ev.event_data.comm.process_pid == ev.event_data.comm.process_tgid)
				pid = ev.event_data.comm.process_tgid; /* renamed (comm_regex) */
			else if (ev.what == PROC_EVENT_EXIT &&
				 ev.event_data.exit.process_pid == ev.event_data.exit.process_tgid)
				/* the leader: the connector tells each thread's exit,
				 * not the group's; exit_group takes the others with it
				 * well before the check a second later */
				targets_exit(t, ev.event_data.exit.process_tgid);
			if (pid > 0 && targets_event(t, pid, now_ns, cb, arg) == -ENOMEM)
				return -ENOMEM;
			if (pid > 0 && seen < INT_MAX)
				seen++;
		}
	}
	return lost ? lost : seen;
}
