/*
 * symtool - exposes the symbol readers to the Python tests.
 *
 *   symtool funcs FILE                 every pclntab function: entry end name
 *   symtool pclntab FILE PC...         pc -> frames (hex PCs, link-time)
 *   symtool info FILE                  build ids, Go version, counts
 *   symtool elfsym FILE VADDR...       ELF symbol at link-time address
 *   symtool findsym FILE NAME          any symbol's value and size
 *   symtool gofunc FILE NAME           pclntab function by name: entry end
 *   symtool load FILE                  load only; exit 0 or print the error, exit 2
 *   symtool resolve PID ADDR...        symbolizer, user addresses of a live process
 *   symtool kernel ADDR...             symbolizer, kernel addresses (kallsyms)
 *   symtool bench PID ROUNDS ADDR...   cold + warm resolve timing, cache figures
 *   symtool benchfile FILE N           load time, memory, lookup time for N PCs
 *   symtool torture FILE...            load each file and exercise every lookup;
 *                                      FILE ending in .pcln = raw pclntab bytes.
 *                                      One "ok|error NAME detail" line per file.
 *   symtool serve                      one symbolizer, commands on stdin:
 *       resolve PID ADDR... | kernel ADDR... | prepare PID | forget PID | stats
 *     each answer ends with a line "END". Options from the environment:
 *     SYMTOOL_REVALIDATE_MS, SYMTOOL_MAX_FILES, SYMTOOL_MAX_BYTES, SYMTOOL_MAPS_AGE_MS,
 *     SYMTOOL_KALLSYMS (a kallsyms file to read instead of /proc/kallsyms).
 * resolve/kernel print per address "pc ADDR N SOURCE VADDR" then the frames,
 * then "  @ path|start|limit|offset|build_id|kind|go_version|error".
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
#include "symbolize.h"
#include <time.h>

static int load(const char *path, struct elfsym **e)
{
	struct pp_err err = { 0 };
	int rc = elfsym_new(&(struct elfsym_opts){ .path = path }, e, &err);
	if (rc < 0) {
		printf("error %d %s\n", rc, err.msg);
		return 2;
	}
	return 0;
}

static void print_batch(const struct sym_batch *b)
{
	for (size_t i = 0; i < b->n; i++) {
		const struct sym_result *r = &b->r[i];
		printf("pc %" PRIx64 " %u %d %" PRIx64 "\n", r->addr, r->nframes, (int)r->source,
		       r->file_vaddr);
		for (uint32_t k = 0; k < r->nframes; k++)
			printf("  %s\t%s\t%u\t%d\n", r->frames[k].func,
			       r->frames[k].file[0] ? r->frames[k].file : "?", r->frames[k].line,
			       r->frames[k].inlined);
		if (r->mapping >= 0) {
			const struct sym_mapping *m = &b->mappings[r->mapping];
			printf("  @ %s|%" PRIx64 "|%" PRIx64 "|%" PRIx64 "|%s|%d|%s|%s\n", m->path,
			       m->start, m->limit, m->offset, m->build_id, (int)m->build_id_kind,
			       m->go_version, m->error);
		}
	}
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Every lookup over a loaded table: what hostile input must survive. */
static unsigned exercise_pcln(const struct gopcln *t)
{
	unsigned frames = 0;
	uint64_t lo, hi;
	gopcln_text_range(t, &lo, &hi);
	size_t n = gopcln_nfunc(t);
	uint64_t budget = 1u << 24;	/* what the agent allows one executable */
	for (size_t i = 0; i < n && i < 100000; i++) {
		struct gopcln_func f;
		if (budget)
			gopcln_func_frameless(t, i, &budget);
		if (gopcln_func_at(t, i, &f) < 0)
			continue;
		uint64_t pcs[3] = { f.entry, f.entry + (f.end - f.entry) / 2, f.end - 1 };
		for (int k = 0; k < 3; k++) {
			struct gopcln_frame fr[8];
			int r = gopcln_lookup(t, pcs[k], fr, 8);
			for (int j = 0; j < r; j++)
				frames += (fr[j].func ? (unsigned)strlen(fr[j].func) : 0) +
					  (fr[j].file ? (unsigned)strlen(fr[j].file) : 0) > 0;
		}
	}
	for (uint64_t pc = lo; hi > lo && pc < hi; pc += (hi - lo) / 997 + 1) {
		struct gopcln_frame fr[4];
		gopcln_lookup(t, pc, fr, 4);
	}
	return frames;
}

