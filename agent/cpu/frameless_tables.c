/*
 * frameless_tables.c - from a parsed executable to the leaf tables the
 * CPU sampler's BPF walk reads (frameless.h, bpf/cpu_abi.h): Go's ranges
 * from its pclntab's pcsp, C/C++'s from .eh_frame, then sorted entries and
 * the per-2-KiB bitmap and window words.
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

/* ---- analysis ---------------------------------------------------------- */

/*
 * The return site of the call a g0-switching runtime function makes on g0
 * (bpf/cpu_abi.h, "Frameless Go code mid-stack"): the first `call *%rdi` (ff d7,
 * runtime.systemstack) or `call *%rax` (ff d0, runtime.asmcgocall; its
 * switching path comes before the one that stays) in the function's bytes.
 * Link-time address, 0 when absent: a false match only means the fix never
 * applies (no frame returns there), never a wrong frame. 0 too when the
 * function starts with `push %rbp` (Go 1.21 on gives these functions a
 * frame: the walk then crosses the switch by itself, and curg.sched.sp
 * points at the saved %rbp, not at a return address).
 */
static uint64_t switch_site(const struct elffile *ef, const struct elfsym *e, const char *name,
			    uint8_t modrm)
{
	struct gopcln_func fn;
	uint8_t code[512];
	if (gopcln_find_name(e->pcln, name, &fn) < 0 || fn.end <= fn.entry)
		return 0;
	size_t len = fn.end - fn.entry < sizeof(code) ? fn.end - fn.entry : sizeof(code);
	len = elffile_read_code(ef, fn.entry, code, len);
	if (len < 1 || code[0] == 0x55)
		return 0;
	for (size_t k = 0; k + 1 < len; k++)
		if (code[k] == 0xff && code[k + 1] == modrm)
			return fn.entry + k + 2;
	return 0;
}

/* Bytes of `mov %rbp, disp(%rsp)` at code (Go's amd64 prologue up to Go
 * 1.20 stores the caller's %rbp one instruction after `sub $n, %rsp`),
 * 0 when it is something else. */
static size_t bp_store_len(const uint8_t *c, size_t n)
{
	if (n >= 5 && c[0] == 0x48 && c[1] == 0x89 && c[2] == 0x6c && c[3] == 0x24)
		return 5; /* disp8 */
	if (n >= 8 && c[0] == 0x48 && c[1] == 0x89 && c[2] == 0xac && c[3] == 0x24)
		return 8; /* disp32 */
	return 0;
}

/*
 * True when [lo, hi) of e may hold a call: a call opcode byte (e8 rel32, or
 * ff /2 indirect) anywhere in it. Bytes of immediates can look like one: a
 * false yes only widens the span BPF checks (mid_span), never a wrong frame.
 */
static bool may_call(const struct elffile *ef, uint64_t lo, uint64_t hi)
{
	uint8_t c[4096];
	size_t n = elffile_read_code(ef, lo, c, hi - lo < sizeof(c) ? hi - lo : sizeof(c));
	if (n < hi - lo)
		return true; /* unread or long: assume it calls */
	for (size_t i = 0; i < n; i++)
		if (c[i] == 0xe8 || (c[i] == 0xff && i + 1 < n && ((c[i + 1] >> 3) & 7) == 2))
			return true;
	return false;
}

/* Widen b's mid-stack span (bpf/cpu_abi.h) to cover [lo, hi). */
static void mid_span(struct fl_bin *b, uint64_t lo, uint64_t hi)
{
	if (!b->mid_hi || lo < b->mid_lo)
		b->mid_lo = lo;
	if (hi > b->mid_hi)
		b->mid_hi = hi;
}

/* True when the function (entry pc) is Go assembly: its file ends in ".s";
 * with runtime, only the runtime package's. */
static bool go_asm_in(const struct gopcln *t, uint64_t entry, bool runtime)
{
	struct gopcln_frame fr[4];
	int n = gopcln_lookup(t, entry, fr, 4);
	if (n < 1 || !fr[n - 1].file)
		return false;
	size_t l = strlen(fr[n - 1].file);
	if (l <= 2 || strcmp(fr[n - 1].file + l - 2, ".s"))
		return false;
	return !runtime || (fr[n - 1].func && !strncmp(fr[n - 1].func, "runtime.", 8));
}

static bool go_asm(const struct gopcln *t, uint64_t entry)
{
	return go_asm_in(t, entry, false);
}

