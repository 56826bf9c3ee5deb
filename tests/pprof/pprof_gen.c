/*
 * pprof_gen - builds profiles with agent/ship/pprof.c and writes them to OUTDIR:
 *   cpu.pb.gz   CPU-like: samples/count + cpu/nanoseconds, inline frames,
 *               string and numeric labels, comments, many merged samples
 *   heap.pb.gz  Go-heap-like: 4 sample types, space/bytes period, default
 *               sample type inuse_space, addresses in a mapping
 *   big.pb.gz   5,000 distinct samples (timing/size figures)
 * and, for each, a manifest OUTDIR/NAME.txt with every pprof_add_sample()
 * call (one per line) so the Python side can compute the expected merged
 * profile independently and compare with what `go tool pprof` reads.
 *
 * It also checks, in C, what go tool pprof cannot see: interning returns
 * the same ids, ids are sequential, pprof_validate accepts our output and
 * rejects broken input, pprof_gunzip honours max_out.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pprof.h"
#include "proto/profile.pb-c.h"
#include "check.h"

static uint64_t rng = 0x1234567;
static uint32_t rnd(uint32_t n)
{
	rng = rng * 6364136223846793005ull + 1442695040888963407ull;
	return (uint32_t)(rng >> 33) % n;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int write_file(const char *dir, const char *name, const uint8_t *b, size_t n)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(b, 1, n, f) != n) {
		perror(path);
		exit(1);
	}
	fclose(f);
	return 0;
}

static FILE *manifest(const char *dir, const char *name)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "w");
	if (!f) {
		perror(path);
		exit(1);
	}
	return f;
}

static void encode_write(struct pprof *p, const char *dir, const char *name)
{
	uint8_t *out = NULL;
	size_t len = 0;
	struct pp_err err = { 0 };
	int rc = pprof_encode(p, true, &out, &len, &err);
	CHECK(rc == 0 && len > 20, "%s: encode rc=%d len=%zu %s", name, rc, len, err.msg);
	CHECK(pprof_is_gzip(out, len), "%s: output is gzip", name);
	rc = pprof_validate(out, len, &err);
	CHECK(rc == 0, "%s: pprof_validate accepts it (%s)", name, err.msg);
	write_file(dir, name, out, len);
	free(out);
}

/* CPU-like profile. Function names are f0..f7 plus an inlined helper. */
static void gen_cpu(const char *dir)
{
	struct pprof *p;
	CHECK(pprof_new(&p, NULL) == 0, "pprof_new");
	FILE *m = manifest(dir, "cpu.txt");
	uint64_t fn[8], loc[8];
	char name[32];

	CHECK(pprof_add_sample_type(p, "samples", "count") == 0, "cpu: sample type samples");
	CHECK(pprof_add_sample_type(p, "cpu", "nanoseconds") == 0, "cpu: sample type cpu");
	pprof_set_period(p, "cpu", "nanoseconds", 52631578);
	pprof_set_time(p, 1700000000000000000ll, 10000000000ll);
	pprof_add_comment(p, "pushprof test comment one");
	pprof_add_comment(p, "comment two");
	uint64_t map = pprof_mapping(p, 0x400000, 0x500000, 0, "/usr/bin/testprog",
				     "abcdef0123", true, true);
	CHECK(map == 1, "cpu: first mapping id is 1 (got %" PRIu64 ")", map);
	CHECK(pprof_mapping(p, 0x400000, 0x500000, 0, "/usr/bin/testprog", "abcdef0123", true,
			    true) == map, "cpu: mapping interned");
	for (int i = 0; i < 8; i++) {
		snprintf(name, sizeof(name), "f%d", i);
		fn[i] = pprof_function(p, name, name, "/src/test.c", 10 * i);
		CHECK(fn[i] == (uint64_t)i + 1, "cpu: function %s id %" PRIu64, name, fn[i]);
	}
	CHECK(pprof_function(p, "f3", "f3", "/src/test.c", 30) == fn[3], "cpu: function interned");
	uint64_t inl = pprof_function(p, "inlined_helper", NULL, "/src/inl.h", 5);
	CHECK(inl == 9, "cpu: 9th function id 9");
	for (int i = 0; i < 8; i++) {
		struct pprof_line lines[2] = { { fn[i], 100 + i }, { 0, 0 } };
		size_t nl = 1;
		if (i == 7) {	/* inlined_helper inlined into f7 */
			lines[0] = (struct pprof_line){ inl, 7 };
			lines[1] = (struct pprof_line){ fn[7], 107 };
			nl = 2;
		}
		loc[i] = pprof_location(p, map, 0x401000 + 0x10 * i, lines, nl);
		fprintf(m, "L\t%" PRIu64 "\t0x%x\t%sf%d\n", loc[i], 0x401000 + 0x10 * i,
			i == 7 ? "inlined_helper;" : "", i);
		CHECK(loc[i] == (uint64_t)i + 1, "cpu: location %d id %" PRIu64, i, loc[i]);
	}
	struct pprof_line l0 = { fn[0], 100 };
	CHECK(pprof_location(p, map, 0x401000, &l0, 1) == loc[0], "cpu: location interned by address");

	/* 20 distinct stacks (leaf first, always ending in f0 = "main"). */
	uint64_t stacks[20][6];
	size_t depth[20];
	for (int s = 0; s < 20; s++) {
		depth[s] = 1 + rnd(5);
		for (size_t d = 0; d + 1 < depth[s]; d++)
			stacks[s][d] = loc[1 + rnd(7)];
		stacks[s][depth[s] - 1] = loc[0];
	}
	const char *threads[] = { "worker", "main" };
	int add_fail = 0;
	for (int i = 0; i < 400; i++) {
		int s = rnd(20);
		int t = rnd(2);
		int cpu = 1 + rnd(2);	/* pprof drops numeric labels equal to 0 */
		int64_t v[2] = { 1, 52631578 };
		struct pprof_label lab[2] = {
			{ .key = "thread_name", .str = threads[t] },
			{ .key = "cpu", .num = cpu },
		};
		if (pprof_add_sample(p, stacks[s], depth[s], v, lab, 2))
			add_fail++;
		fprintf(m, "S\t%" PRId64 ",%" PRId64 "\t", v[0], v[1]);
		for (size_t d = 0; d < depth[s]; d++)
			fprintf(m, "%s%" PRIu64, d ? ";" : "", stacks[s][d]);
		fprintf(m, "\tthread_name=%s,cpu=#%d\n", threads[t], cpu);
	}
	CHECK(add_fail == 0, "cpu: 400 pprof_add_sample calls succeed");
	/* One sample with a numeric label that has a unit. */
	int64_t v[2] = { 3, 3 * 52631578 };
	struct pprof_label big = { .key = "bytes", .num = 4096, .num_unit = "bytes" };
	pprof_add_sample(p, &loc[7], 1, v, &big, 1);
	fprintf(m, "S\t3,%" PRId64 "\t%" PRIu64 "\tbytes=#4096\n", v[1], loc[7]);
	/* Bad calls are refused and change nothing. */
	uint64_t bad = 99;
	size_t before = pprof_sample_count(p);
	CHECK(pprof_add_sample(p, &bad, 1, v, NULL, 0) == -EINVAL, "cpu: unknown location refused");
	CHECK(pprof_add_sample_type(p, "late", "count") == -EINVAL,
	      "cpu: sample type after samples refused");
	CHECK(pprof_sample_count(p) == before, "cpu: refused calls add nothing");
	fprintf(m, "N\t%zu\n", pprof_sample_count(p));
	fclose(m);
	encode_write(p, dir, "cpu.pb.gz");
	pprof_free(p);
}

