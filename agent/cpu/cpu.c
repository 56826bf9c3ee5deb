/*
 * cpu.c - load and attach the on-CPU sampler, its tgid filter and leaf-table
 * pools (see cpu.h); the window drain and stack copies are cpu_drain.c.
 */
#include "cpu.h"
#include "cpu_internal.h"
#include "fileutil.h"
#include "maprec.h"
#include "procinfo.h"
#include "u64map.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "bpf/cpu.skel.h"

#define MAX_CPUS 4096
void cpu_sampler_capacity(const struct cpu_sampler *s, uint32_t *counts, uint32_t *stacks)
{
	*counts = s->ncounts;
	*stacks = s->nstacks;
}

int cpu_check_depth(uint32_t depth, struct pp_err *err)
{
	if (depth < 1 || depth > CPU_MAX_DEPTH)
		return pp_errf(err, -EINVAL, "cpu.max_stack_depth %u out of range 1..%d", depth,
			       CPU_MAX_DEPTH);
	uint32_t k = proc_perf_max_stack();
	if (k && depth > k)
		return pp_errf(err, -EINVAL,
			       "cpu.max_stack_depth %u exceeds the kernel's limit "
			       "(/proc/sys/kernel/perf_event_max_stack = %u)",
			       depth, k);
	return 0;
}

/* Parse a cpulist ("0-3,5,7-8") into a bitmap of n bits. */
static int parse_cpulist(const char *s, unsigned char *bits, int n)
{
	memset(bits, 0, (size_t)(n + 7) / 8);
	while (*s && *s != '\n') {
		char *end;
		long a = strtol(s, &end, 10), b;
		if (end == s || a < 0)
			return -EINVAL;
		b = a;
		s = end;
		if (*s == '-') {
			s++;
			b = strtol(s, &end, 10);
			if (end == s || b < a)
				return -EINVAL;
			s = end;
		}
		for (long c = a; c <= b && c < n; c++)
			bits[c / 8] |= (unsigned char)(1u << (c % 8));
		if (*s == ',')
			s++;
		else if (*s && *s != '\n')
			return -EINVAL;
	}
	return 0;
}

static int open_perf_event(int cpu, uint32_t hz)
{
	struct perf_event_attr attr;
	memset(&attr, 0, sizeof(attr));
	attr.size = sizeof(attr);
	attr.type = PERF_TYPE_SOFTWARE;
	attr.config = PERF_COUNT_SW_CPU_CLOCK;
	attr.freq = 1;
	attr.sample_freq = hz;
	maprec_attr(&attr); /* the kernel's mmap records come with the samples' event */
	long fd = syscall(SYS_perf_event_open, &attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);
	return fd < 0 ? -errno : (int)fd;
}

int cpu_sampler_sync_cpus(struct cpu_sampler *s, bool *changed, struct pp_err *err)
{
	char buf[4096];
	int r = (int)pp_read_kernel_file("/sys/devices/system/cpu/online", buf, sizeof(buf));
	if (changed)
		*changed = false;
	if (r < 0)
		return pp_errf(err, r, "reading /sys/devices/system/cpu/online: %s", strerror(-r));
	return cpu_sampler_set_cpus(s, buf, changed, err);
}

int cpu_sampler_set_cpus(struct cpu_sampler *s, const char *cpulist, bool *changed,
			 struct pp_err *err)
{
	unsigned char online[MAX_CPUS / 8];
	if (changed)
		*changed = false;
	if (parse_cpulist(cpulist, online, s->ncpu_slots) < 0)
		return pp_errf(err, -EINVAL, "unparsable online CPU list: %.64s", cpulist);

