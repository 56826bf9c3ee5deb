"""Shared helpers for pushprof's Python tests (run by meson test; as root but
for the suite 'unit'): check()/done() for assertions and the verdict, Agent
for `pushprof run`, run()/pushprof() for other commands, Go builds and
`go tool pprof`.

Tests exercise real things: the built agent binary, real BPF programs, real
processes and a real gRPC receiver. Every produced profile is read back with
`go tool pprof`, a parser this project did not write.
"""
import atexit
import collections
import glob
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

PUSHPROF = os.environ.get("PUSHPROF", "build/pushprof")
BUILD_DIR = os.environ.get("PUSHPROF_BUILD_DIR", "build")
SOURCE_DIR = os.environ.get("PUSHPROF_SOURCE_DIR", ".")

# The agent's local_store file names: "<UTC time>-<type>-<comm>-<pid>-<seq>.pb.gz"
# (agent/ship/outbox.c, local_name). type is "cpu", "heap-<trigger>" or a __name__;
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
    """A command that is not `run` (check-config, push, snapshot, help, version);
    `pushprof run` goes through Agent."""
    return run([PUSHPROF, *args], **kw)


def sanitizer_report(log):
    """True when a log holds an ASan/UBSan/LSan report."""
    return "runtime error:" in log or "Sanitizer" in log


_agents = []


