// SPDX-License-Identifier: GPL-2.0
/*
 * oom.bpf.c - capture a Go program's memory-profile buckets when the
 * kernel OOM-kills it.
 *
 * oom:mark_victim runs in the OOM killer's context: it records the victim
 * (tgid, RSS figures) in `victims`. The capture itself must run in the
 * victim's own context, where its memory is still mapped: the first of its
 * threads to reach signal:signal_deliver with SIGKILL (or, if the SIGKILL
 * was dequeued before the mark, sched:sched_process_exit, which runs
 * before exit_mm()) claims the victim with a compare-and-swap and walks
 * runtime.mbuckets with bpf_probe_read_user inside bpf_loop.
 *
 * The walk streams into the `ring` ring buffer: counters only for buckets
 * user space has mirrored (see oom_abi.h), whole buckets otherwise. Every way
 * a capture can fall short sets a flag in the victim's state, and the
 * final state is kept in `victims` as well as sent, so a full ring never
 * makes a capture vanish.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "oom_abi.h"

char LICENSE[] SEC("license") = "GPL";

#define SIGKILL 9
#define EFAULT 14
/* A read of runtime.mbuckets or of the first bucket that finds its page
 * unmapped right now (bpf_probe_read_user cannot fault it in: a page being
 * migrated or written back under the memory cgroup's reclaim) gives the
 * claim back this often before the capture reports read_error: the
 * victim's other threads, and each thread's exit, try again. A counter
 * record on a never-touched page is not such a case: see read_record_words. */
#define OOM_RETRIES 16

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096); /* resized by user space */
	__type(key, __u32);
	__type(value, struct oom_target);
} targets SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256); /* victims at once */
	__type(key, __u32);
	__type(value, struct oom_victim);
} victims SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 22); /* resized by user space */
} ring SEC(".maps");

struct walk {
	__u64 cur;   /* next bucket */
	__u64 index; /* walk position */
	__u64 max_buckets;
	__u64 mirror_head, mirror_count;
	__u64 mpos; /* position inside the mirror */
	__u64 capture_id;
	__u64 new_buckets, dropped;
	__u64 absent; /* records read word by word (absent pages) */
	__u32 where;  /* 0 before the mirror head, 1 inside, 2 past it */
	__u32 max_depth;
	__u32 tgid;
	__u32 flags;
	__s32 read_error;
};

/* Per-CPU: the walk's state lives here, not on the stack, so the verifier
 * treats it as unknown data and checks walk_one() once, not per value. */
struct scratch {
	struct walk w;
	struct oom_rec_bucket b;
	struct oom_rec_counters c;
	struct oom_rec_victim v;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct scratch);
} scratch SEC(".maps");

/* Counters user space reads through the skeleton's .bss. */
__u64 capture_seq;
__u64 stat_marks;
__u64 stat_dup_marks;
__u64 stat_victims_full;
__u64 stat_captures;
__u64 stat_ring_drops;

static __always_inline void sum_record(const __u64 *mr, struct oom_counts *c)
{
	c->allocs = mr[0] + mr[4] + mr[8] + mr[12];
	c->frees = mr[1] + mr[5] + mr[9] + mr[13];
	c->alloc_bytes = mr[2] + mr[6] + mr[10] + mr[14];
	c->free_bytes = mr[3] + mr[7] + mr[11] + mr[15];
}

static __always_inline void emit(struct walk *w, void *rec, __u64 size)
{
	if (bpf_ringbuf_output(&ring, rec, size, 0)) {
		w->dropped++;
		w->flags |= OOM_F_RING_FULL;
		__sync_fetch_and_add(&stat_ring_drops, 1);
	}
}

static __always_inline void flush_chunk(struct walk *w, struct scratch *s)
{
	__u32 n = s->c.n;

	if (n == 0)
		return;
	if (n > OOM_CHUNK_N)
		n = OOM_CHUNK_N;
	emit(w, &s->c, sizeof(s->c) - sizeof(s->c.c) + (__u64)n * sizeof(struct oom_counts));
	s->c.n = 0;
}

