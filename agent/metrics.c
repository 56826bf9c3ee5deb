#include "metrics.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct metric {
	char *name, *help, *labels;
	enum metric_kind kind;
	_Atomic uint64_t bits;	/* a double's bits */
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

int metrics_render(char **out, size_t *len)
{
	FILE *f = open_memstream(out, len);
	const char *family = NULL;

	if (!f)
		return -ENOMEM;
	pthread_mutex_lock(&reg_lock);
	for (struct metric *m = head; m; m = m->next) {
		if (!family || strcmp(family, m->name)) {
			fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", m->name, m->help, m->name,
				m->kind == METRIC_COUNTER ? "counter" : "gauge");
			family = m->name;
		}
		double v = metric_value(m);
		if (m->labels[0])
			fprintf(f, "%s{%s} ", m->name, m->labels);
		else
			fprintf(f, "%s ", m->name);
		if (v == floor(v) && fabs(v) < 1e15)
			fprintf(f, "%.0f\n", v);
		else
			fprintf(f, "%.9g\n", v);
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
