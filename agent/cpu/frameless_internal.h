/*
 * frameless_internal.h - what frameless.c (executables, pools, processes)
 * and frameless_tables.c (from a parsed executable to the tables BPF reads)
 * share. Not for other modules.
 */
#ifndef PUSHPROF_FRAMELESS_INTERNAL_H
#define PUSHPROF_FRAMELESS_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "cpu.h"
#include "ehframe.h"
#include "elffile.h"
#include "elfsym.h"

/* pcsp entries decoded per analysis: real tables have a few per function
 * (Go 1.19's own toolchain: ~200k for 40k functions); a hostile one stops
 * here after ~0.1 s. */
#define FL_BUDGET (32u << 20)
#define FL_CHUNK (1u << CPU_FL_CHUNK_SHIFT)
/* chunk runs marked for Go's prologue/epilogue decoding, per executable
 * (merged runs: a large Go program has about one per function) */
#define FL_MAX_MARKS (1u << 20)
/* C/C++: the largest .eh_frame read, and the bytes of it decoded per
 * analysis (16 per entry plus its CFA program): real sections are a few
 * MB (a 100 MB C++ binary: ~10 MB); a hostile one stops here after a
 * fraction of a second. */
#define FL_EH_MAX_SECTION (64u << 20)
#define FL_EH_BUDGET (64u << 20)

struct fl_bin {
	uint64_t dev, ino;
	int refs;			/* fl_pid entries naming this bin */
	bool have;			/* a bitmap in the pool */
	uint32_t word, nwords;		/* its place in the pool */
	uint32_t tab, ntab;		/* its table in the fl_cfa pool */
	bool go;			/* Go (pclntab) tables: the mid-stack rule applies */
	uint64_t lo, hi;		/* link-time text covered: [lo, hi), lo 32-aligned */
	uint64_t seg_vaddr, seg_offset; /* PT_LOAD holding the text (bias) */
	uint64_t switch_ret[2];		/* link-time g0 switch return sites, 0: none */
	uint64_t mid_lo, mid_hi;	/* link-time span of the mid-stack rule (bpf/cpu_abi.h) */
	uint64_t used;			/* last use (tick), for eviction */
	/* The executable's symbols, held while the bin has a table: the
	 * symbolizer and gobin, which load the same file for the same
	 * processes, take this copy instead of loading their own
	 * (elfshare.h). NULL without a table. */
	struct elfsym *e;
};

/*
 * Go: the ranges of e's pclntab where %rbp is not the function's own frame,
 * into *rows, and the prologue/epilogue chunks into *marks; C/C++: the
 * %rsp-based ranges of .eh_frame into *rows. 0 (with *cause set when the
 * executable gets no table), -ENOMEM.
 */
int fl_analyse_go(struct fl_bin *b, const struct elfsym *e, const struct elffile *ef,
		  const char *exe, struct ehf_rows *rows, struct ehf_rows *marks,
		  const char **cause);
int fl_analyse_c(const struct elfsym *e, const struct elffile *ef, const char *exe,
		 struct ehf_rows *rows, const char **cause);
/* The rows as BPF's tables (entries and pool words, malloc'd): 1 with
 * tables, 0 without (*cause says why when it is a failure), -ENOMEM. */
int fl_build_tables(struct fl_bin *b, struct ehf_rows *rows, const struct ehf_rows *marks,
		    const char *exe, uint64_t **bitsp, uint64_t **entsp, uint32_t *nentp,
		    const char **cause);
/* The PT_LOAD segment holding [lo, hi): its vaddr and offset give the bias. */
bool fl_text_segment(const struct elfsym *e, uint64_t lo, uint64_t *vaddr, uint64_t *off);

#endif
