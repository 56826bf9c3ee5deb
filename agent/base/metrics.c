#include "metrics.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include "procinfo.h"

/* client_golang's DefBuckets */
static const double buckets[] = { 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10 };
#define NBUCKETS (sizeof(buckets) / sizeof(buckets[0]))

struct metric {
	char *name, *help, *labels;
	enum metric_kind kind;
	_Atomic uint64_t bits; /* a double's bits: the value, a histogram's sum */
	/* histograms: observations <= buckets[i] (not cumulative), and all */
	_Atomic uint64_t le[NBUCKETS], count;
	struct metric *next;
};

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct metric *head;

static double from_bits(uint64_t b)
{
	double d;
	memcpy(&d, &b, sizeof(d));
	return d;
}

static uint64_t to_bits(double d)
{
	uint64_t b;
	memcpy(&b, &d, sizeof(b));
	return b;
}

struct metric *metric_get(const char *name, const char *help, enum metric_kind kind,
			  const char *labels)
{
	struct metric *m;

	if (!labels)
		labels = "";
	pthread_mutex_lock(&reg_lock);
	for (m = head; m; m = m->next)
		if (!strcmp(m->name, name) && !strcmp(m->labels, labels))
			goto out;
	m = calloc(1, sizeof(*m));
	if (m) {
		m->name = strdup(name);
		m->help = strdup(help ? help : "");
		m->labels = strdup(labels);
		m->kind = kind;
		if (!m->name || !m->help || !m->labels) {
			free(m->name);
			free(m->help);
			free(m->labels);
			free(m);
			m = NULL;
			goto out;
		}
		atomic_store(&m->bits, to_bits(0));
		/* keep families together: insert after the last of the same name */
		struct metric **pp = &head, *last = NULL;
		for (struct metric *x = head; x; x = x->next)
			if (!strcmp(x->name, name))
				last = x;
		if (last)
			pp = &last->next;
		else
			while (*pp)
				pp = &(*pp)->next;
		m->next = *pp;
		*pp = m;
	}
out:
	pthread_mutex_unlock(&reg_lock);
	return m;
}

void metric_add(struct metric *m, double v)
{
	if (!m)
		return;
	uint64_t old = atomic_load(&m->bits);
	while (!atomic_compare_exchange_weak(&m->bits, &old, to_bits(from_bits(old) + v)))
		;
}

void metric_observe(struct metric *m, double v)
{
	if (!m || m->kind != METRIC_HISTOGRAM)
		return;
	for (size_t i = 0; i < NBUCKETS; i++)
		if (v <= buckets[i]) {
			atomic_fetch_add(&m->le[i], 1);
			break;
		}
	atomic_fetch_add(&m->count, 1);
	metric_add(m, v);
}

void metric_set(struct metric *m, double v)
{
	if (m)
		atomic_store(&m->bits, to_bits(v));
}

double metric_value(const struct metric *m)
{
	return m ? from_bits(atomic_load(&((struct metric *)m)->bits)) : 0;
}

void metric_inc(const char *name, const char *help, const char *labels, double v)
{
	metric_add(metric_get(name, help, METRIC_COUNTER, labels), v);
}

/* v in as few digits as read back to the same double (a start time in
 * seconds since the epoch needs 13 or more: %.9g rounded it by seconds). */
static const char *fmt_value(double v, char *buf, size_t n)
{
	if (isnan(v) || isinf(v))
		return isnan(v) ? "NaN" : v > 0 ? "+Inf" : "-Inf"; /* the format's spelling */
	if (v == floor(v) && fabs(v) < 1e15) {
		snprintf(buf, n, "%.0f", v);
		return buf;
	}
	for (int prec = 15; prec <= 17; prec++) {
		snprintf(buf, n, "%.*g", prec, v);
		if (strtod(buf, NULL) == v)
			break;
	}
	return buf;
}

/* Boot time in seconds since the epoch (btime of /proc/stat), 0 unknown. */
static double boot_time(void)
{
	static double bt;
	char line[256];

	if (bt)
		return bt;
	FILE *f = fopen("/proc/stat", "re");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "btime ", 6)) {
			bt = strtod(line + 6, NULL);
			break;
		}
	fclose(f);
	return bt;
}

