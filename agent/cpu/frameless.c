/*
 * frameless.c - the leaf tables of sampled processes, for the BPF walk
 * (see frameless.h and bpf/cpu_abi.h).
 */
#include "frameless.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "cpu.h"
#include "ehframe.h"
#include "elffile.h"
#include "elfshare.h"
#include "elfsym.h"
#include "gopclntab.h"
#include "log.h"
#include "metrics.h"
#include "procinfo.h"
#include "ppclock.h"
#include "grow.h"
#include "frameless_internal.h"

/* Executables remembered, with or without a table (negative results save
 * re-reading a non-Go binary for each of its processes). */
#define FL_MAX_BINS 512
/* Processes remembered (with or without a table): the tgid filter's size. */
#define FL_MAX_PIDS 65536
/* An executable larger than this is not analysed (as the symbolizer). */
#define FL_MAX_FILE (4ull << 30)

struct fl_pid {
	pid_t pid;
	int bin;	/* index in bins */
	bool installed; /* its range is in BPF (cpu_sampler_fl_set) */
};

struct frameless {
	struct cpu_sampler *cpu;
	struct fl_bin bins[FL_MAX_BINS];
	size_t nbins;
	struct fl_pid *pids;
	size_t npids, cap_pids;
	size_t installed;
	uint64_t tick;
	bool warned;   /* BPF refused a range once */
	bool c_tables; /* analyse non-Go executables' .eh_frame */
};

static void skipped(const char *cause)
{
	char l[64];
	snprintf(l, sizeof(l), "cause=\"%s\"", cause);
	metric_inc("pushprof_cpu_frameless_skipped_total",
		   "Processes or executables left without a frameless-code table, by cause "
		   "(their stacks keep plain frame-pointer walks).",
		   l, 1);
}

int frameless_new(const struct frameless_opts *o, struct frameless **out, struct pp_err *err)
{
	*out = NULL;
	if (!o || !o->cpu)
		return pp_errf(err, -EINVAL, "frameless: no CPU sampler given");
	struct frameless *f = calloc(1, sizeof(*f));
	if (!f)
		return pp_errf(err, -ENOMEM, "frameless: out of memory");
	f->cpu = o->cpu;
	f->c_tables = !o->go_only;
	*out = f;
	return 0;
}

void frameless_free(struct frameless *f)
{
	if (!f)
		return;
	for (size_t i = 0; i < f->npids; i++)
		if (f->pids[i].installed)
			cpu_sampler_fl_del(f->cpu, f->pids[i].pid);
	for (size_t i = 0; i < f->nbins; i++)
		elfsym_free(f->bins[i].e);
	free(f->pids);
	free(f);
}

void frameless_counts(const struct frameless *f, size_t *procs, size_t *bins, size_t *words)
{
	size_t b = 0, w = 0;
	for (size_t i = 0; i < f->nbins; i++)
		if (f->bins[i].have) {
			b++;
			w += f->bins[i].nwords;
		}
	*procs = f->installed;
	*bins = b;
	*words = w;
}

/* ---- pool -------------------------------------------------------------- */

/* First fit of n in a pool of limit slots, among the bins' words (tab
 * false) or table entries (tab true); UINT32_MAX when nothing fits. */
static uint32_t pool_find(const struct frameless *f, uint32_t n, bool tab, uint32_t limit)
{
	uint32_t at = 0;
	for (;;) {
		bool moved = false;
		if (n > limit || at > limit - n)
			return UINT32_MAX;
		for (size_t i = 0; i < f->nbins; i++) {
			const struct fl_bin *b = &f->bins[i];
			uint32_t bat = tab ? b->tab : b->word, bn = tab ? b->ntab : b->nwords;
			if (b->have && bn && bat < at + n && at < bat + bn) {
				at = bat + bn;
				moved = true;
			}
		}
		if (!moved)
			return at;
	}
}

/* Least recently used bin no process names (with a table: only those), or -1. */
static int lru_idle(const struct frameless *f, bool with_table)
{
	int best = -1;
	for (size_t i = 0; i < f->nbins; i++) {
		const struct fl_bin *b = &f->bins[i];
		if (b->refs || (with_table && !b->have))
			continue;
		if (best < 0 || b->used < f->bins[best].used)
			best = (int)i;
	}
	return best;
}

static void bin_drop(struct frameless *f, int i)
{
	/* entries of pids point at bins by index: move the last one here */
	size_t last = f->nbins - 1;
	elfsym_free(f->bins[i].e);
	if ((size_t)i != last) {
		f->bins[i] = f->bins[last];
		for (size_t p = 0; p < f->npids; p++)
			if (f->pids[p].bin == (int)last)
				f->pids[p].bin = i;
	}
	f->nbins--;
}

