"""CPU stacks of a real Go program nobody here wrote against its own
profiler: Debian's Prometheus (Go 1.19, stripped, cgo), loaded
with HTTP requests (gzip'd /metrics, PromQL queries) while pushprof samples
it and Prometheus's own /debug/pprof/profile (runtime/pprof, pclntab
unwinding) records the same seconds. Used by tests/cpu/test_cpu_realgo.py
and bench/realgo_callers.py.

measure() runs the agent with the leaf tables off (PUSHPROF_FRAMELESS=off: a
plain frame-pointer walk) and on, one after the other, and gives for the
top leaves of pushprof's profile the share of samples whose immediate
caller Go's own profile never shows for that leaf ("wrong caller"), and the
noise floor: the same figure between two random halves of Go's own samples
(a caller seen in one half and not the other is sampling noise, not a wrong
stack).
"""
import collections
import glob
import os
import random
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import urllib.request

import cputest as ct
import pptest

KERNEL = "[kernel.kallsyms]"
PORT = 0    # measure() takes a free one: runs must not meet on a port


def load(secs, stop):
    """Six clients: /metrics with gzip (compress/flate, crc32), an instant
    and a range query (PromQL, JSON), label values."""
    base = f"http://127.0.0.1:{PORT}"
    qs = ["/metrics",
          "/api/v1/query?query=sum%20by%20(handler)(rate(prometheus_http_requests_total[1m]))",
          "/api/v1/query_range?query=rate(go_gc_duration_seconds_count[30s])"
          "&start={a}&end={b}&step=1",
          "/api/v1/label/__name__/values"]

    def run():
        n = 0
        while not stop.is_set():
            t = int(time.time())
            q = qs[n % len(qs)].format(a=t - 600, b=t)
            req = urllib.request.Request(base + q, headers={"Accept-Encoding": "gzip"})
            try:
                urllib.request.urlopen(req, timeout=5).read()
            except OSError:
                pass
            n += 1
    ts = [threading.Thread(target=run, daemon=True) for _ in range(6)]
    for t in ts:
        t.start()
    return ts


# Go's own profiler cannot see the sysmon thread: Go 1.18+ arms a thread's
# own CPU timer in execute() (go1.19 src/runtime/proc.go:2542, `if
# _g_.m.profilehz != hz { setThreadCPUProfiler(hz) }`), which sysmon never
# runs, so sysmon only gets the process-wide setitimer signals, which land on
# whichever thread is on CPU at a tick: none of ~1,300 of Prometheus's own
# samples per 20 s is under runtime.sysmon, while 2-3 % of pushprof's are
# (runtime.usleep, and the kernel under it). Under CPU contention sysmon wakes
# every 20 us and runtime.usleep becomes a top leaf whose every caller would
# count as wrong: those stacks have no ground truth to be compared with.
UNSEEN_BY_GO = "runtime.sysmon"


def callers(samples):
    out = collections.defaultdict(collections.Counter)
    for frames, kinds, v, _ in samples:
        if UNSEEN_BY_GO in frames:
            continue
        user = [f for f, k in zip(frames, kinds) if k != KERNEL]
        if user and v:
            out[user[0]][user[1] if len(user) > 1 else "<none>"] += v
    return out


def wrong(mine, theirs, leaves):
    """(samples, samples under a caller theirs never shows) over leaves."""
    n = bad = 0
    for leaf in leaves:
        for c, v in mine[leaf].items():
            n += v
            # a stack that ends at the leaf has no caller: never a right one
            bad += v if c == "<none>" or c not in theirs[leaf] else 0
    return n, bad


def halves(samples, rng):
    """Go's samples split in two random halves (each count binomially)."""
    a, b = [], []
    for frames, kinds, v, labels in samples:
        x = sum(rng.random() < 0.5 for _ in range(v))
        a.append((frames, kinds, x, labels))
        b.append((frames, kinds, v - x, labels))
    return a, b