static int torture(int argc, char **argv)
{
	for (int i = 2; i < argc; i++) {
		const char *path = argv[i];
		size_t l = strlen(path);
		struct pp_err err = { 0 };
		if (l > 5 && !strcmp(path + l - 5, ".pcln")) {
			FILE *fp = fopen(path, "rb");
			if (!fp)
				return 2;
			static uint8_t buf[64 << 20];
			size_t n = fread(buf, 1, sizeof(buf), fp);
			fclose(fp);
			/* the bytes to a right-sized heap buffer so ASan sees overreads */
			uint8_t *tab = malloc(n ? n : 1);
			memcpy(tab, buf, n);
			struct gopcln_src src = { .tab = tab, .tab_len = n, .gofunc = tab,
						  .gofunc_len = n / 2, .text_start = 0x401000 };
			struct gopcln *t;
			if (gopcln_new(&src, &t, &err) < 0) {
				printf("error %s %s\n", path, err.msg);
			} else {
				printf("ok %s inline=%d frames=%u\n", path, gopcln_has_inline(t),
				       exercise_pcln(t));
				gopcln_free(t);
			}
			free(tab);
			continue;
		}
		struct elfsym *e;
		if (elfsym_new(&(struct elfsym_opts){ .path = path }, &e, &err) < 0) {
			printf("error %s %s\n", path, err.msg);
			continue;
		}
		unsigned frames = e->pcln ? exercise_pcln(e->pcln) : 0, named = 0;
		for (size_t k = 0; k < e->nsyms; k++) {
			uint64_t st;
			named += elfsym_lookup(e, e->syms[k].addr + e->syms[k].size / 2, &st) != NULL;
		}
		uint64_t va;
		for (uint64_t off = 0; off < 1 << 20; off += 4093)
			if (elfsym_off_to_vaddr(e, off, &va))
				elfsym_lookup(e, va, NULL);
		int fd = open(path, O_RDONLY);
		uint64_t v, sz;
		if (fd >= 0) {
			elfsym_find_symbol_fd(fd, "main", &v, &sz, NULL);
			close(fd);
		}
		printf("ok %s syms=%zu named=%u frames=%u go=%s\n", path, e->nsyms, named, frames,
		       e->go_version);
		elfsym_free(e);
	}
	return 0;
}

static size_t envnum(const char *name)
{
	const char *v = getenv(name);
	return v ? strtoull(v, NULL, 10) : 0;
}