static void gen_heap(const char *dir)
{
	struct pprof *p;
	CHECK(pprof_new(&p, NULL) == 0, "pprof_new");
	FILE *m = manifest(dir, "heap.txt");
	const char *types[4][2] = { { "alloc_objects", "count" }, { "alloc_space", "bytes" },
				    { "inuse_objects", "count" }, { "inuse_space", "bytes" } };
	for (int i = 0; i < 4; i++)
		pprof_add_sample_type(p, types[i][0], types[i][1]);
	pprof_set_period(p, "space", "bytes", 524288);
	CHECK(pprof_set_default_sample_type(p, "inuse_space") == 0, "heap: default sample type");
	CHECK(pprof_set_default_sample_type(p, "nope") == -ENOENT, "heap: unknown default refused");
	pprof_set_time(p, 1700000000000000000ll, 0);
	uint64_t map = pprof_mapping(p, 0x400000, 0x800000, 0, "/app/server", "go-build-id",
				     true, true);
	const char *names[] = { "runtime.malg", "main.alloc", "main.main", "runtime.main",
				"bytes.growSlice", "main.(*cache).put" };
	uint64_t loc[6];
	for (int i = 0; i < 6; i++) {
		uint64_t f = pprof_function(p, names[i], names[i], "/app/main.go", 0);
		struct pprof_line l = { f, 20 + i };
		loc[i] = pprof_location(p, map, 0x401000 + 0x40 * i, &l, 1);
		fprintf(m, "L\t%" PRIu64 "\t0x%x\t%s\n", loc[i], 0x401000 + 0x40 * i, names[i]);
	}
	uint64_t st[3][4] = { { 1, 2, 3, 4 }, { 5, 6, 3, 4 }, { 2, 3, 4, 0 } };
	size_t dep[3] = { 4, 4, 3 };
	for (int i = 0; i < 30; i++) {
		int s = rnd(3);
		int64_t objs = 1 + rnd(100);
		int64_t sz = 16 << rnd(8);
		int64_t v[4] = { objs, objs * sz, objs / 2, objs / 2 * sz };
		char bsz[32];
		snprintf(bsz, sizeof(bsz), "%lld", (long long)sz);
		struct pprof_label lab = { .key = "bytes", .num = sz };
		pprof_add_sample(p, st[s], dep[s], v, &lab, 1);
		fprintf(m, "S\t%lld,%lld,%lld,%lld\t", (long long)v[0], (long long)v[1],
			(long long)v[2], (long long)v[3]);
		for (size_t d = 0; d < dep[s]; d++)
			fprintf(m, "%s%" PRIu64, d ? ";" : "", st[s][d]);
		fprintf(m, "\tbytes=#%lld\n", (long long)sz);
	}
	fprintf(m, "N\t%zu\n", pprof_sample_count(p));
	fclose(m);
	encode_write(p, dir, "heap.pb.gz");
	pprof_free(p);
}

