"""Shared helpers for the deploy tests: render the Helm chart, validate
Kubernetes objects against the API schemas, run `pushprof check-config`.

Tools come from Debian and npm, installed by scripts/setup.sh:
- golang-github-masterminds-sprig-dev (+ golang-gopkg-yaml.v3-dev): the
  template functions Helm uses, for tests/deploy/helmrender (GOPATH mode);
- npm packages kubernetes-models@4 and @kubernetes-models/prometheus-operator@4
  (v4: CommonJS, runs on Debian's node 18/20), installed on first use into
  BUILD_DIR/deploy-npm with `npm install --prefix`.
"""
import json
import os
import subprocess
import sys

import pptest

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.abspath(pptest.SOURCE_DIR)
BUILD = os.path.abspath(pptest.BUILD_DIR)
CHART = os.path.join(SRC, "deploy", "helm", "pushprof")
MANIFESTS = os.path.join(SRC, "deploy", "kubernetes")
NPM_DIR = os.path.join(BUILD, "deploy-npm")
NPM_PKGS = ["kubernetes-models@4", "@kubernetes-models/prometheus-operator@4"]
GOPATH = "/usr/share/gocode"
RENDER_BIN = os.path.join(BUILD, "deploy-helmrender")


def skip(msg):
    print(f"SKIP: {msg}")
    sys.exit(77)


def yaml_mod():
    try:
        import yaml  # python3-yaml (Debian)
        return yaml
    except ImportError:
        skip("python3-yaml is not installed")


def build_helmrender():
    if not os.path.isdir(os.path.join(GOPATH, "src/github.com/Masterminds/sprig")):
        skip("golang-github-masterminds-sprig-dev is not installed (apt-get install it)")
    env = pptest.go_env()
    env.update({"GOPATH": GOPATH, "GO111MODULE": "off"})
    src = os.path.join(HERE, "helmrender")
    p = subprocess.run(["go", "build", "-o", RENDER_BIN, "."], cwd=src, timeout=300,
                       capture_output=True, text=True, env={**os.environ, **env})
    if p.returncode != 0:
        raise RuntimeError("building helmrender failed:\n" + p.stderr)
    return RENDER_BIN


def ensure_models():
    marker = os.path.join(NPM_DIR, "node_modules", "kubernetes-models", "package.json")
    if not os.path.exists(marker):
        if not pptest.have("npm") or not pptest.have("node"):
            skip("node/npm are not installed")
        p = subprocess.run(["npm", "install", "--prefix", NPM_DIR, "--no-audit", "--no-fund",
                            "--loglevel=error", *NPM_PKGS],
                           capture_output=True, text=True, timeout=300)
        if p.returncode != 0:
            skip("npm install of kubernetes-models failed (no registry?): " + p.stderr[-500:])
    return os.path.join(NPM_DIR, "node_modules")


def render(values_files=(), name="pp", namespace="pushprof"):
    """Returns (returncode, stdout, stderr) of helmrender."""
    args = [RENDER_BIN, "-chart", CHART, "-name", name, "-namespace", namespace]
    for f in values_files:
        args += ["-f", f]
    p = subprocess.run(args, capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout, p.stderr


def load_docs(text):
    yaml = yaml_mod()
    return [d for d in yaml.safe_load_all(text) if d]


def load_manifests():
    docs = {}
    for fn in sorted(os.listdir(MANIFESTS)):
        if fn.endswith(".yaml"):
            with open(os.path.join(MANIFESTS, fn)) as f:
                docs[fn] = load_docs(f.read())
    return docs


def validate(objs, models_dir):
    """[(obj, ok, error)] from kubernetes-models' validators."""
    p = subprocess.run(["node", os.path.join(HERE, "validate_k8s.js"), models_dir],
                       input=json.dumps(objs), capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        raise RuntimeError("validate_k8s.js failed: " + p.stderr)
    res = json.loads(p.stdout)
    return [(o, r["ok"], r["error"]) for o, r in zip(objs, res)]


def check_config_available():
    p = pptest.pushprof("check-config", "--help")
    text = p.stdout + p.stderr
    return p.returncode == 0 and "check-config" in text and "not built yet" not in text


def check_config(text, env=None):
    """(returncode, effective config or error) of `pushprof check-config -`."""
    e = {"NODE_NAME": "node-a"}
    if env:
        e.update(env)
    # lint mode: the manifests' secrets are mounted only in a cluster
    p = pptest.run([pptest.PUSHPROF, "check-config", "--no-file-checks", "-"], input=text,
                   env=e, timeout=30)
    return p.returncode, (p.stdout if p.returncode == 0 else p.stderr)


def find(objs, kind, name=None):
    for o in objs:
        if o.get("kind") == kind and (name is None or o["metadata"]["name"] == name):
            return o
    return None


def container(ds):
    return ds["spec"]["template"]["spec"]["containers"][0]
