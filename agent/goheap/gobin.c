/*
 * gobin.c - Go executable analysis: detection, the runtime's memory-profile
 * variables (symtab or decoded from code), load bias, symbolization, and
 * the opt-in MemProfileRate write. The file is opened and parsed once by
 * elffile.c (labels: build ids, Go version, as every module reports them)
 * and its symbols loaded by elfsym.c from that same parse, or borrowed
 * from another module that loaded them already (elfshare.h).
 */
#include "gobin.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "elffile.h"
#include "elfshare.h"
#include "elfsym.h"
#include "gobucket.h"
#include "gopclntab.h"
#include "procinfo.h"
#include "remotemem.h"

#define MAX_FUNC_CODE (256u << 10)

/* gobin.h's label buffers hold whatever elffile renders */
_Static_assert(sizeof(((struct gobin *)0)->gnu_build_id) == ELFFILE_BUILD_ID_HEX, "gnu_build_id");
_Static_assert(sizeof(((struct gobin *)0)->go_build_id) == ELFFILE_GO_BUILD_ID, "go_build_id");
_Static_assert(sizeof(((struct gobin *)0)->go_version) == sizeof(((struct elffile *)0)->go_version),
	       "go_version");

struct gobin_impl {
	int refs;	   /* gobins sharing this analysis (gobin_share) */
	struct elfsym *es; /* functions: names, ranges, file/line; NULL if unreadable */
	dev_t st_dev;
	ino_t st_ino;
};

/* ---- Function table ---------------------------------------------------
 * elfsym's: .gopclntab (names, files, lines, inlined frames; present even
 * in stripped builds) and, outside the Go text, ELF function symbols.
 */
static int func_range(const struct elfsym *e, const char *name, uint64_t *start, uint64_t *end)
{
	if (e->pcln) {
		size_t n = gopcln_nfunc(e->pcln);
		for (size_t i = 0; i < n; i++) {
			struct gopcln_func f;
			if (gopcln_func_at(e->pcln, i, &f) == 0 && f.name &&
			    !strcmp(f.name, name)) {
				*start = f.entry;
				*end = f.end;
				return 0;
			}
		}
	}
	for (size_t i = 0; i < e->nsyms; i++) {
		const struct elfsym_sym *y = &e->syms[i];
		if (y->name < e->names_len && !strcmp(e->names + y->name, name) && y->size) {
			*start = y->addr;
			*end = y->addr + y->size;
			return 0;
		}
	}
	return -ENOENT;
}

#define MAX_PCLN_FRAMES 64

static size_t func_frames(const struct elfsym *e, uint64_t pc, struct gobin_frame *fr, size_t max)
{
	if (!max)
		return 0;
	if (e->pcln) {
		struct gopcln_frame pf[MAX_PCLN_FRAMES];
		struct gopcln_func f;
		int n = gopcln_lookup(e->pcln, pc, pf,
				      max < MAX_PCLN_FRAMES ? (int)max : MAX_PCLN_FRAMES);
		if (n > 0 && gopcln_find(e->pcln, pc, &f) >= 0) {
			for (int i = 0; i < n; i++)
				fr[i] = (struct gobin_frame){
					.function = pf[i].func ? pf[i].func : "?",
					.file = pf[i].file ? pf[i].file : "",
					.line = pf[i].line,
					.entry = f.entry,
				};
			return (size_t)n;
		}
	}
	uint64_t start;
	const char *name = elfsym_lookup(e, pc, &start);
	if (!name)
		return 0;
	fr[0] = (struct gobin_frame){ .function = name, .file = "", .line = 0, .entry = start };
	return 1;
}

/* ---- Variables from .symtab ------------------------------------------ */

static void vars_from_symtab(struct gobin *g, const struct elffile *ef)
{
	static const char *const names[] = {
		"runtime.mbuckets",
		"runtime.MemProfileRate",
		"runtime.mProfCycle",
	};
	uint64_t v[3] = { 0 };
	if (!ef->has_symtab || elffile_find_symbols(ef, names, 3, v, NULL) != 3 || !v[0] || !v[1] ||
	    !v[2])
		return;
	g->vars = (struct gobin_vars){ .mbuckets = v[0],
				       .mem_profile_rate = v[1],
				       .mprof_cycle = v[2],
				       .source = GOBIN_VARS_SYMTAB };
}

