/*
 * ehframe.c - %rsp-based PC ranges of an x86-64 .eh_frame (see ehframe.h).
 */
#include "ehframe.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "bytes.h"

/* DWARF x86-64 register numbers */
#define R_RBP 6
#define R_RSP 7
#define R_RA 16

/* Pointer encodings (DW_EH_PE_*) */
#define PE_OMIT 0xff
#define PE_PCREL 0x10

/* A cursor over [p, end); a read past end sets bad and returns 0. */
struct cur {
	const uint8_t *p, *end;
	bool bad;
};

static uint64_t rd(struct cur *c, unsigned n)
{
	uint64_t v = 0;
	if (c->bad || (size_t)(c->end - c->p) < n) {
		c->bad = true;
		return 0;
	}
	for (unsigned i = 0; i < n; i++)
		v |= (uint64_t)c->p[i] << (8 * i);
	c->p += n;
	return v;
}

static uint64_t uleb(struct cur *c)
{
	size_t n = 0;
	uint64_t v;
	if (c->bad || c->p >= c->end || !pp_uvarint(c->p, (size_t)(c->end - c->p), &n, &v)) {
		c->bad = true;
		return 0;
	}
	c->p += n;
	return v;
}

static int64_t sleb(struct cur *c)
{
	uint64_t v = 0;
	unsigned shift = 0;
	uint8_t b;
	do {
		if (c->bad || c->p >= c->end || shift > 63) {
			c->bad = true;
			return 0;
		}
		b = *c->p++;
		v |= (uint64_t)(b & 0x7f) << shift;
		shift += 7;
	} while (b & 0x80);
	if (shift < 64 && (b & 0x40))
		v |= ~0ull << shift;
	return (int64_t)v;
}

/* An encoded pointer; pcrel relative to addr (the field's link-time
 * address). Only absptr/udata/sdata formats, optionally pcrel. */
static uint64_t rd_ptr(struct cur *c, uint8_t enc, uint64_t addr)
{
	uint64_t v;
	switch (enc & 0x0f) {
	case 0x00:
	case 0x04:
	case 0x0c:
		v = rd(c, 8);
		break;
	case 0x02:
		v = rd(c, 2);
		break;
	case 0x0a:
		v = (uint64_t)(int64_t)(int16_t)rd(c, 2);
		break;
	case 0x03:
		v = rd(c, 4);
		break;
	case 0x0b:
		v = (uint64_t)(int64_t)(int32_t)rd(c, 4);
		break;
	case 0x01:
		v = uleb(c);
		break;
	case 0x09:
		v = (uint64_t)sleb(c);
		break;
	default:
		c->bad = true;
		return 0;
	}
	switch (enc & 0x70) {
	case 0x00:
		return v;
	case PE_PCREL:
		return v + addr;
	default:
		c->bad = true;
		return 0; /* datarel, textrel, funcrel: unused on x86-64 */
	}
}

struct cie {
	size_t off; /* its offset in the section, for the cache */
	bool ok;
	uint64_t code_align;
	int64_t data_align;
	uint8_t fde_enc;
	bool aug_z;
	const uint8_t *ins, *ins_end; /* initial instructions */
};

/* The rules that matter: where the CFA, the return address and %rbp are. */
enum { RULE_SAME, RULE_OFFSET, RULE_OTHER };
struct state {
	uint64_t cfa_reg;
	int64_t cfa_off;
	bool cfa_ok; /* false: an expression or unknown register rule */
	int ra_rule, fp_rule;
	int64_t ra_off, fp_off; /* CFA-relative, bytes */
};

/* The CIE at off into *ce (ce->ok: usable). Its bytes are charged to
 * the budget: FDEs naming CIEs in turn re-parse them. 0 or -E2BIG. */
