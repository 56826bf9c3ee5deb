"""Self-test of tests/lib/pyroscope_receiver.py: every Pyroscope rule it
mirrors, over gRPC (python grpc client) and over Connect HTTP (urllib).

The profiles are the project's pprof fixtures (tests/pprof/pprof_gen: the
agent's own encoder), with time_nanos moved to now where a test wants them
accepted, plus one re-encoded by `go tool pprof -proto`. The receiver's clock
is pinned (now=) so the ingestion-window edges are exact.
"""
import gzip
import json
import os
import shutil
import ssl
import sys
import time
import urllib.error
import urllib.request

import grpc

from pptest import check, done, have, pprof, run, tmpdir
from pyroscope_receiver import PyroscopeReceiver, load_protos
from pyroscope_rules import _uvarint
import receiver

GEN = sys.argv[1]
work = tmpdir("pushprof-pyrorcv-")
fx = os.path.join(work, "fixtures")
os.makedirs(fx)
run([GEN, fx], timeout=60, check_rc=0)
push_pb2, types_pb2 = load_protos()
profile_pb2 = receiver.load_protos()[0]
NOW = 1_800_000_000.0   # the receivers' pinned clock (2027-01-15)
NOW_NS = int(NOW * 1e9)
MIN = 60 * 10**9

with open(os.path.join(fx, "cpu.pb.gz"), "rb") as f:
    CPU_FIXTURE = f.read()   # time_nanos 2023-11-14: too old for Pyroscope


def cpu(time_nanos=NOW_NS, edit=None, compress=True):
    p = profile_pb2.Profile()
    p.ParseFromString(gzip.decompress(CPU_FIXTURE))
    p.time_nanos = time_nanos
    if edit:
        edit(p)
    data = p.SerializeToString()
    return gzip.compress(data) if compress else data


def series(labels, *raws, ids=None):
    if isinstance(labels, dict):
        labels = list(labels.items())
    return push_pb2.RawProfileSeries(
        labels=[types_pb2.LabelPair(name=n, value=v) for n, v in labels],
        samples=[push_pb2.RawSample(raw_profile=r, ID=(ids or {}).get(i, f"id-{i}"))
                 for i, r in enumerate(raws)])


def request(*ss):
    return push_pb2.PushRequest(series=list(ss)).SerializeToString()


OK_LABELS = {"__name__": "process_cpu", "service_name": "shop"}


def grpc_push(r, body, headers=(), creds=None):
    ch = grpc.secure_channel(r.address, creds) if creds else grpc.insecure_channel(r.address)
    try:
        f = ch.unary_unary("/push.v1.PusherService/Push",
                           request_serializer=lambda b: b, response_deserializer=lambda b: b)
        f(body, metadata=list(headers), timeout=10)
        return ("OK", "")
    except grpc.RpcError as e:
        return (e.code().name, e.details())
    finally:
        ch.close()


def http_push(r, body, headers=(), ctype="application/proto", method="POST", url=None,
              ctx=None):
    h = {"Content-Type": ctype, **dict(headers)}
    req = urllib.request.Request(url or r.url, data=body, headers=h, method=method)
    try:
        with urllib.request.urlopen(req, timeout=10, context=ctx) as resp:
            return (resp.status, resp.read())
    except urllib.error.HTTPError as e:
        return (e.code, e.read())


def both(r, body, want, text="", headers=(), what=""):
    """Push over both protocols; both must answer `want` (gRPC code name)
    with `text` in the message, HTTP with the Connect code and its status."""
    g = grpc_push(r, body, headers)
    check(g[0] == want and text in g[1], f"grpc: {what} -> {want}", str(g))
    status, raw = http_push(r, body, headers)
    want_http = {"OK": 200, "INVALID_ARGUMENT": 400, "UNAUTHENTICATED": 401,
                 "UNKNOWN": 500, "UNAVAILABLE": 503}[want]
    if want == "OK":
        check(status == 200 and raw == b"", f"http: {what} -> 200", f"{status} {raw[:300]}")
    else:
        try:
            body_json = json.loads(raw)
        except ValueError:
            body_json = {}
        check(status == want_http and body_json.get("code") == want.lower()
              and text in body_json.get("message", ""),
              f"http: {what} -> {want_http} {want.lower()}", f"{status} {raw[:300]}")
    return g