/* ---- Variables decoded from runtime code (stripped binaries, amd64) ---- */

/*
 * RIP-relative moves between a register and a global, the way the Go
 * compiler reads and writes package variables: "MOV r32, [rip+disp32]"
 * (8B /r, no REX.W), "MOV r64, [rip+disp32]" (REX.W 8B /r),
 * "MOV [rip+disp32], r64" (REX.W 89 /r) and "LEA r64, [rip+disp32]"
 * (REX.W 8D /r, the address taken for an atomic store). Instruction boundaries are not
 * known, so every byte offset is tried; spurious matches are removed by
 * intersecting the targets over several functions that all use the
 * variable, by requiring an aligned address in a writable data section, and
 * finally by checking the live value.
 */
enum { LOAD32 = GOBIN_LOAD32, LOAD64 = GOBIN_LOAD64, STORE64 = GOBIN_STORE64, LEA64 = GOBIN_LEA64 };

struct targets {
	uint64_t v[64];
	size_t n;
};

static void targets_add(struct targets *t, uint64_t a)
{
	for (size_t i = 0; i < t->n; i++)
		if (t->v[i] == a)
			return;
	if (t->n < sizeof(t->v) / sizeof(t->v[0]))
		t->v[t->n++] = a;
}

/* [a, a+size) inside one of Go's writable data sections (.bss, .data and
 * their noptr twins; NOBITS included). */
static bool in_data(const struct elffile *ef, uint64_t a, unsigned size)
{
	for (size_t i = 0; i < ef->nsecs; i++) {
		const struct elffile_sec *s = &ef->secs[i];
		if (!(s->flags & SHF_ALLOC) || s->size == 0 || a < s->addr ||
		    a - s->addr > s->size || size > s->size - (a - s->addr))
			continue;
		return (s->flags & SHF_WRITE) && !(s->flags & SHF_EXECINSTR) &&
		       (!strcmp(s->name, ".bss") || !strcmp(s->name, ".noptrbss") ||
			!strcmp(s->name, ".data") || !strcmp(s->name, ".noptrdata"));
	}
	return false;
}

void gobin_scan_moves(const uint8_t *code, size_t len, uint64_t addr, int kind, uint64_t *out,
		      size_t *nout, size_t max)
{
	uint8_t opcode = kind == STORE64 ? 0x89 : kind == LEA64 ? 0x8D : 0x8B;
	*nout = 0;
	for (size_t i = 0; i + 7 <= len; i++) {
		size_t op; /* index of the opcode byte */
		if (kind != LOAD32) {
			if ((code[i] & 0xF8) != 0x48) /* REX.W, any R/X/B */
				continue;
			op = i + 1;
		} else {
			op = i;
			if (i > 0 && (code[i - 1] & 0xF8) == 0x48)
				continue; /* REX.W before: a 64-bit move */
		}
		if (op + 6 > len || code[op] != opcode || (code[op + 1] & 0xC7) != 0x05)
			continue;
		int32_t disp;
		memcpy(&disp, code + op + 2, 4);
		uint64_t end = addr + op + 6;
		if (*nout < max)
			out[(*nout)++] = end + (int64_t)disp;
	}
}

static int func_code(const struct gobin *g, const struct elffile *ef, const char *name,
		     uint8_t **code, size_t *len, uint64_t *start)
{
	uint64_t s, e;
	if (!g->impl->es || func_range(g->impl->es, name, &s, &e) || e <= s)
		return -ENOENT;
	if (e - s > MAX_FUNC_CODE)
		return -E2BIG;
	*code = malloc(e - s);
	if (!*code)
		return -ENOMEM;
	if (elffile_read_code(ef, s, *code, e - s) != e - s) {
		free(*code);
		return -EFAULT;
	}
	*len = e - s;
	*start = s;
	return 0;
}

struct use {
	const char *func;
	int kind;
};

/* The single target used (as kind) by every function of uses[] that exists,
 * aligned and within a data section; 0 when not unique. *nfuncs: how many
 * functions were found. */
