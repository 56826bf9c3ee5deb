/*
 * metrics.h - the agent's self-metrics, rendered in Prometheus text format.
 *
 * A metric is a (name, label set) pair registered once and then updated
 * lock-free from any thread: modules keep the pointer metric_get() returns
 * and call metric_add()/metric_set() on their hot paths. Names follow
 * Prometheus conventions (pushprof_*_total for counters, a unit suffix such
 * as _seconds or _bytes) and pass `promtool check metrics`.
 *
 *   static struct metric *sent;
 *   sent = metric_get("pushprof_bytes_sent_total", "Bytes sent to the remote store.",
 *                     METRIC_COUNTER, NULL);
 *   metric_add(sent, n);
 *   metric_get("pushprof_write_requests_total", "...", METRIC_COUNTER, "status=\"OK\"");
 */
#ifndef PUSHPROF_METRICS_H
#define PUSHPROF_METRICS_H

#include <stddef.h>
#include <stdint.h>

/* A histogram has the default buckets of Prometheus client libraries
 * (5 ms .. 10 s, for durations in seconds) and is fed by metric_observe(). */
enum metric_kind { METRIC_COUNTER, METRIC_GAUGE, METRIC_HISTOGRAM };

struct metric;

/* Same (name, labels) -> same metric. labels: `key="value",...` or NULL.
 * Returns NULL only on allocation failure; the update calls accept NULL. */
struct metric *metric_get(const char *name, const char *help, enum metric_kind kind,
			  const char *labels);
/* Shorthand: look up and add in one call (for cold paths). */
void metric_inc(const char *name, const char *help, const char *labels, double v);

void metric_add(struct metric *m, double v);
/* One observation of a METRIC_HISTOGRAM (ignored for other kinds). */
void metric_observe(struct metric *m, double v);
void metric_set(struct metric *m, double v);
double metric_value(const struct metric *m);

/* Text exposition format 0.0.4. *out is malloc'd. */
int metrics_render(char **out, size_t *len);
/* Forget everything (tests). */
void metrics_reset(void);

#endif
