"""deploy/kubernetes and the Helm chart: every object valid against the
Kubernetes API schemas (npm kubernetes-models), the DaemonSet as the
deployment conventions require, the embedded config accepted by
`pushprof check-config`, and the chart rendered (Go text/template + sprig,
as Helm does) for its defaults and a few overrides."""
import os
import re
import sys

import pptest
from pptest import check, done

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import deploylib as dl  # noqa: E402

CAPS = ["BPF", "PERFMON", "SYS_PTRACE", "SYS_RESOURCE", "DAC_READ_SEARCH", "SYSLOG",
        "CHECKPOINT_RESTORE"]
HOST_MOUNTS = {"/sys/kernel/tracing", "/sys/fs/cgroup", "/sys/fs/bpf", "/run/containerd",
               "/var/lib/pushprof"}


def check_valid(objs, models, what):
    for o, ok, err in dl.validate(objs, models):
        check(ok, f"{what}: {o.get('kind')}/{o['metadata'].get('name')} valid against the API schema",
              err)


def host_paths(ds):
    """mountPath -> hostPath for every hostPath volume mounted."""
    spec = ds["spec"]["template"]["spec"]
    vols = {v["name"]: v for v in spec.get("volumes", [])}
    out = {}
    for m in dl.container(ds).get("volumeMounts", []):
        v = vols.get(m["name"])
        if v and "hostPath" in v:
            out[m["mountPath"]] = v["hostPath"]["path"]
    return out


