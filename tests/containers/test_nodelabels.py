"""Node labels (__meta_kubernetes_node_label_*, __meta_kubernetes_node_name)
through the agent, with Parca Agent's own kubernetes-config.yaml rules
(region and zone from topology.kubernetes.io/*) plus a labelmap:

1. metadata.node_labels: a file of name=value lines;
2. the same file rewritten as a Node object (`kubectl get node -o json`
   output) while the agent runs: the new labels are used from then on;
3. the in-cluster API server path (metadata.node_labels: auto). There is no
   Kubernetes here, so the stand-in is the closest available: a local HTTPS
   server (Python's http.server + ssl) with a certificate from a CA the test
   makes with openssl, serving a real-shaped Node object at
   /api/v1/nodes/<name> only to the service-account bearer token, found by
   the agent through KUBERNETES_SERVICE_HOST/PORT and a service-account
   directory (token, ca.crt) as a pod has them;
4. the same server refusing the token (403, as without RBAC on nodes): the
   agent says what it needs and keeps pushing, without node labels;
5. node_labels: none, and a pod without a token mounted: no node labels.
"""
import http.server
import json
import os
import re
import ssl
import subprocess
import sys
import threading
import time

import pptest
from pptest import check, done, run, tmpdir

sys.path.insert(0, os.path.join(pptest.SOURCE_DIR, "tests", "lib"))
sys.path.insert(0, os.path.join(pptest.SOURCE_DIR, "tests", "cpu"))
import cputest as ct  # noqa: E402
from receiver import Receiver  # noqa: E402

NODE = "worker-7.example"
TOKEN = "eyJhbGciOiJSUzI1NiJ9.test-token-" + os.urandom(8).hex()
d = tmpdir()

with open(os.path.join(pptest.SOURCE_DIR, "tests", "relabel", "parca",
                       "kubernetes-config.yaml")) as f:
    PARCA_RULES = f.read().split("relabel_configs:\n", 1)[1]
RULES = PARCA_RULES + ("- source_labels: [__meta_kubernetes_node_name]\n  target_label: node_name\n"
                       "- action: labelmap\n  regex: __meta_kubernetes_node_label_(.+)\n"
                       "  replacement: nl_${1}\n")

NODE_OBJ = {
    "kind": "Node", "apiVersion": "v1",
    "metadata": {
        "name": NODE, "uid": "8d3f0f2e-2b1c-4d8e-9a51-3f2b1c4d8e9a", "resourceVersion": "123456",
        "creationTimestamp": "2026-01-01T00:00:00Z",
        "labels": {
            "beta.kubernetes.io/arch": "amd64", "kubernetes.io/hostname": NODE,
            "kubernetes.io/os": "linux", "node.kubernetes.io/instance-type": "m5.large",
            "topology.kubernetes.io/region": "eu-west-1",
            "topology.kubernetes.io/zone": "eu-west-1b",
            "team": "caf\u00e9 \"q\" \\ /",
        },
        "annotations": {"node.alpha.kubernetes.io/ttl": "0",
                        "volumes.kubernetes.io/controller-managed-attach-detach": "true"},
        "managedFields": [{"manager": "kubelet", "operation": "Update", "apiVersion": "v1",
                           "fieldsType": "FieldsV1",
                           "fieldsV1": {"f:metadata": {"f:labels": {".": {}}}}}],
    },
    "spec": {"podCIDR": "10.244.1.0/24", "providerID": "aws:///eu-west-1b/i-0abc",
             "taints": [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]},
    "status": {
        "capacity": {"cpu": "2", "memory": "8009100Ki", "pods": "110"},
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                        "lastHeartbeatTime": "2026-12-01T00:00:00Z"}],
        "addresses": [{"type": "InternalIP", "address": "10.0.1.7"}],
        "nodeInfo": {"kubeletVersion": "v1.29.3", "containerRuntimeVersion": "containerd://1.7.13"},
        "images": [{"names": [f"registry.example/app{i}@sha256:{i:064x}", f"registry.example/app{i}:v1"],
                    "sizeBytes": 1000000 + i} for i in range(300)],
    },
}