/* Room for one more bin: evict the least recently used idle one if full. */
static bool bin_room(struct frameless *f)
{
	if (f->nbins < FL_MAX_BINS)
		return true;
	int v = lru_idle(f, false);
	if (v < 0)
		return false;
	bin_drop(f, v);
	return true;
}

/*
 * Analyse the parsed file ef (NULL: not an ELF file we read, no table); on
 * success its bitmap is in the pool
 * (idle executables' bitmaps make way when the pool is full). Fills nb;
 * nb->have says whether it got a table. Negative errno only for ENOMEM.
 */
static int bin_analyse(struct frameless *f, const struct elffile *ef, const struct stat *st,
		       const char *exe, struct fl_bin *nb)
{
	struct elfsym *e = NULL;
	struct pp_file_id id = pp_file_id_of(st);
	uint64_t t0 = (pp_mono_ns() / 1000);
	if (!ef || elfshare_load(ef, &id, &e, NULL) < 0 || (!e->pcln && !f->c_tables)) {
		elfsym_free(e);
		return 0; /* unreadable, or not Go with C tables off: remembered as such */
	}
	uint64_t *bits = NULL, *ent = NULL;
	uint32_t nent = 0;
	const char *cause = NULL;
	struct ehf_rows rows = { .max = CPU_CFA_MAX_ENTRIES };
	struct ehf_rows marks = { .max = FL_MAX_MARKS };
	/* Go: its pclntab (exact per function; .eh_frame covers only its
	 * cgo/assembly parts); anything else: .eh_frame */
	int r = e->pcln ? fl_analyse_go(nb, e, ef, exe, &rows, &marks, &cause)
			: fl_analyse_c(e, ef, exe, &rows, &cause);
	if (r == 0 && !cause)
		r = fl_build_tables(nb, &rows, &marks, exe, &bits, &ent, &nent, &cause);
	free(rows.v);
	free(marks.v);
	nb->go = e->pcln != NULL;
	if (r > 0 && !fl_text_segment(e, nb->lo, &nb->seg_vaddr, &nb->seg_offset)) {
		r = 0;
		cause = "no_text_segment";
	}
	if (r <= 0) {
		elfsym_free(e);
		free(bits);
		free(ent);
		nb->nwords = nb->ntab = 0;
		if (r == 0 && cause)
			skipped(cause);
		return r;
	}
	uint32_t at, tab = 0;
	int v;
	/* the pools are full: forget executables no process runs now (nb is
	 * in no list yet, so dropping bins cannot move it) */
	for (;;) {
		at = pool_find(f, nb->nwords, false, CPU_FL_POOL_WORDS);
		if (nent)
			tab = pool_find(f, nent, true, CPU_CFA_POOL);
		if ((at != UINT32_MAX && tab != UINT32_MAX) || (v = lru_idle(f, true)) < 0)
			break;
		bin_drop(f, v);
	}
	if (at == UINT32_MAX || tab == UINT32_MAX) {
		elfsym_free(e);
		free(bits);
		free(ent);
		skipped("pool_full");
		pp_log(PP_WARN, "frameless code not marked: pool full",
		       "exe=%s words=%u entries=%u", pp_q(exe), nb->nwords, nent);
		nb->nwords = nb->ntab = 0;
		return 0;
	}
	r = cpu_sampler_fl_write(f->cpu, at, bits, nb->nwords);
	if (r == 0 && nent)
		r = cpu_sampler_cfa_write(f->cpu, tab, ent, nent);
	free(bits);
	free(ent);
	if (r < 0) {
		elfsym_free(e);
		skipped("map_error");
		pp_log(PP_WARN, "frameless code not marked: BPF map update failed",
		       "exe=%s error=%s", pp_q(exe), pp_q(strerror(-r)));
		nb->nwords = nb->ntab = 0;
		return 0;
	}
	nb->word = at;
	nb->tab = tab;
	nb->have = true;
	nb->e = e;
	pp_log(PP_DEBUG, "frameless table loaded",
	       "exe=%s word=%u words=%u tab=%u entries=%u ms=%.1f", pp_q(exe), at, nb->nwords, tab,
	       nent, (double)((pp_mono_ns() / 1000) - t0) / 1000.0);
	return 0;
}