/*
 * The standard process_* metrics of Prometheus client libraries (the names
 * and meanings of client_golang's process collector), read at each scrape
 * from /proc/self: dashboards and alerts written for any exporter work.
 */
static void process_collect(void)
{
	struct proc_stat st;
	double tck = (double)sysconf(_SC_CLK_TCK), page = (double)sysconf(_SC_PAGESIZE);
	struct rlimit rl;

	if (proc_stat(getpid(), &st) == 0 && tck > 0) {
		metric_set(metric_get("process_cpu_seconds_total",
				      "Total user and system CPU time spent in seconds.",
				      METRIC_COUNTER, NULL),
			   (double)(st.utime + st.stime) / tck);
		metric_set(metric_get("process_resident_memory_bytes",
				      "Resident memory size in bytes.", METRIC_GAUGE, NULL),
			   (double)st.rss_pages * page);
		metric_set(metric_get("process_virtual_memory_bytes",
				      "Virtual memory size in bytes.", METRIC_GAUGE, NULL),
			   (double)st.vsize);
		if (boot_time() > 0)
			metric_set(
				metric_get("process_start_time_seconds",
					   "Start time of the process since unix epoch in seconds.",
					   METRIC_GAUGE, NULL),
				boot_time() + (double)st.start_time / tck);
	}
	DIR *d = opendir("/proc/self/fd");
	if (d) {
		double n = 0;
		struct dirent *e;
		while ((e = readdir(d)))
			if (e->d_name[0] != '.')
				n++;
		closedir(d);
		metric_set(metric_get("process_open_fds", "Number of open file descriptors.",
				      METRIC_GAUGE, NULL),
			   n - 1); /* not opendir's own */
	}
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
		metric_set(metric_get("process_max_fds", "Maximum number of open file descriptors.",
				      METRIC_GAUGE, NULL),
			   (double)rl.rlim_cur);
}

int metrics_render(char **out, size_t *len)
{
	process_collect();

	FILE *f = open_memstream(out, len);
	const char *family = NULL;
	char num[40];

	if (!f)
		return -ENOMEM;
	pthread_mutex_lock(&reg_lock);
	for (struct metric *m = head; m; m = m->next) {
		if (!family || strcmp(family, m->name)) {
			fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", m->name, m->help, m->name,
				m->kind == METRIC_COUNTER     ? "counter"
				: m->kind == METRIC_HISTOGRAM ? "histogram"
							      : "gauge");
			family = m->name;
		}
		double v = metric_value(m);
		if (m->kind == METRIC_HISTOGRAM) {
			/* the count first: a concurrent observation then shows in
			 * _sum and the buckets at most, never count < +Inf bucket */
			uint64_t n = atomic_load(&m->count), cum = 0;
			const char *sep = m->labels[0] ? "," : "";
			for (size_t i = 0; i < NBUCKETS; i++) {
				cum += atomic_load(&m->le[i]);
				fprintf(f, "%s_bucket{%s%sle=\"%s\"} %llu\n", m->name, m->labels,
					sep, fmt_value(buckets[i], num, sizeof(num)),
					(unsigned long long)(cum < n ? cum : n));
			}
			fprintf(f, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", m->name, m->labels, sep,
				(unsigned long long)n);
			if (m->labels[0])
				fprintf(f, "%s_sum{%s} %s\n%s_count{%s} %llu\n", m->name, m->labels,
					fmt_value(v, num, sizeof(num)), m->name, m->labels,
					(unsigned long long)n);
			else
				fprintf(f, "%s_sum %s\n%s_count %llu\n", m->name,
					fmt_value(v, num, sizeof(num)), m->name,
					(unsigned long long)n);
			continue;
		}
		if (m->labels[0])
			fprintf(f, "%s{%s} ", m->name, m->labels);
		else
			fprintf(f, "%s ", m->name);
		fprintf(f, "%s\n", fmt_value(v, num, sizeof(num)));
	}
	pthread_mutex_unlock(&reg_lock);
	return fclose(f) ? -errno : 0;
}

void metrics_reset(void)
{
	pthread_mutex_lock(&reg_lock);
	while (head) {
		struct metric *n = head->next;
		free(head->name);
		free(head->help);
		free(head->labels);
		free(head);
		head = n;
	}
	pthread_mutex_unlock(&reg_lock);
}
