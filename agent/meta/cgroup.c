/*
 * cgroup.c - a process's container, pod and systemd unit from its cgroup
 * path alone (see cgroup.h). No I/O but the one read of /proc/PID/cgroup.
 */
#include "cgroup.h"

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileutil.h"

#define CGROUP_FILE_MAX (64 * 1024)

/* ---- small string helpers ------------------------------------------------- */

static void copyn(char *dst, size_t cap, const char *src, size_t n)
{
	if (n >= cap)
		n = cap - 1;
	memcpy(dst, src, n);
	dst[n] = '\0';
}

static bool has_prefix(const char *s, size_t n, const char *p)
{
	size_t pn = strlen(p);
	return n >= pn && memcmp(s, p, pn) == 0;
}

static bool has_suffix(const char *s, size_t n, const char *suf)
{
	size_t sn = strlen(suf);
	return n >= sn && memcmp(s + n - sn, suf, sn) == 0;
}

static bool eq(const char *s, size_t n, const char *lit)
{
	return strlen(lit) == n && memcmp(s, lit, n) == 0;
}

static bool all_hex(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!isxdigit((unsigned char)s[i]))
			return false;
	return n > 0;
}

/* Runtime ids after a "cri-containerd-" style prefix: be liberal but bounded. */
static bool id_ok(const char *s, size_t n)
{
	if (n == 0 || n > CONTAINER_ID_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!(isalnum((unsigned char)s[i]) || s[i] == '-' || s[i] == '_' || s[i] == '.'))
			return false;
	return true;
}

/*
 * A pod UID as kubelet writes it into cgroup names: 8-4-4-4-12 hex with '-'
 * (cgroupfs) or '_' (systemd, which reserves '-'), or 32 plain hex digits
 * (static pods use a config hash as UID).
 */
static bool parse_pod_uid(const char *s, size_t n, char out[POD_UID_MAX + 1])
{
	if (n == 32 && all_hex(s, n)) {
		copyn(out, POD_UID_MAX + 1, s, n);
		return true;
	}
	if (n != 36)
		return false;
	for (size_t i = 0; i < n; i++) {
		bool sep = i == 8 || i == 13 || i == 18 || i == 23;
		if (sep ? (s[i] != '-' && s[i] != '_') : !isxdigit((unsigned char)s[i]))
			return false;
	}
	for (size_t i = 0; i < n; i++)
		out[i] = s[i] == '_' ? '-' : (char)tolower((unsigned char)s[i]);
	out[n] = '\0';
	return true;
}

/* "kubepods-burstable-pod<uid>" / "pod<uid>": the uid after a "pod" word. */
static bool find_pod_uid(const char *b, size_t n, char out[POD_UID_MAX + 1])
{
	for (size_t p = 0; p + 3 <= n; p++) {
		if (memcmp(b + p, "pod", 3) != 0 || (p > 0 && b[p - 1] != '-'))
			continue;
		if (parse_pod_uid(b + p + 3, n - p - 3, out))
			return true;
	}
	return false;
}

static void set_qos_from(struct cgroup_info *ci, const char *b, size_t n, bool *in_kubepods)
{
	/* cgroupfs: /kubepods/burstable/...; systemd: kubepods-burstable.slice */
	if (eq(b, n, "kubepods") || has_suffix(b, n, "-kubepods")) {
		*in_kubepods = true;
		return;
	}
	/* a pod slice name alone also tells: kubepods-burstable-pod<uid> */
	if (memmem(b, n, "kubepods-pod", 12))
		*in_kubepods = true;
	if (memmem(b, n, "kubepods-burstable-pod", 22))
		strcpy(ci->qos, "burstable");
	else if (memmem(b, n, "kubepods-besteffort-pod", 23))
		strcpy(ci->qos, "besteffort");
	else if (has_suffix(b, n, "kubepods-burstable") || (*in_kubepods && eq(b, n, "burstable")))
		strcpy(ci->qos, "burstable");
	else if (has_suffix(b, n, "kubepods-besteffort") ||
		 (*in_kubepods && eq(b, n, "besteffort")))
		strcpy(ci->qos, "besteffort");
}

