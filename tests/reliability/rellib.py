"""Helpers for the reliability tests: the real test receiver as a separate
process (so it can be stopped, hung and restarted on the same port),
configs, spool and store files. The agent itself runs through pptest.Agent."""
import glob
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time

import pptest
from pptest import PUSHPROF, SOURCE_DIR

HERE = os.path.dirname(os.path.abspath(__file__))
RECEIVER = os.path.join(SOURCE_DIR, "tests", "lib", "receiver.py")


def build_go(name, out_dir):
    return pptest.go_build(os.path.join(HERE, name + ".go"), os.path.join(out_dir, name))


def free_port():
    """A port free on every interface (agents listen on 0.0.0.0 too). Still
    only free now."""
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def sha(data):
    return hashlib.sha256(data).hexdigest()


def file_hashes(paths):
    out = {}
    for p in paths:
        with open(p, "rb") as f:
            out[p] = sha(f.read())
    return out


def write_config(path, remote=None, spool=None, store=None, interval="1s", freq=49,
                 go_heap=None, targets="", extra="", timeout="10s", http=None,
                 level="info", cpu=True):
    """A config for the agent. remote_store.timeout is 10 s (the agent's
    default) unless a test is about deadlines: the test receiver is Python
    and validates every profile before it answers, which on a loaded 2-CPU
    machine (or beside an ASan agent) can take more than a second."""
    http = http if http is not None else f"127.0.0.1:{free_port()}"
    t = (f"node: rel-node\nlog: {{level: {level}}}\nhttp_address: \"{http}\"\n"
         f"cpu: {{enabled: {'true' if cpu else 'false'}, frequency_hz: {freq}, "
         f"interval: {interval}}}\n")
    t += f"go_heap: {go_heap}\n" if go_heap else "go_heap: {enabled: false}\n"
    if remote:
        t += f"remote_store: {{address: \"{remote}\", insecure: true, timeout: {timeout}}}\n"
    t += f"spool: {{directory: \"{spool or ''}\"}}\n" if not extra.count("spool:") else ""
    if store:
        t += f"local_store: {{directory: {store}}}\n"
    t += targets + extra
    with open(path, "w") as f:
        f.write(t)
    return path


class Rcv:
    """tests/lib/receiver.py in its own process."""

    def __init__(self, out, port, *flags):
        self.out, self.port = out, port
        os.makedirs(out, exist_ok=True)
        # without meson's MALLOC_PERTURB_, meant for the code under test: with it
        # this Python receiver took 4-11 s per WriteRaw of ~20 series (0.03 s
        # without) and tests with a 2 s remote_store.timeout saw no delivery
        env = {k: v for k, v in os.environ.items() if k != "MALLOC_PERTURB_"}
        self.p = subprocess.Popen([sys.executable, RECEIVER, "--port", str(port), "--out", out,
                                   *flags], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True, env=env)
        line = self.p.stdout.readline()
        if "listening" not in line:
            raise RuntimeError(f"receiver did not start: {line} {self.p.stderr.read()}")

    def stop(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(10)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()

    def _read(self, name):
        path = os.path.join(self.out, name)
        if not os.path.exists(path):
            return []
        with open(path) as f:
            return [json.loads(l) for l in f if l.strip()]

    def calls(self):
        return self._read("calls.jsonl")

    def series(self):
        return [s for r in self._read("requests.jsonl") for s in r["series"]]

    def request_hashes(self):
        """[(n, bytes, [sha256 of each profile])] of the accepted requests, in order."""
        calls = {c["n"]: c for c in self.calls()}
        out = []
        for r in self._read("requests.jsonl"):
            hs = []
            for s in r["series"]:
                for f in s["files"]:
                    with open(os.path.join(self.out, f), "rb") as fh:
                        hs.append(sha(fh.read()))
            out.append((r["n"], calls.get(r["n"], {}).get("bytes", r["bytes"]), hs))
        return out

    def superseded(self):
        """Accepted requests whose every profile came again in a later request:
        the agent saw them fail (typically its deadline passed just after the
        server accepted) and resent them; at-least-once makes these the
        duplicates. Returns (calls, series, bytes) of those."""
        reqs = self.request_hashes()
        calls = series = nbytes = 0
        for i, (n, b, hs) in enumerate(reqs):
            later = set(h for _, _, l in reqs[i + 1:] for h in l)
            if hs and all(h in later for h in hs):
                calls, series, nbytes = calls + 1, series + len(hs), nbytes + b
        return calls, series, nbytes

    def hashes(self):
        """sha256 of every raw_profile received -> series labels."""
        out = {}
        for s in self.series():
            for f in s["files"]:
                with open(os.path.join(self.out, f), "rb") as fh:
                    out[sha(fh.read())] = s["labels"]
        return out


def msum(vals, name):
    """Sum of a metric over all its label sets."""
    return sum(v for k, v in vals.items() if k == name or k.startswith(name + "{"))


def spool_files(d):
    return sorted(glob.glob(os.path.join(d, "*.spool")))


def local_files(d):
    return sorted(glob.glob(os.path.join(d, "*.pb.gz")))


def wait_delivered(store, rcvs, timeout=120):
    """Wait until every profile in local_store (the agent's record of what it
    handed over) has reached one of the receivers, by content. Returns the
    paths still missing at the end (empty: all delivered). The bound is
    generous: after an outage the agent's backoff (up to 30 s) and the
    receiver's speed decide how long delivery takes, not the test.

    A running agent keeps handing profiles over while this waits, so "every
    profile" is those handed over before a moment: first the ones there when
    the wait began, then the ones added meanwhile (the replay takes a while).
    Judging the store as it is at the very end would count a profile written
    a millisecond ago, rightly still on its way, as lost (seen once in CI:
    "1 of 65 missing" after all 64 older ones had arrived)."""
    seen = {}

    def missing(want):
        got = set()
        for r in rcvs:
            got |= set(r.hashes())
        out = []
        for p in sorted(want):
            try:
                st = os.stat(p)
                key = (p, st.st_size, st.st_mtime_ns)
                if key not in seen:
                    with open(p, "rb") as f:
                        seen[key] = sha(f.read())
            except OSError:
                continue  # trimmed meanwhile
            if seen[key] not in got:
                out.append(p)
        return out

    end = time.time() + timeout
    for _ in range(2):
        want = set(local_files(store))
        wait_for(lambda: not missing(want), max(0, end - time.time()), 0.5)
    return missing(want)


def wait_for(pred, timeout, step=0.2):
    end = time.time() + timeout
    while time.time() < end:
        if pred():
            return True
        time.sleep(step)
    return pred()


_pb = None


def decode(path):
    """A profile file (gzip or not) as a protobuf Profile."""
    import gzip
    global _pb
    if _pb is None:
        import receiver
        _pb = receiver.load_protos()[0]
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    p = _pb.Profile()
    p.ParseFromString(raw)
    return p


def pprof_parses(path):
    try:
        pptest.pprof("-raw", "-symbolize=none", path)
        return True
    except Exception as e:  # noqa: BLE001
        print(f"  pprof: {e}")
        return False


def sanitized():
    """True when PUSHPROF is an ASan build (slower, several times the memory)."""
    try:
        with open(PUSHPROF, "rb") as f:
            return b"__asan_init" in f.read()
    except OSError:
        return False
