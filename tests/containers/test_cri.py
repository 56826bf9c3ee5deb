"""CRI metadata against a real containerd (Debian's `containerd` package).

The test starts its own containerd (root, state, socket and runc dirs in a
temp dir), imports two images it builds from a static Go binary (an OCI
layout imported with `ctr -n k8s.io images import`, no registry: one is the
pause image), then through the CRI API creates a pod sandbox and containers
the way kubelet does (cgroupfs driver, cgroup_parent /kubepods/burstable/
pod<uid>). agent/meta/containers.c (driven through tests/containers/cri_probe)
must then name namespace, pod, container, pod labels for the real container
processes, cache the lists, notice a container started later, survive a
missing runtime, and agent/meta/relabel.c must keep/drop on those names.

Exits 77 (meson: skipped) when containerd, ctr or runc is not installed.
"""
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid

import pptest
from pptest import check, done

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import cri  # noqa: E402
import oci_image  # noqa: E402

PROBE = os.environ["CRI_PROBE"]

WORKLOAD = r'''
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func spin() {
	x := 0
	for {
		for i := 0; i < 1000000; i++ {
			x += i * i
		}
		if x == 42 {
			os.Exit(3)
		}
	}
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "spin" {
		go spin()
	}
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGTERM, syscall.SIGINT)
	<-c
}
'''

CONFIG = '''version = 2
root = "{d}/root"
state = "{d}/state"
[grpc]
  address = "{d}/containerd.sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "docker.io/library/pushprof-pause:1"
  # Lets containerd run where the process may not lower oom_score_adj (this
  # test machine refuses it; a sandbox's -998 would fail in runc otherwise).
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "{snap}"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        Root = "{d}/runc"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{d}/cni/bin"
    conf_dir = "{d}/cni/conf"
'''


class Probe:
    """cri_probe as a co-process speaking its line protocol."""

    def __init__(self, sock, relabel=None, ttl_ms=None):
        args = [PROBE, sock, relabel or "", str(ttl_ms or 0)]
        self.p = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  text=True)

    def _ask(self, line, until):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()
        out = []
        while True:
            ln = self.p.stdout.readline()
            if not ln:
                raise RuntimeError("cri_probe exited")
            ln = ln.rstrip("\n")
            out.append(ln)
            if until(ln):
                return out

    def labels_path(self, path):
        return self.labels(None, path)

    def labels(self, pid, path=None):
        q = f"pid {pid}" if path is None else f"path {path}"
        out = self._ask(q, lambda ln: ln == "end")
        meta, relabeled, verdict = {}, {}, None
        cur = meta
        for ln in out[1:-1]:
            if ln.startswith("relabel "):
                verdict = ln.split()[1]
                cur = relabeled
                continue
            k, _, v = ln.partition("=")
            cur[k] = v
        return out[0], meta, verdict, relabeled

    def stats(self):
        out = self._ask("stats", lambda ln: ln.startswith("stats "))
        st = {}
        for kv in out[-1].split()[1:]:
            k, _, v = kv.partition("=")
            st[k] = v
        return st

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=20)
        return self.p.returncode


def wait_socket(path, proc, timeout=20):
    end = time.time() + timeout
    while time.time() < end:
        if proc.poll() is not None:
            return False
        if os.path.exists(path):
            s = socket.socket(socket.AF_UNIX)
            try:
                s.connect(path)
                return True
            except OSError:
                pass
            finally:
                s.close()
        time.sleep(0.1)
    return False


def overlay_works(d):
    """overlayfs needs a filesystem that supports it as upper dir."""
    lo, up, wk, mn = (os.path.join(d, "ovl", x) for x in ("l", "u", "w", "m"))
    for x in (lo, up, wk, mn):
        os.makedirs(x)
    r = subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                        f"lowerdir={lo},upperdir={up},workdir={wk}", mn],
                       capture_output=True)
    if r.returncode == 0:
        subprocess.run(["umount", mn])
    shutil.rmtree(os.path.join(d, "ovl"), ignore_errors=True)
    return r.returncode == 0


