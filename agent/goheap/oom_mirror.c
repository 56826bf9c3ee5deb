/*
 * oom_mirror.c - per tracked process, a user-space mirror of its Go
 * memory-profile buckets' headers and stacks (they never change once
 * created, so at OOM time the BPF walk only copies counters), kept
 * current by the watcher thread, and the oom_target entry that tells the
 * BPF side where the mirror ends (bpf/oom_abi.h).
 *
 * The mirror is oldest first: e[n - 1] is the newest bucket (the list
 * head when it was last read). New buckets are read newest first from the
 * head down to the old newest, without w->mu (mirror_read), then appended
 * under it (mirror_apply). A target with a capture pending is frozen: only
 * appended to, never trimmed, so positions from the head the BPF walk used
 * stay valid.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "gobin.h"
#include "gobucket.h"
#include "log.h"
#include "oom_internal.h"
#include "remotemem.h"

static int mirror_push_pcs(struct target *t, const uint64_t *pcs, uint32_t n, uint64_t *off)
{
	if (oom_grow((void **)&t->pcs, &t->pcs_cap, t->npcs + n, sizeof(uint64_t)))
		return -ENOMEM;
	memcpy(t->pcs + t->npcs, pcs, (size_t)n * 8);
	*off = t->npcs;
	t->npcs += n;
	return 0;
}

/* Drop the oldest entries beyond max and compact the PC pool when it is
 * mostly garbage. */
static void mirror_trim(struct target *t, size_t max)
{
	size_t drop, live = 0;

	if (t->n <= max)
		return;
	drop = t->n - max;
	memmove(t->e, t->e + drop, max * sizeof(*t->e));
	t->n = max;
	for (size_t i = 0; i < t->n; i++)
		live += t->e[i].nstk;
	if (live * 2 < t->npcs) {
		uint64_t *np = malloc((live ? live : 1) * sizeof(uint64_t));
		size_t k = 0;

		if (!np)
			return;
		for (size_t i = 0; i < t->n; i++) {
			memcpy(np + k, t->pcs + t->e[i].off, t->e[i].nstk * 8);
			t->e[i].off = k;
			k += t->e[i].nstk;
		}
		free(t->pcs);
		t->pcs = np;
		t->npcs = k;
		t->pcs_cap = live ? live : 1;
	}
}

/* New buckets read from the target, newest first (outside the lock). */
struct mbatch {
	struct mirror_ent *ne;
	size_t nne, ne_cap;
	uint64_t *npcs;
	size_t nnp, np_cap;
	bool reached; /* the walk met the old newest bucket */
	bool cut;     /* stopped at max_frames */
};

static void mbatch_free(struct mbatch *b)
{
	free(b->ne);
	free(b->npcs);
	memset(b, 0, sizeof(*b));
}

/*
 * Walk from the head until the newest mirrored bucket (`newest`, 0 when
 * the mirror is empty) and collect what is new: headers and the kept PCs,
 * decoded by gobucket (records are the BPF walk's business). Touches no
 * shared state: runs without w->mu. Negative on errors (-ESRCH: the
 * process is gone).
 */
static int mirror_read(const struct oom_watch *w, const struct gobin_mem *mem, pid_t pid,
		       uint64_t mbuckets_addr, uint64_t newest, struct mbatch *b,
		       struct pp_err *err)
{
	uint64_t head, cur;
	uint64_t buf[GOBUCKET_BUF_WORDS];
	uint32_t maxb = w->o.max_buckets, maxd = w->o.max_stack_depth;
	struct rmem r;
	int rc;

	memset(b, 0, sizeof(*b));
	rmem_init(&r, mem, pid, false);
	rc = rmem_read(&r, mbuckets_addr, &head, sizeof(head), NULL);
	if (rc)
		return pp_errf(err, rc, "pid %d: read runtime.mbuckets: %s", (int)pid,
			       strerror(-rc));
	cur = head;
	while (cur) {
		struct gobucket gb;
		struct pp_err berr = { 0 };

		if (cur == newest) {
			b->reached = true;
			break;
		}
		if (b->nne >= maxb)
			break;
		rc = gobucket_read(&r, cur, maxd, false, buf, &gb, &berr);
		if (rc) {
			rc = pp_errf(err, rc, "pid %d: %s", (int)pid, berr.msg);
			goto fail;
		}
		if (w->o.max_frames && b->nnp + gb.nkept > w->o.max_frames) {
			b->cut = true;
			break;
		}
		if (oom_grow((void **)&b->ne, &b->ne_cap, b->nne + 1, sizeof(*b->ne)) ||
		    oom_grow((void **)&b->npcs, &b->np_cap, b->nnp + gb.nkept + 1,
			     sizeof(uint64_t))) {
			rc = pp_errf(err, -ENOMEM, "out of memory mirroring pid %d", (int)pid);
			goto fail;
		}
		memcpy(b->npcs + b->nnp, gb.stk, (size_t)gb.nkept * 8);
		b->ne[b->nne++] = (struct mirror_ent){ .addr = cur,
						       .size = gb.size,
						       .off = b->nnp,
						       .nstk = gb.nkept,
						       .truncated = gb.nstk > gb.nkept };
		b->nnp += gb.nkept;
		cur = gb.allnext;
	}
	return 0;
fail:
	mbatch_free(b);
	return rc;
}

/*
 * Append a batch read against `newest` to the mirror (caller holds w->mu).
 * Returns the number of new buckets. A frozen target (capture pending) is
 * only appended to, never trimmed: positions from the head the BPF walk
 * used stay valid.
 */