/*
 * A bucket's header and stack are written when the runtime creates it
 * (stkbucket, runtime/mprof.go); its 128-byte memRecord only where
 * mProf_Malloc counts the allocation (one 32-byte cycle) and mProf_Flush
 * folds cycles at GC. Buckets come from persistentalloc, a bump allocator
 * over fresh mmap'd memory, so the newest bucket's record - whole, or the
 * part past a page boundary - can lie on a page the process never touched:
 * no page table entry, zeros to the runtime, -EFAULT to a BPF read that
 * cannot fault it in. The OOM kill often comes exactly then: the victim's
 * first write to the new record is the page fault the memory cgroup
 * refuses. Read such a record word by word; absent words count as the
 * zeros the runtime sees, and the capture says how many records had any
 * (`leak -straddle` in tests/oom/leak.go builds the case). Only a
 * swapped-out record would make those zeros wrong.
 */
static __always_inline void read_record_words(struct walk *w, __u64 *mr, __u64 rec)
{
	bool absent = false;

	for (int k = 0; k < GO_MEMRECORD_SIZE / 8; k++) {
		if (bpf_probe_read_user(&mr[k], 8, (void *)(rec + k * 8))) {
			mr[k] = 0;
			absent = true;
		}
	}
	if (absent) {
		w->absent++;
		w->flags |= OOM_F_ABSENT_RECORD;
	}
}

static long walk_one(__u64 i, void *ctx)
{
	__u32 zero = 0;
	struct scratch *s;
	struct walk *w;
	__u64 hdr[GO_BUCKET_HDR / 8], mr[GO_MEMRECORD_SIZE / 8], nstk, cur;
	long rc;

	s = bpf_map_lookup_elem(&scratch, &zero);
	if (!s)
		return 1;
	w = &s->w;
	cur = w->cur;
	if (cur == 0)
		return 1;
	if (w->index >= w->max_buckets) {
		w->flags |= OOM_F_BUCKET_LIMIT;
		return 1;
	}
	rc = bpf_probe_read_user(hdr, sizeof(hdr), (void *)cur);
	if (rc) {
		w->flags |= OOM_F_READ_ERROR;
		w->read_error = rc;
		return 1;
	}
	nstk = hdr[GO_BUCKET_NSTK / 8];
	if (hdr[GO_BUCKET_TYP / 8] != GO_BUCKET_MEMPROF || nstk > OOM_MAX_DEPTH) {
		w->flags |= OOM_F_BAD_BUCKET;
		return 1;
	}
	rc = bpf_probe_read_user(mr, sizeof(mr), (void *)(cur + GO_BUCKET_STK + nstk * 8));
	if (rc == -EFAULT)
		read_record_words(w, mr, cur + GO_BUCKET_STK + nstk * 8);
	else if (rc) {
		w->flags |= OOM_F_READ_ERROR;
		w->read_error = rc;
		return 1;
	}

	if (w->where == 0 && w->mirror_count && cur == w->mirror_head) {
		w->where = 1;
		w->mpos = 0;
	}
	if (w->where == 1 && w->mpos >= w->mirror_count)
		w->where = 2;

	if (w->where == 1) {
		__u32 n = s->c.n;

		if (n >= OOM_CHUNK_N) { /* cannot happen: flushed when full */
			flush_chunk(w, s);
			n = 0;
		}
		if (n == 0) {
			s->c.h.type = OOM_REC_COUNTERS;
			s->c.h.tgid = w->tgid;
			s->c.h.capture_id = w->capture_id;
			s->c.mirror_pos = w->mpos;
			s->c.first_addr = cur;
		}
		sum_record(mr, &s->c.c[n & (OOM_CHUNK_N - 1)]);
		s->c.n = n + 1;
		if (s->c.n >= OOM_CHUNK_N)
			flush_chunk(w, s);
		w->mpos++;
	} else {
		struct oom_rec_bucket *b = &s->b;
		__u32 keep = nstk;
		__u64 sz;

		if (keep > w->max_depth) {
			keep = w->max_depth;
			w->flags |= OOM_F_STACK_TRUNCATED;
		}
		if (keep > OOM_MAX_DEPTH)
			keep = OOM_MAX_DEPTH;
		b->h.type = OOM_REC_BUCKET;
		b->h.tgid = w->tgid;
		b->h.capture_id = w->capture_id;
		b->index = w->index;
		b->addr = cur;
		b->size = hdr[GO_BUCKET_SIZE / 8];
		b->nstk = nstk;
		b->nkept = keep;
		sum_record(mr, &b->c);
		sz = (__u64)keep * 8;
		barrier_var(sz);
		if (sz > sizeof(b->stk))
			sz = sizeof(b->stk);
		if (sz) {
			rc = bpf_probe_read_user(b->stk, sz, (void *)(cur + GO_BUCKET_STK));
			if (rc) {
				w->flags |= OOM_F_READ_ERROR;
				w->read_error = rc;
				return 1;
			}
		}
		emit(w, b, sizeof(*b) - sizeof(b->stk) + sz);
		w->new_buckets++;
	}
	w->cur = hdr[GO_BUCKET_ALLNEXT / 8];
	w->index++;
	return 0;
}

