/*
 * goheap_snapshot.c - one heap snapshot of a live process: the walk
 * streamed straight into the profile builder (no go_heap held), the
 * budget, gzip, and the series labels (goheap_series_labels, which the
 * OOM capture uses too). One snapshot at a time in the process.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "goheap_internal.h"
#include "pprof.h"
#include "procinfo.h"

int goheap_series_labels(pid_t pid, const struct gobin *g, const char *node, const char *trigger,
			 enum goheap_view view, const struct pp_labels *external,
			 struct pp_labels *out, struct pp_err *err)
{
	char pidbuf[24], comm[64] = "", cg[4096] = "";
	snprintf(pidbuf, sizeof(pidbuf), "%d", (int)pid);
	proc_comm(pid, comm, sizeof(comm));
	if (proc_cgroup(pid, NULL, cg, sizeof(cg)))
		cg[0] = '\0';
	if (pp_labels_set(out, "__name__", "memory") ||
	    pp_labels_set(out, "node", node ? node : "") || pp_labels_set(out, "pid", pidbuf) ||
	    pp_labels_set(out, "comm", comm) ||
	    pp_labels_set(out, "executable", g->exe ? g->exe : "") ||
	    pp_labels_set(out, "cgroup", cg) ||
	    pp_labels_set(out, "trigger", trigger ? trigger : "on_demand") ||
	    pp_labels_set(out, "view", goheap_view_name(view)))
		return pp_errf(err, -ENOMEM, "out of memory");
	for (size_t i = 0; external && i < external->n; i++) {
		if (pp_labels_get(out, external->v[i].name))
			continue;
		if (pp_labels_set(out, external->v[i].name, external->v[i].value))
			return pp_errf(err, -ENOMEM, "out of memory");
	}
	/* Empty values mean "no label" to Parca. */
	static const char *const optional[] = { "node", "comm", "cgroup" };
	for (size_t i = 0; i < 3; i++) {
		const char *v = pp_labels_get(out, optional[i]);
		if (v && !*v)
			pp_labels_del(out, optional[i]);
	}
	pp_labels_sort(out);
	return 0;
}

/* A snapshot streams the buckets straight into the profile builder. */
struct snap_stream {
	struct goheap_stream st;
	struct goheap_builder *b;
	enum goheap_view view;
	bool all_cycles; /* runtime view, second pass: no GC published yet */
	bool any_active; /* some bucket has published (or C%3) data */
};

static int snap_fn(struct goheap_stream *st, struct go_heap *h, const struct go_bucket *bk)
{
	struct snap_stream *ss = (struct snap_stream *)st;
	int rc;
	if (ss->view == GOHEAP_VIEW_RUNTIME && !ss->all_cycles) {
		struct go_memrec a = goheap_bucket_record(h, bk, GOHEAP_VIEW_RUNTIME, false);
		if (a.allocs || a.frees)
			ss->any_active = true;
	}
	struct go_memrec r = goheap_bucket_record(h, bk, ss->view, ss->all_cycles);
	ss->b->rate = h->rate;
	if ((rc = goheap_builder_add(ss->b, bk, &r)) == GOHEAP_STOP)
		goheap_set_incomplete(h,
				      "budget: more than go_heap.budget.max_locations (%" PRIu64
				      ") distinct PCs after %zu buckets: the rest were not read",
				      ss->b->max_pcs, h->n - 1);
	return rc;
}

/* One snapshot at a time in the whole process (see goheap.h). */
static pthread_mutex_t snapshot_mu = PTHREAD_MUTEX_INITIALIZER;

static int snapshot_locked(pid_t pid, const struct gobin *g, const struct goheap_snapshot_opts *o,
			   struct goheap_snapshot *out, struct pp_err *err);

int goheap_snapshot(pid_t pid, const struct gobin *g, const struct goheap_snapshot_opts *o,
		    struct goheap_snapshot *out, struct pp_err *err)
{
	pthread_mutex_lock(&snapshot_mu);
	int rc = snapshot_locked(pid, g, o, out, err);
	pthread_mutex_unlock(&snapshot_mu);
	return rc;
}

