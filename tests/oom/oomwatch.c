/*
 * oomwatch - the OOM watcher alone, for tests and measurements before it is
 * part of `pushprof run`.
 *
 *   oomwatch --out DIR [--cgroup-prefix P]... [--pid N]... [--max-buckets N]
 *            [--max-depth N] [--ring-bytes N] [--oom-score-adj N]
 *            [--enable-profiling] [--config FILE] [--exit-hook-only]
 *            [--mirror-interval-ms N]
 *
 * Tracks Go processes whose memory cgroup path starts with one of the
 * prefixes (rescanning /proc every 50 ms) or that are named by --pid, and
 * writes every OOM result: DIR/oom-PID-ID.pb.gz plus DIR/oom-PID-ID.json
 * (labels and figures) for a profile, a JSON line on stdout for all
 * results ("profile" or "oom_event"), and "tracked"/"track_failed" lines.
 * Stops on SIGTERM/SIGINT, printing a "stats" line.
 *
 * With --config, the agent's path is taken instead: go_heap limits and
 * oom_score_adj come from the file, results go through oom_watch_deliver()
 * into an outbox (local store + spool before any push, flushed every
 * second) and are logged to stderr; stdout then only has tracking lines.
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "log.h"
#include "oom.h"
#include "outbox.h"
#include "procinfo.h"

static volatile sig_atomic_t stop;

static void on_sig(int s)
{
	(void)s;
	stop = 1;
}

#define MAXP 64
static const char *prefixes[MAXP];
static int nprefixes;

/* (pid, executable) pairs already decided, so each is reported once; a
 * wrapper shell that execs the workload gets a second look */
struct seen_ent {
	pid_t pid;
	char exe[256];
};
static struct seen_ent seen[4096];
static size_t nseen;

static int was_seen(pid_t p)
{
	char exe[256] = "";

	proc_exe(p, exe, sizeof(exe));
	for (size_t i = 0; i < nseen; i++)
		if (seen[i].pid == p && strcmp(seen[i].exe, exe) == 0)
			return 1;
	return 0;
}

static void mark_seen(pid_t p)
{
	size_t i;

	for (i = 0; i < nseen; i++)
		if (seen[i].pid == p)
			break;
	if (i == nseen) {
		if (nseen >= sizeof(seen) / sizeof(seen[0]))
			nseen = 0;	/* forget the oldest decisions */
		i = nseen++;
	}
	seen[i].pid = p;
	seen[i].exe[0] = '\0';
	proc_exe(p, seen[i].exe, sizeof(seen[i].exe));
}

static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20 || c >= 0x7f)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

static void try_track(struct oom_watch *w, pid_t pid)
{
	struct pp_err err = { 0 };
	int rc;

	mark_seen(pid);
	rc = oom_watch_track(w, pid, &err);
	if (rc >= 0)
		printf("{\"event\":\"tracked\",\"pid\":%d,\"enabled_profiling\":%s}\n", (int)pid,
		       rc == 1 ? "true" : "false");
	else {
		printf("{\"event\":\"track_failed\",\"pid\":%d,\"code\":%d,\"error\":", (int)pid, rc);
		json_str(stdout, err.msg);
		printf("}\n");
		if (rc == -EAGAIN) /* inside its execve(): look again next scan */
			for (size_t i = 0; i < nseen; i++)
				if (seen[i].pid == pid)
					seen[i].pid = 0;
	}
	fflush(stdout);
}

static void scan(struct oom_watch *w)
{
	DIR *d;
	struct dirent *de;
	char cg[1024];

	if (!nprefixes)
		return;
	d = opendir("/proc");
	if (!d)
		return;
	while ((de = readdir(d))) {
		char *end;
		long p = strtol(de->d_name, &end, 10);

		if (*end || p <= 0 || was_seen((pid_t)p) || oom_watch_tracked(w, (pid_t)p))
			continue;
		if (proc_cgroup((pid_t)p, "memory", cg, sizeof(cg)))
			continue;
		for (int i = 0; i < nprefixes; i++)
			if (strncmp(cg, prefixes[i], strlen(prefixes[i])) == 0) {
				try_track(w, (pid_t)p);
				break;
			}
	}
	closedir(d);
}

