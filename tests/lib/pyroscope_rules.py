"""Grafana Pyroscope's ingestion rules for push.v1.PusherService/Push, in
Python, for tests (used by pyroscope_receiver.py; no servers here).

Taken from grafana/pyroscope at commit
3fe6a457a32004efc46da819cbc114472d07415e ("UP" below); every rule cites the
upstream file and line it mirrors, and the libraries Pyroscope pins there
(connect-go v1.19.2, dskit e96eda8260cd, prometheus/common v0.67.5) where
the behaviour lives in them. An answer is a Refused: a gRPC code (the Connect
code is its lower-case name) and Pyroscope's message.
"""
import json
import re
import time
import zlib

import grpc

import receiver  # profile_pb2 (the tests' pprof decoder) comes from here

UP = "grafana/pyroscope@3fe6a457"
ANONYMOUS = "anonymous"              # UP pkg/tenant/interceptor.go:14
SERVICE_NAME_FALLBACK = "unknown_service"  # UP pkg/model/labels.go:62

# UP pkg/validation/limits.go RegisterFlags defaults (line of each)
DEFAULT_LIMITS = {
    "max_label_name_length": 1024,              # :162
    "max_label_value_length": 2048,             # :163
    "max_label_names_per_series": 30,           # :164
    "max_profile_size_bytes": 4 * 1024 * 1024,  # :190, uncompressed
    "max_profile_stacktrace_samples": 16000,    # :191
    "max_profile_stacktrace_sample_labels": 100,  # :192
    "reject_newer_than": 10 * 60,               # :214, seconds
    "reject_older_than": 60 * 60,               # :217, seconds
    "ingestion_body_limit_bytes": 256 << 20,    # :158 256 "MB" (x bytesInMB, :327-328)
}


class Refused(Exception):
    """A refusal. kind: "connect" (carries code), "validation" (a Pyroscope
    validation.Error not yet given a code) or "plain" (any other Go error)."""

    def __init__(self, message, code=None, kind="connect"):
        super().__init__(message)
        self.message = message
        self.code = code
        self.kind = kind


def _invalid(msg):
    return Refused(msg, grpc.StatusCode.INVALID_ARGUMENT)


def _unauth(msg):
    return Refused(msg, grpc.StatusCode.UNAUTHENTICATED)


# -- protobuf wire format ---------------------------------------------------
def _varint(b, i):
    x = shift = 0
    while True:
        if i >= len(b):
            raise ValueError("unexpected EOF")
        c = b[i]
        i += 1
        x |= (c & 0x7F) << shift
        if c < 0x80:
            return x, i
        shift += 7
        if shift >= 64:
            raise ValueError("proto: integer overflow")


def _fields(b):
    """(field number, wire type, value, start, end) of each top-level field."""
    i = 0
    while i < len(b):
        start = i
        key, i = _varint(b, i)
        num, wt = key >> 3, key & 7
        if num == 0:
            raise ValueError("proto: illegal tag 0")
        if wt == 0:
            v, i = _varint(b, i)
        elif wt in (1, 5):
            n = 8 if wt == 1 else 4
            v, i = b[i:i + n], i + n
        elif wt == 2:
            n, i = _varint(b, i)
            v, i = b[i:i + n], i + n
        elif wt == 4:
            raise ValueError("proto: unexpected end of group")
        else:
            raise ValueError(f"proto: illegal wireType {wt}")
        if i > len(b):
            raise ValueError("unexpected EOF")
        yield num, wt, v, start, i


def _text(b):
    # like Go's string(bytes): any bytes; invalid UTF-8 survives as surrogates
    return bytes(b).decode("utf-8", "surrogateescape")


def _utf8(s):
    try:
        s.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


def _blen(s):
    return len(s.encode("utf-8", "surrogateescape"))


