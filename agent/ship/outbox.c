/*
 * outbox.c - the hand-over (outbox.h): one queue, spool and sender thread
 * per remote store, flushes with backoff, the labeler hook. The copy kept
 * in local_store.directory is local_store.c's.
 */
#include "outbox.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fileutil.h"
#include "local_store.h"
#include "log.h"
#include "metrics.h"
#include "spool.h"
#include "upload.h"
#include "ppclock.h"

/*
 * One remote store: everything about delivering to it is its own (pending
 * profiles, spool directory, backoff, sender thread, call size, counters),
 * so a store that is down or hangs only ever delays and fills its own.
 */
struct store {
	struct outbox *o;
	const struct remote_store_config *rs;
	char lbl[96]; /* store="name" with a list, "" for the one store */
	struct uploader *up;
	struct spool *spool;	    /* NULL: no spool directory */
	struct spool_batch pending; /* submitted since the last flush; under o->lock */
	/* After a failed delivery the network is left alone until retry_at
	 * (backoff doubling from OFFLINE_MIN_NS to OFFLINE_MAX_NS): a store that
	 * is down or hangs then costs one bounded attempt per backoff instead of
	 * one per flush, so the run loop's windows stay on time and a shutdown
	 * during an outage spools at once. Flushing thread only. */
	uint64_t retry_at, backoff;
	char last_err[200];
	/* spool counters already turned into metrics and log lines */
	uint64_t rep_dropped_files, rep_dropped_profiles, rep_corrupt;
	/* sender thread (outbox_start_sender): flushes run there, so a slow or
	 * hanging store never holds up the caller's windows, nor the other stores */
	pthread_t sender;
	bool sender_running, flush_requested;
	pthread_cond_t cond; /* with o->lock */
	int last_rc;	     /* result of the sender's last flush */
	char last_msg[sizeof(((struct pp_err *)0)->msg)];
	/* profiles per call (send_batch): halved when a call times out,
	 * doubled back on success. Flushing thread only. */
	size_t call_series;
};

struct outbox {
	pthread_mutex_t lock; /* pending, stats, local store: submit may come from any thread */
	const struct config *cfg;
	struct store *stores; /* config_nstores(cfg) of them; none: local only */
	size_t nstores;
	struct local_store *local; /* NULL: no local_store.directory */
	struct outbox_stats st;	   /* sums over the stores */
	outbox_labeler_fn labeler; /* metadata + relabelling, see outbox.h */
	void *labeler_arg;
	bool stop; /* the sender threads end */
};

void outbox_set_labeler(struct outbox *o, outbox_labeler_fn fn, void *arg)
{
	pthread_mutex_lock(&o->lock);
	o->labeler = fn;
	o->labeler_arg = arg;
	pthread_mutex_unlock(&o->lock);
}

static void spool_report(struct store *st);

#define OFFLINE_MIN_NS 2000000000ull /* 2 s */
#define DRAIN_MAX_FILES 32	     /* spool files per call, see drain_some() */
#define DRAIN_MAX_BYTES (8u << 20)
#define CALL_MAX_SERIES 1024	      /* profiles per call, see send_batch() */
#define OFFLINE_MAX_NS 30000000000ull /* 30 s */

/* Metric labels of st: its store="..." (lists only) and extra, or NULL. */
static const char *store_lbl(const struct store *st, const char *extra, char *buf, size_t len)
{
	if (!*st->lbl)
		return extra;
	snprintf(buf, len, "%s%s%s", extra ? extra : "", extra ? "," : "", st->lbl);
	return buf;
}