static uint64_t common_target(const struct gobin *g, const struct elffile *ef,
			      const struct use *uses, size_t nuses, unsigned align,
			      unsigned *nfuncs)
{
	struct targets acc = { .n = 0 };
	bool first = true;
	*nfuncs = 0;
	for (size_t f = 0; f < nuses; f++) {
		uint8_t *code;
		size_t len, n;
		uint64_t start, found[256];
		if (func_code(g, ef, uses[f].func, &code, &len, &start))
			continue;
		gobin_scan_moves(code, len, start, uses[f].kind, found, &n, 256);
		free(code);
		struct targets t = { .n = 0 };
		for (size_t i = 0; i < n; i++)
			if (found[i] % align == 0 && in_data(ef, found[i], align))
				targets_add(&t, found[i]);
		/* A function that no longer uses the variable this way (the Go
		 * version moved the code elsewhere) proves nothing either way. */
		if (t.n == 0)
			continue;
		(*nfuncs)++;
		if (first) {
			acc = t;
			first = false;
			continue;
		}
		struct targets x = { .n = 0 };
		for (size_t i = 0; i < acc.n; i++)
			for (size_t j = 0; j < t.n; j++)
				if (acc.v[i] == t.v[j])
					targets_add(&x, acc.v[i]);
		acc = x;
	}
	return acc.n == 1 ? acc.v[0] : 0;
}

static void vars_from_code(struct gobin *g, const struct elffile *ef)
{
	/* mbuckets.Load() in MemProfile (memProfileInternal from 1.23) and
	 * mProf_FlushLocked, &mbuckets for the atomic store in stkbucket.
	 * MemProfile is dead code (absent) in programs that never read memory
	 * profiles. */
	static const struct use mb[] = {
		{ "runtime.MemProfile", LOAD64 },
		{ "runtime.memProfileInternal", LOAD64 },
		{ "runtime.mProf_FlushLocked", LOAD64 },
		{ "runtime.stkbucket", LEA64 },
	};
	/* mProfCycle.read() in MemProfile and the mProf_* hooks. */
	static const struct use cy[] = {
		{ "runtime.MemProfile", LOAD32 },   { "runtime.memProfileInternal", LOAD32 },
		{ "runtime.mProf_Flush", LOAD32 },  { "runtime.mProf_PostSweep", LOAD32 },
		{ "runtime.mProf_Malloc", LOAD32 }, { "runtime.mProf_Free", LOAD32 },
	};
	/* MemProfileRate: read by mallocgc and nextSample (inlined into
	 * profilealloc), written for GODEBUG=memprofilerate by parsedebugvars
	 * (1.19) or parsegodebug (1.23). */
	static const struct use rt[] = {
		{ "runtime.mallocgc", LOAD64 },	     { "runtime.profilealloc", LOAD64 },
		{ "runtime.nextSample", LOAD64 },    { "runtime.parsedebugvars", STORE64 },
		{ "runtime.parsegodebug", STORE64 },
	};
	unsigned n1, n2, n3;
	struct gobin_vars v = { 0 };
	v.mbuckets = common_target(g, ef, mb, sizeof(mb) / sizeof(mb[0]), 8, &n1);
	v.mprof_cycle = common_target(g, ef, cy, sizeof(cy) / sizeof(cy[0]), 4, &n2);
	v.mem_profile_rate = common_target(g, ef, rt, sizeof(rt) / sizeof(rt[0]), 8, &n3);
	/* One function alone is too weak a proof. */
	if (n1 < 2 || n2 < 2 || n3 < 2)
		return;
	if (v.mbuckets && v.mprof_cycle && v.mem_profile_rate && v.mbuckets != v.mem_profile_rate) {
		v.source = GOBIN_VARS_CODE;
		g->vars = v;
	}
}

/* ---- Open / attach ---------------------------------------------------- */

#define GOBIN_MAX_FILE (4ull << 30)

