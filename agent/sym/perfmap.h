/*
 * perfmap.h - names for JIT code from a process's /tmp/perf-PID.map, the
 * file runtimes write so that profilers can name code in anonymous
 * executable memory (Node.js --perf-basic-prof, JVM perf map agents,
 * LuaJIT, .NET): one "START SIZE name" line per function, START and SIZE in
 * hex (a 0x prefix is accepted), later lines winning over earlier ones for
 * the same code. The runtime appends while it runs.
 *
 * The file is read as the process sees it: /tmp/perf-NSPID.map inside its
 * root, NSPID being its pid in its own PID namespace, opened with
 * proc_root_open() (no symlink out of its root, no FIFO, device or FUSE
 * file, at most PERFMAP_MAX_FILE bytes). Everything in it is hostile:
 * malformed lines are skipped, a line is at most PERFMAP_MAX_LINE bytes,
 * entries at most PERFMAP_MAX_ENTRIES.
 *
 * perfmap_refresh() re-reads only what changed: nothing when size and
 * mtime are the same; the appended part when the same file grew; the whole
 * file when it was replaced or shrank.
 *
 * Not thread-safe; owned by one symbolizer (symbolize.c).
 */
#ifndef PUSHPROF_PERFMAP_H
#define PUSHPROF_PERFMAP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "fileutil.h"

#define PERFMAP_MAX_FILE (64ull << 20)
#define PERFMAP_MAX_LINE 4096
#define PERFMAP_MAX_ENTRIES (1u << 21)

struct perfmap_sym {
	uint64_t start, size;
	uint64_t seq;  /* line number: later lines win */
	uint32_t name; /* offset in names */
};

struct perfmap {
	struct perfmap_sym *v; /* by start, then newest first */
	size_t n, cap;
	char *names;
	size_t names_len, names_cap;
	uint64_t seq;
	/* the file as last read */
	struct pp_file_id file;
	uint64_t parsed; /* bytes consumed: up to the last complete line */
	size_t bytes;	 /* memory held */
};

void perfmap_init(struct perfmap *pm);
void perfmap_free(struct perfmap *pm);

/*
 * Bring pm up to date with pid's perf map. Returns 1 when entries changed,
 * 0 when nothing changed, a negative errno when the file cannot be used
 * (-ENOENT none; -EINVAL not a regular file; -EFBIG too large; pm is then
 * emptied, except on -ENOMEM).
 */
int perfmap_refresh(struct perfmap *pm, pid_t pid);

/* The name of the function holding addr, or NULL. */
const char *perfmap_lookup(const struct perfmap *pm, uint64_t addr);

#endif