def agent_series(extra_cfg, env=None, duration="4s", during=None):
    """Run the agent on one spinning process; returns (rc, log, label sets)."""
    chain = ct.build_c("chain", d)
    w = subprocess.Popen([chain, "30"])
    rcv = Receiver(os.path.join(d, f"rcv-{time.time()}")).start()
    try:
        rules = "".join("  " + ln + "\n" for ln in RULES.splitlines())
        body = (f"remote_store: {{address: \"{rcv.address}\", insecure: true, "
                "debuginfo_upload: false}\n"
                f"targets:\n  - pids: [{w.pid}]\n{extra_cfg}"
                f"relabel_configs:\n{rules}")
        cfg, _ = ct.write_config(d, body, store=False)
        with open(cfg) as f:
            text = f.read()
        with open(cfg, "w") as f:
            f.write(text.replace("node: cpu-test-node", f"node: {NODE}", 1))
        agent = pptest.Agent(cfg, args=["--duration", duration], env=env, ready=False)
        if during:
            during(rcv, agent)
        rc, _ = agent.wait(120)
        log = agent.log()
        return rc, log, [s["labels"] for s in rcv.series()]
    finally:
        rcv.stop()
        w.kill()
        w.wait()


def node_part(lab):
    return {k: v for k, v in lab.items()
            if k in ("region", "zone", "node_name") or k.startswith("nl_")}


want_api = {"region": "eu-west-1", "zone": "eu-west-1b", "node_name": NODE,
            "nl_beta_kubernetes_io_arch": "amd64", "nl_kubernetes_io_hostname": NODE,
            "nl_kubernetes_io_os": "linux", "nl_node_kubernetes_io_instance_type": "m5.large",
            "nl_topology_kubernetes_io_region": "eu-west-1",
            "nl_topology_kubernetes_io_zone": "eu-west-1b", "nl_team": "caf\u00e9 \"q\" \\ /"}

# ---- 0. check-config: Parca Agent's kubernetes-config.yaml reads nothing unknown now
DEST = "remote_store: {address: 'parca:7070', insecure: true}\n"
r = run([pptest.PUSHPROF, "check-config", "-"], input=DEST + "relabel_configs:\n" + PARCA_RULES)
check(r.returncode == 0 and "never set" not in r.stderr,
      "check-config: Parca Agent's kubernetes-config.yaml warns about no label", r.stderr[-600:])
r = run([pptest.PUSHPROF, "check-config", "-"], input=DEST + "metadata: {node_labels: labels.txt}\n")
check(r.returncode == 2 and "node_labels" in r.stderr and "absolute" in r.stderr,
      "check-config: a relative node_labels path is refused", r.stderr[-400:])

# ---- 1. a file of name=value lines
lines = os.path.join(d, "node-labels.txt")
with open(lines, "w") as f:
    f.write("# from the provisioning system\n"
            "topology.kubernetes.io/region = us-east-2\n"
            "topology.kubernetes.io/zone=us-east-2c\n\n"
            "rack=r17\r\n")
rc, log, series = agent_series(f"metadata: {{cri_socket: none, node_labels: {lines}}}\n")
check(rc == 0 and series, "file: agent pushed", f"rc={rc} {log[-600:]}")
want = {"region": "us-east-2", "zone": "us-east-2c", "node_name": NODE, "nl_rack": "r17",
        "nl_topology_kubernetes_io_region": "us-east-2", "nl_topology_kubernetes_io_zone": "us-east-2c"}
check(series and all(node_part(l) == want for l in series),
      "file: every series has region, zone (Parca Agent's rules) and the node labels",
      f"{[node_part(l) for l in series[:2]]}")
check(not any(k.startswith("__") and k != "__name__" for l in series for k in l),
      "file: no __meta_* label reaches the server")


# ---- 2. the file rewritten as a Node object while the agent runs: after
# the first series arrived with the old labels, until one has the new ones
# (the file is checked every 10 s; on a loaded host start-up alone takes
# seconds, so no fixed schedule)
def wait_series(rcv, pred, secs):
    end = time.time() + secs
    while time.time() < end:
        if any(pred(node_part(l["labels"])) for l in rcv.series()):
            return True
        time.sleep(0.3)
    return False


def rewrite(rcv, agent):
    wait_series(rcv, lambda p: True, 40)
    tmp = lines + ".new"
    with open(tmp, "w") as f:
        json.dump(NODE_OBJ, f, indent=2)
    os.rename(tmp, lines)
    wait_series(rcv, lambda p: p == want_api, 45)
    agent.stop()


rc, log, series = agent_series(f"metadata: {{cri_socket: none, node_labels: {lines}}}\n",
                               duration="120s", during=rewrite)
parts = [node_part(l) for l in series]
check(rc == 0 and parts and parts[0].get("zone") == "us-east-2c",
      "file changed: the first series have the old labels", f"{parts[:1]} {log[-400:]}")
check(parts and parts[-1] == want_api,
      "file changed to a Node object (kubectl -o json): the last series have its labels",
      f"{parts[-1:]}")

# ---- 3. the API server path, against a local HTTPS stand-in
pki = os.path.join(d, "pki")
os.makedirs(pki)


