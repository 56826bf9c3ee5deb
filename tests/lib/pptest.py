"""Shared helpers for pushprof's tests (run by meson test, as root).

Tests exercise real things: the built agent binary, real BPF programs, real
processes and a real gRPC receiver. Every produced profile is read back with
`go tool pprof`, a parser this project did not write.
"""
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile

PUSHPROF = os.environ.get("PUSHPROF", "build/pushprof")
BUILD_DIR = os.environ.get("PUSHPROF_BUILD_DIR", "build")
SOURCE_DIR = os.environ.get("PUSHPROF_SOURCE_DIR", ".")

# The agent's local_store file names: "<UTC time>-<type>-<comm>-<pid>-<seq>.pb.gz"
# (agent/outbox.c, local_name). type is "cpu", "heap-<trigger>" or a __name__;
# comm never contains '-'.
LocalName = collections.namedtuple("LocalName", "time type comm pid seq")
_LOCAL_NAME = re.compile(r"^(\d{8}T\d{6}\.\d{3}Z)-(.+)-([^-]+)-(\d+)-(\d+)\.pb\.gz$")


def local_name(path):
    """The fields of a local_store file name; ValueError for another name."""
    m = _LOCAL_NAME.match(os.path.basename(path))
    if not m:
        raise ValueError(f"not a pushprof local_store file name: {path}")
    return LocalName(m[1], m[2], m[3], int(m[4]), int(m[5]))


_failures = 0
_passes = 0


def check(cond, what, detail=""):
    """Record one assertion; keep going so a run reports every failure."""
    global _failures, _passes
    if cond:
        _passes += 1
        print(f"ok   {what}")
    else:
        _failures += 1
        print(f"FAIL {what}" + (f": {detail}" if detail else ""))
    sys.stdout.flush()
    return cond


def done():
    """Exit with the test's verdict (meson reads the exit code)."""
    print(f"{_passes} passed, {_failures} failed")
    sys.exit(1 if _failures or not _passes else 0)


def tmpdir(prefix="pushprof-test-"):
    d = tempfile.mkdtemp(prefix=prefix)
    return d


def run(args, timeout=60, env=None, input=None, check_rc=None):
    """Run a command; returns CompletedProcess with text stdout/stderr."""
    e = dict(os.environ)
    if env:
        e.update(env)
    p = subprocess.run(args, capture_output=True, text=True, timeout=timeout,
                       env=e, input=input)
    if check_rc is not None and p.returncode != check_rc:
        raise RuntimeError(f"{args} exited {p.returncode}, want {check_rc}\n"
                           f"stdout: {p.stdout}\nstderr: {p.stderr}")
    return p


def pushprof(*args, **kw):
    return run([PUSHPROF, *args], **kw)


def go_env():
    # shared by the plain and the sanitizer builds: Go's cache is safe to share
    cache = os.environ.get("PUSHPROF_GO_CACHE", "/tmp/pushprof-go-cache")
    os.makedirs(cache, exist_ok=True)
    return {"GOCACHE": os.path.abspath(cache), "GOPATH": os.path.abspath(cache + "/gopath"),
            "GO111MODULE": "off", "GOFLAGS": "", "HOME": os.environ.get("HOME", "/root")}


def go_build(src, out, flags=()):
    """Build a single-file Go workload (golang-go from Debian)."""
    run(["go", "build", *flags, "-o", out, src], timeout=300, env=go_env(), check_rc=0)
    return out


def pprof(*args, timeout=120):
    """`go tool pprof` with the given args; returns stdout (raises on error)."""
    p = run(["go", "tool", "pprof", *args], timeout=timeout, env=go_env())
    if p.returncode != 0:
        raise RuntimeError(f"go tool pprof {args} failed: {p.stderr}")
    return p.stdout


def parse_metrics(text):
    """The agent's /metrics text as {'name{labels}': value}."""
    vals = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            k, _, v = line.rpartition(" ")
            vals[k] = float(v)
    return vals


def have(prog):
    return shutil.which(prog) is not None


def cgroup_label(pid):
    """The `cgroup` label pushprof gives a process (procinfo.h proc_cgroup):
    the v2 path unless it is the root, else the longest v1 path."""
    paths, v2 = [], None
    for line in open(f"/proc/{pid}/cgroup").read().splitlines():
        _, ctrls, path = line.split(":", 2)
        if ctrls == "":
            v2 = path
        else:
            paths.append(path)
    if v2 is not None and v2 != "/":
        return v2
    best = None
    for p in paths:  # first of the longest, in file order
        if best is None or len(p) > len(best):
            best = p
    return best if best is not None else v2


SPOOL_MAGIC = b"PPSPOOL1"   # agent/spool.c: the magic, then one zstd frame


def spool_payload(path):
    """The decoded content of a spool file (bytes), or None when it is not
    one (yet): agent/spool.c writes the magic, then one zstd frame."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError:
        return None
    if not raw.startswith(SPOOL_MAGIC):
        return None
    z = subprocess.run(["zstd", "-dcq"], input=raw[len(SPOOL_MAGIC):], capture_output=True)
    return z.stdout if z.returncode == 0 else None