static int open_path(const char *path, struct gobin **out, struct pp_err *err)
{
	int rc;
	*out = NULL;
	struct gobin *g = calloc(1, sizeof(*g));
	if (!g)
		return -ENOMEM;
	g->impl = calloc(1, sizeof(*g->impl));
	if (g->impl)
		g->impl->refs = 1;
	g->path = strdup(path);
	g->exe = strdup(path);
	if (!g->impl || !g->path || !g->exe) {
		gobin_free(g);
		return -ENOMEM;
	}
	/* usually /proc/PID/exe of a process that may be hostile: opened the
	 * safe way (elffile_new, ELFFILE_FROM_LINK) and parsed once, for everything below */
	struct elffile *ef;
	struct stat st;
	struct pp_err ferr = { 0 };
	rc = elffile_new(&(struct elffile_opts){ .from = ELFFILE_FROM_LINK, .link = path,
						 .max_size = GOBIN_MAX_FILE, .st = &st },
			 &ef, &ferr);
	if (rc < 0) {
		gobin_free(g);
		if (rc == -ENOEXEC)
			return pp_errf(err, rc, "%s: not an ELF file", path);
		rc = rc == -ESRCH ? -ENOENT : rc;
		return pp_errf(err, rc, "%s", ferr.msg);
	}
	g->impl->st_dev = st.st_dev;
	g->impl->st_ino = st.st_ino;
	/* The bucket layout is the same on arm64; decoding instructions for
	 * stripped binaries is amd64 only. */
	if (ef->e_machine != EM_X86_64 && ef->e_machine != EM_AARCH64) {
		rc = pp_errf(err, -ENOEXEC,
			     "%s: not a 64-bit little-endian x86-64/arm64 ELF "
			     "(machine %u)",
			     path, (unsigned)ef->e_machine);
		goto fail;
	}
	g->pie = ef->e_type == ET_DYN;
	const struct elffile_load *x = NULL;
	for (size_t i = 0; i < ef->nloads && !x; i++)
		if (ef->loads[i].flags & PF_X)
			x = &ef->loads[i];
	if (!x) {
		rc = pp_errf(err, -ENOEXEC, "%s: no executable segment", path);
		goto fail;
	}
	g->text_vaddr = x->vaddr;
	g->text_memsz = x->memsz;
	g->text_offset = x->offset;
	/* the file's labels, as every other module reports them */
	snprintf(g->go_version, sizeof(g->go_version), "%s", ef->go_version);
	snprintf(g->go_build_id, sizeof(g->go_build_id), "%s", ef->go_build_id);
	snprintf(g->gnu_build_id, sizeof(g->gnu_build_id), "%s", ef->gnu_build_id);
	g->has_symtab = ef->has_symtab;
	g->is_go = ef->go_buildinfo || elffile_section(ef, ".gopclntab") ||
		   elffile_section(ef, ".data.rel.ro.gopclntab") || ef->go_build_id[0];
	if (!g->is_go) {
		rc = pp_errf(err, -ENOEXEC, "%s: not a Go program", path);
		goto fail;
	}
	/* Symbolization; failure leaves the gobin usable for reading. The
	 * symbols are the ones the symbolizer and the leaf tables hold for
	 * this very file when they do (elfshare.h): one copy. */
	struct pp_file_id id = pp_file_id_of(&st);
	if (elfshare_load(ef, &id, &g->impl->es, NULL) == 0)
		g->has_pclntab = g->impl->es->pcln != NULL;
	vars_from_symtab(g, ef);
	if (g->vars.source == GOBIN_VARS_NONE && ef->e_machine == EM_X86_64)
		vars_from_code(g, ef);
	/* Everything needed later was copied out: no fd stays open per
	 * tracked process. */
	elffile_free(ef);
	*out = g;
	return 0;
fail:
	elffile_free(ef);
	gobin_free(g);
	return rc;
}

static int gone(int e)
{
	return (e == ENOENT || e == ESRCH) ? -ESRCH : -e;
}