static void result_json(FILE *f, const struct oom_result *r, const char *file)
{
	fprintf(f, "{\"event\":\"%s\",\"pid\":%d,\"tid\":%d,\"capture_id\":%" PRIu64 ",\"comm\":",
		r->outcome == OOM_OUT_PROFILE ? "profile" : "oom_event", (int)r->pid, (int)r->tid,
		r->capture_id);
	json_str(f, r->comm);
	fprintf(f, ",\"exe\":");
	json_str(f, r->exe);
	fprintf(f, ",\"cgroup\":");
	json_str(f, r->cgroup);
	fprintf(f, ",\"complete\":%s,\"reason\":", r->complete ? "true" : "false");
	json_str(f, r->reason);
	fprintf(f,
		",\"flags\":%u,\"rate\":%" PRId64 ",\"buckets\":%" PRIu64 ",\"new_buckets\":%" PRIu64
		",\"absent_records\":%" PRIu64 ",\"dropped\":%" PRIu64 ",\"capture_ns\":%" PRIu64 ",\"mark_to_capture_ns\":%" PRIu64
		",\"total_vm_kb\":%" PRIu64 ",\"anon_rss_kb\":%" PRIu64 ",\"file_rss_kb\":%" PRIu64
		",\"shmem_rss_kb\":%" PRIu64 ",\"pgtables_kb\":%" PRIu64 ",\"uid\":%u,\"oom_score_adj\":%d",
		r->flags, r->rate, r->buckets, r->new_buckets, r->absent_records, r->dropped, r->capture_ns,
		r->mark_to_capture_ns, r->total_vm_kb, r->anon_rss_kb, r->file_rss_kb, r->shmem_rss_kb,
		r->pgtables_kb, r->uid, r->oom_score_adj);
	if (file) {
		fprintf(f, ",\"file\":");
		json_str(f, file);
		fprintf(f, ",\"labels\":{");
		for (size_t i = 0; i < r->labels.n; i++) {
			if (i)
				fputc(',', f);
			json_str(f, r->labels.v[i].name);
			fputc(':', f);
			json_str(f, r->labels.v[i].value);
		}
		fputc('}', f);
	}
	fprintf(f, "}\n");
}

static void handle(const char *dir, struct oom_result *r)
{
	char path[4200] = "", jpath[4200];

	if (r->outcome == OOM_OUT_PROFILE) {
		FILE *f;

		snprintf(path, sizeof(path), "%s/oom-%d-%" PRIu64 ".pb.gz", dir, (int)r->pid,
			 r->capture_id);
		f = fopen(path, "wb");
		if (!f || fwrite(r->gz, 1, r->gz_len, f) != r->gz_len) {
			fprintf(stderr, "oomwatch: write %s: %s\n", path, strerror(errno));
		}
		if (f)
			fclose(f);
		snprintf(jpath, sizeof(jpath), "%s/oom-%d-%" PRIu64 ".json", dir, (int)r->pid,
			 r->capture_id);
		f = fopen(jpath, "w");
		if (f) {
			result_json(f, r, path);
			fclose(f);
		}
	}
	result_json(stdout, r, path[0] ? path : NULL);
	fflush(stdout);
}

/* The agent's wiring (agent.c): OOM profiles go to the outbox, durably. */
static int report_outbox(void *arg, const struct pp_labels *labels, const uint8_t *gz, size_t len,
			 bool durable, struct pp_err *err)
{
	return durable ? outbox_submit_durable(arg, labels, gz, len, err)
		       : outbox_submit(arg, labels, gz, len, err);
}