def new(**kw):
    kw.setdefault("now", lambda: NOW)
    return PyroscopeReceiver(os.path.join(work, f"rcv{len(receivers)}"), **kw).start()


receivers = []
r = new()
receivers.append(r)

# ---- accepted -------------------------------------------------------------
both(r, request(series(OK_LABELS, cpu())), "OK", what="agent pprof, fresh time_nanos")
acc = r.series()
check(len(acc) == 2 and acc[0]["labels"] == OK_LABELS and acc[0]["id"] == "id-0"
      and acc[0]["tenant"] == "anonymous" and acc[0]["proto"] == "grpc"
      and acc[1]["proto"] == "connect", "accepted series recorded per protocol", str(acc)[:400])
prof = r.profile(acc[0])
check(prof.time_nanos == NOW_NS and len(prof.sample) == acc[0]["samples"] > 0,
      "recorded pprof decodes to what was sent", str(acc[0]))
check({"__name__": "process_cpu", "service_name": "shop", "thread_name": "worker"}
      in acc[0]["stored"], "sample labels become series labels (pprof_split)",
      str(acc[0]["stored"]))
both(r, request(series([("service_name", "shop"), ("otel.scope.name", "x"),
                        ("__name__", "process_cpu")], cpu())),
     "OK", what="unsorted labels, dotted UTF-8 name (Pyroscope's default)")
both(r, request(series({"__name__": "process_cpu"}, cpu())), "OK", what="no service_name")
check(r.series()[-1]["stored"][0]["service_name"] == "unknown_service",
      "missing service_name stored as unknown_service", str(r.series()[-1]))
both(r, request(series(OK_LABELS, cpu(compress=False))), "OK", what="plain (not gzip'd) pprof")
both(r, request(series(OK_LABELS, cpu(0))), "OK", what="time_nanos 0 (Pyroscope uses now)")
if have("go"):
    fresh = os.path.join(work, "fresh.pb.gz")
    with open(fresh, "wb") as f:
        f.write(cpu())
    out = os.path.join(work, "go.pb.gz")
    pprof("-proto", "-output", out, fresh)
    with open(out, "rb") as f:
        both(r, request(series(OK_LABELS, f.read())), "OK", what="`go tool pprof -proto` output")

# ---- labels (validate.go ValidateLabels) ----------------------------------
both(r, request(series({"service_name": "shop"}, cpu())), "INVALID_ARGUMENT",
     "invalid metric name", what="no __name__")
both(r, request(series({**OK_LABELS, "service_name": ""}, cpu())), "INVALID_ARGUMENT",
     "service name is not provided", what="empty service_name")
both(r, request(series({**OK_LABELS, "": "v"}, cpu())), "INVALID_ARGUMENT",
     "invalid label name ''", what="empty label name")
both(r, request(series(list(OK_LABELS.items()) + [("a", "1"), ("a", "2")], cpu())),
     "INVALID_ARGUMENT", "has duplicate label name: 'a'", what="duplicate label name")
many = {**OK_LABELS, **{f"l{i:02d}": "v" for i in range(27)}}   # 29 + thread_name = 30
both(r, request(series(many, cpu())), "OK", what="30 names with the sample label")
many["l99"] = "v"
both(r, request(series(many, cpu())), "INVALID_ARGUMENT", "has 31 label names; limit 30",
     what="31 names counting the pprof's thread_name")
