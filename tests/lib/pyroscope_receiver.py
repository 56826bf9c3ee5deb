#!/usr/bin/python3
"""A Grafana-Pyroscope-compatible Push receiver for tests.

Serves push.v1.PusherService/Push on 127.0.0.1 twice: over gRPC (grpcio, on
`port`) and over Connect's unary HTTP protocol (HTTP/1.1 POST
/push.v1.PusherService/Push, Content-Type application/proto or
application/json, optional Content-Encoding gzip; on `http_port`). Both run
the same checks and answer alike: a refusal is a gRPC status, or the Connect
code's HTTP status with a JSON body {"code": "...", "message": "..."}.

The checks are Pyroscope's own (pyroscope_rules.py, each citing the upstream
file and line). With Pyroscope's defaults (limits=... overrides them):
  * tenant, only with tenant_required=True (multitenancy_enabled): no
    X-Scope-OrgID -> UNAUTHENTICATED "no org id"; bad characters, > 150
    bytes, two tenants "a|b" -> UNAUTHENTICATED. Otherwise the header is
    ignored and the tenant is "anonymous".
  * raw_profile gunzipped if it looks like gzip (else plain protobuf), at
    most 4 MiB uncompressed (INVALID_ARGUMENT); one Pyroscope cannot
    decompress or parse is answered UNKNOWN / HTTP 500 - Pyroscope gives it
    no code of its own.
  * no sample in the request -> INVALID_ARGUMENT "no profiles received".
  * pprof: sample types present, time_nanos (when set) inside
    (now - 1h, now + 10m), <= 16000 samples, <= 100 labels a sample, ids != 0,
    one value per sample type, string indexes in range, string_table[0] "",
    no '-' in a sample type, UTF-8 strings -> INVALID_ARGUMENT.
  * labels, after Pyroscope adds service_name="unknown_service" if missing,
    drops empty-valued labels and adds each pprof sample's string labels:
    `__name__` non-empty, <= 30 names, names <= 1024 and values <= 2048
    bytes, names non-empty UTF-8 (label_sanitization=True: the legacy
    [a-zA-Z_][a-zA-Z0-9_]*, dots made '_'), no duplicates -> INVALID_ARGUMENT.
    Order is free: Pyroscope sorts.
  * a profile whose samples are all zero is accepted and dropped unchecked.
  * each series is stored on its own: one bad series fails the call, the
    others stay stored (and are recorded as accepted).
The test's, not Pyroscope's (which has no auth; Grafana Cloud's gateway
does): credentials basic=(user, password) and/or token= -> UNAUTHENTICATED /
401 "missing credentials" / "invalid credentials"; outages fail_first=N
calls, or outage(seconds) -> UNAVAILABLE / 503.
Not mirrored: rate and ingest limits, sampling, usage groups, relabel rules
beyond Pyroscope's built-in ones, stack depth and symbol truncation.

Message classes for clients: proto/pyroscope/push/v1/push.proto and
types/v1/types.proto compiled with `protoc --python_out` into a temp dir
(load_protos(), as receiver.py does); pprof decoded with receiver.py's
profile_pb2. The receiver itself reads requests with a small wire decoder,
not with push_pb2: like Pyroscope's vtproto codec it takes strings that are
not UTF-8, so those get Pyroscope's answer rather than grpcio's.

Library:
  from pyroscope_receiver import PyroscopeReceiver, load_protos
  r = PyroscopeReceiver(out_dir, port=0, http_port=0, tenant_required=False,
                        token=None, basic=None, fail_first=0, tls=None,
                        client_ca=None, limits=None, label_sanitization=False,
                        now=None).start()
  r.address     gRPC target "127.0.0.1:P";  r.url  the Connect Push URL
  r.series()    accepted series, one per (series, sample): {"call", "proto"
                ("grpc"/"connect"), "tenant", "labels" (as sent), "label_order",
                "id", "file", "stored" (label sets Pyroscope would store),
                "time_nanos", "sample_types", "samples"}
  r.profile(s)  the pprof of an accepted series, as profile_pb2.Profile
  r.calls()     every call: {"n", "proto", "status" (gRPC code name), "code"
                (Connect code), "http" (Connect only), "message", "tenant",
                "org_id", "auth" (ok/missing/wrong/none), "auth_scheme",
                "auth_user", "bytes", "series", "accepted", "time", "took"}
  r.refusals()  the calls whose status is not OK
  r.auth_headers  [(call n, Authorization header)], in memory only: secrets
                  never go to out_dir
  r.outage(seconds)  UNAVAILABLE / 503 from now on for that long
  r.stop()      (also a context manager)
  now=          a clock (seconds) for the ingestion window, to pin it in tests

Output directory: calls.jsonl, requests.jsonl (one line per call that stored
something: {"n", "series": [...]}), reqNNNN-sMM-K.pb[.gz] (raw_profile bytes
as received).

CLI (runs until SIGTERM/SIGINT; prints "listening grpc 127.0.0.1:P http
127.0.0.1:Q" once ready):
  /usr/bin/python3 tests/lib/pyroscope_receiver.py --out DIR [--port N]
      [--http-port N] [--tenant-required] [--token T] [--basic USER:PASS]
      [--fail-first N] [--tls CERT KEY] [--client-ca CA] [--port-file F]
"""
import argparse
import atexit
import base64
import gzip
import json
import os
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import grpc

