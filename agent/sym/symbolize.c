/*
 * symbolize.c - the process symbolizer: caches of parsed files (elfsym.c,
 * shared through elfshare.c), of process maps (procinfo.c) and perf maps,
 * and the batch resolution of user addresses on top of them. Kernel
 * addresses (kallsyms) are symbolize_kernel.c's, the results' memory
 * symbolize_batch.c's; symbolize_internal.h holds what they share.
 */
#include "symbolize.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/vfs.h>
#include <linux/magic.h>
#include <time.h>
#include <unistd.h>

#include "elffile.h"
#include "elfshare.h"
#include "elfsym.h"
#include "fileutil.h"
#include "gopclntab.h"
#include "perfmap.h"
#include "procinfo.h"
#include "ppclock.h"
#include "grow.h"
#include "symbolize_internal.h"

static const unsigned prep_delay_ms[] = { 20, 100, 500, 2000 };
/* sym_add_mapping: at most this many recorded mappings per process between
 * two reads of its maps, and none into maps this long (each insertion moves
 * the array: a hostile process's 65,000 mappings would make it slow) */
#define SYM_RECORDED_MAX 64
#define SYM_RECORDED_MAPS_MAX 4096
#define PREP_STEPS (sizeof(prep_delay_ms) / sizeof(prep_delay_ms[0]))
/* mmap records kept for processes never read (struct symbolizer.orphans):
 * ~500 process starts, a few seconds of a busy build node; 288 KiB and the
 * distinct paths when full (nothing on a node where nothing starts) */
#define SYM_ORPHANS 4096
/* from_orphans: at most the newest this many of a gone process's kept
 * records make its entry: a loader's few dozen, and bounded insertion work
 * for a process that mapped code in a loop */
#define SYM_ORPHAN_MAPS_MAX 256

int sym_new(const struct sym_opts *opts, struct symbolizer **out, struct pp_err *err)
{
	struct symbolizer *s = calloc(1, sizeof(*s));
	if (!s)
		return pp_errf(err, -ENOMEM, "symbolizer: out of memory");
	if (opts)
		s->o = *opts;
	if (!s->o.max_files)
		s->o.max_files = 256;
	if (!s->o.max_bytes)
		s->o.max_bytes = 256u << 20;
	if (!s->o.max_procs)
		s->o.max_procs = 1024;
	if (!s->o.revalidate_ms)
		s->o.revalidate_ms = 10000;
	if (!s->o.retry_ms)
		s->o.retry_ms = 60000;
	if (!s->o.maps_max_age_ms)
		s->o.maps_max_age_ms = 1000;
	if (!s->o.kallsyms_path)
		s->o.kallsyms_path = "/proc/kallsyms";
	s->procs = calloc(s->o.max_procs, sizeof(*s->procs));
	if (!s->procs) {
		free(s);
		return pp_errf(err, -ENOMEM, "symbolizer: out of memory");
	}
	*out = s;
	return 0;
}

static void fentry_free(struct fentry *f)
{
	elfsym_free(f->e);
	free(f->err);
	free(f);
}

void sym_free(struct symbolizer *s)
{
	if (!s)
		return;
	for (struct fentry *f = s->lru_head, *n; f; f = n) {
		n = f->next;
		fentry_free(f);
	}
	for (size_t i = 0; i < s->nprocs; i++) {
		proc_maps_free(&s->procs[i].maps);
		perfmap_free(&s->procs[i].pm);
	}
	free(s->procs);
	free(s->orphans);
	for (size_t i = 0; i < OPATH_BUCKETS; i++)
		for (struct opath *o = s->opaths[i], *n; o; o = n) {
			n = o->next;
			free(o);
		}
	free(s->ksyms);
	free(s->kidx);
	free(s->knames);
	free(s->kmods);
	elfsym_free(s->vdso);
	free(s);
}

static size_t fhash(uint64_t dev, uint64_t ino)
{
	uint64_t h = (dev * 0x9e3779b97f4a7c15ull) ^ (ino * 0xc2b2ae3d27d4eb4full);
	return (size_t)(h >> 32) & (FILE_BUCKETS - 1);
}

static void lru_unlink(struct symbolizer *s, struct fentry *f)
{
	if (f->prev)
		f->prev->next = f->next;
	else
		s->lru_head = f->next;
	if (f->next)
		f->next->prev = f->prev;
	else
		s->lru_tail = f->prev;
	f->prev = f->next = NULL;
}