	for (int c = 0; c < s->ncpu_slots; c++) {
		bool on = online[c / 8] & (1u << (c % 8));
		if (on && !s->links[c]) {
			int fd = open_perf_event(c, s->frequency_hz);
			if (fd == -ENODEV || fd == -ENOENT)
				continue; /* went offline meanwhile */
			if (fd < 0)
				return pp_errf(err, fd, "perf_event_open(cpu-clock, cpu %d): %s", c,
					       strerror(-fd));
			struct bpf_link *l =
				bpf_program__attach_perf_event(s->skel->progs.pp_cpu_sample, fd);
			if (!l) {
				int e = -errno;
				close(fd);
				return pp_errf(err, e, "attaching BPF to cpu %d: %s", c,
					       strerror(-e));
			}
			s->links[c] = l;
			s->nattached++;
			/* its mapping records: without them (over perf_event_mlock_kb)
			 * the /proc reads alone find libraries, as before */
			int mr = maprec_map(fd, &s->rings[c]);
			if (mr < 0)
				s->maprec_errors++;
			if (changed)
				*changed = true;
		} else if (!on && s->links[c]) {
			maprec_unmap(s->rings[c]);
			s->rings[c] = NULL;
			bpf_link__destroy(s->links[c]); /* closes the perf event too */
			s->links[c] = NULL;
			s->nattached--;
			if (changed)
				*changed = true;
		}
	}
	if (s->nattached == 0)
		return pp_errf(err, -ENODEV, "no online CPU could be sampled");
	return 0;
}

int cpu_sampler_drain_maps(struct cpu_sampler *s, maprec_fn fn, void *arg)
{
	int n = 0;
	for (int c = 0; c < s->ncpu_slots; c++)
		if (s->rings[c]) /* bounded: a ring holds ~200 records */
			n += maprec_drain(s->rings[c], 4096, fn, arg, &s->maprec_lost);
	s->maprec_records += (uint64_t)n;
	return n;
}

void cpu_sampler_maprec_stats(const struct cpu_sampler *s, uint64_t *records, uint64_t *lost,
			      uint64_t *errors)
{
	*records = s->maprec_records;
	*lost = s->maprec_lost;
	*errors = s->maprec_errors;
}

unsigned cpu_sampler_ncpus(const struct cpu_sampler *s)
{
	return s->nattached;
}

static uint32_t clamp_entries(uint64_t want, uint32_t lo, uint32_t hi)
{
	return want < lo ? lo : want > hi ? hi : (uint32_t)want;
}

