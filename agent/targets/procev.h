/*
 * procev.h - fork, exec, rename and exit events from BPF tracepoints.
 *
 * The target scanner learns of new processes from the netlink proc
 * connector when it can; that needs CAP_NET_ADMIN in the host's network
 * namespace, which a Kubernetes DaemonSet usually does not have. This is
 * the same information from sched_process_fork, sched_process_exec,
 * task_rename and sched_process_exit (a process's last thread), needing
 * only the BPF capabilities the sampler already has.
 * Events queue in a ring. The first one after a drain makes procev_fd()
 * readable, the others wake no one: the agent drains at most once a second,
 * so new processes are still seen within about a second without a /proc
 * listing every second, and a node where nothing starts or exits does not
 * wake the agent at all.
 */
#ifndef PUSHPROF_PROCEV_H
#define PUSHPROF_PROCEV_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "err.h"

enum procev_kind {
	PROCEV_KIND_FORK = 1,
	PROCEV_KIND_EXEC = 2,
	PROCEV_KIND_COMM = 3,
	PROCEV_KIND_EXIT = 4,
};

struct procev;

/* Loads and attaches the BPF programs (they run from then on; events wait
 * in the ring for procev_drain(), no thread). 0 with *out set (the caller
 * frees it with procev_free()); or a negative errno-style code with err
 * filled and *out NULL (no BPF, not allowed, out of memory). */
int procev_new(struct procev **out, struct pp_err *err);
/* Detaches the programs. NULL-safe. */
void procev_free(struct procev *p);

typedef void (*procev_fn)(enum procev_kind kind, pid_t tgid, void *arg);

/* Hand every queued event to fn, and arm the wake-up (procev_fd()) for the
 * next one. Returns how many forks, execs and renames (exits are handed
 * over but not counted), or -ENOBUFS when the ring overflowed since the
 * last drain (events were lost: rescan /proc). */
int procev_drain(struct procev *p, procev_fn fn, void *arg);

/* A descriptor for poll(): readable from the first event after the last
 * procev_drain() (or procev_new()) until the next drain. Poll it only
 * between a drain and its wake-up: it stays readable while events wait. */
int procev_fd(const struct procev *p);

/* Whether procev_fd() will wake a poll for the next event: false when an
 * event took the wake-up while the last procev_drain() ran (it may have
 * been read by that drain, so no wake-up comes for the ones after it):
 * drain again soon instead of waiting for the descriptor. */
bool procev_armed(const struct procev *p);

#endif
