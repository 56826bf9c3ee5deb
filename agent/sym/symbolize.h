/*
 * symbolize.h - addresses of a process (or of the kernel) -> the mapping
 * they belong to and the frames (function, file, line; several when
 * inlined) at them.
 *
 * Who uses it: the CPU profiler (user + kernel stacks from BPF) and the Go
 * heap profiler (Go return PCs). Both collect addresses for a window and
 * resolve each UNIQUE address once, so the API is batch-only: one call per
 * (process, window) reads /proc/PID/maps once and walks the addresses.
 *
 * Sources, in order: Go .gopclntab (names, files, lines, inlined calls;
 * present in stripped Go binaries too), ELF .symtab, else .dynsym (names
 * only). Files are opened through /proc/PID/map_files/<range>, else
 * /proc/PID/root/<path>, so processes in containers and deleted/replaced
 * binaries resolve against the file actually mapped. Kernel addresses come
 * from /proc/kallsyms (modules kept as separate mappings); [vdso] from the
 * agent's own vdso (the kernel maps the same image into every process).
 * Anonymous executable memory (JIT code) from the process's
 * /tmp/perf-PID.map when it writes one (perfmap.h: read inside its root,
 * safely; re-read when it changed, at most every maps_max_age_ms).
 *
 * An address that cannot be resolved is never dropped: its result has
 * nframes == 0 and keeps its mapping (when there is one), so the profile
 * still carries the address and build id for server-side symbolization.
 *
 * Caches (bounded): parsed files keyed by the identity the kernel reports
 * for the mapping (device, inode); a cached file is re-checked (size,
 * mtime via stat) at most every revalidate_ms and reloaded when it changed,
 * so a file replaced under the same path (new inode) or rewritten in place
 * never resolves against stale tables. Files that fail to load are
 * remembered for retry_ms. Least-recently used files are evicted past
 * max_files or max_bytes. /proc/PID/maps is kept per process so a process
 * that exited shortly before its window is resolved still resolves (when
 * its files are cached; sym_prepare() makes sure they are). Maps older than
 * maps_max_age_ms are not read again in full when the kernel reports every
 * mapping the call's addresses fall in unchanged (PROCMAP_QUERY, Linux
 * 6.11; range, offset, permissions, device, inode and name compared): a
 * steady process costs a few ioctls instead of its whole maps text.
 *
 * Typical use, per window:
 *   sym_prepare(s, pid) when a pid is first seen (keeps short-lived ones
 *     resolvable after exit; optional);
 *   for each pid: collect its unique user addresses (sampled PC as is,
 *     return addresses - 1), sym_resolve_user(s, pid, 0, addrs, n, &batch),
 *     turn batch.r[i] / batch.mappings into pprof Locations / Mappings;
 *   kernel addresses of all pids: sym_resolve_kernel() once;
 *   sym_forget(s, pid) for pids that exited.
 * One sym_batch can be reused for every call (its memory is recycled).
 *
 * Not thread-safe: one symbolizer per thread, or a lock around it.
 */
#ifndef PUSHPROF_SYMBOLIZE_H
#define PUSHPROF_SYMBOLIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "err.h"

struct sym_opts {
	size_t max_files;	   /* cached files; 0 -> 256 */
	size_t max_bytes;	   /* memory held by cached files; 0 -> 256 MiB */
	size_t max_procs;	   /* processes whose maps are kept; 0 -> 1024 */
	unsigned revalidate_ms;	   /* re-stat a cached file at most this often; 0 -> 10000 */
	unsigned retry_ms;	   /* retry a file that failed to load after; 0 -> 60000 */
	unsigned maps_max_age_ms;  /* re-read /proc/PID/maps when older; 0 -> 1000 */
	const char *kallsyms_path; /* NULL -> "/proc/kallsyms" */
};

enum sym_build_id_kind {
	SYM_BUILD_ID_NONE = 0,
	SYM_BUILD_ID_GNU = 1, /* hex of NT_GNU_BUILD_ID (Parca BuildIDType GNU) */
	SYM_BUILD_ID_GO = 3,  /* Go's "Go\0\0" note string (Parca BuildIDType GO) */
};

