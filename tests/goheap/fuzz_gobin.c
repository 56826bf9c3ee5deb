/*
 * fuzz_gobin - libFuzzer target for the Go executable analysis (gobin.c,
 * with elfsym.c and gopclntab.c under it): the input is a hostile ELF file.
 *
 * It goes through the real entry point, gobin_open(path), on a memfd named
 * by /proc/self/fd/N: the same proc_open_link() checks, libelf on a file
 * descriptor and pread()s as on /proc/PID/exe (memfds live on tmpfs, which
 * those checks accept). Then what the agent does with a gobin without a
 * process: symbolize PCs across the text.
 *
 * Seeds: fuzz-seeds/fuzz_gobin (minimized Go 1.19 executables, see
 * make_fuzz_seeds.py); dictionary: fuzz_gobin.dict. Built only with
 * -Dfuzz=true and clang (tests/goheap/meson.build).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "gobin.h"

static int memfd = -1;
static char path[64];

static void check_str(const char *s, size_t cap)
{
	/* NUL-terminated within its buffer: whatever the file said */
	if (!memchr(s, 0, cap))
		abort();
}

static void exercise(const struct gobin *g)
{
	check_str(g->go_version, sizeof(g->go_version));
	check_str(g->go_build_id, sizeof(g->go_build_id));
	check_str(g->gnu_build_id, sizeof(g->gnu_build_id));
	if (!g->is_go)
		abort();	/* gobin_open() promises: is_go false never comes back with 0 */
	/* Variables are all found or none (gobin.h). */
	bool any = g->vars.mbuckets || g->vars.mem_profile_rate || g->vars.mprof_cycle;
	if (any != (g->vars.source != GOBIN_VARS_NONE))
		abort();
	/* Symbolize across the executable segment, as the heap profile does. */
	struct gobin_frame fr[16];
	uint64_t lo = g->text_vaddr, len = g->text_memsz;
	for (uint64_t k = 0; k < 64; k++) {
		uint64_t pc = lo + (len / 64) * k + k;
		size_t n = gobin_symbolize(g, pc, fr, 16);
		if (n > 16)
			abort();
		for (size_t i = 0; i < n; i++)
			if (!fr[i].function || !fr[i].file || strlen(fr[i].function) > (1u << 20))
				abort();
	}
}

/* Undefined behaviour is a finding too: UBSan only prints by default,
 * which libFuzzer would not notice. */
const char *__ubsan_default_options(void);
const char *__ubsan_default_options(void)
{
	return "halt_on_error=1:abort_on_error=1:print_stacktrace=1";
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	memfd = memfd_create("fuzz_gobin", MFD_CLOEXEC);
	if (memfd < 0) {
		perror("memfd_create");
		abort();
	}
	snprintf(path, sizeof(path), "/proc/self/fd/%d", memfd);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (ftruncate(memfd, 0) || (size && pwrite(memfd, data, size, 0) != (ssize_t)size))
		abort();
	struct gobin *g;
	struct pp_err err = {0};
	if (gobin_open(path, &g, &err) == 0) {
		exercise(g);
		gobin_free(g);
	}
	return 0;
}