static void lru_front(struct symbolizer *s, struct fentry *f)
{
	f->next = s->lru_head;
	f->prev = NULL;
	if (s->lru_head)
		s->lru_head->prev = f;
	s->lru_head = f;
	if (!s->lru_tail)
		s->lru_tail = f;
}

static void fentry_remove(struct symbolizer *s, struct fentry *f)
{
	struct fentry **pp = &s->buckets[fhash(f->dev, f->ino)];
	while (*pp && *pp != f)
		pp = &(*pp)->hnext;
	if (*pp)
		*pp = f->hnext;
	lru_unlink(s, f);
	s->nfiles--;
	s->bytes -= f->bytes;
	fentry_free(f);
}

static void evict(struct symbolizer *s)
{
	struct fentry *f = s->lru_tail;
	while (f && (s->nfiles > s->o.max_files || s->bytes > s->o.max_bytes)) {
		struct fentry *prev = f->prev;
		if (f->pin != s->gen) {
			fentry_remove(s, f);
			s->st.file_evictions++;
		}
		f = prev;
	}
}

#define SYM_MAX_FILE (4ull << 30) /* an ELF file larger than this is not read */

static void map_files_path(char *buf, size_t len, pid_t pid, const struct proc_map *m)
{
	snprintf(buf, len, "/proc/%d/map_files/%" PRIx64 "-%" PRIx64, (int)pid, m->start, m->end);
}

/* Open the file behind mapping m of pid: map_files first (exact file, even
 * deleted), then the path inside the process's root. */
static int open_mapped(pid_t pid, const struct proc_map *m, struct stat *st, char *why, size_t wlen)
{
	char p[PATH_MAX + 64];
	/* Both ways treat the file as the process's (hostile): no open that can
	 * block (FIFO, device, FUSE), no symlink out of its root, regular files
	 * only, and it must be the very file maps names (device and inode). */
	map_files_path(p, sizeof(p), pid, m);
	int fd = proc_open_link(p, SYM_MAX_FILE, st);
	if (fd < 0 && fd != -EINVAL && fd != -EFBIG && m->path[0] == '/')
		fd = proc_root_open(pid, m->path, SYM_MAX_FILE, st);
	if (fd < 0) {
		snprintf(why, wlen, "open: %s",
			 fd == -EINVAL	? "not a regular file on a trusted "
					  "filesystem"
			 : fd == -EFBIG ? "larger than 4 GiB"
					: strerror(-fd));
		return fd;
	}
	/* overlayfs reports its own device to stat, the layer's in maps */
	struct statfs sf;
	bool overlay = fstatfs(fd, &sf) == 0 && sf.f_type == OVERLAYFS_SUPER_MAGIC;
	if (m->inode && ((uint64_t)st->st_ino != m->inode ||
			 (!overlay && (major(st->st_dev) != m->dev_major ||
				       minor(st->st_dev) != m->dev_minor)))) {
		snprintf(why, wlen,
			 "file replaced (%u:%u inode %" PRIu64 " mapped, %u:%u inode %" PRIu64
			 " found)",
			 m->dev_major, m->dev_minor, m->inode, major(st->st_dev), minor(st->st_dev),
			 (uint64_t)st->st_ino);
		close(fd);
		return -ESTALE;
	}
	return fd;
}

/* (Re)load f from the file behind mapping m. Returns the open's error
 * (-ESRCH: the process is gone, or it unmapped the file and its root has no
 * such path), or 0. */