int gobin_share(const struct gobin *g, pid_t pid, struct gobin **out, struct pp_err *err)
{
	char exe[4096];
	int rc;
	*out = NULL;
	if ((rc = proc_exe(pid, exe, sizeof(exe))))
		return pp_errf(err, rc == -ESRCH ? -ESRCH : rc, "pid %d: %s", (int)pid,
			       rc == -ESRCH ? "no such process" : strerror(-rc));
	/* The very file g analyzed (stat through /proc/PID/exe gives the
	 * identity gobin_new() recorded), not just the same path. */
	char link[64];
	struct stat st;
	snprintf(link, sizeof(link), "/proc/%d/exe", (int)pid);
	if (stat(link, &st) != 0)
		return pp_errf(err, gone(errno), "pid %d: %s", (int)pid, strerror(errno));
	if (st.st_dev != g->impl->st_dev || st.st_ino != g->impl->st_ino)
		return pp_errf(err, -ENOENT, "pid %d runs another executable than %s", (int)pid,
			       g->exe);
	struct gobin *n = malloc(sizeof(*n));
	if (!n)
		return -ENOMEM;
	*n = *g;
	n->path = strdup(g->path);
	n->exe = strdup(exe);
	n->impl = NULL;
	n->mem = NULL;
	if (!n->path || !n->exe) {
		gobin_free(n);
		return -ENOMEM;
	}
	n->pid = 0;
	n->bias = n->text_start = n->text_limit = 0;
	n->mbuckets_addr = n->rate_addr = n->cycle_addr = 0;
	__atomic_add_fetch(&g->impl->refs, 1, __ATOMIC_RELAXED);
	n->impl = g->impl;
	/* attach checks the mapping is this very file (device and inode) */
	if ((rc = gobin_attach(n, pid, err))) {
		gobin_free(n);
		return rc;
	}
	*out = n;
	return 0;
}

void gobin_file_id(const struct gobin *g, uint64_t *dev, uint64_t *ino)
{
	*dev = (uint64_t)g->impl->st_dev;
	*ino = (uint64_t)g->impl->st_ino;
}

ssize_t gobin_read_some(const struct gobin *g, pid_t pid, uint64_t addr, void *buf, size_t len)
{
	return rmem_read_some(g ? g->mem : NULL, pid, addr, buf, len);
}

/* Exactly len bytes through the seam, with a message (remotemem.h). */
static int read_exact(const struct gobin *g, pid_t pid, uint64_t addr, void *buf, size_t len,
		      struct pp_err *err)
{
	return rmem_read_exact(g ? g->mem : NULL, pid, addr, buf, len, err);
}

int gobin_read_mem(pid_t pid, uint64_t addr, void *buf, size_t len, struct pp_err *err)
{
	return read_exact(NULL, pid, addr, buf, len, err);
}

static int verify_live(struct gobin *g, struct pp_err *err)
{
	int64_t rate;
	uint64_t head;
	int rc;
	if ((rc = gobin_read_rate(g, &rate, err)))
		return rc;
	if (rate < 0 || rate > ((int64_t)1 << 40))
		return pp_errf(err, -ENOENT,
			       "pid %d: candidate runtime.MemProfileRate at 0x%" PRIx64
			       " holds %" PRId64 ", not a rate",
			       (int)g->pid, g->rate_addr, rate);
	if ((rc = gobin_read_mbuckets(g, &head, err)))
		return rc;
	if (head) {
		/* a bucket of a real program has a stack */
		uint64_t buf[GOBUCKET_BUF_WORDS];
		struct rmem rm;
		struct gobucket b;
		rmem_init(&rm, g->mem, g->pid, false);
		if (gobucket_read(&rm, head, 0, false, buf, &b, NULL) || b.nstk == 0)
			return pp_errf(err, -ENOENT,
				       "pid %d: candidate runtime.mbuckets at 0x%" PRIx64
				       " does not point at a memory-profile bucket",
				       (int)g->pid, g->mbuckets_addr);
	}
	return 0;
}

/* Not gone, not a zombie (an exiting process has no mappings left). */
static bool proc_alive(pid_t pid)
{
	struct proc_stat st;
	return proc_stat(pid, &st) == 0 && st.state != 'Z' && st.state != 'X';
}

/* -EAGAIN for a failure of a process that was inside its execve() before
 * we read its maps: execve() installs the new address space (and
 * /proc/PID/exe) first, then maps the ELF's segments one by one, its bss
 * last; caught in between, the text, the data or the variables are not
 * there yet. Seen in 1 of 10 execs read the moment /proc/PID/exe changed. */
static int exec_or(bool in_exec, pid_t pid, int rc, struct pp_err *err)
{
	if (!in_exec || rc == -ESRCH)
		return rc;
	pp_err_clear(err);
	return pp_errf(err, -EAGAIN, "pid %d: inside its exec (the executable is not mapped yet)",
		       (int)pid);
}