import receiver  # profile_pb2 (the tests' pprof decoder) comes from here
from pyroscope_rules import (DEFAULT_LIMITS, Refused, _decode_push, _invalid, _unauth,
                             check_tenant, push, read_raw_profile)

SERVICE = "push.v1.PusherService"
PATH = f"/{SERVICE}/Push"
_HERE = os.path.dirname(os.path.abspath(__file__))
PROTO_DIR = os.path.join(os.environ.get("PUSHPROF_SOURCE_DIR", os.path.join(_HERE, "..", "..")),
                         "proto", "pyroscope")
# Connect code -> HTTP status, connectrpc/connect-go v1.19.2 (Pyroscope's
# version, grafana/pyroscope go.mod:8) protocol_connect.go:1269 connectCodeToHTTP
HTTP_STATUS = {"invalid_argument": 400, "unauthenticated": 401, "resource_exhausted": 429,
               "unknown": 500, "unimplemented": 501, "unavailable": 503, "internal": 500}

_pb = None
_pb_lock = threading.Lock()


def load_protos():
    """(push_pb2, types_pb2), generated once per process from proto/pyroscope."""
    global _pb
    with _pb_lock:
        if _pb:
            return _pb
        out = tempfile.mkdtemp(prefix="pushprof-pyro-pb2-")
        atexit.register(shutil.rmtree, out, True)
        push_dir = os.path.join(PROTO_DIR, "push", "v1")
        types_dir = os.path.join(PROTO_DIR, "types", "v1")
        subprocess.run(["protoc", "-I", push_dir, "-I", types_dir, "--python_out=" + out,
                        os.path.join(push_dir, "push.proto"),
                        os.path.join(types_dir, "types.proto")],
                       check=True, capture_output=True)
        sys.path.insert(0, out)
        import push_pb2  # noqa: E402
        import types_pb2  # noqa: E402
        _pb = (push_pb2, types_pb2)
        return _pb


