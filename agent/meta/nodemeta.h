/*
 * nodemeta.h - the node's own Kubernetes labels, for
 * __meta_kubernetes_node_label_<name> and __meta_kubernetes_node_name.
 *
 * Node labels live only in the API server (the container runtime does not
 * know them). Sources, by metadata.node_labels:
 *  - "auto" (default): the in-cluster API server when the agent runs in a
 *    pod: GET https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT
 *    /api/v1/nodes/<node> with the pod's service-account token and CA
 *    (/var/run/secrets/kubernetes.io/serviceaccount/, or
 *    $PUSHPROF_SERVICEACCOUNT_DIR). Needs RBAC `get` on `nodes`. Outside a
 *    pod (no KUBERNETES_SERVICE_HOST): nothing, silently; in a pod without
 *    a token mounted: nothing, said once at start.
 *  - an absolute file path: `kubectl get node NAME -o json` output (a Node
 *    object) or `name=value` lines; re-read when it changes.
 *  - "none": off.
 *
 * Off the hot path: one thread fetches at start (node_meta_new waits up to
 * 3 s for that first answer, so the first profiles carry the labels), then
 * refreshes every 5 minutes (API; 30 s after a failure) or reads the file
 * again when its mtime or size changed (checked every 10 s). Each fetch is bounded (10 s,
 * NODE_BODY_MAX bytes). Readers only copy the last good set under a mutex;
 * a failed refresh keeps it and is logged once per change of error.
 */
#ifndef PUSHPROF_NODEMETA_H
#define PUSHPROF_NODEMETA_H

#include <stddef.h>

#include "err.h"
#include "labels.h"

#define NODE_BODY_MAX (4u << 20) /* a Node object with many images is ~100s of KiB */
#define NODE_LABELS_MAX 512
#define NODE_LABEL_VALUE_MAX 1024

struct node_meta;

struct node_meta_opts {
	const char *source; /* "auto", "none", or an absolute file path (see
					 * above); NULL or "" -> "auto" */
	const char *node;   /* the node's name (config `node`, default
					 * $NODE_NAME); NULL -> "" */
};

/*
 * o NULL: every default. 0 with *out set (the caller frees it with
 * node_meta_free()); or a negative errno-style code with err filled and
 * *out NULL, only on a bad source (-EINVAL), -ENOMEM, a libcurl that will
 * not initialise (-EIO) or a thread that will not start (-EAGAIN): an
 * unreachable source is not an error here. With a source active it starts
 * the refresher thread and waits up to 3 s for its first read.
 */
int node_meta_new(const struct node_meta_opts *o, struct node_meta **out, struct pp_err *err);
/* Stops the thread (a fetch in flight is cut short). NULL-safe. */
void node_meta_free(struct node_meta *m);

/* Add __meta_kubernetes_node_name (when a source is active) and
 * __meta_kubernetes_node_label_<sanitised name> for every label known now.
 * Thread-safe. 0 or -ENOMEM. */
int node_meta_labels(struct node_meta *m, struct pp_labels *out);

/*
 * The labels of a node from text: a JSON Node object (its metadata.labels,
 * every other member skipped) when the first non-blank byte is '{', else
 * `name=value` lines (# comments, blank lines; the value runs to the end
 * of the line). Bounded: at most NODE_LABELS_MAX labels, values up to
 * NODE_LABEL_VALUE_MAX bytes (longer ones are skipped), nesting up to 64.
 * 0, or -EINVAL / -ENOMEM with err saying where the text went wrong.
 */
int node_labels_parse(const char *text, size_t len, struct pp_labels *out, struct pp_err *err);

#endif
