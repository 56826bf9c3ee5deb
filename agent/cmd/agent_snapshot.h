/*
 * agent_snapshot.h - the agent's answer to POST /api/v1/snapshot (http.h):
 * a Go heap profile of one of the config's targets (403 for any other
 * process, or when go_heap is off), also handed to the outbox.
 *
 * Runs on the HTTP server's thread: it shares nothing with the loop but the
 * config (read-only) and the outbox (thread-safe).
 */
#ifndef PUSHPROF_AGENT_SNAPSHOT_H
#define PUSHPROF_AGENT_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "config.h"
#include "outbox.h"

/* Both owned by the agent and valid while the HTTP server runs. */
struct agent_snapshot {
	const struct config *cfg;
	struct outbox *outbox;
};

/* An http_snapshot_fn; arg is a struct agent_snapshot. */
int agent_http_snapshot(void *arg, pid_t pid, const char *view_s, uint8_t **out, size_t *len,
			char *msg, size_t msg_len);

#endif
