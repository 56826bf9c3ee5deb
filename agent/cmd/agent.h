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

#include <signal.h>
#include <stdint.h>

#include "config.h"
#include "err.h"

struct agent_opts {
	uint64_t duration_ns;  /* 0 = until a signal */
	struct config *reload; /* out: the new config after SIGHUP (caller frees) */
	/* how the config was loaded (command-line flags over the file, the
	 * checks): the same again at each reload */
	struct config_load_opts load;
	bool builtin; /* no file: the built-in defaults (no reload) */
};

/*
 * 0 on a clean stop; 1 when SIGHUP brought a valid new config (in
 * o->reload; the current window was flushed, BPF detached: run again with
 * it); negative with err set when the agent cannot run. -EINVAL means the
 * configuration cannot be used on this machine. An invalid config on
 * SIGHUP is logged and the agent keeps running with the old one.
 */
int agent_run(const struct config *cfg, struct agent_opts *o, struct pp_err *err);

/*
 * Block SIGINT, SIGTERM and SIGHUP in the calling thread (threads created
 * later inherit it); the set into *mask (optional). The agent handles them
 * through a signalfd and never unblocks them: call this first thing in the
 * process (before any thread and before the config is read), so that no
 * signal takes its default action between two runs of a reload, or before
 * the first. agent_run() calls it too.
 */
void agent_block_signals(sigset_t *mask);

#endif
