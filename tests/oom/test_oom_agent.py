"""OOM capture and pressure snapshots through the real agent (`pushprof run`):
real OOM kills in small v1 memory cgroups, the agent targeting them by
cgroup path, profiles pushed over real gRPC to tests/lib/receiver.py and
read back with `go tool pprof`.

1. a Go program leaking from one function: a trigger=oom memory profile with
   the documented labels, the leak on top, RSS figures in the comments,
   pushed at once; the agent keeps running (CPU windows go on) and exits 0
   on SIGTERM; 1b: a process that enters the targeted cgroup and execs the
   Go program later (runc's init does that) is armed too;
2. remote store down during the kill: the profile is in local_store and the
   spool at once, survives an agent restart and is delivered once the store
   is back;
3. go_heap.pressure: a slow leak gives one trigger=pressure profile (leak on
   top) before the trigger=oom one, and only one per cooldown;
4. a non-Go victim, an untracked Go victim and a Go victim with memory
   profiling off: one explicit log event each (and /metrics counts), agent
   unharmed; with go_heap.enable_profiling the same rate-0 program gives a
   real profile;
5. two victims in two cgroups OOMing at the same moment: two profiles.

PUSHPROF_LONG_TESTS=1 adds 20 kills in a row through one agent and prints the
success rate.
"""
import glob
import os
import signal
import socket
import subprocess
import time

import pptest
from pptest import check, tmpdir
import oomlib
from receiver import Receiver

LONG = os.environ.get("PUSHPROF_LONG_TESTS") == "1"
LEAK_FN = "main.leakyAllocator"


def closed_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Agent:
    """A config for `pushprof run` (JSON log) and the agent run with it
    (pptest.Agent, in .run); start() again after stop() restarts it."""

    def __init__(self, d, name, address, extra="", go_heap="", spool=None, local=None,
                 http=False):
        self.local = local or os.path.join(d, name + "-local")
        self.spool = spool or os.path.join(d, name + "-spool")
        self.cfg = os.path.join(d, name + ".yaml")
        self.http_port = closed_port() if http else None
        with open(self.cfg, "w") as f:
            f.write(f"""node: oom-agent-node
log: {{level: debug, format: json}}
http_address: "{f'127.0.0.1:{self.http_port}' if http else ''}"
remote_store: {{address: "{address}", insecure: true, timeout: 2s}}
local_store: {{directory: {self.local}}}
spool: {{directory: {self.spool}}}
external_labels: {{cluster: oomc}}
cpu: {{frequency_hz: 19, interval: 1s}}
targets:
  - cgroup: {oomlib.TRACKED_PREFIX}
go_heap:
  interval: 0s
  on_oom: true
  max_buckets: 50000
  max_stack_depth: 64
{go_heap}{extra}""")
        self.start()

    def start(self):
        """Run the agent (again, after stop()) with this config."""
        self.failures = pptest._failures
        self.run = pptest.Agent(self.cfg)
        if not self.run.started:
            raise RuntimeError("agent did not start:\n" + self.run.log()[-3000:])

    def event(self, msg, timeout=20, **fields):
        """First JSON log line with this msg (and these field values)."""
        return self.run.event(msg, timeout, **fields)

    def events(self, msg):
        return self.run.events(msg)

    def metrics(self):
        import urllib.request
        return pptest.parse_metrics(urllib.request.urlopen(
            f"http://127.0.0.1:{self.http_port}/metrics", timeout=10).read().decode())

    def windows(self):
        return len(self.run.windows())

    def alive(self):
        return self.run.alive()

    def stop(self, what):
        rc, _ = self.run.stop(signal.SIGTERM, 30)
        check(rc == 0, f"{what}: agent exits 0 on SIGTERM",
              f"rc={rc}\n" + "".join(self.run.lines[-40:]))
        if pptest._failures > self.failures:
            print(f"--- {what}: agent log (without windows and target changes)")
            for line in self.run.lines:
                if not any(x in line for x in ('"cpu window"', '"target added"',
                                               '"target removed"')):
                    print("   " + line, end="")
        return rc


def victim(a, cg, argv, tracked=True, env=None):
    """Start a workload in cg; when tracked, wait until the agent tracks it
    (its Go heap is then armed for OOM capture). Returns the Victim or None."""
    v = oomlib.Victim(cg, argv, env)
    if not v.ready():
        v.p.kill()
        return None
    if tracked and not a.event("tracking go process", timeout=20, pid=v.pid):
        check(False, f"agent tracks pid {v.pid}", "".join(a.run.lines[-20:]))
    return v


