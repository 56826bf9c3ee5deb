/*
 * upload_probe - drives agent/ship/upload.c directly for what `pushprof push`
 * cannot show (it is one-shot and validates its input first):
 *   upload_probe ADDR invalid
 *       send a gzip'd non-profile; the receiver's real validation must
 *       answer INVALID_ARGUMENT and the uploader must not retry.
 *   upload_probe ADDR latency N
 *       N writes of one small profile on one uploader (one channel); prints
 *       the first (includes connecting) and the median of the others.
 *   upload_probe ADDR tlshint ADDR2
 *       TLS to ADDR (a plaintext server) until an error has the TLS hint
 *       (at most 3 writes), then, that uploader freed, one TLS write to
 *       ADDR2 where nothing listens: its error must be its own (the gRPC
 *       log line of the first channel's handshake is not its hint).
 *   upload_probe ADDR rotate TOKENFILE NEWTOKEN
 *       write once with the token in TOKENFILE, rewrite TOKENFILE (same
 *       length, in place) with NEWTOKEN, write again: the second write must
 *       use the new token (re-read on change).
 * Prints one "write N rc=R status=S retries=T msg=..." line per write.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config.h"
#include "pprof.h"
#include "upload.h"

static char last_msg[sizeof(((struct pp_err *)0)->msg)];	/* of the last do_write */

static int do_write(struct uploader *u, int n, const struct upload_series *s)
{
	struct pp_err err = { 0 };
	size_t sent = 0;
	int rc = uploader_write(u, s, 1, &sent, &err);
	const struct upload_stats *st = uploader_stats(u);
	printf("write %d rc=%d sent=%zu status=%llu retries=%llu msg=%s\n", n, rc, sent,
	       (unsigned long long)st->last_status, (unsigned long long)st->retries, err.msg);
	snprintf(last_msg, sizeof(last_msg), "%s", err.msg);
	return rc;
}

int main(int argc, char **argv)
{
	struct remote_store_config rs = { 0 };
	struct pp_labels labels = { 0 };
	struct pp_err err = { 0 };
	uint8_t *gz = NULL, *prof = NULL;
	size_t gzlen = 0, proflen = 0;

	if (argc < 3) {
		fprintf(stderr, "usage: upload_probe ADDR invalid|rotate TOKENFILE NEWTOKEN\n");
		return 2;
	}
	rs.address = argv[1];
	rs.insecure = true;
	rs.timeout_ns = 5000000000ull;
	rs.max_request_bytes = 4u << 20;
	pp_labels_set(&labels, "__name__", "parca_agent");
	pp_labels_set(&labels, "probe", argv[2]);

	/* a valid profile for the token case */
	struct pprof *p;
	if (pprof_new(&p, &err))
		return 1;
	pprof_add_sample_type(p, "samples", "count");
	uint64_t f = pprof_function(p, "probe_fn", NULL, "probe.c", 1);
	struct pprof_line l = { f, 1 };
	uint64_t loc = pprof_location(p, 0, 0, &l, 1);
	int64_t v = 1;
	pprof_add_sample(p, &loc, 1, &v, NULL, 0);
	pprof_encode(p, true, &prof, &proflen, &err);
	pprof_free(p);

	if (!strcmp(argv[2], "invalid")) {
		const char *junk = "this is not a pprof profile at all";
		pprof_gzip((const uint8_t *)junk, strlen(junk), &gz, &gzlen, &err);
		struct uploader *u = NULL;
		uploader_new(&(struct uploader_opts){ .rs = &rs }, &u, &err);
		if (!u) {
			printf("uploader_new failed: %s\n", err.msg);
			return 1;
		}
		struct upload_series s = { &labels, gz, gzlen };
		do_write(u, 1, &s);
		uploader_free(u);
	} else if (!strcmp(argv[2], "rotate") && argc == 5) {
		rs.bearer_token_file = argv[3];
		struct uploader *u = NULL;
		uploader_new(&(struct uploader_opts){ .rs = &rs }, &u, &err);
		if (!u) {
			printf("uploader_new failed: %s\n", err.msg);
			return 1;
		}
		struct upload_series s = { &labels, prof, proflen };
		do_write(u, 1, &s);
		struct timespec ts = { 0, 20000000 };
		nanosleep(&ts, NULL);	/* let the mtime move on coarse clocks */
		FILE *fp = fopen(argv[3], "r+");
		if (!fp || fputs(argv[4], fp) < 0 || fclose(fp)) {
			perror(argv[3]);
			return 1;
		}
		do_write(u, 2, &s);
		uploader_free(u);
	} else if (!strcmp(argv[2], "latency") && argc == 4) {
		int n = atoi(argv[3]);
		double *ms = calloc(n > 0 ? n : 1, sizeof(*ms));
		struct uploader *u = NULL;
		uploader_new(&(struct uploader_opts){ .rs = &rs }, &u, &err);
		if (!u || !ms || n < 2) {
			printf("uploader_new failed: %s\n", err.msg);
			return 1;
		}
		struct upload_series s = { &labels, prof, proflen };
		int fails = 0;
		for (int i = 0; i < n; i++) {
			struct timespec a, b;
			clock_gettime(CLOCK_MONOTONIC, &a);
			if (uploader_write(u, &s, 1, NULL, &err))
				fails++;
			clock_gettime(CLOCK_MONOTONIC, &b);
			ms[i] = (b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) / 1e6;
		}
		/* median of calls 2..n (insertion sort, n is small) */
		for (int i = 2; i < n; i++)
			for (int j = i; j > 1 && ms[j] < ms[j - 1]; j--) {
				double t = ms[j];
				ms[j] = ms[j - 1];
				ms[j - 1] = t;
			}
		printf("latency fails=%d first=%.2f median=%.2f max=%.2f\n", fails, ms[0],
		       ms[1 + (n - 1) / 2], ms[n - 1]);
		free(ms);
		uploader_free(u);
	} else if (!strcmp(argv[2], "tlshint") && argc == 4) {
		struct upload_series s = { &labels, prof, proflen };
		rs.insecure = false;
		rs.timeout_ns = 2000000000ull;
		struct uploader *u = NULL;
		uploader_new(&(struct uploader_opts){ .rs = &rs }, &u, &err);
		if (!u) {
			printf("uploader_new failed: %s\n", err.msg);
			return 1;
		}
		for (int i = 1; i <= 3; i++)
			if (do_write(u, i, &s) && strstr(last_msg, "hint: TLS handshake"))
				break;
		uploader_free(u);
		rs.address = argv[3];
		uploader_new(&(struct uploader_opts){ .rs = &rs }, &u, &err);
		if (!u) {
			printf("uploader_new failed: %s\n", err.msg);
			return 1;
		}
		do_write(u, 9, &s);
		uploader_free(u);
	} else {
		fprintf(stderr, "upload_probe: unknown mode\n");
		return 2;
	}
	free(gz);
	free(prof);
	pp_labels_free(&labels);
	return 0;
}
