/*
 * cpu_profile.c - one drained window -> one pprof per process (see
 * cpu_profile.h).
 */
#include "cpu_profile.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "pprof.h"
#include "procinfo.h"
#include "symbolize.h"
#include "grow.h"

#define KERNEL_START 0xffff800000000000ull
#define KERNEL_FILE "[kernel.kallsyms]"

/*
 * Sorted unique lookup addresses and their symbolizer results. A stack's
 * leaf is looked up as sampled; every other frame is a return address and
 * is looked up (and recorded in the profile) as addr - 1, so it names the
 * call, not the line after it.
 */
struct addr_set {
	uint64_t *a;
	size_t n, cap;
	uint64_t *loc; /* pprof location per address, 0 = not yet */
	struct sym_batch b;
	bool resolved;
};

struct proc_ctx {
	struct pprof *p;
	struct proc_maps maps;
	bool have_maps;
	uint64_t kernel_map;
	struct cpu_profile_stats *st;
	struct addr_set *user, *kern; /* NULL sets: unsymbolized */
};

static inline uint64_t lookup_addr(const uint64_t *ips, uint32_t i)
{
	return i == 0 || ips[i] == 0 ? ips[i] : ips[i] - 1;
}

static int addr_set_add(struct addr_set *s, uint64_t a)
{
	if (pp_grow(&s->a, &s->cap, s->n + 1, sizeof(*s->a), 256))
		return -ENOMEM;
	s->a[s->n++] = a;
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

static int addr_set_finish(struct addr_set *s)
{
	if (s->n) {
		qsort(s->a, s->n, sizeof(*s->a), cmp_u64);
		size_t k = 1;
		for (size_t i = 1; i < s->n; i++)
			if (s->a[i] != s->a[k - 1])
				s->a[k++] = s->a[i];
		s->n = k;
	}
	s->loc = calloc(s->n ? s->n : 1, sizeof(*s->loc));
	return s->loc ? 0 : -ENOMEM;
}

static long addr_set_find(const struct addr_set *s, uint64_t a)
{
	size_t lo = 0, hi = s->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (s->a[mid] == a)
			return (long)mid;
		if (s->a[mid] < a)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}

static void addr_set_reset_locs(struct addr_set *s)
{
	if (s->loc)
		memset(s->loc, 0, (s->n ? s->n : 1) * sizeof(*s->loc));
}

static void addr_set_free(struct addr_set *s)
{
	free(s->a);
	free(s->loc);
	sym_batch_free(&s->b);
	memset(s, 0, sizeof(*s));
}

/* Add the lookup addresses of every stack of kind (user/kernel) in recs. */
static int collect(const struct cpu_window *w, struct cpu_record *const *recs, size_t n,
		   bool kernel, struct addr_set *s)
{
	for (size_t i = 0; i < n; i++) {
		uint32_t len;
		const uint64_t *ips = cpu_window_stack(
			w, kernel ? recs[i]->key.kernel_stack : recs[i]->key.user_stack, &len);
		for (uint32_t j = 0; ips && j < len; j++)
			if (addr_set_add(s, lookup_addr(ips, j)) < 0)
				return -ENOMEM;
	}
	return addr_set_finish(s);
}

/* A location for a resolved address: its mapping, and its frames as lines. */
static uint64_t sym_loc(struct proc_ctx *c, struct addr_set *s, long idx, bool kernel)
{
	if (s->loc[idx])
		return s->loc[idx];
	const struct sym_result *r = &s->b.r[idx];
	uint64_t mid = 0;
	if (r->mapping >= 0 && (size_t)r->mapping < s->b.nmappings) {
		const struct sym_mapping *m = &s->b.mappings[r->mapping];
		mid = pprof_mapping(c->p, m->start, m->limit, m->offset, m->path, m->build_id,
				    m->has_functions, m->has_line_numbers);
		if (!mid)
			return 0;
	} else if (kernel) {
		if (!c->kernel_map)
			c->kernel_map = pprof_mapping(c->p, KERNEL_START, UINT64_MAX, 0,
						      KERNEL_FILE, "", false, false);
		mid = c->kernel_map;
	}
	struct pprof_line lines[64];
	size_t nl = 0;
	/* a Go wrapper's own frame is left out, what it inlined kept */
	uint32_t nf = r->go_elide && r->nframes > 1 ? r->nframes - 1 : r->nframes;
	for (uint32_t i = 0; i < nf && nl < sizeof(lines) / sizeof(lines[0]); i++) {
		const struct sym_frame *f = &r->frames[i];
		uint64_t fid = pprof_function(c->p, f->func, f->func, f->file ? f->file : "", 0);
		if (!fid)
			return 0;
		lines[nl].function_id = fid;
		lines[nl].line = f->line;
		nl++;
	}
	c->st->frames++;
	if (nl)
		c->st->frames_named++;
	s->loc[idx] = pprof_location(c->p, mid, s->a[idx], lines, nl);
	return s->loc[idx];
}

/* Each file mapping with a GNU build id that left an address unnamed, once. */
static void report_unresolved(pid_t pid, const struct sym_batch *b,
			      const struct cpu_profile_opts *o)
{
	bool seen[64] = { false };

	for (size_t i = 0; i < b->n; i++) {
		const struct sym_result *r = &b->r[i];
		if (r->nframes || r->mapping < 0 || (size_t)r->mapping >= b->nmappings)
			continue;
		const struct sym_mapping *m = &b->mappings[r->mapping];
		if (m->build_id_kind != SYM_BUILD_ID_GNU || !m->build_id || !m->build_id[0] ||
		    !m->path || m->path[0] != '/')
			continue;
		/* small bitmap for the common case; the callback dedups anyway */
		if ((size_t)r->mapping < 64) {
			if (seen[r->mapping])
				continue;
			seen[r->mapping] = true;
		}
		o->unresolved(pid, m, o->unresolved_arg);
	}
}

static int cmp_rec_tgid(const void *a, const void *b)
{
	const struct cpu_record *x = *(const struct cpu_record *const *)a;
	const struct cpu_record *y = *(const struct cpu_record *const *)b;
	if (x->key.tgid != y->key.tgid)
		return x->key.tgid < y->key.tgid ? -1 : 1;
	return 0;
}

static const char *lost_name(uint64_t id)
{
	switch (id) {
	case CPU_STACK_ERR:
		return "[lost stack: unwind error]";
	case CPU_STACK_MAP_FULL:
		return "[lost stack: stack map full]";
	case CPU_STACK_COLLISION:
		return "[lost stack: hash collisions]";
	case CPU_STACK_EVICTED:
		return "[lost stack: evicted]";
	default:
		return "[lost stack: not in window]";
	}
}

static uint64_t pseudo_loc(struct pprof *p, const char *name)
{
	uint64_t f = pprof_function(p, name, name, "", 0);
	if (!f)
		return 0;
	struct pprof_line l = { .function_id = f, .line = 0 };
	return pprof_location(p, 0, 0, &l, 1);
}

static uint64_t user_loc(struct proc_ctx *c, uint64_t addr)
{
	long idx = c->user && c->user->resolved ? addr_set_find(c->user, addr) : -1;
	if (idx >= 0)
		return sym_loc(c, c->user, idx, false);
	uint64_t mid = 0;
	const struct proc_map *m = c->have_maps ? proc_maps_find(&c->maps, addr) : NULL;
	if (m)
		mid = pprof_mapping(c->p, m->start, m->end, m->offset, m->path ? m->path : "", "",
				    false, false);
	c->st->frames++;
	return pprof_location(c->p, mid, addr, NULL, 0);
}

/* addr resolved to a Go wrapper (or goexit) and nothing inlined into it:
 * left out of the stack, as Go's own profiles do (sym_result.go_elide). */
static bool user_elided(struct proc_ctx *c, uint64_t addr)
{
	long idx = c->user && c->user->resolved ? addr_set_find(c->user, addr) : -1;
	const struct sym_result *r = idx >= 0 ? &c->user->b.r[idx] : NULL;
	return r && r->go_elide && r->nframes == 1;
}

static uint64_t kernel_loc(struct proc_ctx *c, uint64_t addr)
{
	long idx = c->kern && c->kern->resolved ? addr_set_find(c->kern, addr) : -1;
	if (idx >= 0)
		return sym_loc(c, c->kern, idx, true);
	if (!c->kernel_map)
		c->kernel_map = pprof_mapping(c->p, KERNEL_START, UINT64_MAX, 0, KERNEL_FILE, "",
					      false, false);
	c->st->frames++;
	return pprof_location(c->p, c->kernel_map, addr, NULL, 0);
}

#define JUNK_NAME "[truncated: junk return address]"

/* Whether a user lookup address lies in an executable mapping of the
 * process: 1 yes, 0 no, -1 unknown (no maps at all). Judged on the maps the
 * symbolizer used (re-read once when an address missed them), else on the
 * maps read for this profile. */
static int user_exec(const struct proc_ctx *c, uint64_t addr)
{
	long idx = c->user && c->user->resolved ? addr_set_find(c->user, addr) : -1;
	if (idx >= 0) {
		const struct sym_result *r = &c->user->b.r[idx];
		if (r->mapping < 0 || (size_t)r->mapping >= c->user->b.nmappings)
			return 0;
		return c->user->b.mappings[r->mapping].executable;
	}
	if (!c->have_maps)
		return -1;
	const struct proc_map *m = proc_maps_find(&c->maps, addr);
	return m && m->perms[2] == 'x';
}

/* Append the locations of one stack (leaf first) to locs. *cut (user
 * stacks) tells whether it was cut at a junk return address. */
static int add_stack(struct proc_ctx *c, const struct cpu_window *w, uint64_t id, bool kernel,
		     uint64_t *locs, size_t *n, size_t cap, bool *cut)
{
	if (id == CPU_STACK_NONE)
		return 0;
	uint32_t len;
	const uint64_t *ips = cpu_window_stack(w, id, &len);
	if (!ips) {
		uint64_t l = pseudo_loc(c->p, lost_name(id));
		if (!l)
			return -ENOMEM;
		if (*n < cap)
			locs[(*n)++] = l;
		return 0;
	}
	for (uint32_t i = 0; i < len && *n < cap; i++) {
		uint64_t a = lookup_addr(ips, i);
		if (!kernel && i > 0 && user_exec(c, a) == 0) {
			uint64_t l = pseudo_loc(c->p, JUNK_NAME);
			if (!l)
				return -ENOMEM;
			locs[(*n)++] = l;
			*cut = true;
			break;
		}
		if (!kernel && user_elided(c, a))
			continue; /* a Go wrapper: not in Go's stacks either */
		uint64_t l = kernel ? kernel_loc(c, a) : user_loc(c, a);
		if (!l)
			return -ENOMEM;
		locs[(*n)++] = l;
	}
	return 0;
}

static int set_series_labels(struct pp_labels *l, const struct cpu_profile_opts *o, pid_t pid,
			     const struct target_proc *tp, uint64_t live_start,
			     const char *thread_comm)
{
	char buf[32];
	int r = 0;
	if (o->external_labels)
		r |= pp_labels_copy(l, o->external_labels);
	r |= pp_labels_set(l, "__name__", o->pyroscope ? "process_cpu" : "parca_agent");
	if (o->node && *o->node)
		r |= pp_labels_set(l, "node", o->node);
	snprintf(buf, sizeof(buf), "%d", (int)pid);
	r |= pp_labels_set(l, "pid", buf);
	const char *comm = tp && tp->comm[0] ? tp->comm : thread_comm;
	if (comm && *comm)
		r |= pp_labels_set(l, "comm", comm);
	if (tp && tp->exe && *tp->exe)
		r |= pp_labels_set(l, "executable", tp->exe);
	if (tp && tp->cgroup && *tp->cgroup)
		r |= pp_labels_set(l, "cgroup", tp->cgroup);
	/* Parca Agent's executable labels, for relabel_configs only (every
	 * __meta_* label is gone after relabelling) */
	struct sym_exe x;
	if (o->sym && tp && tp->exe && sym_exe_info(o->sym, pid, live_start, tp->exe, &x) == 0) {
		if (x.build_id[0])
			r |= pp_labels_set(l, "__meta_process_executable_build_id", x.build_id);
		if (x.compiler[0])
			r |= pp_labels_set(l, "__meta_process_executable_compiler", x.compiler);
		r |= pp_labels_set(l, "__meta_process_executable_static",
				   x.is_static ? "true" : "false");
		r |= pp_labels_set(l, "__meta_process_executable_stripped",
				   x.stripped ? "true" : "false");
	}
	pp_labels_sort(l);
	return r ? -ENOMEM : 0;
}

static int build_one(const struct cpu_window *w, struct cpu_record *const *recs, size_t n,
		     struct targets *t, const struct cpu_profile_opts *o, struct addr_set *kern,
		     const struct pp_reporter *rep, struct cpu_profile_stats *st,
		     struct pp_err *err)
{
	pid_t pid = (pid_t)recs[0]->key.tgid;
	struct proc_ctx c = { .st = st, .kern = kern };
	struct addr_set user;
	struct pp_labels labels = { 0 };
	uint8_t *gz = NULL;
	size_t gzlen = 0;
	uint64_t locs[2 * CPU_MAX_DEPTH + 2];
	uint64_t samples = 0;
	int r;

	const struct target_proc *tp = targets_refresh(t, pid, o->facts_since_ns);
	/* targets_refresh() has read the start time of a live process during
	 * this window: the symbolizer need not read it again (a process that
	 * exited since fails its maps read, which keeps the maps it had) */
	uint64_t live_start = tp && !tp->gone ? tp->start_time : 0;
	memset(&user, 0, sizeof(user));
	sym_batch_init(&user.b);
	if (kern)
		addr_set_reset_locs(kern);
	if (o->sym) {
		r = collect(w, recs, n, false, &user);
		if (r < 0) {
			r = pp_errf(err, r, "out of memory");
			goto out;
		}
		user.resolved = user.n &&
				sym_resolve_user(o->sym, pid, live_start, user.a, user.n, &user.b,
						 NULL) == 0 &&
				user.b.n == user.n;
		c.user = &user;
		if (user.resolved && o->unresolved)
			report_unresolved(pid, &user.b, o);
	}
	if (!user.resolved)
		c.have_maps = proc_maps_read(pid, &c.maps, NULL) == 0;

	r = pprof_new(&c.p, err);
	if (r)
		goto out;
	int64_t period = (int64_t)(1000000000ull / (o->frequency_hz ? o->frequency_hz : 1));
	r = o->pyroscope ? pprof_add_sample_type(c.p, "cpu", "nanoseconds")
			 : pprof_add_sample_type(c.p, "samples", "count");
	if (!r)
		r = pprof_set_period(c.p, "cpu", "nanoseconds", period);
	if (r) {
		r = pp_errf(err, -ENOMEM, "out of memory");
		goto out;
	}
	pprof_set_time(c.p, o->time_nanos, o->duration_nanos);

	for (size_t i = 0; i < n; i++) {
		const struct cpu_record *rec = recs[i];
		size_t nl = 0;
		bool cut = false;
		r = add_stack(&c, w, rec->key.kernel_stack, true, locs, &nl, sizeof(locs) / 8 - 1,
			      &cut);
		if (!r)
			r = add_stack(&c, w, rec->key.user_stack, false, locs, &nl,
				      sizeof(locs) / 8 - 1, &cut);
		if (cut)
			st->junk_cut += rec->count;
		if (!r && nl == 0) {
			uint64_t l = pseudo_loc(c.p, "[no stack]");
			r = l ? 0 : -ENOMEM;
			locs[nl++] = l;
		}
		if (r) {
			r = pp_errf(err, -ENOMEM, "out of memory building a CPU profile");
			goto out;
		}
		char tid[16], cpu[16];
		struct pprof_label pl[3];
		size_t npl = 0;
		if (o->thread_labels) {
			snprintf(tid, sizeof(tid), "%u", rec->key.pid);
			pl[npl++] = (struct pprof_label){ .key = "thread_id", .str = tid };
			pl[npl++] =
				(struct pprof_label){ .key = "thread_name", .str = rec->key.comm };
		}
		if (o->cpu_label) {
			snprintf(cpu, sizeof(cpu), "%u", rec->key.cpu);
			pl[npl++] = (struct pprof_label){ .key = "cpu", .str = cpu };
		}
		int64_t v = (int64_t)rec->count * (o->pyroscope ? period : 1);
		if (pprof_add_sample(c.p, locs, nl, &v, pl, npl) < 0) {
			r = pp_errf(err, -ENOMEM, "out of memory adding a sample");
			goto out;
		}
		samples += rec->count;
	}

	if (set_series_labels(&labels, o, pid, tp, live_start, recs[0]->key.comm) < 0) {
		r = pp_errf(err, -ENOMEM, "out of memory");
		goto out;
	}
	r = pprof_encode(c.p, true, &gz, &gzlen, err);
	if (r < 0)
		goto out;
	st->profiles++;
	st->samples += samples;
	st->bytes += gzlen;
	struct pp_err rerr = { 0 };
	if (rep->fn(rep->arg, &labels, gz, gzlen, false, &rerr) < 0)
		pp_log(PP_WARN, "cannot hand over a CPU profile", "pid=%d error=%s", (int)pid,
		       pp_q(rerr.msg));
	r = 0;
out:
	free(gz);
	pp_labels_free(&labels);
	pprof_free(c.p);
	if (c.have_maps)
		proc_maps_free(&c.maps);
	addr_set_free(&user);
	return r;
}

int cpu_profiles_build(const struct cpu_window *w, struct targets *t,
		       const struct cpu_profile_opts *o, const struct pp_reporter *rep,
		       struct cpu_profile_stats *st, struct pp_err *err)
{
	memset(st, 0, sizeof(*st));
	if (w->nrecs == 0)
		return 0;
	struct cpu_record **order = malloc(w->nrecs * sizeof(*order));
	if (!order)
		return pp_errf(err, -ENOMEM, "out of memory");
	for (size_t i = 0; i < w->nrecs; i++)
		order[i] = &w->recs[i];
	qsort(order, w->nrecs, sizeof(*order), cmp_rec_tgid);

	/* Kernel addresses: resolved once for the whole window. */
	struct addr_set kern;
	memset(&kern, 0, sizeof(kern));
	sym_batch_init(&kern.b);
	int r = 0;
	if (o->sym) {
		r = collect(w, order, w->nrecs, true, &kern);
		if (r < 0) {
			r = pp_errf(err, r, "out of memory");
			goto out;
		}
		kern.resolved = kern.n &&
				sym_resolve_kernel(o->sym, kern.a, kern.n, &kern.b, NULL) == 0 &&
				kern.b.n == kern.n;
	}
	for (size_t i = 0; i < w->nrecs && r >= 0;) {
		size_t j = i + 1;
		while (j < w->nrecs && order[j]->key.tgid == order[i]->key.tgid)
			j++;
		r = build_one(w, order + i, j - i, t, o, o->sym ? &kern : NULL, rep, st, err);
		i = j;
		if (o->between && i < w->nrecs)
			o->between(o->between_arg);
	}
out:
	addr_set_free(&kern);
	free(order);
	return r;
}
