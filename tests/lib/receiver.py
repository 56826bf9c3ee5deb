#!/usr/bin/python3
"""A Parca-compatible WriteRaw receiver for tests (Debian python3-grpcio).

Serves /parca.profilestore.v1alpha1.ProfileStoreService/WriteRaw on
127.0.0.1:<port> and applies the checks a Parca server applies to every
series (shared/reference/parca-wire.md): `__name__` present, label names
valid Prometheus names without duplicates, and every raw_profile (gunzipped
when it starts with 1f 8b) parses as pprof with string_table[0] == "", ids
sequential from 1, string indexes in range, one value per sample type,
location/function/mapping references in range, executable_info count equal
to the mapping count, profile-type parts free of '-' and '.'. A failing
request gets INVALID_ARGUMENT with the reason.

Message classes are generated at start-up with `protoc --python_out` from the
project's own proto/ files into a temp dir; nothing here uses the agent's C
code.

CLI (runs until SIGTERM/SIGINT; prints "listening 127.0.0.1:PORT" once ready):
  /usr/bin/python3 tests/lib/receiver.py --port N --out DIR
      [--token T]            require "authorization: Bearer T" (UNAUTHENTICATED otherwise)
      [--fail-first N]       answer the first N calls with UNAVAILABLE
      [--tls CERT KEY]       serve TLS with this PEM certificate chain and key
      [--client-ca CA]       with --tls: require client certificates signed by CA (mTLS)
      [--hang]               accept calls and never answer them
      [--max-message-bytes B] receive limit (default 64 MiB, as Parca)
      [--port-file F]        write the bound port to F (useful with --port 0)
      [--debuginfo MODE]     DebuginfoService: "yes" (default) answers
                             ShouldInitiateUpload true, "no" false, "down"
                             answers every debuginfo RPC UNAVAILABLE, "hang"
                             never answers them, "absent" answers them
                             UNIMPLEMENTED as a server without the service
                             does (WriteRaw unaffected)

Output directory (read by tests; also available from the Receiver object):
  calls.jsonl      one line per call: {"n", "status", "message", "auth",
                   "bytes", "series", "time", "took" (seconds in the handler)};
                   "auth" is "ok", "missing", "wrong" or "none" (no token
                   required) - never the token
  requests.jsonl   one line per accepted request: {"n", "bytes",
                   "normalized", "series": [{"labels": {...}, "files": [...]}]}
  reqNNNN-sMM-K.pb[.gz]  the raw_profile bytes exactly as received
  debuginfo.jsonl  one line per debuginfo RPC: {"rpc", "build_id", "status",
                   ...}: "hash", "size", "build_id_type", "type" (Should/
                   Initiate), "upload_id", "bytes", "file" (Upload),
                   "chunks" (number of chunk_data messages)
  dbg-<build_id>-<upload_id>.bin  the uploaded debuginfo bytes

Library:
  from receiver import Receiver
  r = Receiver(out_dir, token=None, fail_first=0, tls=None, client_ca=None,
               hang=False).start()          # r.port, r.address
  ... r.requests(), r.calls() ...
  r.stop()
"""
import argparse
import atexit
import gzip
import json
import os
import re
import signal
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent import futures

import grpc

_HERE = os.path.dirname(os.path.abspath(__file__))
PROTO_DIR = os.path.join(os.environ.get("PUSHPROF_SOURCE_DIR", os.path.join(_HERE, "..", "..")),
                         "proto")
LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
MAX_PROFILE = 64 << 20

_pb = None
_dbg = None
_pb_lock = threading.Lock()


def load_protos():
    """Generate and import the message classes once per process."""
    global _pb
    with _pb_lock:
        if _pb:
            return _pb
        out = tempfile.mkdtemp(prefix="pushprof-pb2-")
        # the generated modules are imported at once; the directory goes
        # when the process ends (a suite run used to leave ~1,000 behind)
        atexit.register(shutil.rmtree, out, True)
        files = ["profile.proto", "parca/profilestore/v1alpha1/profilestore.proto",
                 "parca/debuginfo/v1alpha1/debuginfo.proto"]
        subprocess.run(["protoc", "-I", PROTO_DIR, "--python_out=" + out] +
                       [os.path.join(PROTO_DIR, f) for f in files],
                       check=True, capture_output=True)
        sys.path.insert(0, out)
        import profile_pb2  # noqa: E402
        from parca.profilestore.v1alpha1 import profilestore_pb2  # noqa: E402
        from parca.debuginfo.v1alpha1 import debuginfo_pb2  # noqa: E402
        global _dbg
        _dbg = debuginfo_pb2
        _pb = (profile_pb2, profilestore_pb2)
        return _pb


