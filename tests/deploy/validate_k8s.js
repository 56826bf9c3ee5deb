// Validate Kubernetes objects against the API schemas shipped by the npm
// packages kubernetes-models and @kubernetes-models/prometheus-operator
// (generated from the Kubernetes OpenAPI spec / the operator's CRDs).
//   node validate_k8s.js NODE_MODULES_DIR < objects.json
// objects.json: a JSON array of objects. Prints a JSON array of
// {kind, name, ok, error}; exit 0 even when some are invalid (the caller
// reports each), 2 on usage errors.
"use strict";
const path = require("path");
const fs = require("fs");

const dir = process.argv[2];
if (!dir) {
  console.error("usage: node validate_k8s.js NODE_MODULES_DIR < objects.json");
  process.exit(2);
}
const objs = JSON.parse(fs.readFileSync(0, "utf8"));

function modulePath(apiVersion, kind) {
  if (apiVersion === "monitoring.coreos.com/v1")
    return path.join(dir, "@kubernetes-models/prometheus-operator", apiVersion, kind);
  // core group "v1" -> kubernetes-models/v1/Kind, "apps/v1" -> kubernetes-models/apps/v1/Kind
  return path.join(dir, "kubernetes-models", apiVersion, kind);
}

const out = objs.map((o) => {
  const r = { kind: o && o.kind, name: o && o.metadata && o.metadata.name, ok: false, error: "" };
  try {
    const mod = require(modulePath(o.apiVersion, o.kind));
    const Cls = mod[o.kind];
    if (!Cls) throw new Error(`no model for ${o.apiVersion} ${o.kind}`);
    new Cls(o).validate();
    r.ok = true;
  } catch (e) {
    r.error = String(e && e.message ? e.message : e).slice(0, 2000);
  }
  return r;
});
process.stdout.write(JSON.stringify(out));