static int fentry_load(struct symbolizer *s, struct fentry *f, pid_t pid, const struct proc_map *m,
			uint64_t now)
{
	s->bytes -= f->bytes;
	elfsym_free(f->e);
	free(f->err);
	f->e = NULL;
	f->err = NULL;
	f->loaded_ms = f->checked_ms = now;
	char why[256] = "";
	struct stat st;
	struct pp_err err = { 0 };
	/* another module (frameless, gobin) may hold this very file's symbols
	 * (elfshare.h): then no open and no parse. The stat of map_files names
	 * the mapped file exactly as the open below would */
	char p[128];
	struct pp_file_id id;
	map_files_path(p, sizeof(p), pid, m);
	if (stat(p, &st) == 0 && (uint64_t)st.st_ino == m->inode && S_ISREG(st.st_mode)) {
		id = pp_file_id_of(&st);
		f->e = elfshare_find(&id);
	}
	int fd = f->e ? -1 : open_mapped(pid, m, &st, why, sizeof(why));
	if (f->e || fd >= 0) {
		f->file = pp_file_id_of(&st);
	}
	if (fd >= 0) {
		struct elffile *ef = NULL;
		id = pp_file_id_of(&st);
		if (elffile_new(&(struct elffile_opts){ .from = ELFFILE_FROM_FD, .fd = fd }, &ef,
				&err) < 0 ||
		    elfshare_load(ef, &id, &f->e, &err) < 0)
			snprintf(why, sizeof(why), "%.250s", err.msg);
		elffile_free(ef);
		close(fd);
	}
	if (f->e && f->e->bytes > s->o.max_bytes) {
		snprintf(why, sizeof(why), "symbols need %zu bytes, over the cache budget",
			 f->e->bytes);
		elfsym_free(f->e);
		f->e = NULL;
	}
	s->st.file_loads++;
	if (!f->e) {
		s->st.file_load_errors++;
		f->err = strdup(why[0] ? why : "unknown error");
	}
	f->bytes = sizeof(*f) + (f->e ? f->e->bytes : 0) + (f->err ? strlen(f->err) + 1 : 0);
	s->bytes += f->bytes;
	return fd < 0 && !f->e ? fd : 0;
}

/* The cached file for mapping m of pid, loading or revalidating it. */
static struct fentry *file_get(struct symbolizer *s, pid_t pid, const struct proc_map *m,
			       uint64_t now)
{
	uint64_t dev = makedev(m->dev_major, m->dev_minor);
	struct fentry *f;
	for (f = s->buckets[fhash(dev, m->inode)]; f; f = f->hnext)
		if (f->dev == dev && f->ino == m->inode)
			break;
	if (f) {
		lru_unlink(s, f);
		lru_front(s, f);
		f->pin = s->gen;
		if (!f->e && now - f->loaded_ms >= s->o.retry_ms) {
			fentry_load(s, f, pid, m, now);
			s->st.file_reloads++;
		} else if (f->e && now - f->checked_ms >= s->o.revalidate_ms) {
			char p[128];
			struct stat st;
			map_files_path(p, sizeof(p), pid, m);
			if (stat(p, &st) == 0) {
				f->checked_ms = now;
				struct pp_file_id now_id = pp_file_id_of(&st);
				if (now_id.size != f->file.size ||
				    now_id.mtime_ns != f->file.mtime_ns) {
					fentry_load(s, f, pid, m, now);
					s->st.file_reloads++;
				}
			}
		}
		evict(s);
		return f;
	}
	f = calloc(1, sizeof(*f));
	if (!f)
		return NULL;
	f->dev = dev;
	f->ino = m->inode;
	f->pin = s->gen;
	size_t h = fhash(dev, m->inode);
	f->hnext = s->buckets[h];
	s->buckets[h] = f;
	lru_front(s, f);
	s->nfiles++;
	if (fentry_load(s, f, pid, m, now) == -ESRCH) {
		/* not remembered as unloadable: the file is fine, this process
		 * cannot show it any more (gone: a mapping known from its mmap
		 * record, maprec.h); a live process that maps it loads it */
		s->buckets[h] = f->hnext;
		lru_unlink(s, f);
		s->nfiles--;
		s->bytes -= f->bytes;
		free(f->err);
		free(f);
		return NULL;
	}
	evict(s);
	return f;
}

static struct elfsym *vdso_get(struct symbolizer *s)
{
	if (s->vdso_tried)
		return s->vdso;
	s->vdso_tried = true;
	uint64_t base = getauxval(AT_SYSINFO_EHDR);
	if (!base)
		return NULL;
	struct proc_maps mm;
	if (proc_maps_read(getpid(), &mm, NULL) < 0)
		return NULL;
	const struct proc_map *m = proc_maps_find(&mm, base);
	if (m && !strcmp(m->path, "[vdso]"))
		elfsym_new(&(struct elfsym_opts){ .buf = (const void *)(uintptr_t)m->start,
						  .len = m->end - m->start,
						  .gap_prefix = "[vdso]" },
			   &s->vdso, NULL);
	proc_maps_free(&mm);
	return s->vdso;
}