def _decode_push(body):
    """PushRequest -> [{"labels": [[name, value]], "samples": [(raw, id)]}].
    Field numbers: UP api/push/v1/push.proto:18-50, api/types/v1/types.proto:7-13.
    Strings are not checked for UTF-8 here: Pyroscope's vtproto codec does
    not (UP pkg/api/connect/codec.go:86-90), ValidateLabels does."""
    def want(num, wt, what):
        if wt != 2:
            raise ValueError(f"proto: wrong wireType = {wt} for field {what}")

    series = []
    for num, wt, v, _, _ in _fields(body):
        if num != 1:
            continue
        want(num, wt, "Series")
        s = {"labels": [], "samples": []}
        for n2, wt2, v2, _, _ in _fields(v):
            if n2 == 1:
                want(n2, wt2, "Labels")
                pair = ["", ""]
                for n3, wt3, v3, _, _ in _fields(v2):
                    if n3 in (1, 2):
                        want(n3, wt3, "Name" if n3 == 1 else "Value")
                        pair[n3 - 1] = _text(v3)
                s["labels"].append(pair)
            elif n2 == 2:
                want(n2, wt2, "Samples")
                raw, pid = b"", ""
                for n3, wt3, v3, _, _ in _fields(v2):
                    if n3 == 1:
                        want(n3, wt3, "RawProfile")
                        raw = bytes(v3)
                    elif n3 == 2:
                        want(n3, wt3, "ID")
                        pid = _text(v3)
                s["samples"].append((raw, pid))
        series.append(s)
    return series


# -- raw_profile -> pprof (UP pkg/pprof/pprof.go:66-78, 103-139) --------------
class _SizeLimit(Exception):
    pass


def _gunzip(raw, limit):
    """Go's multistream gzip.Reader behind an io.LimitReader(limit + 1)."""
    out = bytearray()
    pos = 0
    while True:
        rest = raw[pos:]
        if pos:  # after a member: EOF ends the stream, anything else must be gzip
            if not rest:
                return bytes(out)
            if len(rest) < 10:
                raise Refused("copy to buffer: unexpected EOF", kind="plain")
            if rest[:3] != b"\x1f\x8b\x08":
                raise Refused("copy to buffer: gzip: invalid header", kind="plain")
        d = zlib.decompressobj(31)
        try:
            out += d.decompress(rest, (limit + 1 - len(out)) if limit else 0)
        except zlib.error as e:
            what = "gzip: invalid checksum" if "check" in str(e) else f"flate: corrupt input ({e})"
            raise Refused(f"copy to buffer: {what}", kind="plain")
        if limit and len(out) > limit:
            raise _SizeLimit()
        if not d.eof:
            raise Refused("copy to buffer: unexpected EOF", kind="plain")
        pos = len(raw) - len(d.unused_data)


def _parse_profile(data):
    """profile_pb2.Profile and the string_table entries that are not UTF-8.
    The top level is walked first, strictly as Go's vtproto decoder would
    (upb shrugs off a stray end-group tag, so plain text could "parse").
    vtproto takes any bytes as a string (UP
    api/gen/proto/go/google/v1/profile_vtproto.pb.go:1738) and leaves UTF-8
    to ValidateProfile; upb refuses them, so such entries are swapped for a
    stand-in here and reported by validate_profile."""
    bad, parts, last = [], [], 0
    try:
        for num, wt, v, start, end in _fields(data):
            if num == 6 and wt == 2 and not _utf8(_text(v)):
                bad.append(bytes(v))
                fixed = bytes(v).decode("utf-8", "replace").encode()
                parts += [data[last:start], b"\x32", _uvarint(len(fixed)), fixed]
                last = end
    except ValueError as e:
        raise Refused(str(e), kind="plain")
    if bad:
        data = b"".join(parts) + data[last:]
    p = receiver.load_protos()[0].Profile()
    try:
        p.ParseFromString(data)
    except Exception as e:  # google.protobuf.message.DecodeError
        raise Refused(f"proto: {e}", kind="plain")
    return p, bad


