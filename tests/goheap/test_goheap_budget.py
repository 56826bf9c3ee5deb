"""go_heap.budget against a hostile, unprivileged Go process:
fakebuckets.go lays out 100,000 buckets x 128 distinct PCs in its own
memory and runtime.mbuckets is pointed at them (through /proc/PID/mem, as
the program could do itself). Expected:

- `pushprof snapshot --pid`: each budget (max_frames, max_locations,
  max_duration) cuts the profile, flagged incomplete with a "budget:"
  reason, within its wall time; the profile parses with `go tool pprof`;
- `pushprof run` (CPU windows every second, periodic heap snapshots, on_oom
  on): the periodic snapshot is cut by the default budget within
  max_duration; the process is then backed off (the next intervals skip
  it: log once, /metrics counts); the OOM mirror stays within its budget;
  /healthz answers within 100 ms throughout; CPU windows keep coming on
  time (the snapshot runs on its own thread); the agent's peak RSS
  (VmHWM) stays under 64 MiB above its figure before the process existed.

A real program's complete, exact profile is test_goheap_truth's business
(the defaults must not cut it)."""
import glob
import http.client
import os
import re
import signal
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                "reliability"))
import ghlib  # noqa: E402
import pptest  # noqa: E402
import rellib as rl  # noqa: E402
from pptest import check, done  # noqa: E402

NBUCKETS, DEPTH = 100000, 128
tmp = ghlib.tmpdir("pushprof-goheap-budget-")
print(f"tmp: {tmp}")
binary = ghlib.build("fakebuckets", tmp, "plain")
vars_ = dict(kv.split("=", 1) for kv in pptest.run([ghlib.TOOL, "vars", binary]).stdout.split())
mbuckets = int(vars_["mbuckets"], 16)   # non-PIE: runtime address = link-time address
m = re.search(r"\s\.text\s+PROGBITS\s+([0-9a-f]+)\s+[0-9a-f]+\s+([0-9a-f]+)",
              pptest.run(["readelf", "-SW", binary]).stdout)
text_start, text_size = int(m.group(1), 16), int(m.group(2), 16)


def vmhwm_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"VmHWM:\s+(\d+) kB", f.read()).group(1))


def start_hostile(npcs=None):
    """The workload (its fake list to be linked in front of the real one)."""
    ready = os.path.join(tmp, "ready")
    w = ghlib.Workload(binary, [str(NBUCKETS), str(DEPTH), hex(text_start), hex(text_size)] +
                       ([str(npcs)] if npcs else []), ready)
    with open(ready) as f:
        w.fake = tuple(int(x, 16) for x in f.read().split())
    return w


def link(w):
    head, tail = w.fake
    with open(f"/proc/{w.pid}/mem", "r+b", buffering=0) as mem:
        mem.seek(mbuckets)
        real = mem.read(8)
        mem.seek(tail + 8)          # fake tail.allnext -> the real list
        mem.write(real)
        mem.seek(mbuckets)
        mem.write(struct.pack("<Q", head))


def budget_cfg(name, body):
    path = os.path.join(tmp, name + ".yaml")
    with open(path, "w") as f:
        f.write("go_heap:\n  budget:\n" + "".join(f"    {l}\n" for l in body))
    return path


# ---- the agent: idle figure first, then the process turns hostile ----
# The workload runs (its list not linked yet) before the agent starts, so
# tracking does not race its exec; the idle figure is the agent tracking it.
w = start_hostile()
store = os.path.join(tmp, "store")
cfg = rl.write_config(os.path.join(tmp, "agent.yaml"), store=store, interval="1s",
                      level="debug",
                      go_heap="{enabled: true, interval: 2s, on_oom: true, "
                              "budget: {backoff: 1m}}",
                      targets=f"targets:\n  - exe_regex: '^{re.escape(binary)}$'\n")
agent = pptest.Agent(cfg, os.path.join(tmp, "agent.log"))
check(agent.started is not None, "the agent starts", agent.log()[-2000:])
if agent.wait_log('msg="cpu window"', 20, after=2) is None:
    check(False, "the agent builds CPU windows", agent.log()[-2000:])
check(rl.msum(agent.metrics(), "pushprof_go_processes_tracked") == 1,
      "the workload is tracked", agent.log()[-2000:])
idle_kb = vmhwm_kb(agent.pid)
link(w)
t_linked = time.time()
lat, bad = [], []
conn = None
snap_line = None
deadline = time.time() + 25
while time.time() < deadline:
    t0 = time.time()
    try:
        if conn is None:
            conn = http.client.HTTPConnection("127.0.0.1", agent.port, timeout=2)
        conn.request("GET", "/healthz")
        r = conn.getresponse()
        r.read()
        if r.status != 200:
            bad.append(r.status)
    except OSError as e:
        bad.append(str(e))
        conn = None
    lat.append(time.time() - t0)
    if snap_line is None:
        snap_line = next((l for l in agent.log().splitlines()
                          if "go heap snapshot over budget" in l), None)
    # until the backoff has been exercised by a few intervals
    if snap_line and time.time() > t_linked + 10:
        break
    time.sleep(0.02)
