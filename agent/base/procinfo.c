#include "procinfo.h"
#include "fileutil.h"
#include "grow.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <sys/ioctl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/magic.h>
#include <linux/openat2.h>

/* Bounds on what we accept from /proc: a process with more mappings than
 * this is either pathological or hostile, and is read partially. */
#define MAX_MAPS 65536
#define MAX_FILE (64u << 20)

static int gone(int e)
{
	return (e == ENOENT || e == ESRCH) ? -ESRCH : -e;
}

/* A whole /proc file (at most MAX_FILE bytes, NUL-terminated, malloc'd);
 * a process that is gone is -ESRCH. */
static int slurp(const char *path, char **out, size_t *len)
{
	int rc = pp_read_kernel_file_alloc(path, MAX_FILE, out, len);
	return rc < 0 ? gone(-rc) : rc;
}

static int parse_map_line(char *line, struct proc_map *m)
{
	unsigned long long start, end, off, ino;
	unsigned maj, min;
	char perms[8];
	int pos = 0;

	if (sscanf(line, "%llx-%llx %7s %llx %x:%x %llu %n", &start, &end, perms, &off, &maj, &min,
		   &ino, &pos) < 7)
		return -EINVAL;
	if (end < start)
		return -EINVAL;
	memset(m, 0, sizeof(*m));
	m->start = start;
	m->end = end;
	m->offset = off;
	m->dev_major = maj;
	m->dev_minor = min;
	m->inode = ino;
	snprintf(m->perms, sizeof(m->perms), "%.4s", perms);
	const char *path = pos > 0 ? line + pos : "";
	while (*path == ' ')
		path++;
	m->path = strdup(path);
	return m->path ? 0 : -ENOMEM;
}

int proc_maps_read(pid_t pid, struct proc_maps *out, struct pp_err *err)
{
	char path[64], *buf;
	int rc;

	out->v = NULL;
	out->n = 0;
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	rc = slurp(path, &buf, NULL);
	if (rc)
		return pp_errf(err, rc, "reading %s: %s", path, strerror(-rc));
	rc = proc_maps_parse(buf, path, out, err);
	free(buf);
	return rc;
}

int proc_maps_parse(char *buf, const char *path, struct proc_maps *out, struct pp_err *err)
{
	char *save = NULL;
	int rc;

	out->v = NULL;
	out->n = 0;
	size_t cap = 0;
	for (char *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (out->n >= MAX_MAPS)
			break;
		if (pp_grow(&out->v, &cap, out->n + 1, sizeof(*out->v), 64)) {
			rc = pp_errf(err, -ENOMEM, "reading %s: out of memory", path);
			goto fail;
		}
		int prc = parse_map_line(line, &out->v[out->n]);
		if (prc == -ENOMEM) {
			rc = pp_errf(err, prc, "reading %s: out of memory", path);
			goto fail;
		}
		if (prc == 0)
			out->n++;
	}
	return 0;
fail:
	proc_maps_free(out);
	return rc;
}

void proc_maps_free(struct proc_maps *m)
{
	for (size_t i = 0; i < m->n; i++)
		free(m->v[i].path);
	free(m->v);
	m->v = NULL;
	m->n = 0;
}

int proc_maps_insert(struct proc_maps *m, const struct proc_map *add)
{
	size_t at = 0, hi = m->n; /* the first mapping ending after add starts */
	while (at < hi) {
		size_t mid = at + (hi - at) / 2;
		if (m->v[mid].end <= add->start)
			at = mid + 1;
		else
			hi = mid;
	}
	if ((at < m->n && m->v[at].start < add->end) || add->start >= add->end)
		return 0; /* overlaps what is known (or empty) */
	if (m->n >= MAX_MAPS)
		return 0;
	char *path = strdup(add->path ? add->path : "");
	struct proc_map *v = path ? realloc(m->v, (m->n + 1) * sizeof(*v)) : NULL;
	if (!v) {
		free(path);
		return -ENOMEM;
	}
	m->v = v;
	memmove(&v[at + 1], &v[at], (m->n - at) * sizeof(*v));
	v[at] = *add;
	v[at].path = path;
	m->n++;
	return 1;
}

const struct proc_map *proc_maps_find(const struct proc_maps *m, uint64_t addr)
{
	size_t lo = 0, hi = m->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (addr < m->v[mid].start)
			hi = mid;
		else if (addr >= m->v[mid].end)
			lo = mid + 1;
		else
			return &m->v[mid];
	}
	return NULL;
}

