/*
 * replay.c - the agent's window work at the sample rates of big nodes
 * (docs/performance.md, "How cost grows"). This machine has 2 CPUs; a
 * 64-CPU node at 99 Hz takes 63,360 samples in a 10 s window. So:
 *
 *  1. record one window of this host with the real sampler (whole host,
 *     99 Hz, --record-secs long) while whatever runs here runs;
 *  2. for each node size (--cpus) and frequency (--hz), make a window of
 *     CPUs x Hz x --window-secs samples out of the recorded records: copy
 *     k of them with thread ids moved out of the pid range (each copy is
 *     other threads of the same processes, as on a node with more CPUs)
 *     and the `cpu` label spread over the node's CPUs; the processes,
 *     their stacks and symbols stay the recorded ones;
 *  3. run the agent's window work on it (cpu_profiles_build: symbolize,
 *     build and gzip one profile per process, for Parca), --rounds times,
 *     and report the CPU time (this process, CLOCK_PROCESS_CPUTIME_ID) of
 *     the median round, against the window's length: the work runs on one
 *     thread, so past 100 % the agent no longer keeps up.
 *
 * What it leaves out: the drain (BPF map reads: proportional to distinct
 * keys, measured on this machine by the node runs), the push (gRPC, done
 * by another thread), and a big node's other processes and distinct
 * stacks (bench/scale.py's processes and stacks axes).
 *
 *   build/bench-replay [--record-secs 5] [--window-secs 10] [--cpus 16,64,256]
 *                      [--hz 19,99] [--rounds 3]
 *
 * Root (BPF). Prints a Markdown table.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cpu.h"
#include "cpu_profile.h"
#include "err.h"
#include "log.h"
#include "ppclock.h"
#include "symbolize.h"
#include "targets.h"

struct sink {
	uint64_t bytes;
	size_t profiles;
};

static int count_profile(void *arg, const struct pp_labels *labels, const uint8_t *gz, size_t len,
			 bool durable, struct pp_err *err)
{
	struct sink *s = arg;
	(void)labels, (void)gz, (void)durable, (void)err;
	s->bytes += len;
	s->profiles++;
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* "16,64,256" -> up to max numbers in 1..100000 */
static size_t parse_list(const char *s, unsigned *out, size_t max)
{
	size_t n = 0;
	while (*s && n < max) {
		char *end;
		unsigned long v = strtoul(s, &end, 10);
		if (end == s || v == 0 || v > 100000)
			return 0;
		out[n++] = (unsigned)v;
		s = *end == ',' ? end + 1 : end;
		if (end == s && *s)
			return 0;
	}
	return n;
}

