/*
 * oom_capture.c - from the ring buffer's records to one oom_result per
 * OOM kill: captures assembled from MARK/BEGIN/BUCKET/COUNTERS/END records
 * (bpf/oom_abi.h), reconciled with the victims map when records were lost,
 * and finalized into a profile - the mirrored buckets' headers and stacks
 * (oom_mirror.c) with the counters the BPF walk copied, plus the buckets
 * it copied whole, built by goheap (view `latest`) - or into an event
 * saying why there is none.
 */
#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "goheap.h"
#include "oom_internal.h"
#include "pprof.h"
#include "procinfo.h"

static const struct {
	uint32_t flag;
	const char *name;
} flag_names[] = {
	{ OOM_F_NOT_TRACKED, "not_tracked" },	   { OOM_F_READ_ERROR, "read_error" },
	{ OOM_F_BUCKET_LIMIT, "bucket_limit" },	   { OOM_F_STACK_TRUNCATED, "stack_truncated" },
	{ OOM_F_RING_FULL, "ring_full" },	   { OOM_F_BAD_BUCKET, "bad_bucket" },
	{ OOM_F_PID_REUSED, "pid_reused" },	   { OOM_F_NO_BUCKETS, "no_buckets" },
	{ OOM_F_FROM_EXIT, "captured_at_exit" },   { OOM_F_VICTIMS_FULL, "victims_full" },
	{ OOM_F_ABSENT_RECORD, "absent_records" },
};

const char *oom_flag_name(uint32_t flag)
{
	for (size_t i = 0; i < sizeof(flag_names) / sizeof(flag_names[0]); i++)
		if (flag_names[i].flag == flag)
			return flag_names[i].name;
	return NULL;
}

static struct capture *find_capture(struct oom_watch *w, uint64_t id)
{
	for (size_t i = 0; i < w->nc; i++)
		if (w->c[i]->id == id)
			return w->c[i];
	return NULL;
}

void oom_capture_free(struct capture *c)
{
	if (!c)
		return;
	free(c->nb);
	free(c->pcs);
	free(c->mc);
	free(c->mc_have);
	free(c);
}

static struct capture *get_capture(struct oom_watch *w, uint64_t id, uint32_t tgid)
{
	struct capture *c = find_capture(w, id);
	struct target *t;

	if (c)
		return c;
	if (oom_grow((void **)&w->c, &w->c_cap, w->nc + 1, sizeof(*w->c)))
		return NULL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->id = id;
	c->tgid = tgid;
	clock_gettime(CLOCK_MONOTONIC, &c->seen);
	t = oom_find_target(w, (pid_t)tgid, NULL);
	if (t) {
		c->t = t;
		t->frozen = true;
		memcpy(c->comm, t->comm, sizeof(c->comm));
		snprintf(c->exe, sizeof(c->exe), "%s", t->g && t->g->exe ? t->g->exe : "");
		snprintf(c->cgroup, sizeof(c->cgroup), "%s", t->cgroup);
	} else {
		/* best effort: the victim may still be there for a moment */
		proc_comm((pid_t)tgid, c->comm, sizeof(c->comm));
		proc_exe((pid_t)tgid, c->exe, sizeof(c->exe));
		proc_cgroup((pid_t)tgid, NULL, c->cgroup, sizeof(c->cgroup));
	}
	w->c[w->nc++] = c;
	return c;
}

static void on_victim_rec(struct capture *c, const struct oom_rec_victim *r)
{
	int rank = r->h.type == OOM_REC_MARK ? 1 : r->h.type == OOM_REC_BEGIN ? 2 : 3;

	/* The kernel sends SIGKILL before it marks the victim, so another of
	 * the victim's threads can capture (BEGIN..END) on another CPU before
	 * the OOM killer's MARK reaches the ring: a late record never
	 * replaces a later state. */
	if (rank >= c->vrank) {
		c->v = r->v;
		c->vrank = rank;
	}
	if (!c->comm[0])
		memcpy(c->comm, r->v.comm, sizeof(c->comm));
	c->comm[sizeof(c->comm) - 1] = '\0';
	switch (r->h.type) {
	case OOM_REC_MARK:
		c->have_mark = true;
		break;
	case OOM_REC_BEGIN:
		c->have_begin = true;
		if (!c->mc && r->v.mirror_count && r->v.mirror_count <= OOM_MAX_BUCKETS) {
			c->mc = calloc(r->v.mirror_count, sizeof(*c->mc));
			c->mc_have = calloc(r->v.mirror_count, 1);
			if (c->mc && c->mc_have)
				c->mc_n = r->v.mirror_count;
		}
		break;
	case OOM_REC_END:
		c->have_end = true;
		break;
	}
}