def _uvarint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _humanize(n):
    """go-humanize Bytes (SI), as in Pyroscope's size-limit messages."""
    if n < 10:
        return f"{n} B"
    units = ["B", "kB", "MB", "GB", "TB"]
    e = 0
    while n >= 1000 ** (e + 1) and e < len(units) - 1:
        e += 1
    v = int(n / 1000 ** e * 10 + 0.5) / 10
    return f"{v:.0f} {units[e]}" if v >= 10 else f"{v:.1f} {units[e]}"


def read_raw_profile(raw, max_size):
    """(Profile, uncompressed size, non-UTF-8 strings): pprof.RawFromBytesWithLimit."""
    if len(raw) < 10:
        # the gzip reader wants a 10-byte header before it decides "not gzip"
        raise Refused("gzip reset: " + ("EOF" if not raw else "unexpected EOF"), kind="plain")
    try:
        if raw[:3] == b"\x1f\x8b\x08":
            data = _gunzip(raw, max_size)
        else:  # gzip.ErrHeader: plain protobuf (UP pkg/pprof/pprof.go:69-72)
            data = raw
            if max_size and len(data) > max_size:
                raise _SizeLimit()
    except _SizeLimit:
        # UP pkg/distributor/distributor.go:353-360: a validation error
        raise Refused("uncompressed profile payload size exceeds limit of "
                      + _humanize(max_size), kind="validation")
    p, bad = _parse_profile(data)
    return p, len(data), bad


# -- labels -------------------------------------------------------------------
def _quote(s):
    return json.dumps(s, ensure_ascii=False)  # ~ Go strconv.Quote


def labels_string(ls):
    """UP pkg/model/labels.go:351 LabelPairsString."""
    return "{" + ", ".join(f"{n}={_quote(v)}" for n, v in ls) + "}"


def _get(ls, name):
    return next((v for n, v in ls if n == name), "")


class _Builder:
    """UP pkg/model/labels.go:443-560 LabelsBuilder: an empty value deletes
    every label of that name (Reset and Set)."""

    def __init__(self, base):
        self.base = list(base)
        self.dele = {n for n, v in base if v == ""}
        self.add = {}

    def get(self, n):
        if n in self.add:
            return self.add[n]
        return "" if n in self.dele else _get(self.base, n)

    def set(self, n, v):
        if v == "":
            self.add.pop(n, None)
            self.dele.add(n)
        else:
            self.add[n] = v

    def labels(self):
        out = [[n, v] for n, v in self.base if n not in self.dele and n not in self.add]
        return sorted(out + [[n, v] for n, v in self.add.items()], key=lambda l: l[0])


_GODELTA = re.compile(r"godeltaprof_(.*)", re.S)


def _default_relabel(b):
    """Pyroscope's built-in ingestion relabel rules, UP
    pkg/validation/relabeling.go:14-56 (position "first", limits.go:220)."""
    m = _GODELTA.fullmatch(b.get("__name__"))
    if m:
        b.set("__name_replaced__", m.group(0))
    if _GODELTA.fullmatch(b.get("__name_replaced__")):
        b.set("__delta__", "false")
    m = _GODELTA.fullmatch(b.get("__name__"))
    if m:
        b.set("__name__", m.group(1))
    if b.get("__name__") + "/" + b.get("__type__") == "wall/cpu":
        b.set("__name_replaced__", "wall")
        b.set("__name__", "process_cpu")


def _sanitize_legacy(name):
    """UP pkg/validation/validate.go:247-271 SanitizeLegacyLabelName."""
    if not name:
        return name, False
    for i, c in enumerate(name):
        if not (c.isascii() and (c.isalpha() or c == "_" or (c.isdigit() and i > 0))) \
                and c != ".":
            return name, False
    return name.replace(".", "_"), True