int main(int argc, char **argv)
{
	unsigned record_secs = 5, window_secs = 10, rounds = 3, cpus[8] = { 16, 64, 256 },
		 hz[8] = { 19, 99 };
	size_t ncpus = 3, nhz = 2;
	for (int i = 1; i + 1 < argc; i += 2) {
		const char *k = argv[i], *v = argv[i + 1];
		if (!strcmp(k, "--record-secs"))
			record_secs = (unsigned)atoi(v);
		else if (!strcmp(k, "--window-secs"))
			window_secs = (unsigned)atoi(v);
		else if (!strcmp(k, "--rounds"))
			rounds = (unsigned)atoi(v);
		else if (!strcmp(k, "--cpus"))
			ncpus = parse_list(v, cpus, 8);
		else if (!strcmp(k, "--hz"))
			nhz = parse_list(v, hz, 8);
		else {
			fprintf(stderr, "replay: unknown option %s\n", k);
			return 2;
		}
	}
	if (!record_secs || !window_secs || !rounds || rounds > 99 || !ncpus || !nhz) {
		fprintf(stderr, "replay: bad arguments (see the comment at the top of bench/replay.c)\n");
		return 2;
	}
	pp_log_setup(PP_WARN, PP_LOG_LOGFMT);

	struct pp_err err = { 0 };
	struct targets *t = NULL;
	struct symbolizer *sym = NULL;
	struct cpu_sampler *s = NULL;
	struct cpu_window rec = { 0 };
	if (targets_new(NULL, &t, &err) < 0 ||
	    targets_scan(t, pp_clock_ns(CLOCK_MONOTONIC), NULL, NULL, &err) < 0 ||
	    sym_new(&(struct sym_opts){ 0 }, &sym, &err) < 0 ||
	    cpu_sampler_new(&(struct cpu_sampler_opts){ .frequency_hz = 99,
							.max_depth = 127,
							.kernel_stacks = true,
							.cpu_label = true,
							.interval_ns = record_secs * 1000000000ull },
			    &s, &err) < 0) {
		fprintf(stderr, "replay: %s\n", err.msg);
		return 1;
	}
	/* the drain at the start empties what attaching took; then one window */
	if (cpu_sampler_drain(s, &rec, &err) < 0)
		goto fail;
	sleep(record_secs);
	if (cpu_sampler_drain(s, &rec, &err) < 0)
		goto fail;
	if (targets_scan(t, pp_clock_ns(CLOCK_MONOTONIC), NULL, NULL, &err) < 0)
		goto fail;
	if (!rec.samples) {
		fprintf(stderr, "replay: no samples recorded in %u s\n", record_secs);
		return 1;
	}
	printf("Recorded %llu samples, %zu records, %zu stacks in %u s (this host, 99 Hz); "
	       "windows of %u s, median of %u rounds.\n\n",
	       (unsigned long long)rec.samples, rec.nrecs, rec.nstacks, record_secs, window_secs,
	       rounds);
	printf("| node CPUs | Hz | samples / window | profiles | gzip bytes | window work CPU ms "
	       "| of the window |\n|---|---|---|---|---|---|---|\n");

	for (size_t ci = 0; ci < ncpus; ci++) {
		for (size_t hi = 0; hi < nhz; hi++) {
			uint64_t want = (uint64_t)cpus[ci] * hz[hi] * window_secs;
			size_t copies = (size_t)((want + rec.samples - 1) / rec.samples);
			struct cpu_window w = rec; /* stacks shared with rec: not freed here */
			w.nrecs = copies * rec.nrecs;
			w.recs = calloc(w.nrecs, sizeof(*w.recs));
			if (!w.recs) {
				fprintf(stderr, "replay: out of memory\n");
				return 1;
			}
			w.samples = 0;
			for (size_t c = 0; c < copies; c++)
				for (size_t i = 0; i < rec.nrecs; i++) {
					struct cpu_record *r = &w.recs[c * rec.nrecs + i];
					*r = rec.recs[i];
					/* other threads of the same process (pid_max is
					 * at most 2^22), on the node's CPUs */
					r->key.pid += (uint32_t)(c << 22);
					r->key.cpu = (uint32_t)((c * 2 + r->key.cpu) % cpus[ci]);
					w.samples += r->count;
				}
			double ms[100];
			struct sink sk = { 0 };
			/* a round to load what the first one would (symbols) */
			for (unsigned k = 0; k <= rounds; k++) {
				struct cpu_profile_opts po = {
					.node = "replay",
					.frequency_hz = hz[hi],
					.thread_labels = true,
					.cpu_label = true,
					.time_nanos = pp_clock_ns(CLOCK_REALTIME),
					.duration_nanos = (int64_t)window_secs * 1000000000,
					.sym = sym,
				};
				struct cpu_profile_stats ps;
				sk = (struct sink){ 0 };
				uint64_t c0 = pp_clock_ns(CLOCK_PROCESS_CPUTIME_ID);
				if (cpu_profiles_build(&w, t, &po,
						       &(struct pp_reporter){ count_profile, &sk },
						       &ps, &err) < 0) {
					fprintf(stderr, "replay: %s\n", err.msg);
					return 1;
				}
				if (k)
					ms[k - 1] = (double)(pp_clock_ns(CLOCK_PROCESS_CPUTIME_ID) -
							     c0) /
						    1e6;
			}
			qsort(ms, rounds, sizeof(ms[0]), cmp_double);
			double med = ms[rounds / 2];
			printf("| %u | %u | %llu | %zu | %llu | %.1f | %.1f %% |\n", cpus[ci], hz[hi],
			       (unsigned long long)w.samples, sk.profiles,
			       (unsigned long long)sk.bytes, med, med / (window_secs * 10.0));
			fflush(stdout);
			free(w.recs);
		}
	}
	cpu_window_free(&rec);
	cpu_sampler_free(s);
	sym_free(sym);
	targets_free(t);
	return 0;
fail:
	fprintf(stderr, "replay: %s\n", err.msg);
	return 1;
}