def wait_series(rcv, pred, timeout=30, n=1):
    end = time.time() + timeout
    while True:
        got = [s for s in rcv.series() if pred(s["labels"])]
        if len(got) >= n or time.time() > end:
            return got
        time.sleep(0.1)


def rfile(rcv, s):
    f = s["files"][0]
    return f if os.path.isabs(f) else os.path.join(rcv.out, f)


def comments(path):
    return oomlib.comments(path)


def time_nanos(path):
    out = pptest.pprof("-raw", path)
    for line in out.splitlines():
        if line.startswith("Time:"):
            return line
    return None


def is_oom(pid):
    return lambda lab: lab.get("trigger") == "oom" and lab.get("pid") == str(pid)


# ---------------------------------------------------------------- scenario 1
def scenario_leak(a, rcv, leak):
    with oomlib.Cgroup("leak", 100) as cg:
        v = victim(a, cg, [leak])
        if not check(v is not None, "1: victim started and tracked"):
            return
        w0 = a.windows()
        v.go()
        check(v.wait() == -9, "1: victim SIGKILLed by the OOM killer")
        t_kill = time.time()
        got = wait_series(rcv, is_oom(v.pid))
        if not check(len(got) == 1, "1: one trigger=oom profile received", str(rcv.series())):
            return
        # pushed at once, not with the next CPU window: alone in its request,
        # or (when the sender thread was already sending a window and took
        # it along) within 2 s of the kill
        call = [c for c in rcv.calls() if c["n"] == got[0]["request"]]
        check(call and (call[0]["series"] == 1 or call[0]["time"] - t_kill < 2.0),
              "1: pushed at once, in a request of its own", str(call))
        if call:
            print(f"   received {call[0]['time'] - t_kill:+.3f} s after the victim's exit "
                  "was seen")
        lab = got[0]["labels"]
        want = {"__name__": "memory", "trigger": "oom", "oom_complete": "true",
                "pid": str(v.pid), "comm": "leak", "executable": os.path.realpath(leak),
                "cgroup": cg.rel, "node": "oom-agent-node", "view": "latest",
                "cluster": "oomc"}
        bad = {k: (lab.get(k), w) for k, w in want.items() if lab.get(k) != w}
        check(not bad, "1: labels", f"{bad} in {lab}")
        check("oom_incomplete_reason" not in lab, "1: no incomplete reason")
        f = rfile(rcv, got[0])
        check(oomlib.top_inuse(f) == LEAK_FN, f"1: top inuse_space is {LEAK_FN}",
              str(oomlib.top_inuse(f)))
        cm = comments(f)
        rss = [c for c in cm if c.startswith("oom victim ")]
        kb = 0
        if rss:
            for part in rss[0].split():
                if part.startswith("anon_rss="):
                    kb = int(part[len("anon_rss="):].rstrip("kB"))
        check(rss and f"pid={v.pid}" in rss[0] and 50 * 1024 < kb <= 100 * 1024,
              "1: RSS figures of the victim in the comments", str(cm))
        ev = a.event("OOM profile captured", timeout=1, pid=v.pid)
        check(ev and ev.get("complete") == "true", "1: log line for the capture", str(ev))
        # the agent goes on: more CPU windows after the kill
        end = time.time() + 10
        while a.windows() < w0 + 2 and time.time() < end:
            time.sleep(0.2)
        check(a.alive() and a.windows() >= w0 + 2, "1: agent alive, windows continue",
              f"{w0} -> {a.windows()}")