static void gen_big(const char *dir)
{
	double t0 = now();
	struct pprof *p;
	CHECK(pprof_new(&p, NULL) == 0, "pprof_new");
	pprof_add_sample_type(p, "samples", "count");
	pprof_add_sample_type(p, "cpu", "nanoseconds");
	pprof_set_period(p, "cpu", "nanoseconds", 52631578);
	uint64_t map = pprof_mapping(p, 0x400000, 0x4000000, 0, "/usr/bin/big", "", false, false);
	uint64_t fns[500];
	char name[64];
	for (int i = 0; i < 500; i++) {
		snprintf(name, sizeof(name), "pkg.module%d.function_%d", i % 37, i);
		fns[i] = pprof_function(p, name, name, "/src/big/file.c", i);
	}
	size_t n = 0;
	while (pprof_sample_count(p) < 5000) {
		uint64_t locs[24];
		size_t d = 4 + rnd(20);
		for (size_t j = 0; j < d; j++) {
			uint32_t f = rnd(500);
			struct pprof_line l = { fns[f], 1 + f };
			locs[j] = pprof_location(p, map, 0x400000 + 0x10 * f, &l, 1);
		}
		int64_t v[2] = { 1, 52631578 };
		char tid[16];
		snprintf(tid, sizeof(tid), "%u", rnd(64));
		struct pprof_label lab = { .key = "thread_id", .str = tid };
		pprof_add_sample(p, locs, d, v, &lab, 1);
		n++;
	}
	double t1 = now();
	uint8_t *plain, *gz;
	size_t plen, gzlen;
	struct pp_err err = { 0 };
	pprof_encode(p, false, &plain, &plen, &err);
	double t2 = now();
	pprof_encode(p, true, &gz, &gzlen, &err);
	double t3 = now();
	CHECK(pprof_validate(gz, gzlen, &err) == 0, "big: validates (%s)", err.msg);
	double t4 = now();
	printf("FIGURE big profile: %zu samples from %zu adds; build %.1f ms; encode %.1f ms "
	       "(%zu bytes); encode+gzip %.1f ms (%zu bytes); validate %.1f ms\n",
	       pprof_sample_count(p), n, (t1 - t0) * 1e3, (t2 - t1) * 1e3, plen,
	       (t3 - t2) * 1e3, gzlen, (t4 - t3) * 1e3);
	write_file(dir, "big.pb.gz", gz, gzlen);
	free(plain);
	free(gz);
	pprof_free(p);
}

