/*
 * symbolize_internal.h - what the symbolizer's files share (symbolize.c:
 * per-process maps and the file cache; symbolize_batch.c: the results'
 * memory; symbolize_kernel.c: kallsyms). Not for other modules.
 */
#ifndef PUSHPROF_SYMBOLIZE_INTERNAL_H
#define PUSHPROF_SYMBOLIZE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "elfsym.h"
#include "perfmap.h"
#include "procinfo.h"
#include "symbolize.h"

#define MAX_FRAMES 64
#define FILE_BUCKETS 1024
#define KSYM_MAX_DIST (1u << 20) /* no kernel function is 1 MiB long */

/* ---- batch arena ------------------------------------------------------- */

struct chunk {
	struct chunk *next;
	size_t used, cap;
	max_align_t data[];
};

struct batch_priv {
	struct chunk *chunks;
	size_t rcap, mcap;
};

/* ---- caches ------------------------------------------------------------ */

struct fentry {
	uint64_t dev, ino;
	struct elfsym *e; /* NULL: load failed (err says why) */
	char *err;
	size_t bytes;
	uint64_t loaded_ms, checked_ms;
	/* the file as loaded: its size and mtime are compared again (dev and
	 * inode come from the mapping, and overlayfs reports its own device) */
	struct pp_file_id file;
	uint64_t pin;			    /* call generation that uses it: not evictable */
	struct fentry *hnext, *prev, *next; /* hash chain, LRU list */
};

struct orphan_rec {
	pid_t pid;
	uint64_t time_ns;
	struct proc_map m; /* m.path: an opath's s (a reference) */
};

/* A path orphan records share (the same libc for every process started):
 * one copy, counted. */
struct opath {
	struct opath *next;
	uint32_t refs;
	char s[];
};
#define OPATH_BUCKETS 256

struct pentry {
	pid_t pid;
	uint64_t start_time;
	struct proc_maps maps;
	uint64_t read_ms, used;
	uint64_t read_ns; /* CLOCK_MONOTONIC when maps were last read (begun) */
	unsigned recorded; /* mappings added from mmap records since that read */
	/* re-reads after sym_prepare(): the next is due at prep_start_ms +
	 * prep_delay_ms[prep_step - 1]; prep_step 0 = none pending */
	uint64_t prep_start_ms;
	unsigned prep_step;
	/* /tmp/perf-PID.map, read when an address falls in anonymous
	 * executable memory, refreshed at most every maps_max_age_ms */
	struct perfmap pm;
	uint64_t pm_checked_ms;
	bool pm_checked;
};

/* The kernel's text symbols (symbolize_kernel.c), sorted by address, in
 * blocks of KBLK: per symbol a 32-bit offset from its block's first
 * address; names as sequences of word ids ("tcp_" "v4_" "rcv": ~14,000
 * distinct words make up 122,000 names), 1.7 MiB in all where plain
 * addresses and names took 5 MiB. One allocation: the struct heads it. */
#define KBLK 16
#define KIDX_STEP 128 /* KIDX_STEP / KBLK blocks per kidx entry */

struct ktab {
	uint64_t *base;	   /* per block: its first symbol's address */
	uint32_t *delta;   /* per symbol: address - base[its block] */
	uint32_t *off;	   /* per block: its first entry in code */
	uint32_t *woff;	   /* per word id: its offset in words */
	uint8_t *code;	   /* per symbol: LEB128 (ntok << 1 | mod follows),
			   * [mod + 1], ntok word ids; ntok 0 = the name
			   * before (padding); a block's first entry has mod */
	const char *words; /* NUL-terminated */
	size_t nblk, nwords;
};

struct kmod {
	char name[64];
	char build_id[129];
	bool bid_read;
	uint64_t lo, hi;
};

struct symbolizer {
	struct sym_opts o;
	struct fentry *buckets[FILE_BUCKETS];
	struct fentry *lru_head, *lru_tail; /* head = most recent */
	size_t nfiles, bytes;
	uint64_t gen;
	struct pentry *procs;
	size_t nprocs;
	uint64_t proc_tick;
	/* kernel */
	struct ktab *ksyms;
	size_t nksyms; /* entries in ksyms (symbols and padding) */
	/* every KIDX_STEP-th address of ksyms: a lookup searches this small
	 * array, then one block of ksyms, instead of touching ~18 pages of a
	 * multi-MiB array that went cold since the last window */
	uint64_t *kidx;
	size_t nkidx;
	char *knames; /* unused: names are in ksyms */
	struct kmod *kmods;
	size_t nkmods;
	struct kmod kernel; /* vmlinux */
	uint64_t kloaded_ms;
	size_t kbytes;
	bool kloaded;
	/* vdso */
	struct elfsym *vdso;
	bool vdso_tried;
	bool no_maps_query; /* the kernel has no PROCMAP_QUERY */
	/* the pentry of the last sym_add_mapping() (records come in runs of
	 * one process): an index into procs, or SIZE_MAX */
	size_t last_add;
	/* mmap records of processes with no entry (never read: whole-host mode
	 * does not read new processes ahead), newest last, a ring of
	 * SYM_ORPHANS: what a process that exits before it is ever read is
	 * resolved with (proc_get_for) */
	struct orphan_rec *orphans;
	size_t orphan_next, norphans;
	struct opath *opaths[OPATH_BUCKETS];
	struct sym_stats st;
};

/* symbolize_batch.c: the batch's arena (strings and frames live until the
 * batch is reset), its results and mappings. NULL / -ENOMEM when out of
 * memory; sym_batch_add_mapping returns the mapping's index. */
void *sym_arena_alloc(struct batch_priv *p, size_t n);
const char *sym_arena_str(struct batch_priv *p, const char *s);
/* Empty the batch and size it for n results. */
int sym_batch_reset(struct sym_batch *b, size_t n);
int sym_batch_add_mapping(struct sym_batch *b, const struct sym_mapping *m);
/* r resolved to the one frame name (no file, no line) from src. */
int sym_one_frame(struct batch_priv *bp, struct sym_result *r, const char *name,
		  enum sym_source src);
/* Result i of out, for addr: cleared, no mapping yet, counted; out->n
 * covers it (a batch cut short still holds every result begun). */
struct sym_result *sym_result_begin(struct symbolizer *s, struct sym_batch *out, size_t i,
				    uint64_t addr);

#endif