static void on_bucket_rec(struct capture *c, const struct oom_rec_bucket *b)
{
	struct cap_bucket *cb;

	if (oom_grow((void **)&c->nb, &c->nb_cap, c->nnb + 1, sizeof(*c->nb)) ||
	    oom_grow((void **)&c->pcs, &c->pcs_cap, c->npcs + b->nkept + 1, sizeof(uint64_t))) {
		c->bad_records++;
		return;
	}
	cb = &c->nb[c->nnb++];
	*cb = (struct cap_bucket){ .index = b->index,
				   .addr = b->addr,
				   .size = b->size,
				   .nstk = b->nstk,
				   .nkept = b->nkept,
				   .c = b->c,
				   .off = c->npcs };
	memcpy(c->pcs + c->npcs, b->stk, (size_t)b->nkept * 8);
	c->npcs += b->nkept;
}

static void on_counters_rec(struct capture *c, const struct oom_rec_counters *r)
{
	if (!c->mc || r->mirror_pos >= c->mc_n || r->n > c->mc_n - r->mirror_pos) {
		c->misaligned = true;
		return;
	}
	memcpy(c->mc + r->mirror_pos, r->c, (size_t)r->n * sizeof(struct oom_counts));
	memset(c->mc_have + r->mirror_pos, 1, r->n);
	/* check that the walk and the mirror agree on where this chunk starts */
	if (c->t) {
		struct target *t = c->t;
		size_t h = oom_mirror_head_pos(t, c->v.mirror_head);

		if (h == 0 || r->mirror_pos >= h ||
		    t->e[h - 1 - r->mirror_pos].addr != r->first_addr)
			c->misaligned = true;
	}
}

static bool was_retired(const struct oom_watch *w, uint64_t id)
{
	size_t n = w->nretired < 256 ? w->nretired : 256;

	for (size_t i = 0; i < n; i++)
		if (w->retired[i] == id)
			return true;
	return false;
}

/*
 * Each record type's size (bpf/oom_abi.h), the one place it is written
 * down: a fixed part, then as many elements as the record's own count
 * field says (at most max). A fixed-size record has elem 0.
 */
static const struct {
	size_t base;	  /* bytes before the elements (all of a fixed record) */
	size_t elem;	  /* bytes per element */
	size_t count_off; /* the __u32 element count */
	uint32_t max;	  /* elements at most */
} rec_sizes[] = {
	[OOM_REC_MARK] = { sizeof(struct oom_rec_victim), 0, 0, 0 },
	[OOM_REC_BEGIN] = { sizeof(struct oom_rec_victim), 0, 0, 0 },
	[OOM_REC_END] = { sizeof(struct oom_rec_victim), 0, 0, 0 },
	[OOM_REC_BUCKET] = { offsetof(struct oom_rec_bucket, stk),
			     sizeof(((struct oom_rec_bucket *)0)->stk[0]),
			     offsetof(struct oom_rec_bucket, nkept), OOM_MAX_DEPTH },
	[OOM_REC_COUNTERS] = { offsetof(struct oom_rec_counters, c), sizeof(struct oom_counts),
			       offsetof(struct oom_rec_counters, n), OOM_CHUNK_N },
};
#define NREC_TYPES (sizeof(rec_sizes) / sizeof(rec_sizes[0]))

size_t oom_rec_bytes(uint32_t type, uint32_t n)
{
	if (type >= NREC_TYPES || !rec_sizes[type].base || n > rec_sizes[type].max)
		return 0;
	return rec_sizes[type].base + (size_t)n * rec_sizes[type].elem;
}

bool oom_rec_size_ok(const void *data, size_t size)
{
	const struct oom_rec_hdr *h = data;
	if (size < sizeof(*h) || h->type >= NREC_TYPES || !rec_sizes[h->type].base ||
	    size < rec_sizes[h->type].base)
		return false;
	uint32_t n = 0;
	if (rec_sizes[h->type].elem)
		memcpy(&n, (const uint8_t *)data + rec_sizes[h->type].count_off, sizeof(n));
	return size == oom_rec_bytes(h->type, n);
}