def check_daemonset(ds, what, caps=CAPS, privileged=False):
    spec = ds["spec"]["template"]["spec"]
    c = dl.container(ds)
    check(spec.get("hostPID") is True, f"{what}: hostPID")
    sc = c.get("securityContext", {})
    if privileged:
        check(sc.get("privileged") is True, f"{what}: privileged fallback applied", str(sc))
    else:
        check(sorted(sc.get("capabilities", {}).get("add", [])) == sorted(caps)
              and sc.get("capabilities", {}).get("drop") == ["ALL"]
              and not sc.get("privileged"),
              f"{what}: capabilities exactly {caps}, drop ALL, not privileged", str(sc))
    uid = sc.get("runAsUser", spec.get("securityContext", {}).get("runAsUser"))
    check(uid == 0, f"{what}: runs as root")
    ports = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
    check(ports.get("http") == 7071, f"{what}: port 7071 named http", str(ports))
    lp, rp = c.get("livenessProbe", {}), c.get("readinessProbe", {})
    check(lp.get("httpGet", {}).get("path") == "/healthz"
          and lp["httpGet"].get("port") in ("http", 7071), f"{what}: liveness GET /healthz")
    check(rp.get("httpGet", {}).get("path") == "/readyz", f"{what}: readiness GET /readyz")
    env = {e["name"]: e for e in c.get("env", [])}
    check(env.get("NODE_NAME", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
          == "spec.nodeName", f"{what}: NODE_NAME from the downward API")
    hp = host_paths(ds)
    missing = HOST_MOUNTS - set(hp)
    check(not missing, f"{what}: host mounts tracefs, cgroup, bpffs, CRI socket dir, state",
          f"missing {missing}")
    check(all(hp[p] == p for p in HOST_MOUNTS & set(hp)), f"{what}: host paths mounted in place",
          str(hp))
    mounts = {m["name"] for m in c.get("volumeMounts", [])}
    vols = {v["name"] for v in spec.get("volumes", [])}
    check(mounts <= vols, f"{what}: every volumeMount has a volume", str(mounts - vols))
    check({"operator": "Exists"} in spec.get("tolerations", []), f"{what}: tolerates every taint")
    check(spec.get("nodeSelector", {}).get("kubernetes.io/os") == "linux",
          f"{what}: nodeSelector kubernetes.io/os=linux")
    r = c.get("resources", {})
    check(r.get("requests", {}).get("cpu") and r.get("limits", {}).get("memory"),
          f"{what}: requests and limits set", str(r))


def check_node_rbac(objs, ds, what, sa_name, sa_ns):
    """Node labels: a ClusterRole with exactly `get` on nodes, bound to the
    agent's service account, and the pods mount its token."""
    role, bind = dl.find(objs, "ClusterRole"), dl.find(objs, "ClusterRoleBinding")
    check(role and role["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}],
          f"{what}: ClusterRole grants only get on nodes", str(role and role.get("rules")))
    check(bind and bind["roleRef"]["name"] == role["metadata"]["name"]
          and bind["subjects"] == [{"kind": "ServiceAccount", "name": sa_name, "namespace": sa_ns}],
          f"{what}: ClusterRoleBinding binds it to the agent's service account",
          str(bind and bind.get("subjects")))
    check(ds["spec"]["template"]["spec"].get("automountServiceAccountToken") is True,
          f"{what}: the pods mount the service-account token (for get on nodes)")


CLUSTER_SCOPED = ("Namespace", "ClusterRole", "ClusterRoleBinding")


def check_cfg(text, what, expect=(), env=None):
    rc, out = dl.check_config(text, env)
    if not check(rc == 0, f"{what}: pushprof check-config accepts the config", out[-800:]):
        return
    for needle in expect:
        check(needle in out, f"{what}: effective config has {needle}", out[-1500:])


IMAGE = "pushprof/pushprof"


def check_image_names():
    """One image name everywhere: the Dockerfile's build tag, the DaemonSet,
    the chart's default, docs/deploy.md and README.md (a registry in front
    only as the REGISTRY placeholder)."""
    root = pptest.SOURCE_DIR
    refs = {}
    for rel in ("deploy/docker/Dockerfile", "deploy/kubernetes/daemonset.yaml",
                "deploy/helm/pushprof/values.yaml", "docs/deploy.md", "README.md"):
        text = open(os.path.join(root, rel)).read()
        found = re.findall(r"([\w.-]+(?:/[\w.-]+)*/pushprof):(\d[\w.-]*)", text)
        found += [(m, "") for m in re.findall(r"repository:\s*\"?([^\s\"]+)", text)]
        refs[rel] = found
    check(any(r == IMAGE for r, _ in refs["deploy/docker/Dockerfile"]),
          f"the Dockerfile builds {IMAGE}", str(refs["deploy/docker/Dockerfile"]))
    bad = {rel: [f"{r}:{tag}" for r, tag in found if r not in (IMAGE, "REGISTRY/" + IMAGE)]
           for rel, found in refs.items()}
    check(not any(bad.values()), f"every image reference is {IMAGE}",
          str({k: v for k, v in bad.items() if v}))
    check(refs["deploy/kubernetes/daemonset.yaml"] and refs["deploy/helm/pushprof/values.yaml"]
          and refs["docs/deploy.md"], "image references found in manifests, chart and docs",
          str(refs))


def main():
    check_image_names()
    if not pptest.have("node"):
        dl.skip("node is not installed")
    models = dl.ensure_models()
    dl.build_helmrender()
    have_cc = dl.check_config_available()
    if not have_cc:
        print("NOTE: `pushprof check-config` is not available in this build: the embedded "
              "configs are NOT checked (this is a skip, not a pass)")

    # --- plain manifests -------------------------------------------------------
    docs = dl.load_manifests()
    allobjs = [o for objs in docs.values() for o in objs]
    check(sorted(o["kind"] for o in allobjs) ==
          ["ClusterRole", "ClusterRoleBinding", "ConfigMap", "DaemonSet", "Namespace", "Service",
           "ServiceAccount"],
          "deploy/kubernetes: namespace, serviceaccount, node-reader RBAC, configmap, daemonset, "
          "service",
          str([o["kind"] for o in allobjs]))
    check_valid(allobjs, models, "deploy/kubernetes")
    ns = dl.find(allobjs, "Namespace")
    check(ns["metadata"]["labels"].get("pod-security.kubernetes.io/enforce") == "privileged",
          "namespace enforces pod-security privileged")
    ds = dl.find(allobjs, "DaemonSet")
    check_daemonset(ds, "manifests")
    cm = dl.find(allobjs, "ConfigMap")
    spec = ds["spec"]["template"]["spec"]
    cfg_vol = [v for v in spec["volumes"] if "configMap" in v]
    check(cfg_vol and cfg_vol[0]["configMap"]["name"] == cm["metadata"]["name"],
          "DaemonSet mounts the ConfigMap")
    check(spec["serviceAccountName"] == dl.find(allobjs, "ServiceAccount")["metadata"]["name"],
          "DaemonSet uses the ServiceAccount")
    check(all(o["metadata"].get("namespace") == ns["metadata"]["name"]
              for o in allobjs if o["kind"] not in CLUSTER_SCOPED), "everything in the namespace")
    check_node_rbac(allobjs, ds, "manifests", "pushprof", ns["metadata"]["name"])
    svc = dl.find(allobjs, "Service")
    check(svc["spec"]["selector"].items() <= ds["spec"]["template"]["metadata"]["labels"].items()
          and svc["spec"]["ports"][0]["targetPort"] == "http",
          "metrics Service selects the agent pods on port http")
    args = " ".join(dl.container(ds)["args"])
    check("/etc/pushprof/pushprof.yaml" in args, "agent reads the mounted config", args)
    if have_cc:
        check_cfg(cm["data"]["pushprof.yaml"], "manifests",
                  ['http_address: "0.0.0.0:7071"', 'node: "node-a"',
                   'directory: "/var/lib/pushprof/spool"',
                   "snapshot_api:\n  enabled: false"])

    # --- Helm chart: defaults -------------------------------------------------------
    rc, out, err = dl.render()
    if not check(rc == 0, "chart renders with default values", err):
        return done()
    objs = dl.load_docs(out)
    check(sorted(o["kind"] for o in objs) ==
          ["ClusterRole", "ClusterRoleBinding", "ConfigMap", "DaemonSet", "Service",
           "ServiceAccount"],
          "chart defaults: node-reader RBAC, configmap, daemonset, service, serviceaccount",
          str([o["kind"] for o in objs]))
    check_valid(objs, models, "chart defaults")
    ds = dl.find(objs, "DaemonSet")
    check_daemonset(ds, "chart defaults")
    check_node_rbac(objs, ds, "chart defaults", dl.find(objs, "ServiceAccount")["metadata"]["name"],
                    dl.find(objs, "ServiceAccount")["metadata"]["namespace"])
    cm = dl.find(objs, "ConfigMap")
    cfg_default = cm["data"]["pushprof.yaml"]
    ck = ds["spec"]["template"]["metadata"]["annotations"].get("checksum/config", "")
    check(len(ck) == 64 and all(ch in "0123456789abcdef" for ch in ck),
          "pod template carries the config checksum", ck)
    check(dl.container(ds)["image"] == "pushprof/pushprof:0.1.0",
          "image tag defaults to appVersion", dl.container(ds)["image"])
    if have_cc:
        check_cfg(cfg_default, "chart defaults",
                  ['address: "parca.parca.svc.cluster.local:7070"', "insecure: true",
                   'http_address: "0.0.0.0:7071"', 'bearer_token_file: ""',
                   "snapshot_api:\n  enabled: false"])

    d = pptest.tmpdir("pushprof-chart-")

    def values(name, text):
        p = os.path.join(d, name)
        with open(p, "w") as f:
            f.write(text)
        return p

    # --- NetworkPolicy: only the selected namespace reaches the HTTP port ----------
    vnp = values("np.yaml", """
networkPolicy:
  enabled: true
  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: observability}}
  podSelector: {matchLabels: {app: prometheus}}
""")
    rc, out, err = dl.render([vnp])
    if check(rc == 0, "chart renders with networkPolicy.enabled", err):
        objs = dl.load_docs(out)
        check_valid(objs, models, "chart networkPolicy")
        nps = [o for o in objs if o["kind"] == "NetworkPolicy"]
        ds = dl.find(objs, "DaemonSet")
        if check(len(nps) == 1, "one NetworkPolicy", str([o["kind"] for o in objs])):
            sp = nps[0]["spec"]
            frm = sp["ingress"][0]["from"][0]
            check(sp["podSelector"]["matchLabels"].items() <=
                  ds["spec"]["template"]["metadata"]["labels"].items() and
                  sp["policyTypes"] == ["Ingress"] and
                  sp["ingress"][0]["ports"] == [{"port": "http", "protocol": "TCP"}] and
                  frm["namespaceSelector"] == {"matchLabels": {
                      "kubernetes.io/metadata.name": "observability"}} and
                  frm["podSelector"] == {"matchLabels": {"app": "prometheus"}},
                  "NetworkPolicy: the agent's pods, ingress to port http from the selected "
                  "namespace and pods only", str(sp))

    # --- override: token from the chart, ServiceMonitor, extras, privileged fallback ---
    v1 = values("v1.yaml", """
remoteStore:
  address: parca.example.com:443
  insecure: false
  bearerToken: s3cr3t-token
serviceMonitor:
  enabled: true
  interval: 15s
  labels: {release: prom}
extraArgs: [--duration=24h]
extraEnv:
  - {name: CLUSTER, value: prod-eu-1}
extraVolumes:
  - name: debug
    hostPath: {path: /usr/lib/debug}
extraVolumeMounts:
  - {name: debug, mountPath: /usr/lib/debug, readOnly: true}
podAnnotations: {team: perf}
affinity:
  nodeAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      nodeSelectorTerms:
        - matchExpressions:
            - {key: node-role, operator: NotIn, values: [gpu]}
securityContext: {privileged: true, runAsUser: 0}
config:
  external_labels: {cluster: "${CLUSTER}"}
image: {tag: "0.2.0"}
""")
    rc, out, err = dl.render([v1])
    if check(rc == 0, "chart renders with token/serviceMonitor/extras overrides", err):
        objs = dl.load_docs(out)
        check(sorted(o["kind"] for o in objs) ==
              ["ClusterRole", "ClusterRoleBinding", "ConfigMap", "DaemonSet", "Secret", "Service",
               "ServiceAccount", "ServiceMonitor"],
              "overrides add a Secret and a ServiceMonitor", str([o["kind"] for o in objs]))
        check_valid(objs, models, "chart overrides 1")
        ds = dl.find(objs, "DaemonSet")
        check_daemonset(ds, "chart overrides 1", privileged=True)
        c = dl.container(ds)
        sec = dl.find(objs, "Secret")
        cfg = dl.find(objs, "ConfigMap")["data"]["pushprof.yaml"]
        check("s3cr3t-token" not in cfg and "s3cr3t-token" not in out.replace(
              sec["data"]["token"], ""), "token only in the Secret (base64), not in the config")
        tv = [v for v in ds["spec"]["template"]["spec"]["volumes"] if "secret" in v]
        tm = [m for m in c["volumeMounts"] if tv and m["name"] == tv[0]["name"]]
        check(tv and tv[0]["secret"]["secretName"] == sec["metadata"]["name"]
              and tm and tm[0]["mountPath"] == "/var/run/secrets/pushprof"
              and tv[0]["secret"]["items"][0]["path"] == "token",
              "Secret mounted as /var/run/secrets/pushprof/token", str(tv))
        check("--duration=24h" in c["args"] and
              any(e["name"] == "CLUSTER" for e in c["env"]) and
              any(m["mountPath"] == "/usr/lib/debug" for m in c["volumeMounts"]),
              "extraArgs, extraEnv, extraVolumeMounts rendered")
        tmpl = ds["spec"]["template"]
        check(tmpl["metadata"]["annotations"].get("team") == "perf"
              and "nodeAffinity" in tmpl["spec"].get("affinity", {}),
              "podAnnotations and affinity rendered")
        check(c["image"] == "pushprof/pushprof:0.2.0", "image.tag override", c["image"])
        sm = dl.find(objs, "ServiceMonitor")
        check(sm["spec"]["endpoints"][0]["port"] == "http"
              and sm["spec"]["endpoints"][0]["interval"] == "15s"
              and sm["metadata"]["labels"].get("release") == "prom",
              "ServiceMonitor scrapes port http")
        if have_cc:
            check_cfg(cfg, "chart overrides 1",
                      ['address: "parca.example.com:443"', "insecure: false",
                       'bearer_token_file: "/var/run/secrets/pushprof/token"',
                       '"cluster": "prod-eu-1"'], env={"CLUSTER": "prod-eu-1"})
            # the checksum follows the config
            ck1 = tmpl["metadata"]["annotations"]["checksum/config"]
            ck0 = dl.find(dl.load_docs(dl.render()[1]), "DaemonSet")["spec"]["template"][
                "metadata"]["annotations"]["checksum/config"]
            check(ck0 != ck1, "config change changes the pod template checksum")

    # --- override: existing secret, no SA creation, no service, config overrides ---
    v2 = values("v2.yaml", """
remoteStore:
  address: grpc.polarsignals.example:443
  insecure: false
  insecureSkipVerify: true
  existingSecret: my-token
  existingSecretKey: bearer
serviceAccount: {create: false, name: node-agents}
service: {enabled: false}
rbac: {nodeLabels: false}
config:
  remote_store: {timeout: 30s, headers: {x-scope-orgid: tenant1}}
  cpu: {frequency_hz: 49}
  relabel_configs:
    - {source_labels: [__meta_kubernetes_namespace], regex: shop, action: keep}
tolerations: []
nodeSelector: {kubernetes.io/os: linux, pool: apps}
""")
    rc, out, err = dl.render([v2], name="agents", namespace="monitoring")
    if check(rc == 0, "chart renders with existingSecret/no-SA/config overrides", err):
        objs = dl.load_docs(out)
        check(sorted(o["kind"] for o in objs) == ["ConfigMap", "DaemonSet"],
              "no ServiceAccount, RBAC, Secret or Service created", str([o["kind"] for o in objs]))
        check(dl.find(objs, "DaemonSet")["spec"]["template"]["spec"].get(
              "automountServiceAccountToken") is False,
              "rbac.nodeLabels: false: no service-account token mounted")
        check_valid(objs, models, "chart overrides 2")
        ds = dl.find(objs, "DaemonSet")
        spec = ds["spec"]["template"]["spec"]
        check(spec["serviceAccountName"] == "node-agents", "serviceAccount.name used")
        check(all(o["metadata"]["namespace"] == "monitoring" for o in objs),
              "objects in the release namespace")
        tv = [v for v in spec["volumes"] if "secret" in v]
        check(tv and tv[0]["secret"]["secretName"] == "my-token"
              and tv[0]["secret"]["items"][0]["key"] == "bearer",
              "existingSecret mounted with its key", str(tv))
        check("tolerations" not in spec and spec["nodeSelector"].get("pool") == "apps",
              "tolerations and nodeSelector overridable")
        if have_cc:
            check_cfg(dl.find(objs, "ConfigMap")["data"]["pushprof.yaml"], "chart overrides 2",
                      ['address: "grpc.polarsignals.example:443"', "insecure_skip_verify: true",
                       'bearer_token_file: "/var/run/secrets/pushprof/token"', "timeout: 30s",
                       "frequency_hz: 49", '"x-scope-orgid": "tenant1"'])

    # --- required values fail the render -------------------------------------------
    v3 = values("v3.yaml", "remoteStore: {address: ''}\n")
    rc, out, err = dl.render([v3])
    check(rc != 0 and "remoteStore.address is required" in err,
          "empty remoteStore.address fails with the required message", err)

    # --- a broken config in values is caught by check-config -------------------------
    if have_cc:
        v4 = values("v4.yaml", "config: {cpu: {frequency_hz: 5000}}\n")
        rc, out, err = dl.render([v4])
        bad = dl.find(dl.load_docs(out), "ConfigMap")["data"]["pushprof.yaml"]
        rc, msg = dl.check_config(bad)
        check(rc != 0 and "frequency_hz" in msg, "out-of-range value in values is rejected", msg)
    done()


if __name__ == "__main__":
    main()