static __always_inline void send_state(struct oom_victim *v, __u32 type)
{
	__u32 zero = 0;
	struct scratch *s = bpf_map_lookup_elem(&scratch, &zero);

	if (!s)
		return;
	s->v.h.type = type;
	s->v.h.tgid = v->tgid;
	s->v.h.capture_id = v->capture_id;
	__builtin_memcpy(&s->v.v, v, sizeof(*v));
	if (bpf_ringbuf_output(&ring, &s->v, sizeof(s->v), 0)) {
		v->dropped++;
		v->flags |= OOM_F_RING_FULL;
		__sync_fetch_and_add(&stat_ring_drops, 1);
	}
}

static __always_inline int capture(__u32 tgid, __u32 extra_flags)
{
	struct oom_victim *v;
	struct oom_target *t;
	struct walk *w;
	struct task_struct *task;
	__u32 zero = 0;
	struct scratch *s;
	__u64 head = 0;
	__s64 rate = -1;
	long rc;

	v = bpf_map_lookup_elem(&victims, &tgid);
	if (!v)
		return 0;
	task = bpf_get_current_task_btf();
	if (v->start_boottime != BPF_CORE_READ(task, group_leader, start_boottime))
		return 0; /* not the process that was marked (pid reused) */
	if (!__sync_bool_compare_and_swap(&v->state, OOM_ST_MARKED, OOM_ST_CAPTURING))
		return 0;
	__sync_fetch_and_add(&stat_captures, 1);
	v->flags |= extra_flags;
	v->start_ns = bpf_ktime_get_ns();
	v->rate = -1;

	t = bpf_map_lookup_elem(&targets, &tgid);
	if (!t) {
		v->flags |= OOM_F_NOT_TRACKED;
		goto out;
	}
	/* /proc/PID/stat's start time is nsec_to_clock_t(start_boottime), USER_HZ 100 */
	if (t->start_ticks &&
	    t->start_ticks != BPF_CORE_READ(task, group_leader, start_boottime) / 10000000ULL) {
		v->flags |= OOM_F_PID_REUSED | OOM_F_NOT_TRACKED;
		goto out;
	}
	if (t->rate_addr && bpf_probe_read_user(&rate, sizeof(rate), (void *)t->rate_addr) == 0)
		v->rate = rate;
	rc = bpf_probe_read_user(&head, sizeof(head), (void *)t->mbuckets_addr);
	if (rc == -EFAULT && v->retries < OOM_RETRIES)
		goto retry;
	if (rc) {
		v->flags |= OOM_F_READ_ERROR;
		v->read_error = rc;
		goto out;
	}
	v->head = head;
	v->mirror_head = t->mirror_head;
	v->mirror_count = t->mirror_count;
	v->mirror_gen = t->mirror_gen;
	if (head == 0) {
		v->flags |= OOM_F_NO_BUCKETS;
		goto out;
	}
	send_state(v, OOM_REC_BEGIN);

	s = bpf_map_lookup_elem(&scratch, &zero);
	if (!s)
		goto out;
	s->c.n = 0;
	w = &s->w;
	__builtin_memset(w, 0, sizeof(*w));
	w->cur = head;
	w->max_buckets = t->max_buckets;
	if (w->max_buckets > OOM_MAX_BUCKETS)
		w->max_buckets = OOM_MAX_BUCKETS;
	w->max_depth = t->max_depth;
	w->mirror_head = t->mirror_head;
	w->mirror_count = t->mirror_count;
	w->capture_id = v->capture_id;
	w->tgid = tgid;
	bpf_loop(OOM_MAX_BUCKETS, walk_one, NULL, 0);
	if (w->index == 0 && w->read_error == -EFAULT && v->retries < OOM_RETRIES)
		goto retry; /* nothing was sent after BEGIN: start over later */
	/* bpf_loop stops after OOM_MAX_BUCKETS calls with the list unfinished */
	if (w->cur && !(w->flags & (OOM_F_READ_ERROR | OOM_F_BAD_BUCKET)))
		w->flags |= OOM_F_BUCKET_LIMIT;
	flush_chunk(w, s);
	v->flags |= w->flags;
	v->buckets = w->index;
	v->new_buckets = w->new_buckets;
	v->absent_records = w->absent;
	v->dropped += w->dropped;
	if (w->read_error)
		v->read_error = w->read_error;
out:
	v->end_ns = bpf_ktime_get_ns();
	__sync_lock_test_and_set(&v->state, OOM_ST_DONE);
	send_state(v, OOM_REC_END);
	return 0;
retry:
	v->retries++;
	__sync_lock_test_and_set(&v->state, OOM_ST_MARKED);
	return 0;
}

