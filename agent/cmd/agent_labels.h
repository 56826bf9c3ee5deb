/*
 * agent_labels.h - the agent's outbox labeler (outbox.h): every series on
 * its way out gets __meta_* labels of its process, the system, its
 * container and node, the plain names Parca users expect (namespace, pod,
 * container, ...), service_name for Pyroscope stores, then the user's
 * relabel_configs.
 *
 * The outbox calls it under its lock, one thread at a time; what it reads
 * (the config, container and node metadata) is shared with nobody who
 * writes it, or is thread-safe (containers.h, nodemeta.h).
 */
#ifndef PUSHPROF_AGENT_LABELS_H
#define PUSHPROF_AGENT_LABELS_H

#include <stddef.h>
#include <sys/utsname.h>

#include "config.h"
#include "labels.h"

struct containers;
struct node_meta;

/* Owned by the agent (agent.c creates and frees meta and nodes). */
struct agent_labeler {
	const struct config *cfg; /* relabel_configs */
	struct containers *meta;  /* container/pod names (CRI), cgroup facts; NULL: none */
	struct node_meta *nodes;  /* the node's Kubernetes labels; NULL: unavailable */
	struct utsname uts;	  /* __meta_system_kernel_* labels */
};

/* An outbox_labeler_fn; arg is a struct agent_labeler. */
int agent_label_series(struct pp_labels *l, enum store_protocol protocol, void *arg);

/* For relabel_each_source(), as check-config warns: a rule reading a
 * __meta_* label nobody sets is logged once at start. */
void agent_warn_meta(size_t rule, const char *label, void *arg);

#endif