int oom_ring_cb(void *ctx, void *data, size_t size)
{
	struct oom_watch *w = ctx;
	const struct oom_rec_hdr *h = data;
	struct capture *c;

	if (size < sizeof(*h))
		return 0;
	/* the retired list is only consulted for records of no live capture:
	 * a million-bucket capture streams a million records */
	c = find_capture(w, h->capture_id);
	if (!c && !was_retired(w, h->capture_id))
		c = get_capture(w, h->capture_id, h->tgid);
	if (!c)
		return 0;
	if (!oom_rec_size_ok(data, size)) {
		c->bad_records++;
		return 0;
	}
	switch (h->type) {
	case OOM_REC_MARK:
	case OOM_REC_BEGIN:
	case OOM_REC_END:
		on_victim_rec(c, data);
		break;
	case OOM_REC_BUCKET:
		on_bucket_rec(c, data);
		break;
	case OOM_REC_COUNTERS:
		on_counters_rec(c, data);
		break;
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* Results */

static void reason_add(char *buf, size_t len, const char *what)
{
	size_t n = strlen(buf);

	if (strstr(buf, what))
		return;
	snprintf(buf + n, len - n, "%s%s", n ? "," : "", what);
}

static void push_result(struct oom_watch *w, struct oom_result *r)
{
	uint64_t one = 1;

	if (oom_grow((void **)&w->res, &w->res_cap, w->nres + 1, sizeof(*w->res))) {
		oom_result_free(r);
		return;
	}
	w->res[w->nres++] = r;
	if (r->outcome == OOM_OUT_PROFILE)
		w->profiles++;
	else
		w->events++;
	if (write(w->efd, &one, sizeof(one)) < 0) {
		/* eventfd counter overflow cannot happen at this rate */
	}
}

static int add_rss_comments(struct pprof *p, const struct oom_result *r)
{
	char buf[512];

	snprintf(buf, sizeof(buf),
		 "oom victim pid=%d tid=%d comm=%s uid=%u oom_score_adj=%d total_vm=%" PRIu64
		 "kB anon_rss=%" PRIu64 "kB file_rss=%" PRIu64 "kB shmem_rss=%" PRIu64
		 "kB pgtables=%" PRIu64 "kB",
		 (int)r->pid, (int)r->tid, r->comm, r->uid, r->oom_score_adj, r->total_vm_kb,
		 r->anon_rss_kb, r->file_rss_kb, r->shmem_rss_kb, r->pgtables_kb);
	if (pprof_add_comment(p, buf))
		return -ENOMEM;
	snprintf(buf, sizeof(buf),
		 "oom capture buckets=%" PRIu64 " new_buckets=%" PRIu64 " absent_records=%" PRIu64
		 " capture_ns=%" PRIu64 " mark_to_capture_ns=%" PRIu64 " rate=%" PRId64
		 " complete=%s%s%s",
		 r->buckets, r->new_buckets, r->absent_records, r->capture_ns,
		 r->mark_to_capture_ns, r->rate, r->complete ? "true" : "false",
		 r->complete ? "" : " reason=", r->reason);
	return pprof_add_comment(p, buf) ? -ENOMEM : 0;
}

static int build_profile(struct oom_watch *w, struct capture *c, struct oom_result *r,
			 struct pp_err *err)
{
	struct target *t = c->t;
	struct go_heap h;
	struct pprof *p = NULL;
	struct go_memrec zero[3] = { 0 };
	char num[32];
	size_t hpos = 0;
	int rc = 0;

	goheap_init(&h);
	h.rate = c->v.rate >= 0 ? c->v.rate : t->rate;
	{
		/* the walk's start in CLOCK_REALTIME */
		struct timespec rt, mono;

		clock_gettime(CLOCK_REALTIME, &rt);
		clock_gettime(CLOCK_MONOTONIC, &mono);
		h.time_ns = (int64_t)rt.tv_sec * 1000000000LL + rt.tv_nsec -
			    ((int64_t)mono.tv_sec * 1000000000LL + mono.tv_nsec -
			     (int64_t)c->v.start_ns);
		h.duration_ns = (int64_t)(c->v.end_ns - c->v.start_ns);
	}
	for (size_t i = 0; i < c->nnb; i++) {
		const struct cap_bucket *b = &c->nb[i];
		struct go_memrec a = { b->c.allocs, b->c.frees, b->c.alloc_bytes, b->c.free_bytes };

		rc = goheap_add_bucket(&h, b->addr, b->size, c->pcs + b->off, b->nkept,
				       b->nkept < b->nstk, &a, zero);
		if (rc)
			goto out;
	}
	if (c->mc_n) {
		uint64_t walked_mirror = c->v.buckets - c->v.new_buckets;
		uint64_t missing = 0;

		hpos = oom_mirror_head_pos(t, c->v.mirror_head);
		if (hpos == 0 && walked_mirror) {
			c->misaligned = true;
			walked_mirror = 0;
		}
		if (walked_mirror > c->mc_n)
			walked_mirror = c->mc_n;
		for (uint64_t mi = 0; mi < walked_mirror; mi++) {
			const struct mirror_ent *m;
			struct go_memrec a;

			if (!c->mc_have[mi]) {
				missing++;
				continue;
			}
			if (mi >= hpos) {
				c->misaligned = true;
				break;
			}
			m = &t->e[hpos - 1 - mi];
			a = (struct go_memrec){ c->mc[mi].allocs, c->mc[mi].frees,
						c->mc[mi].alloc_bytes, c->mc[mi].free_bytes };
			if (m->truncated)
				r->flags |= OOM_F_STACK_TRUNCATED;
			rc = goheap_add_bucket(&h, m->addr, m->size, t->pcs + m->off, m->nstk,
					       m->truncated, &a, zero);
			if (rc)
				goto out;
		}
		if (missing)
			r->flags |= OOM_F_RING_FULL;
	}
	/* the victim chose its buckets: symbolizing them is bounded like a
	 * snapshot (the mirror bounds what is read, not what it costs) */
	int cut = goheap_apply_budget(&h, &w->o.budget);
	if (cut < 0) {
		rc = pp_errf(err, cut, "out of memory");
		goto out;
	}
	for (uint32_t f = 1; f; f <<= 1)
		if ((r->flags & f & OOM_F_INCOMPLETE) && oom_flag_name(f))
			reason_add(r->reason, sizeof(r->reason), oom_flag_name(f));
	if (c->misaligned)
		reason_add(r->reason, sizeof(r->reason), "mirror_mismatch");
	if (t->budget_cut)
		reason_add(r->reason, sizeof(r->reason), "budget_max_frames");
	if (cut)
		reason_add(r->reason, sizeof(r->reason), "budget_profile");
	if (c->bad_records)
		reason_add(r->reason, sizeof(r->reason), "bad_record");
	r->complete = r->reason[0] == '\0';
	if (!r->complete)
		goheap_set_incomplete(&h, "%s", r->reason);

	rc = goheap_to_pprof(&h, t->g, GOHEAP_VIEW_LATEST, &p, err);
	if (rc)
		goto out;
	rc = add_rss_comments(p, r);
	if (rc) {
		rc = pp_errf(err, rc, "out of memory");
		goto out;
	}
	rc = pprof_encode(p, true, &r->gz, &r->gz_len, err);
	if (rc)
		goto out;

	rc = goheap_series_labels(r->pid, t->g, w->node, "oom", GOHEAP_VIEW_LATEST, &w->extra,
				  &r->labels, err);
	if (rc)
		goto out;
	snprintf(num, sizeof(num), "%d", (int)r->pid);
	if (pp_labels_set(&r->labels, "pid", num) || pp_labels_set(&r->labels, "comm", r->comm) ||
	    pp_labels_set(&r->labels, "executable", r->exe) ||
	    pp_labels_set(&r->labels, "cgroup", r->cgroup) ||
	    pp_labels_set(&r->labels, "trigger", "oom") ||
	    pp_labels_set(&r->labels, "oom_complete", r->complete ? "true" : "false") ||
	    (!r->complete && pp_labels_set(&r->labels, "oom_incomplete_reason", r->reason))) {
		rc = pp_errf(err, -ENOMEM, "out of memory");
		goto out;
	}
	pp_labels_sort(&r->labels);
out:
	pprof_free(p);
	goheap_free(&h);
	/* this thread's malloc arena would keep the profile's memory: give it
	 * back (every time: captures are rare, and large when they matter;
	 * gotrack's frequent snapshots trim only after a burst, givemem.h) */
	malloc_trim(0);
	return rc;
}

/*
 * Turn a finished capture into its one result. Runs WITHOUT w->mu (a
 * million-bucket profile takes seconds to build): the capture is only
 * touched by the watcher thread, its target is frozen (no API call frees
 * or changes it) and the mirror is only changed by this same thread.
 */
struct oom_result *oom_finalize(struct oom_watch *w, struct capture *c)
{
	struct oom_result *r = calloc(1, sizeof(*r));
	const struct oom_victim *v = &c->v;
	struct pp_err err = { 0 };

	if (!r)
		return NULL;
	r->pid = (pid_t)c->tgid;
	r->tid = (pid_t)v->tid;
	r->capture_id = c->id;
	memcpy(r->comm, c->comm[0] ? c->comm : v->comm, sizeof(r->comm));
	r->comm[sizeof(r->comm) - 1] = '\0';
	snprintf(r->exe, sizeof(r->exe), "%s", c->exe);
	snprintf(r->cgroup, sizeof(r->cgroup), "%s", c->cgroup);
	r->flags = v->flags;
	r->total_vm_kb = v->total_vm_kb;
	r->anon_rss_kb = v->anon_rss_kb;
	r->file_rss_kb = v->file_rss_kb;
	r->shmem_rss_kb = v->shmem_rss_kb;
	r->pgtables_kb = v->pgtables_kb;
	r->uid = v->uid;
	r->oom_score_adj = v->oom_score_adj;
	r->rate = v->rate;
	r->buckets = v->buckets;
	r->new_buckets = v->new_buckets;
	r->absent_records = v->absent_records;
	r->dropped = v->dropped;
	r->capture_ns = v->end_ns > v->start_ns ? v->end_ns - v->start_ns : 0;
	r->mark_to_capture_ns =
		v->start_ns > v->mark_ns && v->mark_ns ? v->start_ns - v->mark_ns : 0;
	r->outcome = OOM_OUT_EVENT;

	if (v->flags & OOM_F_VICTIMS_FULL) {
		snprintf(r->reason, sizeof(r->reason),
			 "victims_full: more simultaneous OOM victims than the BPF victims map "
			 "holds");
	} else if (v->state != OOM_ST_DONE) {
		if (v->state != OOM_ST_MARKED)
			snprintf(r->reason, sizeof(r->reason),
				 "capture_lost: the walk never finished");
		else if (v->retries)
			snprintf(r->reason, sizeof(r->reason),
				 "no_capture: each of %u tries found the profile's first words "
				 "unreadable (error %d)",
				 v->retries, v->read_error);
		else
			snprintf(r->reason, sizeof(r->reason),
				 "no_capture: the victim exited before any of its threads reached "
				 "the capture points");
	} else if (v->flags & OOM_F_PID_REUSED) {
		snprintf(r->reason, sizeof(r->reason),
			 "pid_reused: the tracked process with this pid had exited");
	} else if (v->flags & OOM_F_NOT_TRACKED || !c->t) {
		snprintf(r->reason, sizeof(r->reason),
			 "not_tracked: victim is not a tracked Go process");
	} else if (v->flags & OOM_F_NO_BUCKETS) {
		if (v->rate == 0)
			snprintf(r->reason, sizeof(r->reason),
				 "profiling_disabled: runtime.MemProfileRate is 0 and there are no "
				 "buckets");
		else
			snprintf(r->reason, sizeof(r->reason),
				 "no_buckets: runtime.mbuckets is empty");
	} else if (v->buckets == 0 && (v->flags & (OOM_F_READ_ERROR | OOM_F_BAD_BUCKET))) {
		snprintf(r->reason, sizeof(r->reason), "%s (error %d) before the first bucket",
			 v->flags & OOM_F_READ_ERROR ? "read_error" : "bad_bucket", v->read_error);
	} else if (build_profile(w, c, r, &err)) {
		r->outcome = OOM_OUT_EVENT;
		free(r->gz);
		r->gz = NULL;
		pp_labels_free(&r->labels);
		snprintf(r->reason, sizeof(r->reason), "profile_error: %.200s", err.msg);
	} else {
		r->outcome = OOM_OUT_PROFILE;
	}
	return r;
}

static void remove_capture(struct oom_watch *w, size_t i)
{
	struct capture *c = w->c[i];

	if (c->t) {
		bool other = false;

		for (size_t k = 0; k < w->nc; k++)
			if (k != i && w->c[k]->t == c->t)
				other = true;
		if (!other)
			c->t->frozen = false;
	}
	oom_capture_free(c);
	w->c[i] = w->c[--w->nc];
}

/* Hand over a finalized capture's result and forget the capture.
 * Caller holds w->mu. */
void oom_retire(struct oom_watch *w, struct capture *c, struct oom_result *r)
{
	__u32 k = c->tgid;
	struct oom_victim v;

	if (r)
		push_result(w, r);
	w->retired[w->nretired++ % 256] = c->id;
	/* keep the map entry (it blocks re-marks of the dying victim) until
	 * the process is gone; reconcile() frees the slot then */
	if (bpf_map_lookup_elem(w->victims_fd, &k, &v) == 0 && v.capture_id == c->id) {
		v.state = OOM_ST_REPORTED;
		bpf_map_update_elem(w->victims_fd, &k, &v, BPF_EXIST);
	}
	for (size_t i = 0; i < w->nc; i++)
		if (w->c[i] == c) {
			remove_capture(w, i);
			break;
		}
}

/*
 * Reconcile with the victims map (the truth when ring records were lost)
 * and finish captures. Caller holds w->mu.
 */
void oom_reconcile(struct oom_watch *w)
{
	__u32 key, next, *prev = NULL;
	int64_t now = oom_now_ms();

	/* victims the ring never told us about, or whose END was lost */
	while (bpf_map_get_next_key(w->victims_fd, prev, &next) == 0) {
		struct oom_victim v;
		struct capture *c;

		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(w->victims_fd, &key, &v))
			continue;
		if (v.state == OOM_ST_REPORTED || was_retired(w, v.capture_id))
			continue;
		c = find_capture(w, v.capture_id);
		if (!c && v.state != OOM_ST_FREE) {
			c = get_capture(w, v.capture_id, key);
			if (!c)
				continue;
			c->v = v;
			c->vrank = v.state == OOM_ST_DONE ? 3 : v.state == OOM_ST_CAPTURING ? 2 : 1;
		}
		if (!c)
			continue;
		if (v.state == OOM_ST_DONE && !c->have_end && !c->done_in_map) {
			c->done_in_map = true;
			clock_gettime(CLOCK_MONOTONIC, &c->done_seen);
		}
		if (c->done_in_map && !c->have_end && now - oom_ts_ms(&c->done_seen) > 1000) {
			/* END was dropped: take the final state from the map */
			c->v = v;
			c->vrank = 3;
			c->v.flags |= OOM_F_RING_FULL;
			c->have_end = true;
		}
		if (!c->have_end && v.state != OOM_ST_DONE) {
			/* a read of a dying process's /proc entry can fail for a
			 * moment: gone means gone on 10 reconciles in a row */
			if (oom_pid_alive(w, (pid_t)key, c->t ? c->t->start_ticks : 0))
				c->gone_seen = 0;
			else
				c->gone_seen++;
		}
		if (!c->have_end && v.state != OOM_ST_DONE && now - oom_ts_ms(&c->seen) > 3000 &&
		    c->gone_seen >= 10) {
			/* marked, never captured, and gone */
			c->v = v;
			c->have_end = true;
		}
	}

	/* captures the map does not know (victims map full, or the entry was
	 * replaced): give up on them after a while, with what the ring said */
	for (size_t i = 0; i < w->nc; i++) {
		struct capture *c = w->c[i];
		__u32 k = c->tgid;
		struct oom_victim v;

		if (c->have_end || now - oom_ts_ms(&c->seen) <= 3000)
			continue;
		if (bpf_map_lookup_elem(w->victims_fd, &k, &v) == 0 && v.capture_id == c->id)
			continue;
		c->have_end = true;
	}

	/* free victims slots whose process is gone and whose capture is done */
	prev = NULL;
	while (bpf_map_get_next_key(w->victims_fd, prev, &next) == 0) {
		struct oom_victim v;

		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(w->victims_fd, &key, &v))
			continue;
		if (v.state == OOM_ST_REPORTED &&
		    !oom_pid_alive(w, (pid_t)key, v.start_boottime / 10000000ULL)) {
			bpf_map_delete_elem(w->victims_fd, &key);
			prev = NULL; /* restart after a delete */
		}
	}
}