static int serve(void)
{
	struct sym_opts o = {
		.revalidate_ms = (unsigned)envnum("SYMTOOL_REVALIDATE_MS"),
		.max_files = envnum("SYMTOOL_MAX_FILES"),
		.max_bytes = envnum("SYMTOOL_MAX_BYTES"),
		.maps_max_age_ms = (unsigned)envnum("SYMTOOL_MAPS_AGE_MS"),
		.kallsyms_path = getenv("SYMTOOL_KALLSYMS"), /* NULL: /proc/kallsyms */
	};
	struct symbolizer *s;
	struct pp_err err = { 0 };
	if (sym_new(&o, &s, &err) < 0) {
		printf("error %s\n", err.msg);
		return 2;
	}
	struct sym_batch b;
	sym_batch_init(&b);
	char line[65536];
	while (fgets(line, sizeof(line), stdin)) {
		char *save = NULL, *cmd = strtok_r(line, " \n", &save);
		uint64_t addrs[4096];
		size_t n = 0;
		pid_t pid = 0;
		pp_err_clear(&err);
		if (!cmd)
			continue;
		if (!strcmp(cmd, "resolve") || !strcmp(cmd, "prepare") || !strcmp(cmd, "forget")) {
			char *p = strtok_r(NULL, " \n", &save);
			pid = p ? atoi(p) : 0;
		}
		for (char *a; n < 4096 && (a = strtok_r(NULL, " \n", &save));)
			addrs[n++] = strtoull(a, NULL, 16);
		int rc = 0;
		if (!strcmp(cmd, "resolve")) {
			rc = sym_resolve_user(s, pid, 0, addrs, n, &b, &err);
			print_batch(&b);
		} else if (!strcmp(cmd, "kernel")) {
			rc = sym_resolve_kernel(s, addrs, n, &b, &err);
			print_batch(&b);
		} else if (!strcmp(cmd, "prepare")) {
			rc = sym_prepare(s, pid, &err);
		} else if (!strcmp(cmd, "forget")) {
			sym_forget(s, pid);
		} else if (!strcmp(cmd, "stats")) {
			struct sym_stats st;
			sym_get_stats(s, &st);
			printf("files %zu\nbytes %zu\nprocs %zu\nfile_loads %" PRIu64
			       "\nfile_load_errors %" PRIu64 "\nfile_evictions %" PRIu64
			       "\nfile_reloads %" PRIu64 "\nlookups %" PRIu64 "\nresolved %" PRIu64
			       "\nkernel_symbols %zu\n", st.files, st.bytes, st.procs, st.file_loads,
			       st.file_load_errors, st.file_evictions, st.file_reloads, st.lookups,
			       st.resolved, st.kernel_symbols);
		}
		if (rc < 0)
			printf("error %d %s\n", rc, err.msg);
		printf("END\n");
		fflush(stdout);
	}
	sym_batch_free(&b);
	sym_free(s);
	return 0;
}