/* A new bin for the parsed file ef. Index, or negative errno. */
static int bin_new(struct frameless *f, const struct elffile *ef, const struct stat *st,
		   const char *exe)
{
	struct fl_bin nb = { .dev = (uint64_t)st->st_dev, .ino = (uint64_t)st->st_ino };
	if (f->nbins == FL_MAX_BINS && lru_idle(f, false) < 0) {
		skipped("executables_full"); /* before the work, not after */
		return -ENOSPC;
	}
	int r = bin_analyse(f, ef, st, exe, &nb);
	if (r < 0)
		return r;
	/* after the analysis: its evictions may have made room */
	if (!bin_room(f)) {
		elfsym_free(nb.e);
		skipped("executables_full");
		return -ENOSPC; /* nb's words are in no bin: free again */
	}
	nb.used = ++f->tick;
	f->bins[f->nbins] = nb;
	return (int)f->nbins++;
}

/* ---- processes --------------------------------------------------------- */

#define BIN_NONE (-1000) /* bin_of(): no table for now */

static struct fl_pid *pid_find(struct frameless *f, pid_t pid)
{
	for (size_t i = 0; i < f->npids; i++)
		if (f->pids[i].pid == pid)
			return &f->pids[i];
	return NULL;
}

void frameless_untrack(struct frameless *f, pid_t pid)
{
	struct fl_pid *p = pid_find(f, pid);
	if (!p)
		return;
	if (p->installed) {
		cpu_sampler_fl_del(f->cpu, pid);
		f->installed--;
	}
	f->bins[p->bin].refs--;
	f->bins[p->bin].used = ++f->tick;
	*p = f->pids[--f->npids];
}

struct text_find {
	const struct fl_bin *b;
	const char *exe;
	uint64_t start, end;
};

/* 1 when m is b's executable mapping holding its text (start, end set). */
static int text_in(const struct proc_map *m, void *arg)
{
	struct text_find *tf = arg;
	const struct fl_bin *b = tf->b;
	/* the very file (overlayfs shows the lower layer's device: the path
	 * then) */
	bool same = (m->inode == b->ino && makedev(m->dev_major, m->dev_minor) == b->dev) ||
		    (m->path && !strcmp(m->path, tf->exe));
	if (m->perms[2] != 'x' || !same)
		return 0;
	uint64_t bias = proc_map_bias(m, b->seg_vaddr, b->seg_offset);
	uint64_t lo = b->lo + bias, hi = b->hi + bias;
	if (lo < b->lo || hi < lo || hi <= m->start || lo >= m->end)
		return 0; /* this mapping does not hold the text */
	/* the bitmap starts at lo (chunk 0); clip the end to the mapping */
	tf->start = lo;
	tf->end = hi < m->end ? hi : m->end;
	return 1;
}

/* The runtime text range of b in pid, from its executable mapping: asked
 * of the kernel one executable file mapping at a time (the executable's
 * is usually the first), else from all of /proc/PID/maps (kernels before
 * 6.11, a process with over 1,024 executable mappings). This runs for
 * every process found; the symbolizer reads the whole maps only for the
 * ones a window samples. */
static int runtime_range(pid_t pid, const struct fl_bin *b, const char *exe, uint64_t *start,
			 uint64_t *end)
{
	struct text_find tf = { .b = b, .exe = exe };
	int rc = proc_maps_each_exec(pid, text_in, &tf);
	if (rc == -ENOTTY || rc == -E2BIG) {
		struct proc_maps maps = { 0 };
		rc = proc_maps_read(pid, &maps, NULL);
		if (rc)
			return rc;
		for (size_t i = 0; i < maps.n && rc == 0; i++)
			rc = text_in(&maps.v[i], &tf);
		proc_maps_free(&maps);
	}
	if (rc < 0)
		return rc; /* -ESRCH: gone (both ways say so) */
	if (rc == 0)
		return -ENOENT;
	*start = tf.start;
	*end = tf.end;
	return 0;
}

/* Hand p's runtime text range to BPF. 1 done, 0 not, -ESRCH gone
 * (p is dropped then). */
static int install(struct frameless *f, struct fl_pid *p, const char *exe)
{
	const struct fl_bin *b = &f->bins[p->bin];
	pid_t pid = p->pid;
	uint64_t start = 0, end = 0;
	int rc = runtime_range(pid, b, exe, &start, &end);
	if (rc == -ESRCH) {
		frameless_untrack(f, pid);
		return -ESRCH;
	}
	if (rc < 0) {
		skipped("text_not_mapped");
		pp_log(PP_DEBUG, "frameless Go code: text not found in the maps", "pid=%d exe=%s",
		       (int)pid, pp_q(exe));
		return 0;
	}
	struct cpu_fl_proc fp = { .start = start,
				  .end = end,
				  .word = b->word,
				  .nwords = b->nwords,
				  .tab = b->tab,
				  .ntab = b->ntab,
				  .go = b->go };
	/* the switch sites and the span lie in the text: the same bias as
	 * its range */
	for (int i = 0; i < 2; i++)
		if (b->switch_ret[i] >= b->lo && b->switch_ret[i] < b->hi)
			fp.switch_ret[i] = b->switch_ret[i] + (start - b->lo);
	if (b->mid_hi > b->mid_lo && b->mid_lo >= b->lo && b->mid_hi <= b->hi) {
		fp.mid_lo = b->mid_lo + (start - b->lo);
		fp.mid_hi = b->mid_hi + (start - b->lo);
	}
	rc = cpu_sampler_fl_set(f->cpu, pid, &fp);
	if (rc < 0) {
		/* retried at each re-evaluation: warn once, count each time */
		skipped(rc == -E2BIG ? "processes_full" : "map_error");
		pp_log(f->warned ? PP_DEBUG : PP_WARN, "frameless Go code: process not entered",
		       "pid=%d error=%s", (int)pid, pp_q(strerror(-rc)));
		f->warned = true;
		return 0;
	}
	p->installed = true;
	f->installed++;
	return 1;
}