/*
 * Go: the ranges of e's pclntab where %rbp is not the function's own frame
 * (bpf/cpu_abi.h), from pcsp, the stack-pointer delta Go's own unwinder uses:
 * frameless functions whole (return address at [sp], the caller's %rbp in
 * %rbp), and assembly with a frame (which may use %rbp as data,
 * crypto/sha256.block): each pcsp run, return address at [sp + d] and the
 * caller's %rbp saved right below it, except where d is 0 (stack check,
 * `ret`) and the one instruction before the old prologue's %rbp store.
 * Compiled functions with a frame keep the plain walk (their prologues
 * and epilogues, a few instructions, stay approximate). Rows into *rows.
 */
/* Add [lo, hi), widened to whole chunks, to the marks (merged with the
 * last one when they touch: functions come in address order). */
static int mark_chunks(struct ehf_rows *m, uint64_t lo, uint64_t hi)
{
	lo &= ~(uint64_t)(FL_CHUNK - 1);
	hi = (hi + FL_CHUNK - 1) & ~(uint64_t)(FL_CHUNK - 1);
	if (m->n && lo <= m->v[m->n - 1].end && lo >= m->v[m->n - 1].start) {
		if (hi > m->v[m->n - 1].end)
			m->v[m->n - 1].end = hi;
		return 0;
	}
	return ehf_rows_add(m, lo, hi, 0, 0);
}

int fl_analyse_go(struct fl_bin *b, const struct elfsym *e, const struct elffile *ef,
		  const char *exe, struct ehf_rows *rows, struct ehf_rows *marks,
		  const char **cause)
{
	struct gopcln *t = e->pcln;
	uint64_t budget = FL_BUDGET, nfl = 0, nasm = 0;
	bool marks_ok = true;
	size_t n = gopcln_nfunc(t);
	struct gopcln_sprun run[64];
	for (size_t i = 0; i < n; i++) {
		int nr = gopcln_func_pcsp(t, i, &budget, run, 64), r = 0;
		if (nr == -E2BIG) {
			*cause = "analysis_budget";
			pp_log(PP_WARN, "frameless Go code not marked: pcsp tables too large",
			       "exe=%s functions=%zu", pp_q(exe), n);
			return 0;
		}
		if (nr <= 0)
			continue; /* no table, SPWRITE, corrupt, too many runs */
		if (nr == 1 && run[0].sp == 0) {
			r = ehf_rows_add(rows, run[0].lo, run[0].hi, 0, 0);
			nfl++;
			/* only assembly calls from a frameless function (the
			 * compiler gives a frame to any function that calls),
			 * and only the runtime's does (write barriers, stack
			 * switches); elsewhere a call byte is an immediate's
			 * (internal/bytealg's cmpbody...), and one such function
			 * far from asm_amd64.s widened the span to most of the
			 * text: a pp_frame_fix call for nearly every frame */
			if (go_asm_in(t, run[0].lo, true) && may_call(ef, run[0].lo, run[0].hi))
				mid_span(b, run[0].lo, run[0].hi);
		} else if (go_asm(t, run[0].lo)) {
			for (int k = 0; k < nr && !r; k++) {
				int32_t d = run[k].sp;
				if (d < 0 || d % 8 || d / 8 > EHF_MAX_SLOT)
					continue; /* not a frame we can name */
				uint64_t lo = run[k].lo;
				if (d) {
					uint8_t c[8];
					size_t st = bp_store_len(
						c, elffile_read_code(ef, lo, c, sizeof(c)));
					if (st && lo + st <= run[k].hi) {
						/* %rbp still the caller's until stored */
						r = ehf_rows_add(rows, lo, lo + st,
								 (uint16_t)(d / 8), 0);
						lo += st;
					}
				}
				if (!r)
					r = ehf_rows_add(rows, lo, run[k].hi, (uint16_t)(d / 8),
							 (uint16_t)(d / 8));
			}
			nasm++;
		} else if (marks_ok) {
			/* compiled with a frame: its prologue and epilogues lie
			 * around pcsp's steps (the stack check and frame set-up
			 * up to 16 bytes after the entry run, an `add` up to 8
			 * bytes before a `ret`); BPF decodes only chunks marked
			 * here (bpf/cpu_abi.h, "Go prologues and epilogues") */
			int m = mark_chunks(marks, run[0].lo, run[0].hi + 16);
			for (int k = 1; k < nr && !m; k++)
				m = mark_chunks(marks, run[k].lo - 8, run[k].lo + 16);
			if (m == -ENOMEM)
				return m;
			if (m)
				marks_ok = false; /* too many: none (the plain walk there) */
		}
		if (r == -ENOMEM)
			return r;
		if (r) {
			*cause = "too_many_ranges";
			return 0;
		}
	}
	if (!marks_ok)
		marks->n = 0;
	gopcln_text_range(t, &b->lo, &b->hi);
	b->switch_ret[0] = switch_site(ef, e, "runtime.systemstack", 0xd7);
	b->switch_ret[1] = switch_site(ef, e, "runtime.asmcgocall", 0xd0);
	for (int k = 0; k < 2; k++)
		if (b->switch_ret[k])
			mid_span(b, b->switch_ret[k], b->switch_ret[k] + 1);
	pp_log(PP_DEBUG, "frameless Go code found",
	       "exe=%s functions=%zu frameless=%" PRIu64 " assembly=%" PRIu64
	       " ranges=%zu edge_marks=%zu mid_span_bytes=%" PRIu64,
	       pp_q(exe), n, nfl, nasm, rows->n, marks->n, b->mid_hi - b->mid_lo);
	return 0;
}

