/*
 * /proc/PID/cgroup shapes from real nodes -> container id, runtime, pod UID,
 * QoS class, systemd unit. Each path shape is one that kubelet (systemd or
 * cgroupfs driver), containerd, CRI-O, docker, podman or systemd creates.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "containers.h"
#include "check.h"

#define ID "4f3e2d1c0b0a99887766554433221100ffeeddccbbaa00112233445566778899"
#define UIDD "0a1b2c3d-4e5f-6789-abcd-ef0123456789"
#define UIDU "0a1b2c3d_4e5f_6789_abcd_ef0123456789"

static const struct {
	const char *name, *text;
	const char *id, *runtime, *uid, *qos, *unit;
} cases[] = {
	{ "v2 systemd containerd burstable",
	  "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UIDU
	  ".slice/cri-containerd-" ID ".scope\n",
	  ID, "containerd", UIDD, "burstable", "" },
	{ "v2 systemd containerd guaranteed",
	  "0::/kubepods.slice/kubepods-pod" UIDU ".slice/cri-containerd-" ID ".scope\n",
	  ID, "containerd", UIDD, "guaranteed", "" },
	{ "v1 hybrid cri-o besteffort (every controller line)",
	  "12:pids:/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" UIDU
	  ".slice/crio-" ID ".scope\n"
	  "4:memory:/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" UIDU
	  ".slice/crio-" ID ".scope\n"
	  "1:name=systemd:/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" UIDU
	  ".slice/crio-" ID ".scope\n0::/\n",
	  ID, "cri-o", UIDD, "besteffort", "" },
	{ "cri-o conmon is not the container",
	  "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UIDU
	  ".slice/crio-conmon-" ID ".scope\n",
	  "", "", UIDD, "burstable", "" },
	{ "dockershim systemd",
	  "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UIDU
	  ".slice/docker-" ID ".scope\n",
	  ID, "docker", UIDD, "burstable", "" },
	{ "cgroupfs besteffort, bare id",
	  "11:cpu,cpuacct:/kubepods/besteffort/pod" UIDD "/" ID "\n",
	  ID, "", UIDD, "besteffort", "" },
	{ "cgroupfs guaranteed",
	  "0::/kubepods/pod" UIDD "/" ID "\n", ID, "", UIDD, "guaranteed", "" },
	{ "cgroupfs cri-o",
	  "0::/kubepods/burstable/pod" UIDD "/crio-" ID "\n", ID, "cri-o", UIDD, "burstable", "" },
	{ "static pod (config hash uid)",
	  "0::/kubepods/burstable/pod6f2a8b1c9d0e4f5a6b7c8d9e0f1a2b3c/" ID "\n",
	  ID, "", "6f2a8b1c9d0e4f5a6b7c8d9e0f1a2b3c", "burstable", "" },
	{ "colon form under containerd.service",
	  "0::/system.slice/containerd.service/kubepods-burstable-pod" UIDU
	  ".slice:cri-containerd:" ID "\n",
	  ID, "containerd", UIDD, "burstable", "" },
	{ "kind node (kubelet.slice nesting)",
	  "0::/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/"
	  "kubelet-kubepods-besteffort-pod" UIDU ".slice/cri-containerd-" ID ".scope\n",
	  ID, "containerd", UIDD, "besteffort", "" },
	{ "container inside a docker container (deepest wins)",
	  "0::/docker/1111111111111111111111111111111111111111111111111111111111111111/kubepods/"
	  "besteffort/pod" UIDD "/" ID "\n",
	  ID, "", UIDD, "besteffort", "" },
	{ "plain docker cgroupfs", "13:memory:/docker/" ID "\n", ID, "docker", "", "", "" },
	{ "docker with systemd driver", "0::/system.slice/docker-" ID ".scope\n",
	  ID, "docker", "", "", "" },
	{ "podman", "0::/machine.slice/libpod-" ID ".scope/container\n", ID, "podman", "", "", "" },
	{ "systemd service", "0::/system.slice/nginx.service\n", "", "", "", "", "nginx.service" },
	{ "v1 service on the name=systemd line only",
	  "4:memory:/system.slice\n1:name=systemd:/system.slice/postgresql@15-main.service\n",
	  "", "", "", "", "postgresql@15-main.service" },
	{ "user session scope",
	  "0::/user.slice/user-1000.slice/session-3.scope\n", "", "", "", "", "session-3.scope" },
	{ "user service in user manager",
	  "0::/user.slice/user-1000.slice/user@1000.service/app.slice/app-firefox-1234.scope\n",
	  "", "", "", "", "app-firefox-1234.scope" },
	{ "host root", "0::/\n", "", "", "", "", "" },
	{ "not hex, not 64: no id", "0::/docker/abc\n", "", "", "", "", "" },
	{ "bad pod uid shape", "0::/kubepods/besteffort/podxyz/" ID "\n", ID, "", "", "besteffort", "" },
	{ "no trailing newline", "0::/system.slice/cron.service", "", "", "", "", "cron.service" },
};

static void run_cases(void)
{
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct cgroup_info ci;
		int rc = cgroup_info_from_text(cases[i].text, strlen(cases[i].text), &ci);
		CHECK(rc == 0, "%s: rc=%d", cases[i].name, rc);
		CHECK(!strcmp(ci.container_id, cases[i].id), "%s: id '%s'", cases[i].name,
		      ci.container_id);
		CHECK(!strcmp(ci.runtime, cases[i].runtime), "%s: runtime '%s'", cases[i].name,
		      ci.runtime);
		CHECK(!strcmp(ci.pod_uid, cases[i].uid), "%s: uid '%s'", cases[i].name, ci.pod_uid);
		CHECK(!strcmp(ci.qos, cases[i].qos), "%s: qos '%s'", cases[i].name, ci.qos);
		CHECK(!strcmp(ci.systemd_unit, cases[i].unit), "%s: unit '%s'", cases[i].name,
		      ci.systemd_unit);
	}
}

static void run_bad(void)
{
	static const char *const bad[] = { "", "garbage", "1:cpu\n", "\n\n", "0::relative\n" };
	char big[20000];
	struct cgroup_info ci;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK(cgroup_info_from_text(bad[i], strlen(bad[i]), &ci) == -EINVAL,
		      "bad[%zu] accepted", i);
	/* A hostile, very long path is bounded, not overflowed. */
	memcpy(big, "0::/", 4);
	memset(big + 4, 'a', sizeof(big) - 5);
	big[sizeof(big) - 1] = '\0';
	CHECK(cgroup_info_from_text(big, strlen(big), &ci) == 0 && !ci.container_id[0] &&
		      strlen(ci.path) < sizeof(ci.path),
	      "long path");
}