if conn:
    conn.close()

log = agent.log()
notes = "\n".join(l for l in log.splitlines() if "cpu window" not in l)[-3000:]
check(snap_line is not None and "budget:" in snap_line,
      "periodic snapshot cut by the budget, backing off, with the reason", notes)
snaps = [l for l in log.splitlines() if 'msg="go heap snapshot"' in l and f"pid={w.pid}" in l]
check(len(snaps) == 1, "backed off: one periodic snapshot of the process, not one per interval",
      "\n".join(snaps))
if snaps:
    s = snaps[0]
    total_ms = float(re.search(r"total_ms=([\d.]+)", s).group(1))
    print(f"periodic snapshot: {s}")
    check("complete=false" in s and "budget:" in s, "flagged incomplete with a budget reason", s)
    # a loaded host can make max_duration the budget that cuts it: the
    # cut comes at the next bucket read after 5 s, not on the dot
    check(total_ms < 5500, f"within max_duration (5s): {total_ms:.0f} ms", s)
# backed off: every interval (2 s) after the cut skips the process; the
# loop above stops 10 s after the cut was linked, which a busy host can
# make too early for two
rl.wait_for(lambda: rl.msum(agent.metrics(), "pushprof_go_heap_snapshots_backed_off_total")
            >= 2, 30, 1)
mets = agent.metrics()
cut = rl.msum(mets, "pushprof_go_heap_budget_exceeded_total")
skipped = rl.msum(mets, "pushprof_go_heap_snapshots_backed_off_total")
check(cut == 1, f"/metrics: one snapshot over budget ({cut})")
check(skipped >= 2, f"/metrics: later intervals backed off ({skipped})")
check(log.count("go heap snapshot over budget") == 1, "logged once")
check("OOM mirror over budget" in log, "the OOM mirror stops at its budget", notes)
lat_ms = sorted(x * 1000 for x in lat)
print(f"/healthz: {len(lat)} requests, max {lat_ms[-1]:.1f} ms, "
      f"p50 {lat_ms[len(lat_ms) // 2]:.1f} ms")
check(len(lat) >= 100 and not bad, f"/healthz answered 200 every time ({len(lat)} polls)",
      str(bad[:5]))
# 100 ms for 99 % of the polls; the few left only bounded (a loaded CI machine
# can hold any process off the CPU for a while: not what this test is about)
p99 = lat_ms[min(len(lat_ms) - 1, int(len(lat_ms) * 0.99))]
check(p99 < 100 and lat_ms[-1] < 1000,
      f"/healthz within 100 ms during the snapshot (p99 {p99:.1f} ms, max {lat_ms[-1]:.1f} ms)")
# windows on time: the gap between consecutive windows stays near 1 s
wt = pptest.window_times(log.splitlines())
gaps = [b - a for a, b in zip(wt, wt[1:])]
# 8.4 s before the worker thread; a window more than 1 s late on a busy host
# is merged into the next one (a 2 s gap), not a stall
check(len(gaps) >= 8 and max(gaps) < 4.5,
      f"CPU windows on time while the snapshot runs (max gap {max(gaps or [0]):.2f} s)",
      str(gaps))
hwm_kb = vmhwm_kb(agent.pid)
print(f"agent VmHWM: idle {idle_kb / 1024:.1f} MiB, with the hostile process "
      f"{hwm_kb / 1024:.1f} MiB (+{(hwm_kb - idle_kb) / 1024:.1f} MiB)")
if rl.sanitized():
    # ASan's shadow memory and quarantine (freed memory is held back) make
    # RSS several times larger: the figure is the plain build's to meet
    print("ASan build: the peak RSS bound is checked in the plain build only")
else:
    check(hwm_kb - idle_kb < 64 * 1024, "peak RSS under 64 MiB over idle")
profs = sorted(glob.glob(os.path.join(store, f"*-heap-interval-*-{w.pid}-*.pb.gz")))
check(len(profs) == 1, "one interval profile in local_store", str(profs))
if profs:
    comments = pptest.pprof("-comments", profs[0])
    check("incomplete: budget:" in comments, "the profile says it was cut by the budget",
          comments)
    top = pptest.pprof("-top", "-nodecount=5", profs[0])
    check("flat%" in top, "go tool pprof reads the cut profile", top[:500])