/*
 * C/C++ (not Go): the %rsp-based ranges of the executable segment's
 * .eh_frame (ehframe.c). Rows into *rows.
 */
int fl_analyse_c(const struct elfsym *e, const struct elffile *ef, const char *exe,
		 struct ehf_rows *rows, const char **cause)
{
	const struct elffile_load *x = NULL;
	for (size_t i = 0; i < e->nloads && !x; i++)
		if (e->loads[i].flags & PF_X)
			x = &e->loads[i];
	if (!x)
		return 0; /* no code: nothing to do */
	uint8_t *eh = NULL;
	size_t ehlen = 0;
	uint64_t ehaddr = 0;
	int r = elffile_read_section(ef, ".eh_frame", FL_EH_MAX_SECTION, &eh, &ehlen, &ehaddr,
				     NULL);
	if (r == -ENOENT)
		return 0; /* no CFI: as before (a stripped-of-sections file) */
	if (r < 0) {
		*cause = r == -E2BIG ? "eh_frame_too_large" : "eh_frame_unreadable";
		pp_log(PP_WARN, "C/C++ frame table not built: .eh_frame not read",
		       "exe=%s error=%s", pp_q(exe), pp_q(strerror(-r)));
		return 0;
	}
	struct ehf_stats st;
	uint64_t budget = FL_EH_BUDGET;
	r = ehframe_rows(eh, ehlen, ehaddr, x->vaddr, x->vaddr + x->memsz, rows, &budget, &st);
	free(eh);
	if (r < 0) {
		if (r == -ENOMEM)
			return r;
		rows->n = 0;
		*cause = "analysis_budget";
		pp_log(PP_WARN,
		       "C/C++ frame table not built: .eh_frame too large or too many ranges",
		       "exe=%s fdes=%" PRIu64, pp_q(exe), st.fdes);
		return 0;
	}
	if (st.fdes_given_up) {
		/* not lost: those functions keep the plain walk; but counted */
		metric_inc("pushprof_cpu_frameless_fdes_skipped_total",
			   "FDEs of C/C++ executables whose CFA program is outside the supported "
			   "subset "
			   "(their samples keep plain frame-pointer walks).",
			   NULL, st.fdes_given_up);
		pp_log(PP_DEBUG, "C/C++ frame table: FDEs not understood (plain walk there)",
		       "exe=%s fdes=%" PRIu64 " given_up=%" PRIu64, pp_q(exe), st.fdes,
		       st.fdes_given_up);
	}
	return 0;
}

static int row_cmp(const void *a, const void *b)
{
	const struct ehf_row *x = a, *y = b;
	return x->start < y->start ? -1 : x->start > y->start;
}

/*
 * The rows (Go's or C/C++'s) as BPF's tables (bpf/cpu_abi.h): entries sorted
 * and disjoint (*entsp, *nentp), and two pool words per 2 KiB of text
 * (*bitsp: a bitmap marking every chunk a range touches, the pre-filter,
 * and the window of entries overlapping the 2 KiB). They cover the rows and
 * [b->lo, b->hi) when set (Go: its whole text, where frames returning into
 * frameless code are looked up). Returns 1 with tables, 0 without (*cause
 * says why when it is a failure), -ENOMEM.
 */