both(r, request(series({**OK_LABELS, "n" * 1024: "v", "v": "x" * 2048}, cpu())), "OK",
     what="name 1024 bytes, value 2048 bytes")
both(r, request(series({**OK_LABELS, "n" * 1025: "v"}, cpu())), "INVALID_ARGUMENT",
     "label name too long", what="name 1025 bytes")
both(r, request(series({**OK_LABELS, "v": "x" * 2049}, cpu())), "INVALID_ARGUMENT",
     "label value too long", what="value 2049 bytes")


# Strings that are not UTF-8: python protobuf will not encode them, so the
# request is put together by hand. Pyroscope's decoder takes them; then
# ValidateLabels refuses.
def enc(num, payload):
    return bytes([num << 3 | 2]) + _uvarint(len(payload)) + payload


def raw_series(pairs, raw):
    body = b"".join(enc(1, enc(1, n) + enc(2, v)) for n, v in pairs)
    return enc(1, body + enc(2, enc(1, raw) + enc(2, b"x")))


both(r, raw_series([(b"__name__", b"process_cpu"), (b"k", b"\xff")], cpu()),
     "INVALID_ARGUMENT", "invalid label value", what="label value not UTF-8")
both(r, b"\x0a\x05\x0a\x03\x0a\x01", "INVALID_ARGUMENT", "unmarshal message",
     what="truncated PushRequest")

# ---- raw_profile (distributor.go Push, pprof.RawFromBytesWithLimit) --------
both(r, request(series(OK_LABELS, b"this is not a profile at all")), "UNKNOWN",
     what="not a pprof (Pyroscope has no code for it: 500)")
both(r, request(series(OK_LABELS, cpu()[:-20])), "UNKNOWN", "copy to buffer: unexpected EOF",
     what="truncated gzip")
both(r, request(series(OK_LABELS, b"")), "UNKNOWN", "gzip reset: EOF", what="empty raw_profile")
both(r, request(), "INVALID_ARGUMENT", "no profiles received", what="no series")
both(r, request(series(OK_LABELS)), "INVALID_ARGUMENT", "no profiles received",
     what="a series without samples")


def huge(p):
    p.string_table.append("x" * (4 * 1024 * 1024))


both(r, request(series(OK_LABELS, cpu(edit=huge))), "INVALID_ARGUMENT",
     "uncompressed profile payload size exceeds limit of 4.2 MB", what="5 MiB uncompressed")

# ---- pprof content (validate.go ValidateProfile) ----------------------------
both(r, request(series(OK_LABELS, cpu(1_700_000_000 * 10**9))),
     "INVALID_ARGUMENT", "outside of ingestion window", what="2023 fixture time: too old")
with open(os.path.join(fx, "cpu.pb.gz"), "rb") as f:
    both(r, request(series(OK_LABELS, f.read())), "INVALID_ARGUMENT",
         "outside of ingestion window", what="the fixture file as generated")
both(r, request(series(OK_LABELS, cpu(NOW_NS - 60 * MIN))), "INVALID_ARGUMENT",
     "outside of ingestion window", what="exactly now - 1h (edge excluded)")
both(r, request(series(OK_LABELS, cpu(NOW_NS - 60 * MIN + 10**6))), "OK",
     what="now - 1h + 1ms")
both(r, request(series(OK_LABELS, cpu(NOW_NS + 10 * MIN))), "INVALID_ARGUMENT",
     "outside of ingestion window", what="exactly now + 10m (edge excluded)")
both(r, request(series(OK_LABELS, cpu(NOW_NS + 10 * MIN - 10**6))), "OK",
     what="now + 10m - 1ms")


def dash(p):
    p.string_table[p.sample_type[0].type] = "sam-ples"


def zero(p):
    for s in p.sample:
        s.value[:] = [0] * len(s.value)


def nul_string(p):
    p.string_table[0] = "x"


both(r, request(series(OK_LABELS, cpu(edit=dash))), "INVALID_ARGUMENT",
     "sample type contains -", what="'-' in a sample type")
