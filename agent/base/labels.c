#include "labels.h"
#include "grow.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int pp_labels_set(struct pp_labels *l, const char *name, const char *value)
{
	char *v = strdup(value ? value : "");

	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < l->n; i++) {
		if (strcmp(l->v[i].name, name) == 0) {
			free(l->v[i].value);
			l->v[i].value = v;
			return 0;
		}
	}
	if (pp_grow(&l->v, &l->cap, l->n + 1, sizeof(*l->v), 8)) {
		free(v);
		return -ENOMEM;
	}
	char *n = strdup(name);
	if (!n) {
		free(v);
		return -ENOMEM;
	}
	l->v[l->n].name = n;
	l->v[l->n].value = v;
	l->n++;
	return 0;
}

const char *pp_labels_get(const struct pp_labels *l, const char *name)
{
	for (size_t i = 0; i < l->n; i++)
		if (strcmp(l->v[i].name, name) == 0)
			return l->v[i].value;
	return NULL;
}

void pp_labels_del(struct pp_labels *l, const char *name)
{
	for (size_t i = 0; i < l->n; i++) {
		if (strcmp(l->v[i].name, name) == 0) {
			free(l->v[i].name);
			free(l->v[i].value);
			memmove(&l->v[i], &l->v[i + 1], (l->n - i - 1) * sizeof(l->v[0]));
			l->n--;
			return;
		}
	}
}

int pp_labels_copy(struct pp_labels *dst, const struct pp_labels *src)
{
	for (size_t i = 0; i < src->n; i++) {
		int rc = pp_labels_set(dst, src->v[i].name, src->v[i].value);
		if (rc)
			return rc;
	}
	return 0;
}

static int cmp_label(const void *a, const void *b)
{
	return strcmp(((const struct pp_label *)a)->name, ((const struct pp_label *)b)->name);
}

void pp_labels_sort(struct pp_labels *l)
{
	if (l->n > 1)
		qsort(l->v, l->n, sizeof(l->v[0]), cmp_label);
}

void pp_labels_free(struct pp_labels *l)
{
	for (size_t i = 0; i < l->n; i++) {
		free(l->v[i].name);
		free(l->v[i].value);
	}
	free(l->v);
	l->v = NULL;
	l->n = l->cap = 0;
}

bool pp_meta_label_known(const char *name)
{
	/* who sets them: agent.c (process, system), cpu_profile.c (executable
	 * facts), containers.c (cgroup path and the CRI), nodemeta.c (node) */
	static const char *const names[] = {
		"__meta_process_pid",
		"__meta_process_comm",
		"__meta_process_executable",
		"__meta_process_cgroup",
		"__meta_process_executable_name",
		"__meta_process_executable_build_id",
		"__meta_process_executable_compiler",
		"__meta_process_executable_static",
		"__meta_process_executable_stripped",
		"__meta_system_kernel_release",
		"__meta_system_kernel_machine",
		"__meta_systemd_unit",
		"__meta_container_id",
		"__meta_container_runtime",
		"__meta_kubernetes_namespace",
		"__meta_kubernetes_pod_name",
		"__meta_kubernetes_pod_uid",
		"__meta_kubernetes_pod_qos_class",
		"__meta_kubernetes_pod_container_id",
		"__meta_kubernetes_pod_container_name",
		"__meta_kubernetes_pod_container_image",
		"__meta_kubernetes_node_name",
	};
	static const char *const prefixes[] = {
		"__meta_kubernetes_pod_label_",
		"__meta_kubernetes_pod_annotation_",
		"__meta_kubernetes_node_label_",
	};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(name, names[i]))
			return true;
	for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
		if (!strncmp(name, prefixes[i], strlen(prefixes[i])) && name[strlen(prefixes[i])])
			return true;
	return false;
}

bool pp_label_name_valid(const char *name)
{
	if (!name || !*name)
		return false;
	for (const char *p = name; *p; p++) {
		char c = *p;
		bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
		if (!alpha && !(p != name && c >= '0' && c <= '9'))
			return false;
	}
	return true;
}

void meta_label_sanitize(char *s)
{
	for (; *s; s++) {
		char c = *s;
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_'))
			*s = '_';
	}
}
