/* Unit test of agent/cpu/ehframe.c on a hand-built .eh_frame: a function with
 * a frame-pointer prologue and an early `ret` bracketed by
 * remember/restore_state (GCC's shape), a frameless leaf with a stack
 * frame, an FDE with an unsupported instruction, a truncated entry; and
 * the budget and row limits. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ehframe.h"
#include "check.h"

static uint8_t sec[512];
static size_t n;
static const uint64_t SEC = 0x2000;

static void b(unsigned v) { sec[n++] = (uint8_t)v; }
static void u32(uint32_t v) { for (int i = 0; i < 4; i++) b((v >> (8 * i)) & 0xff); }
static void put32(size_t at, uint32_t v) { for (int i = 0; i < 4; i++) sec[at + i] = (v >> (8 * i)) & 0xff; }
static void pad(size_t start) { while ((n - start) % 4) b(0); /* DW_CFA_nop */ }

/* an FDE for [pc, pc + len) with the given program, naming the CIE at 0 */
static void fde(uint64_t pc, uint32_t len, const uint8_t *prog, size_t plen)
{
	size_t start = n;
	u32(0);				/* length, patched */
	u32((uint32_t)(n - 0));		/* CIE pointer: back to offset 0 */
	u32((uint32_t)(pc - (SEC + n)));	/* pcrel sdata4 */
	u32(len);
	b(0);				/* augmentation data length */
	for (size_t i = 0; i < plen; i++)
		b(prog[i]);
	pad(start + 4);
	put32(start, (uint32_t)(n - start - 4));
}

static const struct ehf_row *find(const struct ehf_rows *r, uint64_t pc)
{
	for (size_t i = 0; i < r->n; i++)
		if (pc >= r->v[i].start && pc < r->v[i].end)
			return &r->v[i];
	return NULL;
}

int main(void)
{
	/* CIE: "zR", code 1, data -8, ra 16, FDE pointers pcrel|sdata4;
	 * CFA = rsp+8, ra at cfa-8 */
	size_t start = n;
	u32(0);
	u32(0);
	b(1);
	b('z'); b('R'); b(0);
	b(1); b(0x78); b(16);
	b(1); b(0x1b);
	b(0x0c); b(7); b(8);
	b(0x90); b(1);
	pad(start + 4);
	put32(start, (uint32_t)(n - start - 4));

	/* 0x1000: push %rbp; mov %rsp,%rbp (at 0x1001, 3 bytes); ... early
	 * `pop %rbp; ret` with the ret at 0x1014; body on to 0x1020 */
	static const uint8_t f1[] = {
		0x41, 0x0e, 16, 0x86, 2,	/* +1: cfa rsp+16, rbp at cfa-16 */
		0x43, 0x0d, 6,			/* +3: cfa rbp+16 */
		0x50, 0x0a, 0x0c, 7, 8,		/* +16: remember; cfa rsp+8 (rbp rule kept) */
		0x41, 0x0b,			/* +1: restore (cfa rbp+16 again) */
	};
	fde(0x1000, 0x20, f1, sizeof(f1));
	/* 0x1020: frameless leaf, `sub $0xd0,%rsp` (4 bytes), ... */
	static const uint8_t f2[] = { 0x44, 0x0e, 0xd8, 0x01 };
	fde(0x1020, 0x10, f2, sizeof(f2));
	/* 0x1030: DW_CFA_def_cfa_expression: given up, no rows */
	static const uint8_t f3[] = { 0x41, 0x0f, 1, 0x77 };
	fde(0x1030, 0x10, f3, sizeof(f3));
	/* 0x1040: push %rbx only, %rbp used as data after `push %rbp` */
	static const uint8_t f4[] = { 0x41, 0x0e, 16, 0x86, 2, 0x41, 0x0e, 24, 0x83, 3 };
	fde(0x1040, 0x10, f4, sizeof(f4));
	size_t good = n;
	/* a truncated entry at the end: its length runs past the section */
	u32(100);
	u32(7);

	struct ehf_rows r = { .max = 64 };
	struct ehf_stats st;
	uint64_t budget = 1 << 20;
	CHECK(ehframe_rows(sec, n, SEC, 0x1000, 0x2000, &r, &budget, &st) == 0, "the whole section parses");
	CHECK(st.fdes == 4 && st.fdes_used == 3 && st.fdes_given_up == 1,
	      "4 FDEs, 3 used, 1 given up");
	const struct ehf_row *w;
	CHECK((w = find(&r, 0x1000)) && w->ra == 0 && w->fp == 0 && w->end == 0x1001, "0x1000: at entry");
	CHECK((w = find(&r, 0x1001)) && w->ra == 1 && w->fp == 1 && w->end == 0x1004, "0x1001: after push %%rbp");
	CHECK(!find(&r, 0x1004) && !find(&r, 0x1013), "0x1004-0x1013: frame pointer set, no row");
	/* the early ret: the popped slot (below %rsp) means %rbp holds it */
	CHECK((w = find(&r, 0x1014)) && w->ra == 0 && w->fp == 0 && w->end == 0x1015, "0x1014: the early ret");
	CHECK(!find(&r, 0x1015) && !find(&r, 0x101f), "0x1015-0x101f: state restored, no row");
	CHECK((w = find(&r, 0x1020)) && w->ra == 0 && w->fp == 0 && w->end == 0x1024, "0x1020: leaf at entry");
	CHECK((w = find(&r, 0x1024)) && w->ra == 26 && w->fp == 0 && w->end == 0x1030, "0x1024: leaf after sub $0xd0");
	CHECK(!find(&r, 0x1030) && !find(&r, 0x103f), "0x1030: the given-up FDE has no rows");
	CHECK((w = find(&r, 0x1041)) && w->ra == 1 && w->fp == 1, "0x1041: after push %%rbp");
	CHECK((w = find(&r, 0x1042)) && w->ra == 2 && w->fp == 2 && w->end == 0x1050, "0x1042: %%rbp saved, used as data");
	size_t all = r.n;

	/* only what lies in [lo, hi) */
	r.n = 0;
	budget = 1 << 20;
	CHECK(ehframe_rows(sec, good, SEC, 0x1020, 0x1030, &r, &budget, NULL) == 0, "[0x1020, 0x1030) parses");
	CHECK(r.n == 2 && r.v[0].start == 0x1020 && r.v[1].end == 0x1030, "only the leaf's 2 rows: %zu", r.n);

	/* limits: rows, budget */
	r.n = 0;
	r.max = all - 1;
	budget = 1 << 20;
	CHECK(ehframe_rows(sec, n, SEC, 0x1000, 0x2000, &r, &budget, NULL) == -E2BIG, "one row too many: -E2BIG");
	r.n = 0;
	r.max = 64;
	budget = 40;
	CHECK(ehframe_rows(sec, n, SEC, 0x1000, 0x2000, &r, &budget, NULL) == -E2BIG, "budget of 40 bytes: -E2BIG");

	/* every truncation of the section parses without harm */
	for (size_t len = 0; len <= n; len++) {
		r.n = 0;
		budget = 1 << 20;
		CHECK(ehframe_rows(sec, len, SEC, 0x1000, 0x2000, &r, &budget, NULL) == 0,
		      "truncated to %zu bytes", len);
	}
	free(r.v);
	return check_done();
}