/* PROCMAP_QUERY (linux/fs.h since 6.11; older headers lack it). */
struct pp_procmap_query {
	uint64_t size, query_flags, query_addr;
	uint64_t vma_start, vma_end, vma_flags, vma_page_size, vma_offset, inode;
	uint32_t dev_major, dev_minor, vma_name_size, build_id_size;
	uint64_t vma_name_addr, build_id_addr;
};
#define PP_PROCMAP_QUERY _IOWR('f', 17, struct pp_procmap_query)
#define PP_VMA_R 0x01
#define PP_VMA_W 0x02
#define PP_VMA_X 0x04
#define PP_VMA_SHARED 0x08

/* Whether the kernel's answer q describes m exactly. */
static bool same_map(const struct pp_procmap_query *q, const struct proc_map *m, const char *name)
{
	uint64_t want = (m->perms[0] == 'r' ? PP_VMA_R : 0) | (m->perms[1] == 'w' ? PP_VMA_W : 0) |
			(m->perms[2] == 'x' ? PP_VMA_X : 0) |
			(m->perms[3] == 's' ? PP_VMA_SHARED : 0);
	return q->vma_start == m->start && q->vma_end == m->end && q->vma_offset == m->offset &&
	       q->inode == m->inode && q->dev_major == m->dev_major &&
	       q->dev_minor == m->dev_minor && (q->vma_flags & 0x0f) == want &&
	       strcmp(q->vma_name_size ? name : "", m->path) == 0;
}

#define PP_COVERING_OR_NEXT 0x10

/* One PROCMAP_QUERY: 1 answered (q filled), 0 no such vma, negative:
 * -ENOTTY (no such ioctl) or the process is gone. */
static int map_query(int fd, uint64_t addr, uint64_t flags, struct pp_procmap_query *q, char *name,
		     size_t nlen)
{
	*q = (struct pp_procmap_query){
		.size = sizeof(*q),
		.query_flags = flags,
		.query_addr = addr,
		.vma_name_size = name ? (uint32_t)nlen : 0,
		.vma_name_addr = (uint64_t)(uintptr_t)name,
	};
	if (ioctl(fd, PP_PROCMAP_QUERY, q) == 0) {
		if (name)
			name[nlen - 1] = '\0';
		return 1;
	}
	int e = errno;
	return e == ENOTTY || e == EINVAL || e == EOPNOTSUPP ? -ENOTTY : e == ENOENT ? 0 : gone(e);
}

/* /proc/PID/maps opened for PROCMAP_QUERY: the descriptor, or -ESRCH (gone)
 * or another negative errno. */
static int open_maps(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	return fd < 0 ? gone(errno) : fd;
}

int proc_maps_still(pid_t pid, const struct proc_maps *maps, const uint64_t *addrs, size_t n)
{
	char name[PATH_MAX + 32];
	uint64_t asked[32]; /* mapping starts asked about: the few the addresses hit */
	size_t nasked = 0, queries = 0;
	struct pp_procmap_query q;
	int rc = 1;

	int fd = open_maps(pid);
	if (fd < 0)
		return fd;
	for (size_t i = 0; i < n && rc == 1; i++) {
		const struct proc_map *m = proc_maps_find(maps, addrs[i]);
		bool seen = false;
		for (size_t k = 0; m && k < nasked && !seen; k++)
			seen = asked[k] == m->start;
		if (seen)
			continue;
		if (++queries > 64) {
			rc = 0; /* many to ask: one read of the maps is cheaper */
			break;
		}
		if (!m) {
			/* outside every mapping (a junk return address): still so
			 * when nothing covers it now */
			int r = map_query(fd, addrs[i], PP_COVERING_OR_NEXT, &q, NULL, 0);
			rc = r < 0 ? r : r == 0 || q.vma_start > addrs[i] ? 1 : 0;
			continue;
		}
		if (m->perms[2] != 'x' && !m->inode) {
			/* anonymous data (heap, stack: they grow) holds no code
			 * and names nothing: still so when what covers the address
			 * now is anonymous data too */
			int r = map_query(fd, addrs[i], 0, &q, NULL, 0);
			rc = r < 0 ? r : r == 1 && !q.inode && !(q.vma_flags & PP_VMA_X) ? 1 : 0;
			continue;
		}
		if (nasked == sizeof(asked) / sizeof(asked[0])) {
			rc = 0;
			break;
		}
		asked[nasked++] = m->start;
		int r = map_query(fd, m->start, 0, &q, name, sizeof(name));
		rc = r < 0 ? r : r == 1 && same_map(&q, m, name) ? 1 : 0;
	}
	close(fd);
	return rc;
}