/* A free entry: a new one, or the least recently used one emptied. */
static struct pentry *pentry_new(struct symbolizer *s)
{
	struct pentry *p;
	if (s->nprocs < s->o.max_procs) {
		p = &s->procs[s->nprocs++];
	} else {
		p = &s->procs[0];
		for (size_t i = 1; i < s->nprocs; i++)
			if (s->procs[i].used < p->used)
				p = &s->procs[i];
		proc_maps_free(&p->maps);
	}
	p->prep_step = 0;
	perfmap_free(&p->pm);
	p->pm_checked = false;
	return p;
}

/* An entry for pid, gone and never read, from its mmap records kept in
 * s->orphans (the newest wins where two overlap: a library unmapped and
 * another mapped there); NULL when there are none. Its files load only
 * if cached: a gone process cannot show them (file_get). */
static struct pentry *from_orphans(struct symbolizer *s, pid_t pid, uint64_t now)
{
	struct proc_maps mm = { 0 };
	for (size_t k = 0; k < s->norphans && mm.n < SYM_ORPHAN_MAPS_MAX; k++) {
		/* newest first: orphan_next - 1, - 2, ... */
		const struct orphan_rec *o =
			&s->orphans[(s->orphan_next + SYM_ORPHANS - 1 - k) % SYM_ORPHANS];
		if (o->pid == pid && proc_maps_insert(&mm, &o->m) < 0) {
			proc_maps_free(&mm);
			return NULL;
		}
	}
	if (!mm.n)
		return NULL;
	struct pentry *p = pentry_new(s);
	p->pid = pid;
	p->start_time = 0; /* unknown: a live process of that pid is read anew */
	p->maps = mm;
	p->read_ms = now;
	p->read_ns = 0;
	p->recorded = 0;
	p->used = ++s->proc_tick;
	s->st.maps_from_records++;
	return p;
}

static size_t opath_hash(const char *p)
{
	uint32_t h = 2166136261u; /* FNV-1a */
	for (; *p; p++)
		h = (h ^ (unsigned char)*p) * 16777619u;
	return h % OPATH_BUCKETS;
}

/* A counted reference to the shared copy of path, or NULL (out of memory). */
static char *opath_get(struct symbolizer *s, const char *path)
{
	size_t h = opath_hash(path);
	for (struct opath *o = s->opaths[h]; o; o = o->next)
		if (!strcmp(o->s, path)) {
			o->refs++;
			return o->s;
		}
	size_t len = strlen(path);
	struct opath *o = malloc(sizeof(*o) + len + 1);
	if (!o)
		return NULL;
	memcpy(o->s, path, len + 1);
	o->refs = 1;
	o->next = s->opaths[h];
	s->opaths[h] = o;
	return o->s;
}

/* Drop a reference opath_get() gave; NULL-safe. */
static void opath_put(struct symbolizer *s, char *path)
{
	if (!path)
		return;
	struct opath *o = (struct opath *)(path - offsetof(struct opath, s));
	if (--o->refs)
		return;
	for (struct opath **pp = &s->opaths[opath_hash(path)]; *pp; pp = &(*pp)->next)
		if (*pp == o) {
			*pp = o->next;
			free(o);
			return;
		}
}

/* Keep the record of a process with no entry (the oldest kept goes). */
static int orphan_keep(struct symbolizer *s, pid_t pid, uint64_t time_ns, const struct proc_map *m)
{
	if (!s->orphans && !(s->orphans = calloc(SYM_ORPHANS, sizeof(*s->orphans))))
		return -ENOMEM;
	struct orphan_rec *o = &s->orphans[s->orphan_next];
	char *path = opath_get(s, m->path ? m->path : "");
	if (!path)
		return -ENOMEM;
	opath_put(s, o->m.path);
	o->pid = pid;
	o->time_ns = time_ns;
	o->m = *m;
	o->m.path = path;
	s->orphan_next = (s->orphan_next + 1) % SYM_ORPHANS;
	if (s->norphans < SYM_ORPHANS)
		s->norphans++;
	return 0;
}

/* The process entry for pid with maps at most max_age old (or the last
 * maps seen when the process is gone). addrs (n of them; NULL: none): the
 * addresses about to be resolved: stale maps the kernel still reports the
 * same for each of them (proc_maps_still()) are kept, not read again.
 * NULL + rc when unknown. */
