/*
 * fuzz_gobin - libFuzzer target for the Go executable analysis (gobin.c,
 * with elfsym.c and gopclntab.c under it): the input is a hostile ELF file.
 *
 * It goes through the real entry point, gobin_new() with a path, on a memfd named
 * by /proc/self/fd/N: the same proc_open_link() checks, libelf on a file
 * descriptor and pread()s as on /proc/PID/exe (memfds live on tmpfs, which
 * those checks accept). Then what the agent does with a gobin without a
 * process: symbolize PCs across the text; then attach to ourselves with the
 * input mapped (attach_self).
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
#include "tests/lib/fuzz.h"

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
		abort();	/* gobin_new() promises: is_go false never comes back with 0 */
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

/*
 * gobin_attach() to this very process, the input mapped executable (never
 * run) where its text segment wants it (non-PIE) or anywhere (PIE): the
 * maps parsing, the file identity match, the bias and, for variables
 * decoded from code, the live check are those of a real target. The
 * variables are then read with process_vm_readv on ourselves: reads only,
 * -EFAULT where nothing is mapped. MAP_FIXED_NOREPLACE never replaces a
 * mapping of ours, whatever address the file asks for.
 */
static void attach_self(struct gobin *g, size_t size)
{
	/* The text must be inside the mapping: else attach takes the process
	 * for exiting and waits 20 ms for it, for nothing. */
	if (g->text_offset > g->text_vaddr || g->text_offset >= size)
		return;
	uint64_t base = g->pie ? 0 : g->text_vaddr - g->text_offset;
	if (base & 4095)
		return;
	void *p = mmap((void *)(uintptr_t)base, size, PROT_READ | PROT_EXEC,
		       MAP_SHARED | (base ? MAP_FIXED_NOREPLACE : 0), memfd, 0);
	if (p == MAP_FAILED)
		return;
	struct pp_err err = {0};
	if ((!base || p == (void *)(uintptr_t)base) && gobin_attach(g, getpid(), &err) == 0) {
		if (!g->pie && g->bias != 0)
			abort();	/* attach refuses a non-PIE at a bias */
		int64_t rate;
		uint32_t cycle;
		uint64_t head;
		gobin_read_rate(g, &rate, NULL);
		gobin_read_cycle(g, &cycle, NULL);
		gobin_read_mbuckets(g, &head, NULL);
	}
	munmap(p, size);
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
	if (gobin_new(&(struct gobin_opts){ .path = path }, &g, &err) == 0) {
		exercise(g);
		attach_self(g, size);
		gobin_free(g);
	}
	return 0;
}
