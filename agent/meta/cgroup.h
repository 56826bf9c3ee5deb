/*
 * cgroup.h - which container, pod and systemd unit a process belongs to,
 * from its cgroup path alone: the shapes that kubelet (systemd and
 * cgroupfs drivers), containerd, CRI-O, docker and podman create give the
 * container id, runtime, pod UID, QoS class and systemd unit without asking
 * anyone, so this works with no container runtime reachable. containers.h
 * adds the names the runtime knows. Pure functions (thread-safe) but
 * cgroup_info_for_pid(), which reads /proc/PID/cgroup.
 */
#ifndef PUSHPROF_CGROUP_H
#define PUSHPROF_CGROUP_H

#include <stddef.h>
#include <sys/types.h>

#include "labels.h"

#define CONTAINER_ID_MAX 128
#define POD_UID_MAX 40
#define SYSTEMD_UNIT_MAX 256

/* What a cgroup path says; every field "" when unknown. */
struct cgroup_info {
	char container_id[CONTAINER_ID_MAX + 1]; /* runtime's id, usually 64 hex */
	char runtime[16];	       /* "containerd", "cri-o", "docker", "podman" or "" */
	char pod_uid[POD_UID_MAX + 1]; /* with dashes, as the API server shows it */
	char qos[16];		       /* "guaranteed", "burstable", "besteffort" or "" */
	char systemd_unit[SYSTEMD_UNIT_MAX + 1]; /* "nginx.service", "session-3.scope" */
	char path[512];				 /* the cgroup path the fields came from */
};

/* One cgroup path ("/kubepods.slice/..."). Returns 0; fields stay "" if unknown. */
int cgroup_info_from_path(const char *path, struct cgroup_info *ci);
/*
 * The text of /proc/PID/cgroup (v1 "N:ctrls:/path" lines and/or the v2
 * "0::/path" line): the first line naming a container or pod wins, the
 * unit comes from the v2 or name=systemd line. -EINVAL if no line parses.
 */
int cgroup_info_from_text(const char *text, size_t len, struct cgroup_info *ci);
/* Read and parse /proc/PID/cgroup. -ENOENT when the process is gone. */
int cgroup_info_for_pid(pid_t pid, struct cgroup_info *ci);

/*
 * Add the __meta_* labels a cgroup_info gives: __meta_process_cgroup,
 * __meta_kubernetes_pod_uid, __meta_kubernetes_pod_qos_class,
 * __meta_kubernetes_pod_container_id ("<runtime>://<id>" as Kubernetes
 * writes it, bare id when the runtime is unknown), __meta_container_id,
 * __meta_container_runtime, __meta_systemd_unit. Empty fields add nothing.
 */
int cgroup_info_meta_labels(const struct cgroup_info *ci, struct pp_labels *out);

#endif