int fl_build_tables(struct fl_bin *b, struct ehf_rows *rows, const struct ehf_rows *marks,
		    const char *exe, uint64_t **bitsp, uint64_t **entsp, uint32_t *nentp,
		    const char **cause)
{
	uint64_t cover_lo = b->lo, cover_hi = b->hi; /* Go: all its text (the mid-stack rule) */
	if (!rows->n)
		return 0;
	/* sorted, disjoint (FDEs may overlap in a hostile file: the later
	 * start loses), so that BPF's binary search finds the one range */
	qsort(rows->v, rows->n, sizeof(*rows->v), row_cmp);
	size_t m = 0;
	uint64_t nent = 0;
	for (size_t i = 0; i < rows->n; i++) {
		if (m && rows->v[i].start < rows->v[m - 1].end)
			continue;
		rows->v[m++] = rows->v[i];
		nent += (rows->v[i].end - rows->v[i].start + CPU_CFA_LEN_MAX - 1) / CPU_CFA_LEN_MAX;
	}
	rows->n = m;
	uint64_t lo = rows->v[0].start, hi = rows->v[m - 1].end;
	if (cover_hi > cover_lo) {
		lo = cover_lo < lo ? cover_lo : lo;
		hi = cover_hi > hi ? cover_hi : hi;
	}
	lo &= ~(uint64_t)(FL_CHUNK - 1);
	/* two pool words per 2 KiB of text (bitmap, window: bpf/cpu_abi.h) */
	if (nent > CPU_CFA_MAX_ENTRIES ||
	    hi - lo > (uint64_t)CPU_FL_POOL_WORDS / 2 * CPU_FL_WORD_BYTES ||
	    hi - lo >= (1ull << 32)) {
		*cause = "text_too_large";
		pp_log(PP_WARN, "frame table not built: too many ranges or too much text",
		       "exe=%s ranges=%" PRIu64 " text_bytes=%" PRIu64, pp_q(exe), nent, hi - lo);
		return 0;
	}
	uint32_t nw = (uint32_t)((hi - lo + CPU_FL_WORD_BYTES - 1) / CPU_FL_WORD_BYTES);
	uint32_t nwords = 2 * nw;
	uint64_t *bits = calloc(nwords, sizeof(*bits));
	uint64_t *ent = malloc(nent * sizeof(*ent));
	if (!bits || !ent) {
		free(bits);
		free(ent);
		return -ENOMEM;
	}
	uint32_t n = 0;
	for (size_t i = 0; i < m; i++) {
		const struct ehf_row *rw = &rows->v[i];
		for (uint64_t a = rw->start; a < rw->end; a += CPU_CFA_LEN_MAX) {
			uint64_t len =
				rw->end - a < CPU_CFA_LEN_MAX ? rw->end - a : CPU_CFA_LEN_MAX;
			uint64_t o0 = a - lo, o1 = a - lo + len - 1; /* inclusive */
			ent[n] = CPU_CFA_ENTRY(o0, len, rw->ra, rw->fp);
			for (uint64_t c = o0 >> CPU_FL_CHUNK_SHIFT; c <= o1 >> CPU_FL_CHUNK_SHIFT;
			     c++)
				bits[2 * (c >> 6)] |= 1ull << (c & 63);
			/* entries are sorted: those overlapping a window are
			 * consecutive, the first one sets its start */
			for (uint64_t wi = o0 / CPU_FL_WORD_BYTES; wi <= o1 / CPU_FL_WORD_BYTES;
			     wi++) {
				uint64_t *win = &bits[2 * wi + 1];
				if (!*win)
					*win = (uint64_t)n << 32;
				(*win)++;
			}
			n++;
		}
	}
	/* Go's prologue and epilogue chunks: a bit, no entry (bpf/cpu_abi.h) */
	for (size_t i = 0; i < marks->n; i++) {
		uint64_t m0 = marks->v[i].start, m1 = marks->v[i].end;
		if (m0 < lo)
			m0 = lo;
		if (m1 > hi)
			m1 = hi;
		for (uint64_t c = (m0 - lo) >> CPU_FL_CHUNK_SHIFT;
		     m0 < m1 && c <= (m1 - 1 - lo) >> CPU_FL_CHUNK_SHIFT; c++)
			bits[2 * (c >> 6)] |= 1ull << (c & 63);
	}
	b->lo = lo;
	b->hi = hi;
	b->nwords = nwords;
	b->ntab = n;
	*bitsp = bits;
	*entsp = ent;
	*nentp = n;
	pp_log(PP_DEBUG, "frame table built", "exe=%s ranges=%u words=%u", pp_q(exe), n, nwords);
	return 1;
}

/* The PT_LOAD segment holding [lo, hi): its vaddr and offset give the bias. */
bool fl_text_segment(const struct elfsym *e, uint64_t lo, uint64_t *vaddr, uint64_t *off)
{
	for (size_t i = 0; i < e->nloads; i++) {
		const struct elffile_load *l = &e->loads[i];
		if ((l->flags & PF_X) && lo >= l->vaddr && lo - l->vaddr < l->memsz) {
			*vaddr = l->vaddr;
			*off = l->offset;
			return true;
		}
	}
	return false;
}
