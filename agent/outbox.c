#include "outbox.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fileutil.h"
#include "log.h"
#include "metrics.h"
#include "spool.h"
#include "upload.h"

struct outbox {
	pthread_mutex_t lock;		/* pending, stats, local store: submit may come from any thread */
	const struct config *cfg;
	struct uploader *up;		/* NULL: no remote store */
	struct spool *spool;		/* NULL: no spool directory */
	struct spool_batch pending;	/* submitted since the last flush */
	uint64_t local_bytes;		/* estimate of local_store usage */
	uint64_t seq;
	struct outbox_stats st;
	/* After a failed delivery the network is left alone until retry_at
	 * (backoff doubling from OFFLINE_MIN_NS to OFFLINE_MAX_NS): a store that
	 * is down or hangs then costs one bounded attempt per backoff instead of
	 * one per flush, so the run loop's windows stay on time and a shutdown
	 * during an outage spools at once. Loop thread only. */
	uint64_t retry_at, backoff;
	char last_err[200];
	/* spool counters already turned into metrics and log lines */
	uint64_t rep_dropped_files, rep_dropped_profiles, rep_corrupt;
	outbox_labeler_fn labeler;	/* metadata + relabelling, see outbox.h */
	void *labeler_arg;
	/* sender thread (outbox_start_sender): flushes run there, so a slow or
	 * hanging store never holds up the caller's windows */
	pthread_t sender;
	bool sender_running, stop, flush_requested;
	pthread_cond_t cond;		/* with lock */
	int last_rc;			/* result of the sender's last flush */
	char last_msg[sizeof(((struct pp_err *)0)->msg)];
	/* profiles per WriteRaw call (send_batch): halved when a call times
	 * out, doubled back on success. Flushing thread only. */
	size_t call_series;
};

void outbox_set_labeler(struct outbox *o, outbox_labeler_fn fn, void *arg)
{
	pthread_mutex_lock(&o->lock);
	o->labeler = fn;
	o->labeler_arg = arg;
	pthread_mutex_unlock(&o->lock);
}

static void spool_report(struct outbox *o);

#define OFFLINE_MIN_NS 2000000000ull	/* 2 s */
#define DRAIN_MAX_FILES 32		/* spool files per call, see drain_some() */
#define DRAIN_MAX_BYTES (8u << 20)
#define CALL_MAX_SERIES 1024		/* profiles per call, see send_batch() */
#define OFFLINE_MAX_NS 30000000000ull	/* 30 s */

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

struct outbox *outbox_new(const struct config *cfg, struct pp_err *err)
{
	struct outbox *o = calloc(1, sizeof(*o));

	if (!o) {
		pp_errf(err, -ENOMEM, "outbox: out of memory");
		return NULL;
	}
	pthread_mutex_init(&o->lock, NULL);
	pthread_cond_init(&o->cond, NULL);
	o->cfg = cfg;
	o->call_series = CALL_MAX_SERIES;
	if (cfg->local_store.directory && cfg->local_store.directory[0]) {
		bool fixed = false;
		unsigned mode = 0;
		if (pp_private_dir(cfg->local_store.directory, "local_store", &fixed, &mode, err))
			goto fail;
		if (fixed)
			pp_log(PP_WARN, "local_store directory was accessible to other users; made "
			       "it 0700", "path=%s mode_was=%04o", pp_q(cfg->local_store.directory),
			       mode);
	}
	if (cfg->remote_store.address && cfg->remote_store.address[0]) {
		o->up = uploader_new(&cfg->remote_store, err);
		if (!o->up)
			goto fail;
		if (cfg->spool.directory && cfg->spool.directory[0]) {
			o->spool = spool_open(cfg->spool.directory, cfg->spool.max_bytes, err);
			if (!o->spool)
				goto fail;
		}
	}
	return o;
fail:
	outbox_free(o);
	return NULL;
}

void outbox_free(struct outbox *o)
{
	if (!o)
		return;
	uploader_free(o->up);
	spool_close(o->spool);
	outbox_stop_sender(o);
	spool_batch_free(&o->pending);
	pthread_cond_destroy(&o->cond);
	pthread_mutex_destroy(&o->lock);
	free(o);
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
static void local_name(struct outbox *o, const struct pp_labels *l, char *buf, size_t len)
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
		 o->cfg->local_store.directory, tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
		 tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000, type, comm,
		 pid && *pid && strspn(pid, "0123456789") == strlen(pid) ? pid : "0", o->seq++);
}