#define PP_FILE_BACKED 0x20
#define EACH_EXEC_MAX 1024

int proc_maps_each_exec(pid_t pid, int (*fn)(const struct proc_map *m, void *arg), void *arg)
{
	char name[PATH_MAX + 32];
	struct pp_procmap_query q;
	uint64_t addr = 0;
	int rc = 0;

	int fd = open_maps(pid);
	if (fd < 0)
		return fd;
	for (int i = 0;; i++) {
		if (i == EACH_EXEC_MAX) {
			rc = -E2BIG;
			break;
		}
		int r = map_query(fd, addr, PP_COVERING_OR_NEXT | PP_FILE_BACKED | PP_VMA_X, &q, name,
				  sizeof(name));
		if (r <= 0) {
			rc = r; /* 0: no more of them */
			break;
		}
		struct proc_map m = {
			.start = q.vma_start,
			.end = q.vma_end,
			.offset = q.vma_offset,
			.inode = q.inode,
			.dev_major = q.dev_major,
			.dev_minor = q.dev_minor,
			.path = q.vma_name_size ? name : (char *)"",
		};
		snprintf(m.perms, sizeof(m.perms), "%c%c%c%c", q.vma_flags & PP_VMA_R ? 'r' : '-',
			 q.vma_flags & PP_VMA_W ? 'w' : '-', q.vma_flags & PP_VMA_X ? 'x' : '-',
			 q.vma_flags & PP_VMA_SHARED ? 's' : 'p');
		if ((rc = fn(&m, arg)) != 0)
			break;
		if (q.vma_end <= addr)
			break; /* cannot happen: the kernel answers at or after addr */
		addr = q.vma_end;
	}
	close(fd);
	return rc;
}

const struct proc_map *proc_maps_first_of(const struct proc_maps *m, const char *path)
{
	for (size_t i = 0; i < m->n; i++)
		if (strcmp(m->v[i].path, path) == 0)
			return &m->v[i];
	return NULL;
}

uint64_t proc_map_bias(const struct proc_map *map, uint64_t seg_vaddr, uint64_t seg_offset)
{
	return map->start - map->offset - (seg_vaddr - seg_offset);
}

int proc_comm(pid_t pid, char *buf, size_t len)
{
	char path[64], *s;
	int rc;

	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	rc = slurp(path, &s, NULL);
	if (rc)
		return rc;
	s[strcspn(s, "\n")] = '\0';
	snprintf(buf, len, "%s", s);
	free(s);
	return 0;
}

int proc_exe(pid_t pid, char *buf, size_t len)
{
	char path[64];
	ssize_t n;

	if (len == 0)
		return -EINVAL;
	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
	n = readlink(path, buf, len - 1);
	if (n < 0)
		return gone(errno);
	buf[n] = '\0';
	return 0;
}