def scenario_exec_later(a, rcv, leak):
    """A process that enters the targeted cgroup and execs the Go program
    only later (runc's init does that): the agent has seen it match as a
    shell, and must still notice the exec and arm the Go program."""
    with oomlib.Cgroup("execlater", 100) as cg:
        p = subprocess.Popen(
            # the shell execs once told to (a line on stdin, which `read`
            # takes byte by byte: the next line is the Go program's)
            ["/bin/sh", "-c", 'echo $$ > "$0/cgroup.procs" && read x && exec "$1"',
             cg.path, leak], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            added = a.event("target added", timeout=10, pid=p.pid)
            comm = open(f"/proc/{p.pid}/comm").read().strip() if added else None
            check(comm == "sh", "1b: the shell matched the target before its exec", str(comm))
            p.stdin.write("exec\n")
            p.stdin.flush()
            check(p.stdout.readline().strip() == "ready", "1b: Go program running")
            tr = a.event("tracking go process", timeout=10, pid=p.pid)
            check(tr is not None, "1b: the agent tracks the Go program it exec'd")
            p.stdin.write("go\n")
            p.stdin.flush()
            check(p.wait(timeout=60) == -9, "1b: SIGKILLed")
            got = wait_series(rcv, is_oom(p.pid))
            check(len(got) == 1 and got[0]["labels"].get("oom_complete") == "true",
                  "1b: its OOM profile", str(a.events("OOM kill without a profile"))[:500])
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()


# ---------------------------------------------------------------- scenario 2
def spool_has(spool, pid, why=None):
    """A spool batch holding the trigger=oom series of pid."""
    for f in glob.glob(os.path.join(spool, "*.spool")):
        raw = pptest.spool_payload(f)
        if raw and b"trigger" in raw and b"oom" in raw and str(pid).encode() in raw and \
                b"memory" in raw:
            return True
        if why is not None:
            why.append(f"{os.path.basename(f)}: {'not decoded' if raw is None else len(raw)}")
    return False


def scenario_store_down(d, leak):
    port = closed_port()
    a = Agent(d, "down", f"127.0.0.1:{port}")
    pid = None
    try:
        with oomlib.Cgroup("down", 100) as cg:
            v = victim(a, cg, [leak])
            if not check(v is not None, "2: victim started and tracked"):
                return
            pid = v.pid
            v.go()
            check(v.wait() == -9, "2: victim SIGKILLed")
            t0 = time.time()
            ev = a.event("OOM profile captured", timeout=20, pid=pid)
            check(ev is not None, "2: capture logged with the store down")
            files = [f for f in glob.glob(os.path.join(a.local, "*.pb.gz")) if "oom" in f]
            check(len(files) == 1 and oomlib.top_inuse(files[0]) == LEAK_FN,
                  "2: in local_store at once, leak on top", str(files))
            why = []
            check(spool_has(a.spool, pid, why), "2: in the spool at once", str(why))
            print(f"   on disk {time.time() - t0:.2f} s after the kill was seen")
        check(a.alive(), "2: agent alive with the store down")
    finally:
        a.stop("2: first agent")
    if pid is None:
        return
    check(spool_has(a.spool, pid), "2: still spooled after the agent stopped")
    # the same agent (same spool) starts again; the store comes back after it
    a.start()
    rcv = Receiver(os.path.join(d, "rcv-down"), port=port).start()
    try:
        got = wait_series(rcv, is_oom(pid), timeout=30)
        if check(len(got) == 1, "2: OOM profile delivered after restart + store back",
                 str([s["labels"] for s in rcv.series()])[:800]):
            lab = got[0]["labels"]
            check(lab.get("oom_complete") == "true" and lab.get("__name__") == "memory"
                  and lab.get("cluster") == "oomc", "2: delivered labels", str(lab))
            check(oomlib.top_inuse(rfile(rcv, got[0])) == LEAK_FN,
                  "2: delivered profile: leak on top")
        end = time.time() + 10
        while spool_has(a.spool, pid) and time.time() < end:
            time.sleep(0.2)
        check(not spool_has(a.spool, pid), "2: spool emptied of it once delivered")
    finally:
        a.stop("2: restarted agent")
        rcv.stop()


# ---------------------------------------------------------------- scenario 3
def profile_pb(path):
    import gzip
    import receiver
    raw = open(path, "rb").read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    p = receiver.load_protos()[0].Profile()
    p.ParseFromString(raw)
    return p


def label_cgroup(pid):
    return pptest.cgroup_label(pid)


def scenario_pressure(a, rcv, leak):
    with oomlib.Cgroup("pressure", 100) as cg:
        # ~1.6 MiB per 100 ms: 60 % of the limit after ~3.6 s, the kill
        # ~2.4 s later (room for a loaded host to take and push the snapshot)
        v = victim(a, cg, [leak, "-slow", "60ms"])
        if not check(v is not None, "3: slow leaker started and tracked"):
            return
        snap_cg = label_cgroup(v.pid)
        v.go()
        t_go = time.time()
        check(v.wait(90) == -9, "3: slow leaker SIGKILLed")
        t_kill = time.time()
        oom = wait_series(rcv, is_oom(v.pid))
        pressure = [s for s in rcv.series() if s["labels"].get("trigger") == "pressure"
                    and s["labels"].get("pid") == str(v.pid)]
        if not check(len(oom) == 1, "3: the OOM profile arrives"):
            return
        if not check(len(pressure) == 1, "3: exactly one pressure profile (cooldown 1m)",
                     f"{len(pressure)}"):
            return
        lab = pressure[0]["labels"]
        want = {"__name__": "memory", "trigger": "pressure", "view": "latest",
                "cgroup": snap_cg, "comm": "leak", "node": "oom-agent-node"}
        bad = {k: (lab.get(k), w) for k, w in want.items() if lab.get(k) != w}
        check(not bad, "3: pressure profile labels", f"{bad} in {lab}")
        check(pressure[0]["request"] < oom[0]["request"],
              "3: the pressure profile was received before the OOM one",
              f"requests {pressure[0]['request']} vs {oom[0]['request']}")
        fp, fo = rfile(rcv, pressure[0]), rfile(rcv, oom[0])
        tp, to = profile_pb(fp).time_nanos, profile_pb(fo).time_nanos
        check(0 < tp < to, "3: pressure time_nanos before the OOM capture's",
              f"{tp} vs {to}")
        print(f"   pressure snapshot {(to - tp) / 1e9:.2f} s before the capture; "
              f"leak ran {t_kill - t_go:.1f} s")
        check(oomlib.top_inuse(fp) == LEAK_FN, f"3: pressure profile: top is {LEAK_FN}",
              str(oomlib.top_inuse(fp)))
        check(oomlib.top_inuse(fo) == LEAK_FN, "3: OOM profile: leak on top")
        logs = [e for e in a.events("memory pressure: taking a heap snapshot before the OOM killer")
                if e.get("pid") == v.pid]  # a JSON number
        ok = len(logs) == 1 and int(logs[0]["usage"]) * 100 >= 60 * int(logs[0]["limit"])
        check(ok, "3: one pressure log line, usage at/above 60 % of the limit", str(logs))
        # the cgroup stayed above the threshold for several polls before the kill
        check((to - tp) / 1e9 > 0.3, "3: above threshold for several 100 ms polls, one snapshot",
              f"{(to - tp) / 1e9:.2f} s")


# ---------------------------------------------------------------- scenario 4
def no_profile_event(a, pid, timeout=20):
    return a.event("OOM kill without a profile", timeout=timeout, pid=pid)


def scenario_events(a, rcv, leak, norate, cleak):
    before = len(rcv.series())
    with oomlib.Cgroup("cprog", 64) as cg:
        v = victim(a, cg, [cleak], tracked=False)
        if check(v is not None, "4: C victim started"):
            v.go()
            check(v.wait() == -9, "4: C victim SIGKILLed")
            ev = no_profile_event(a, v.pid)
            check(ev and ev["reason"].startswith("not_tracked") and ev["comm"] == "cleak",
                  "4: C victim: explicit event, not_tracked", str(ev))
    with oomlib.Cgroup("untracked", 80, tracked=False) as cg:
        v = victim(a, cg, [leak], tracked=False)
        if check(v is not None, "4: untargeted Go victim started"):
            v.go()
            check(v.wait() == -9, "4: untargeted Go victim SIGKILLed")
            ev = no_profile_event(a, v.pid)
            check(ev and ev["reason"].startswith("not_tracked"),
                  "4: untargeted Go victim: explicit event, not_tracked", str(ev))
    with oomlib.Cgroup("norate", 80) as cg:
        v = victim(a, cg, [norate])
        if check(v is not None, "4: rate-0 Go victim started and tracked"):
            v.go()
            check(v.wait() == -9, "4: rate-0 Go victim SIGKILLed")
            ev = no_profile_event(a, v.pid)
            check(ev and ev["reason"].startswith("profiling_disabled") and ev["rate"] == 0,
                  "4: rate-0 Go victim: explicit event, profiling_disabled", str(ev))
    time.sleep(0.5)
    check(a.alive(), "4: agent alive after the three")
    new = [s["labels"] for s in rcv.series()[before:] if s["labels"].get("__name__") == "memory"]
    check(not new, "4: no memory profile made up for them", str(new))
    # counted too (other OOM kills on the host may add to these)
    m = a.metrics()
    k = 'pushprof_oom_kills_total{result="no_profile",reason="%s"}'
    check(m.get(k % "not_tracked", 0) >= 2 and m.get(k % "profiling_disabled", 0) >= 1 and
          m.get('pushprof_oom_kills_total{result="complete"}', 0) >= 2,
          "4: /metrics counts OOM kills by outcome",
          str({x: v for x, v in m.items() if "oom" in x}))


def scenario_enable(d, rcv, norate):
    a = Agent(d, "enable", rcv.address, go_heap="  enable_profiling: true\n")
    try:
        with oomlib.Cgroup("enabled", 100) as cg:
            v = victim(a, cg, [norate])
            if not check(v is not None, "4: enable_profiling: rate-0 victim tracked"):
                return
            ev = a.event("enabled memory profiling in a Go process", timeout=5, pid=v.pid)
            check(ev is not None, "4: enable_profiling: the agent logs the rate it wrote")
            v.go()
            check(v.wait() == -9, "4: enable_profiling: victim SIGKILLed")
            got = wait_series(rcv, is_oom(v.pid))
            if check(len(got) == 1 and got[0]["labels"].get("oom_complete") == "true",
                     "4: enable_profiling: a complete OOM profile",
                     str([s["labels"] for s in got])):
                f = rfile(rcv, got[0])
                check(oomlib.top_inuse(f) == "main.leakyNoRate",
                      "4: enable_profiling: top inuse_space is main.leakyNoRate",
                      str(oomlib.top_inuse(f)))
                check(any("rate=524288" in c for c in comments(f)),
                      "4: enable_profiling: capture comment says rate=524288")
    finally:
        a.stop("4: enable_profiling agent")


# ---------------------------------------------------------------- scenario 5
def scenario_two(a, rcv, leak):
    with oomlib.Cgroup("twoA", 90) as ca, oomlib.Cgroup("twoB", 110) as cb:
        va, vb = victim(a, ca, [leak]), victim(a, cb, [leak])
        if not check(va is not None and vb is not None, "5: two victims tracked"):
            return
        va.go()
        vb.go()
        check(va.wait() == -9 and vb.wait() == -9, "5: both SIGKILLed")
        for v, cg in ((va, ca), (vb, cb)):
            got = wait_series(rcv, is_oom(v.pid))
            if check(len(got) == 1, f"5: profile of {cg.rel}"):
                lab = got[0]["labels"]
                check(lab.get("cgroup") == cg.rel and lab.get("oom_complete") == "true",
                      f"5: {cg.rel}: labels", str(lab))
                check(oomlib.top_inuse(rfile(rcv, got[0])) == LEAK_FN,
                      f"5: {cg.rel}: leak on top")


def long_run(a, rcv, leak, n=20):
    ok = 0
    t0 = time.time()
    for i in range(n):
        with oomlib.Cgroup(f"long{i}", 80) as cg:
            v = victim(a, cg, [leak])
            if v is None:
                continue
            v.go()
            v.wait()
            got = wait_series(rcv, is_oom(v.pid), timeout=20)
            if (len(got) == 1 and got[0]["labels"].get("oom_complete") == "true" and
                    oomlib.top_inuse(rfile(rcv, got[0])) == LEAK_FN):
                ok += 1
    print(f"   long: {ok}/{n} kills gave a complete profile with the leak on top "
          f"({time.time() - t0:.0f} s)")
    check(ok == n, f"long: {n} kills in a row through the agent, {n} profiles", f"{ok}/{n}")


def main():
    oomlib.cleanup_stale()
    d = tmpdir()
    leak, norate, cleak = oomlib.build_workloads(d)
    rcv = Receiver(os.path.join(d, "rcv")).start()
    try:
        a = Agent(d, "main", rcv.address, http=True, go_heap=(
            "  pressure: {enabled: true, threshold_percent: 60, poll_interval: 100ms, "
            "cooldown: 1m}\n"))
        try:
            scenario_leak(a, rcv, leak)
            scenario_exec_later(a, rcv, leak)
            scenario_pressure(a, rcv, leak)
            scenario_events(a, rcv, leak, norate, cleak)
            scenario_two(a, rcv, leak)
            if LONG:
                long_run(a, rcv, leak)
        finally:
            a.stop("main agent")
        scenario_enable(d, rcv, norate)
    finally:
        rcv.stop()
    scenario_store_down(d, leak)
    oomlib.finish(d)


if __name__ == "__main__":
    main()
