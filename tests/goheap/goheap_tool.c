/*
 * goheap_tool - drives gobin/goheap directly for the tests and the bench.
 *
 *   goheap_tool vars FILE
 *       analyze FILE: one line of key=value (is_go, version, build ids,
 *       pie, symtab, source, link-time addresses of the three variables)
 *   goheap_tool kill-then-read PID
 *       attach to PID, SIGKILL it, wait until it is a zombie or gone, then
 *       goheap_read(): prints "rc=N complete=B buckets=N msg=..."
 *   goheap_tool bench PID ITERATIONS [MAX_BUCKETS]
 *       time goheap_read and goheap_snapshot ITERATIONS times each;
 *       prints min/median ms and the peak RSS of this process
 *   goheap_tool snapbench PID ITERATIONS
 *       goheap_snapshot alone (for perf record): CPU ms min/median and
 *       minor page faults per snapshot
 *   goheap_tool enable PID
 *       gobin_enable_profiling(): prints "rc=N old=N"
 *   goheap_tool exec-race EXE N [ARG]...
 *       N times: fork, exec EXE ARG... at nice 19 on this CPU,
 *       and gobin_new() on the child the moment it has EXE's name (often
 *       inside its execve(), before the ELF is mapped; the analysis is held,
 *       so gobin_new() is as fast as for a replica); -EAGAIN is asked again
 *       every ms for up to 10 s. Prints
 *       "tries=N ok=A again_then_ok=B failed=C msg=FIRST_FAILURE"
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "givemem.h"
#include "gobin.h"
#include "goheap.h"
#include "ppclock.h"
#include "pprof.h"
#include "procinfo.h"
#include "proto/profile.pb-c.h"

static const char *src_name(enum gobin_source s)
{
	return s == GOBIN_VARS_SYMTAB ? "symtab" : s == GOBIN_VARS_CODE ? "code" : "none";
}

static int cmd_vars(const char *path)
{
	struct gobin *g;
	struct pp_err err = { 0 };
	int rc = gobin_new(&(struct gobin_opts){ .path = path }, &g, &err);
	if (rc) {
		printf("rc=%d msg=%s\n", rc, err.msg);
		return 1;
	}
	printf("is_go=%d version=%s go_build_id=%s gnu_build_id=%s pie=%d symtab=%d pclntab=%d "
	       "source=%s mbuckets=0x%" PRIx64 " rate=0x%" PRIx64 " cycle=0x%" PRIx64 "\n",
	       g->is_go, g->go_version, g->go_build_id[0] ? g->go_build_id : "-",
	       g->gnu_build_id[0] ? g->gnu_build_id : "-", g->pie, g->has_symtab, g->has_pclntab,
	       src_name(g->vars.source), g->vars.mbuckets, g->vars.mem_profile_rate,
	       g->vars.mprof_cycle);
	gobin_free(g);
	return 0;
}

static char proc_state(pid_t pid)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	char *p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p[2] : '?';
}

static int cmd_kill_then_read(pid_t pid)
{
	struct gobin *g;
	struct pp_err err = { 0 };
	int rc = gobin_new(&(struct gobin_opts){ .pid = pid }, &g, &err);
	if (rc) {
		printf("attach rc=%d msg=%s\n", rc, err.msg);
		return 1;
	}
	kill(pid, SIGKILL);
	for (int i = 0; i < 2000; i++) {
		char s = proc_state(pid);
		if (s == 0 || s == 'Z' || s == 'X')
			break;
		usleep(1000);
	}
	struct go_heap h;
	goheap_init(&h);
	rc = goheap_read(pid, g, 100000, 128, &h, &err);
	printf("rc=%d complete=%d buckets=%zu msg=%s\n", rc, h.complete, h.n,
	       rc ? err.msg : h.incomplete_reason);
	goheap_free(&h);
	gobin_free(g);
	return 0;
}

static double ms(const struct timespec *a, const struct timespec *b)
{
	return (double)(b->tv_sec - a->tv_sec) * 1e3 + (double)(b->tv_nsec - a->tv_nsec) / 1e6;
}

static int dcmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static int cmd_bench(pid_t pid, int iters, uint32_t max_buckets)
{
	struct gobin *g;
	struct pp_err err = { 0 };
	struct timespec t0, t1;
	if (iters < 1 || iters > 1000)
		iters = 5;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int rc = gobin_new(&(struct gobin_opts){ .pid = pid }, &g, &err);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (rc) {
		printf("attach rc=%d msg=%s\n", rc, err.msg);
		return 1;
	}
	double attach = ms(&t0, &t1);
	double *rd = calloc((size_t)iters, sizeof(double)),
	       *sn = calloc((size_t)iters, sizeof(double));
	double *rdc = calloc((size_t)iters, sizeof(double)),
	       *snc = calloc((size_t)iters, sizeof(double));
	struct timespec c0, c1;
	size_t buckets = 0, samples = 0, len = 0;
	uint64_t reads = 0;
	bool complete = false;
	for (int i = 0; i < iters; i++) {
		struct go_heap h;
		goheap_init(&h);
		clock_gettime(CLOCK_MONOTONIC, &t0);
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
		rc = goheap_read(pid, g, max_buckets, 128, &h, &err);
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		rdc[i] = ms(&c0, &c1);
		if (rc) {
			printf("read rc=%d msg=%s\n", rc, err.msg);
			return 1;
		}
		rd[i] = ms(&t0, &t1);
		buckets = h.n;
		reads = h.remote_reads;
		goheap_free(&h);
	}
	struct rusage ru_read;
	getrusage(RUSAGE_SELF, &ru_read);
	/* The parts of a snapshot: build (symbolize + pprof) and encode. */
	double build_min = 1e9, enc_min = 1e9;
	for (int i = 0; i < iters; i++) {
		struct go_heap h;
		struct pprof *p = NULL;
		uint8_t *buf = NULL;
		size_t blen = 0;
		goheap_init(&h);
		if (goheap_read(pid, g, max_buckets, 128, &h, &err))
			return 1;
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
		if (goheap_to_pprof(&h, g, GOHEAP_VIEW_RUNTIME, &p, &err))
			return 1;
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
		if (ms(&c0, &c1) < build_min)
			build_min = ms(&c0, &c1);
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
		if (pprof_encode(p, false, &buf, &blen, &err))
			return 1;
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
		if (ms(&c0, &c1) < enc_min)
			enc_min = ms(&c0, &c1);
		free(buf);
		pprof_free(p);
		goheap_free(&h);
	}
	for (int i = 0; i < iters; i++) {
		struct goheap_snapshot s;
		struct goheap_snapshot_opts o = { .view = GOHEAP_VIEW_RUNTIME,
						  .max_buckets = max_buckets,
						  .max_depth = 128,
						  .trigger = "on_demand",
						  .node = "bench" };
		clock_gettime(CLOCK_MONOTONIC, &t0);
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
		rc = goheap_snapshot(pid, g, &o, &s, &err);
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		snc[i] = ms(&c0, &c1);
		if (rc) {
			printf("snapshot rc=%d msg=%s\n", rc, err.msg);
			return 1;
		}
		sn[i] = ms(&t0, &t1);
		samples = s.samples;
		len = s.len;
		complete = s.complete;
		goheap_snapshot_free(&s);
	}
	qsort(rd, (size_t)iters, sizeof(double), dcmp);
	qsort(sn, (size_t)iters, sizeof(double), dcmp);
	qsort(rdc, (size_t)iters, sizeof(double), dcmp);
	qsort(snc, (size_t)iters, sizeof(double), dcmp);
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	printf("buckets=%zu complete=%d remote_reads=%" PRIu64 " samples=%zu pprof_gz_bytes=%zu "
	       "attach_ms=%.2f read_ms_min=%.2f read_ms_median=%.2f snapshot_ms_min=%.2f "
	       "snapshot_ms_median=%.2f read_cpu_ms_min=%.2f snapshot_cpu_ms_min=%.2f "
	       "build_cpu_ms_min=%.2f encode_nogzip_cpu_ms_min=%.2f "
	       "peak_rss_kb_after_reads=%ld peak_rss_kb=%ld\n",
	       buckets, complete, reads, samples, len, attach, rd[0], rd[iters / 2], sn[0],
	       sn[iters / 2], rdc[0], snc[0], build_min, enc_min, ru_read.ru_maxrss, ru.ru_maxrss);
	free(rd);
	free(sn);
	free(rdc);
	free(snc);
	gobin_free(g);
	return 0;
}