enum sym_source {
	SYM_SRC_NONE = 0,
	SYM_SRC_GOPCLNTAB,
	SYM_SRC_SYMTAB,
	SYM_SRC_DYNSYM,
	SYM_SRC_KALLSYMS,
	SYM_SRC_PERFMAP, /* /tmp/perf-PID.map (JIT code), perfmap.h */
};

/* One mapping (one line of /proc/PID/maps, or one kernel image/module). */
struct sym_mapping {
	const char *path; /* as the process sees it: "/usr/lib/x.so", "[vdso]",
				 * "" (anonymous), "... (deleted)"; kernel:
				 * "[kernel.kallsyms]" or "[module_name]" */
	uint64_t start, limit, offset;
	uint64_t dev, inode;  /* makedev(major, minor) and inode from maps; 0 kernel */
	bool executable;      /* 'x' in the maps' permissions (kernel: true) */
	const char *build_id; /* "" when none */
	enum sym_build_id_kind build_id_kind;
	/* The Go build id too when a Go binary also has a GNU one. */
	const char *go_build_id;
	const char *go_version; /* "go1.19.8" for Go binaries, else "" */
	/* For pprof Mapping.has_*: what this file's tables can provide. */
	bool has_functions, has_filenames, has_line_numbers, has_inline_frames;
	const char *error; /* why the file gave no symbols, "" if it did */
};

struct sym_frame {
	const char *func; /* never NULL */
	const char *file; /* "" when unknown */
	uint32_t line;	  /* 0 when unknown */
	bool inlined;	  /* false for the last (physical) frame */
};

struct sym_result {
	uint64_t addr;	 /* as passed in */
	int32_t mapping; /* index into sym_batch.mappings, -1 = no mapping */
	enum sym_source source;
	uint64_t file_vaddr;		/* link-time address in the file (0 if unknown):
				 * what debuginfo-based symbolizers look up */
	uint32_t nframes;		/* 0 = unresolved: keep the address */
	const struct sym_frame *frames; /* innermost first */
	bool go_elide;			/* Go's own stacks leave the physical (last) frame
				 * out: autogenerated code (ABI and method wrappers,
				 * eq/hash algorithms; runtime/traceback.go "Ignore
				 * wrapper functions") and runtime.goexit
				 * (runtime/pprof proto.go); frames still lists it */
};

/*
 * Results of one call. Strings and frames live in the batch's own memory
 * (copied out of the caches) until the next call that fills this batch or
 * sym_batch_free(): cache eviction never invalidates them.
 */
struct sym_batch {
	struct sym_result *r; /* r[i] is for addrs[i] */
	size_t n;
	struct sym_mapping *mappings; /* only those some address hit */
	size_t nmappings;
	void *priv; /* arena, capacities */
};

struct sym_stats {
	size_t files, bytes; /* cached now */
	size_t procs;	     /* processes with cached maps */
	uint64_t file_loads, file_load_errors, file_evictions, file_reloads;
	uint64_t lookups, resolved;		/* addresses asked / given >= 1 frame */
	size_t kernel_symbols, kernel_bytes;	/* kallsyms table held */
	size_t perfmap_bytes;			/* perf maps held */
	uint64_t perfmap_loads, perfmap_errors; /* (re)reads with new entries; unusable files */
	/* /proc/PID/maps read in full; stale maps kept because the kernel
	 * reported every mapping the addresses hit unchanged */
	uint64_t maps_reads, maps_kept;
	uint64_t maps_recorded; /* mappings added from the kernel's mmap records */
	uint64_t maps_from_records; /* processes never read, resolved from those records */
};

struct symbolizer;
struct proc_map; /* procinfo.h */

int sym_new(const struct sym_opts *opts, struct symbolizer **out, struct pp_err *err);
void sym_free(struct symbolizer *s);

void sym_batch_init(struct sym_batch *b);
void sym_batch_free(struct sym_batch *b);

