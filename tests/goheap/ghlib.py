"""Helpers shared by the Go heap tests: build the Go workloads, run them
until they signal readiness, and compare heap profiles per function through
`go tool pprof` (a parser this project did not write)."""
import atexit
import os
import re
import shutil
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


def tmpdir(prefix):
    """A temp dir removed when the test ends (kept with PUSHPROF_KEEP_TMP=1)."""
    d = pptest.tmpdir(prefix)
    if not os.environ.get("PUSHPROF_KEEP_TMP"):
        atexit.register(shutil.rmtree, d, True)
    return d


GO123 = "/usr/lib/go-1.23/bin/go"    # scripts/setup.sh --tests installs it when it can


def toolchains():
    """(tag, go binary): Debian's Go 1.19, and Go 1.23 when installed."""
    res = [("go1.19", "go")]
    if os.access(GO123, os.X_OK):
        res.append(("go1.23", GO123))
    else:
        print("note: Go 1.23 not installed, its variants are skipped")
    return res


def build(name, outdir, variant="plain", go="go"):
    """Build tests/goheap/NAME.go as OUTDIR/NAME-VARIANT[-TOOLCHAIN]."""
    suffix = "" if go == "go" else "-" + os.path.basename(os.path.dirname(os.path.dirname(go)))
    out = os.path.join(outdir, f"{name}-{variant}{suffix}")
    env = pptest.go_env()
    if go != "go":
        env["GOCACHE"] = env["GOCACHE"] + "-" + os.path.basename(os.path.dirname(os.path.dirname(go)))
        env["GOTOOLCHAIN"] = "local"
    pptest.run([go, "build", *VARIANTS[variant], "-o", out, os.path.join(HERE, name + ".go")],
               timeout=300, env=env, check_rc=0)
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
        # ready exists once the workload's os.WriteFile created it, which is
        # before its line is written: wait for the whole line (fakebuckets'
        # "HEAD TAIL" was once read empty on a loaded host)
        while not self._complete(ready):
            if self.p.poll() is not None:
                raise RuntimeError(f"{binary} exited {self.p.returncode}: {self.p.stderr.read()}")
            if time.time() > deadline:
                self.stop()
                raise RuntimeError(f"{binary} not ready after {timeout}s")
            time.sleep(0.02)

    @staticmethod
    def _complete(path):
        try:
            with open(path) as f:
                return f.read().endswith("\n")
        except FileNotFoundError:
            return False

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
    out = pptest.pprof("-top", "-unit=B", "-nodecount=1000000", "-nodefraction=0",
                       "-edgefraction=0",
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


_SAMPLE = re.compile(r"^\s*(-?\d+\s+)*-?\d+:( \d+)* ?$")


def per_function_all(profile):
    """{sample_type: {function: (flat, cum)}} from one `go tool pprof -raw`
    (cheaper than four -top runs on profiles with 100,000+ samples). flat =
    the leaf (innermost inlined) function, cum counts a function once per
    sample."""
    out = raw(profile)
    types, samples, locs = [], [], {}
    section, cur = None, None
    for line in out.splitlines():
        if line.startswith("Samples:"):
            section = "samples_hdr"
            continue
        if line.startswith("Locations"):
            section = "locs"
            continue
        if line.startswith("Mappings"):
            section = None
            continue
        if section == "samples_hdr":
            types = [t.split("/")[0] for t in line.split()]
            section = "samples"
            continue
        if section == "samples":
            if _SAMPLE.match(line):
                vals, ids = line.split(":", 1)
                samples.append(([int(x) for x in vals.split()], [int(x) for x in ids.split()]))
            continue
        if section == "locs":
            m = re.match(r"^\s+(\d+): 0x[0-9a-f]+ M=\d+ (\S+)", line)
            if m:
                cur = int(m.group(1))
                locs[cur] = [m.group(2)]
                continue
            m = re.match(r"^\s+(\S+) \S+:\d+ s=\d+$", line)
            if m and cur is not None:
                locs[cur].append(m.group(1))
    res = {t: {} for t in types}
    for vals, ids in samples:
        fns = [fn for i in ids for fn in locs.get(i, ["?"])]
        if not fns:
            continue
        for t, v in zip(types, vals):
            d = res[t]
            f, c = d.get(fns[0], (0, 0))
            d[fns[0]] = (f + v, c)
            for fn in set(fns):
                f, c = d.get(fn, (0, 0))
                d[fn] = (f, c + v)
    # Functions whose every value is 0 are not shown by pprof either.
    return {t: {fn: fc for fn, fc in d.items() if fc != (0, 0)} for t, d in res.items()}


def compare_raw(own, snap):
    a, b = per_function_all(own), per_function_all(snap)
    diffs = []
    if set(a) != set(b) or set(a) != set(SAMPLE_TYPES):
        return [f"sample types differ: {sorted(a)} vs {sorted(b)}"]
    for si in SAMPLE_TYPES:
        if not a[si]:
            diffs.append(f"{si}: the program's own profile has no functions")
        for fn in sorted(set(a[si]) | set(b[si])):
            if a[si].get(fn) != b[si].get(fn):
                diffs.append(f"{si} {fn}: own={a[si].get(fn)} snapshot={b[si].get(fn)}")
    return diffs
