/*
 * agent_snapshot.c - POST /api/v1/snapshot as the agent answers it
 * (agent_snapshot.h): one Go heap profile of a target, handed to the
 * outbox and returned to the client.
 */
#include "agent_snapshot.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "gobin.h"
#include "goheap.h"
#include "gotrack.h"
#include "log.h"
#include "metrics.h"
#include "targets.h"

int agent_http_snapshot(void *arg, pid_t pid, const char *view_s, uint8_t **out, size_t *len,
			char *msg, size_t msg_len)
{
	struct agent_snapshot *a = arg;
	struct pp_err err = { 0 };
	struct gobin *g = NULL;
	struct goheap_snapshot snap = { 0 };
	enum goheap_view view = GOHEAP_VIEW_RUNTIME;
	int status;

	/* the API answers for what the config profiles, nothing else */
	if (!a->cfg->go_heap.enabled) {
		snprintf(msg, msg_len,
			 "Go heap profiling is disabled in this agent's config "
			 "(go_heap.enabled: false)");
		return 403;
	}
	int m = targets_match_pid(a->cfg->targets, a->cfg->ntargets, pid);
	if (m == -ESRCH || m == -ENOENT) {
		snprintf(msg, msg_len, "no process %d", (int)pid);
		return 404;
	}
	if (m < 0) {
		snprintf(msg, msg_len, "cannot read /proc/%d: %s", (int)pid, strerror(-m));
		return 403;
	}
	if (m == 0) {
		snprintf(msg, msg_len, "pid %d is not among this agent's targets", (int)pid);
		return 403;
	}
	goheap_view_parse(view_s, &view);
	int rc = gobin_new(&(struct gobin_opts){ .pid = pid }, &g, &err);
	if (rc == 0) {
		struct goheap_snapshot_opts o = {
			.view = view,
			.max_buckets = a->cfg->go_heap.max_buckets,
			.max_depth = a->cfg->go_heap.max_stack_depth,
			.budget = gotrack_budget(&a->cfg->go_heap),
			.trigger = "on_demand",
			.node = a->cfg->node,
			.external = &a->cfg->external_labels,
		};
		rc = goheap_snapshot(pid, g, &o, &snap, &err);
	}
	switch (rc) {
	case 0:
		status = 200;
		break;
	case -ESRCH:
		status = 404;
		break;
	case -ENOEXEC:
	case -ENOENT:
		status = 422;
		break;
	case GOHEAP_EDISABLED:
		status = 409;
		break;
	case -EACCES:
	case -EPERM:
		status = 403;
		break;
	default:
		status = 500;
	}
	metric_inc("pushprof_go_heap_snapshots_total", "Go heap snapshots taken, by outcome.",
		   status == 200 ? (snap.complete ? "trigger=\"on_demand\",result=\"complete\""
						  : "trigger=\"on_demand\",result=\"incomplete\"")
				 : "trigger=\"on_demand\",result=\"error\"",
		   1);
	if (status == 200) {
		struct pp_err oerr = { 0 };
		if (outbox_submit(a->outbox, &snap.labels, snap.gz, snap.len, &oerr))
			pp_log(PP_WARN, "cannot hand over an on-demand heap profile",
			       "pid=%d error=%s", (int)pid, pp_q(oerr.msg));
		*out = snap.gz;
		*len = snap.len;
		snap.gz = NULL;
		pp_log(PP_INFO, "on-demand heap snapshot", "pid=%d view=%s buckets=%zu complete=%s",
		       (int)pid, goheap_view_name(view), snap.buckets,
		       snap.complete ? "true" : "false");
	} else {
		snprintf(msg, msg_len, "%s",
			 rc == GOHEAP_EDISABLED && !err.msg[0]
				 ? "memory profiling disabled in this process (MemProfileRate is 0)"
			 : err.msg[0] ? err.msg
				      : strerror(-rc));
	}
	goheap_snapshot_free(&snap);
	gobin_free(g);
	return status;
}
