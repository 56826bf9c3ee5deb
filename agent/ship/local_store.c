/*
 * local_store.c - profiles kept as files in local_store.directory (see
 * local_store.h); the outbox's hand-over to a directory, apart from its
 * queues to the remote stores.
 */
#include "local_store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fileutil.h"
#include "log.h"

struct local_store {
	const char *dir;
	uint64_t max_bytes;
	uint64_t bytes; /* estimate of the directory's usage */
	uint64_t seq;	/* the last field of file names */
};

int local_store_new(const struct local_store_opts *o, struct local_store **out, struct pp_err *err)
{
	struct local_store *ls;
	bool fixed = false;
	unsigned mode = 0;
	int r;

	*out = NULL;
	r = pp_private_dir(o->dir, "local_store", &fixed, &mode, err);
	if (r)
		return r;
	if (fixed)
		pp_log(PP_WARN,
		       "local_store directory was accessible to other users; made "
		       "it 0700",
		       "path=%s mode_was=%04o", pp_q(o->dir), mode);
	ls = calloc(1, sizeof(*ls));
	if (!ls)
		return pp_errf(err, -ENOMEM, "local_store: out of memory");
	ls->dir = o->dir;
	ls->max_bytes = o->max_bytes;
	*out = ls;
	return 0;
}

void local_store_free(struct local_store *ls)
{
	free(ls);
}

/* Copy at most max bytes of s into out, keeping [A-Za-z0-9_.] and turning
 * everything else ('-' included, so the name's fields split on '-') into '_'.
 * A comm is chosen by the target process: nothing of it may leave the
 * directory or look like another field. */
static void name_field(char *out, size_t max, const char *s, const char *fallback)
{
	size_t j = 0;

	if (!s || !*s)
		s = fallback;
	for (; *s && j < max; s++) {
		char c = *s;
		bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			  (c >= '0' && c <= '9') || c == '_' || (c == '.' && j > 0);
		out[j++] = ok ? c : '_';
	}
	out[j] = '\0';
}

/*
 * "<UTC time>-<type>-<comm>-<pid>-<seq>.pb.gz", e.g.
 * 20261201T214029.123Z-cpu-python3-1234-7.pb.gz or
 * 20261201T214031.004Z-heap-oom-leak-1234-8.pb.gz: a directory listing
 * says what each file is and sorts by time (local_trim relies on that).
 * type is "cpu" for CPU profiles (Parca's and Pyroscope's names), "heap-<trigger>" for Go heap profiles
 * (interval, oom, on_demand, ...), else the series' __name__. The names
 * come from the producer's labels, before relabel_configs, so a rule that
 * drops comm from the series does not make the files anonymous.
 */
static void local_name(struct local_store *ls, const struct pp_labels *l, char *buf, size_t len)
{
	struct timespec ts;
	struct tm tm;
	const char *name = pp_labels_get(l, "__name__");
	const char *pid = pp_labels_get(l, "pid");
	char type[80], trig[24], comm[24];

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	name_field(trig, 20, pp_labels_get(l, "trigger"), "on_demand");
	if (name && (!strcmp(name, "parca_agent") || !strcmp(name, "process_cpu")))
		snprintf(type, sizeof(type), "cpu");
	else if (name && !strcmp(name, "memory"))
		snprintf(type, sizeof(type), "heap-%s", trig);
	else
		name_field(type, 40, name, "profile");
	name_field(comm, 16, pp_labels_get(l, "comm"), "unknown");
	snprintf(buf, len, "%s/%04d%02d%02dT%02d%02d%02d.%03ldZ-%s-%s-%s-%" PRIu64 ".pb.gz",
		 ls->dir, tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
		 tm.tm_sec, ts.tv_nsec / 1000000, type, comm,
		 pid && *pid && strspn(pid, "0123456789") == strlen(pid) ? pid : "0", ls->seq++);
}

/* Keep local_store under max_bytes by removing its oldest profiles. */
static void local_trim(struct local_store *ls)
{
	const char *dir = ls->dir;
	struct dirent **names;
	int n = scandir(dir, &names, NULL, alphasort);
	uint64_t total = 0;

	if (n < 0)
		return;
	uint64_t *sizes = calloc((size_t)n + 1, sizeof(*sizes));
	for (int i = 0; i < n; i++) {
		struct stat st;
		char p[4200];
		snprintf(p, sizeof(p), "%s/%s", dir, names[i]->d_name);
		if (sizes && strstr(names[i]->d_name, ".pb.gz") && stat(p, &st) == 0)
			total += sizes[i] = (uint64_t)st.st_size;
	}
	for (int i = 0; i < n && total > ls->max_bytes; i++) {
		if (!sizes || !sizes[i])
			continue;
		char p[4200];
		snprintf(p, sizeof(p), "%s/%s", dir, names[i]->d_name);
		if (unlink(p) == 0)
			total -= sizes[i];
	}
	for (int i = 0; i < n; i++)
		free(names[i]);
	free(names);
	free(sizes);
	ls->bytes = total;
}

/*
 * Whole or not at all: written under a hidden temporary name (no ".pb.gz"
 * in it, so readers' globs and local_trim skip it), then renamed, so that a
 * tool reading the directory while the agent writes never sees a partial
 * file.
 */
int local_store_write(struct local_store *ls, const struct pp_labels *labels, const uint8_t *gz,
		      size_t len, struct pp_err *err)
{
	char path[4300], tmp[4300];
	int fd, rc = 0;

	local_name(ls, labels, path, sizeof(path));
	snprintf(tmp, sizeof(tmp), "%s/.partial-%d", ls->dir, (int)getpid());
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return pp_errf(err, -errno, "local_store: create %s: %s", tmp, strerror(errno));
	for (size_t off = 0; off < len;) {
		ssize_t w = write(fd, gz + off, len - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			rc = pp_errf(err, -errno, "local_store: write %s: %s", tmp,
				     strerror(errno));
			break;
		}
		off += (size_t)w;
	}
	close(fd);
	if (!rc && rename(tmp, path) != 0)
		rc = pp_errf(err, -errno, "local_store: rename to %s: %s", path, strerror(errno));
	if (rc) {
		unlink(tmp);
		return rc;
	}
	ls->bytes += len;
	if (ls->bytes > ls->max_bytes)
		local_trim(ls);
	return 0;
}