int outbox_new(const struct outbox_opts *opts, struct outbox **out, struct pp_err *err)
{
	const struct config *cfg = opts->cfg;
	struct outbox *o = calloc(1, sizeof(*o));
	int r;

	*out = NULL;
	if (!o)
		return pp_errf(err, -ENOMEM, "outbox: out of memory");
	pthread_mutex_init(&o->lock, NULL);
	o->cfg = cfg;
	if (cfg->local_store.directory && cfg->local_store.directory[0]) {
		struct local_store_opts lo = { .dir = cfg->local_store.directory,
					       .max_bytes = cfg->local_store.max_bytes };
		r = local_store_new(&lo, &o->local, err);
		if (r)
			goto fail;
	}
	size_t n = config_nstores(cfg);
	if (n && !(o->stores = calloc(n, sizeof(*o->stores)))) {
		r = pp_errf(err, -ENOMEM, "outbox: out of memory");
		goto fail;
	}
	bool spool = cfg->spool.directory && cfg->spool.directory[0];
	if (n > 1 && spool) { /* the parent of the stores' directories */
		bool fixed = false;
		unsigned mode = 0;
		r = pp_private_dir(cfg->spool.directory, "spool", &fixed, &mode, err);
		if (r)
			goto fail;
	}
	for (size_t i = 0; i < n; i++) {
		struct store *st = &o->stores[i];
		st->o = o;
		st->rs = config_store(cfg, i);
		st->call_series = CALL_MAX_SERIES;
		pthread_cond_init(&st->cond, NULL);
		o->nstores = i + 1;
		if (cfg->remote_store_list)
			snprintf(st->lbl, sizeof(st->lbl), "store=\"%s\"", st->rs->name);
		r = uploader_new(&(struct uploader_opts){ .rs = st->rs }, &st->up, err);
		if (r)
			goto fail;
		uploader_set_metric_label(st->up, *st->lbl ? st->lbl : NULL);
		if (!spool)
			continue;
		/* a list: a directory per store, spool.max_bytes each; the one
		 * store keeps spool.directory itself (what earlier runs left) */
		char dir[4200];
		snprintf(dir, sizeof(dir), "%s%s%s", cfg->spool.directory,
			 cfg->remote_store_list ? "/" : "",
			 cfg->remote_store_list ? st->rs->name : "");
		r = spool_new(&(struct spool_opts){ .dir = dir, .max_bytes = cfg->spool.max_bytes },
			      &st->spool, err);
		if (r)
			goto fail;
	}
	*out = o;
	return 0;
fail:
	outbox_free(o);
	return r;
}

void outbox_free(struct outbox *o)
{
	if (!o)
		return;
	outbox_stop_sender(o);
	for (size_t i = 0; i < o->nstores; i++) {
		struct store *st = &o->stores[i];
		uploader_free(st->up);
		spool_free(st->spool);
		spool_batch_free(&st->pending);
		pthread_cond_destroy(&st->cond);
	}
	free(o->stores);
	local_store_free(o->local);
	pthread_mutex_destroy(&o->lock);
	free(o);
}

size_t outbox_nstores(const struct outbox *o)
{
	return o->nstores;
}

unsigned outbox_protocols(const struct outbox *o)
{
	unsigned m = 0;

	for (size_t i = 0; i < o->nstores; i++)
		m |= 1u << o->stores[i].rs->protocol;
	return m;
}

static void count_dropped_locked(struct store *st, const char *cause, uint64_t n);

/*
 * After pending queues changed (under o->lock): the total, each store's
 * gauge, and the bound. A store whose sender is stuck in a slow call keeps
 * collecting profiles in memory until the call ends; past spool.max_bytes
 * its oldest go (counted as memory_full), never another store's.
 */
