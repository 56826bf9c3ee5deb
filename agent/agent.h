/*
 * agent.h - the `pushprof run` loop: sample CPU in windows, keep the target
 * set current, build and hand over one profile per process per window.
 *
 * The loop sleeps in poll() on a signalfd: it wakes about once a second for
 * target tracking and once per window, never per sample. SIGINT/SIGTERM end
 * the current window early; it is still built and flushed before return.
 * SIGHUP reloads the config file.
 */
#ifndef PUSHPROF_AGENT_H
#define PUSHPROF_AGENT_H

#include <stdint.h>

#include "config.h"
#include "err.h"

struct agent_opts {
	uint64_t duration_ns;		/* 0 = until a signal */
	struct config *reload;		/* out: the new config after SIGHUP (caller frees) */
};

/*
 * 0 on a clean stop; 1 when SIGHUP brought a valid new config (in
 * o->reload; the current window was flushed, BPF detached: run again with
 * it); negative with err set when the agent cannot run. -EINVAL means the
 * configuration cannot be used on this machine. An invalid config on
 * SIGHUP is logged and the agent keeps running with the old one.
 */
int agent_run(const struct config *cfg, struct agent_opts *o, struct pp_err *err);

#endif