/* The bin of pid's executable (st: /proc/PID/exe's), analysed now unless
 * known. >= 0 its index; BIN_NONE none for now (not readable, no room,
 * exec'd between stat and open); -ESRCH gone; -ENOMEM. */
static int bin_of(struct frameless *f, pid_t pid, const struct stat *st, const char *exe)
{
	char path[64];
	for (size_t i = 0; i < f->nbins; i++)
		if (f->bins[i].dev == (uint64_t)st->st_dev && f->bins[i].ino == (uint64_t)st->st_ino)
			return (int)i;
	/* the process's file: opened the safe way (no blocking open, regular
	 * files on trusted filesystems) and parsed once for both the pclntab
	 * and .eh_frame */
	struct elffile *ef;
	struct stat fst;
	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
	int r = elffile_new(&(struct elffile_opts){ .from = ELFFILE_FROM_LINK, .link = path,
					    .max_size = FL_MAX_FILE, .st = &fst },
			 &ef, NULL);
	if (r == -ENOENT || r == -ESRCH)
		return -ESRCH;
	if (r == -ENOMEM)
		return r;
	if (r < 0 && r != -ENOEXEC)
		return BIN_NONE; /* not a file we may read: no table (asked again later) */
	/* what was opened is what gets remembered (an exec meanwhile); a file
	 * that is no 64-bit ELF too, as having no table */
	int bi = bin_new(f, ef, &fst, exe);
	elffile_free(ef);
	if (bi < 0)
		return bi == -ENOSPC ? BIN_NONE : bi;
	if (fst.st_dev != st->st_dev || fst.st_ino != st->st_ino)
		return BIN_NONE; /* exec'd between stat and open: next time */
	return bi;
}

/* frameless_track() (add) or frameless_prepare() (!add: the bin only, no
 * pid entry, nothing installed). */
static int track(struct frameless *f, pid_t pid, bool add)
{
	char path[64], exe[4096];
	struct stat st;
	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
	if (stat(path, &st) != 0)
		return errno == ENOENT || errno == ESRCH ? -ESRCH : -errno;
	struct fl_pid *p = add ? pid_find(f, pid) : NULL;
	if (p) {
		struct fl_bin *b = &f->bins[p->bin];
		if (b->dev == (uint64_t)st.st_dev && b->ino == (uint64_t)st.st_ino) {
			if (p->installed || !b->have)
				return p->installed ? 1 : 0;
			/* its text was not mapped yet, or the map was full: again */
			if (proc_exe(pid, exe, sizeof(exe)) < 0)
				exe[0] = '\0';
			return install(f, p, exe);
		}
		frameless_untrack(f, pid); /* exec'd another file */
	}
	if (add && f->npids == FL_MAX_PIDS) {
		skipped("processes_full");
		return 0;
	}
	if (proc_exe(pid, exe, sizeof(exe)) < 0)
		exe[0] = '\0';
	int bi = bin_of(f, pid, &st, exe);
	if (bi < 0)
		return bi == BIN_NONE ? 0 : bi;
	struct fl_bin *b = &f->bins[bi];
	b->used = ++f->tick;
	/* only processes with a table are remembered: bins without one stay
	 * idle, hence evictable, and cost a stat and a lookup per call */
	if (!b->have || !add)
		return b->have ? 1 : 0;
	if (pp_grow(&f->pids, &f->cap_pids, f->npids + 1, sizeof(*f->pids), 64))
		return -ENOMEM;
	p = &f->pids[f->npids++];
	*p = (struct fl_pid){ .pid = pid, .bin = bi };
	b->refs++;
	return install(f, p, exe);
}

int frameless_prepare(struct frameless *f, pid_t pid)
{
	return track(f, pid, false);
}

int frameless_track(struct frameless *f, pid_t pid)
{
	return track(f, pid, true);
}