static void count_pending(struct outbox *o)
{
	char mb[160];

	o->st.pending = 0;
	for (size_t i = 0; i < o->nstores; i++) {
		struct store *st = &o->stores[i];
		uint64_t bytes = 0;
		size_t k = st->pending.n;
		for (size_t j = 0; j < st->pending.n; j++)
			bytes += st->pending.v[j].len;
		while (k > 1 && bytes > o->cfg->spool.max_bytes)
			bytes -= st->pending.v[st->pending.n - k--].len;
		if (k < st->pending.n) {
			size_t drop = st->pending.n - k;
			pp_log(PP_ERROR, "dropping the oldest profiles waiting for a busy store",
			       "store=%s count=%zu max_bytes=%" PRIu64, pp_q(st->rs->name), drop,
			       o->cfg->spool.max_bytes);
			count_dropped_locked(st, "cause=\"memory_full\"", drop);
			spool_batch_drop_head(&st->pending, drop);
		}
		o->st.pending += st->pending.n;
		metric_set(metric_get("pushprof_outbox_pending",
				      "Profiles in memory waiting for the next push.", METRIC_GAUGE,
				      store_lbl(st, NULL, mb, sizeof(mb))),
			   (double)st->pending.n);
	}
}

/*
 * The profile goes to every store of protocol proto (-1: every store),
 * each with the labels its protocol's labeler call gave (one call per
 * protocol), and to local_store when the first store (or none) takes it.
 */
static int submit(struct outbox *o, int proto, const struct pp_labels *in, const uint8_t *gz,
		  size_t len, struct pp_err *err)
{
	struct pp_labels labels[2] = { { 0 }, { 0 } }; /* by store_protocol */
	int keep[2] = { -2, -2 };		       /* -2: not labelled yet */
	int rc = 0;

	if (!pp_labels_get(in, "__name__"))
		return pp_errf(err, -EINVAL, "outbox: profile without __name__ label");
	char lbl[96];
	snprintf(lbl, sizeof(lbl), "name=\"%.64s\"", pp_labels_get(in, "__name__"));
	pthread_mutex_lock(&o->lock);
	/* local only: labelled as the config's (single) protocol would */
	size_t n = o->nstores ? o->nstores : 1;
	bool any = false, local = false;
	for (size_t i = 0; i < n; i++) {
		struct store *st = o->nstores ? &o->stores[i] : NULL;
		int p = st ? (int)st->rs->protocol : (int)o->cfg->remote_store.protocol;
		if (proto >= 0 && p != proto)
			continue;
		if (keep[p] == -2) {
			keep[p] = 1;
			if (pp_labels_copy(&labels[p], in)) {
				rc = pp_errf(err, -ENOMEM, "outbox: out of memory");
				break;
			}
			if (o->labeler)
				keep[p] = o->labeler(&labels[p], (enum store_protocol)p,
						     o->labeler_arg);
			if (keep[p] == 0 || !pp_labels_get(&labels[p], "__name__")) {
				keep[p] = 0;
				metric_inc(
					"pushprof_profiles_relabel_dropped_total",
					"Profiles dropped by relabel_configs (keep/drop), by name.",
					lbl, 1);
			}
		}
		if (!keep[p])
			continue;
		any = true;
		if (i == 0)
			local = true;
		if (st && spool_batch_add(&st->pending, &labels[p], gz, len))
			rc = pp_errf(err, -ENOMEM, "outbox: out of memory");
	}
	if (any) {
		metric_inc("pushprof_profiles_submitted_total",
			   "Profiles built and handed over, by name.", lbl, 1);
		o->st.submitted++;
	}
	if (local && o->local) {
		int lr = local_store_write(o->local, in, gz, len, err);
		if (!lr)
			o->st.written_local++;
		if (!rc)
			rc = lr;
	}
	count_pending(o);
	pthread_mutex_unlock(&o->lock);
	pp_labels_free(&labels[0]);
	pp_labels_free(&labels[1]);
	return rc;
}

int outbox_submit(struct outbox *o, const struct pp_labels *in, const uint8_t *gz, size_t len,
		  struct pp_err *err)
{
	return submit(o, -1, in, gz, len, err);
}

int outbox_submit_protocol(struct outbox *o, enum store_protocol proto, const struct pp_labels *in,
			   const uint8_t *gz, size_t len, struct pp_err *err)
{
	return submit(o, (int)proto, in, gz, len, err);
}