static int snapshot_locked(pid_t pid, const struct gobin *g, const struct goheap_snapshot_opts *o,
			   struct goheap_snapshot *out, struct pp_err *err)
{
	struct go_heap h;
	struct goheap_builder *b = NULL;
	struct pprof *p = NULL;
	int64_t t0 = pp_clock_ns(CLOCK_MONOTONIC);
	struct goheap_walk_budget wb = { .b = &o->budget, .cancel = o->cancel };
	int rc;

	memset(out, 0, sizeof(*out));
	if (o->budget.max_duration_ns)
		wb.deadline_ns = t0 + (int64_t)o->budget.max_duration_ns;
	/* At most three walks: a second with every cycle (below), and one
	 * more, exact about loops, if a walk met a loop (GOHEAP_REWALK). */
	bool all_cycles = false, exact = false;
	for (;;) {
		goheap_init(&h);
		goheap_builder_free(b);
		b = NULL;
		/* The rate and time are known once the walk has begun: snap_fn
		 * passes the rate on, period and time are set at the end. */
		if ((rc = goheap_builder_new(&(struct goheap_builder_opts){ .g = g }, &b, NULL)))
			goto nomem;
		/* Sent gzip'd only: samples compressed as they come, never held
		 * whole (pprof.h). */
		if ((rc = pprof_stream_gzip(b->p)))
			goto nomem;
		struct snap_stream ss = { .st = { .fn = snap_fn, .exact = exact },
					  .b = b,
					  .view = o->view,
					  .all_cycles = all_cycles };
		b->max_pcs = o->budget.max_locations;
		wb.frames = 0;
		wb.cut = false;
		rc = goheap_walk(pid, g, o->max_buckets, o->max_depth, &h, &ss.st, &wb, err);
		if (rc == GOHEAP_REWALK && !exact) {
			exact = true;
			continue;
		}
		if (rc)
			goto out;
		/* runtime.MemProfile's "clear" case: nothing published by any GC
		 * yet, so it reports every cycle - walk again, adding them all. */
		if (o->view == GOHEAP_VIEW_RUNTIME && !ss.any_active && h.n && !all_cycles) {
			all_cycles = true;
			continue;
		}
		break;
	}
	if ((rc = goheap_builder_comments(b, &h, o->view)))
		goto nomem;
	if (pprof_set_period(b->p, "space", "bytes", h.rate)) {
		rc = -ENOMEM;
		goto nomem;
	}
	pprof_set_time(b->p, h.time_ns, 0);
	p = b->p;
	b->p = NULL;
	out->locations = b->npcs;
	goheap_builder_free(b); /* before encoding: the symbol caches are not needed */
	b = NULL;
	out->buckets = h.n;
	out->complete = h.complete;
	out->budget_cut = wb.cut;
	out->frames = wb.frames;
	out->read_bytes = wb.read_bytes;
	memcpy(out->incomplete_reason, h.incomplete_reason, sizeof(out->incomplete_reason));
	out->truncated_stacks = h.truncated_stacks;
	out->rate = h.rate;
	out->read_ns = h.duration_ns;
	/* gzip level 1, as runtime/pprof does; p's stream finished in place */
	if ((rc = pprof_encode_last(p, &out->gz, &out->len, err)))
		goto out;
	if ((rc = goheap_series_labels(pid, g, o->node, o->trigger, o->view, o->external,
				       &out->labels, err)))
		goto out;
	out->samples = pprof_sample_count(p);
	out->total_ns = pp_clock_ns(CLOCK_MONOTONIC) - t0;
	goto out;
nomem:
	pp_errf(err, rc, "building the heap profile: %s", strerror(-rc));
out:
	if (rc)
		goheap_snapshot_free(out);
	goheap_builder_free(b);
	pprof_free(p);
	goheap_free(&h);
	return rc;
}

void goheap_snapshot_free(struct goheap_snapshot *s)
{
	free(s->gz);
	pp_labels_free(&s->labels);
	memset(s, 0, sizeof(*s));
}