static struct pentry *proc_get_for(struct symbolizer *s, pid_t pid, uint64_t now, uint64_t max_age,
				   uint64_t known_start, const uint64_t *addrs, size_t n, int *rc,
				   struct pp_err *err)
{
	struct pentry *p = NULL;
	for (size_t i = 0; i < s->nprocs; i++)
		if (s->procs[i].pid == pid) {
			p = &s->procs[i];
			break;
		}
	/* known_start: the caller read it just now (the process was alive),
	 * one read of /proc/PID/stat fewer */
	uint64_t st = known_start;
	bool alive = known_start || proc_start_time(pid, &st) == 0;
	if (p && (!alive || (p->start_time == st && now - p->read_ms < max_age))) {
		p->used = ++s->proc_tick;
		return p;
	}
	if (!alive) {
		/* never read: what its mmap records say it mapped */
		p = from_orphans(s, pid, now); /* (p was NULL: one is returned above) */
		if (p)
			return p;
		*rc = pp_errf(err, -ESRCH, "symbolize: process %d is gone", (int)pid);
		return NULL;
	}
	if (p && p->start_time == st && addrs && n && !s->no_maps_query) {
		int q = proc_maps_still(pid, &p->maps, addrs, n);
		if (q == -ENOTTY)
			s->no_maps_query = true; /* before Linux 6.11: read them */
		if (q == 1) {
			s->st.maps_kept++;
			p->read_ms = now;
			p->used = ++s->proc_tick;
			return p;
		}
	}
	s->st.maps_reads++;
	struct proc_maps mm;
	uint64_t read_ns = pp_mono_ns();
	int r = proc_maps_read(pid, &mm, err);
	if (r == 0 && mm.n == 0) {
		/* a process that has released its memory on the way out (a
		 * zombie, or one mid-exit) reads as no mappings at all: not
		 * maps to resolve with, and not to replace the last ones */
		proc_maps_free(&mm);
		r = pp_errf(err, -ESRCH, "symbolize: process %d is exiting", (int)pid);
	}
	if (r < 0) {
		if (p) { /* raced with exit: keep the old maps */
			p->used = ++s->proc_tick;
			return p;
		}
		*rc = r;
		return NULL;
	}
	if (!p) {
		p = pentry_new(s);
	} else {
		proc_maps_free(&p->maps);
		if (p->start_time != st) { /* pid reused */
			perfmap_free(&p->pm);
			p->pm_checked = false;
		}
	}
	p->pid = pid;
	p->start_time = st;
	p->maps = mm;
	p->read_ms = now;
	p->read_ns = read_ns;
	p->recorded = 0;
	p->used = ++s->proc_tick;
	return p;
}

static struct pentry *proc_get(struct symbolizer *s, pid_t pid, uint64_t now, uint64_t max_age,
			       uint64_t known_start, int *rc, struct pp_err *err)
{
	return proc_get_for(s, pid, now, max_age, known_start, NULL, 0, rc, err);
}

int sym_add_mapping(struct symbolizer *s, pid_t pid, uint64_t time_ns, const struct proc_map *m)
{
	struct pentry *p = NULL;
	if (s->last_add < s->nprocs && s->procs[s->last_add].pid == pid)
		p = &s->procs[s->last_add];
	for (size_t i = 0; !p && i < s->nprocs; i++)
		if (s->procs[i].pid == pid) {
			p = &s->procs[i];
			s->last_add = i;
		}
	if (!p) /* not read (yet): kept in case it exits before it is */
		return orphan_keep(s, pid, time_ns, m) < 0 ? -ENOMEM : 0;
	/* mapped before the maps were read: in them, or unmapped since */
	if (time_ns <= p->read_ns)
		return 0;
	/* bounded work for a process that maps code in a loop: what a loader
	 * adds between two reads is a few dozen; past that, the next read */
	if (p->recorded >= SYM_RECORDED_MAX || p->maps.n >= SYM_RECORDED_MAPS_MAX)
		return 0;
	p->recorded++;
	int r = proc_maps_insert(&p->maps, m);
	if (r <= 0)
		return r;
	s->st.maps_recorded++;
	/* its file now, while map_files still has it (gone: not loaded) */
	uint64_t st;
	if (proc_start_time(pid, &st) == 0 && st == p->start_time) {
		s->gen++;
		file_get(s, pid, m, pp_mono_ns() / 1000000);
	}
	return 1;
}

void sym_forget(struct symbolizer *s, pid_t pid)
{
	for (size_t i = 0; i < s->nprocs; i++)
		if (s->procs[i].pid == pid) {
			proc_maps_free(&s->procs[i].maps);
			perfmap_free(&s->procs[i].pm);
			s->procs[i] = s->procs[--s->nprocs];
			memset(&s->procs[s->nprocs], 0, sizeof(s->procs[0]));
			return;
		}
}