static const struct {
	const char *prefix, *runtime;
} scope_prefixes[] = {
	{ "cri-containerd-", "containerd" },
	{ "crio-conmon-", NULL }, /* CRI-O's monitor process, not the container */
	{ "crio-", "cri-o" },
	{ "docker-", "docker" },
	{ "libpod-conmon-", NULL },
	{ "libpod-", "podman" },
};

/* "<prefix><id>" -> 1 container, 0 not a container name, -1 a monitor scope. */
static int container_from_name(struct cgroup_info *ci, const char *b, size_t n)
{
	for (size_t i = 0; i < sizeof(scope_prefixes) / sizeof(scope_prefixes[0]); i++) {
		if (!has_prefix(b, n, scope_prefixes[i].prefix))
			continue;
		if (!scope_prefixes[i].runtime)
			return -1;
		size_t pl = strlen(scope_prefixes[i].prefix);
		if (!id_ok(b + pl, n - pl))
			return 0;
		copyn(ci->container_id, sizeof(ci->container_id), b + pl, n - pl);
		strcpy(ci->runtime, scope_prefixes[i].runtime);
		return 1;
	}
	return 0;
}

int cgroup_info_from_path(const char *path, struct cgroup_info *ci)
{
	const char *p = path;
	bool in_kubepods = false, prev_docker = false;
	char unit[SYSTEMD_UNIT_MAX + 1] = "";

	memset(ci, 0, sizeof(*ci));
	copyn(ci->path, sizeof(ci->path), path, strnlen(path, sizeof(ci->path) - 1));
	while (*p) {
		while (*p == '/')
			p++;
		const char *c = p;
		while (*p && *p != '/')
			p++;
		size_t n = (size_t)(p - c);
		if (!n)
			break;

		/* Colon form "kubepods-burstable-pod<uid>.slice:cri-containerd:<id>". */
		const char *c1 = memchr(c, ':', n);
		if (c1) {
			const char *c2 = memchr(c1 + 1, ':', (size_t)(c + n - c1 - 1));
			size_t sn = (size_t)(c1 - c);
			if (has_suffix(c, sn, ".slice"))
				sn -= 6;
			set_qos_from(ci, c, sn, &in_kubepods);
			find_pod_uid(c, sn, ci->pod_uid);
			if (c2) {
				size_t pn = (size_t)(c2 - c1 - 1), idn = (size_t)(c + n - c2 - 1);
				const char *rt = NULL;
				if (eq(c1 + 1, pn, "cri-containerd"))
					rt = "containerd";
				else if (eq(c1 + 1, pn, "crio"))
					rt = "cri-o";
				else if (eq(c1 + 1, pn, "docker"))
					rt = "docker";
				if (rt && id_ok(c2 + 1, idn)) {
					copyn(ci->container_id, sizeof(ci->container_id), c2 + 1,
					      idn);
					strcpy(ci->runtime, rt);
				}
			}
			prev_docker = false;
			continue;
		}

		size_t bn = n;
		bool scope = false, service = false;
		if (has_suffix(c, n, ".slice")) {
			bn -= 6;
		} else if (has_suffix(c, n, ".scope")) {
			bn -= 6;
			scope = true;
		} else if (has_suffix(c, n, ".service")) {
			service = true;
		}

		set_qos_from(ci, c, bn, &in_kubepods);
		if (!service && !scope && find_pod_uid(c, bn, ci->pod_uid)) {
			prev_docker = false;
			continue;
		}
		int cont = service ? 0 : container_from_name(ci, c, bn);
		if (cont == 0 && !scope && !service && n == 64 && all_hex(c, n)) {
			/* cgroupfs: bare id; only a docker parent tells the runtime */
			copyn(ci->container_id, sizeof(ci->container_id), c, n);
			strcpy(ci->runtime, prev_docker ? "docker" : "");
			cont = 1;
		}
		if (cont == 0 && (service || scope) && n <= SYSTEMD_UNIT_MAX)
			copyn(unit, sizeof(unit), c, n);
		prev_docker = eq(c, n, "docker");
	}
	if (ci->pod_uid[0] && !ci->qos[0] && in_kubepods)
		strcpy(ci->qos, "guaranteed");
	if (!ci->container_id[0])
		strcpy(ci->systemd_unit, unit);
	return 0;
}