def load_debuginfo_proto():
    load_protos()
    return _dbg


class Invalid(Exception):
    pass


def validate_profile(raw, n_exec_info=None):
    """Parca's checks on one raw_profile; returns the parsed Profile."""
    profile_pb2, _ = load_protos()
    data = raw
    if data[:2] == b"\x1f\x8b":
        try:
            with gzip.GzipFile(fileobj=__import__("io").BytesIO(data)) as g:
                data = g.read(MAX_PROFILE + 1)
        except (OSError, EOFError) as e:
            raise Invalid(f"failed to decompress profile: {e}")
        if len(data) > MAX_PROFILE:
            raise Invalid("decompressed profile too large")
    p = profile_pb2.Profile()
    try:
        p.ParseFromString(data)
    except Exception as e:  # google.protobuf.message.DecodeError
        raise Invalid(f"failed to parse profile: {e}")
    st = p.string_table
    if not st or st[0] != "":
        raise Invalid("string_table[0] must be empty")

    def s(i, what):
        if i < 0 or i >= len(st):
            raise Invalid(f"{what}: string index {i} out of range ({len(st)})")
        return st[i]

    def type_part(i, what):
        v = s(i, what)
        if "-" in v or "." in v or ":" in v:
            raise Invalid(f"{what} {v!r} is not a valid profile type part")

    for vt in p.sample_type:
        type_part(vt.type, "sample_type.type")
        type_part(vt.unit, "sample_type.unit")
    if p.HasField("period_type"):
        type_part(p.period_type.type, "period_type.type")
        type_part(p.period_type.unit, "period_type.unit")
    for i in (p.drop_frames, p.keep_frames, p.default_sample_type, p.doc_url, *p.comment):
        s(i, "profile string field")
    for n, m in enumerate(p.mapping, 1):
        if m.id != n:
            raise Invalid(f"mapping id {m.id} at position {n}: ids must be sequential from 1")
        s(m.filename, "mapping.filename")
        s(m.build_id, "mapping.build_id")
    for n, f in enumerate(p.function, 1):
        if f.id != n:
            raise Invalid(f"function id {f.id} at position {n}: ids must be sequential from 1")
        s(f.name, "function.name")
        s(f.system_name, "function.system_name")
        s(f.filename, "function.filename")
    for n, loc in enumerate(p.location, 1):
        if loc.id != n:
            raise Invalid(f"location id {loc.id} at position {n}: ids must be sequential from 1")
        if loc.mapping_id > len(p.mapping):
            raise Invalid(f"location {n}: mapping id {loc.mapping_id} out of range")
        for line in loc.line:
            if line.function_id == 0 or line.function_id > len(p.function):
                raise Invalid(f"location {n}: function id {line.function_id} out of range")
    for n, smp in enumerate(p.sample):
        if len(smp.value) != len(p.sample_type):
            raise Invalid(f"sample {n}: {len(smp.value)} values for "
                          f"{len(p.sample_type)} sample types")
        for lid in smp.location_id:
            if lid == 0 or lid > len(p.location):
                raise Invalid(f"sample {n}: location id {lid} out of range")
        for lab in smp.label:
            s(lab.key, "label.key")
            s(lab.str, "label.str")
            s(lab.num_unit, "label.num_unit")
    if n_exec_info and n_exec_info != len(p.mapping):
        raise Invalid(f"executable_info has {n_exec_info} entries for {len(p.mapping)} mappings")
    return p