int sym_exe_info(struct symbolizer *s, pid_t pid, uint64_t start_time, const char *exe,
		 struct sym_exe *out)
{
	uint64_t now = (pp_mono_ns() / 1000000);
	int rc = 0;

	memset(out, 0, sizeof(*out));
	if (!exe || !*exe)
		return -ENOENT;
	struct pentry *p = proc_get(s, pid, now, s->o.maps_max_age_ms, start_time, &rc, NULL);
	if (!p)
		return rc ? rc : -ENOENT;
	for (size_t i = 0; i < p->maps.n; i++) {
		const struct proc_map *m = &p->maps.v[i];
		if (m->offset || !m->inode || strcmp(m->path, exe))
			continue;
		struct fentry *f = file_get(s, pid, m, now);
		if (!f || !f->e)
			return -ENOENT;
		const struct elfsym *e = f->e;
		snprintf(out->build_id, sizeof(out->build_id), "%s",
			 e->gnu_build_id[0] ? e->gnu_build_id : e->go_build_id);
		snprintf(out->compiler, sizeof(out->compiler), "%s",
			 e->go_version[0] ? e->go_version : e->comment);
		out->is_static = !e->has_interp;
		out->stripped = !e->has_symtab;
		return 0;
	}
	return -ENOENT;
}

static bool is_file_mapping(const struct proc_map *m)
{
	return m->path[0] == '/' && m->inode != 0;
}

/* Read pid's maps now and load the executable files in them. */
static struct pentry *prepare(struct symbolizer *s, pid_t pid, uint64_t now, int *rc,
			      struct pp_err *err)
{
	s->gen++;
	struct pentry *p = proc_get(s, pid, now, 0, 0, rc, err);
	if (!p)
		return NULL;
	for (size_t i = 0; i < p->maps.n; i++) {
		const struct proc_map *m = &p->maps.v[i];
		if (is_file_mapping(m) && m->perms[2] == 'x')
			file_get(s, pid, m, now);
	}
	return p;
}

int sym_prepare(struct symbolizer *s, pid_t pid, struct pp_err *err)
{
	uint64_t now = (pp_mono_ns() / 1000000);
	int rc = 0;
	struct pentry *p = prepare(s, pid, now, &rc, err);
	if (!p)
		return rc;
	p->prep_start_ms = now;
	p->prep_step = 1;
	return 0;
}

uint64_t sym_prepare_due(const struct symbolizer *s)
{
	uint64_t due = UINT64_MAX;
	for (size_t i = 0; i < s->nprocs; i++) {
		const struct pentry *p = &s->procs[i];
		if (p->prep_step && p->prep_start_ms + prep_delay_ms[p->prep_step - 1] < due)
			due = p->prep_start_ms + prep_delay_ms[p->prep_step - 1];
	}
	return due == UINT64_MAX ? due : due * 1000000;
}

void sym_prepare_run(struct symbolizer *s, uint64_t now_ns)
{
	uint64_t now = now_ns / 1000000;
	/* prepare() of a known live pid re-reads its entry in place: the
	 * array is neither reordered nor evicted from under this loop */
	for (size_t i = 0; i < s->nprocs; i++) {
		struct pentry *p = &s->procs[i];
		if (!p->prep_step || p->prep_start_ms + prep_delay_ms[p->prep_step - 1] > now)
			continue;
		pid_t pid = p->pid;
		unsigned step = p->prep_step;
		uint64_t start = p->prep_start_ms, st;
		int rc = 0;
		if (proc_start_time(pid, &st) < 0 || st != p->start_time) {
			p->prep_step = 0; /* gone (or reused): keep what was read */
			continue;
		}
		p = prepare(s, pid, now, &rc, NULL);
		if (!p)
			continue;
		while (step < PREP_STEPS && start + prep_delay_ms[step] <= now)
			step++; /* a late loop skips the re-reads it missed */
		p->prep_start_ms = start;
		p->prep_step = step < PREP_STEPS ? step + 1 : 0;
	}
}

/* r gets one frame, named name (copied into the batch arena). */

