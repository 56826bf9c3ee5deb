/*
 * containers.h - which container, pod and systemd unit a process belongs to.
 *
 * Two sources, cheapest first:
 *  1. /proc/PID/cgroup (cgroup.h): the path shapes that kubelet (systemd
 *     and cgroupfs drivers), containerd, CRI-O, docker and podman create
 *     give the container id, runtime, pod UID, QoS class and systemd unit
 *     without asking anyone. Works with no container runtime reachable.
 *  2. The container runtime's CRI API (runtime.v1 ListContainers and
 *     ListPodSandbox over gRPC on its unix socket) gives the names users
 *     filter on: namespace, pod, container, image, pod labels; ListImages
 *     names the images kubelet gave the runtime by id only (a name found is
 *     kept across refreshes: ListImages runs only while one is unnamed). Both lists are
 *     cached and refreshed at most once per TTL (and once more, rate
 *     limited, when an unknown container shows up), so a profile costs no
 *     RPC. A missing or broken runtime degrades to cgroup-derived labels:
 *     errors are counted and kept as the last error, never returned per
 *     process.
 *
 * Results are `__meta_*` labels for relabel_configs (see docs/labels.md);
 * the relabel step drops them unless a rule copies them to real labels.
 */
#ifndef PUSHPROF_CONTAINERS_H
#define PUSHPROF_CONTAINERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "cgroup.h"
#include "err.h"
#include "labels.h"

/* ---- CRI metadata ----------------------------------------------------------- */

/* Sockets tried in order when none is configured. */
extern const char *const cri_default_sockets[];

/* The first default socket that exists as a unix socket, or NULL. */
const char *cri_socket_detect(void);

struct containers;

struct containers_stats {
	uint64_t refreshes;	 /* successful list refreshes */
	uint64_t errors;	 /* failed CRI calls */
	uint64_t lookups, hits;	 /* containers_meta_labels() with a container id */
	size_t containers, pods; /* in the cache now */
	bool connected;		 /* last CRI call succeeded */
	char socket[256];	 /* "" when none */
	char runtime_name[64], runtime_version[64]; /* from Version, when known */
	char last_error[256];
};

struct containers_opts {
	/* a path or "unix://path"; NULL or "" -> cri_socket_detect() (none
	 * found -> cgroup-only mode); "none" -> CRI disabled */
	const char *socket;
	uint64_t ttl_ns;     /* how long the lists are trusted; 0 -> 10 s */
	uint64_t timeout_ns; /* per CRI call; 0 -> 2 s */
};

/*
 * o NULL: every default. 0 with *out set (the caller frees it with
 * containers_free()); or a negative errno-style code with err filled and
 * *out NULL. Never fails because the runtime is down (it is not called
 * here): only on a socket path too long, a channel grpc cannot make, or
 * ENOMEM. No thread is started.
 */
int containers_new(const struct containers_opts *o, struct containers **out, struct pp_err *err);
/* NULL-safe. */
void containers_free(struct containers *c);

/*
 * Add every __meta_* label known for pid: cgroup-derived ones plus, when
 * the runtime knows the container, __meta_kubernetes_namespace,
 * __meta_kubernetes_pod_name, __meta_kubernetes_pod_container_name,
 * __meta_kubernetes_pod_container_image,
 * __meta_kubernetes_pod_label_<name>, __meta_kubernetes_pod_annotation_<name>
 * (values up to 256 bytes). Thread-safe. -ENOENT when the process is gone,
 * -ENOMEM; a CRI failure is not an error here.
 */
int containers_meta_labels(struct containers *c, pid_t pid, struct pp_labels *out);
/* Same from an already parsed cgroup_info (tests, callers with the text). */
int containers_meta_labels_ci(struct containers *c, const struct cgroup_info *ci,
			      struct pp_labels *out);
/* Refresh now, ignoring the TTL. 0 or the CRI error (also counted). */
int containers_refresh(struct containers *c, struct pp_err *err);
void containers_get_stats(struct containers *c, struct containers_stats *st);

#endif