both(r, request(series(OK_LABELS, cpu(edit=nul_string))), "INVALID_ARGUMENT",
     "string 0 should be empty string", what="string_table[0] not empty")
both(r, request(series(OK_LABELS, cpu(edit=lambda p: p.sample_type.pop()))),
     "INVALID_ARGUMENT", "sample value length mismatch", what="values != sample types")
both(r, request(series(OK_LABELS, cpu(edit=lambda p: p.sample_type.__delitem__(
    slice(None))))), "INVALID_ARGUMENT", "empty profile", what="no sample types")
utf8_bad = gzip.compress(cpu(compress=False) + b"\x32\x02\xff\xfe")
both(r, request(series(OK_LABELS, utf8_bad)), "INVALID_ARGUMENT",
     "invalid utf8 string hex: fffe", what="string_table entry not UTF-8")
n0 = len(r.series())
both(r, request(series({"service_name": "no-name"}, cpu(edit=zero))), "OK",
     what="all-zero profile: dropped before labels are checked")
check(r.series()[-1]["stored"] == [] and len(r.series()) == n0 + 2,
      "all-zero profile recorded as accepted, stored nowhere", str(r.series()[-1]))

# ---- several series: each stands alone -------------------------------------
n0 = len(r.series())
both(r, request(series(OK_LABELS, cpu()), series({"service_name": "x"}, cpu())),
     "INVALID_ARGUMENT", "invalid metric name", what="one good, one bad series")
check(len(r.series()) == n0 + 2 and r.calls()[-1]["accepted"] == 1,
      "the good series of a failed call stays stored", str(r.calls()[-1]))
both(r, request(series(OK_LABELS, b"junk junk junk", cpu())), "UNKNOWN",
     what="one unparseable sample next to a good one")
check(r.calls()[-1]["accepted"] == 1, "its good sample is stored", str(r.calls()[-1]))

# ---- Connect HTTP details ----------------------------------------------------
good = request(series(OK_LABELS, cpu()))
st, _ = http_push(r, good, ctype="application/octet-stream")
check(st == 415, "http: other content type -> 415", str(st))
st, _ = http_push(r, gzip.compress(good), headers={"Content-Encoding": "gzip"})
check(st == 200, "http: gzip Content-Encoding -> 200", str(st))
st, _ = http_push(r, iter([good[:100], good[100:]]), headers={"Transfer-Encoding": "chunked"})
check(st == 200 and r.calls()[-1]["bytes"] == len(good), "http: chunked body -> 200", str(st))
st, raw = http_push(r, good, headers={"Content-Encoding": "br"})
check(st == 501 and b"unimplemented" in raw, "http: unknown encoding -> 501 unimplemented",
      f"{st} {raw}")
st, _ = http_push(r, None, method="GET")
check(st == 405, "http: GET -> 405", str(st))
st, _ = http_push(r, good, url=r.url.replace("Push", "Pull"))
check(st == 404, "http: other path -> 404", str(st))
st, raw = http_push(r, b'{"series": []}', ctype="application/json")
check(st == 400 and b"no profiles received" in raw, "http: JSON body is understood",
      f"{st} {raw}")
r.stop()

# ---- tenants ----------------------------------------------------------------
r = new(tenant_required=True)
receivers.append(r)
both(r, good, "UNAUTHENTICATED", "no org id", what="tenant required, no X-Scope-OrgID")
both(r, good, "OK", headers=[("x-scope-orgid", "team-a")], what="X-Scope-OrgID team-a")
check({s["tenant"] for s in r.series()} == {"team-a"}, "tenant recorded",
      str([s["tenant"] for s in r.series()]))
both(r, good, "UNAUTHENTICATED", "multiple org IDs present",
     headers=[("x-scope-orgid", "a|b")], what="two tenants")