/* Frames for vaddr in e, copied into the batch arena. */
static int resolve_in(struct batch_priv *bp, const struct elfsym *e, uint64_t vaddr,
		      struct sym_result *r)
{
	if (e->pcln) {
		struct gopcln_frame fr[MAX_FRAMES];
		int n = gopcln_lookup(e->pcln, vaddr, fr, MAX_FRAMES);
		if (n > 0) {
			struct sym_frame *out = sym_arena_alloc(bp, (size_t)n * sizeof(*out));
			if (!out)
				return -ENOMEM;
			for (int i = 0; i < n; i++) {
				out[i].func = sym_arena_str(bp, fr[i].func ? fr[i].func : "?");
				out[i].file = sym_arena_str(bp, fr[i].file);
				out[i].line = (uint32_t)fr[i].line;
				out[i].inlined = fr[i].inlined;
				if (!out[i].func || !out[i].file)
					return -ENOMEM;
			}
			r->frames = out;
			r->nframes = (uint32_t)n;
			r->source = SYM_SRC_GOPCLNTAB;
			/* what Go's own stacks leave out (symbolize.h) */
			r->go_elide =
				(fr[n - 1].file && !strcmp(fr[n - 1].file, "<autogenerated>")) ||
				(n == 1 && fr[0].func && !strcmp(fr[0].func, "runtime.goexit"));
			return 0;
		}
	}
	uint64_t start;
	const char *name = elfsym_lookup(e, vaddr, &start);
	if (name)
		return sym_one_frame(bp, r, name, e->from_dynsym ? SYM_SRC_DYNSYM : SYM_SRC_SYMTAB);
	return 0;
}

/* Anonymous executable memory: where JIT compilers put code, named (if
 * at all) by the process's perf map. memfd mappings count: runtimes that
 * map their code twice (writable, executable) back it with a memfd (.NET's
 * "doublemapper"). */
static bool is_jit_mapping(const struct proc_map *m)
{
	return m->perms[2] == 'x' &&
	       (!m->path[0] || !strncmp(m->path, "[anon", 5) || !strncmp(m->path, "/memfd:", 7));
}

/* p's perf map, refreshed when older than maps_max_age_ms; NULL when the
 * process has none (or it could not be used). The perf maps of all
 * processes together stay within max_bytes: one that would pass it is
 * dropped. */
static const struct perfmap *perfmap_get(struct symbolizer *s, struct pentry *p, uint64_t now)
{
	if (!p->pm_checked || now - p->pm_checked_ms >= s->o.maps_max_age_ms) {
		uint64_t st;
		/* a gone process keeps the names last read */
		if (proc_start_time(p->pid, &st) == 0 && st == p->start_time) {
			int r = perfmap_refresh(&p->pm, p->pid);
			if (r < 0 && r != -ENOENT)
				s->st.perfmap_errors++;
			if (r > 0) {
				s->st.perfmap_loads++;
				size_t total = 0;
				for (size_t i = 0; i < s->nprocs; i++)
					total += s->procs[i].pm.bytes;
				if (total > s->o.max_bytes) {
					perfmap_free(&p->pm);
					s->st.perfmap_errors++;
				}
			}
		}
		p->pm_checked = true;
		p->pm_checked_ms = now;
	}
	return p->pm.n ? &p->pm : NULL;
}

static int fill_mapping(struct batch_priv *bp, struct sym_mapping *sm, const struct proc_map *m,
			const struct elfsym *e, const char *error)
{
	memset(sm, 0, sizeof(*sm));
	sm->path = sym_arena_str(bp, m->path);
	sm->start = m->start;
	sm->limit = m->end;
	sm->offset = m->offset;
	sm->dev = makedev(m->dev_major, m->dev_minor);
	sm->inode = m->inode;
	sm->executable = m->perms[2] == 'x';
	sm->build_id = sm->go_build_id = sm->go_version = "";
	sm->error = sym_arena_str(bp, error);
	if (e) {
		if (e->gnu_build_id[0]) {
			sm->build_id = sym_arena_str(bp, e->gnu_build_id);
			sm->build_id_kind = SYM_BUILD_ID_GNU;
		} else if (e->go_build_id[0]) {
			sm->build_id = sym_arena_str(bp, e->go_build_id);
			sm->build_id_kind = SYM_BUILD_ID_GO;
		}
		sm->go_build_id = sym_arena_str(bp, e->go_build_id);
		sm->go_version = sym_arena_str(bp, e->go_version);
		sm->has_functions = e->pcln || e->nsyms;
		sm->has_filenames = sm->has_line_numbers = e->pcln != NULL;
		sm->has_inline_frames = e->pcln && gopcln_has_inline(e->pcln);
	}
	if (!sm->path || !sm->build_id || !sm->go_build_id || !sm->go_version || !sm->error)
		return -ENOMEM;
	return 0;
}