# ---- the CLI: each budget, within its time ----
# The wall-time bounds leave room for a loaded host (the command's start-up
# and its reads slow down several-fold beside another test run); what they
# catch is unbounded work, which on this process takes minutes.
for name, body, want, max_s in (
        ("defaults", [], "budget:", 10),
        ("frames", ["max_frames: 50000", "max_locations: 100000000"], "max_frames (50000)", 5),
        ("locations", ["max_locations: 5000"], "max_locations (5000)", 5),
        ("duration", ["max_duration: 300ms", "max_frames: 1000000000",
                      "max_locations: 100000000", "max_read_bytes: 1TiB"],
         "max_duration (300 ms)", 5)):
    out = os.path.join(tmp, f"cli-{name}.pb.gz")
    t0 = time.time()
    r = pptest.pushprof("snapshot", "--pid", str(w.pid), "--output", out, "--config",
                        budget_cfg(name, body), timeout=60)
    took = time.time() - t0
    st = ghlib.snapshot_stats(r.stderr)
    print(f"cli {name}: {took:.2f} s {r.stderr.strip()[-300:]}")
    check(r.returncode == 0 and st.get("complete") == "false" and
          want in st.get("reason", ""), f"snapshot --pid, budget {name}: incomplete, '{want}'",
          r.stderr)
    check(took < max_s, f"snapshot --pid, budget {name}: {took:.2f} s < {max_s} s")
    if r.returncode == 0:
        check("incomplete: budget:" in pptest.pprof("-comments", out),
              f"snapshot --pid, budget {name}: go tool pprof reads it, reason in comments")
# ---- the same process OOM-killed: the capture ends at the mirror's budget ----
MEMCG = "/sys/fs/cgroup/memory"
cg = os.path.join(MEMCG, f"pushprof-test-budget-{os.getpid()}")
if os.path.isdir(MEMCG):
    os.makedirs(cg, exist_ok=True)
    try:
        with open(os.path.join(cg, "memory.limit_in_bytes"), "w") as f:
            f.write(str(64 << 20))
        with open(os.path.join(cg, "cgroup.procs"), "w") as f:
            f.write(str(w.pid))
        w.p.send_signal(signal.SIGUSR1)       # leaks until the OOM killer comes
        w.p.wait(30)
        check(w.p.returncode == -9, "OOM: the hostile process was OOM-killed",
              str(w.p.returncode))
        end = time.time() + 20
        oom = []
        while time.time() < end and not oom:
            oom = glob.glob(os.path.join(store, f"*-heap-oom-*-{w.pid}-*.pb.gz"))
            time.sleep(0.2)
        if check(len(oom) == 1, "OOM: a capture in local_store",
                 "\n".join(l for l in agent.log().splitlines() if "oom" in l.lower())[-2000:]):
            c = pptest.pprof("-comments", oom[0])
            check("budget_max_frames" in c, "OOM: incomplete, reason budget_max_frames", c)
            check("budget: more than go_heap.budget.max_locations" in c,
                  "OOM: building the capture's profile stopped at max_locations", c)
        check(agent.p.poll() is None, "OOM: the agent keeps running")
    finally:
        for _ in range(50):
            try:
                os.rmdir(cg)
                break
            except OSError:
                time.sleep(0.1)
    if not rl.sanitized():
        hwm_kb = vmhwm_kb(agent.pid)
        check(hwm_kb - idle_kb < 64 * 1024, f"OOM: peak RSS still under 64 MiB over idle "
              f"(+{(hwm_kb - idle_kb) / 1024:.1f} MiB)")
else:
    print("no v1 memory cgroup hierarchy: the OOM part is skipped")
rc, took = agent.stop()
check(rc == 0 and took < 6, f"agent exits 0 on SIGTERM ({took:.1f} s)", notes)

w.stop()


def cli_rss(pid, cfgpath, out):
    """pushprof snapshot --pid: (returncode, stderr, seconds, peak RSS in kB)."""
    t0 = time.time()
    p = subprocess.Popen([pptest.PUSHPROF, "snapshot", "--pid", str(pid), "--output", out,
                          "--config", cfgpath], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True)
    err = p.stderr.read()
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    return p.returncode, err, time.time() - t0, ru.ru_maxrss


# ---- few distinct PCs, every stack distinct: the sample data grows ----
w = start_hostile(npcs=2000)
link(w)
out = os.path.join(tmp, "stacks.pb.gz")
rc, err, took, kb = cli_rss(w.pid, budget_cfg("stacks", []), out)
st = ghlib.snapshot_stats(err)
print(f"cli distinct stacks: {took:.2f} s, peak RSS {kb / 1024:.1f} MiB {err.strip()[-250:]}")
check(rc == 0 and st.get("complete") == "false" and "max_frames" in st.get("reason", ""),
      "distinct stacks of 2,000 PCs: cut by max_frames", err)
check(took < 10, f"distinct stacks: {took:.2f} s < 10 s")
if rl.sanitized():
    print("ASan build: the peak RSS bound is checked in the plain build only")
else:
    # absolute (the command's own ~14 MiB included): a child's ru_maxrss
    # also covers the Python process it was forked from (~25 MiB), so a
    # "cut at once" baseline measured this way would say nothing
    check(kb < 64 * 1024, f"distinct stacks: the whole command peaks under 64 MiB "
          f"({kb / 1024:.1f} MiB)")
if rc == 0:
    check("incomplete: budget:" in pptest.pprof("-comments", out),
          "distinct stacks: go tool pprof reads it, reason in comments")
w.stop()
done()
