/*
 * agent_labels.c - what the agent adds to every series on its way out
 * (agent_labels.h).
 */
#include "agent_labels.h"

#include <stdio.h>
#include <string.h>

#include "containers.h"
#include "log.h"
#include "nodemeta.h"
#include "relabel.h"

/* Copy a __meta_* label to the plain name users expect, unless set. */
static void promote(struct pp_labels *l, const char *meta, const char *name)
{
	const char *v = pp_labels_get(l, meta);
	if (v && *v && !pp_labels_get(l, name))
		pp_labels_set(l, name, v);
}

void agent_warn_meta(size_t rule, const char *label, void *arg)
{
	(void)arg;
	if (!strncmp(label, "__meta_", 7) && !pp_meta_label_known(label))
		pp_log(PP_WARN,
		       "relabel rule reads a label pushprof never sets; it is always empty",
		       "rule=%zu label=%s", rule, pp_q(label));
}

/*
 * Pyroscope groups everything by service_name. Unless the config set one
 * (external_labels), derive it as Grafana Alloy's pyroscope.ebpf does:
 * namespace/container in Kubernetes, else the systemd unit, else comm.
 * relabel_configs run after this and may rewrite it like any label.
 */
static void service_name(struct pp_labels *l)
{
	const char *ns = pp_labels_get(l, "namespace"), *ct = pp_labels_get(l, "container");
	const char *unit = pp_labels_get(l, "systemd_unit"), *comm = pp_labels_get(l, "comm");
	char v[512];

	if (pp_labels_get(l, "service_name"))
		return;
	if (ns && *ns && ct && *ct)
		snprintf(v, sizeof(v), "%s/%s", ns, ct);
	else if (unit && *unit)
		snprintf(v, sizeof(v), "%s", unit);
	else
		snprintf(v, sizeof(v), "%s", comm && *comm ? comm : "unknown");
	pp_labels_set(l, "service_name", v);
}

/*
 * Every series on its way out (outbox labeler): __meta_* labels from the
 * process and its container, the container/pod labels Parca users expect
 * (namespace, pod, container, container_id, systemd_unit), then the user's
 * relabel_configs, which may still rename, drop or filter them; Pyroscope
 * stores get service_name too (called per protocol). The cgroup
 * label is parsed rather than /proc re-read, so OOM victims that are
 * already gone keep their pod names.
 */
int agent_label_series(struct pp_labels *l, enum store_protocol protocol, void *arg)
{
	static const char *const per_process[] = { "pid", "executable", "cgroup", "container_id" };
	struct agent_labeler *a = arg;
	static const struct {
		const char *from, *to;
	} proc[] = {
		{ "pid", "__meta_process_pid" },
		{ "comm", "__meta_process_comm" },
		{ "executable", "__meta_process_executable" },
		{ "cgroup", "__meta_process_cgroup" },
	};
	for (size_t i = 0; i < sizeof(proc) / sizeof(proc[0]); i++) {
		const char *v = pp_labels_get(l, proc[i].from);
		if (v)
			pp_labels_set(l, proc[i].to, v);
	}
	/* the rest of Parca Agent's process and system labels */
	const char *exe = pp_labels_get(l, "executable");
	if (exe && *exe) {
		const char *base = strrchr(exe, '/');
		pp_labels_set(l, "__meta_process_executable_name", base ? base + 1 : exe);
	}
	pp_labels_set(l, "__meta_system_kernel_release", a->uts.release);
	pp_labels_set(l, "__meta_system_kernel_machine", a->uts.machine);
	const char *cg = pp_labels_get(l, "cgroup");
	if (a->meta && cg && *cg) {
		struct cgroup_info ci;
		char path[1024];
		snprintf(path, sizeof(path), "%s", cg); /* the label may change under us */
		if (cgroup_info_from_path(path, &ci) == 0)
			containers_meta_labels_ci(a->meta, &ci, l);
	}
	node_meta_labels(a->nodes, l);
	promote(l, "__meta_kubernetes_namespace", "namespace");
	promote(l, "__meta_kubernetes_pod_name", "pod");
	promote(l, "__meta_kubernetes_pod_container_name", "container");
	promote(l, "__meta_container_id", "container_id");
	promote(l, "__meta_systemd_unit", "systemd_unit");
	/* Recurring series (CPU windows, periodic heap snapshots) carry what
	 * stays the same when a process restarts, as Parca Agent's do: its
	 * pid, executable path, cgroup path and container id are __meta_*
	 * inputs only (a relabel rule puts any back). One-off captures (OOM,
	 * pressure and on-demand heap snapshots) are about one process and
	 * keep them: that is how one OOM-killed process is found. */
	const char *trig = pp_labels_get(l, "trigger");
	if (!trig || !strcmp(trig, "interval"))
		for (size_t i = 0; i < sizeof(per_process) / sizeof(per_process[0]); i++)
			pp_labels_del(l, per_process[i]);
	if (protocol == STORE_PYROSCOPE) /* the store's, see outbox.h */
		service_name(l);
	return relabel_apply(a->cfg->relabel, l);
}