def round_(pushprof, secs, d, pid, frameless, tag):
    rd = os.path.join(d, tag)
    os.makedirs(rd)
    store = os.path.join(rd, "store")
    cfg = os.path.join(rd, "cfg.yaml")
    with open(cfg, "w") as f:
        f.write(f"node: bench\nlog: {{level: info}}\nhttp_address: \"\"\n"
                f"spool: {{directory: \"\"}}\ncpu: {{frequency_hz: 99, interval: 5s}}\n"
                f"go_heap: {{enabled: false}}\nlocal_store: {{directory: {store}}}\n"
                f"targets:\n  - pids: [{pid}]\n")
    agent = pptest.Agent(cfg, args=["--duration", f"{secs + 30}s"], binary=pushprof,
                         env={"PUSHPROF_FRAMELESS": None if frameless else "off"})
    time.sleep(1)
    gprof = os.path.join(rd, "go.pprof")
    with urllib.request.urlopen(f"http://127.0.0.1:{PORT}/debug/pprof/profile?seconds="
                                f"{secs}", timeout=secs + 30) as r, open(gprof, "wb") as f:
        f.write(r.read())
    time.sleep(1)
    agent.stop(signal.SIGINT, 60)
    ours = []
    for p in sorted(glob.glob(os.path.join(store, "*"))):
        ours += ct.Prof(p).samples
    return ours, ct.Prof(gprof).samples


def measure(pushprof, secs=20, rounds=1, top=15, report=print):
    """Rounds of (off, on) runs against a Prometheus started here. Returns
    {"off"|"on": {"n", "bad", "gn", "gbad"}} summed over the rounds; report
    gets a line per run and per leaf."""
    global PORT
    PORT = ct.free_port()
    d = tempfile.mkdtemp(prefix="pushprof-realgo-")
    with open(os.path.join(d, "prom.yml"), "w") as f:
        f.write("global: {scrape_interval: 1s}\nscrape_configs:\n  - job_name: self\n"
                f"    static_configs: [{{targets: ['127.0.0.1:{PORT}']}}]\n")
    prom = subprocess.Popen(["prometheus", f"--config.file={d}/prom.yml",
                             f"--storage.tsdb.path={d}/data",
                             f"--web.listen-address=127.0.0.1:{PORT}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    stop = threading.Event()
    rng = random.Random(1)
    tot = {k: collections.Counter() for k in ("off", "on")}
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{PORT}/-/ready", timeout=1).read()
                break
            except OSError:
                time.sleep(0.2)
        if prom.poll() is not None:
            raise RuntimeError(f"prometheus exited ({prom.returncode}) before it was ready")
        load(secs, stop)
        time.sleep(3)
        for r in range(rounds):
            for frameless in (False, True):
                key = "on" if frameless else "off"
                ours, go = round_(pushprof, secs, d, prom.pid, frameless, f"r{r}-{key}")
                mine, theirs = callers(ours), callers(go)
                leaves = [l for l, _ in sorted(mine.items(),
                                               key=lambda x: -sum(x[1].values()))[:top]]
                n, bad = wrong(mine, theirs, leaves)
                ga, gb = halves(go, rng)
                gn, gbad = wrong(callers(ga), callers(gb), leaves)
                report(f"[r{r}-{key}] top {top} leaves: {n} samples, wrong caller "
                       f"{100 * bad / max(n, 1):.1f}% (noise floor, Go vs Go halves: "
                       f"{100 * gbad / max(gn, 1):.1f}% of {gn})")
                for leaf in leaves[:8]:
                    ln, lb = wrong(mine, theirs, [leaf])
                    bad_callers = [(c[:40], v) for c, v in mine[leaf].most_common()
                                   if c == "<none>" or c not in theirs[leaf]][:2]
                    report(f"    {leaf[:50]:50} {ln:5} {100 * lb / max(ln, 1):5.1f}% {bad_callers}")
                tot[key].update(n=n, bad=bad, gn=gn, gbad=gbad)
    finally:
        stop.set()
        prom.send_signal(signal.SIGTERM)
        prom.wait(timeout=30)
        shutil.rmtree(d, ignore_errors=True)
    return tot