static int mirror_apply(struct oom_watch *w, struct target *t, uint64_t newest, struct mbatch *b)
{
	if ((t->n ? t->e[t->n - 1].addr : 0) != newest)
		return 0; /* the mirror moved meanwhile: next pass */
	if (newest && !b->reached) {
		if (t->frozen)
			return 0;
		/* the old mirror is unreachable within max_buckets: start over */
		t->n = 0;
		t->npcs = 0;
	}
	if (oom_grow((void **)&t->e, &t->cap, t->n + b->nne, sizeof(*t->e)))
		return -ENOMEM;
	/* the batch is newest first; the mirror is oldest first */
	for (size_t i = b->nne; i-- > 0;) {
		struct mirror_ent m = b->ne[i];
		uint64_t off;

		if (mirror_push_pcs(t, b->npcs + m.off, m.nstk, &off))
			return -ENOMEM;
		m.off = off;
		t->e[t->n++] = m;
	}
	if (!t->frozen) {
		/* max_frames: keep the newest buckets whose stacks fit (one
		 * pass from the newest, over what is mirrored) */
		size_t keep = t->n;
		if (w->o.max_frames) {
			uint64_t frames = 0;
			for (keep = 0; keep < t->n; keep++) {
				frames += t->e[t->n - 1 - keep].nstk;
				if (frames > w->o.max_frames)
					break;
			}
		}
		if (b->cut || keep < t->n) {
			if (!t->budget_cut)
				pp_log(PP_WARN,
				       "OOM mirror over budget: captures of this process "
				       "will be incomplete",
				       "pid=%d max_frames=%" PRIu64, (int)t->pid, w->o.max_frames);
			t->budget_cut = true;
		}
		mirror_trim(t, keep < w->o.max_buckets ? keep : w->o.max_buckets);
	}
	return (int)(b->nne > INT32_MAX ? INT32_MAX : b->nne);
}

int oom_publish_target(struct oom_watch *w, struct target *t, struct pp_err *err)
{
	struct oom_target v = {
		.mbuckets_addr = t->g->mbuckets_addr,
		.rate_addr = t->g->rate_addr,
		.mirror_head = t->n ? t->e[t->n - 1].addr : 0,
		.mirror_count = t->n,
		.mirror_gen = ++t->gen,
		.start_ticks = t->start_ticks,
		/* over budget: the BPF walk stops after the mirror (plus what a
		 * second can add) instead of copying whole buckets into the ring
		 * until it is full */
		.max_buckets = t->budget_cut && t->n + OOM_BUDGET_SLACK < w->o.max_buckets
				       ? (uint32_t)(t->n + OOM_BUDGET_SLACK)
				       : w->o.max_buckets,
		.max_depth = w->o.max_stack_depth,
	};
	__u32 key = (__u32)t->pid;

	if (bpf_map_update_elem(w->targets_fd, &key, &v, BPF_ANY))
		return pp_errf(err, -errno, "pid %d: update BPF targets map: %s", (int)t->pid,
			       strerror(errno));
	return 0;
}

void oom_target_free(struct target *t)
{
	if (!t)
		return;
	gobin_free(t->g);
	if (t->pidfd >= 0)
		close(t->pidfd);
	free(t->cgroup);
	free(t->e);
	free(t->pcs);
	free(t);
}

/* When to read t again: period << min(idle, OOM_IDLE_SHIFT_MAX) after a
 * read that found nothing new, on that interval's grid of the monotonic
 * clock (oom_internal.h, OOM_IDLE_SHIFT_MAX); one period after anything
 * else. Caller holds w->mu. */
static void schedule_next(struct target *t, bool found_nothing, int64_t period)
{
	int64_t now = oom_now_ms(), every;

	if (found_nothing && !t->budget_cut) {
		if (t->idle < OOM_IDLE_SHIFT_MAX)
			t->idle++;
	} else {
		t->idle = 0;
	}
	every = period << t->idle;
	if (t->idle == 0) {
		t->next_ms = now + every;
		return;
	}
	/* the grid point nearest now + every; a read up to half a period
	 * early (pick_targets) still lands on the next one */
	t->next_ms = (now + every + period / 2) / every * every;
}

/* Catch the picked mirrors up: read without the lock, apply with it. */
void oom_mirror_refresh(struct oom_watch *w, struct target **picked, size_t n, int64_t period)
{
	for (size_t i = 0; i < n; i++) {
		struct target *t = picked[i];
		struct pp_err err = { 0 };
		struct mbatch b;
		uint64_t newest;
		pid_t pid;
		uint64_t addr;
		const struct gobin_mem *mem;
		int rc;

		pthread_mutex_lock(&w->mu);
		newest = t->n ? t->e[t->n - 1].addr : 0;
		pid = t->pid;
		addr = t->g->mbuckets_addr;
		mem = t->g->mem;
		pthread_mutex_unlock(&w->mu);

		rc = mirror_read(w, mem, pid, addr, newest, &b, &err);

		pthread_mutex_lock(&w->mu);
		if (rc)
			t->read_failed = true;
		schedule_next(t, rc == 0 && b.nne == 0 && (!newest || b.reached), period);
		if (!t->dead && rc == 0 && (b.nne || (newest && !b.reached)) &&
		    mirror_apply(w, t, newest, &b) > 0)
			oom_publish_target(w, t, &err);
		t->busy = false;
		if (t->dead)
			oom_target_free(t);
		pthread_mutex_unlock(&w->mu);
		mbatch_free(&b);
	}
}

size_t oom_mirror_head_pos(const struct target *t, uint64_t addr)
{
	size_t h = t->n;

	while (h > 0 && t->e[h - 1].addr != addr)
		h--;
	return h;
}