int cpu_sampler_new(const struct cpu_sampler_opts *o, struct cpu_sampler **out, struct pp_err *err)
{
	int r;
	*out = NULL;
	if (o->frequency_hz < CPU_HZ_MIN || o->frequency_hz > CPU_HZ_MAX)
		return pp_errf(err, -EINVAL, "cpu.frequency_hz %u out of range %d..%d",
			       o->frequency_hz, CPU_HZ_MIN, CPU_HZ_MAX);
	r = cpu_check_depth(o->max_depth, err);
	if (r < 0)
		return r;

	struct cpu_sampler *s = calloc(1, sizeof(*s));
	if (!s)
		return pp_errf(err, -ENOMEM, "out of memory");
	s->frequency_hz = o->frequency_hz;
	s->filter = o->filter;
	s->possible = libbpf_num_possible_cpus();
	if (s->possible <= 0 || s->possible > MAX_CPUS) {
		r = pp_errf(err, -EINVAL, "cannot tell the number of possible CPUs");
		goto fail;
	}
	s->ncpu_slots = s->possible;
	s->links = calloc((size_t)s->ncpu_slots, sizeof(*s->links));
	s->rings = calloc((size_t)s->ncpu_slots, sizeof(*s->rings));
	if (!s->links || !s->rings) {
		r = pp_errf(err, -ENOMEM, "out of memory");
		goto fail;
	}

	s->skel = cpu_bpf__open();
	if (!s->skel) {
		r = -errno;
		r = pp_errf(err, r ? r : -EINVAL, "opening the BPF object: %s", strerror(-r));
		goto fail;
	}
	s->skel->rodata->max_depth = o->max_depth;
	s->skel->rodata->kernel_stacks = o->kernel_stacks;
	s->skel->rodata->cpu_label = o->cpu_label;
	s->skel->rodata->filter_tgids = o->filter;
	s->skel->bss->fl_gen = 1; /* cached answers are zeroed: generation 0 */

	/*
	 * Maps are preallocated: allocating in the perf event's interrupt
	 * context can fail when the allocator's per-CPU cache runs dry. Counts:
	 * room for two windows of samples on every CPU, per map; stacks (264
	 * bytes, or 1 KiB for the few of more than CPU_SMALL_DEPTH frames) are
	 * fewer than samples in practice: room for four windows of samples,
	 * capped at 128k per map. What does not fit is counted (CPU_STAT_*),
	 * never dropped silently.
	 */
	uint64_t secs = (o->interval_ns + 999999999ull) / 1000000000ull;
	if (secs == 0)
		secs = 1;
	uint64_t per_window = (uint64_t)o->frequency_hz * (uint64_t)s->possible * secs;
	uint32_t ncounts = clamp_entries(2 * per_window, 2048, 1u << 18);
	/* the stack maps persist across windows (no second set): the memory
	 * of two sets in one map of each size, room for the stacks kept
	 * (evict() deletes down to half a map) and a window's new ones */
	uint32_t nstacks = clamp_entries(4 * per_window, 4096, 1u << 17);
	struct bpf_map *m[] = { s->skel->maps.counts0, s->skel->maps.counts1 };
	for (int i = 0; i < 2; i++)
		bpf_map__set_max_entries(m[i], ncounts);
	bpf_map__set_max_entries(s->skel->maps.stacks, nstacks);
	bpf_map__set_max_entries(s->skel->maps.sstacks, nstacks);
	s->ncounts = ncounts;
	s->nstacks = nstacks;
	s->evict_all = o->stack_evict_all;
	s->keep = o->stack_keep && o->stack_keep < STACK_KEEP_MAX ? o->stack_keep : STACK_KEEP_MAX;
	if (u64map_init(&s->idx, 1024) < 0) {
		r = pp_errf(err, -ENOMEM, "out of memory");
		goto fail;
	}
	/* filtering keeps frameless ranges in allowed_tgids: fl_procs unused */
	if (o->filter)
		bpf_map__set_max_entries(s->skel->maps.fl_procs, 1);

	r = cpu_bpf__load(s->skel);
	if (r) {
		r = r < 0 ? r : -EINVAL;
		r = pp_errf(err, r,
			    "loading the BPF sampler: %s (needs root/CAP_BPF+CAP_PERFMON "
			    "and a kernel with BTF)",
			    strerror(-r));
		goto fail;
	}
	for (int i = 0; i < 2; i++)
		s->counts_fd[i] = bpf_map__fd(m[i]);
	s->stacks_fd = bpf_map__fd(s->skel->maps.stacks);
	s->sstacks_fd = bpf_map__fd(s->skel->maps.sstacks);
	r = cpu_sampler_sync_cpus(s, NULL, err);
	if (r < 0)
		goto fail;
	*out = s;
	return 0;
fail:
	cpu_sampler_free(s);
	return r;
}

void cpu_sampler_free(struct cpu_sampler *s)
{
	if (!s)
		return;
	if (s->links) {
		for (int c = 0; c < s->ncpu_slots; c++) {
			if (s->rings)
				maprec_unmap(s->rings[c]);
			if (s->links[c])
				bpf_link__destroy(s->links[c]);
		}
		free(s->links);
	}
	free(s->rings);
	cpu_bpf__destroy(s->skel);
	for (size_t i = 0; i < s->ncopies; i++)
		free(s->copies[i].ips);
	free(s->copies);
	u64map_free(&s->idx);
	free(s);
}

int cpu_sampler_allow(struct cpu_sampler *s, pid_t tgid, bool allow)
{
	__u32 k = (__u32)tgid;
	struct cpu_fl_proc v = { 0 };
	int fd = bpf_map__fd(s->skel->maps.allowed_tgids);
	/* an allowed tgid keeps its frameless range (cpu_sampler_fl_set) */
	if (allow)
		return bpf_map_update_elem(fd, &k, &v, BPF_NOEXIST) && errno != EEXIST ? -errno : 0;
	if (bpf_map_delete_elem(fd, &k) && errno != ENOENT)
		return -errno;
	return 0;
}