int outbox_submit_durable(struct outbox *o, const struct pp_labels *labels, const uint8_t *gz,
			  size_t len, struct pp_err *err)
{
	int rc = outbox_submit(o, labels, gz, len, err);

	if (rc)
		return rc;
	/* on disk before any network call: survives the server and the agent */
	pthread_mutex_lock(&o->lock);
	for (size_t i = 0; i < o->nstores; i++) {
		struct store *st = &o->stores[i];
		if (!st->spool || !st->pending.n)
			continue;
		struct pp_err serr = { 0 };
		int r = spool_write(st->spool, &st->pending, &serr);
		if (r == 0)
			spool_batch_free(&st->pending);
		else if (!rc)
			rc = pp_errf(err, r, "%s", serr.msg);
		spool_report(st);
	}
	count_pending(o);
	pthread_mutex_unlock(&o->lock);
	return rc;
}

/* Profiles a store gave up, by cause: its counter and the metric. */
static void count_dropped_locked(struct store *st, const char *cause, uint64_t n)
{
	char mb[160];

	st->o->st.dropped += n;
	metric_inc("pushprof_profiles_dropped_total", "Profiles given up, by cause.",
		   store_lbl(st, cause, mb, sizeof(mb)), (double)n);
}

static void count_dropped(struct store *st, const char *cause, uint64_t n)
{
	pthread_mutex_lock(&st->o->lock);
	count_dropped_locked(st, cause, n);
	pthread_mutex_unlock(&st->o->lock);
}

/* The server refused the data itself (INVALID_ARGUMENT) or it can never
 * fit a request: resending cannot help, and keeping it would block every
 * batch behind it. */
static bool permanent(int rc)
{
	return rc == -EINVAL || rc == -E2BIG;
}

/*
 * Send b in calls of at most st->call_series profiles (the uploader further
 * splits each call at max_request_bytes). A call that times out may have
 * met a store that is slow rather than down (it often stored the request
 * anyway), and the same amount would time out again, forever, while the
 * backlog grows: the rest goes out at once in calls half the size, down to
 * one profile; each success doubles the size back up to CALL_MAX_SERIES.
 * Only a single profile timing out is a failure. *sent: how many leading
 * profiles the store accepted (all of them when 0 is returned).
 */
static int send_batch(struct store *st, const struct spool_batch *b, size_t *sent,
		      struct pp_err *err)
{
	struct outbox *o = st->o;
	char mb[160];
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
		if (k > st->call_series)
			k = st->call_series;
		rc = uploader_write(st->up, s + done, k, &ok, err);
		if (rc == 0) {
			done += k;
			if (st->call_series < CALL_MAX_SERIES)
				st->call_series = st->call_series * 2 > CALL_MAX_SERIES
							  ? CALL_MAX_SERIES
							  : st->call_series * 2;
			continue;
		}
		done += ok;
		if (rc != -ETIMEDOUT || k - ok <= 1)
			break;
		st->call_series = (k - ok) / 2;
		pp_log(PP_WARN,
		       "remote store slower than remote_store.timeout; sending fewer "
		       "profiles per call",
		       "store=%s profiles=%zu next=%zu error=%s", pp_q(st->rs->name), k - ok,
		       st->call_series, pp_q(err ? err->msg : ""));
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
			   "Profiles accepted by the remote store.",
			   store_lbl(st, NULL, mb, sizeof(mb)), (double)done);
	}
	return rc;
}

/* Spool gauges, and every drop (spool full) or corrupt file as a counter
 * and a log line: the spool itself never prints. Under o->lock. */