int proc_cgroup_each(pid_t pid, int (*cb)(const char *ctrls, const char *path, void *arg),
		     void *arg)
{
	char path[64], *s, *save = NULL;
	int rc;

	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
	rc = slurp(path, &s, NULL);
	if (rc)
		return rc;
	for (char *line = strtok_r(s, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		/* "N:controllers:path"; the path may itself contain ':' */
		char *c1 = strchr(line, ':');
		if (!c1)
			continue;
		char *c2 = strchr(c1 + 1, ':');
		if (!c2)
			continue;
		*c2 = '\0';
		rc = cb(c1 + 1, c2 + 1, arg);
		if (rc)
			break;
	}
	free(s);
	return rc > 0 ? 0 : rc;
}

struct cg_pick {
	const char *want;
	char *buf;
	size_t len;
	int found; /* 2 = v2 line, 1 = wanted v1 controller */
};

static bool has_ctrl(const char *ctrls, const char *want)
{
	size_t wl = strlen(want);

	for (const char *p = ctrls; *p;) {
		const char *e = strchr(p, ',');
		size_t l = e ? (size_t)(e - p) : strlen(p);
		if (l == wl && strncmp(p, want, wl) == 0)
			return true;
		if (!e)
			break;
		p = e + 1;
	}
	return false;
}

/*
 * controller NULL: the one path that says most about where the process
 * lives, the same whichever part of the agent asks (CPU, heap and OOM
 * profiles of one process must carry one cgroup label): the v2 path unless
 * it is the root (hybrid hosts put every controller on v1), else the
 * longest v1 path. With a controller: that hierarchy's path.
 */
static int cg_pick_cb(const char *ctrls, const char *path, void *arg)
{
	struct cg_pick *p = arg;

	if (p->want) {
		if (has_ctrl(ctrls, p->want)) {
			snprintf(p->buf, p->len, "%s", path);
			p->found = 1;
			return 1;
		}
		return 0;
	}
	if (ctrls[0] == '\0' && strcmp(path, "/") != 0) {
		snprintf(p->buf, p->len, "%s", path);
		p->found = 2;
		return 1;
	}
	if (!p->found || strlen(path) > strlen(p->buf)) {
		snprintf(p->buf, p->len, "%s", path);
		p->found = 1;
	}
	return 0;
}

int proc_cgroup(pid_t pid, const char *controller, char *buf, size_t len)
{
	struct cg_pick p = { controller, buf, len, 0 };
	int rc;

	if (len)
		buf[0] = '\0';
	rc = proc_cgroup_each(pid, cg_pick_cb, &p);
	if (rc)
		return rc;
	return p.found ? 0 : -ENOENT;
}

/* Fields 4..24 of a /proc/PID/stat line (after the last ')') into st. */
static int stat_fields(const char *s, struct proc_stat *st)
{
	const char *p = strrchr(s, ')');
	unsigned long long f[21]; /* fields 4..24 */
	if (!p || p[1] != ' ' || !p[2])
		return -EINVAL;
	st->state = p[2];
	const char *q = p + 3;
	for (int i = 0; i < 21; i++) {
		char *end;
		while (*q == ' ')
			q++;
		errno = 0;
		long long sv = strtoll(q, &end, 10); /* some fields are signed */
		if (end == q || errno)
			return -EINVAL;
		f[i] = (unsigned long long)sv;
		q = end;
	}
	/* field 51, env_end: execve() sets it last, after mapping the ELF
	 * (fs/binfmt_elf.c create_elf_tables); 0 while the exec is under way
	 * (also shown 0 to a reader without ptrace access). Kernels before
	 * 3.5 end the line sooner: unknown. */
	st->env_end = UINT64_MAX;
	for (int i = 25; i <= 51; i++) {
		char *end;
		while (*q == ' ')
			q++;
		errno = 0;
		unsigned long long v = strtoull(q, &end, 10);
		if (end == q || errno)
			break;
		q = end;
		if (i == 51)
			st->env_end = v;
	}
	st->flags = f[9 - 4];
	st->utime = f[14 - 4];
	st->stime = f[15 - 4];
	st->start_time = f[22 - 4];
	st->vsize = f[23 - 4];
	st->rss_pages = f[24 - 4];
	st->threads = f[20 - 4];
	return 0;
}

int proc_stat(pid_t pid, struct proc_stat *st)
{
	char path[64], *s;
	int rc;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	rc = slurp(path, &s, NULL);
	if (rc)
		return rc;
	/* comm may hold spaces and parentheses: fields restart after the last
	 * ')', with field 3 (state) first */
	rc = stat_fields(s, st);
	free(s);
	return rc;
}

int proc_comm_start(pid_t pid, char *comm, size_t len, uint64_t *ticks)
{
	char path[64], *s;
	struct proc_stat st;
	int rc;

	if (len == 0)
		return -EINVAL;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	rc = slurp(path, &s, NULL);
	if (rc)
		return rc;
	/* comm sits between the first '(' and the last ')' (it may hold
	 * both); /proc/PID/stat shows it raw, /proc/PID/comm escapes '\n'
	 * and '\\' (fs/proc/array.c proc_task_name): escape alike */
	const char *open = strchr(s, '('), *close = strrchr(s, ')');
	rc = stat_fields(s, &st);
	if (rc == 0 && open && close > open) {
		size_t k = 0;
		for (const char *c = open + 1; c < close && k + 1 < len; c++) {
			bool esc = *c == '\n' || *c == '\\';
			comm[k++] = esc ? '\\' : *c;
			if (esc && k + 1 < len)
				comm[k++] = *c == '\n' ? 'n' : '\\';
		}
		comm[k] = '\0';
		*ticks = st.start_time;
		if ((st.state == 'Z' || st.state == 'X') && st.threads <= 1)
			rc = -ESRCH; /* exited, not yet reaped */
	} else if (rc == 0) {
		rc = -EINVAL;
	}
	free(s);
	return rc;
}

int proc_start_time(pid_t pid, uint64_t *ticks)
{
	struct proc_stat st;
	int rc = proc_stat(pid, &st);

	if (rc == 0)
		*ticks = st.start_time;
	return rc;
}

/* The last number on the line of /proc/PID/status that starts with key
 * ("Tgid:", "NSpid:" - one number per PID namespace, innermost last), as
 * a positive pid. */
static int status_pid(pid_t pid, const char *key, pid_t *out)
{
	char path[64], *s;
	int rc;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	rc = slurp(path, &s, NULL);
	if (rc)
		return rc;
	char want[32];
	snprintf(want, sizeof(want), "\n%s", key);
	char *p = strstr(s, want), *end;
	long last = -1;
	rc = -EINVAL;
	if (p) {
		p += strlen(want);
		for (;;) {
			while (*p == ' ' || *p == '\t')
				p++;
			if (!isdigit((unsigned char)*p))
				break;
			last = strtol(p, &end, 10);
			p = end;
		}
		if (last > 0 && last <= INT_MAX) {
			*out = (pid_t)last;
			rc = 0;
		}
	}
	free(s);
	return rc;
}

int proc_tgid(pid_t pid, pid_t *tgid)
{
	return status_pid(pid, "Tgid:", tgid);
}

int proc_root_path(pid_t pid, const char *path, char *buf, size_t len)
{
	int n = snprintf(buf, len, "/proc/%d/root%s%s", (int)pid, path[0] == '/' ? "" : "/", path);
	return (n < 0 || (size_t)n >= len) ? -ENAMETOOLONG : 0;
}

int proc_nspid(pid_t pid, pid_t *nspid)
{
	return status_pid(pid, "NSpid:", nspid);
}

/* Filesystems a file read on behalf of a process must not come from: FUSE
 * (its server can stall a read forever) and pseudo filesystems, whose
 * "regular" files are made up for the reader, i.e. would describe the agent
 * (a symlink to /proc/self/environ). */
static bool untrusted_fs(long type)
{
	switch (type) {
	case FUSE_SUPER_MAGIC:
	case PROC_SUPER_MAGIC:
	case SYSFS_MAGIC:
	case DEBUGFS_MAGIC:
	case TRACEFS_MAGIC:
	case SECURITYFS_MAGIC:
	case CGROUP_SUPER_MAGIC:
	case CGROUP2_SUPER_MAGIC:
	case BPF_FS_MAGIC:
		return true;
	default:
		return false;
	}
}

/* pfd: an O_PATH descriptor (consumed). The file it names, checked and
 * opened for reading; see proc_root_open(). */
static int reopen_checked(int pfd, uint64_t max_size, struct stat *st)
{
	char p[64];
	int fd, e;
	struct statfs sf;

	if (fstat(pfd, st) < 0 || fstatfs(pfd, &sf) < 0) {
		e = errno;
		close(pfd);
		return -e;
	}
	if (!S_ISREG(st->st_mode) || untrusted_fs((long)sf.f_type)) {
		close(pfd);
		return -EINVAL;
	}
	if ((uint64_t)st->st_size > max_size) {
		close(pfd);
		return -EFBIG;
	}
	/* the same inode, now readable: /proc/self/fd reopens what pfd holds */
	snprintf(p, sizeof(p), "/proc/self/fd/%d", pfd);
	fd = open(p, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	e = errno;
	close(pfd);
	if (fd < 0)
		return -e;
	if (fstat(fd, st) < 0) {
		e = errno;
		close(fd);
		return -e;
	}
	if (!S_ISREG(st->st_mode)) {
		close(fd);
		return -EINVAL;
	}
	return fd;
}

/* Unescape a mountinfo path field in place (\040 space, \011 tab, \012
 * newline, \134 backslash: fs/proc_namespace.c mangle()). */
static void mi_unescape(char *s)
{
	char *w = s;
	for (char *r = s; *r; r++) {
		if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] >= '0' && r[2] <= '7' &&
		    r[3] >= '0' && r[3] <= '7') {
			*w++ = (char)((r[1] - '0') << 6 | (r[2] - '0') << 3 | (r[3] - '0'));
			r += 3;
		} else {
			*w++ = *r;
		}
	}
	*w = '\0';
}