def validate_labels(labelset):
    names = [lab.name for lab in labelset.labels]
    if "__name__" not in names:
        raise Invalid("missing __name__ label")
    seen = set()
    for name in names:
        if not LABEL_NAME.match(name):
            raise Invalid(f"invalid label name {name!r}")
        if name in seen:
            raise Invalid(f"duplicate label name {name!r}")
        seen.add(name)


class Recorder:
    """What a test receiver saw, as JSON lines in self.out (calls.jsonl,
    requests.jsonl), under self._lock: shared by this receiver and
    pyroscope_receiver.py."""

    def _append(self, name, obj):
        with self._lock:
            with open(os.path.join(self.out, name), "a") as f:
                f.write(json.dumps(obj) + "\n")

    def _read(self, name):
        path = os.path.join(self.out, name)
        if not os.path.exists(path):
            return []
        with self._lock, open(path) as f:
            return [json.loads(line) for line in f if line.strip()]

    def calls(self):
        return self._read("calls.jsonl")

    def requests(self):
        return self._read("requests.jsonl")


class Receiver(Recorder):
    def __init__(self, out_dir, port=0, token=None, fail_first=0, tls=None, client_ca=None,
                 hang=False, max_message_bytes=64 << 20, debuginfo="yes"):
        self.out = out_dir
        os.makedirs(out_dir, exist_ok=True)
        self.port = port
        self.token = token
        self.fail_first = fail_first
        self.tls = tls
        self.client_ca = client_ca
        self.hang = hang
        self.max_message_bytes = max_message_bytes
        self.debuginfo = debuginfo
        self._uploads = {}   # upload_id -> build_id (from InitiateUpload)
        self._n = 0
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server = None

    @property
    def address(self):
        return f"127.0.0.1:{self.port}"

    def series(self):
        """Every accepted series, flattened: [{"labels", "files", "request"}]."""
        out = []
        for req in self.requests():
            for s in req["series"]:
                out.append(dict(s, request=req["n"]))
        return out

    # -- the RPC -----------------------------------------------------------
    def _write_raw(self, request, context):
        _, ps = load_protos()
        with self._lock:
            self._n += 1
            n = self._n
        size = request.ByteSize()
        call = {"n": n, "bytes": size, "series": len(request.series), "time": time.time()}
        md = dict(context.invocation_metadata())
        auth = md.get("authorization")
        if self.token is None:
            call["auth"] = "none"
        elif auth is None:
            call["auth"] = "missing"
        elif auth == f"Bearer {self.token}":
            call["auth"] = "ok"
        else:
            call["auth"] = "wrong"
        call["metadata_keys"] = sorted(k for k in md if k != "authorization")
        call["headers"] = {k: v for k, v in md.items()
                           if k.startswith("x-") and isinstance(v, str)}

        t_start = time.monotonic()

        def finish(code, msg):
            call["status"] = code.name
            call["message"] = msg
            call["took"] = round(time.monotonic() - t_start, 4)  # validation + writes
            self._append("calls.jsonl", call)
            if code != grpc.StatusCode.OK:
                context.abort(code, msg)

        if self.hang:
            call["status"] = "HANG"
            self._append("calls.jsonl", call)
            self._stopping.wait()
            context.abort(grpc.StatusCode.UNAVAILABLE, "receiver stopping")
        if call["auth"] in ("missing", "wrong"):
            finish(grpc.StatusCode.UNAUTHENTICATED,
                   "missing bearer token" if call["auth"] == "missing" else "invalid token")
        if n <= self.fail_first:
            finish(grpc.StatusCode.UNAVAILABLE, f"test receiver: failing call {n} of "
                   f"the first {self.fail_first}")
        recorded = []
        try:
            for i, series in enumerate(request.series):
                validate_labels(series.labels)
                for k, smp in enumerate(series.samples):
                    validate_profile(smp.raw_profile, len(smp.executable_info))
        except Invalid as e:
            finish(grpc.StatusCode.INVALID_ARGUMENT, str(e))
        for i, series in enumerate(request.series):
            files = []
            for k, smp in enumerate(series.samples):
                ext = ".pb.gz" if smp.raw_profile[:2] == b"\x1f\x8b" else ".pb"
                fname = f"req{n:04d}-s{i:02d}-{k}{ext}"
                with open(os.path.join(self.out, fname), "wb") as f:
                    f.write(smp.raw_profile)
                files.append(fname)
            recorded.append({"labels": {lab.name: lab.value for lab in series.labels.labels},
                             "label_order": [lab.name for lab in series.labels.labels],
                             "files": files})
        self._append("requests.jsonl", {"n": n, "bytes": size,
                                        "normalized": request.normalized,
                                        "series": recorded})
        finish(grpc.StatusCode.OK, "")
        return ps.WriteRawResponse()

    # -- DebuginfoService ---------------------------------------------------
    def debuginfo_calls(self):
        return self._read("debuginfo.jsonl")

    def _dbg_finish(self, context, rec):
        md = dict(context.invocation_metadata())
        if self.token is not None and md.get("authorization") != f"Bearer {self.token}":
            rec["status"] = "UNAUTHENTICATED"
            self._append("debuginfo.jsonl", rec)
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "bad or missing bearer token")
        if self.debuginfo == "hang":
            rec["status"] = "HANG"
            self._append("debuginfo.jsonl", rec)
            self._stopping.wait()
            context.abort(grpc.StatusCode.UNAVAILABLE, "receiver stopping")
        if self.debuginfo == "absent":
            rec["status"] = "UNIMPLEMENTED"
            self._append("debuginfo.jsonl", rec)
            context.abort(grpc.StatusCode.UNIMPLEMENTED, "Method not found!")
        if self.debuginfo == "down":
            rec["status"] = "UNAVAILABLE"
            self._append("debuginfo.jsonl", rec)
            context.abort(grpc.StatusCode.UNAVAILABLE, "test receiver: debuginfo down")
        rec["status"] = "OK"
        rec["time"] = time.time()
        self._append("debuginfo.jsonl", rec)

    def _should(self, req, context):
        db = load_debuginfo_proto()
        self._dbg_finish(context, {"rpc": "ShouldInitiateUpload", "build_id": req.build_id,
                                   "hash": req.hash, "type": req.type,
                                   "build_id_type": req.build_id_type})
        yes = self.debuginfo == "yes"
        return db.ShouldInitiateUploadResponse(
            should_initiate_upload=yes, reason="" if yes else "test receiver says no")

    def _initiate(self, req, context):
        db = load_debuginfo_proto()
        if not req.hash or req.size <= 0 or req.size > 1000000000:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "hash and size (1..1e9) required")
        with self._lock:
            upload_id = f"u{len(self._uploads) + 1}"
            self._uploads[upload_id] = req.build_id
        self._dbg_finish(context, {"rpc": "InitiateUpload", "build_id": req.build_id,
                                   "hash": req.hash, "size": req.size, "type": req.type,
                                   "build_id_type": req.build_id_type,
                                   "upload_id": upload_id})
        return db.InitiateUploadResponse(upload_instructions=db.UploadInstructions(
            build_id=req.build_id, upload_id=upload_id,
            upload_strategy=db.UploadInstructions.UPLOAD_STRATEGY_GRPC, type=req.type))

    def _upload(self, it, context):
        db = load_debuginfo_proto()
        info = None
        data = bytearray()
        chunks = 0
        for msg in it:
            if info is None:
                if msg.WhichOneof("data") != "info":
                    context.abort(grpc.StatusCode.INVALID_ARGUMENT, "first message must be info")
                info = msg.info
                continue
            if msg.WhichOneof("data") != "chunk_data":
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, "expected chunk_data")
            if len(msg.chunk_data) > 8 << 20:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, "chunk above 8 MiB")
            data += msg.chunk_data
            chunks += 1
        if info is None:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "empty stream")
        with self._lock:
            known = self._uploads.get(info.upload_id) == info.build_id
        if not known:
            context.abort(grpc.StatusCode.NOT_FOUND, "unknown upload id")
        fname = f"dbg-{info.build_id}-{info.upload_id}.bin"
        with open(os.path.join(self.out, fname), "wb") as f:
            f.write(data)
        self._dbg_finish(context, {"rpc": "Upload", "build_id": info.build_id,
                                   "upload_id": info.upload_id, "type": info.type,
                                   "bytes": len(data), "chunks": chunks, "file": fname})
        return db.UploadResponse(build_id=info.build_id, size=len(data))

    def _mark(self, req, context):
        db = load_debuginfo_proto()
        self._dbg_finish(context, {"rpc": "MarkUploadFinished", "build_id": req.build_id,
                                   "upload_id": req.upload_id, "type": req.type})
        return db.MarkUploadFinishedResponse()

    # -- lifecycle ---------------------------------------------------------
    def start(self):
        _, ps = load_protos()
        db = load_debuginfo_proto()
        opts = [("grpc.max_receive_message_length", self.max_message_bytes),
                ("grpc.so_reuseport", 0)]
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=8), options=opts)
        handler = grpc.method_handlers_generic_handler(
            "parca.profilestore.v1alpha1.ProfileStoreService",
            {"WriteRaw": grpc.unary_unary_rpc_method_handler(
                self._write_raw,
                request_deserializer=ps.WriteRawRequest.FromString,
                response_serializer=ps.WriteRawResponse.SerializeToString)})
        def unary(fn, req, resp):
            return grpc.unary_unary_rpc_method_handler(
                fn, request_deserializer=req.FromString,
                response_serializer=resp.SerializeToString)
        dbg = grpc.method_handlers_generic_handler(
            "parca.debuginfo.v1alpha1.DebuginfoService",
            {"ShouldInitiateUpload": unary(self._should, db.ShouldInitiateUploadRequest,
                                           db.ShouldInitiateUploadResponse),
             "InitiateUpload": unary(self._initiate, db.InitiateUploadRequest,
                                     db.InitiateUploadResponse),
             "MarkUploadFinished": unary(self._mark, db.MarkUploadFinishedRequest,
                                         db.MarkUploadFinishedResponse),
             "Upload": grpc.stream_unary_rpc_method_handler(
                 self._upload, request_deserializer=db.UploadRequest.FromString,
                 response_serializer=db.UploadResponse.SerializeToString)})
        self._server.add_generic_rpc_handlers((handler, dbg))
        addr = f"127.0.0.1:{self.port}"
        if self.tls:
            cert, key = self.tls
            with open(cert, "rb") as f:
                cert_pem = f.read()
            with open(key, "rb") as f:
                key_pem = f.read()
            ca = None
            if self.client_ca:
                with open(self.client_ca, "rb") as f:
                    ca = f.read()
            creds = grpc.ssl_server_credentials([(key_pem, cert_pem)], root_certificates=ca,
                                                require_client_auth=ca is not None)
            self.port = self._server.add_secure_port(addr, creds)
        else:
            self.port = self._server.add_insecure_port(addr)
        if not self.port:
            raise RuntimeError(f"cannot bind {addr}")
        self._server.start()
        return self

    def stop(self):
        self._stopping.set()
        if self._server:
            self._server.stop(0).wait(5)
            self._server = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def main():
    ap = argparse.ArgumentParser(description="Parca-compatible WriteRaw test receiver")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--out", required=True)
    ap.add_argument("--token")
    ap.add_argument("--fail-first", type=int, default=0)
    ap.add_argument("--tls", nargs=2, metavar=("CERT", "KEY"))
    ap.add_argument("--client-ca")
    ap.add_argument("--hang", action="store_true")
    ap.add_argument("--max-message-bytes", type=int, default=64 << 20)
    ap.add_argument("--port-file")
    ap.add_argument("--debuginfo", choices=("yes", "no", "down", "hang", "absent"), default="yes")
    a = ap.parse_args()
    r = Receiver(a.out, port=a.port, token=a.token, fail_first=a.fail_first, tls=a.tls,
                 client_ca=a.client_ca, hang=a.hang,
                 max_message_bytes=a.max_message_bytes, debuginfo=a.debuginfo).start()
    if a.port_file:
        with open(a.port_file + ".tmp", "w") as f:
            f.write(str(r.port))
        os.rename(a.port_file + ".tmp", a.port_file)
    print(f"listening {r.address}", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    stop.wait()
    r.stop()


if __name__ == "__main__":
    main()