static int cmd_snapbench(pid_t pid, int iters)
{
	struct gobin *g;
	struct pp_err err = { 0 };
	if (iters < 1 || iters > 1000)
		iters = 5;
	if (gobin_new(&(struct gobin_opts){ .pid = pid }, &g, &err)) {
		printf("attach: %s\n", err.msg);
		return 1;
	}
	double *cpu = calloc((size_t)iters, sizeof(double));
	long flt_min = -1;
	size_t samples = 0;
	uint64_t read_bytes = 0;
	for (int i = 0; cpu && i < iters; i++) {
		struct goheap_snapshot s;
		struct goheap_snapshot_opts o = { .view = GOHEAP_VIEW_RUNTIME,
						  .max_buckets = 1000000,
						  .max_depth = 128,
						  .trigger = "on_demand",
						  .node = "bench" };
		struct timespec c0, c1;
		struct rusage r0, r1;
		getrusage(RUSAGE_SELF, &r0);
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
		int rc = goheap_snapshot(pid, g, &o, &s, &err);
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
		getrusage(RUSAGE_SELF, &r1);
		if (rc) {
			printf("snapshot rc=%d msg=%s\n", rc, err.msg);
			return 1;
		}
		cpu[i] = ms(&c0, &c1);
		if (flt_min < 0 || r1.ru_minflt - r0.ru_minflt < flt_min)
			flt_min = r1.ru_minflt - r0.ru_minflt;
		samples = s.samples;
		read_bytes = s.read_bytes;
		goheap_snapshot_free(&s);
	}
	if (!cpu)
		return 1;
	qsort(cpu, (size_t)iters, sizeof(double), dcmp);
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	printf("samples=%zu read_bytes=%" PRIu64 " snapshot_cpu_ms_min=%.2f "
	       "snapshot_cpu_ms_median=%.2f minor_faults_min=%ld peak_rss_kb=%ld\n",
	       samples, read_bytes, cpu[0], cpu[iters / 2], flt_min, ru.ru_maxrss);
	free(cpu);
	gobin_free(g);
	return 0;
}