int cgroup_info_from_text(const char *text, size_t len, struct cgroup_info *ci)
{
	struct cgroup_info line, unit_src;
	bool have_any = false, have_ctr = false, have_unit = false;
	const char *p = text, *end = text + len;
	char path[4096];

	memset(ci, 0, sizeof(*ci));
	memset(&unit_src, 0, sizeof(unit_src));
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *le = nl ? nl : end;
		const char *c1 = memchr(p, ':', (size_t)(le - p));
		const char *c2 = c1 ? memchr(c1 + 1, ':', (size_t)(le - c1 - 1)) : NULL;
		if (c2 && le - c2 - 1 > 0 && c2[1] == '/') {
			bool v2 = c1 - p == 1 && p[0] == '0' && c2 == c1 + 1;
			bool sysd = eq(c1 + 1, (size_t)(c2 - c1 - 1), "name=systemd");
			copyn(path, sizeof(path), c2 + 1, (size_t)(le - c2 - 1));
			cgroup_info_from_path(path, &line);
			if (!have_any) {
				*ci = line;
				have_any = true;
			}
			if (!have_ctr && (line.container_id[0] || line.pod_uid[0])) {
				*ci = line;
				have_ctr = true;
			}
			if ((v2 || sysd) && !have_unit) {
				unit_src = line;
				have_unit = true;
				if (!have_ctr)
					*ci = line;
			}
		}
		p = le + 1;
	}
	if (!have_any)
		return -EINVAL;
	if (!ci->container_id[0] && !ci->systemd_unit[0] && unit_src.systemd_unit[0])
		strcpy(ci->systemd_unit, unit_src.systemd_unit);
	return 0;
}

int cgroup_info_for_pid(pid_t pid, struct cgroup_info *ci)
{
	char fn[64], *buf;
	size_t n;
	int rc;

	snprintf(fn, sizeof(fn), "/proc/%d/cgroup", (int)pid);
	rc = pp_read_kernel_file_alloc(fn, CGROUP_FILE_MAX, &buf, &n);
	if (rc)
		return rc == -ESRCH ? -ENOENT : rc;
	/* a zombie's cgroup file reads empty */
	rc = n == 0 ? -ENOENT : cgroup_info_from_text(buf, n, ci);
	free(buf);
	return rc;
}

int cgroup_info_meta_labels(const struct cgroup_info *ci, struct pp_labels *out)
{
	int rc = 0;

	if (ci->path[0])
		rc |= pp_labels_set(out, "__meta_process_cgroup", ci->path);
	if (ci->pod_uid[0])
		rc |= pp_labels_set(out, "__meta_kubernetes_pod_uid", ci->pod_uid);
	if (ci->qos[0])
		rc |= pp_labels_set(out, "__meta_kubernetes_pod_qos_class", ci->qos);
	if (ci->container_id[0]) {
		char v[CONTAINER_ID_MAX + 32];
		if (ci->runtime[0])
			snprintf(v, sizeof(v), "%s://%s", ci->runtime, ci->container_id);
		else
			snprintf(v, sizeof(v), "%s", ci->container_id);
		rc |= pp_labels_set(out, "__meta_container_id", ci->container_id);
		if (ci->pod_uid[0])
			rc |= pp_labels_set(out, "__meta_kubernetes_pod_container_id", v);
		if (ci->runtime[0])
			rc |= pp_labels_set(out, "__meta_container_runtime", ci->runtime);
	}
	if (ci->systemd_unit[0])
		rc |= pp_labels_set(out, "__meta_systemd_unit", ci->systemd_unit);
	return rc ? -ENOMEM : 0;
}