/* n u64 values into an ARRAY map of limit entries from index at. */
static int pool_write(int fd, uint32_t limit, uint32_t at, const uint64_t *vals, uint32_t n)
{
	if (at > limit || n > limit - at)
		return -ERANGE;
	/* one syscall per 4096 values (a 30 MB text is ~15k bitmap words) */
	while (n) {
		__u32 keys[4096], cnt = n < 4096 ? n : 4096;
		for (__u32 i = 0; i < cnt; i++)
			keys[i] = at + i;
		DECLARE_LIBBPF_OPTS(bpf_map_batch_opts, opts);
		if (bpf_map_update_batch(fd, keys, vals, &cnt, &opts)) {
			/* no batch ops: one value at a time */
			if (errno != EINVAL && errno != EOPNOTSUPP && errno != 524 /* ENOTSUPP */)
				return -errno;
			cnt = n < 4096 ? n : 4096;
			for (__u32 i = 0; i < cnt; i++)
				if (bpf_map_update_elem(fd, &keys[i], &vals[i], BPF_ANY))
					return -errno;
		}
		at += cnt;
		vals += cnt;
		n -= cnt;
	}
	return 0;
}

/* After any change to the leaf tables: BPF's per-CPU cached answers of
 * an older generation are not used (bpf/cpu_abi.h, "Per-CPU cache"). */
static int fl_bump(struct cpu_sampler *s, int rc)
{
	__atomic_add_fetch(&s->skel->bss->fl_gen, 1, __ATOMIC_SEQ_CST);
	return rc;
}

int cpu_sampler_fl_write(struct cpu_sampler *s, uint32_t word, const uint64_t *bits, uint32_t n)
{
	return fl_bump(s, pool_write(bpf_map__fd(s->skel->maps.fl_bits), CPU_FL_POOL_WORDS, word,
				     bits, n));
}

int cpu_sampler_cfa_write(struct cpu_sampler *s, uint32_t at, const uint64_t *ent, uint32_t n)
{
	return fl_bump(s, pool_write(bpf_map__fd(s->skel->maps.fl_cfa), CPU_CFA_POOL, at, ent, n));
}

/* Filtering: the range rides in the tgid's allowed_tgids entry (only an
 * existing one: setting it never allows a tgid); whole host: fl_procs. */
static int fl_set(struct cpu_sampler *s, pid_t tgid, const struct cpu_fl_proc *p)
{
	__u32 k = (__u32)tgid;
	if (s->filter) {
		if (bpf_map_update_elem(bpf_map__fd(s->skel->maps.allowed_tgids), &k, p, BPF_EXIST))
			return errno == ENOENT ? -ENOENT : -errno;
		return 0;
	}
	if (bpf_map_update_elem(bpf_map__fd(s->skel->maps.fl_procs), &k, p, BPF_ANY))
		return errno == E2BIG || errno == ENOMEM ? -E2BIG : -errno;
	return 0;
}

static int fl_del(struct cpu_sampler *s, pid_t tgid)
{
	__u32 k = (__u32)tgid;
	if (s->filter) {
		struct cpu_fl_proc none = { 0 };
		if (bpf_map_update_elem(bpf_map__fd(s->skel->maps.allowed_tgids), &k, &none,
					BPF_EXIST) &&
		    errno != ENOENT)
			return -errno;
		return 0;
	}
	if (bpf_map_delete_elem(bpf_map__fd(s->skel->maps.fl_procs), &k) && errno != ENOENT)
		return -errno;
	return 0;
}

int cpu_sampler_fl_set(struct cpu_sampler *s, pid_t tgid, const struct cpu_fl_proc *p)
{
	return fl_bump(s, fl_set(s, tgid, p));
}

int cpu_sampler_fl_del(struct cpu_sampler *s, pid_t tgid)
{
	return fl_bump(s, fl_del(s, tgid));
}

int cpu_sampler_prog_id(const struct cpu_sampler *s)
{
	struct bpf_prog_info info;
	__u32 len = sizeof(info);
	memset(&info, 0, sizeof(info));
	if (bpf_obj_get_info_by_fd(bpf_program__fd(s->skel->progs.pp_cpu_sample), &info, &len))
		return -errno;
	return (int)info.id;
}