/* canon PID: the heap profile pprof_encode writes (straight to the wire
 * format) must be the bytes protobuf-c packs for the same message: unpack,
 * repack, compare. Prints "canon ok bytes=N samples=N" or what differs. */
static int cmd_canon(pid_t pid)
{
	struct gobin *g;
	struct pp_err err = { 0 };
	struct go_heap h;
	struct pprof *p = NULL;
	uint8_t *buf = NULL, *re = NULL;
	size_t len = 0;
	if (gobin_new(&(struct gobin_opts){ .pid = pid }, &g, &err)) {
		printf("open: %s\n", err.msg);
		return 1;
	}
	goheap_init(&h);
	if (goheap_read(pid, g, 1000000, 128, &h, &err) ||
	    goheap_to_pprof(&h, g, GOHEAP_VIEW_RUNTIME, &p, &err) ||
	    pprof_encode(p, false, &buf, &len, &err)) {
		printf("build: %s\n", err.msg);
		return 1;
	}
	Perftools__Profiles__Profile *pr = perftools__profiles__profile__unpack(NULL, len, buf);
	int rc = 1;
	if (!pr) {
		printf("canon: protobuf-c cannot unpack %zu bytes\n", len);
	} else {
		size_t n = perftools__profiles__profile__get_packed_size(pr);
		re = malloc(n ? n : 1);
		if (re && perftools__profiles__profile__pack(pr, re) == n && n == len &&
		    !memcmp(re, buf, len)) {
			printf("canon ok bytes=%zu samples=%zu\n", len, pprof_sample_count(p));
			rc = 0;
		} else {
			size_t i = 0;
			while (re && i < n && i < len && re[i] == buf[i])
				i++;
			printf("canon: differs: ours %zu bytes, protobuf-c %zu, first at %zu\n",
			       len, n, i);
		}
		perftools__profiles__profile__free_unpacked(pr, NULL);
	}
	free(re);
	free(buf);
	pprof_free(p);
	goheap_free(&h);
	gobin_free(g);
	return rc;
}

