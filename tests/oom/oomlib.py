"""Helpers for the OOM tests: v1 memory cgroups with small limits, the
oomwatch binary, and workloads that leak until the kernel OOM-kills them.

Every cgroup is named /sys/fs/cgroup/memory/pushprof-test-<T|U><name>-<pid>
(T = tracked by the watcher's prefix, U = not tracked) and removed on exit,
killing anything left inside first. Limits stay small (64-200 MiB) so a
test never starves the machine.
"""
import json
import os
import signal
import subprocess
import threading
import time

import pptest

MEMCG = "/sys/fs/cgroup/memory"
TRACKED_PREFIX = f"/pushprof-test-T{os.getpid()}-"
UNTRACKED_PREFIX = f"/pushprof-test-U{os.getpid()}-"
HERE = os.path.dirname(os.path.abspath(__file__))
OOMWATCH = os.path.join(pptest.BUILD_DIR, "tests", "oom", "oomwatch")


class Cgroup:
    def __init__(self, name, limit_mb, tracked=True):
        self.rel = (TRACKED_PREFIX if tracked else UNTRACKED_PREFIX) + name
        self.path = MEMCG + self.rel
        os.makedirs(self.path, exist_ok=True)
        with open(os.path.join(self.path, "memory.limit_in_bytes"), "w") as f:
            f.write(str(limit_mb << 20))
        memsw = os.path.join(self.path, "memory.memsw.limit_in_bytes")
        if os.path.exists(memsw):
            with open(memsw, "w") as f:
                f.write(str(limit_mb << 20))

    def remove(self):
        for _ in range(50):
            try:
                with open(os.path.join(self.path, "cgroup.procs")) as f:
                    pids = [int(x) for x in f.read().split()]
            except FileNotFoundError:
                return
            for p in pids:
                try:
                    os.kill(p, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            try:
                os.rmdir(self.path)
                return
            except OSError:
                time.sleep(0.1)

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.remove()


def cleanup_stale():
    """Remove cgroups a crashed earlier run of this test left behind."""
    for d in os.listdir(MEMCG):
        if d.startswith("pushprof-test-T") or d.startswith("pushprof-test-U"):
            try:
                pid = int(d[len("pushprof-test-T"):].split("-")[0])
            except ValueError:
                continue
            if not os.path.exists(f"/proc/{pid}"):
                c = Cgroup.__new__(Cgroup)
                c.path = os.path.join(MEMCG, d)
                c.remove()


class Lines:
    """Collect a process's stdout lines in a thread (all of them, in .all)."""

    def __init__(self, stream):
        self.all = []
        self.eof = False
        self.cv = threading.Condition()
        self.t = threading.Thread(target=self._run, args=(stream,), daemon=True)
        self.t.start()

    def _run(self, stream):
        for line in stream:
            with self.cv:
                self.all.append(line.rstrip("\n"))
                self.cv.notify_all()
        with self.cv:
            self.eof = True
            self.cv.notify_all()

    def wait(self, pred, timeout):
        """First line so far or within timeout matching pred, or None."""
        end = time.time() + timeout
        i = 0
        with self.cv:
            while True:
                while i < len(self.all):
                    if pred(self.all[i]):
                        return self.all[i]
                    i += 1
                left = end - time.time()
                if self.eof or left <= 0:
                    return None
                self.cv.wait(left)


VICTIMS = set()  # pids of every Victim started by this test


class Watcher:
    def __init__(self, outdir, *args):
        self.outdir = outdir
        cmd = [OOMWATCH, "--out", outdir, "--cgroup-prefix", TRACKED_PREFIX, *args]
        self.p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True)
        self.lines = Lines(self.p.stdout)
        self.err = Lines(self.p.stderr)
        if not self.event(lambda e: e.get("event") == "ready", 30):
            raise RuntimeError("oomwatch did not start: " + "\n".join(self.err.all))

    def event(self, pred, timeout):
        def f(line):
            try:
                return pred(json.loads(line))
            except ValueError:
                return False
        line = self.lines.wait(f, timeout)
        return json.loads(line) if line else None

    def events(self):
        out = []
        for line in self.lines.all:
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
        return out

    def tracked(self, pid, timeout=20):
        """The "tracked" event of pid (a wrapper shell seen before its exec
        gives a track_failed first; that one is not the answer)."""
        return self.event(lambda e: e.get("event") == "tracked" and e.get("pid") == pid,
                          timeout)

    def result(self, pid, timeout=20):
        return self.event(lambda e: e.get("event") in ("profile", "oom_event")
                          and e.get("pid") == pid, timeout)

    def foreign_events(self):
        """Results for OOM victims this test did not start (another test
        run's kills on the same host: the watcher sees every victim), which
        its stats count too."""
        return sum(1 for e in self.events() if e.get("event") == "oom_event"
                   and e.get("pid") not in VICTIMS)

    def alive(self):
        return self.p.poll() is None

    def stop(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        self.lines.t.join(timeout=5)
        self.err.t.join(timeout=5)
        self.rc = self.p.returncode
        # a sanitizer report or a crash shows up here: the tests check rc
        pptest.check(self.rc == 0, "oomwatch exited cleanly",
                     f"status {self.rc}: " + "\n".join(self.err.all[-30:]))
        return self.event(lambda e: e.get("event") == "stats", 1)


class Victim:
    """A workload started inside a cgroup (the shell moves itself, then execs)."""

    def __init__(self, cg, argv, env=None):
        e = dict(os.environ)
        if env:
            e.update(env)
        self.p = subprocess.Popen(
            ["/bin/sh", "-c", 'echo $$ > "$0/cgroup.procs" && shift && exec "$@"',
             cg.path, "x", *argv],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, env=e)
        self.pid = self.p.pid
        VICTIMS.add(self.pid)
        self.lines = Lines(self.p.stdout)

    def ready(self, timeout=60):
        return self.lines.wait(lambda x: x == "ready", timeout) is not None

    def go(self):
        self.p.stdin.write("go\n")
        self.p.stdin.flush()

    def wait(self, timeout=60):
        try:
            return self.p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            return self.p.wait()


def finish(d):
    """done(), removing the test's temp dir unless something failed (kept
    then for a look at the profiles)."""
    import shutil
    if not pptest._failures:
        shutil.rmtree(d, ignore_errors=True)
    else:
        print(f"kept {d}")
    pptest.done()


def build_workloads(d):
    leak = pptest.go_build(os.path.join(HERE, "leak.go"), os.path.join(d, "leak"))
    norate = pptest.go_build(os.path.join(HERE, "leak_norate.go"),
                             os.path.join(d, "leak_norate"))
    cleak = os.path.join(d, "cleak")
    pptest.run(["cc", "-O1", "-o", cleak, os.path.join(HERE, "cleak.c")], check_rc=0)
    return leak, norate, cleak


def top_inuse(profile):
    """Name of the top flat inuse_space function per `go tool pprof -top`."""
    out = pptest.pprof("-top", "-sample_index=inuse_space", profile)
    seen_header = False
    for line in out.splitlines():
        if line.strip().startswith("flat"):
            seen_header = True
            continue
        if seen_header and line.strip():
            return line.split()[-1]
    return None


def comments(profile):
    out = pptest.pprof("-raw", profile)
    return [l[len("Comment: "):] for l in out.splitlines() if l.startswith("Comment: ")]


def oom_one(w, cg, argv, tracked=True, env=None, settle=0.0, mirrored=0):
    """Start a victim in cg, wait until the watcher tracks it (when expected),
    let it leak; returns (victim exit status, watcher result, track event).
    mirrored: wait until the watcher has mirrored that many buckets (the
    ones the victim made before "ready"); settle: then sleep that long."""
    v = Victim(cg, argv, env)
    if not v.ready():
        v.p.kill()
        return None, None, None
    tr = w.tracked(v.pid) if tracked else None
    if mirrored:
        w.event(lambda e: e.get("event") == "status" and e.get("mirrored", 0) >= mirrored, 120)
    time.sleep(settle)
    v.go()
    rc = v.wait(60)
    res = w.result(v.pid, 20)
    return rc, res, tr