/* Keep local_store under max_bytes by removing its oldest profiles. */
static void local_trim(struct outbox *o)
{
	const char *dir = o->cfg->local_store.directory;
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
	for (int i = 0; i < n && total > o->cfg->local_store.max_bytes; i++) {
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
	o->local_bytes = total;
}

static int write_local(struct outbox *o, const struct pp_labels *labels, const uint8_t *gz,
		       size_t len, struct pp_err *err)
{
	char path[4300];
	int fd, rc = 0;

	local_name(o, labels, path, sizeof(path));
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return pp_errf(err, -errno, "local_store: create %s: %s", path, strerror(errno));
	for (size_t off = 0; off < len;) {
		ssize_t w = write(fd, gz + off, len - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			rc = pp_errf(err, -errno, "local_store: write %s: %s", path, strerror(errno));
			break;
		}
		off += (size_t)w;
	}
	close(fd);
	if (rc) {
		unlink(path);
		return rc;
	}
	o->st.written_local++;
	o->local_bytes += len;
	if (o->local_bytes > o->cfg->local_store.max_bytes)
		local_trim(o);
	return 0;
}

int outbox_submit(struct outbox *o, const struct pp_labels *in, const uint8_t *gz, size_t len,
		  struct pp_err *err)
{
	struct pp_labels labels = { 0 };
	int rc = 0;

	if (!pp_labels_get(in, "__name__"))
		return pp_errf(err, -EINVAL, "outbox: profile without __name__ label");
	char lbl[96];
	snprintf(lbl, sizeof(lbl), "name=\"%.64s\"", pp_labels_get(in, "__name__"));
	if (pp_labels_copy(&labels, in))
		return pp_errf(err, -ENOMEM, "outbox: out of memory");
	pthread_mutex_lock(&o->lock);
	if (o->labeler) {
		int keep = o->labeler(&labels, o->labeler_arg);
		if (keep == 0 || !pp_labels_get(&labels, "__name__")) {
			metric_inc("pushprof_profiles_relabel_dropped_total",
				   "Profiles dropped by relabel_configs (keep/drop), by name.", lbl, 1);
			pthread_mutex_unlock(&o->lock);
			pp_labels_free(&labels);
			return 0;
		}
	}
	metric_inc("pushprof_profiles_submitted_total", "Profiles built and handed over, by name.",
		   lbl, 1);
	o->st.submitted++;
	if (o->cfg->local_store.directory && o->cfg->local_store.directory[0])
		rc = write_local(o, in, gz, len, err);
	if (o->up) {
		if (spool_batch_add(&o->pending, &labels, gz, len))
			rc = pp_errf(err, -ENOMEM, "outbox: out of memory");
		o->st.pending = o->pending.n;
	}
	pthread_mutex_unlock(&o->lock);
	pp_labels_free(&labels);
	return rc;
}

int outbox_submit_durable(struct outbox *o, const struct pp_labels *labels, const uint8_t *gz,
			  size_t len, struct pp_err *err)
{
	int rc = outbox_submit(o, labels, gz, len, err);

	if (rc || !o->spool)
		return rc;
	/* on disk before any network call: survives the server and the agent */
	pthread_mutex_lock(&o->lock);
	if (o->pending.n) {
		rc = spool_write(o->spool, &o->pending, err);
		if (rc == 0) {
			spool_batch_free(&o->pending);
			o->st.pending = 0;
		}
	}
	spool_report(o);
	pthread_mutex_unlock(&o->lock);
	return rc;
}

/* The server refused the data itself (INVALID_ARGUMENT) or it can never
 * fit a request: resending cannot help, and keeping it would block every
 * batch behind it. */
static bool permanent(int rc)
{
	return rc == -EINVAL || rc == -E2BIG;
}

/*
 * Send b in calls of at most o->call_series profiles (the uploader further
 * splits each call at max_request_bytes). A call that times out may have
 * met a store that is slow rather than down (it often stored the request
 * anyway), and the same amount would time out again, forever, while the
 * backlog grows: the rest goes out at once in calls half the size, down to
 * one profile; each success doubles the size back up to CALL_MAX_SERIES.
 * Only a single profile timing out is a failure. *sent: how many leading
 * profiles the store accepted (all of them when 0 is returned).
 */
static int send_batch(struct outbox *o, const struct spool_batch *b, size_t *sent,
		      struct pp_err *err)
{
	struct upload_series *s = calloc(b->n ? b->n : 1, sizeof(*s));
	size_t done = 0;
	int rc = 0;

	*sent = 0;
	if (!s)
		return pp_errf(err, -ENOMEM, "outbox: out of memory");
	for (size_t i = 0; i < b->n; i++) {
		s[i].labels = &b->v[i].labels;
		s[i].profile = b->v[i].profile;
		s[i].len = b->v[i].len;
	}
	while (done < b->n) {
		size_t k = b->n - done, ok = 0;
		if (k > o->call_series)
			k = o->call_series;
		rc = uploader_write(o->up, s + done, k, &ok, err);
		if (rc == 0) {
			done += k;
			if (o->call_series < CALL_MAX_SERIES)
				o->call_series = o->call_series * 2 > CALL_MAX_SERIES
						 ? CALL_MAX_SERIES : o->call_series * 2;
			continue;
		}
		done += ok;
		if (rc != -ETIMEDOUT || k - ok <= 1)
			break;
		o->call_series = (k - ok) / 2;
		pp_log(PP_WARN, "remote store slower than remote_store.timeout; sending fewer "
		       "profiles per call", "profiles=%zu next=%zu error=%s", k - ok,
		       o->call_series, pp_q(err ? err->msg : ""));
		if (err)
			pp_err_clear(err);
		rc = 0;
	}
	free(s);
	*sent = done;
	if (done) {
		pthread_mutex_lock(&o->lock);
		o->st.delivered += done;
		pthread_mutex_unlock(&o->lock);
		metric_inc("pushprof_profiles_delivered_total",
			   "Profiles accepted by the remote store.", NULL, (double)done);
	}
	return rc;
}

/* Spool gauges, and every drop (spool full) or corrupt file as a counter
 * and a log line: the spool itself never prints. */
static void spool_report(struct outbox *o)
{
	if (!o->spool)
		return;
	const struct spool_stats *ss = spool_stats(o->spool);
	metric_set(metric_get("pushprof_spool_files", "Batches waiting in the spool.",
			      METRIC_GAUGE, NULL), (double)ss->files);
	metric_set(metric_get("pushprof_spool_bytes", "Bytes waiting in the spool.",
			      METRIC_GAUGE, NULL), (double)ss->bytes);
	uint64_t df = ss->dropped_files - o->rep_dropped_files;
	uint64_t dp = ss->dropped_profiles - o->rep_dropped_profiles;
	if (df || dp) {
		pp_log(PP_WARN, "spool full, dropped the oldest profiles",
		       "files=%" PRIu64 " profiles=%" PRIu64 " max_bytes=%" PRIu64
		       " dropped_total=%" PRIu64, df, dp, o->cfg->spool.max_bytes,
		       ss->dropped_profiles);
		metric_inc("pushprof_spool_dropped_files_total",
			   "Spool files removed (oldest first) to stay under spool.max_bytes.", NULL,
			   (double)df);
		metric_inc("pushprof_profiles_dropped_total", "Profiles given up, by cause.",
			   "cause=\"spool_full\"", (double)dp);
		o->st.dropped += dp;
		o->rep_dropped_files = ss->dropped_files;
		o->rep_dropped_profiles = ss->dropped_profiles;
	}
	if (ss->corrupt != o->rep_corrupt) {
		metric_inc("pushprof_spool_corrupt_files_total",
			   "Spool files that did not decode, moved aside as <name>.corrupt.", NULL,
			   (double)(ss->corrupt - o->rep_corrupt));
		o->rep_corrupt = ss->corrupt;
	}
}

/*
 * Send the oldest spooled files, several per call (up to DRAIN_MAX_FILES
 * files or DRAIN_MAX_BYTES of profiles; send_batch() sizes the calls): after
 * an outage the spool holds a file per window, and a round trip per file
 * would drain it no faster than one window per RTT while new windows keep
 * coming. Files are removed once every profile in them was accepted. A
 * refusal of a multi-file send switches to one file per call (*one_by_one)
 * so that only the refused file is dropped.
 * Returns 0 to go on, 1 when the spool is empty, negative on failure.
 */
static int drain_some(struct outbox *o, bool *one_by_one, struct pp_err *err)
{
	char names[DRAIN_MAX_FILES][64];
	size_t ends[DRAIN_MAX_FILES];	/* items in `all` up to and with file i */
	struct spool_batch all = { 0 };
	size_t nf = 0, bytes = 0, max = *one_by_one ? 1 : DRAIN_MAX_FILES;
	int rc = 0;

	while (nf < max && bytes < DRAIN_MAX_BYTES) {
		struct spool_batch b;
		struct pp_err perr = { 0 };
		uint64_t corrupt0 = spool_stats(o->spool)->corrupt;
		int got = spool_peek(o->spool, nf ? names[nf - 1] : NULL, names[nf],
				     sizeof(names[nf]), &b, &perr);
		uint64_t moved = spool_stats(o->spool)->corrupt - corrupt0;
		if (moved)	/* perr holds the last one */
			pp_log(PP_WARN, "corrupt spool files moved aside", "files=%" PRIu64 " error=%s",
			       moved, pp_q(perr.msg));
		else if (perr.code)
			pp_log(PP_WARN, "spool read failed", "error=%s", pp_q(perr.msg));
		if (got <= 0)
			break;
		for (size_t i = 0; i < b.n; i++)
			bytes += b.v[i].len;
		if (spool_batch_move(&all, &b)) {
			spool_batch_free(&b);
			break;	/* out of memory: send what is gathered */
		}
		ends[nf++] = all.n;
	}
	if (!nf)
		return 1;
	size_t sent, done = 0;
	rc = send_batch(o, &all, &sent, err);
	while (done < nf && ends[done] <= sent)
		spool_remove(o->spool, names[done++]);
	if (rc && permanent(rc)) {
		if (nf - done > 1) {
			*one_by_one = true;	/* find the refused file */
			rc = 0;
		} else if (done < nf) {
			size_t n = ends[done] - (done ? ends[done - 1] : 0);
			pp_log(PP_ERROR, "dropping a spooled batch the server refused",
			       "profiles=%zu error=%s", n, pp_q(err ? err->msg : ""));
			pthread_mutex_lock(&o->lock);
			o->st.dropped += n;
			pthread_mutex_unlock(&o->lock);
			metric_inc("pushprof_profiles_dropped_total", "Profiles given up, by cause.",
				   "cause=\"refused\"", (double)n);
			spool_remove(o->spool, names[done]);
			rc = 0;
		}
	}
	spool_batch_free(&all);
	return rc;
}

static int flush_now(struct outbox *o, struct pp_err *err)
{
	int rc = 0;

	if (!o->up)
		return 0;
	uint64_t now = mono_ns();
	bool offline = o->retry_at && now < o->retry_at;
	if (offline)
		rc = pp_errf(err, -EAGAIN, "remote store unavailable, next attempt in %.1fs; last "
			     "error: %s", (double)(o->retry_at - now) / 1e9, o->last_err);
	/* oldest first: what was spooled earlier (also by a previous run) */
	bool one_by_one = false;
	while (o->spool && !offline && rc == 0) {
		int r = drain_some(o, &one_by_one, err);
		if (r == 1)
			break;
		rc = r;
	}
	/* send without holding the lock: submitters never wait for the network */
	struct spool_batch batch;
	bool refused = false;
	pthread_mutex_lock(&o->lock);
	batch = o->pending;
	memset(&o->pending, 0, sizeof(o->pending));
	pthread_mutex_unlock(&o->lock);
	if (batch.n && rc == 0) {
		size_t sent;
		rc = send_batch(o, &batch, &sent, err);
		/* what was accepted is not sent again (a batch split into several
		 * requests can fail part way) */
		spool_batch_drop_head(&batch, sent);
		if (rc && permanent(rc)) {
			refused = true;
			pp_log(PP_ERROR, "dropping profiles the server refused", "profiles=%zu error=%s",
			       batch.n, pp_q(err ? err->msg : ""));
			pthread_mutex_lock(&o->lock);
			o->st.dropped += batch.n;
			pthread_mutex_unlock(&o->lock);
			metric_inc("pushprof_profiles_dropped_total", "Profiles given up, by cause.",
				   "cause=\"refused\"", (double)batch.n);
			spool_batch_free(&batch);
		}
	}
	if (!offline) {
		/* a refusal (permanent) still means the store answered: the
		 * refused profiles are dropped above, the next ones go out at
		 * once instead of waiting for a store that is not down */
		if (rc && !refused) {
			o->backoff = o->backoff ? o->backoff * 2 : OFFLINE_MIN_NS;
			if (o->backoff > OFFLINE_MAX_NS)
				o->backoff = OFFLINE_MAX_NS;
			o->retry_at = mono_ns() + o->backoff;
			snprintf(o->last_err, sizeof(o->last_err), "%.190s", err ? err->msg : "");
		} else {
			o->backoff = o->retry_at = 0;
		}
	}
	pthread_mutex_lock(&o->lock);
	/* put back what was not delivered, before anything submitted meanwhile */
	if (batch.n && rc != 0) {
		for (size_t i = 0; i < o->pending.n; i++)
			spool_batch_add(&batch, &o->pending.v[i].labels, o->pending.v[i].profile,
					o->pending.v[i].len);
		spool_batch_free(&o->pending);
		o->pending = batch;
	} else {
		spool_batch_free(&batch);
	}
	if (o->pending.n && rc != 0) {
		o->st.failed_flushes++;
		if (o->spool) {
			struct pp_err serr = { 0 };
			if (spool_write(o->spool, &o->pending, &serr) == 0) {
				spool_batch_free(&o->pending);
			} else {
				pp_log(PP_ERROR, "spool write failed", "error=%s", pp_q(serr.msg));
			}
		}
		/* without a spool, keep pending in memory up to spool.max_bytes */
		if (o->pending.n) {
			uint64_t bytes = 0;
			for (size_t i = 0; i < o->pending.n; i++)
				bytes += o->pending.v[i].len;
			if (bytes > o->cfg->spool.max_bytes) {
				o->st.dropped += o->pending.n;
				metric_inc("pushprof_profiles_dropped_total", "Profiles given up, by cause.",
					   "cause=\"memory_full\"", (double)o->pending.n);
				pp_log(PP_ERROR, "dropping undeliverable profiles", "count=%zu bytes=%" PRIu64,
				       o->pending.n, bytes);
				spool_batch_free(&o->pending);
			}
		}
	}
	o->st.pending = o->pending.n;
	pthread_mutex_unlock(&o->lock);
	spool_report(o);
	return rc;
}

static void *sender_main(void *arg)
{
	struct outbox *o = arg;

	pthread_mutex_lock(&o->lock);
	while (!o->stop) {
		if (!o->flush_requested) {
			pthread_cond_wait(&o->cond, &o->lock);
			continue;
		}
		o->flush_requested = false;
		pthread_mutex_unlock(&o->lock);
		struct pp_err err = { 0 };
		int rc = flush_now(o, &err);
		pthread_mutex_lock(&o->lock);
		o->last_rc = rc;
		memcpy(o->last_msg, err.msg, sizeof(o->last_msg));
	}
	pthread_mutex_unlock(&o->lock);
	return NULL;
}

int outbox_start_sender(struct outbox *o, struct pp_err *err)
{
	if (!o->up || o->sender_running)
		return 0;
	int rc = pthread_create(&o->sender, NULL, sender_main, o);
	if (rc)
		return pp_errf(err, -rc, "outbox: cannot start the sender thread: %s", strerror(rc));
	o->sender_running = true;
	return 0;
}

void outbox_stop_sender(struct outbox *o)
{
	if (!o->sender_running)
		return;
	pthread_mutex_lock(&o->lock);
	o->stop = true;
	pthread_cond_signal(&o->cond);
	pthread_mutex_unlock(&o->lock);
	pthread_join(o->sender, NULL);	/* a flush under way ends within its deadline */
	o->sender_running = false;
}

int outbox_flush(struct outbox *o, struct pp_err *err)
{
	if (!o->up)
		return 0;
	if (!o->sender_running)
		return flush_now(o, err);
	pthread_mutex_lock(&o->lock);
	o->flush_requested = true;
	pthread_cond_signal(&o->cond);
	int rc = o->last_rc;		/* the previous flush's outcome, for the caller's log */
	if (rc && err)
		pp_errf(err, rc, "%s", o->last_msg);
	pthread_mutex_unlock(&o->lock);
	return rc;
}

void outbox_set_interrupt(struct outbox *o, bool (*fn)(void *arg), void *arg)
{
	if (o->up)
		uploader_set_interrupt(o->up, fn, arg);
}

void outbox_set_deadline(struct outbox *o, uint64_t mono_ns_deadline)
{
	if (o->up)
		uploader_set_deadline(o->up, mono_ns_deadline);
}

const struct outbox_stats *outbox_stats(const struct outbox *o)
{
	return &o->st;
}