def agent_end_to_end(d, sock, pid, ns, pod, cid):
    """The agent's pushed profile of the container carries namespace, pod and
    container labels. Needs the agent loop wired to containers + relabel and
    the config key metadata.cri_socket; until then this part is reported as
    skipped (not passed)."""
    probe_cfg = f"metadata: {{cri_socket: {sock}}}\n"
    dest = "remote_store: {address: '127.0.0.1:1', insecure: true}\n"  # a config needs one
    p = pptest.run([pptest.PUSHPROF, "check-config", "-"], input=dest + probe_cfg)
    dump = pptest.run([pptest.PUSHPROF, "check-config", "-"],
                      input=dest + "relabel_configs: []\n")
    if p.returncode != 0 or "not applied" in dump.stdout:
        print("NOTE: end-to-end agent check SKIPPED: the agent does not take "
              "metadata.cri_socket / apply relabel_configs yet (wiring pending)")
        return
    sys.path.insert(0, os.path.join(pptest.SOURCE_DIR, "tests", "lib"))
    from receiver import Receiver
    for keep_ns, want in ((ns, True), ("other", False)):
        rcv = Receiver(os.path.join(d, f"rcv-{keep_ns}")).start()
        try:
            cfg = os.path.join(d, f"agent-{keep_ns}.yaml")
            with open(cfg, "w") as f:
                f.write(f"node: cri-node\nhttp_address: ''\nlocal_store: {{directory: ''}}\n"
                        f"spool: {{directory: ''}}\n"
                        f"remote_store: {{address: '{rcv.address}', insecure: true}}\n"
                        "cpu: {frequency_hz: 97, interval: 1s}\ngo_heap: {enabled: false}\n"
                        f"targets: [{{pids: [{pid}]}}]\n{probe_cfg}"
                        "relabel_configs:\n"
                        f"  - {{source_labels: [__meta_kubernetes_namespace], regex: {keep_ns}, action: keep}}\n"
                        "  - {source_labels: [__meta_kubernetes_namespace], target_label: namespace}\n"
                        "  - {source_labels: [__meta_kubernetes_pod_name], target_label: pod}\n"
                        "  - {source_labels: [__meta_kubernetes_pod_container_name], target_label: container}\n"
                        "  - {source_labels: [__meta_kubernetes_pod_container_id], target_label: container_id}\n")
            agent = pptest.Agent(cfg, args=["--duration", "4s"])
            rc, _ = agent.wait(60)
            series = [s["labels"] for s in rcv.series()]
        finally:
            rcv.stop()
        mine = [l for l in series if l.get("pod") == pod]
        if want:
            check(rc == 0 and mine and all(
                l.get("namespace") == ns and l.get("container") == "spinner"
                and l.get("container_id") == "containerd://" + cid for l in mine),
                "agent pushes the container's profile with namespace, pod, container labels",
                f"rc={rc} {series[:3]} {agent.log()[-500:]}")
            check(mine and not any(k.startswith("__meta_") for l in mine for k in l),
                  "no __meta_* label reaches the server", str(mine[:1]))
        else:
            check(rc == 0 and not mine,
                  "keep on another namespace: the container's profile is not sent",
                  f"{len(mine)} series")


