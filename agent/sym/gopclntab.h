/*
 * gopclntab.h - Go's own function table (.gopclntab) read from its bytes.
 *
 * Every Go binary carries .gopclntab, even when built with -ldflags='-s -w'
 * (which drops .symtab and DWARF): it maps a PC to the function, file and
 * line, including functions inlined at that PC. This module decodes it
 * from a buffer, so it serves files on disk, stripped binaries, PIE
 * (callers subtract the load bias first: all PCs here are link-time
 * addresses) and fuzzing alike.
 *
 * Layouts handled (magic in the first 4 bytes, little-endian, 8-byte ptrs):
 *   0xfffffffa Go 1.16-1.17   functions, files, lines (no inlined frames:
 *                             funcdata are absolute pointers there; untested
 *                             here, there is no such toolchain on this host)
 *   0xfffffff0 Go 1.18-1.19   + inlined frames when gofunc is supplied
 *                             (tested with Go 1.19; 1.18 has the same layout)
 *   0xfffffff1 Go 1.20+       + inlined frames (1.20 inline-tree layout; tested
 *                             with Go 1.23 from bookworm-backports). Go 1.26
 *                             writes textStart = 0: text_start below is used
 *                             then (untested: no Go 1.26 toolchain here).
 * A gofunc that does not decode plausibly (sampled inline-tree entries must
 * name functions and point inside them) is ignored: no inlined frames rather
 * than wrong ones.
 *
 * The table is hostile input: every offset and length is bounds-checked
 * against the buffers given; a corrupt table yields errors or fewer
 * frames, never an out-of-bounds read. Strings returned point INTO the
 * caller's buffers (they are NUL-terminated there; checked) and live as
 * long as those buffers.
 */
#ifndef PUSHPROF_GOPCLNTAB_H
#define PUSHPROF_GOPCLNTAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

#define GOPCLN_MAGIC_116 0xfffffffau
#define GOPCLN_MAGIC_118 0xfffffff0u
#define GOPCLN_MAGIC_120 0xfffffff1u

/* What the table is read from. Buffers are borrowed: keep them alive and
 * unchanged until gopcln_free(). */
struct gopcln_src {
	const uint8_t *tab; /* .gopclntab section bytes */
	size_t tab_len;
	/* runtime.text (moduledata.text; .text sh_addr for internally linked
	 * binaries). Used when the table does not record it: Go 1.16-1.17,
	 * and Go 1.26+, whose header field is 0. */
	uint64_t text_start;
	/* Bytes starting at moduledata.gofunc ("go.func.*"), up to the end of
	 * the section holding it; NULL -> no inlined frames. elfsym finds it. */
	const uint8_t *gofunc;
	size_t gofunc_len;
	/* Go minor version if known (19 for go1.19.8), 0 when unknown. */
	int go_minor; /* informational; the layout comes from the magic */
};

struct gopcln;

struct gopcln_func {
	const char *name;    /* NULL when the name offset is corrupt */
	uint64_t entry, end; /* [entry, end) link-time addresses */
};

struct gopcln_frame {
	const char *func; /* NULL when corrupt */
	const char *file; /* NULL when unknown */
	int32_t line;	  /* 0 when unknown */
	bool inlined;	  /* true for all but the outermost (physical) frame */
};

/* Validate the header and set up lookups (src is the module's options:
 * the buffers it reads, borrowed). 0 with *out set; -EINVAL on a bad table
 * or -ENOMEM, with err filled (when given) and *out NULL. Read-only once
 * made: several threads may look up in one table at once. */
int gopcln_new(const struct gopcln_src *src, struct gopcln **out, struct pp_err *err);
/* NULL-safe; the buffers are the caller's. */
void gopcln_free(struct gopcln *t);

/* 116, 118 or 120: which layout the magic selected. */
int gopcln_layout(const struct gopcln *t);
/* True when inlined frames will be reported (gofunc given and usable). */
bool gopcln_has_inline(const struct gopcln *t);
/* Text range covered by the table: [lo, hi). */
void gopcln_text_range(const struct gopcln *t, uint64_t *lo, uint64_t *hi);

size_t gopcln_nfunc(const struct gopcln *t);
/* i-th function in address order; -ERANGE past the end, -EINVAL if the
 * entry is corrupt. */
int gopcln_func_at(const struct gopcln *t, size_t i, struct gopcln_func *f);
/* The function whose [entry, end) holds pc; -ENOENT if none. Returns its
 * index (>= 0) on success. */
long gopcln_find(const struct gopcln *t, uint64_t pc, struct gopcln_func *f);

/* The function named exactly name (linear scan: for one-off lookups such as
 * locating runtime.mProf_Malloc in a stripped binary). Index or -ENOENT. */
long gopcln_find_name(const struct gopcln *t, const char *name, struct gopcln_func *f);

/*
 * Frameless: true when the i-th function's pcsp table is 0 at every PC
 * (it never moves SP: no frame, no saved %rbp, its return address stays
 * at [SP]), as for Go assembly declared $0-N and compiled leaves without
 * locals. Functions that write SP in ways pcsp does not track
 * (funcFlag_SPWRITE: systemstack, morestack, gogo...) and the top frames
 * (funcFlag_TOPFRAME) are never frameless here: [SP] need not be a return
 * address in them. *budget (decoded table entries still allowed, shared
 * across calls) bounds the work a hostile table can cause; -E2BIG once it
 * is spent. Returns 1 (frameless), 0 (not, or no table), -EINVAL (corrupt
 * entry), -ERANGE (past the end).
 */
int gopcln_func_frameless(const struct gopcln *t, size_t i, uint64_t *budget);

/* A run of PCs [lo, hi) (link-time) over which the i-th function's pcsp is sp. */
struct gopcln_sprun {
	uint64_t lo, hi;
	int32_t sp; /* bytes below the entry SP (the return address) */
};

/*
 * The i-th function's pcsp table as runs, in address order, equal
 * neighbours merged: up to max of them into runs. Returns their number,
 * 0 when the function has no table or writes SP in ways pcsp does not
 * track (funcFlag_SPWRITE, funcFlag_TOPFRAME: see above), -ENOSPC past max
 * runs, -E2BIG when *budget (shared, as above) is spent, -EINVAL on a
 * corrupt entry or table, -ERANGE past the end.
 */
int gopcln_func_pcsp(const struct gopcln *t, size_t i, uint64_t *budget, struct gopcln_sprun *runs,
		     size_t max);

/*
 * pc -> frames, innermost first: the inlined calls at pc (if any), then the
 * physical function. For a return address pass pc - 1 (the call
 * instruction), as the Go runtime does. Returns the number of frames
 * written (1..max), -ENOENT when pc is in no function, or another negative
 * code when the function's entry is corrupt. The physical frame is always
 * the last one written; inlined frames beyond max - 1 are dropped.
 */
int gopcln_lookup(const struct gopcln *t, uint64_t pc, struct gopcln_frame *frames, int max);

#endif