static void run_labels(void)
{
	struct cgroup_info ci;
	struct pp_labels l = { 0 };
	const char *t = cases[0].text;

	cgroup_info_from_text(t, strlen(t), &ci);
	CHECK(cgroup_info_meta_labels(&ci, &l) == 0, "labels");
	CHECK(!strcmp(pp_labels_get(&l, "__meta_kubernetes_pod_container_id") ?: "",
		      "containerd://" ID), "container_id label");
	CHECK(!strcmp(pp_labels_get(&l, "__meta_kubernetes_pod_uid") ?: "", UIDD), "uid label");
	CHECK(!strcmp(pp_labels_get(&l, "__meta_kubernetes_pod_qos_class") ?: "", "burstable"),
	      "qos label");
	CHECK(!strcmp(pp_labels_get(&l, "__meta_container_runtime") ?: "", "containerd"),
	      "runtime label");
	CHECK(pp_labels_get(&l, "__meta_systemd_unit") == NULL, "no unit label");
	pp_labels_free(&l);

	struct pp_labels u = { 0 };
	cgroup_info_from_path("/system.slice/nginx.service", &ci);
	cgroup_info_meta_labels(&ci, &u);
	CHECK(!strcmp(pp_labels_get(&u, "__meta_systemd_unit") ?: "", "nginx.service"),
	      "unit label");
	CHECK(!strcmp(pp_labels_get(&u, "__meta_process_cgroup") ?: "",
		      "/system.slice/nginx.service"), "cgroup label");
	CHECK(pp_labels_get(&u, "__meta_kubernetes_pod_uid") == NULL, "no uid");
	pp_labels_free(&u);

	char n[] = "__meta_kubernetes_pod_label_app.kubernetes.io/name";
	meta_label_sanitize(n);
	CHECK(!strcmp(n, "__meta_kubernetes_pod_label_app_kubernetes_io_name"), "sanitize %s", n);
}

/* The agent's own process on this machine: parses, whatever the shape. */
static void run_self(void)
{
	struct cgroup_info ci;
	CHECK(cgroup_info_for_pid(getpid(), &ci) == 0 && ci.path[0] == '/', "self");
	CHECK(cgroup_info_for_pid(0x3fffffff, &ci) == -ENOENT, "gone pid");
}

int main(void)
{
	run_cases();
	run_bad();
	run_labels();
	run_self();
	printf("cgroup: %zu path shapes\n", sizeof(cases) / sizeof(cases[0]));
	return check_done();
}