/* A streamed profile (pprof_stream_gzip, as heap snapshots are built):
 * with enough samples to pass a stage, pprof_encode_last() finishes its
 * own stream into exactly the bytes pprof_encode() makes from a copy of
 * it, and the profile is then spent. */
static void check_stream(void)
{
	struct pprof *p = NULL;
	struct pp_err err = { 0 };
	uint8_t *a = NULL, *b = NULL, *c = NULL;
	size_t alen = 0, blen = 0, clen = 0;

	CHECK(pprof_new(&p, &err) == 0, "stream: new");
	CHECK(pprof_add_sample_type(p, "alloc_space", "bytes") == 0 &&
	      pprof_add_sample_type(p, "inuse_space", "bytes") == 0 &&
	      pprof_set_merge(p, false) == 0 && pprof_stream_gzip(p) == 0,
	      "stream: sample types, no merge, streamed");
	uint64_t map = pprof_mapping(p, 0x400000, 0x800000, 0, "/bin/streamed", "", true, true);
	size_t n = 0;
	for (; n < 20000; n++) { /* ~20 bytes a sample: several 64 KiB stages */
		char name[32];
		snprintf(name, sizeof(name), "main.f%zu", n % 300);
		uint64_t fn = pprof_function(p, name, name, "/src/s.go", 1);
		struct pprof_line l = { fn, (int64_t)(n % 300) };
		uint64_t loc = pprof_location(p, map, 0x401000 + 0x10 * (n % 300), &l, 1);
		int64_t v[2] = { (int64_t)n * 64, (int64_t)n };
		if (pprof_add_sample(p, &loc, 1, v, NULL, 0))
			break;
	}
	CHECK(n == 20000, "stream: 20,000 samples added (%zu)", n);
	pprof_set_time(p, 1700000000000000000, 0);
	CHECK(pprof_encode(p, false, &a, &alen, &err) == -EINVAL,
	      "stream: no plain encoding of a streamed profile");
	free(a);
	a = NULL;
	CHECK(pprof_encode(p, true, &a, &alen, &err) == 0 && pprof_validate(a, alen, &err) == 0,
	      "stream: pprof_encode from a copy of the stream validates (%s)", err.msg);
	CHECK(pprof_encode_last(p, &b, &blen, &err) == 0 && blen == alen && b &&
	      memcmp(a, b, alen) == 0,
	      "stream: pprof_encode_last gives the same bytes (%zu vs %zu)", blen, alen);
	CHECK(pprof_encode_last(p, &c, &clen, &err) == -EINVAL && !c &&
	      pprof_encode(p, true, &c, &clen, &err) == -EINVAL && !c,
	      "stream: spent after pprof_encode_last (%s)", err.msg);
	int64_t v[2] = { 1, 1 };
	uint64_t loc = 1;
	int rc = 0;
	for (size_t i = 0; i < 5000 && !rc; i++) /* until a stage is handed over */
		rc = pprof_add_sample(p, &loc, 1, v, NULL, 0);
	CHECK(rc == -EINVAL, "stream: samples after pprof_encode_last refused (%d)", rc);
	free(a);
	free(b);
	pprof_free(p);
}

/* Pack a hand-made profile message, for validator negative cases. */
static size_t pack(Perftools__Profiles__Profile *pr, uint8_t *buf)
{
	return perftools__profiles__profile__pack(pr, buf);
}