def main():
    for prog in ("containerd", "ctr", "runc", "containerd-shim-runc-v2"):
        if not pptest.have(prog):
            print(f"SKIP: {prog} not installed (apt-get install containerd runc)")
            sys.exit(77)

    d = pptest.tmpdir("pushprof-cri-")
    run_containerd_existed = os.path.exists("/run/containerd")
    sock = os.path.join(d, "containerd.sock")
    snap = "overlayfs" if overlay_works(d) else "native"
    with open(os.path.join(d, "config.toml"), "w") as f:
        f.write(CONFIG.format(d=d, snap=snap))
    log = open(os.path.join(d, "containerd.log"), "w")
    ctrd = subprocess.Popen(["containerd", "--config", os.path.join(d, "config.toml")],
                            stdout=log, stderr=subprocess.STDOUT)
    client = None
    pods = []
    try:
        if not check(wait_socket(sock, ctrd), "containerd started with its own socket",
                     open(os.path.join(d, "containerd.log")).read()[-2000:]):
            return
        # Images: one static binary, two tags (the pause image and the workload).
        src = os.path.join(d, "app.go")
        with open(src, "w") as f:
            f.write(WORKLOAD)
        binary = os.path.join(d, "app")
        env = pptest.go_env()
        env["CGO_ENABLED"] = "0"
        pptest.run(["go", "build", "-o", binary, src], timeout=300, env=env, check_rc=0)
        for tag, args in (("pushprof-pause:1", []), ("pushprof-test:1", ["spin"])):
            tar = os.path.join(d, tag.split(":")[0] + ".tar")
            oci_image.build(binary, tar, "docker.io/library/" + tag, args)
            pptest.run(["ctr", "-a", sock, "-n", "k8s.io", "images", "import",
                        "--snapshotter", snap, tar], timeout=120, check_rc=0)

        pb = cri.load_pb(pptest.SOURCE_DIR, os.path.join(d, "py"))
        client = cri.CRI(pb, sock)
        v = client.version()
        check(v.runtime_name == "containerd" and v.runtime_api_version == "v1",
              "CRI runtime.v1 Version answers", str(v))

        uid = str(uuid.uuid4())
        ns, pod = "shop", "web-" + uid[:5]
        sid, scfg = client.run_pod(
            pod, ns, uid,
            labels={"app": "web", "app.kubernetes.io/name": "shop-web",
                    "io.kubernetes.pod.name": pod, "io.kubernetes.pod.namespace": ns,
                    "io.kubernetes.pod.uid": uid},
            annotations={"team": "payments"},
            cgroup_parent="/kubepods/burstable/pod" + uid)
        pods.append(sid)
        kube_labels = {"io.kubernetes.container.name": "spinner",
                       "io.kubernetes.pod.name": pod, "io.kubernetes.pod.namespace": ns,
                       "io.kubernetes.pod.uid": uid}
        cid = client.create_start(sid, scfg, "spinner", "docker.io/library/pushprof-test:1",
                                  ["spin"], kube_labels)
        pid = client.container_pid(cid)
        with open(f"/proc/{pid}/cgroup") as f:
            cg = f.read()
        check(f"/kubepods/burstable/pod{uid}/{cid}" in cg,
              "container process runs in the kubelet-shaped cgroup", cg)

        relabel = os.path.join(d, "relabel.yaml")
        with open(relabel, "w") as f:
            f.write("- {source_labels: [__meta_kubernetes_namespace], regex: shop, action: keep}\n"
                    "- {source_labels: [__meta_kubernetes_namespace], target_label: namespace}\n"
                    "- {source_labels: [__meta_kubernetes_pod_name], target_label: pod}\n"
                    "- {source_labels: [__meta_kubernetes_pod_container_name], target_label: container}\n"
                    "- {regex: '__meta_kubernetes_pod_label_(.+)', action: labelmap}\n"
                    "- {regex: app_kubernetes_io_name, action: labeldrop}\n")
        pr = Probe(sock, relabel, ttl_ms=60000)
        head, meta, verdict, out = pr.labels(pid)
        want = {
            "__meta_kubernetes_namespace": ns,
            "__meta_kubernetes_pod_name": pod,
            "__meta_kubernetes_pod_uid": uid,
            "__meta_kubernetes_pod_container_name": "spinner",
            "__meta_kubernetes_pod_container_image": "docker.io/library/pushprof-test:1",
            "__meta_kubernetes_pod_container_id": "containerd://" + cid,
            "__meta_container_id": cid,
            "__meta_kubernetes_pod_qos_class": "burstable",
            "__meta_kubernetes_pod_label_app": "web",
            "__meta_kubernetes_pod_label_app_kubernetes_io_name": "shop-web",
            "__meta_kubernetes_pod_annotation_team": "payments",
        }
        for k, v in want.items():
            check(meta.get(k) == v, f"{k} = {v}", f"got {meta.get(k)!r} ({head})")
        check(not any(k.startswith("__meta_kubernetes_pod_label_io_kubernetes") for k in meta),
              "kubelet's io.kubernetes.* sandbox labels are not pod labels", str(meta))
        check(verdict == "keep" and out == {"namespace": ns, "pod": pod,
                                            "container": "spinner", "app": "web"},
              "relabel keeps namespace shop, copies names, drops one pod label", str(out))
        st = pr.stats()
        check(st["refreshes"] == "1" and st["containers"] == "1" and st["pods"] == "1"
              and st["connected"] == "1" and st["runtime"] == "containerd",
              "one refresh listed 1 pod and 1 container", str(st))

        # Cached: a second lookup makes no CRI call.
        pr.labels(pid)
        st = pr.stats()
        check(st["refreshes"] == "1" and st["hits"] == "2", "second lookup served from cache",
              str(st))

        # The sandbox's own (pause) process: pod names without a container name.
        pause_pid = None
        for p in os.listdir("/proc"):
            if p.isdigit() and int(p) != pid:
                try:
                    with open(f"/proc/{p}/cgroup") as f:
                        if f"/kubepods/burstable/pod{uid}/{sid}" in f.read():
                            pause_pid = int(p)
                            break
                except OSError:
                    pass
        if check(pause_pid is not None, "found the sandbox (pause) process"):
            _, pm, _, _ = pr.labels(pause_pid)
            check(pm.get("__meta_kubernetes_pod_name") == pod
                  and "__meta_kubernetes_pod_container_name" not in pm,
                  "pause process: pod named via its UID, no container name", str(pm))

        # A container started after the cache was filled is found. It is
        # created as kubelet does: the image by its id (kubelet resolves the
        # pod spec's name first); its name comes from ListImages.
        time.sleep(1.1)
        img_id = client.image_id("docker.io/library/pushprof-test:1")
        cid2 = client.create_start(sid, scfg, "sidecar", img_id,
                                   [], dict(kube_labels, **{"io.kubernetes.container.name":
                                                            "sidecar"}))
        pid2 = client.container_pid(cid2)
        _, m2, _, _ = pr.labels(pid2)
        check(m2.get("__meta_kubernetes_pod_container_name") == "sidecar"
              and m2.get("__meta_kubernetes_namespace") == ns,
              "container started later is named", str(m2))
        check(img_id.startswith("sha256:") and
              m2.get("__meta_kubernetes_pod_container_image") == "docker.io/library/pushprof-test:1",
              "a container created by image id (as kubelet does) has its image's name",
              f"{img_id}: {m2.get('__meta_kubernetes_pod_container_image')!r}")
        st = pr.stats()
        check(st["containers"] == "2" and st["errors"] == "0", "cache now holds 2 containers",
              str(st))

        # kubelet 1.28+ also sends the pod spec's name as written; a runtime
        # that keeps it (containerd 1.7.x+) lists it, an older one drops it
        # and the image's repo tag stands in
        time.sleep(1.1)
        cid3 = client.create_start(sid, scfg, "third", img_id, [],
                                   dict(kube_labels, **{"io.kubernetes.container.name": "third"}),
                                   user_image="pushprof-test:1")
        _, m3i, _, _ = pr.labels(client.container_pid(cid3))
        check(m3i.get("__meta_kubernetes_pod_container_image") in
              ("pushprof-test:1", "docker.io/library/pushprof-test:1"),
              "user_specified_image: the pod spec's name, else the repo tag",
              str(m3i.get("__meta_kubernetes_pod_container_image")))

        # A container the runtime does not know (say plain docker beside k8s): one
        # extra refresh for that id, then none until the TTL.
        ghost = "/docker/" + "ab" * 32
        before = int(pr.stats()["refreshes"])
        time.sleep(1.1)
        for _ in range(2):
            _, gm, _, _ = pr.labels_path(ghost)
            time.sleep(1.1)
        st = pr.stats()
        check(int(st["refreshes"]) == before + 1 and gm.get("__meta_container_runtime") == "docker"
              and "__meta_kubernetes_pod_name" not in gm,
              "unknown container id: one refresh, then negative-cached", f"{before} -> {st}")
        check(pr.close() == 0, "probe exits cleanly")

        # keep on another namespace drops the profile
        with open(relabel, "w") as f:
            f.write("- {source_labels: [__meta_kubernetes_namespace], regex: other, action: keep}\n")
        pr = Probe(sock, relabel)
        _, _, verdict, _ = pr.labels(pid)
        check(verdict == "drop", "keep rule on another namespace drops it")
        pr.close()

        agent_end_to_end(d, sock, pid, ns, pod, cid)

        # No runtime: cgroup-derived labels only, one counted error, no per-lookup error.
        pr = Probe(os.path.join(d, "missing.sock"))
        head, m3, _, _ = pr.labels(pid)
        head2, _, _, _ = pr.labels(pid)
        st = pr.stats()
        check(head.endswith("rc=0") and head2.endswith("rc=0")
              and m3.get("__meta_kubernetes_pod_uid") == uid
              and m3.get("__meta_container_id") == cid
              and "__meta_kubernetes_pod_name" not in m3,
              "absent runtime: cgroup labels, no names, no error per lookup", str(m3))
        check(st["errors"] == "1" and st["connected"] == "0",
              "absent runtime: one failed attempt per TTL, counted", str(st))
        pr.close()
    finally:
        for sid in pods:
            try:
                client.remove_pod(sid)
            except Exception as e:  # noqa: BLE001 - cleanup must go on
                print(f"cleanup: remove pod {sid}: {e}")
        ctrd.send_signal(signal.SIGTERM)
        try:
            ctrd.wait(timeout=20)
        except subprocess.TimeoutExpired:
            ctrd.kill()
            ctrd.wait()
        log.close()
        with open("/proc/mounts") as f:
            mounts = [ln.split()[1] for ln in f if d in ln.split()[1]]
        for m in sorted(mounts, key=len, reverse=True):
            subprocess.run(["umount", "-l", m])
        shutil.rmtree(d, ignore_errors=True)
        if not run_containerd_existed and not os.path.exists(
                "/run/containerd/containerd.sock"):
            shutil.rmtree("/run/containerd", ignore_errors=True)
    done()


if __name__ == "__main__":
    main()
