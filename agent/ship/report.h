/*
 * report.h - where a profile producer hands each finished profile: the one
 * interface between capture and delivery. Producers (the CPU window's
 * cpu_profiles_build(), gotrack's snapshots, the OOM watcher) do not know
 * about delivery; the agent wires the reporter to the outbox (agent.c),
 * tests to whatever they check.
 */
#ifndef PUSHPROF_REPORT_H
#define PUSHPROF_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "labels.h"

struct pp_reporter {
	/*
	 * One profile: gzip'd pprof and its series labels, both only valid
	 * during the call (copy what is kept). durable: the profile must be
	 * on disk before this returns (OOM captures: the node may be going
	 * down). Called on the producer's thread (the main loop for CPU
	 * profiles, gotrack's worker, the thread that calls
	 * oom_watch_deliver()), so it must be thread-safe.
	 * Returns 0, or negative with err set; the producer logs and counts
	 * a failure and does not retry (retries belong to delivery).
	 */
	int (*fn)(void *arg, const struct pp_labels *labels, const uint8_t *gz, size_t len,
		  bool durable, struct pp_err *err);
	void *arg;
};

#endif