def validate_labels(ls, lim, sanitize):
    """UP pkg/validation/validate.go:130-202 ValidateLabels; returns the
    labels as Pyroscope stores them (sorted, maybe sanitized)."""
    if not ls:  # :131
        raise _invalid("error at least one label pair is required per profile")
    ls = sorted(ls, key=lambda l: l[0])  # :134 (sorts: input order is free)
    if len(ls) > lim["max_label_names_per_series"]:  # :137
        raise _invalid(f"profile series '{labels_string(ls)}' has {len(ls)} label names; "
                       f"limit {lim['max_label_names_per_series']}")
    name = _get(ls, "__name__")
    if not name or not _utf8(name):  # :141, prometheus/common v0.67.5 model/metric.go:161
        raise _invalid(f"invalid labels '{labels_string(ls)}' with error: invalid metric name")
    if _get(ls, "service_name") == "":  # :145, :441
        raise _invalid(f"invalid labels '{labels_string(ls)}' with error: "
                       "service name is not provided")
    i, last = 0, ""
    while i < len(ls):
        n, v = ls[i]
        if _blen(n) > lim["max_label_name_length"]:  # :158
            raise _invalid(f"profile with labels '{labels_string(ls)}' has label name too long: '{n}'")
        if _blen(v) > lim["max_label_value_length"]:  # :161
            raise _invalid(f"profile with labels '{labels_string(ls)}' has label value too long: '{v}'")
        if not sanitize:
            # :164-168 (disable_label_sanitization defaults to true,
            # limits.go:167): any non-empty UTF-8 name, prometheus/common
            # v0.67.5 model/metric.go:184-201
            if not n or not _utf8(n):
                raise _invalid(f"invalid labels '{labels_string(ls)}' with error: "
                               f"invalid label name '{n}'")
        else:
            new, ok = _sanitize_legacy(n)  # :170
            if not ok:  # :187
                raise _invalid(f"invalid labels '{labels_string(ls)}' with error: "
                               f"invalid label name '{n}'")
            if new != n:  # :170-186, handleSanitizedLabel :205-240
                rest = ls[:i] + ls[i + 1:]
                same = [k for k, (rn, _) in enumerate(rest) if rn == new]
                if same and rest[same[0]][1] != v:
                    raise _invalid(f"profile with labels '{labels_string(ls)}' has duplicate "
                                   f"label name '{new}' after label name sanitization from '{n}'")
                if not same:
                    at = sum(1 for rn, _ in rest if rn < new)
                    rest.insert(at, [new, v])
                    i = min(at, i)
                ls = rest
                last = ls[i - 1][0] if 0 < i <= len(ls) else ""
                continue
        if not _utf8(v):  # :191
            raise _invalid(f"invalid labels '{labels_string(ls)}' with error: "
                           f"invalid label value '{v}'")
        if n == last:  # :194
            raise _invalid(f"profile with labels '{labels_string(ls)}' has duplicate "
                           f"label name: '{n}'")
        last = n
        i += 1
    return ls


