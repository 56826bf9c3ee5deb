/*
 * procinfo.h - what the agent reads about a process from /proc.
 *
 * Everything under /proc is hostile input: a process can exit between two
 * reads, a pid can be reused, names can hold any byte. Functions return
 * -ENOENT (-ESRCH) when the process is gone and never trust a length they
 * did not bound.
 */
#ifndef PUSHPROF_PROCINFO_H
#define PUSHPROF_PROCINFO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "err.h"

struct proc_map {
	uint64_t start, end, offset;
	uint64_t inode;
	uint32_t dev_major, dev_minor;
	char perms[5]; /* "r-xp" */
	char *path;    /* "" for anonymous; "[vdso]" etc. kept as is */
};

struct proc_maps {
	struct proc_map *v;
	size_t n;
};

/* /proc/PID/maps, sorted by start as the kernel writes it. */
int proc_maps_read(pid_t pid, struct proc_maps *out, struct pp_err *err);
/* The parser behind it, for a NUL-terminated maps text (modified in place;
 * path names it in errors). Malformed lines are skipped. For fuzzing. */
int proc_maps_parse(char *buf, const char *path, struct proc_maps *out, struct pp_err *err);
void proc_maps_free(struct proc_maps *m);
/* Add a copy of add to m in address order: 1, or 0 when it overlaps a
 * mapping m has (kept as is) or m is full, or -ENOMEM. */
int proc_maps_insert(struct proc_maps *m, const struct proc_map *add);
/* The mapping holding addr, or NULL. */
const struct proc_map *proc_maps_find(const struct proc_maps *m, uint64_t addr);
/*
 * Whether maps (read earlier from pid) still holds for addrs, asked through
 * the PROCMAP_QUERY ioctl (Linux 6.11) instead of formatting every line of
 * /proc/PID/maps again: an address in a file or executable mapping needs the
 * kernel to report that mapping the same now (range, offset, permissions,
 * device, inode, name; one query per mapping); one in anonymous data (heap,
 * stack, which grow) needs anonymous data there still; one outside every
 * mapping needs nothing mapped there still. 1 yes, 0 no (read the maps
 * again), -ENOTTY when the kernel has no such query, other negative codes
 * when the process cannot be asked (gone).
 */
int proc_maps_still(pid_t pid, const struct proc_maps *maps, const uint64_t *addrs, size_t n);
/*
 * pid's executable file mappings in address order, one PROCMAP_QUERY each
 * (Linux 6.11), handed to fn until it returns non-zero: a caller after one
 * mapping (the executable's text: usually the first) asks the kernel for
 * one line instead of having all of /proc/PID/maps formatted. m is fn's to
 * read during the call only (path points into a buffer reused for the
 * next). Returns fn's non-zero value; 0 when fn wanted none of them;
 * -ENOTTY when the kernel has no such query, -E2BIG past 1,024 mappings (a
 * hostile process: read the maps instead), other negative codes when the
 * process cannot be asked (-ESRCH: gone).
 */
int proc_maps_each_exec(pid_t pid, int (*fn)(const struct proc_map *m, void *arg), void *arg);
/*
 * Load bias of the file mapped at path: the runtime address minus the ELF
 * virtual address, i.e. (map.start - map.offset) of its lowest mapping
 * when the first PT_LOAD has p_offset == p_vaddr alignment as usual.
 * Callers with the ELF at hand should prefer proc_map_bias() below.
 */
const struct proc_map *proc_maps_first_of(const struct proc_maps *m, const char *path);
/* bias = map->start - map->offset - (load_vaddr - load_offset) for the
 * PT_LOAD segment whose file offset range holds map->offset. */
uint64_t proc_map_bias(const struct proc_map *map, uint64_t seg_vaddr, uint64_t seg_offset);

/* /proc/PID/comm without the newline (at most 15 bytes). */
int proc_comm(pid_t pid, char *buf, size_t len);
/* readlink /proc/PID/exe; " (deleted)" suffix kept. */
int proc_exe(pid_t pid, char *buf, size_t len);
/*
 * The cgroup path for labels (controller NULL): the v2 "0::" path unless it
 * is the root, else the longest v1 path - one choice for every profile of
 * a process. With a controller ("memory"): that v1 hierarchy's path.
 */