def ossl(*a):
    run(["openssl", *a], timeout=60, check_rc=0)


for name in ("ca", "server"):
    ossl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-out", f"{pki}/{name}.key")
ossl("req", "-x509", "-key", f"{pki}/ca.key", "-out", f"{pki}/ca.crt", "-days", "2",
     "-subj", "/CN=kubernetes test CA", "-addext", "basicConstraints=critical,CA:TRUE",
     "-addext", "keyUsage=critical,keyCertSign,cRLSign")
ossl("req", "-new", "-key", f"{pki}/server.key", "-out", f"{pki}/server.csr", "-subj", "/CN=kube-apiserver")
with open(f"{pki}/server.ext", "w") as f:
    f.write("subjectAltName=IP:127.0.0.1,DNS:kubernetes.default.svc\nextendedKeyUsage=serverAuth\n")
ossl("x509", "-req", "-in", f"{pki}/server.csr", "-CA", f"{pki}/ca.crt", "-CAkey", f"{pki}/ca.key",
     "-CAcreateserial", "-out", f"{pki}/server.crt", "-days", "2", "-extfile", f"{pki}/server.ext")
sa = os.path.join(d, "serviceaccount")
os.makedirs(sa)
os.link(f"{pki}/ca.crt", f"{sa}/ca.crt")
with open(f"{sa}/token", "w") as f:
    f.write(TOKEN)
with open(f"{sa}/namespace", "w") as f:
    f.write("pushprof\n")

seen = []


class Api(http.server.BaseHTTPRequestHandler):
    allow = True

    def do_GET(self):
        seen.append((self.path, self.headers.get("Authorization")))
        body, code = None, 200
        if not Api.allow or self.headers.get("Authorization") != "Bearer " + TOKEN:
            code = 403
            body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Forbidden",
                    "message": f"nodes \"{NODE}\" is forbidden: User \"system:serviceaccount:"
                               "pushprof:pushprof\" cannot get resource \"nodes\"", "code": 403}
        elif self.path != f"/api/v1/nodes/{NODE}":
            code, body = 404, {"kind": "Status", "code": 404}
        else:
            body = NODE_OBJ
        raw = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, *a):
        pass


srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Api)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(f"{pki}/server.crt", f"{pki}/server.key")
srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
threading.Thread(target=srv.serve_forever, daemon=True).start()
env = {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": str(srv.server_address[1]),
       "PUSHPROF_SERVICEACCOUNT_DIR": sa}
try:
    rc, log, series = agent_series("metadata: {cri_socket: none}\n", env=env)
    parts = [node_part(l) for l in series]
    check(rc == 0 and parts and all(p == want_api for p in parts),
          "API: every series has the Node object's labels (the first one too)",
          f"{parts[:2]} {log[-800:]}")
    check(seen and seen[0] == (f"/api/v1/nodes/{NODE}", "Bearer " + TOKEN),
          "API: GET /api/v1/nodes/<node> with the service-account token", str(seen[:1]))
    check(len(seen) == 1, "API: one GET for a short run (refreshes are minutes apart)",
          f"{len(seen)} GETs")
    check(TOKEN not in log, "API: the token is in no log line")

    # ---- 4. forbidden: a clear warning, profiles still go out
    Api.allow = False
    seen.clear()
    rc, log, series = agent_series("metadata: {cri_socket: none}\n", env=env)
    check(rc == 0 and series and not any(node_part(l).get("region") for l in series)
          and all(l.get("node_name") == NODE for l in series),
          "API refused: profiles still pushed, no node labels (node name still known)",
          f"rc={rc} {[node_part(l) for l in series[:1]]}")
    check(re.search(r"node labels unavailable.*HTTP 403.*get.*nodes", log) is not None,
          "API refused: the warning says the service account needs get on nodes", log[-800:])
    check(len(re.findall("node labels unavailable", log)) == 1,
          "API refused: warned once, not per retry")
finally:
    srv.shutdown()

# ---- 5. node_labels: none, and a pod without a token: nothing asked or set
rc, log, series = agent_series("metadata: {cri_socket: none, node_labels: none}\n", env=env)
check(rc == 0 and series and not any(node_part(l) for l in series),
      "node_labels: none: no node label, not even node_name", str(series[:1]))
os.unlink(f"{sa}/token")
rc, log, series = agent_series("metadata: {cri_socket: none}\n", env=env)
check(rc == 0 and series and not any(node_part(l) for l in series)
      and "node labels off: no service account token mounted" in log,
      "in a pod without a token (automountServiceAccountToken: false): off, said once",
      log[-600:])
done()