/* gobin_share: analyze pid1, share with pid2; both snapshots must equal
 * fresh ones. Prints "bias1=.. bias2=.. same_vars=B" and writes 4 files. */
static int write_file(const char *path, const uint8_t *buf, size_t len)
{
	FILE *f = fopen(path, "wb");
	if (!f)
		return 1;
	size_t n = fwrite(buf, 1, len, f);
	fclose(f);
	return n != len;
}

static int cmd_share(pid_t p1, pid_t p2, const char *prefix)
{
	struct gobin *g1, *g2, *fresh;
	struct pp_err err = { 0 };
	if (gobin_new(&(struct gobin_opts){ .pid = p1 }, &g1, &err)) {
		printf("open: %s\n", err.msg);
		return 1;
	}
	int rc = gobin_share(g1, p2, &g2, &err);
	if (rc) {
		printf("share rc=%d msg=%s\n", rc, err.msg);
		gobin_free(g1);
		return 0;
	}
	if (gobin_new(&(struct gobin_opts){ .pid = p2 }, &fresh, &err)) {
		printf("open2: %s\n", err.msg);
		return 1;
	}
	printf("bias1=0x%" PRIx64 " bias2=0x%" PRIx64 " same_vars=%d\n", g1->bias, g2->bias,
	       g2->mbuckets_addr == fresh->mbuckets_addr && g2->rate_addr == fresh->rate_addr &&
		       g2->cycle_addr == fresh->cycle_addr && g2->bias == fresh->bias);
	gobin_free(g1); /* the shared analysis must outlive it */
	const struct gobin *gs[2] = { g2, fresh };
	for (int i = 0; i < 2; i++) {
		struct goheap_snapshot s;
		struct goheap_snapshot_opts o = { .view = GOHEAP_VIEW_RUNTIME,
						  .max_buckets = 100000,
						  .max_depth = 128,
						  .trigger = "on_demand" };
		char path[4096];
		if (goheap_snapshot(p2, gs[i], &o, &s, &err)) {
			printf("snapshot: %s\n", err.msg);
			return 1;
		}
		snprintf(path, sizeof(path), "%s-%s.pb.gz", prefix, i ? "fresh" : "shared");
		write_file(path, s.gz, s.len);
		goheap_snapshot_free(&s);
	}
	gobin_free(g2);
	gobin_free(fresh);
	return 0;
}

static int cmd_enable(pid_t pid)
{
	struct gobin *g;
	struct pp_err err = { 0 };
	int rc = gobin_new(&(struct gobin_opts){ .pid = pid }, &g, &err);
	if (rc) {
		printf("attach rc=%d msg=%s\n", rc, err.msg);
		return 1;
	}
	int64_t old = -1;
	rc = gobin_enable_profiling(g, GOBIN_DEFAULT_RATE, &old, &err);
	printf("rc=%d old=%" PRId64 " msg=%s\n", rc, old, err.msg);
	gobin_free(g);
	return 0;
}

/*
 * Random buckets (as an OOM capture from BPF could deliver: garbage PCs,
 * empty and deep stacks, frees above allocs) through goheap_to_pprof, both
 * views, encode and validate with Parca's rules. Prints "ok N" or the error.
 */