class Agent:
    """`pushprof run`: the one way the tests start the agent.

    Agent(config, log_path=None, args=(), env=None, wrap=(), ready=True, timeout=30,
          binary=None)
    starts [*wrap, binary or PUSHPROF, "run", "--config", config, *args] (config
    None: no --config; wrap: e.g. ["setpriv", ...]; env: added to the
    environment, a value None removes the variable). A thread reads its
    stdout and stderr (the log) into .lines and, with log_path, appends them
    to that file (a test can give two agents one file).
    With ready, the constructor waits up to `timeout` s for the "agent started"
    line: .started is that line, or None when the agent exited first or did not
    start in time (the test checks .started; nothing is raised). .port is the
    HTTP port that line names (http_port=N), else None.

    A run with --duration ends with wait(), any other with stop(); both return
    (rc, seconds waited), kill the agent if it outlives `timeout` (rc -9), and
    give rc 99 when its log holds a sanitizer report (UBSan lets it exit 0). An
    agent a test forgets (an exception) is killed at exit, or by `with`.
    """

    def __init__(self, config, log_path=None, args=(), env=None, wrap=(), ready=True,
                 timeout=30, binary=None):
        self.lines = []
        self._logf = open(log_path, "a") if log_path else None
        argv = [*wrap, binary or PUSHPROF, "run", *(["--config", config] if config else []),
                *args]
        e = dict(os.environ)
        for k, v in (env or {}).items():
            if v is None:
                e.pop(k, None)
            else:
                e[k] = v
        self.p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True, errors="replace", env=e)
        self.pid = self.p.pid
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        _agents.append(self)
        self.started = self.port = None
        if ready:
            self.started = self.wait_log("agent started", timeout)
            m = re.search(r'http_port"?[=:](\d+)', self.started or "")
            self.port = int(m.group(1)) if m else None

    def _read(self):
        for line in self.p.stdout:
            self.lines.append(line)
            f = self._logf
            if f:
                try:
                    f.write(line)
                    f.flush()
                except ValueError:  # closed by _end() after its join timed out
                    pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.alive():
            self.stop()

    def alive(self):
        return self.p.poll() is None

    def log(self):
        """Everything the agent logged so far."""
        return "".join(self.lines)

    def wait_log(self, needle, timeout, after=0):
        """The first log line (after `after` earlier matches) containing needle,
        or for which needle(line) is true; None once the agent has exited
        without it, or after timeout s."""
        match = needle if callable(needle) else (lambda l: needle in l)
        end = time.time() + timeout
        while True:
            exited = not self.alive()
            if exited:
                self._reader.join(5)    # the last lines, before judging
            hits = [l for l in list(self.lines) if match(l)]
            if len(hits) > after:
                return hits[after]
            if exited or time.time() >= end:
                return None
            time.sleep(0.05)

    def count(self, needle):
        return sum(1 for l in list(self.lines) if needle in l)

    def windows(self):
        """The "cpu window" lines (logfmt or JSON)."""
        return [l for l in list(self.lines) if 'msg="cpu window"' in l
                or '"msg":"cpu window"' in l]

    def events(self, msg):
        """The JSON log lines (log.format: json) with this msg, as dicts."""
        out = []
        for line in list(self.lines):
            try:
                e = json.loads(line)
            except ValueError:
                continue
            if isinstance(e, dict) and e.get("msg") == msg:
                out.append(e)
        return out

    def event(self, msg, timeout=20, **fields):
        """The first JSON log line with this msg (and these field values), as a
        dict; None after timeout s or once the agent has exited without it."""
        def match(line):
            try:
                e = json.loads(line)
            except ValueError:
                return False
            return (isinstance(e, dict) and e.get("msg") == msg
                    and all(str(e.get(k)) == str(v) for k, v in fields.items()))
        line = self.wait_log(match, timeout)
        return json.loads(line) if line else None

    def get(self, path, timeout=5):
        """GET on the agent's HTTP port: (status, body); (0, why) when it does
        not answer (not listening, e.g. mid-reload)."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}",
                                        timeout=timeout) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()
        except (urllib.error.URLError, OSError) as e:
            return 0, str(e)

    def metrics(self):
        """/metrics as {'name{labels}': value} ({} when it does not answer)."""
        code, text = self.get("/metrics")
        return parse_metrics(text) if code == 200 else {}

    def wait(self, timeout=60):
        """Wait for the agent to exit by itself (--duration): (rc, seconds)."""
        return self._end(None, timeout)

    def stop(self, sig=signal.SIGTERM, timeout=30):
        """Signal the agent (SIGTERM, SIGINT) and wait for it: (rc, seconds)."""
        return self._end(sig, timeout)

    def _end(self, sig, timeout):
        t = time.time()
        if sig is not None and self.alive():
            self.p.send_signal(sig)
        try:
            rc = self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            print(f"agent {self.pid} still running after {timeout} s: killed")
            self.p.kill()
            rc = self.p.wait()
        took = time.time() - t
        self._reader.join(10)
        if self._logf:
            self._logf.close()
            self._logf = None
        if sanitizer_report(self.log()):
            print("sanitizer report in the agent's log:\n" + self.log()[-4000:])
            rc = 99
        return rc, took


@atexit.register
def _kill_forgotten_agents():
    for a in _agents:
        if a.alive():
            a.p.kill()
            a.p.wait()


def window_times(lines):
    """When each "cpu window" line among lines (an agent's log, logfmt or
    JSON) was logged, in seconds since the epoch (its ts)."""
    import datetime
    out = []
    for line in lines:
        if 'msg="cpu window"' not in line and '"msg":"cpu window"' not in line:
            continue
        if line.startswith("{"):
            ts = json.loads(line).get("ts", "")
        else:
            ts = line.split("ts=", 1)[1].split()[0] if "ts=" in line else ""
        try:
            out.append(datetime.datetime.strptime(ts, "%Y-%m-%dT%H:%M:%S.%fZ")
                       .replace(tzinfo=datetime.timezone.utc).timestamp())
        except ValueError:
            pass
    return out


def largest_window_gap(lines, t0, t1):
    """The longest stretch within [t0, t1] (epoch seconds, time.time())
    without a CPU window in lines: a loop that stalls shows here whatever
    the host's load, where a count of windows also falls when a busy host
    makes windows late (a window more than one interval late is merged into
    the next one, not queued)."""
    ts = [t for t in window_times(lines) if t0 <= t <= t1]
    edges = [t0] + ts + [t1]
    return max(b - a for a, b in zip(edges, edges[1:]))


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


SPOOL_MAGIC = b"PPSPOOL1"   # agent/ship/spool.c: the magic, then one zstd frame


def spool_payload(path):
    """The decoded content of a spool file (bytes), or None when it is not
    one (yet): agent/ship/spool.c writes the magic, then one zstd frame."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError:
        return None
    if not raw.startswith(SPOOL_MAGIC):
        return None
    z = subprocess.run(["zstd", "-dcq"], input=raw[len(SPOOL_MAGIC):], capture_output=True)
    return z.stdout if z.returncode == 0 else None


def spool_count(directory):
    """Profiles held in the spool files of directory (a config's
    `spool.directory`): each file's payload starts with its profile count,
    a little-endian u32 (agent/ship/spool.c). A test whose receiver may be
    too slow for the agent's 2 s final push (docs/operations.md) counts
    received + spooled: a profile is lost only when it is in neither."""
    n = 0
    for f in glob.glob(os.path.join(directory, "*.spool")):
        payload = spool_payload(f)
        if payload and len(payload) >= 4:
            n += struct.unpack("<I", payload[:4])[0]
    return n


def delivered(received, spooled, built):
    """The delivery rule of a run whose last push may meet the agent's 2 s
    shutdown bound: every one of `built` profiles was received, or the ones
    not received are in the spool. A call the agent gave up on may still be
    recorded by the receiver and spooled too (at least once), so received +
    spooled may exceed built; received alone may not."""
    return received == built or (received < built and received + spooled >= built)
