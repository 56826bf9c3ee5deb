/*
 * fuzz_cgroup.c - libFuzzer target for /proc/PID/cgroup parsing (hostile
 * input: a process controls its own cgroup names inside a delegated tree).
 * Every field must stay NUL-terminated within its buffer; the labels built
 * from any result must be valid. Built with -Dfuzz=true:
 *   ./scripts/fuzz.sh 60 fuzz_cgroup
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cgroup.h"
#include "tests/lib/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cgroup_info ci;
	struct pp_labels l = { 0 };

	if (cgroup_info_from_text((const char *)data, size, &ci) < 0)
		return 0;
	if (strnlen(ci.container_id, sizeof(ci.container_id)) == sizeof(ci.container_id) ||
	    strnlen(ci.pod_uid, sizeof(ci.pod_uid)) == sizeof(ci.pod_uid) ||
	    strnlen(ci.systemd_unit, sizeof(ci.systemd_unit)) == sizeof(ci.systemd_unit) ||
	    strnlen(ci.path, sizeof(ci.path)) == sizeof(ci.path))
		abort();
	if (ci.pod_uid[0] && strlen(ci.pod_uid) != 36 && strlen(ci.pod_uid) != 32)
		abort();
	if (cgroup_info_meta_labels(&ci, &l) < 0)
		abort();
	for (size_t i = 0; i < l.n; i++)
		if (!pp_label_name_valid(l.v[i].name))
			abort();
	pp_labels_free(&l);
	return 0;
}
