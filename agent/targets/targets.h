/*
 * targets.h - which processes the CPU profiler samples, and what it knows
 * about each of them for labels.
 *
 * config `targets:` entries are ANDed within an entry and ORed across
 * entries; no entries means the whole host. targets_scan() lists /proc
 * (the agent calls it every second, or every 60 s when process events
 * tell it about forks, execs and exits as they happen): new processes are
 * evaluated at once, young ones (< 5 s, they may still exec) on every
 * scan, the rest every ~10 s in turn (~60 s with process events, which
 * also report renames; ~10 min for the whole host). Changes of the matched set are
 * reported through a callback so the kernel filter (cpu_sampler_allow)
 * follows them; every evaluation is reported to an optional observer.
 *
 * Processes that exit stay known (gone = true) until the second
 * targets_forget_gone() after they were found gone (the agent calls it
 * after each window is built), so samples of a process that exited
 * mid-window still get their labels and symbols, also when it exited while
 * a window was being built: after that window's drain, which sent its last
 * samples to the next one.
 */
#ifndef PUSHPROF_TARGETS_H
#define PUSHPROF_TARGETS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "config.h"
#include "err.h"

struct target_proc {
	pid_t pid;
	bool matched;
	bool gone;
	bool gone_kept; /* gone, kept through one targets_forget_gone() */
	uint64_t first_seen_ns, checked_ns;
	uint64_t read_ns;    /* CLOCK_MONOTONIC: when comm, exe and cgroup were read */
	uint64_t start_time; /* clock ticks since boot, tells pid reuse */
	char comm[16];
	char *exe;    /* "" when unreadable (kernel thread) */
	char *cgroup; /* label path (v2, else v1 cpu); "" when unknown */
};

/* What a target entry is matched against (one process). */
struct target_facts {
	pid_t pid;
	const char *comm, *exe;
	/* Every /proc/PID/cgroup line's path, with its controllers. */
	const char *const *cgroup_paths;
	size_t ncgroups;
};

struct targets;

struct targets_opts {
	/* the config's `targets:` entries (they must outlive the targets);
	 * none (NULL or 0): the whole host */
	const struct target_config *entries;
	size_t nentries;
};

/* o NULL: the whole host. 0 with *out set (the caller frees it with
 * targets_free()); or -ENOMEM with err filled and *out NULL. Reads
 * nothing yet: the first targets_scan() lists /proc. */
int targets_new(const struct targets_opts *o, struct targets **out, struct pp_err *err);
/* NULL-safe; closes the process-event socket. */
void targets_free(struct targets *t);

bool targets_whole_host(const struct targets *t);

/* Pure matching, for the scanner and for tests. */
bool target_entry_matches(const struct target_config *e, const struct target_facts *f);
bool targets_match(const struct target_config *entries, size_t n, const struct target_facts *f);
/* Read pid's facts from /proc now and match them (any thread: no shared
 * state). 1 matches (always with no entries), 0 does not, negative when the
 * process cannot be read (-ESRCH/-ENOENT: gone). */
int targets_match_pid(const struct target_config *entries, size_t n, pid_t pid);

typedef void (*targets_change_fn)(pid_t pid, bool matched, void *arg);

/* Hears every process just (re)evaluated, new or known, matched or not, in
 * whole-host mode too (where the change callback stays silent): the Go heap
 * tracker finds Go programs and execs this way without its own /proc walk. */
void targets_set_observer(struct targets *t, targets_change_fn fn, void *arg);

/* now_ns: CLOCK_MONOTONIC. Reports each change of a process's matched state
 * (exits count as unmatched). */
int targets_scan(struct targets *t, uint64_t now_ns, targets_change_fn cb, void *arg,
		 struct pp_err *err);

/* Between full scans (with process events): check the exits events named,
 * evaluate the processes events named (whole host) and re-evaluate the
 * young ones already known, those
 * that may still move into a cgroup or exec; no /proc listing. Same
 * reporting as targets_scan(). */
int targets_recheck_young(struct targets *t, uint64_t now_ns, targets_change_fn cb, void *arg);
/* Whether targets_recheck_young() would have anything to do at now_ns:
 * events or exits queued, or a filter with young targets to re-read
 * (first seen less than 5 s before now_ns). */
bool targets_young_work(const struct targets *t, uint64_t now_ns);

/* Known process (alive or gone since the last forget), or NULL. */
const struct target_proc *targets_get(const struct targets *t, pid_t pid);

/*
 * Process events (netlink proc connector, root only): a process that forks
 * or execs is evaluated as soon as the event is read, not at the next scan.
 * targets_events_open() returns a pollable fd, or a negative code when
 * events are unavailable (then scans alone find new processes).
 * targets_events_read() drains what is queued without blocking: how many
 * fork, exec and rename events named a process (exits go to targets_exit()
 * and are not counted), or -ENOBUFS when events were lost (the next scan
 * catches up), -ENOMEM.
 */
int targets_events_open(struct targets *t);
int targets_events_read(struct targets *t, uint64_t now_ns, targets_change_fn cb, void *arg);
/* Events come from elsewhere (BPF, agent/targets/procev.h) and are fed through
 * targets_check_pid(): re-read known processes less often, as with the
 * connector. targets_events_lost(): some were lost, so the next scan
 * re-reads every process. */
void targets_events_external(struct targets *t);
void targets_events_lost(struct targets *t);
/* A process exited (an exit event; the netlink connector's for its
 * leader, BPF's for its last thread): if it is known and alive, /proc is
 * asked at the next targets_recheck_young(), which marks it gone and
 * reports it unmatched as a scan would. Exits of processes never seen cost
 * a lookup. So exits need no /proc listing: the agent lists /proc every
 * 60 s with events, for what they do not tell (a cgroup move, an exit
 * whose leader left first). */
void targets_exit(struct targets *t, pid_t pid);
/* A process forked, exec'd or was renamed. With a kernel filter (targets
 * set) it is evaluated now; for the whole host it is remembered and
 * evaluated by the next targets_recheck_young() if it still lives. */
int targets_event(struct targets *t, pid_t pid, uint64_t now_ns, targets_change_fn cb, void *arg);
/* Evaluate one process now (new or known). */
int targets_check_pid(struct targets *t, pid_t pid, uint64_t now_ns, targets_change_fn cb,
		      void *arg);
/* Re-read a process's label facts (comm, exe, cgroup) unless they were
 * read at or after since_ns (CLOCK_MONOTONIC; 0: read them now); keeps the
 * old ones when it is gone. A CPU window passes its start: a process found
 * or re-read during the window (a new one: a few seconds before, by its
 * events or a scan) is not read a second time to build it, which was a
 * third of the window's work for each new process. Returns the entry,
 * adding one for an unknown live process; NULL when unknown and gone. */
const struct target_proc *targets_refresh(struct targets *t, pid_t pid, uint64_t since_ns);

/* Drop processes found gone before the previous call (those found gone
 * since are kept once more); cb (optional) hears each pid dropped. */
void targets_forget_gone(struct targets *t, void (*cb)(pid_t pid, void *arg), void *arg);

size_t targets_count(const struct targets *t, size_t *matched);

#endif