SEC("tp_btf/mark_victim")
int BPF_PROG(oom_mark_victim, struct task_struct *task, uid_t uid)
{
	struct oom_victim nv = {}, *v;
	struct mm_struct *mm;
	__u32 tgid = BPF_CORE_READ(task, tgid);
	__u64 start = BPF_CORE_READ(task, group_leader, start_boottime);

	__sync_fetch_and_add(&stat_marks, 1);
	v = bpf_map_lookup_elem(&victims, &tgid);
	if (v && v->state != OOM_ST_FREE && v->start_boottime == start) {
		/* a dying victim allocating again is marked again */
		__sync_fetch_and_add(&stat_dup_marks, 1);
		return 0;
	}
	/* else: first mark, or a new process that reused the pid of an
	 * earlier victim whose entry user space has not freed yet */
	nv.state = OOM_ST_MARKED;
	nv.capture_id = __sync_fetch_and_add(&capture_seq, 1) + 1;
	nv.tgid = tgid;
	nv.start_boottime = start;
	nv.tid = BPF_CORE_READ(task, pid);
	nv.uid = uid;
	nv.oom_score_adj = BPF_CORE_READ(task, signal, oom_score_adj);
	bpf_probe_read_kernel_str(nv.comm, sizeof(nv.comm), task->comm);
	mm = BPF_CORE_READ(task, mm);
	if (mm) {
		nv.total_vm_kb = BPF_CORE_READ(mm, total_vm) << 2;
		nv.file_rss_kb = (__u64)BPF_CORE_READ(mm, rss_stat[MM_FILEPAGES].count) << 2;
		nv.anon_rss_kb = (__u64)BPF_CORE_READ(mm, rss_stat[MM_ANONPAGES].count) << 2;
		nv.shmem_rss_kb = (__u64)BPF_CORE_READ(mm, rss_stat[MM_SHMEMPAGES].count) << 2;
		nv.pgtables_kb = (__u64)BPF_CORE_READ(mm, pgtables_bytes.counter) >> 10;
	}
	nv.mark_ns = bpf_ktime_get_ns();
	nv.rate = -1;
	if (bpf_map_update_elem(&victims, &tgid, &nv, BPF_ANY)) {
		nv.flags |= OOM_F_VICTIMS_FULL;
		__sync_fetch_and_add(&stat_victims_full, 1);
	}
	send_state(&nv, OOM_REC_MARK);
	return 0;
}

SEC("tp_btf/signal_deliver")
int BPF_PROG(oom_signal_deliver, int sig, struct kernel_siginfo *info, struct k_sigaction *ka)
{
	if (sig != SIGKILL)
		return 0;
	return capture(bpf_get_current_pid_tgid() >> 32, 0);
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(oom_process_exit, struct task_struct *p, bool group_dead)
{
	return capture(bpf_get_current_pid_tgid() >> 32, OOM_F_FROM_EXIT);
}