int main(int argc, char **argv)
{
	struct oom_watch_opts o = { .max_buckets = 100000, .max_stack_depth = 128 };
	struct oom_watch *w;
	struct pp_err err = { 0 };
	const char *out = NULL, *cfgpath = NULL;
	struct config cfg;
	struct outbox *ob = NULL;
	int64_t last_flush = 0;
	uint64_t last_mirrored = 0;
	size_t last_tracked = 0;
	pid_t pids[MAXP];
	int npids = 0, score = -1000, c;
	static const struct option lo[] = {
		{ "out", required_argument, 0, 'o' },
		{ "cgroup-prefix", required_argument, 0, 'c' },
		{ "pid", required_argument, 0, 'p' },
		{ "max-buckets", required_argument, 0, 'b' },
		{ "max-depth", required_argument, 0, 'd' },
		{ "ring-bytes", required_argument, 0, 'r' },
		{ "oom-score-adj", required_argument, 0, 's' },
		{ "enable-profiling", no_argument, 0, 'e' },
		{ "config", required_argument, 0, 'C' },
		{ "exit-hook-only", no_argument, 0, 'X' },
		{ "mirror-interval-ms", required_argument, 0, 'M' },
		{ 0, 0, 0, 0 },
	};

	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 'o': out = optarg; break;
		case 'c':
			if (nprefixes < MAXP)
				prefixes[nprefixes++] = optarg;
			break;
		case 'p':
			if (npids < MAXP)
				pids[npids++] = (pid_t)atoi(optarg);
			break;
		case 'b': o.max_buckets = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 'd': o.max_stack_depth = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 'r': o.ring_bytes = strtoull(optarg, NULL, 10); break;
		case 's': score = atoi(optarg); break;
		case 'e': o.enable_profiling = true; break;
		case 'C': cfgpath = optarg; break;
		case 'X': o.exit_hook_only = true; break;
		case 'M': o.mirror_interval_ns = strtoull(optarg, NULL, 10) * 1000000ULL; break;
		default:
			fprintf(stderr, "usage: oomwatch --out DIR [--cgroup-prefix P] [--pid N] "
					"[--max-buckets N] [--max-depth N] [--ring-bytes N]\n");
			return 2;
		}
	}
	if (!out && !cfgpath) {
		fprintf(stderr, "oomwatch: --out DIR or --config FILE is required\n");
		return 2;
	}
	if (cfgpath) {
		if (config_load(cfgpath, &cfg, &err)) {
			fprintf(stderr, "oomwatch: %s\n", err.msg);
			return 2;
		}
		pp_log_setup(cfg.log_level, cfg.log_format);
		o.max_buckets = cfg.go_heap.max_buckets;
		o.max_stack_depth = cfg.go_heap.max_stack_depth;
		o.enable_profiling = cfg.go_heap.enable_profiling;
		o.node = cfg.node && cfg.node[0] ? cfg.node : NULL;
		o.extra_labels = &cfg.external_labels;
		score = cfg.oom_score_adj;
		if (outbox_new(&(struct outbox_opts){ .cfg = &cfg }, &ob, &err)) {
			fprintf(stderr, "oomwatch: %s\n", err.msg);
			config_free(&cfg);
			return 1;
		}
	}
	if (oom_protect_self(score, &err)) {
		/* without CAP_SYS_RESOURCE the score cannot be lowered: go on */
		printf("{\"event\":\"oom_score_adj_failed\",\"code\":%d,\"error\":", err.code);
		json_str(stdout, err.msg);
		printf("}\n");
		pp_err_clear(&err);
	}
	signal(SIGTERM, on_sig);
	signal(SIGINT, on_sig);
	if (ob)
		o.report = (struct pp_reporter){ report_outbox, ob };
	if (oom_watch_new(&o, &w, &err)) {
		fprintf(stderr, "oomwatch: %s\n", err.msg);
		return 1;
	}
	for (int i = 0; i < npids; i++)
		try_track(w, pids[i]);
	printf("{\"event\":\"ready\"}\n");
	fflush(stdout);
	while (!stop) {
		struct pollfd pfd = { .fd = oom_watch_fd(w), .events = POLLIN };
		struct oom_result *res[16];
		size_t n;

		poll(&pfd, 1, 50);
		{
			struct oom_watch_stats st;

			oom_watch_stats(w, &st);
			if (st.mirrored_buckets != last_mirrored ||
			    oom_watch_ntracked(w) != last_tracked) {
				last_mirrored = st.mirrored_buckets;
				last_tracked = oom_watch_ntracked(w);
				printf("{\"event\":\"status\",\"tracked\":%zu,\"mirrored\":%" PRIu64
				       "}\n", last_tracked, last_mirrored);
				fflush(stdout);
			}
		}
		if (ob) {
			struct timespec ts;
			int64_t now;

			oom_watch_deliver(w, &err);
			clock_gettime(CLOCK_MONOTONIC, &ts);
			now = ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
			if (now - last_flush >= 1000) {
				outbox_flush(ob, &err);
				last_flush = now;
			}
			scan(w);
			continue;
		}
		while ((n = oom_watch_take(w, res, 16)) > 0)
			for (size_t i = 0; i < n; i++) {
				handle(out, res[i]);
				oom_result_free(res[i]);
			}
		scan(w);
	}
	{
		struct oom_watch_stats st;

		oom_watch_stats(w, &st);
		printf("{\"event\":\"stats\",\"marks\":%" PRIu64 ",\"dup_marks\":%" PRIu64
		       ",\"captures\":%" PRIu64 ",\"ring_drops\":%" PRIu64 ",\"profiles\":%" PRIu64
		       ",\"events\":%" PRIu64 ",\"delivered\":%" PRIu64 ",\"deliver_failed\":%" PRIu64
		       ",\"kernel_bytes\":%" PRIu64 ",\"mirrored\":%" PRIu64 "}\n",
		       st.marks, st.dup_marks, st.captures, st.ring_drops, st.profiles, st.events,
		       st.delivered, st.deliver_failed, st.kernel_bytes, st.mirrored_buckets);
	}
	oom_watch_free(w);
	if (ob) {
		outbox_free(ob);
		config_free(&cfg);
	}
	return 0;
}