static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static int cmd_fuzz_profile(const char *path, int iters)
{
	struct gobin *g;
	struct pp_err err = { 0 };
	if (gobin_new(&(struct gobin_opts){ .path = path }, &g, &err)) {
		printf("open: %s\n", err.msg);
		return 1;
	}
	g->text_start = g->text_vaddr;
	g->text_limit = g->text_vaddr + g->text_memsz;
	uint64_t seed = 0x9e3779b97f4a7c15ULL, stk[200];
	for (int it = 0; it < iters; it++) {
		struct go_heap h;
		goheap_init(&h);
		h.rate = (int64_t)(rnd(&seed) % 3 == 0 ? 1 : rnd(&seed) % 1000000);
		h.cycle = (uint32_t)rnd(&seed);
		size_t nb = rnd(&seed) % 300;
		for (size_t i = 0; i < nb; i++) {
			uint32_t n = (uint32_t)(rnd(&seed) % (i % 17 == 0 ? 200 : 40));
			for (uint32_t k = 0; k < n; k++) {
				uint64_t r = rnd(&seed);
				stk[k] = r % 4 == 0 ? r : g->text_vaddr + r % (g->text_memsz + 64);
				if (k && r % 5 == 0)
					stk[k] = stk[k - 1]; /* recursion */
				if (r % 11 == 0)
					stk[k] = r % 22 ? 0 : 1; /* null PCs */
			}
			struct go_memrec a, f[3];
			uint64_t *m = &a.allocs;
			for (int k = 0; k < 4; k++)
				m[k] = rnd(&seed) % 1000;
			for (int j = 0; j < 3; j++) {
				m = &f[j].allocs;
				for (int k = 0; k < 4; k++)
					m[k] = rnd(&seed) % 1000;
			}
			if (goheap_add_bucket(&h, 0x1000 + 8 * i, rnd(&seed) % 100000, stk, n,
					      n > 30, &a, f)) {
				printf("add_bucket failed\n");
				return 1;
			}
		}
		if (it % 7 == 0)
			goheap_set_incomplete(&h, "fuzz %d", it);
		for (int v = 0; v < 2; v++) {
			struct pprof *p = NULL;
			uint8_t *buf = NULL;
			size_t len = 0;
			if (goheap_to_pprof(&h, g, v ? GOHEAP_VIEW_LATEST : GOHEAP_VIEW_RUNTIME, &p,
					    &err) ||
			    pprof_encode(p, false, &buf, &len, &err) ||
			    pprof_validate(buf, len, &err)) {
				printf("iteration %d: %s\n", it, err.msg);
				return 1;
			}
			free(buf);
			pprof_free(p);
		}
		goheap_free(&h);
	}
	gobin_free(g);
	printf("ok %d\n", iters);
	return 0;
}

/* stdin: "count size rate" lines -> "count size rate c s c_glibc s_glibc" */
static int cmd_scale(void)
{
	long long c, s, r;
	while (scanf("%lld %lld %lld", &c, &s, &r) == 3) {
		int64_t oc, os, gc = 0, gs = 0;
		goheap_scale_heap_sample(c, s, r, &oc, &os);
		if (c && s && r > 1) {
			double sc = 1 / (1 - exp(-((double)s / (double)c) / (double)r));
			gc = (int64_t)((double)c * sc);
			gs = (int64_t)((double)s * sc);
		} else {
			gc = c && s ? c : 0;
			gs = c && s ? s : 0;
		}
		printf("%lld %lld %lld %lld %lld %lld %lld\n", c, s, r, (long long)oc,
		       (long long)os, (long long)gc, (long long)gs);
	}
	return 0;
}