/*
 * True when resolving path inside pid's root could ask a FUSE daemon: a
 * FUSE mount (fstype fuse, fuseblk, fuse.*) at or above path, as pid's
 * /proc/PID/mountinfo shows its mounts relative to its root. Even an
 * O_PATH lookup there waits for the daemon, and the process may own it
 * (an unprivileged user can mount FUSE in its own namespaces): a daemon
 * that never answers would hold the agent's thread forever, deaf to
 * signals it blocks. A mountinfo that cannot be read whole counts as FUSE.
 */
static bool fuse_on_path(pid_t pid, const char *path)
{
	char p[64], *buf = NULL, *save = NULL;
	size_t len = 0;
	bool fuse = false;

	snprintf(p, sizeof(p), "/proc/%d/mountinfo", (int)pid);
	if (slurp(p, &buf, &len) < 0 || len >= MAX_FILE - 2) {
		free(buf);
		return true;
	}
	for (char *line = strtok_r(buf, "\n", &save); line && !fuse;
	     line = strtok_r(NULL, "\n", &save)) {
		/* id parent maj:min root mountpoint opts [optional...] - fstype ... */
		char *f[5] = { 0 }, *sp = NULL, *tok = strtok_r(line, " ", &sp);
		int n = 0;
		for (; tok && n < 5; tok = strtok_r(NULL, " ", &sp))
			f[n++] = tok;
		while (tok && strcmp(tok, "-") != 0)
			tok = strtok_r(NULL, " ", &sp);
		const char *type = tok ? strtok_r(NULL, " ", &sp) : NULL;
		if (n < 5 || !type || strncmp(type, "fuse", 4) != 0)
			continue;
		mi_unescape(f[4]);
		size_t ml = strlen(f[4]);
		while (ml > 1 && f[4][ml - 1] == '/')
			ml--;
		if ((ml == 1 && f[4][0] == '/') ||
		    (!strncmp(path, f[4], ml) && (path[ml] == '/' || path[ml] == '\0')))
			fuse = true;
	}
	free(buf);
	return fuse;
}

