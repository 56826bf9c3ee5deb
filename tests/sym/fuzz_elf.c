/*
 * fuzz_elf - libFuzzer target for the hostile-input parsers of symbols:
 * the Go pclntab decoder on arbitrary bytes and the ELF reader from memory
 * (elffile: headers, sections, notes, Go build info, symbol lookups, code
 * and section reads; elfsym on top of it).
 * First input byte picks the mode (even: raw pclntab, odd: ELF image).
 * Built only with -Dfuzz=true and clang (see tests/sym/meson.build).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "elffile.h"
#include "elfsym.h"
#include "gopclntab.h"
#include "tests/lib/fuzz.h"

static void exercise(const struct gopcln *t)
{
	size_t n = gopcln_nfunc(t);
	for (size_t i = 0; i < n && i < 64; i++) {
		struct gopcln_func f;
		if (gopcln_func_at(t, i, &f) < 0)
			continue;
		struct gopcln_frame fr[8];
		gopcln_lookup(t, f.entry, fr, 8);
		gopcln_lookup(t, f.entry + (f.end - f.entry) / 2, fr, 8);
	}
	uint64_t lo, hi;
	gopcln_text_range(t, &lo, &hi);
	for (uint64_t pc = lo, k = 0; hi > lo && pc < hi && k < 64; pc += (hi - lo) / 61 + 1, k++) {
		struct gopcln_frame fr[4];
		gopcln_lookup(t, pc, fr, 4);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	uint8_t mode = data[0];
	data++;
	size--;
	if (!(mode & 1)) {
		/* Exact-size heap copy so any overread is caught. gofunc = the
		 * second half of the input (a separate buffer). */
		size_t half = size / 2;
		uint8_t *tab = malloc(half ? half : 1), *gf = malloc(size - half ? size - half : 1);
		memcpy(tab, data, half);
		memcpy(gf, data + half, size - half);
		struct gopcln_src src = { .tab = tab, .tab_len = half, .gofunc = gf,
					  .gofunc_len = size - half, .text_start = 0x401000,
					  .go_minor = (mode >> 1) & 1 ? 19 : 0 };
		struct gopcln *t;
		if (gopcln_new(&src, &t, NULL) == 0) {
			exercise(t);
			gopcln_free(t);
		}
		free(tab);
		free(gf);
		return 0;
	}
	struct elffile *f;
	if (elffile_new(&(struct elffile_opts){ .from = ELFFILE_FROM_MEM, .buf = data, .len = size },
			&f, NULL) < 0)
		return 0;
	/* labels: terminated within their buffers, whatever the notes said */
	if (!memchr(f->gnu_build_id, 0, sizeof(f->gnu_build_id)) ||
	    !memchr(f->go_build_id, 0, sizeof(f->go_build_id)) ||
	    !memchr(f->go_version, 0, sizeof(f->go_version)) ||
	    !memchr(f->comment, 0, sizeof(f->comment)))
		abort();
	static const char *const names[] = { "main", "runtime.mbuckets", "_start" };
	uint64_t v[3], sz[3];
	elffile_find_symbols(f, names, 3, v, sz);
	uint8_t *sec;
	size_t len;
	uint64_t addr;
	if (elffile_read_section(f, ".eh_frame", 1u << 20, &sec, &len, &addr, NULL) == 0)
		free(sec);
	uint8_t code[256];
	for (size_t i = 0; i < f->nloads; i++)
		elffile_read_code(f, f->loads[i].vaddr + f->loads[i].filesz / 2, code, sizeof(code));
	struct elfsym *e;
	if (elfsym_new(&(struct elfsym_opts){ .file = f }, &e, NULL) == 0) {
		if (strcmp(e->gnu_build_id, f->gnu_build_id) || strcmp(e->go_version, f->go_version))
			abort();	/* one set of labels */
		if (e->pcln)
			exercise(e->pcln);
		for (size_t i = 0; i < e->nsyms && i < 256; i++)
			elfsym_lookup(e, e->syms[i].addr + 1, NULL);
		uint64_t va;
		for (uint64_t off = 0; off < 65536; off += 4093)
			if (elfsym_off_to_vaddr(e, off, &va))
				elfsym_lookup(e, va, NULL);
		elfsym_free(e);
	}
	elffile_free(f);
	return 0;
}
