"""Helpers shared by the Go heap tests: build the Go workloads, run them
until they signal readiness, and compare heap profiles per function through
`go tool pprof` (a parser this project did not write)."""
import os
import re
import signal
import subprocess
import time

import pptest

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.path.join(pptest.BUILD_DIR, "tests", "goheap", "goheap_tool")
SAMPLE_TYPES = ("alloc_objects", "alloc_space", "inuse_objects", "inuse_space")

VARIANTS = {
    "plain": (),
    "pie": ("-buildmode=pie",),
    "stripped": ("-ldflags=-s -w",),
    "stripped-pie": ("-ldflags=-s -w", "-buildmode=pie"),
}


def build(name, outdir, variant="plain"):
    """Build tests/goheap/NAME.go as OUTDIR/NAME-VARIANT."""
    out = os.path.join(outdir, f"{name}-{variant}")
    pptest.go_build(os.path.join(HERE, name + ".go"), out, VARIANTS[variant])
    return out


class Workload:
    """A Go workload started with its ready file as the last argument."""

    def __init__(self, binary, args, ready, env=None, timeout=60):
        self.ready = ready
        if os.path.exists(ready):
            os.unlink(ready)
        e = dict(os.environ)
        e.pop("GODEBUG", None)
        if env:
            e.update(env)
        self.p = subprocess.Popen([binary, *args, ready], env=e, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, text=True)
        self.pid = self.p.pid
        deadline = time.time() + timeout
        while not os.path.exists(ready):
            if self.p.poll() is not None:
                raise RuntimeError(f"{binary} exited {self.p.returncode}: {self.p.stderr.read()}")
            if time.time() > deadline:
                self.stop()
                raise RuntimeError(f"{binary} not ready after {timeout}s")
            time.sleep(0.02)

    def stop(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGKILL)
        self.p.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


_TOP = re.compile(r"^\s*(-?\d+)B?\s+\S+%\s+\S+%\s+(-?\d+)B?\s+\S+%\s+(.+?)\s*$")


def per_function(profile, sample_index):
    """{function: (flat, cum)} in exact units (bytes, counts)."""
    out = pptest.pprof("-top", "-unit=B", "-nodecount=1000000",
                       f"-sample_index={sample_index}", profile)
    res = {}
    started = False
    for line in out.splitlines():
        if "flat%" in line:
            started = True
            continue
        if not started:
            continue
        m = _TOP.match(line)
        if m:
            res[m.group(3)] = (int(m.group(1)), int(m.group(2)))
    return res


def compare(own, snap):
    """List of differences between two heap profiles, per sample type and
    function; empty when they are equal."""
    diffs = []
    for si in SAMPLE_TYPES:
        a, b = per_function(own, si), per_function(snap, si)
        if not a:
            diffs.append(f"{si}: the program's own profile has no functions")
        for fn in sorted(set(a) | set(b)):
            if a.get(fn) != b.get(fn):
                diffs.append(f"{si} {fn}: own={a.get(fn)} snapshot={b.get(fn)}")
    return diffs


def raw(profile):
    return pptest.pprof("-raw", profile)


def period(profile):
    m = re.search(r"^Period: (\d+)", raw(profile), re.M)
    return int(m.group(1)) if m else None


def max_frames_of(profile, function):
    """The largest number of frames of `function` in any one stack."""
    out = pptest.pprof("-traces", profile)
    best = 0
    for block in out.split("-----------+"):
        n = 0
        for line in block.splitlines():
            words = line.replace("(inline)", "").split()
            if words and words[-1] == function:
                n += 1
        best = max(best, n)
    return best


def snapshot_stats(stderr):
    """key=value fields of the snapshot command's summary line."""
    for line in stderr.splitlines():
        if line.startswith("pushprof: snapshot: pid="):
            fields = {}
            for m in re.finditer(r"(\w+)=(\S+)", line.split("snapshot: ", 1)[1]):
                fields[m.group(1)] = m.group(2)
            m = re.search(r"reason=(.*?) read_ms=", line)
            if m:
                fields["reason"] = m.group(1)
            return fields
    return {}