static int parse_cie(const uint8_t *sec, size_t len, size_t off, struct cie *ce, uint64_t *budget)
{
	struct cur c = { sec + off, sec + len, false };
	memset(ce, 0, sizeof(*ce));
	ce->off = off;
	if (off >= len)
		return 0;
	uint64_t l = rd(&c, 4);
	if (l == 0xffffffff || c.bad || l < 4 || l > (size_t)(c.end - c.p))
		return 0;
	if (*budget < l + 16)
		return -E2BIG;
	*budget -= l + 16;
	c.end = c.p + l;
	if (rd(&c, 4) != 0) /* CIE id */
		return 0;
	uint8_t ver = (uint8_t)rd(&c, 1);
	if (ver != 1 && ver != 3)
		return 0;
	const char *aug = (const char *)c.p;
	size_t augl = strnlen(aug, (size_t)(c.end - c.p));
	if (c.bad || augl == (size_t)(c.end - c.p))
		return 0;
	c.p += augl + 1;
	ce->code_align = uleb(&c);
	ce->data_align = sleb(&c);
	uint64_t ra = ver == 1 ? rd(&c, 1) : uleb(&c);
	if (c.bad || ra != R_RA || ce->code_align == 0 || ce->code_align > 16)
		return 0;
	ce->fde_enc = 0; /* absptr */
	if (augl && aug[0] == 'z') {
		ce->aug_z = true;
		uint64_t al = uleb(&c);
		if (c.bad || al > (size_t)(c.end - c.p))
			return 0;
		struct cur a = { c.p, c.p + al, false };
		c.p += al;
		for (size_t i = 1; i < augl; i++) {
			switch (aug[i]) {
			case 'R':
				ce->fde_enc = (uint8_t)rd(&a, 1);
				break;
			case 'L':
				(void)rd(&a, 1);
				break;
			case 'P': {
				uint8_t pe = (uint8_t)rd(&a, 1);
				(void)rd_ptr(&a, pe & 0x7f,
					     0); /* indirect bit: skip the value only */
				break;
			}
			default:
				return 0; /* 'S' signal frames, 'B', unknown */
			}
		}
		if (a.bad)
			return 0;
	} else if (augl) {
		return 0; /* "eh" and other pre-z forms */
	}
	ce->ins = c.p;
	ce->ins_end = c.end;
	ce->ok = true;
	return 0;
}

int ehf_rows_add(struct ehf_rows *rows, uint64_t start, uint64_t end, uint16_t ra, uint16_t fp)
{
	if (end <= start)
		return 0;
	if (rows->n && rows->v[rows->n - 1].end == start && rows->v[rows->n - 1].ra == ra &&
	    rows->v[rows->n - 1].fp == fp) {
		rows->v[rows->n - 1].end = end; /* merge with the previous row */
		return 0;
	}
	if (rows->n >= rows->max)
		return -E2BIG;
	if (rows->n == rows->cap) {
		size_t nc = rows->cap ? rows->cap * 2 : 256;
		if (nc > rows->max)
			nc = rows->max;
		struct ehf_row *nv = realloc(rows->v, nc * sizeof(*nv));
		if (!nv)
			return -ENOMEM;
		rows->v = nv;
		rows->cap = nc;
	}
	rows->v[rows->n++] = (struct ehf_row){ start, end, ra, fp };
	return 0;
}

/* The state s applies to [a, b): a row if the CFA is %rsp-based and both
 * the return address and the caller's %rbp can be found from %rsp. */
static int emit(struct ehf_rows *rows, const struct state *s, uint64_t a, uint64_t b, uint64_t lo,
		uint64_t hi)
{
	if (a < lo)
		a = lo;
	if (b > hi)
		b = hi;
	if (a >= b || !s->cfa_ok || s->cfa_reg != R_RSP || s->cfa_off < 8 || s->cfa_off % 8 ||
	    s->ra_rule != RULE_OFFSET || s->ra_off != -8)
		return 0;
	int64_t k = (s->cfa_off - 8) / 8, fp = 0;
	if (k > EHF_MAX_SLOT)
		return 0;
	if (s->fp_rule == RULE_OFFSET) {
		int64_t at = s->cfa_off + s->fp_off; /* from sp */
		/* A slot below %rsp was popped: GCC's epilogues say
		 * `.cfi_def_cfa_offset 8` after `pop %rbp` / `leave` but keep
		 * the rule "rbp at cfa-16" until the `ret`; the pop put the
		 * caller's value back in %rbp. */
		if (at < 0)
			fp = 0;
		else if (at % 8 || at / 8 >= k)
			return 0;
		else
			fp = at / 8 + 1;
	} else if (s->fp_rule != RULE_SAME) {
		return 0;
	}
	return ehf_rows_add(rows, a, b, (uint16_t)k, (uint16_t)fp);
}