# -- pprof content ------------------------------------------------------------
def _fmt_ms(ms):
    """UP pkg/util/time.go:25-32 FormatTimeMillis (Go time.Time.String, UTC)."""
    t = time.gmtime(ms // 1000)
    frac = f".{ms % 1000:03d}".rstrip("0").rstrip(".")
    return time.strftime("%Y-%m-%d %H:%M:%S", t) + frac + " +0000 UTC"


def validate_profile(p, size, ls, bad, lim, now_ms):
    """UP pkg/validation/validate.go:321-401 ValidateProfile."""
    def malformed(msg):
        return _invalid(msg)

    if len(p.sample_type) == 0:  # :325
        raise malformed("empty profile")
    if p.time_nanos > 0:  # :329-333, window :287-315 (bounds excluded)
        t = p.time_nanos // 1000000
        frm = now_ms - lim["reject_older_than"] * 1000 if lim["reject_older_than"] else 0
        to = now_ms + lim["reject_newer_than"] * 1000 if lim["reject_newer_than"] else 0
        if not ((frm == 0 or t > frm) and (to == 0 or t < to)):
            if to == 0:
                detail = f"the ingestion window starts at {_fmt_ms(frm)}"
            elif frm == 0:
                detail = f"the ingestion window ends at {_fmt_ms(to)}"
            else:
                detail = (f"the ingestion window starts at {_fmt_ms(frm)} "
                          f"and ends at {_fmt_ms(to)}")
            raise _invalid(f"profile with labels '{labels_string(ls)}' is outside of ingestion "
                           f"window (profile timestamp: {_fmt_ms(t)}, {detail})")
    lim_size = lim["max_profile_size_bytes"]
    if lim_size and size > lim_size:  # :338
        raise _invalid(f"the profile with labels '{labels_string(ls)}' exceeds the size limit "
                       f"(max_profile_size_byte, actual: {size}, limit: {lim_size})")
    lim_n = lim["max_profile_stacktrace_samples"]
    if lim_n and len(p.sample) > lim_n:  # :341
        raise _invalid(f"the profile with labels '{labels_string(ls)}' exceeds the samples count "
                       f"limit (max_profile_stacktrace_samples, actual: {len(p.sample)}, "
                       f"limit: {lim_n})")
    lim_l = lim["max_profile_stacktrace_sample_labels"]
    for s in p.sample:  # :349-357
        if lim_l and len(s.label) > lim_l:
            raise _invalid(f"the profile with labels '{labels_string(ls)}' exceeds the sample "
                           f"labels limit (max_profile_stacktrace_sample_labels, actual: "
                           f"{len(s.label)}, limit: {lim_l})")
    if any(loc.id == 0 for loc in p.location):  # :365
        raise malformed("location id is 0")
    if any(f.id == 0 for f in p.function):  # :370
        raise malformed("function id is 0")
    for s in p.sample:  # :375-382
        if len(s.value) != len(p.sample_type):
            raise malformed("sample value length mismatch")
    st = p.string_table
    n = len(st)

    def out(i):  # Go indexes with int(i) >= len; a negative one would panic
        return i < 0 or i >= n

    # validateStringTableAccess :403-439
    if not st or st[0] != "":
        raise malformed("string 0 should be empty string")
    if any(out(vt.type) for vt in p.sample_type):
        raise malformed("sample type type string index out of range")
    if any(out(lab.str) or out(lab.key) for s in p.sample for lab in s.label):
        raise malformed("sample label string index out of range")
    for f in p.function:
        if out(f.name):
            raise malformed("function name string index out of range")
        if out(f.system_name):
            raise malformed("function system name index string out of range")
        if out(f.filename):
            raise malformed("function file name string index out of range")
    for m in p.mapping:
        if out(m.filename):
            raise malformed("mapping file name string index out of range")
        if out(m.build_id):
            raise malformed("mapping build id string index out of range")
    if any("-" in st[vt.type] for vt in p.sample_type):  # :387-393
        raise malformed("sample type contains -")
    if bad:  # :395-399
        raise malformed(f"invalid utf8 string hex: {bad[0].hex()}")


def sample_label_groups(p):
    """The label sets Pyroscope splits a profile into after Normalize: samples
    with a negative or no positive value go (UP pkg/pprof/pprof.go:504-522),
    numeric labels go (:497-502), trace_id/span_id/profile_id do not split
    (UP pkg/model/pprofsplit/pprof_split.go:37-38). None: nothing is left."""
    st = p.string_table
    skip = {"trace_id", "span_id", "profile_id"}
    groups = []
    for s in p.sample:
        if any(v < 0 for v in s.value) or not any(v > 0 for v in s.value):
            continue
        key = sorted((st[lab.key], st[lab.str]) for lab in s.label
                     if lab.str != 0 and st[lab.key] not in skip)
        if key not in groups:
            groups.append(key)
    return sorted(groups) if groups else None


def check_tenant(org, required):
    """UP pkg/tenant/interceptor.go:46-58 and distributor.go:319-321 with
    grafana/dskit@e96eda8260cd (UP go.mod:33) tenant/resolver.go:24-77,
    tenant/tenant.go:14-104, user/id.go:22-24."""
    if not required:
        return ANONYMOUS  # header ignored
    if not org:
        raise _unauth("no org id")
    ids = []
    for part in org.split("|"):
        tid = part.split(":", 1)[0]  # metadata "tenant:k=v" is cut off
        bad = next((c for c in tid.encode("utf-8", "surrogateescape")
                    if not (chr(c).isascii() and (chr(c).isalnum() or chr(c) in "!-_.*'()"))),
                   None)
        if bad is not None:
            raise _unauth(f"tenant ID '{tid}' contains unsupported character '{chr(bad)}'")
        if len(tid) > 150:
            raise _unauth("tenant ID is too long: max 150 characters")
        if tid in (".", ".."):
            raise _unauth("tenant ID is '.' or '..'")
        ids.append(tid)
    if len(set(ids)) > 1:
        raise _unauth("multiple org IDs present")
    return ids[0]



def push(series, limits, sanitize, now_ms):
    """Pyroscope's Push on decoded series (UP pkg/distributor/distributor.go
    :315-393 Push, :407-471 PushBatch, :528-727 pushSeries). Returns
    (accepted, error): accepted is [(series index, sample index, labels, raw,
    id, Profile, stored label sets)], kept even when error (a Refused) is set."""
    errors, parsed, used = [], [], 0
    for i, s in enumerate(series):
        for k, (raw, pid) in enumerate(s["samples"]):
            try:  # :352-362: a failed sample is skipped, the rest go on
                p, size, bad = read_raw_profile(raw, limits["max_profile_size_bytes"])
            except Refused as e:
                errors.append(e)
                continue
            used += size
            body_lim = limits["ingestion_body_limit_bytes"]
            if body_lim and used > body_lim:  # :366-370
                return [], _invalid("uncompressed batched profile payload size exceeds "
                                    "limit of " + _humanize(body_lim))
            parsed.append((i, k, s["labels"], raw, pid, p, size, bad))
    if not parsed and errors:  # :382-384
        return [], _combine(errors)
    if not parsed:  # :417-419
        return [], _invalid("no profiles received")
    accepted = []
    for i, k, labels, raw, pid, p, size, bad in parsed:
        try:
            stored = push_series(labels, p, size, bad, limits, sanitize, now_ms)
        except Refused as e:
            errors.append(e)
            continue
        accepted.append((i, k, labels, raw, pid, p, stored))
    # :385-391: stored series stay stored, the call fails
    return accepted, (_combine(errors) if errors else None)


def push_series(labels, p, size, bad, limits, sanitize, now_ms):
    """One profile: its label sets as stored ([] if Normalize left nothing)."""
    ls = [list(l) for l in labels]
    if _get(ls, "service_name") == "":  # distributor.go:541-544
        ls.append(["service_name", SERVICE_NAME_FALLBACK])
    ls.sort(key=lambda l: l[0])  # :547
    validate_profile(p, size, ls, bad, limits, now_ms)  # :659-667
    groups = sample_label_groups(p)
    if groups is None:  # :694-700: nothing left after Normalize
        return []
    stored = []  # :1287-1303 visitSampleSeries -> pprof_split.go:26-102
    for g in groups:
        b = _Builder(ls)
        for name, value in g:  # pprof_split.go:105-119: series labels win
            if b.get(name) == "":
                b.set(name, value)
        _default_relabel(b)
        stored.append({a: v for a, v in validate_labels(b.labels(), limits, sanitize)})
    return stored


def _combine(errors):
    """What Pyroscope answers for several errors: a dskit multierror
    (grafana/dskit multierror/multierror.go:47-66), of which connect-go
    sends the first *connect.Error found (errors.As, connect-go v1.19.2
    protocol_connect.go:1209-1217); with none, Push wraps a validation error
    as INVALID_ARGUMENT (UP distributor.go:335-337) and anything else goes
    out as UNKNOWN with the whole text."""
    for e in errors:
        if e.kind == "connect":
            return e
    text = "; ".join(e.message for e in errors)
    if len(errors) > 1:
        text = f"{len(errors)} errors: {text}"
    if any(e.kind == "validation" for e in errors):
        return _invalid(text)
    return Refused(text, grpc.StatusCode.UNKNOWN)