int gobin_attach(struct gobin *g, pid_t pid, struct pp_err *err)
{
	struct proc_maps maps = { 0 };
	struct proc_stat st;
	bool in_exec = proc_stat(pid, &st) == 0 && st.env_end == 0 && st.state != 'Z' &&
		       st.state != 'X';
	int rc = proc_maps_read(pid, &maps, err);
	if (rc)
		return rc == -ESRCH ? pp_errf(err, -ESRCH, "pid %d: no such process", (int)pid)
				    : rc;
	const struct proc_map *text = NULL;
	for (size_t i = 0; i < maps.n; i++) {
		const struct proc_map *m = &maps.v[i];
		/* Same file: device and inode, or (overlayfs reports the lower
		 * layer's in maps) the executable's path. */
		bool same = (m->inode == (uint64_t)g->impl->st_ino &&
			     m->dev_major == major(g->impl->st_dev) &&
			     m->dev_minor == minor(g->impl->st_dev)) ||
			    (g->exe && m->path && !strcmp(m->path, g->exe));
		if (m->perms[2] != 'x' || !same)
			continue;
		if (m->offset <= g->text_offset + (g->text_memsz ? g->text_memsz - 1 : 0) &&
		    m->offset + (m->end - m->start) > g->text_offset) {
			text = m;
			break;
		}
	}
	if (!text) {
		/* An exiting process loses its mappings before it turns zombie:
		 * no mappings at all, or gone a moment later, means it exited. */
		bool empty = maps.n == 0;
		proc_maps_free(&maps);
		if (!empty && proc_alive(pid))
			usleep(20000);
		if (empty || !proc_alive(pid))
			return pp_errf(err, -ESRCH, "pid %d: the process exited", (int)pid);
		return exec_or(in_exec, pid,
			       pp_errf(err, -ENOENT, "pid %d: %s is not mapped executable",
				       (int)pid, g->exe),
			       err);
	}
	g->pid = pid;
	g->bias = proc_map_bias(text, g->text_vaddr, g->text_offset);
	if (!g->pie && g->bias != 0) {
		proc_maps_free(&maps);
		return pp_errf(err, -ENOENT, "pid %d: non-PIE executable loaded at a bias",
			       (int)pid);
	}
	g->text_start = text->start;
	g->text_limit = text->end;
	proc_maps_free(&maps);
	g->mbuckets_addr = g->vars.mbuckets ? g->vars.mbuckets + g->bias : 0;
	g->rate_addr = g->vars.mem_profile_rate ? g->vars.mem_profile_rate + g->bias : 0;
	g->cycle_addr = g->vars.mprof_cycle ? g->vars.mprof_cycle + g->bias : 0;
	if (g->vars.source == GOBIN_VARS_NONE)
		return pp_errf(
			err, -ENOENT,
			"%s: runtime.mbuckets/MemProfileRate/mProfCycle not found (%s)", g->exe,
			g->has_symtab ? "not in .symtab"
				      : "stripped, and not recognized in the runtime's code");
	if (g->vars.source == GOBIN_VARS_CODE && (rc = verify_live(g, err))) {
		g->mbuckets_addr = g->rate_addr = g->cycle_addr = 0;
		return exec_or(in_exec, pid, rc, err);
	}
	return 0;
}

/* PF_KTHREAD in the flags field (9) of /proc/PID/stat. */
static bool is_kernel_thread(pid_t pid)
{
	struct proc_stat st;
	return proc_stat(pid, &st) == 0 && st.state != 'Z' && st.state != 'X' &&
	       (st.flags & 0x00200000UL); /* PF_KTHREAD */
}