static void check_validate(void)
{
	struct pp_err err = { 0 };
	uint8_t buf[4096], *out = NULL;
	size_t len, olen;
	char *strs[] = { "", "samples", "count" };
	char *bad0[] = { "x", "samples", "count" };
	Perftools__Profiles__ValueType vt = PERFTOOLS__PROFILES__VALUE_TYPE__INIT, *vtp = &vt;
	Perftools__Profiles__Profile pr = PERFTOOLS__PROFILES__PROFILE__INIT;
	Perftools__Profiles__Sample s = PERFTOOLS__PROFILES__SAMPLE__INIT, *sp = &s;
	Perftools__Profiles__Location l = PERFTOOLS__PROFILES__LOCATION__INIT, *lp = &l;
	Perftools__Profiles__Function f = PERFTOOLS__PROFILES__FUNCTION__INIT, *fp = &f;
	int64_t vals[2] = { 1, 2 };
	uint64_t locid = 1;

	vt.type = 1;
	vt.unit = 2;
	pr.n_sample_type = 1;
	pr.sample_type = &vtp;
	pr.n_string_table = 3;
	pr.string_table = strs;
	pr.n_sample = 1;
	pr.sample = &sp;
	s.n_value = 1;
	s.value = vals;
	s.n_location_id = 1;
	s.location_id = &locid;
	pr.n_location = 1;
	pr.location = &lp;
	l.id = 1;
	pr.n_function = 1;
	pr.function = &fp;
	f.id = 1;
	f.name = 1;

	len = pack(&pr, buf);
	CHECK(pprof_validate(buf, len, &err) == 0, "validate: minimal valid profile (%s)", err.msg);
	CHECK(pprof_gzip(buf, len, &out, &olen, &err) == 0, "gzip ok");
	CHECK(pprof_validate(out, olen, &err) == 0, "validate: gzip of it too");
	uint8_t *back = NULL;
	size_t blen;
	CHECK(pprof_gunzip(out, olen, 1 << 20, &back, &blen, &err) == 0 && blen == len &&
	      memcmp(back, buf, len) == 0, "gunzip round trip");
	free(back);
	back = NULL;
	CHECK(pprof_gunzip(out, olen, len - 1, &back, &blen, &err) == -EFBIG && !back,
	      "gunzip: max_out enforced (%s)", err.msg);
	CHECK(pprof_gunzip(out, olen - 5, 1 << 20, &back, &blen, &err) < 0 && !back,
	      "gunzip: truncated input refused (%s)", err.msg);
	free(out);

	/* A gzip bomb: 64 MiB + 1 of zeros compressed. */
	size_t bomb_n = (64u << 20) + 1;
	uint8_t *zeros = calloc(1, bomb_n);
	CHECK(pprof_gzip(zeros, bomb_n, &out, &olen, &err) == 0, "bomb: %zu bytes gzip to %zu", bomb_n, olen);
	free(zeros);
	CHECK(pprof_validate(out, olen, &err) == -EFBIG, "validate: gzip bomb refused (%s)", err.msg);
	free(out);

	CHECK(pprof_validate((const uint8_t *)"hello, world\n", 13, &err) < 0,
	      "validate: text refused (%s)", err.msg);
	CHECK(pprof_validate(buf, 0, &err) < 0, "validate: empty refused (%s)", err.msg);

	pr.string_table = bad0;
	len = pack(&pr, buf);
	CHECK(pprof_validate(buf, len, &err) < 0 && strstr(err.msg, "string_table[0]"),
	      "validate: string_table[0] != \"\" refused (%s)", err.msg);
	pr.string_table = strs;

	s.n_value = 2;
	len = pack(&pr, buf);
	CHECK(pprof_validate(buf, len, &err) < 0 && strstr(err.msg, "values"),
	      "validate: value count mismatch refused (%s)", err.msg);
	s.n_value = 1;

	locid = 2;
	len = pack(&pr, buf);
	CHECK(pprof_validate(buf, len, &err) < 0 && strstr(err.msg, "location"),
	      "validate: location id out of range refused (%s)", err.msg);
	locid = 0;
	len = pack(&pr, buf);
	CHECK(pprof_validate(buf, len, &err) < 0, "validate: location id 0 refused (%s)", err.msg);
	locid = 1;

	l.id = 5;
	len = pack(&pr, buf);
	CHECK(pprof_validate(buf, len, &err) < 0 && strstr(err.msg, "sequential"),
	      "validate: non-sequential location id refused (%s)", err.msg);
	l.id = 1;

	f.name = 3;
	len = pack(&pr, buf);
	CHECK(pprof_validate(buf, len, &err) < 0 && strstr(err.msg, "out of range"),
	      "validate: string index out of range refused (%s)", err.msg);
	f.name = 1;

	vt.type = 2;
	strs[2] = "co-unt";
	len = pack(&pr, buf);
	CHECK(pprof_validate(buf, len, &err) < 0, "validate: '-' in sample type refused (%s)", err.msg);
	strs[2] = "count";

	len = pack(&pr, buf);
	CHECK(pprof_validate(buf, len, &err) == 0, "validate: restored profile valid again (%s)", err.msg);
	CHECK(pprof_validate(buf, len - 1, &err) < 0, "validate: truncated protobuf refused (%s)", err.msg);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: pprof_gen OUTDIR\n");
		return 2;
	}
	gen_cpu(argv[1]);
	gen_heap(argv[1]);
	gen_big(argv[1]);
	check_stream();
	check_validate();
	return check_done();
}