static int cmd_exec_race(const char *exe, int n, char **args)
{
	char want[PATH_MAX];
	int ok = 0, again_ok = 0, failed = 0;
	char first[256] = "-";

	if (!realpath(exe, want)) {
		printf("exec-race: %s: %s\n", exe, strerror(errno));
		return 1;
	}
	cpu_set_t one;
	CPU_ZERO(&one);
	CPU_SET(sched_getcpu() > 0 ? sched_getcpu() : 0, &one);
	sched_setaffinity(0, sizeof(one), &one);
	prctl(PR_SET_TIMERSLACK, 1UL);
	struct gobin *base;
	struct pp_err berr = { 0 };
	if (gobin_new(&(struct gobin_opts){ .path = want }, &base, &berr)) {
		printf("exec-race: %s\n", berr.msg);
		return 1;
	}
	char want_comm[16]; /* TASK_COMM_LEN: the file name, cut to 15 */
	snprintf(want_comm, sizeof(want_comm), "%s", strrchr(want, '/') + 1);
	for (int i = 0; i < n; i++) {
		int fds[2];
		char c;
		if (pipe(fds))
			return 1;
		pid_t pid = fork();
		if (pid < 0)
			return 1;
		if (pid == 0) {
			/* nice 19 on the reader's CPU: the exec runs
			 * in the reader's sleeps and its wakeups preempt it at any
			 * point, as a busy host's load does */
			if (nice(19) < 0)
				_exit(126);
			int dn = open("/dev/null", O_RDWR);
			if (dn >= 0) {
				dup2(dn, 0);
				dup2(dn, 1);
			}
			close(fds[1]);
			args[-1] = want; /* argv[3], N, is not needed by then */
			if (read(fds[0], &c, 1) == 1)
				execv(want, args - 1);
			_exit(127);
		}
		close(fds[0]);
		if (write(fds[1], "x", 1) != 1)
			return 1;
		close(fds[1]);
		/* execve() sets the name right after it installs the new
		 * address space, before it maps the ELF: look every 100 us
		 * (the child runs in between) for 10 s at most */
		uint64_t t0 = pp_mono_ns(), ticks;
		char comm[32];
		while (pp_mono_ns() - t0 < 10000000000ull &&
		       (proc_comm_start(pid, comm, sizeof(comm), &ticks) ||
			strcmp(comm, want_comm)))
			usleep(100);
		struct gobin *g = NULL;
		struct pp_err err = { 0 };
		int rc = gobin_new(&(struct gobin_opts){ .pid = pid }, &g, &err), asked = 1;
		while (rc == -EAGAIN && pp_mono_ns() - t0 < 10000000000ull) {
			pp_err_clear(&err);
			usleep(1000);
			rc = gobin_new(&(struct gobin_opts){ .pid = pid }, &g, &err);
			asked++;
		}
		if (rc == 0 && asked == 1)
			ok++;
		else if (rc == 0)
			again_ok++;
		else if (failed++ == 0)
			snprintf(first, sizeof(first), "rc=%d:%s", rc, err.msg);
		gobin_free(g);
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
	gobin_free(base);
	for (char *p = first; *p; p++)
		if (*p == ' ')
			*p = '_';
	printf("tries=%d ok=%d again_then_ok=%d failed=%d msg=%s\n", n, ok, again_ok, failed,
	       first);
	return failed ? 1 : 0;
}

int main(int argc, char **argv)
{
	pp_malloc_policy(); /* as pushprof runs: the benches measure its allocator too */
	if (argc >= 2 && !strcmp(argv[1], "scale"))
		return cmd_scale();
	if (argc >= 4 && !strcmp(argv[1], "fuzz-profile"))
		return cmd_fuzz_profile(argv[2], atoi(argv[3]));
	if (argc >= 3 && !strcmp(argv[1], "vars"))
		return cmd_vars(argv[2]);
	if (argc >= 3 && !strcmp(argv[1], "kill-then-read"))
		return cmd_kill_then_read(atoi(argv[2]));
	if (argc >= 4 && !strcmp(argv[1], "bench"))
		return cmd_bench(atoi(argv[2]), atoi(argv[3]),
				 argc >= 5 ? (uint32_t)strtoul(argv[4], NULL, 10) : 1000000);
	if (argc >= 4 && !strcmp(argv[1], "snapbench"))
		return cmd_snapbench(atoi(argv[2]), atoi(argv[3]));
	if (argc >= 5 && !strcmp(argv[1], "share"))
		return cmd_share(atoi(argv[2]), atoi(argv[3]), argv[4]);
	if (argc >= 3 && !strcmp(argv[1], "canon"))
		return cmd_canon(atoi(argv[2]));
	if (argc >= 3 && !strcmp(argv[1], "enable"))
		return cmd_enable(atoi(argv[2]));
	if (argc >= 4 && !strcmp(argv[1], "exec-race"))
		return cmd_exec_race(argv[2], atoi(argv[3]), argv + 4);
	fprintf(stderr, "usage: goheap_tool vars FILE | kill-then-read PID | "
			"bench PID ITERATIONS [MAX_BUCKETS] | snapbench PID ITERATIONS | canon PID "
			"| enable PID | exec-race EXE N [ARG]...\n");
	return 2;
}
