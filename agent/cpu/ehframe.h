/*
 * ehframe.h - from an x86-64 .eh_frame section, the PC ranges where a
 * frame-pointer walk would miss the caller: the canonical frame address
 * (CFA) is %rsp-based, so %rbp does not point at this function's frame
 * (first instruction, after `push %rbp` before `mov %rsp,%rbp`, at `ret`
 * after `leave`/`pop %rbp`, whole leaves built without a frame pointer).
 * For each such range the table says where the return address is
 * ([sp + 8*ra]) and where the caller's %rbp is: still in %rbp (fp 0), or
 * saved at [sp + 8*(fp-1)] (code that pushed %rbp and uses it as data).
 * bpf/cpu_abi.h ("C and C++: prologues, epilogues, frameless leaves") says how
 * the sampler uses it.
 *
 * .eh_frame is the target's bytes, hence hostile: every read is bounds
 * checked, a budget of decoded bytes bounds the time (-E2BIG when spent),
 * and the row count is capped by the caller (-E2BIG too). An FDE using
 * anything outside the supported subset (advance_loc*, def_cfa*,
 * offset*, restore*, same_value, undefined, remember/restore_state up to
 * EHF_MAX_STATES deep, nop, GNU_args_size; other registers' rules are
 * ignored) contributes no rows: its samples keep the plain walk.
 *
 * Pure and reentrant: no global state, no I/O.
 */
#ifndef PUSHPROF_EHFRAME_H
#define PUSHPROF_EHFRAME_H

#include <stddef.h>
#include <stdint.h>

/* Largest ra / fp slot index kept (frames up to 8 KiB below the CFA). */
#define EHF_MAX_SLOT 1023
#define EHF_MAX_STATES 8

struct ehf_row {
	uint64_t start, end; /* link-time PCs [start, end) */
	uint16_t ra;	     /* return address at [sp + 8*ra] */
	uint16_t fp;	     /* 0: caller's %rbp in %rbp; else at [sp + 8*(fp-1)] */
};

struct ehf_rows {
	struct ehf_row *v; /* malloc'd, owned by the caller (free()) */
	size_t n, cap;
	size_t max; /* more rows than this: -E2BIG */
};

struct ehf_stats {
	uint64_t fdes;		/* FDEs seen */
	uint64_t fdes_used;	/* FDEs whose whole program was understood */
	uint64_t fdes_given_up; /* unsupported opcodes, encodings, bad bounds */
};

/*
 * Append [start, end) with its slots to rows, merged into the last row when
 * it ends at start with the same slots; an empty range adds nothing.
 * 0, -E2BIG past rows->max, -ENOMEM. (ehframe_rows() uses it; so do other
 * producers of the same table, e.g. Go's pcsp in frameless.c.)
 */
int ehf_rows_add(struct ehf_rows *rows, uint64_t start, uint64_t end, uint16_t ra, uint16_t fp);

/*
 * Parse buf[0, len), the .eh_frame section whose first byte has the
 * link-time address sec_addr; append to rows the ranges that lie inside
 * [lo, hi). *budget is decreased by the bytes decoded. Returns 0, -E2BIG
 * (budget spent or rows->max reached: rows holds what was found so far
 * and should not be used), -ENOMEM. Malformed input is never an error:
 * what cannot be read is skipped and counted in st (may be NULL).
 */
int ehframe_rows(const uint8_t *buf, size_t len, uint64_t sec_addr, uint64_t lo, uint64_t hi,
		 struct ehf_rows *rows, uint64_t *budget, struct ehf_stats *st);

#endif