/*
 * Resolve user-space addresses of pid. Addresses are looked up exactly as
 * given: for a return address (every frame but the sampled PC) pass
 * addr - 1 so the call instruction, not the next line, is named.
 * start_time: pid's start time when the caller has just read it and found
 * the process alive (proc_start_time(), or the targets' facts re-read for
 * this window): it spares the symbolizer its own read of /proc/PID/stat,
 * the check that tells a reused pid from the process whose maps it keeps;
 * 0: unknown, the symbolizer reads it.
 * Returns 0 (per-address failures are results with nframes == 0), or a
 * negative code when nothing could be done (-ESRCH: process gone and its
 * maps were never seen; -ENOMEM).
 */
int sym_resolve_user(struct symbolizer *s, pid_t pid, uint64_t start_time, const uint64_t *addrs,
		     size_t n, struct sym_batch *out, struct pp_err *err);

/* Kernel addresses via kallsyms (loaded on first use, reloaded when an
 * address misses and the table is older than a minute). -EPERM when
 * kallsyms shows no addresses (kptr_restrict / not root). */
int sym_resolve_kernel(struct symbolizer *s, const uint64_t *addrs, size_t n, struct sym_batch *out,
		       struct pp_err *err);

/*
 * Read pid's maps now and load every executable file it maps, so the
 * process resolves later even if it has exited by then (short-lived
 * processes seen at the start of a window). Cheap when already cached.
 */
int sym_prepare(struct symbolizer *s, pid_t pid, struct pp_err *err);

/*
 * A process sym_prepare()d is read again (maps, and any executable file it
 * maps since) 20 ms, 100 ms, 500 ms and 2 s later: sym_prepare() usually
 * runs at exec, before ld.so maps the shared libraries and before early
 * dlopen()s, and a short-lived process may exit before its window is
 * built. sym_prepare_due() is when the next re-read is due
 * (CLOCK_MONOTONIC ns; UINT64_MAX: none); sym_prepare_run() does those
 * due by now_ns. Bounded: four re-reads per sym_prepare(), for at most
 * max_procs processes; a process gone by then keeps the maps last read.
 */
uint64_t sym_prepare_due(const struct symbolizer *s);
void sym_prepare_run(struct symbolizer *s, uint64_t now_ns);

/*
 * An executable file mapping the kernel recorded pid making at time_ns
 * (CLOCK_MONOTONIC; maprec.h), added to the maps known for pid when they
 * were read before it and it overlaps none of them, and its file loaded
 * while the process can still be asked: what a process that exits before
 * its next re-read mapped is still resolved. The record of a pid not known
 * here is kept (the last 1,024 such): a process that exits before it is ever
 * read (whole-host mode reads none ahead) is resolved with its records
 * alone: its mappings, and the symbols of files other processes loaded.
 * 1 added, 0 not (kept for a pid not known; read since; overlapping), or
 * -ENOMEM.
 */
int sym_add_mapping(struct symbolizer *s, pid_t pid, uint64_t time_ns, const struct proc_map *m);

/* Forget pid's maps (process exited and its window is done). */
void sym_forget(struct symbolizer *s, pid_t pid);

/* Facts about a process's executable file, for the labels Parca Agent's
 * relabel files read (__meta_process_executable_*). */
struct sym_exe {
	char build_id[256]; /* GNU build id, else Go's; "" none */
	char compiler[96];  /* "go1.19.8", or .comment's "GCC: ..."; "" */
	bool is_static;	    /* no PT_INTERP */
	bool stripped;	    /* no .symtab */
};
/* exe is the path as the process sees it (/proc/PID/exe): the file mapped
 * at offset 0 under that path, from the cache when it is there. -ENOENT
 * when the process has no such mapping or the file is not a readable ELF.
 * start_time as sym_resolve_user() takes it. */
int sym_exe_info(struct symbolizer *s, pid_t pid, uint64_t start_time, const char *exe,
		 struct sym_exe *out);

void sym_get_stats(const struct symbolizer *s, struct sym_stats *st);

#endif