static int symbolizer_cmd(int argc, char **argv)
{
	const char *cmd = argv[1];
	struct symbolizer *s;
	struct pp_err err = { 0 };
	if (sym_new(NULL, &s, &err) < 0) {
		printf("error %s\n", err.msg);
		return 2;
	}
	int first = !strcmp(cmd, "kernel") ? 2 : !strcmp(cmd, "bench") ? 4 : 3;
	size_t n = argc > first ? (size_t)(argc - first) : 0;
	uint64_t *addrs = calloc(n ? n : 1, sizeof(*addrs));
	for (size_t i = 0; i < n; i++)
		addrs[i] = strtoull(argv[first + (int)i], NULL, 16);
	struct sym_batch b;
	sym_batch_init(&b);
	int rc = 0;
	if (!strcmp(cmd, "kernel")) {
		rc = sym_resolve_kernel(s, addrs, n, &b, &err);
		print_batch(&b);
	} else if (!strcmp(cmd, "resolve")) {
		rc = sym_resolve_user(s, atoi(argv[2]), 0, addrs, n, &b, &err);
		print_batch(&b);
	} else {
		pid_t pid = atoi(argv[2]);
		int rounds = atoi(argv[3]);
		double t0 = now_s();
		rc = sym_resolve_user(s, pid, 0, addrs, n, &b, &err);
		double t1 = now_s();
		size_t resolved = 0;
		for (size_t i = 0; i < b.n; i++)
			resolved += b.r[i].nframes > 0;
		for (int k = 0; k < rounds && rc == 0; k++)
			rc = sym_resolve_user(s, pid, 0, addrs, n, &b, &err);
		double t2 = now_s();
		struct sym_stats st;
		sym_get_stats(s, &st);
		printf("addresses %zu\nresolved %zu\ncold_us_per_addr %.3f\nwarm_us_per_addr %.3f\n",
		       n, resolved, (t1 - t0) * 1e6 / (n ? n : 1),
		       rounds ? (t2 - t1) * 1e6 / ((double)rounds * (n ? n : 1)) : 0.0);
		printf("cache_files %zu\ncache_bytes %zu\nfile_loads %" PRIu64 "\n", st.files, st.bytes,
		       st.file_loads);
		/* kernel */
		t0 = now_s();
		struct sym_batch kb;
		sym_batch_init(&kb);
		uint64_t ka = 0;
		sym_resolve_kernel(s, &ka, 1, &kb, NULL);
		t1 = now_s();
		sym_get_stats(s, &st);
		printf("kallsyms_load_ms %.1f\nkernel_symbols %zu\nkernel_bytes %zu\n", (t1 - t0) * 1e3,
		       st.kernel_symbols, st.kernel_bytes);
		sym_batch_free(&kb);
	}
	if (rc < 0)
		printf("error %d %s\n", rc, err.msg);
	sym_batch_free(&b);
	free(addrs);
	sym_free(s);
	return rc < 0 ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc >= 4 && !strcmp(argv[1], "benchfile")) {
		double t0 = now_s();
		struct elfsym *e;
		if (load(argv[2], &e))
			return 2;
		double t1 = now_s();
		long n = atol(argv[3]);
		uint64_t lo = 0, hi = 0;
		if (e->pcln)
			gopcln_text_range(e->pcln, &lo, &hi);
		else if (e->nsyms)
			lo = e->syms[0].addr, hi = e->syms[e->nsyms - 1].addr + 1;
		uint64_t x = 88172645463325252ull;
		long hits = 0;
		double t2 = now_s();
		for (long i = 0; i < n && hi > lo; i++) {
			x ^= x << 13; x ^= x >> 7; x ^= x << 17;
			uint64_t pc = lo + x % (hi - lo);
			struct gopcln_frame fr[16];
			if (e->pcln && gopcln_lookup(e->pcln, pc, fr, 16) > 0)
				hits++;
			else if (elfsym_lookup(e, pc, NULL))
				hits++;
		}
		double t3 = now_s();
		printf("load_ms %.2f\nbytes %zu\nsyms %zu\npcln_funcs %zu\nlookups %ld\nhits %ld\n"
		       "us_per_lookup %.3f\n", (t1 - t0) * 1e3, e->bytes, e->nsyms,
		       e->pcln ? gopcln_nfunc(e->pcln) : 0, n, hits, (t3 - t2) * 1e6 / (n ? n : 1));
		elfsym_free(e);
		return 0;
	}
	if (argc >= 2 && !strcmp(argv[1], "torture"))
		return torture(argc, argv);
	if (argc >= 2 && !strcmp(argv[1], "serve"))
		return serve();
	if (argc >= 2 && (!strcmp(argv[1], "resolve") || !strcmp(argv[1], "kernel") ||
			  !strcmp(argv[1], "bench")))
		return symbolizer_cmd(argc, argv);
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
	} else if (!strcmp(cmd, "frameless")) {
		/* functions gopcln_func_frameless() calls frameless, by name */
		uint64_t budget = UINT64_MAX;
		for (size_t i = 0; e->pcln && i < gopcln_nfunc(e->pcln); i++) {
			struct gopcln_func f;
			if (gopcln_func_frameless(e->pcln, i, &budget) == 1 &&
			    gopcln_func_at(e->pcln, i, &f) == 0)
				printf("%" PRIx64 " %" PRIx64 " %s\n", f.entry, f.end,
				       f.name ? f.name : "?");
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
	} else if (!strcmp(cmd, "gofunc") && argc > 3) {
		struct gopcln_func f;
		if (!e->pcln || gopcln_find_name(e->pcln, argv[3], &f) < 0) {
			printf("error not found\n");
			rc = 1;
		} else {
			printf("%" PRIx64 " %" PRIx64 "\n", f.entry, f.end);
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
