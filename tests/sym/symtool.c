/*
 * symtool - exposes the symbol readers to the Python tests.
 *
 *   symtool funcs FILE                 every pclntab function: entry end name
 *   symtool pclntab FILE PC...         pc -> frames (hex PCs, link-time)
 *   symtool info FILE                  build ids, Go version, counts
 *   symtool elfsym FILE VADDR...       ELF symbol at link-time address
 *   symtool findsym FILE NAME          any symbol's value and size
 *   symtool load FILE                  load only; exit 0 or print the error, exit 2
 * Frames print as "  func<TAB>file<TAB>line<TAB>inlined".
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "elfsym.h"
#include "gopclntab.h"

static int load(const char *path, struct elfsym **e)
{
	struct pp_err err = { 0 };
	int rc = elfsym_load_path(path, e, &err);
	if (rc < 0) {
		printf("error %d %s\n", rc, err.msg);
		return 2;
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: symtool funcs|pclntab|info|elfsym|findsym|load FILE [ARGS]\n");
		return 2;
	}
	const char *cmd = argv[1], *path = argv[2];
	if (!strcmp(cmd, "findsym")) {
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0 || argc < 4)
			return 2;
		uint64_t v, sz;
		struct pp_err err = { 0 };
		int rc = elfsym_find_symbol_fd(fd, argv[3], &v, &sz, &err);
		close(fd);
		if (rc < 0) {
			printf("error %d %s\n", rc, err.msg);
			return 1;
		}
		printf("%" PRIx64 " %" PRIu64 "\n", v, sz);
		return 0;
	}
	struct elfsym *e;
	int rc = load(path, &e);
	if (rc)
		return rc;
	if (!strcmp(cmd, "load")) {
		printf("ok syms=%zu pcln=%d bytes=%zu\n", e->nsyms, e->pcln != NULL, e->bytes);
	} else if (!strcmp(cmd, "info")) {
		printf("gnu_build_id %s\ngo_build_id %s\ngo_version %s\n", e->gnu_build_id,
		       e->go_build_id, e->go_version);
		printf("nsyms %zu\ndynsym %d\nbytes %zu\n", e->nsyms, e->from_dynsym, e->bytes);
		if (e->pcln) {
			uint64_t lo, hi;
			gopcln_text_range(e->pcln, &lo, &hi);
			printf("pclntab %d\nnfunc %zu\ninline %d\ntext %" PRIx64 " %" PRIx64 "\n",
			       gopcln_layout(e->pcln), gopcln_nfunc(e->pcln),
			       gopcln_has_inline(e->pcln), lo, hi);
		}
	} else if (!strcmp(cmd, "funcs")) {
		if (!e->pcln) {
			printf("error no pclntab\n");
			rc = 1;
		} else {
			for (size_t i = 0; i < gopcln_nfunc(e->pcln); i++) {
				struct gopcln_func f;
				if (gopcln_func_at(e->pcln, i, &f) < 0) {
					printf("error func %zu corrupt\n", i);
					rc = 1;
					continue;
				}
				printf("%" PRIx64 " %" PRIx64 " %s\n", f.entry, f.end,
				       f.name ? f.name : "?");
			}
		}
	} else if (!strcmp(cmd, "pclntab")) {
		for (int i = 3; i < argc; i++) {
			uint64_t pc = strtoull(argv[i], NULL, 16);
			struct gopcln_frame fr[32];
			int n = e->pcln ? gopcln_lookup(e->pcln, pc, fr, 32) : -ENOENT;
			printf("pc %" PRIx64 " %d\n", pc, n);
			for (int k = 0; k < n; k++)
				printf("  %s\t%s\t%d\t%d\n", fr[k].func ? fr[k].func : "?",
				       fr[k].file ? fr[k].file : "?", fr[k].line, fr[k].inlined);
		}
	} else if (!strcmp(cmd, "elfsym")) {
		for (int i = 3; i < argc; i++) {
			uint64_t va = strtoull(argv[i], NULL, 16), start = 0;
			const char *nm = elfsym_lookup(e, va, &start);
			printf("%" PRIx64 " %s+0x%" PRIx64 "\n", va, nm ? nm : "?", nm ? va - start : 0);
		}
	} else {
		fprintf(stderr, "unknown command %s\n", cmd);
		rc = 2;
	}
	elfsym_free(e);
	return rc;
}