# -- the receiver -------------------------------------------------------------
class PyroscopeReceiver(receiver.Recorder):
    def __init__(self, out_dir, port=0, http_port=0, tenant_required=False, token=None,
                 basic=None, fail_first=0, tls=None, client_ca=None, limits=None,
                 label_sanitization=False, now=None):
        self.out = out_dir
        os.makedirs(out_dir, exist_ok=True)
        self.port = port
        self.http_port = http_port
        self.tenant_required = tenant_required  # Pyroscope's multitenancy_enabled
        self.token = token
        self.basic = basic  # (user, password)
        self.fail_first = fail_first
        self.tls = tls
        self.client_ca = client_ca
        self.limits = dict(DEFAULT_LIMITS, **(limits or {}))
        self.label_sanitization = label_sanitization  # not disable_label_sanitization
        self.now = now or time.time  # seconds; a test may pin the clock
        self.auth_headers = []
        self._down_until = 0.0
        self._n = 0
        self._lock = threading.Lock()
        self._server = None
        self._http = None

    @property
    def address(self):
        return f"127.0.0.1:{self.port}"

    @property
    def url(self):
        scheme = "https" if self.tls else "http"
        return f"{scheme}://127.0.0.1:{self.http_port}{PATH}"

    def outage(self, seconds):
        """Answer UNAVAILABLE / 503 for the next `seconds`."""
        self._down_until = time.monotonic() + seconds

    # -- recording: receiver.Recorder -------------------------------------------
    def refusals(self):
        return [c for c in self.calls() if c["status"] != "OK"]

    def series(self):
        return [s for req in self.requests() for s in req["series"]]

    def profile(self, series):
        with open(os.path.join(self.out, series["file"]), "rb") as f:
            raw = f.read()
        return read_raw_profile(raw, 0)[0]

    # -- one call, either protocol ---------------------------------------------
    def _auth(self, header):
        if self.token is None and self.basic is None:
            return "none"
        if not header:
            return "missing"
        ok = []
        if self.token is not None:
            ok.append(f"Bearer {self.token}")
        if self.basic is not None:
            ok.append("Basic " + base64.b64encode(":".join(self.basic).encode()).decode())
        return "ok" if header in ok else "wrong"

    def handle(self, body, headers, proto):
        """Run one Push. headers: lower-case names. Returns (call record,
        Refused or None); the record is written before returning."""
        t0 = time.monotonic()
        with self._lock:
            self._n += 1
            n = self._n
        authz = headers.get("authorization")
        if authz is not None:
            with self._lock:
                self.auth_headers.append((n, authz))
        scheme = authz.split(" ", 1)[0] if authz else None
        user = None
        if scheme == "Basic":
            try:
                user = base64.b64decode(authz.split(" ", 1)[1]).decode().split(":", 1)[0]
            except Exception:
                user = None
        call = {"n": n, "proto": proto, "bytes": len(body), "time": time.time(),
                "org_id": headers.get("x-scope-orgid"), "auth": self._auth(authz),
                "auth_scheme": scheme, "auth_user": user, "tenant": None, "series": None,
                "accepted": 0}
        err = None
        try:
            self._call(n, body, headers, call)
        except Refused as e:
            err = e
            # Go puts the raw bytes of a bad label in its message; show them
            # as \xNN escapes, since grpcio and JSON need valid text
            err.message = err.message.encode("utf-8", "surrogateescape") \
                .decode("utf-8", "backslashreplace")
        call["status"] = err.code.name if err else "OK"
        call["code"] = err.code.name.lower() if err else None
        call["message"] = err.message if err else ""
        if proto == "connect":
            call["http"] = HTTP_STATUS.get(call["code"], 500) if err else 200
        call["took"] = round(time.monotonic() - t0, 4)
        self._append("calls.jsonl", call)
        return call, err

    def _call(self, n, body, headers, call):
        if call["auth"] == "missing":  # the test's gateway, not Pyroscope
            raise _unauth("missing credentials")
        if call["auth"] == "wrong":
            raise _unauth("invalid credentials")
        if n <= self.fail_first or time.monotonic() < self._down_until:
            raise Refused("test receiver: outage", grpc.StatusCode.UNAVAILABLE)
        call["tenant"] = tenant = check_tenant(headers.get("x-scope-orgid"),
                                               self.tenant_required)
        try:
            series = _decode_push(body)
        except ValueError as e:  # connect-go v1.19.2 protocol_connect.go:1137
            raise _invalid(f"unmarshal message: {e}")
        call["series"] = len(series)
        accepted, err = push(series, self.limits, self.label_sanitization,
                             int(self.now() * 1000))
        self._record(n, call, tenant, accepted)
        if err:
            raise err

    def _record(self, n, call, tenant, accepted):
        out = []
        for i, k, labels, raw, pid, p, stored in accepted:
            fname = f"req{n:04d}-s{i:02d}-{k}" + (".pb.gz" if raw[:2] == b"\x1f\x8b" else ".pb")
            with open(os.path.join(self.out, fname), "wb") as f:
                f.write(raw)
            out.append({
                "call": n, "proto": call["proto"], "tenant": tenant,
                "labels": {a: b for a, b in labels}, "label_order": [a for a, _ in labels],
                "id": pid, "file": fname, "stored": stored, "time_nanos": p.time_nanos,
                "sample_types": [[p.string_table[vt.type], p.string_table[vt.unit]]
                                 for vt in p.sample_type],
                "samples": len(p.sample)})
        call["accepted"] = len(out)
        if out:
            self._append("requests.jsonl", {"n": n, "series": out})

    # -- gRPC ---------------------------------------------------------------
    def _grpc_push(self, body, context):
        md = {k.lower(): v for k, v in context.invocation_metadata() if isinstance(v, str)}
        _, err = self.handle(body, md, "grpc")
        if err:
            context.abort(err.code, err.message)
        return b""  # PushResponse{} serializes to nothing

    # -- lifecycle ----------------------------------------------------------
    def start(self):
        load_protos()
        receiver.load_protos()
        opts = [("grpc.max_receive_message_length", self.limits["ingestion_body_limit_bytes"]),
                ("grpc.so_reuseport", 0)]
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=8), options=opts)
        self._server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
            SERVICE, {"Push": grpc.unary_unary_rpc_method_handler(self._grpc_push)}),))
        addr = f"127.0.0.1:{self.port}"
        if self.tls:
            creds = grpc.ssl_server_credentials(
                [(_readb(self.tls[1]), _readb(self.tls[0]))],
                root_certificates=_readb(self.client_ca) if self.client_ca else None,
                require_client_auth=self.client_ca is not None)
            self.port = self._server.add_secure_port(addr, creds)
        else:
            self.port = self._server.add_insecure_port(addr)
        if not self.port:
            raise RuntimeError(f"cannot bind {addr}")
        self._server.start()
        self._http = ThreadingHTTPServer(("127.0.0.1", self.http_port), _ConnectHandler)
        self._http.daemon_threads = True
        self._http.rcv = self
        if self.tls:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(*self.tls)
            if self.client_ca:
                ctx.load_verify_locations(self.client_ca)
                ctx.verify_mode = ssl.CERT_REQUIRED
            self._http.socket = ctx.wrap_socket(self._http.socket, server_side=True)
        self.http_port = self._http.server_address[1]
        threading.Thread(target=self._http.serve_forever, daemon=True).start()
        return self

    def stop(self):
        if self._server:
            self._server.stop(0).wait(5)
            self._server = None
        if self._http:
            self._http.shutdown()
            self._http.server_close()
            self._http = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def _readb(path):
    with open(path, "rb") as f:
        return f.read()