/*
 * Run a CFA program over s from *loc; rows only when rows != NULL (the
 * CIE's initial instructions produce none). 1 understood, 0 given up,
 * negative errno.
 */
static int run(const struct cie *ce, struct cur *c, struct state *s, const struct state *init,
	       uint64_t *loc, uint64_t pc_end, struct ehf_rows *rows, uint64_t lo, uint64_t hi,
	       uint64_t *budget)
{
	struct state stack[EHF_MAX_STATES];
	int depth = 0, r;
	size_t n = (size_t)(c->end - c->p);
	if (*budget < n) {
		*budget = 0;
		return -E2BIG;
	}
	*budget -= n;
	while (c->p < c->end && !c->bad) { /* a bad read does not advance */
		uint8_t op = (uint8_t)rd(c, 1);
		uint64_t reg, delta = 0;
		int64_t off;
		switch (op >> 6) {
		case 1:
			delta = op & 0x3f;
			goto advance;
		case 2:
			reg = op & 0x3f;
			off = (int64_t)uleb(c) * ce->data_align;
			goto offset;
		case 3:
			reg = op & 0x3f;
			goto restore;
		}
		switch (op) {
		case 0x00:
			continue; /* nop */
		case 0x02:
			delta = rd(c, 1);
			goto advance;
		case 0x03:
			delta = rd(c, 2);
			goto advance;
		case 0x04:
			delta = rd(c, 4);
			goto advance;
		case 0x05:
			reg = uleb(c);
			off = (int64_t)uleb(c) * ce->data_align;
			goto offset;
		case 0x11:
			reg = uleb(c);
			off = sleb(c) * ce->data_align;
			goto offset;
		case 0x06:
			reg = uleb(c);
			goto restore;
		case 0x07:
		case 0x08: /* undefined, same_value */
			reg = uleb(c);
			if (reg == R_RA)
				s->ra_rule = RULE_OTHER; /* no return address: outermost */
			else if (reg == R_RBP)
				s->fp_rule = op == 0x08 ? RULE_SAME : RULE_OTHER;
			continue;
		case 0x0a: /* remember_state */
			if (depth == EHF_MAX_STATES)
				return 0;
			stack[depth++] = *s;
			continue;
		case 0x0b: /* restore_state */
			/* the CFA rule too: GCC brackets an early `ret`
			 * (def_cfa rsp+8) with remember/restore and relies on
			 * it, as libgcc's and LLVM's unwinders do */
			if (!depth)
				return 0;
			*s = stack[--depth];
			continue;
		case 0x0c: /* def_cfa */
			s->cfa_reg = uleb(c);
			s->cfa_off = (int64_t)uleb(c);
			s->cfa_ok = true;
			continue;
		case 0x12: /* def_cfa_sf */
			s->cfa_reg = uleb(c);
			s->cfa_off = sleb(c) * ce->data_align;
			s->cfa_ok = true;
			continue;
		case 0x0d:
			s->cfa_reg = uleb(c);
			continue; /* def_cfa_register */
		case 0x0e:
			s->cfa_off = (int64_t)uleb(c);
			continue; /* def_cfa_offset */
		case 0x13:
			s->cfa_off = sleb(c) * ce->data_align;
			continue;
		case 0x2e:
			(void)uleb(c);
			continue; /* GNU_args_size */
		case 0x09:	  /* register */
			reg = uleb(c);
			(void)uleb(c);
			if (reg == R_RA || reg == R_RBP)
				return 0;
			continue;
		case 0x10:
		case 0x16: { /* expression, val_expression */
			reg = uleb(c);
			uint64_t bl = uleb(c);
			if (reg == R_RA || reg == R_RBP || c->bad || bl > (size_t)(c->end - c->p))
				return 0;
			c->p += bl;
			continue;
		}
		case 0x14:
		case 0x15: /* val_offset(_sf) */
			reg = uleb(c);
			if (op == 0x14)
				(void)uleb(c);
			else
				(void)sleb(c);
			if (reg == R_RA || reg == R_RBP)
				return 0;
			continue;
		default:
			return 0; /* set_loc, def_cfa_expression, vendor ops */
		}
advance:
		if (c->bad)
			return 0;
		{
			uint64_t next = *loc + delta * ce->code_align;
			if (next < *loc || next > pc_end)
				return 0;
			if (rows && (r = emit(rows, s, *loc, next, lo, hi)) < 0)
				return r;
			*loc = next;
		}
		continue;
offset:
		if (reg == R_RA) {
			s->ra_rule = RULE_OFFSET;
			s->ra_off = off;
		} else if (reg == R_RBP) {
			s->fp_rule = RULE_OFFSET;
			s->fp_off = off;
		}
		continue;
restore:
		if (!init)
			return 0; /* restore in a CIE */
		if (reg == R_RA) {
			s->ra_rule = init->ra_rule;
			s->ra_off = init->ra_off;
		} else if (reg == R_RBP) {
			s->fp_rule = init->fp_rule;
			s->fp_off = init->fp_off;
		}
		continue;
	}
	if (c->bad)
		return 0;
	if (rows && (r = emit(rows, s, *loc, pc_end, lo, hi)) < 0)
		return r;
	return 1;
}