int proc_cgroup(pid_t pid, const char *controller, char *buf, size_t len);
/* Every line of /proc/PID/cgroup as "controllers:path" calls of cb. */
int proc_cgroup_each(pid_t pid, int (*cb)(const char *ctrls, const char *path, void *arg),
		     void *arg);
/* The fields of /proc/PID/stat the agent uses. */
struct proc_stat {
	char state;	       /* R S D Z X ... */
	unsigned long flags;   /* PF_* (PF_KTHREAD = 0x00200000) */
	uint64_t start_time;   /* clock ticks since boot */
	uint64_t utime, stime; /* CPU time in user and kernel mode, clock ticks */
	uint64_t vsize;	       /* virtual memory, bytes */
	uint64_t rss_pages;    /* resident set, pages */
	uint64_t threads;      /* live threads (a zombie leader's other threads: > 1) */
	uint64_t env_end;      /* 0 inside execve() (stat_fields); UINT64_MAX: not shown */
};
int proc_stat(pid_t pid, struct proc_stat *st);
/* Start time in clock ticks since boot (field 22 of /proc/PID/stat):
 * with the pid it identifies a process across pid reuse. */
int proc_start_time(pid_t pid, uint64_t *ticks);
/* proc_comm() and proc_start_time() from one read of /proc/PID/stat (a
 * process's facts are re-read often: one open instead of two). comm is as
 * /proc/PID/comm shows it: '\n' and '\\' escaped, cut to len - 1 bytes.
 * -ESRCH/-ENOENT when the process is gone, -ESRCH also when it has exited
 * and waits to be reaped (a zombie: state Z or X with no thread left; a
 * zombie leader whose other threads still run is a live process). */
int proc_comm_start(pid_t pid, char *comm, size_t len, uint64_t *ticks);
/* tgid from /proc/PID/status (for thread ids). */
int proc_tgid(pid_t pid, pid_t *tgid);
/* Path under /proc/PID/root for a file named in the process's mount namespace. */
int proc_root_path(pid_t pid, const char *path, char *buf, size_t len);
/* pid as the process knows itself: the last entry of NSpid: in
 * /proc/PID/status (its id in its own PID namespace). */
int proc_nspid(pid_t pid, pid_t *nspid);
/*
 * Open a file a process controls (path as the process sees it: absolute,
 * no "..") without trusting it: refused (-EINVAL) when a FUSE mount of the
 * process's lies at or above path (even a lookup there waits on a daemon
 * the process may own); resolved with openat2(RESOLVE_IN_ROOT |
 * RESOLVE_NO_MAGICLINKS | RESOLVE_NO_SYMLINKS) under /proc/PID/root, so no
 * symlink is followed at all (none leads out of the process's root, none
 * onto a FUSE mount the check did not see); the
 * file is looked at through an O_PATH descriptor first and opened for
 * reading (O_NONBLOCK | O_NOCTTY) only when it is a regular file, not on
 * FUSE (a read could stall forever) nor on a pseudo filesystem (proc,
 * sysfs, cgroup...: made up for the reader, i.e. about the agent), so
 * FIFOs and devices are never opened. *st is the file's stat. Returns the fd (the
 * caller closes it) or a negative errno: -EINVAL not a regular file,
 * -EFBIG over max_size bytes, -ENOSYS no openat2 (kernel < 5.6).
 */
int proc_root_open(pid_t pid, const char *path, uint64_t max_size, struct stat *st);
/*
 * The same checks for a kernel "magic link" to a process's file
 * (/proc/PID/exe, /proc/PID/map_files/START-END): the kernel picks the
 * file, not the process, but it can still sit on FUSE (an open there asks
 * a daemon the process may control) or be replaced by the time it is read.
 * Followed with O_PATH (no open of the file itself), then checked and
 * reopened as proc_root_open() does. -ESRCH when the link is gone.
 */
int proc_open_link(const char *link, uint64_t max_size, struct stat *st);

/* /proc/sys/kernel/perf_event_max_stack: the frames the kernel's stack
 * walker returns, and so the cap on cpu.max_stack_depth; 0 when it cannot
 * be read (the caller's default applies: the kernel's is CPU_MAX_DEPTH). */
uint32_t proc_perf_max_stack(void);

#endif