int proc_root_open(pid_t pid, const char *path, uint64_t max_size, struct stat *st)
{
	char p[64];
	int root, pfd, e;

	/* only plain absolute paths: the FUSE check below reads path as the
	 * mounts see it, so no "..", and no symlinks in the walk (RESOLVE_NO_SYMLINKS) */
	if (path[0] != '/' || strstr(path, "/../") ||
	    (strlen(path) >= 3 && !strcmp(path + strlen(path) - 3, "/..")))
		return -EINVAL;
	/* the root first: a process that is gone is -ESRCH, not a mount
	 * table that cannot be read */
	snprintf(p, sizeof(p), "/proc/%d/root", (int)pid);
	root = open(p, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		return gone(errno);
	if (fuse_on_path(pid, path)) {
		close(root);
		return -EINVAL;
	}
	/* O_PATH: opening a FIFO or a device node this way has no effect on
	 * it (no blocking, no driver open), so it can be looked at first */
	struct open_how how = {
		.flags = O_PATH | O_CLOEXEC,
		.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_SYMLINKS,
	};
	pfd = (int)syscall(SYS_openat2, root, path, &how, sizeof(how));
	e = errno;
	close(root);
	if (pfd < 0)
		return -e;
	return reopen_checked(pfd, max_size, st);
}

int proc_open_link(const char *link, uint64_t max_size, struct stat *st)
{
	int pfd = open(link, O_PATH | O_CLOEXEC);

	if (pfd < 0)
		return gone(errno);
	return reopen_checked(pfd, max_size, st);
}

uint32_t proc_perf_max_stack(void)
{
	char buf[32];
	if (pp_read_kernel_file("/proc/sys/kernel/perf_event_max_stack", buf, sizeof(buf)) <= 0)
		return 0;
	char *end;
	unsigned long v = strtoul(buf, &end, 10);
	if (end == buf || v < 1 || v > 65535)
		return 0;
	return (uint32_t)v;
}