int ehframe_rows(const uint8_t *buf, size_t len, uint64_t sec_addr, uint64_t lo, uint64_t hi,
		 struct ehf_rows *rows, uint64_t *budget, struct ehf_stats *st)
{
	struct ehf_stats dummy;
	struct cie ce = { .ok = false, .off = SIZE_MAX };
	size_t off = 0;
	if (!st)
		st = &dummy;
	memset(st, 0, sizeof(*st));
	while (len - off >= 8) {
		struct cur c = { buf + off, buf + len, false };
		uint64_t l = rd(&c, 4);
		if (l == 0)
			break; /* terminator */
		if (l == 0xffffffff || l > (size_t)(c.end - c.p) || l < 4)
			break; /* 64-bit DWARF or garbage: stop */
		size_t next = off + 4 + (size_t)l;
		/* a fixed cost per entry, so that tiny entries too spend the budget */
		if (*budget < 16)
			return -E2BIG;
		*budget -= 16;
		c.end = c.p + l;
		size_t id_off = off + 4;
		uint32_t id = (uint32_t)rd(&c, 4);
		if (id == 0) { /* a CIE: parsed when an FDE names it */
			off = next;
			continue;
		}
		st->fdes++;
		if (id > id_off) {
			st->fdes_given_up++;
			off = next;
			continue;
		}
		size_t cie_off = id_off - id;
		if (cie_off != ce.off && parse_cie(buf, len, cie_off, &ce, budget) < 0)
			return -E2BIG;
		if (!ce.ok) {
			st->fdes_given_up++;
			off = next;
			continue;
		}
		uint64_t field = sec_addr + (uint64_t)(c.p - buf);
		uint64_t pc0 = rd_ptr(&c, ce.fde_enc, field);
		uint64_t range = rd_ptr(&c, ce.fde_enc & 0x0f, 0);
		if (ce.aug_z) {
			uint64_t al = uleb(&c);
			if (!c.bad && al <= (size_t)(c.end - c.p))
				c.p += al;
			else
				c.bad = true;
		}
		if (c.bad || pc0 + range < pc0 || range == 0 || pc0 >= hi || pc0 + range <= lo) {
			if (c.bad)
				st->fdes_given_up++;
			off = next;
			continue;
		}
		/* the CIE's initial rules, then the FDE's program */
		struct state init = { .cfa_ok = false,
				      .ra_rule = RULE_OTHER,
				      .fp_rule = RULE_SAME };
		struct cur ci = { ce.ins, ce.ins_end, false };
		uint64_t loc = pc0;
		int r = run(&ce, &ci, &init, NULL, &loc, pc0 + range, NULL, lo, hi, budget);
		if (r < 0)
			return r;
		if (r == 0 || loc != pc0) {
			st->fdes_given_up++;
			off = next;
			continue;
		}
		struct state s = init;
		size_t mark = rows->n;
		uint64_t mark_end = mark ? rows->v[mark - 1].end : 0;
		r = run(&ce, &c, &s, &init, &loc, pc0 + range, rows, lo, hi, budget);
		if (r < 0)
			return r;
		if (r == 0) {
			/* nothing from a half-understood FDE (its first row
			 * may have been merged into the previous one) */
			rows->n = mark;
			if (mark)
				rows->v[mark - 1].end = mark_end;
			st->fdes_given_up++;
		} else {
			st->fdes_used++;
		}
		off = next;
	}
	return 0;
}