static void spool_report(struct store *st)
{
	struct outbox *o = st->o;
	char mb[160];

	if (!st->spool)
		return;
	const struct spool_stats *ss = spool_stats(st->spool);
	metric_set(metric_get("pushprof_spool_files", "Batches waiting in the spool.", METRIC_GAUGE,
			      store_lbl(st, NULL, mb, sizeof(mb))),
		   (double)ss->files);
	metric_set(metric_get("pushprof_spool_bytes", "Bytes waiting in the spool.", METRIC_GAUGE,
			      store_lbl(st, NULL, mb, sizeof(mb))),
		   (double)ss->bytes);
	uint64_t df = ss->dropped_files - st->rep_dropped_files;
	uint64_t dp = ss->dropped_profiles - st->rep_dropped_profiles;
	if (df || dp) {
		pp_log(PP_WARN, "spool full, dropped the oldest profiles",
		       "store=%s files=%" PRIu64 " profiles=%" PRIu64 " max_bytes=%" PRIu64
		       " dropped_total=%" PRIu64,
		       pp_q(st->rs->name), df, dp, o->cfg->spool.max_bytes, ss->dropped_profiles);
		metric_inc("pushprof_spool_dropped_files_total",
			   "Spool files removed (oldest first) to stay under spool.max_bytes.",
			   store_lbl(st, NULL, mb, sizeof(mb)), (double)df);
		count_dropped_locked(st, "cause=\"spool_full\"", dp);
		st->rep_dropped_files = ss->dropped_files;
		st->rep_dropped_profiles = ss->dropped_profiles;
	}
	if (ss->corrupt != st->rep_corrupt) {
		metric_inc("pushprof_spool_corrupt_files_total",
			   "Spool files that did not decode, moved aside as <name>.corrupt.",
			   store_lbl(st, NULL, mb, sizeof(mb)),
			   (double)(ss->corrupt - st->rep_corrupt));
		st->rep_corrupt = ss->corrupt;
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
static int drain_some(struct store *st, bool *one_by_one, struct pp_err *err)
{
	char names[DRAIN_MAX_FILES][64];
	size_t ends[DRAIN_MAX_FILES]; /* items in `all` up to and with file i */
	struct spool_batch all = { 0 };
	size_t nf = 0, bytes = 0, max = *one_by_one ? 1 : DRAIN_MAX_FILES;
	int rc = 0;

	while (nf < max && bytes < DRAIN_MAX_BYTES) {
		struct spool_batch b;
		struct pp_err perr = { 0 };
		uint64_t corrupt0 = spool_stats(st->spool)->corrupt;
		int got = spool_peek(st->spool, nf ? names[nf - 1] : NULL, names[nf],
				     sizeof(names[nf]), &b, &perr);
		uint64_t moved = spool_stats(st->spool)->corrupt - corrupt0;
		if (moved) /* perr holds the last one */
			pp_log(PP_WARN, "corrupt spool files moved aside",
			       "store=%s files=%" PRIu64 " error=%s", pp_q(st->rs->name), moved,
			       pp_q(perr.msg));
		else if (perr.code)
			pp_log(PP_WARN, "spool read failed", "store=%s error=%s",
			       pp_q(st->rs->name), pp_q(perr.msg));
		if (got <= 0)
			break;
		for (size_t i = 0; i < b.n; i++)
			bytes += b.v[i].len;
		if (spool_batch_move(&all, &b)) {
			spool_batch_free(&b);
			break; /* out of memory: send what is gathered */
		}
		ends[nf++] = all.n;
	}
	if (!nf)
		return 1;
	size_t sent, done = 0;
	rc = send_batch(st, &all, &sent, err);
	while (done < nf && ends[done] <= sent)
		spool_remove(st->spool, names[done++]);
	if (rc && permanent(rc)) {
		if (nf - done > 1) {
			*one_by_one = true; /* find the refused file */
			rc = 0;
		} else if (done < nf) {
			size_t n = ends[done] - (done ? ends[done - 1] : 0);
			pp_log(PP_ERROR, "dropping a spooled batch the server refused",
			       "store=%s profiles=%zu error=%s", pp_q(st->rs->name), n,
			       pp_q(err ? err->msg : ""));
			count_dropped(st, "cause=\"refused\"", n);
			spool_remove(st->spool, names[done]);
			rc = 0;
		}
	}
	spool_batch_free(&all);
	return rc;
}

/* One store's flush: its spool first (oldest first), then its pending. */
static int flush_store(struct store *st, struct pp_err *err)
{
	struct outbox *o = st->o;
	int rc = 0;

	uint64_t now = pp_mono_ns();
	bool offline = st->retry_at && now < st->retry_at;
	if (offline)
		rc = pp_errf(err, -EAGAIN,
			     "remote store unavailable, next attempt in %.1fs; last "
			     "error: %s",
			     (double)(st->retry_at - now) / 1e9, st->last_err);
	/* oldest first: what was spooled earlier (also by a previous run) */
	bool one_by_one = false;
	while (st->spool && !offline && rc == 0) {
		int r = drain_some(st, &one_by_one, err);
		if (r == 1)
			break;
		rc = r;
	}
	/* send without holding the lock: submitters never wait for the network */
	struct spool_batch batch;
	bool refused = false;
	pthread_mutex_lock(&o->lock);
	batch = st->pending;
	memset(&st->pending, 0, sizeof(st->pending));
	pthread_mutex_unlock(&o->lock);
	if (batch.n && rc == 0) {
		size_t sent;
		rc = send_batch(st, &batch, &sent, err);
		/* what was accepted is not sent again (a batch split into several
		 * requests can fail part way) */
		spool_batch_drop_head(&batch, sent);
		if (rc && permanent(rc)) {
			refused = true;
			pp_log(PP_ERROR, "dropping profiles the server refused",
			       "store=%s profiles=%zu error=%s", pp_q(st->rs->name), batch.n,
			       pp_q(err ? err->msg : ""));
			count_dropped(st, "cause=\"refused\"", batch.n);
			spool_batch_free(&batch);
		}
	}
	if (!offline) {
		/* a refusal (permanent) still means the store answered: the
		 * refused profiles are dropped above, the next ones go out at
		 * once instead of waiting for a store that is not down */
		if (rc && !refused) {
			st->backoff = st->backoff ? st->backoff * 2 : OFFLINE_MIN_NS;
			if (st->backoff > OFFLINE_MAX_NS)
				st->backoff = OFFLINE_MAX_NS;
			st->retry_at = pp_mono_ns() + st->backoff;
			snprintf(st->last_err, sizeof(st->last_err), "%.190s", err ? err->msg : "");
		} else {
			st->backoff = st->retry_at = 0;
		}
	}
	pthread_mutex_lock(&o->lock);
	/* put back what was not delivered, before anything submitted meanwhile */
	if (batch.n && rc != 0) {
		for (size_t i = 0; i < st->pending.n; i++)
			spool_batch_add(&batch, &st->pending.v[i].labels, st->pending.v[i].profile,
					st->pending.v[i].len);
		spool_batch_free(&st->pending);
		st->pending = batch;
	} else {
		spool_batch_free(&batch);
	}
	if (st->pending.n && rc != 0) {
		o->st.failed_flushes++;
		if (st->spool) {
			struct pp_err serr = { 0 };
			if (spool_write(st->spool, &st->pending, &serr) == 0) {
				spool_batch_free(&st->pending);
			} else {
				pp_log(PP_ERROR, "spool write failed", "store=%s error=%s",
				       pp_q(st->rs->name), pp_q(serr.msg));
			}
		}
		/* without a spool, keep pending in memory up to spool.max_bytes */
		if (st->pending.n) {
			uint64_t bytes = 0;
			for (size_t i = 0; i < st->pending.n; i++)
				bytes += st->pending.v[i].len;
			if (bytes > o->cfg->spool.max_bytes) {
				pp_log(PP_ERROR, "dropping undeliverable profiles",
				       "store=%s count=%zu bytes=%" PRIu64, pp_q(st->rs->name),
				       st->pending.n, bytes);
				count_dropped_locked(st, "cause=\"memory_full\"", st->pending.n);
				spool_batch_free(&st->pending);
			}
		}
	}
	count_pending(o);
	spool_report(st);
	pthread_mutex_unlock(&o->lock);
	/* with several stores, say which one failed */
	if (rc && err && *st->lbl) {
		char m[sizeof(err->msg)];
		snprintf(m, sizeof(m), "%s", err->msg);
		pp_errf(err, rc, "store %s: %s", st->rs->name, m);
	}
	return rc;
}

/* Every store in turn (no sender threads): the first failure is returned,
 * the others are logged. */
static int flush_now(struct outbox *o, struct pp_err *err)
{
	int rc = 0;

	for (size_t i = 0; i < o->nstores; i++) {
		struct pp_err e = { 0 };
		int r = flush_store(&o->stores[i], &e);
		if (r && !rc) {
			rc = r;
			if (err)
				*err = e;
		} else if (r) {
			pp_log(PP_WARN, "push failed", "error=%s", pp_q(e.msg));
		}
	}
	return rc;
}

static void *sender_main(void *arg)
{
	struct store *st = arg;
	struct outbox *o = st->o;

	pthread_mutex_lock(&o->lock);
	while (!o->stop) {
		if (!st->flush_requested) {
			pthread_cond_wait(&st->cond, &o->lock);
			continue;
		}
		st->flush_requested = false;
		pthread_mutex_unlock(&o->lock);
		struct pp_err err = { 0 };
		int rc = flush_store(st, &err);
		pthread_mutex_lock(&o->lock);
		st->last_rc = rc;
		memcpy(st->last_msg, err.msg, sizeof(st->last_msg));
	}
	pthread_mutex_unlock(&o->lock);
	return NULL;
}

int outbox_start_sender(struct outbox *o, struct pp_err *err)
{
	o->stop = false;
	for (size_t i = 0; i < o->nstores; i++) {
		struct store *st = &o->stores[i];
		if (st->sender_running)
			continue;
		int rc = pthread_create(&st->sender, NULL, sender_main, st);
		if (rc) {
			outbox_stop_sender(o);
			return pp_errf(err, -rc, "outbox: cannot start the sender thread: %s",
				       strerror(rc));
		}
		pthread_setname_np(st->sender, "pushprof-send"); /* for top -H */
		st->sender_running = true;
	}
	return 0;
}

void outbox_stop_sender(struct outbox *o)
{
	pthread_mutex_lock(&o->lock);
	o->stop = true;
	for (size_t i = 0; i < o->nstores; i++)
		pthread_cond_signal(&o->stores[i].cond);
	pthread_mutex_unlock(&o->lock);
	for (size_t i = 0; i < o->nstores; i++) {
		struct store *st = &o->stores[i];
		if (!st->sender_running)
			continue;
		pthread_join(st->sender, NULL); /* a flush under way ends within its deadline */
		st->sender_running = false;
	}
}

int outbox_flush(struct outbox *o, struct pp_err *err)
{
	int rc = 0;

	if (!o->nstores)
		return 0;
	if (!o->stores[0].sender_running)
		return flush_now(o, err);
	pthread_mutex_lock(&o->lock);
	for (size_t i = 0; i < o->nstores; i++) {
		struct store *st = &o->stores[i];
		st->flush_requested = true;
		pthread_cond_signal(&st->cond);
		/* the previous flush's outcome, for the caller's log: the
		 * first failing store's */
		if (st->last_rc && !rc) {
			rc = st->last_rc;
			if (err)
				pp_errf(err, rc, "%s", st->last_msg);
		}
	}
	pthread_mutex_unlock(&o->lock);
	return rc;
}

void outbox_set_interrupt(struct outbox *o, bool (*fn)(void *arg), void *arg)
{
	for (size_t i = 0; i < o->nstores; i++)
		uploader_set_interrupt(o->stores[i].up, fn, arg);
}

void outbox_set_deadline(struct outbox *o, uint64_t mono_ns_deadline)
{
	for (size_t i = 0; i < o->nstores; i++)
		uploader_set_deadline(o->stores[i].up, mono_ns_deadline);
}

const struct outbox_stats *outbox_stats(const struct outbox *o)
{
	return &o->st;
}