class _ConnectHandler(BaseHTTPRequestHandler):
    """Connect unary over HTTP/1.1, as connect-go v1.19.2 handler.go:274-296
    and protocol_connect.go answer it."""
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def _send(self, status, body=b"", ctype=None, extra=()):
        self.send_response(status)
        if ctype:
            self.send_header("Content-Type", ctype)
        for k, v in extra:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _error(self, code, message):
        body = {"code": code}
        if message:
            body["message"] = message
        self._send(HTTP_STATUS[code], json.dumps(body, separators=(",", ":")).encode(),
                   "application/json")

    def do_GET(self):
        self._drain()
        if self.path != PATH:
            return self._send(404, b"404 page not found\n", "text/plain; charset=utf-8")
        self._send(405, extra=[("Allow", "POST")])

    do_PUT = do_DELETE = do_GET

    def _drain(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def _chunks(self):
        out = bytearray()
        while True:
            n = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
            if n == 0:
                while self.rfile.readline().strip():  # trailers
                    pass
                return bytes(out)
            out += self.rfile.read(n)
            self.rfile.readline()

    def do_POST(self):
        rcv = self.server.rcv
        size = int(self.headers.get("Content-Length") or 0)
        lim = rcv.limits["ingestion_body_limit_bytes"]
        if lim and size > lim:  # connect-go protocol_connect.go:1126
            self.close_connection = True
            return self._error("resource_exhausted",
                               f"message size {size} is larger than configured max {lim}")
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            body = self._chunks()  # a client streaming its body (libcurl may)
            size = len(body)
            if lim and size > lim:
                return self._error("resource_exhausted",
                                   f"message size {size} is larger than configured max {lim}")
        else:
            body = self.rfile.read(size) if size else b""
        if self.path != PATH:
            return self._send(404, b"404 page not found\n", "text/plain; charset=utf-8")
        ctype = (self.headers.get("Content-Type") or "").strip()
        base = ctype.lower() if ";" not in ctype else ctype  # parameters make it no match
        if base not in ("application/proto", "application/json"):
            return self._send(415, extra=[("Accept-Post", "application/json, application/proto")])
        enc = self.headers.get("Content-Encoding") or "identity"
        if enc not in ("identity", "gzip"):  # connect-go protocol.go:308-323
            return self._error("unimplemented",
                               f"unknown compression \"{enc}\": supported encodings are gzip")
        if enc == "gzip" and body:
            try:
                body = gzip.decompress(body)
            except Exception as e:
                return self._error("invalid_argument", f"decompress: {e}")
        if base == "application/json":
            from google.protobuf import json_format
            try:
                body = json_format.Parse(body or b"{}", load_protos()[0].PushRequest()) \
                    .SerializeToString()
            except Exception as e:
                return self._error("invalid_argument", f"unmarshal message: {e}")
        headers = {k.lower(): v for k, v in self.headers.items()}
        _, err = rcv.handle(body, headers, "connect")
        if err:
            return self._error(err.code.name.lower(), err.message)
        self._send(200, b"{}" if base == "application/json" else b"", base)


def main():
    ap = argparse.ArgumentParser(description="Pyroscope-compatible Push test receiver")
    ap.add_argument("--out", required=True)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--http-port", type=int, default=0)
    ap.add_argument("--tenant-required", action="store_true")
    ap.add_argument("--token")
    ap.add_argument("--basic", help="USER:PASS")
    ap.add_argument("--fail-first", type=int, default=0)
    ap.add_argument("--tls", nargs=2, metavar=("CERT", "KEY"))
    ap.add_argument("--client-ca")
    ap.add_argument("--port-file", help="gets 'GRPC_PORT HTTP_PORT'")
    a = ap.parse_args()
    r = PyroscopeReceiver(a.out, port=a.port, http_port=a.http_port,
                          tenant_required=a.tenant_required, token=a.token,
                          basic=tuple(a.basic.split(":", 1)) if a.basic else None,
                          fail_first=a.fail_first, tls=a.tls, client_ca=a.client_ca).start()
    if a.port_file:
        with open(a.port_file + ".tmp", "w") as f:
            f.write(f"{r.port} {r.http_port}")
        os.rename(a.port_file + ".tmp", a.port_file)
    print(f"listening grpc {r.address} http 127.0.0.1:{r.http_port}", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    stop.wait()
    r.stop()


if __name__ == "__main__":
    main()
