/* Unit test of agent/ship/spool.c on a real directory: order, bounds, corruption. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "spool.h"
#include "check.h"

static void batch_of(struct spool_batch *b, const char *name, size_t plen)
{
	struct pp_labels l = { 0 };
	uint8_t *p = malloc(plen);
	for (size_t i = 0; i < plen; i++)
		p[i] = (uint8_t)(rand() & 0xff);	/* incompressible */
	pp_labels_set(&l, "__name__", name);
	pp_labels_set(&l, "pid", "42");
	spool_batch_add(b, &l, p, plen);
	pp_labels_free(&l);
	free(p);
}

int main(void)
{
	char dir[] = "/tmp/pushprof-spool-XXXXXX";
	struct pp_err err = { 0 };
	char name[64];

	if (!mkdtemp(dir))
		return 1;
	struct spool *s = NULL;
	CHECK(spool_new(&(struct spool_opts){ .dir = dir, .max_bytes = 64 * 1024 }, &s, &err) == 0 &&
	      s, "open: %s", err.msg);

	/* round trip and order */
	const char *names[] = { "first", "second", "third" };
	for (int i = 0; i < 3; i++) {
		struct spool_batch b = { 0 };
		batch_of(&b, names[i], 1000);
		CHECK(spool_write(s, &b, &err) == 0, "write: %s", err.msg);
		spool_batch_free(&b);
	}
	CHECK(spool_stats(s)->files == 3, "3 files");
	for (int i = 0; i < 3; i++) {
		struct spool_batch b = { 0 };
		CHECK(spool_peek(s, NULL, name, sizeof(name), &b, &err) == 1, "peek");
		CHECK(b.n == 1 && strcmp(pp_labels_get(&b.v[0].labels, "__name__"), names[i]) == 0 &&
		      b.v[0].len == 1000, "batch %d in order", i);
		spool_remove(s, name);
		spool_batch_free(&b);
	}
	struct spool_batch e = { 0 };
	CHECK(spool_peek(s, NULL, name, sizeof(name), &e, &err) == 0, "empty");

	/* walking with `after` reads files in order without removing them; the
	 * outbox moves them into one batch and drops what was delivered */
	for (int i = 0; i < 3; i++) {
		struct spool_batch b = { 0 };
		batch_of(&b, names[i], 100 + (size_t)i);
		CHECK(spool_write(s, &b, &err) == 0, "write: %s", err.msg);
		spool_batch_free(&b);
	}
	{
		char walked[3][64];
		struct spool_batch all = { 0 };
		int n = 0;
		for (; n < 4; n++) {
			struct spool_batch b;
			if (spool_peek(s, n ? walked[n - 1] : NULL, walked[n], sizeof(walked[n]), &b,
				       &err) != 1)
				break;
			CHECK(spool_batch_move(&all, &b) == 0 && b.n == 0 && !b.v, "move %d", n);
		}
		CHECK(n == 3 && all.n == 3 && spool_stats(s)->files == 3, "walked 3 files (%d)", n);
		for (int i = 0; i < 3 && i < (int)all.n; i++)
			CHECK(!strcmp(pp_labels_get(&all.v[i].labels, "__name__"), names[i]) &&
			      all.v[i].len == 100 + (size_t)i, "moved item %d in order", i);
		spool_batch_drop_head(&all, 2);
		CHECK(all.n == 1 && !strcmp(pp_labels_get(&all.v[0].labels, "__name__"), "third"),
		      "drop_head keeps the tail");
		spool_batch_drop_head(&all, 5);
		CHECK(all.n == 0, "drop_head past the end empties");
		spool_batch_free(&all);
		for (int i = 0; i < n; i++)
			spool_remove(s, walked[i]);
		CHECK(spool_stats(s)->files == 0, "removed");
	}

	/* a corrupt file is moved aside and does not block the next one */
	char path[256];
	snprintf(path, sizeof(path), "%s/00000000000000000001.spool", dir);
	FILE *f = fopen(path, "w");
	fputs("PPSPOOL1garbage", f);
	fclose(f);
	struct spool_batch b = { 0 };
	batch_of(&b, "after-corrupt", 10);
	spool_write(s, &b, &err);
	spool_batch_free(&b);
	pp_err_clear(&err);
	CHECK(spool_peek(s, NULL, name, sizeof(name), &b, &err) == 1 && b.n == 1 &&
	      strcmp(pp_labels_get(&b.v[0].labels, "__name__"), "after-corrupt") == 0, "skips corrupt");
	CHECK(spool_stats(s)->corrupt == 1 && strstr(err.msg, "corrupt"), "corrupt counted: %s", err.msg);
	snprintf(path, sizeof(path), "%s/00000000000000000001.spool.corrupt", dir);
	CHECK(access(path, F_OK) == 0, "moved aside");
	spool_remove(s, name);
	spool_batch_free(&b);

	/* bounded: 64 KiB holds about six 10 KB batches; the oldest go first */
	for (int i = 0; i < 10; i++) {
		struct spool_batch bb = { 0 };
		char nm[16];
		snprintf(nm, sizeof(nm), "b%d", i);
		batch_of(&bb, nm, 10000);
		CHECK(spool_write(s, &bb, &err) == 0, "write bounded: %s", err.msg);
		spool_batch_free(&bb);
	}
	CHECK(spool_stats(s)->bytes <= 64 * 1024, "within max_bytes (%llu)", (unsigned long long)spool_stats(s)->bytes);
	CHECK(spool_stats(s)->dropped_profiles >= 3 && spool_stats(s)->dropped_profiles == spool_stats(s)->dropped_files,
	      "drops counted (%llu)", (unsigned long long)spool_stats(s)->dropped_profiles);
	CHECK(spool_peek(s, NULL, name, sizeof(name), &b, &err) == 1 &&
	      strcmp(pp_labels_get(&b.v[0].labels, "__name__"), "b9") != 0 &&
	      atoi(pp_labels_get(&b.v[0].labels, "__name__") + 1) == (int)spool_stats(s)->dropped_files,
	      "oldest dropped first");
	spool_batch_free(&b);

	/* a file larger than any batch (sparse: 600 MiB) is moved aside without
	 * being read into memory, and does not block the next one (a spool of
	 * its own, large enough that the bound does not delete it first) */
	{
		char dir2[] = "/tmp/pushprof-spool-big-XXXXXX";
		CHECK(mkdtemp(dir2) != NULL, "mkdtemp");
		struct spool *s2 = NULL;
		spool_new(&(struct spool_opts){ .dir = dir2, .max_bytes = 1ull << 30 }, &s2, &err);
		snprintf(path, sizeof(path), "%s/00000000000000000002.spool", dir2);
		FILE *big = fopen(path, "w");
		CHECK(big && ftruncate(fileno(big), 600ll << 20) == 0, "sparse file");
		if (big)
			fclose(big);
		struct spool_batch hb = { 0 };
		batch_of(&hb, "after-huge", 10);
		CHECK(s2 && spool_write(s2, &hb, &err) == 0, "write: %s", err.msg);
		spool_batch_free(&hb);
		pp_err_clear(&err);
		CHECK(s2 && spool_peek(s2, NULL, name, sizeof(name), &hb, &err) == 1 && hb.n == 1 &&
		      strcmp(pp_labels_get(&hb.v[0].labels, "__name__"), "after-huge") == 0 &&
		      strstr(err.msg, "larger than any spool file"), "huge file moved aside: %s",
		      err.msg);
		snprintf(path, sizeof(path), "%s/00000000000000000002.spool.corrupt", dir2);
		CHECK(access(path, F_OK) == 0, "huge file renamed .corrupt");
		spool_batch_free(&hb);
		spool_free(s2);
		char cmd2[300];
		snprintf(cmd2, sizeof(cmd2), "rm -rf %s", dir2);
		if (system(cmd2)) {}
	}

	/* decode rejects truncations of a valid file at every length */
	struct spool_batch v = { 0 };
	uint8_t *enc;
	size_t len;
	batch_of(&v, "x", 100);
	spool_encode(&v, &enc, &len, &err);
	int bad = 0;
	for (size_t cut = 0; cut < len; cut++) {
		struct spool_batch o = { 0 };
		if (spool_decode(enc, cut, &o, NULL) == 0)
			bad++;
		spool_batch_free(&o);
	}
	CHECK(bad == 0, "every truncation rejected");
	free(enc);
	spool_batch_free(&v);

	spool_free(s);
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd)) {}
	return check_done();
}
