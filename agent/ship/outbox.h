/*
 * outbox.h - where finished profiles are handed over.
 *
 * outbox_submit() takes a profile (gzip pprof + series labels) and returns
 * at once: the profile is first written to local_store.directory (when set)
 * and kept in memory for the next flush. outbox_flush() sends everything
 * pending through the uploader in one WriteRaw batch; what cannot be
 * delivered is kept (and spooled to disk, spool.directory) - never dropped
 * silently. Producers (CPU windows, heap snapshots, OOM captures) only ever
 * talk to this module, never to the uploader.
 *
 * remote_store may be a list (config.h): each store then has its own
 * pending queue, spool directory (spool.directory/<name>, spool.max_bytes
 * each; the one store of a mapping uses spool.directory itself), backoff,
 * sender thread and counters, so a store that is down or hangs never
 * delays, fills or drops another's profiles. Delivery metrics then carry
 * store="<name>" (the one store's keep their labels as they were).
 */
#ifndef PUSHPROF_OUTBOX_H
#define PUSHPROF_OUTBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "err.h"
#include "labels.h"

struct outbox;

/* Totals over the stores (pending: profiles in memory, all stores). */
struct outbox_stats {
	uint64_t submitted, written_local, delivered, failed_flushes, dropped;
	uint64_t pending;
};

struct outbox_opts {
	const struct config *cfg; /* required; must outlive the outbox */
};

/*
 * Makes local_store.directory and the spool directories private, and one
 * uploader and spool per remote store. 0 with *out set; or a negative code
 * (a directory that cannot be used, a store's client that cannot be set
 * up, -ENOMEM), err filled, *out NULL. Starts no thread (see
 * outbox_start_sender()). Submissions and flushes may come from several
 * threads (they take the outbox's lock); the setters are for start-up.
 */
int outbox_new(const struct outbox_opts *opts, struct outbox **out, struct pp_err *err);
void outbox_free(struct outbox *o); /* NULL-safe; stops the sender threads */

/*
 * The series labels of every submitted profile pass through this hook
 * (on a private copy, under the outbox's lock, so it is called from one
 * thread at a time): the agent adds metadata and applies relabel_configs
 * there. It is called once per protocol among the stores the profile goes
 * to (once, with the config's protocol, when there is no remote store), so
 * each store gets its protocol's labels. Return 1 to keep, 0 to drop the
 * profile for those stores (counted), negative to keep it unchanged after
 * an error.
 */
typedef int (*outbox_labeler_fn)(struct pp_labels *labels, enum store_protocol protocol, void *arg);
void outbox_set_labeler(struct outbox *o, outbox_labeler_fn fn, void *arg);

/* Copies labels and bytes. Labels must include __name__. */
int outbox_submit(struct outbox *o, const struct pp_labels *labels, const uint8_t *gz, size_t len,
		  struct pp_err *err);
/*
 * For profiles whose encoding depends on the protocol (CPU profiles): to
 * the stores of that protocol only. local_store gets the profile when the
 * first store's protocol (or, with no remote store, the config's) is proto,
 * so it is written once whatever the number of encodings.
 */
int outbox_submit_protocol(struct outbox *o, enum store_protocol proto,
			   const struct pp_labels *labels, const uint8_t *gz, size_t len,
			   struct pp_err *err);
/* The remote stores (0: local_store only), and a bit (1 << protocol) for
 * each protocol among them. */
size_t outbox_nstores(const struct outbox *o);
unsigned outbox_protocols(const struct outbox *o);
/* Like outbox_submit, then written to the spool (fsynced) before returning:
 * for profiles that must survive the server being down and an agent
 * restart (OOM captures). */
int outbox_submit_durable(struct outbox *o, const struct pp_labels *labels, const uint8_t *gz,
			  size_t len, struct pp_err *err);
/* Push what is pending, spooled batches first (oldest first); what cannot be
 * delivered goes to the spool. 0 when everything was delivered. */
int outbox_flush(struct outbox *o, struct pp_err *err);
/*
 * Run flushes on threads of the outbox's own, one per store: outbox_flush()
 * then only asks each for one and returns the previous flushes' result (the
 * first failing store's) at once, so a slow or hanging store never delays
 * the caller or another store. Without them outbox_flush() flushes each
 * store in turn. outbox_stop_sender() lets a
 * flush under way finish (bounded by the deadline below) and joins; later
 * flushes run in the caller again. outbox_free() stops it too.
 */
int outbox_start_sender(struct outbox *o, struct pp_err *err);
void outbox_stop_sender(struct outbox *o);

/* Bound every later network attempt by this CLOCK_MONOTONIC time (shutdown). */
void outbox_set_deadline(struct outbox *o, uint64_t mono_ns_deadline);
/* See uploader_set_interrupt(). */
void outbox_set_interrupt(struct outbox *o, bool (*fn)(void *arg), void *arg);
const struct outbox_stats *outbox_stats(const struct outbox *o);

#endif