static int open_pid(pid_t pid, struct gobin **out, struct pp_err *err)
{
	char path[64], exe[4096];
	int rc;
	*out = NULL;
	snprintf(path, sizeof(path), "/proc/%d", (int)pid);
	if (pid <= 0 || access(path, F_OK) != 0)
		return pp_errf(err, -ESRCH, "pid %d: no such process", (int)pid);
	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
	rc = proc_exe(pid, exe, sizeof(exe));
	if (rc == -ESRCH) {
		/* /proc/PID is there but has no executable: a kernel thread, or
		 * a process exiting right now. */
		if (is_kernel_thread(pid))
			return pp_errf(err, -ENOEXEC, "pid %d: not a Go program (a kernel thread)",
				       (int)pid);
		return pp_errf(err, -ESRCH, "pid %d: no such process (it exited)", (int)pid);
	}
	if (rc)
		return pp_errf(err, rc, "pid %d: cannot read /proc/%d/exe: %s", (int)pid, (int)pid,
			       strerror(-rc));
	struct gobin *g;
	rc = open_path(path, &g, err);
	if (rc == -ENOENT) {
		pp_err_clear(err);
		return pp_errf(err, -ESRCH, "pid %d: no such process (or a kernel thread)",
			       (int)pid);
	}
	if (rc == -ENOEXEC) {
		pp_err_clear(err);
		return pp_errf(err, -ENOEXEC, "pid %d (%s): not a Go program", (int)pid, exe);
	}
	if (rc)
		return rc;
	free(g->exe);
	g->exe = strdup(exe);
	if (!g->exe) {
		gobin_free(g);
		return -ENOMEM;
	}
	if ((rc = gobin_attach(g, pid, err))) {
		gobin_free(g);
		return rc;
	}
	*out = g;
	return 0;
}

void gobin_free(struct gobin *g)
{
	if (!g)
		return;
	if (g->impl && __atomic_sub_fetch(&g->impl->refs, 1, __ATOMIC_ACQ_REL) == 0) {
		elfsym_free(g->impl->es);
		free(g->impl);
	}
	free(g->path);
	free(g->exe);
	free(g);
}

/* ---- Live values ------------------------------------------------------ */

int gobin_read_rate(const struct gobin *g, int64_t *rate, struct pp_err *err)
{
	if (!g->rate_addr)
		return pp_errf(err, -ENOENT, "runtime.MemProfileRate not located");
	return read_exact(g, g->pid, g->rate_addr, rate, sizeof(*rate), err);
}

int gobin_read_cycle(const struct gobin *g, uint32_t *raw, struct pp_err *err)
{
	if (!g->cycle_addr)
		return pp_errf(err, -ENOENT, "runtime.mProfCycle not located");
	return read_exact(g, g->pid, g->cycle_addr, raw, sizeof(*raw), err);
}

int gobin_read_mbuckets(const struct gobin *g, uint64_t *head, struct pp_err *err)
{
	if (!g->mbuckets_addr)
		return pp_errf(err, -ENOENT, "runtime.mbuckets not located");
	return read_exact(g, g->pid, g->mbuckets_addr, head, sizeof(*head), err);
}

int gobin_enable_profiling(const struct gobin *g, int64_t rate, int64_t *old, struct pp_err *err)
{
	int rc;
	if (rate <= 0)
		return pp_errf(err, -EINVAL, "rate %" PRId64 " is not positive", rate);
	if ((rc = gobin_read_rate(g, old, err)))
		return rc;
	if (*old != 0)
		return 0;
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/mem", (int)g->pid);
	int fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		return pp_errf(err, gone(e), "open %s for writing: %s", path, strerror(e));
	}
	ssize_t n = pwrite(fd, &rate, sizeof(rate), (off_t)g->rate_addr);
	int e = errno;
	close(fd);
	if (n != (ssize_t)sizeof(rate))
		return pp_errf(err, n < 0 ? gone(e) : -EIO,
			       "pid %d: writing runtime.MemProfileRate at 0x%" PRIx64 ": %s",
			       (int)g->pid, g->rate_addr, n < 0 ? strerror(e) : "short write");
	return 1;
}

/* ---- Symbolization ---------------------------------------------------- */

size_t gobin_symbolize(const struct gobin *g, uint64_t pc, struct gobin_frame *frames, size_t max)
{
	if (!g->impl->es || max == 0 || pc < g->bias)
		return 0;
	size_t n = func_frames(g->impl->es, pc - g->bias, frames, max);
	for (size_t i = 0; i < n; i++)
		frames[i].entry += g->bias;
	return n;
}

int gobin_new(const struct gobin_opts *o, struct gobin **out, struct pp_err *err)
{
	*out = NULL;
	if (o && o->path)
		return open_path(o->path, out, err);
	if (o && o->pid > 0)
		return open_pid(o->pid, out, err);
	return pp_errf(err, -EINVAL, "gobin: no path or pid given");
}