both(r, good, "UNAUTHENTICATED", "unsupported character '/'",
     headers=[("x-scope-orgid", "a/b")], what="tenant with '/'")
both(r, good, "UNAUTHENTICATED", "too long", headers=[("x-scope-orgid", "t" * 151)],
     what="tenant of 151 bytes")
r.stop()
r = new()
receivers.append(r)
both(r, good, "OK", headers=[("x-scope-orgid", "a/b")], what="multi-tenancy off: header ignored")
check(r.series()[0]["tenant"] == "anonymous" and r.calls()[0]["org_id"] == "a/b",
      "multi-tenancy off: tenant anonymous, header recorded", str(r.calls()[0]))
r.stop()

# ---- credentials ---------------------------------------------------------------
r = new(token="s3cret", basic=("1234", "glc_key"))
receivers.append(r)
both(r, good, "UNAUTHENTICATED", "missing credentials", what="no credentials")
both(r, good, "UNAUTHENTICATED", "invalid credentials",
     headers=[("authorization", "Bearer nope")], what="wrong token")
both(r, good, "OK", headers=[("authorization", "Bearer s3cret")], what="right token")
both(r, good, "OK", headers=[("authorization", "Basic MTIzNDpnbGNfa2V5")], what="right basic")
c = r.calls()
check(c[-1]["auth"] == "ok" and c[-1]["auth_user"] == "1234" and c[0]["auth"] == "missing",
      "auth result and basic user recorded", str(c[-1]))
check(all(b"s3cret" not in open(os.path.join(r.out, f), "rb").read()
          for f in os.listdir(r.out)) and (c[-1]["n"], "Basic MTIzNDpnbGNfa2V5") in r.auth_headers,
      "secrets only in memory (auth_headers), never in out_dir")
r.stop()

# ---- outages -------------------------------------------------------------------
r = new(fail_first=2)
receivers.append(r)
both(r, good, "UNAVAILABLE", what="fail_first: calls 1 and 2")
both(r, good, "OK", what="fail_first: then accepted")
# long enough for a gRPC and an HTTP call on a loaded host
t_out = time.time()
r.outage(5)
both(r, good, "UNAVAILABLE", what="outage(5)")
time.sleep(max(0, t_out + 5.2 - time.time()))
both(r, good, "OK", what="after the outage")
r.stop()

# ---- legacy label names (disable_label_sanitization: false) ---------------------
r = new(label_sanitization=True)
receivers.append(r)
both(r, request(series({**OK_LABELS, "otel.scope": "x"}, cpu())), "OK", what="legacy: dotted name")
check(r.series()[-1]["stored"][0].get("otel_scope") == "x", "legacy: dots become '_'",
      str(r.series()[-1]["stored"]))
both(r, request(series({**OK_LABELS, "a-b": "x"}, cpu())), "INVALID_ARGUMENT",
     "invalid label name 'a-b'", what="legacy: '-' in a name")
both(r, request(series({**OK_LABELS, "a.b": "x", "a_b": "y"}, cpu())), "INVALID_ARGUMENT",
     "after label name sanitization", what="legacy: a.b and a_b differ")
r.stop()

# ---- TLS -------------------------------------------------------------------------
if have("openssl"):
    cert, key = os.path.join(work, "c.pem"), os.path.join(work, "k.pem")
    run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-keyout", key, "-out", cert, "-days", "2", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1"], timeout=30, check_rc=0)
    r = new(tls=(cert, key))
    receivers.append(r)
    with open(cert, "rb") as f:
        g = grpc_push(r, good, creds=grpc.ssl_channel_credentials(f.read()))
    check(g[0] == "OK", "tls: grpc", str(g))
    st, _ = http_push(r, good, ctx=ssl.create_default_context(cafile=cert))
    check(st == 200 and r.url.startswith("https://"), "tls: https", str(st))
    r.stop()

for x in receivers:
    x.stop()
shutil.rmtree(work, ignore_errors=True)
done()