int sym_resolve_user(struct symbolizer *s, pid_t pid, uint64_t start_time, const uint64_t *addrs,
		     size_t n, struct sym_batch *out, struct pp_err *err)
{
	if (sym_batch_reset(out, n) < 0)
		return pp_errf(err, -ENOMEM, "symbolize: out of memory");
	struct batch_priv *bp = out->priv;
	uint64_t now = (pp_mono_ns() / 1000000);
	int rc = 0;
	s->gen++;
	struct pentry *p =
		proc_get_for(s, pid, now, s->o.maps_max_age_ms, start_time, addrs, n, &rc, err);
	if (!p)
		return rc;
	/* An address outside every mapping may be in one mapped since: read
	 * the maps again once (if they are not fresh already). */
	if (now != p->read_ms) {
		for (size_t i = 0; i < n; i++)
			if (!proc_maps_find(&p->maps, addrs[i])) {
				p = proc_get(s, pid, now, 0, start_time, &rc, err);
				if (!p)
					return rc;
				break;
			}
	}
	int32_t *midx = malloc((p->maps.n ? p->maps.n : 1) * sizeof(*midx));
	struct fentry **mfile = calloc(p->maps.n ? p->maps.n : 1, sizeof(*mfile));
	if (!midx || !mfile) {
		free(midx);
		free(mfile);
		return pp_errf(err, -ENOMEM, "symbolize: out of memory");
	}
	for (size_t i = 0; i < p->maps.n; i++)
		midx[i] = -1;
	rc = 0;
	for (size_t i = 0; i < n; i++) {
		struct sym_result *r = sym_result_begin(s, out, i, addrs[i]);
		const struct proc_map *m = proc_maps_find(&p->maps, addrs[i]);
		if (!m)
			continue;
		size_t mi = (size_t)(m - p->maps.v);
		const struct elfsym *e = NULL;
		if (midx[mi] < 0) {
			const char *error = "";
			if (is_file_mapping(m)) {
				mfile[mi] = file_get(s, pid, m, now);
				if (mfile[mi]) {
					e = mfile[mi]->e;
					if (!e)
						error = mfile[mi]->err;
				}
			} else if (!strcmp(m->path, "[vdso]")) {
				e = vdso_get(s);
			}
			struct sym_mapping sm;
			if (fill_mapping(bp, &sm, m, e, error) < 0 ||
			    (midx[mi] = sym_batch_add_mapping(out, &sm)) < 0) {
				rc = pp_errf(err, -ENOMEM, "symbolize: out of memory");
				break;
			}
		} else if (mfile[mi]) {
			e = mfile[mi]->e;
		} else if (!strcmp(m->path, "[vdso]")) {
			e = s->vdso;
		}
		r->mapping = midx[mi];
		if (!e && is_jit_mapping(m)) {
			const struct perfmap *pm = perfmap_get(s, p, now);
			const char *name = pm ? perfmap_lookup(pm, addrs[i]) : NULL;
			if (name) {
				if (sym_one_frame(bp, r, name, SYM_SRC_PERFMAP) < 0) {
					rc = pp_errf(err, -ENOMEM, "symbolize: out of memory");
					break;
				}
				s->st.resolved++;
			}
			continue;
		}
		uint64_t vaddr;
		if (!e || !elfsym_off_to_vaddr(e, addrs[i] - m->start + m->offset, &vaddr))
			continue;
		r->file_vaddr = vaddr;
		if (resolve_in(bp, e, vaddr, r) < 0) {
			rc = pp_errf(err, -ENOMEM, "symbolize: out of memory");
			break;
		}
		if (r->nframes)
			s->st.resolved++;
	}
	free(midx);
	free(mfile);
	return rc;
}

void sym_get_stats(const struct symbolizer *s, struct sym_stats *st)
{
	*st = s->st;
	st->files = s->nfiles;
	st->bytes = s->bytes;
	st->procs = s->nprocs;
	st->perfmap_bytes = 0;
	for (size_t i = 0; i < s->nprocs; i++)
		st->perfmap_bytes += s->procs[i].pm.bytes;
	st->kernel_symbols = s->nksyms;
	st->kernel_bytes = s->kbytes;
}
