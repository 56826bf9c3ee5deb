#!/usr/bin/python3
"""pushprof benchmark suite (docs/performance.md). Run as root with Debian's python3:

  /usr/bin/python3 bench/bench.py [--quick] [--build DIR] [--sections 1,2,4]
      [--rounds N] [--work-rounds N] [--no-diagnose] [--out DIR]

(scripts/bench.sh builds the tree first and calls this.) Sections:

  1 slowdown  bench/cpuwork on every CPU with: nothing, pushprof at 19 Hz,
              pushprof at 99 Hz, `perf record -F 99 -a -g` (output on
              /dev/shm), in the order A B C D repeated; medians and ratios
              to the baseline of the same run.
  2 cost      agent CPU (utime+stime from /proc/PID/stat) per 1,000 samples
              in steady state, pushing over gRPC to a local WriteRaw sink;
              BPF run time per sample (kernel.bpf_stats_enabled, restored
              afterwards). Runs: 19 Hz, 99 Hz, 99 Hz without kernel stacks.
  3 memory    agent VmRSS/VmHWM and BPF map memory (fdinfo memlock of the
              agent's map fds) with ~500 extra processes running (20 busy,
              50 idle Go programs with heap profiling on, sleepers) and
              go_heap enabled in the agent; the OOM watcher alone
              (tests/oom/oomwatch) tracking the 50 Go programs when built.
  4 goheap    live snapshot time at 10,000 / 100,000 buckets (goheap_tool
              bench via bench/goheap/bench.py when present); OOM capture
              BPF time at 10,000 / 100,000 / 1,000,000 buckets
              (tests/oom/bench_oom.py when present).
  5 wire      bytes per window and per sample (gzip) on the same busy node.

Sections 2, 3 and 5 share the agent runs; a last 99 Hz run with perf
attached to the agent shows where its CPU goes (full mode). Results go to
OUT/results.md (Markdown, also printed) and OUT/results.json (read by
tests/bench/test_bench_quick.py). --quick makes every section short and
small: it proves the suite works, its figures mean little.
"""
import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.abspath(os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(SRC, "tests", "lib"))
os.environ.setdefault("PUSHPROF_SOURCE_DIR", SRC)
import schedstat  # noqa: E402  (tests/lib: threads' CPU time)

CLK = os.sysconf("SC_CLK_TCK")
NCPU = os.sysconf("SC_NPROCESSORS_ONLN")
PERF_DATA = "/dev/shm/pushprof-bench-perf.data"

GOALS = {
    "slowdown_99": "≤ 1/5 of perf record's slowdown and < 0.5%",
    "cpu_per_1000": "≤ 2 ms",
    "bpf_per_sample": "≤ 1 µs (1000 ns)",
    "rss": "≤ 16 MiB steady",
    "snapshot_100k": "< 50 ms",
    "oom_1m": "well inside the OOM reaper's delay (it waits 2 s before reaping)",
}


def log(msg):
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- /proc, bpf

def proc_cpu_s(pid):
    """utime + stime of all threads of pid, seconds; None when gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            st = f.read().rsplit(")", 1)[1].split()
        return (int(st[11]) + int(st[12])) / CLK
    except (OSError, IndexError, ValueError):
        return None


def proc_mem_kib(pid):
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
                    out[k] = int(v.split()[0])
    except (OSError, ValueError, IndexError):
        pass
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in ("Pss", "Pss_Anon", "Pss_File"):
                    out[k] = int(v.split()[0])
    except (OSError, ValueError, IndexError):
        pass
    # BPF maps user space mmaps (ring buffers, .bss) are counted in VmRSS as
    # file pages, but they are the kernel memory reported as BPF map memory:
    # the agent's own RSS is VmRSS without them
    try:
        bpf, name = 0, ""
        with open(f"/proc/{pid}/smaps") as f:
            for line in f:
                if re.match(r"[0-9a-f]+-[0-9a-f]+ ", line):
                    parts = line.split()
                    name = parts[5] if len(parts) > 5 else ""
                elif line.startswith("Rss:") and name.startswith("anon_inode:bpf-map"):
                    bpf += int(line.split()[1])
        out["BpfMapRss"] = bpf
        if "VmRSS" in out:
            out["OwnRss"] = out["VmRSS"] - bpf
    except (OSError, ValueError, IndexError):
        pass
    return out


def bpf_maps_of(pid):
    """BPF maps held open by pid, from /proc/PID/fdinfo (memlock is the
    kernel's own figure for the map's memory). Returns (bytes, [maps])."""
    maps = {}
    try:
        fds = os.listdir(f"/proc/{pid}/fdinfo")
    except OSError:
        return 0, []
    for fd in fds:
        info = {}
        try:
            with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                for line in f:
                    k, _, v = line.partition(":")
                    info[k.strip()] = v.strip()
        except OSError:
            continue
        if "map_id" in info and "memlock" in info:
            try:
                maps[int(info["map_id"])] = (int(info["memlock"]), int(info.get("map_type", -1)),
                                             int(info.get("max_entries", 0)))
            except ValueError:
                continue
    return sum(v[0] for v in maps.values()), sorted(maps.items())


def host_processes():
    return sum(1 for d in os.listdir("/proc") if d.isdigit())


def bpftool_prog(prog_id):
    r = subprocess.run(["bpftool", "-j", "prog", "show", "id", str(prog_id)],
                       capture_output=True, text=True, timeout=30)
    if r.returncode != 0 or not r.stdout.strip():
        return {}
    try:
        return json.loads(r.stdout)
    except ValueError:
        return {}


class BpfStats:
    """kernel.bpf_stats_enabled=1 for the duration, then the old value back.
    (The sysctl is global: another benchmark running at the same time may
    switch it too.)"""
    PATH = "/proc/sys/kernel/bpf_stats_enabled"

    def __enter__(self):
        with open(self.PATH) as f:
            self.old = f.read().strip()
        with open(self.PATH, "w") as f:
            f.write("1")
        return self

    restored = None   # last restore read back equal to the saved value

    def __exit__(self, *exc):
        with open(self.PATH, "w") as f:
            f.write(self.old)
        with open(self.PATH) as f:
            BpfStats.restored = f.read().strip() == self.old


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def print_ab(res, fields):
    """The A/B scripts' summary: per field, the median of each build's
    rounds (res["a"], res["b"]: dicts; a round without the figure, None, is
    left out) and the ratio B/A ("-" when A's is 0: a build without it)."""
    for field in fields:
        ma = median([x[field] for x in res["a"] if x[field] is not None])
        mb = median([x[field] for x in res["b"] if x[field] is not None])
        ratio = f"{mb / ma:.3f}" if ma else "-"
        print(f"{field}: A {ma:.2f}  B {mb:.2f}  B/A {ratio}")


def logfields(line):
    out = {}
    for m in re.finditer(r'(\w+)=("(?:[^"\\]|\\.)*"|\S*)', line):
        out[m.group(1)] = m.group(2).strip('"')
    return out


# ---------------------------------------------------------------- processes

_libc = None


def die_with_parent():
    """preexec_fn: SIGKILL this child when the driver dies (a killed or
    timed-out benchmark must not leave 500 processes or an agent behind)."""
    global _libc
    import ctypes
    if _libc is None:
        _libc = ctypes.CDLL("libc.so.6", use_errno=True)
    _libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG


class Sink:
    """A WriteRaw endpoint that answers OK at once and counts request bytes.
    tests/lib/receiver.py checks every profile in Python, which on a loaded
    2-CPU machine took longer than the agent's deadline; the benchmark
    needs a server that is not the bottleneck (the profiles' validity is
    what tests/push and tests/cpu check)."""

    def __init__(self):
        import grpc
        from concurrent import futures
        self.lock = threading.Lock()
        self.calls = []
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4),
                                  options=[("grpc.max_receive_message_length", 64 << 20)])
        handler = grpc.method_handlers_generic_handler(
            "parca.profilestore.v1alpha1.ProfileStoreService",
            {"WriteRaw": grpc.unary_unary_rpc_method_handler(
                self._write_raw, request_deserializer=lambda b: b,
                response_serializer=lambda b: b)})
        self.server.add_generic_rpc_handlers((handler,))
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.address = f"127.0.0.1:{self.port}"
        self.server.start()

    def _write_raw(self, request, context):
        with self.lock:
            self.calls.append(len(request))
        return b""  # an empty WriteRawResponse

    def stop(self):
        self.server.stop(grace=None)

class Bench:
    def __init__(self, a):
        self.a = a
        self.build = os.path.abspath(a.build)
        self.pushprof = os.path.join(self.build, "pushprof")
        self.out = os.path.abspath(a.out or os.path.join(self.build, "bench"))
        self.tmp = os.path.join(self.out, "tmp")
        os.makedirs(self.tmp, exist_ok=True)
        os.environ["PUSHPROF"] = self.pushprof
        os.environ["PUSHPROF_BUILD_DIR"] = self.build
        import pptest
        self.pptest = pptest
        pptest.PUSHPROF = self.pushprof
        pptest.BUILD_DIR = self.build
        self.results = {"quick": a.quick, "ncpu": NCPU, "kernel": os.uname().release,
                        "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}
        self.errors = []
        self.bpffloor = None

    def cc(self, src, name, extra=()):
        out = os.path.join(self.tmp, name)
        subprocess.run(["cc", "-O2", "-g", "-pthread", "-fno-omit-frame-pointer", *extra,
                        "-o", out, src], check=True)
        return out

    def go(self, src, name):
        return self.pptest.go_build(src, os.path.join(self.tmp, name))

    def config(self, name, freq, interval, store=None, remote=None, go_heap=False,
               kernel_stacks=True):
        path = os.path.join(self.tmp, name + ".yaml")
        text = (f"node: bench-node\n"
                f"log: {{level: info}}\n"
                f"http_address: \"\"\n"
                f"spool: {{directory: \"\"}}\n"
                f"cpu: {{frequency_hz: {freq}, interval: {interval}, "
                f"kernel_stacks: {'true' if kernel_stacks else 'false'}}}\n"
                f"go_heap: {{enabled: {'true' if go_heap else 'false'}}}\n")
        # bench/scale.py --targeted: only the benchmark's own processes
        text += getattr(self, "extra_config", "")
        if store:
            os.makedirs(store, exist_ok=True)
            text += f"local_store: {{directory: \"{store}\"}}\n"
        else:
            text += "local_store: {directory: \"\"}\n"
        if remote:
            # the test receiver checks every profile in Python: on a loaded
            # machine it can take longer than the default 10 s to answer
            text += f"remote_store: {{address: \"{remote}\", insecure: true, timeout: 60s}}\n"
        with open(path, "w") as f:
            f.write(text)
        return path


class Agent:
    """`pushprof run` with its log in a file that is read as it grows."""

    def __init__(self, bench, cfg, name):
        self.log_path = os.path.join(bench.tmp, name + ".log")
        self.logf = open(self.log_path, "w")
        self.p = subprocess.Popen([bench.pushprof, "run", "--config", cfg],
                                  stdout=subprocess.DEVNULL, stderr=self.logf,
                                  preexec_fn=die_with_parent)
        self.pid = self.p.pid

    def lines(self):
        with open(self.log_path, errors="replace") as f:
            return f.read().splitlines()

    def started(self, timeout=30):
        end = time.time() + timeout
        while time.time() < end:
            for line in self.lines():
                if "agent started" in line:
                    return logfields(line)
            if self.p.poll() is not None:
                break
            time.sleep(0.05)
        return None

    def windows(self):
        return [logfields(l) for l in self.lines() if 'msg="cpu window"' in l]

    def wait_windows(self, n, timeout):
        end = time.time() + timeout
        while time.time() < end and self.p.poll() is None:
            w = self.windows()
            if len(w) >= n:
                return w
            time.sleep(0.05)
        return self.windows()

    def stop(self, timeout=60):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
        try:
            self.p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
        self.logf.close()
        text = "\n".join(self.lines())
        if "runtime error:" in text or "Sanitizer" in text:
            return 99
        return self.p.returncode

    def tail(self, n=15):
        return "\n".join(self.lines()[-n:])


class Perf:
    def __init__(self, bench, freq):
        self.log_path = os.path.join(bench.tmp, "perf.log")
        self.logf = open(self.log_path, "w")
        self.p = subprocess.Popen(["perf", "record", "-F", str(freq), "-a", "-g",
                                   "-o", PERF_DATA], stdout=self.logf, stderr=self.logf,
                                  preexec_fn=die_with_parent)
        self.pid = self.p.pid

    def stop(self, timeout=120):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGINT)
        try:
            self.p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
        self.logf.close()
        with open(self.log_path, errors="replace") as f:
            text = f.read()
        m = re.search(r"\((\d+) samples\)", text)
        self.samples = int(m.group(1)) if m else 0
        self.text = text
        try:
            os.unlink(PERF_DATA)
        except OSError:
            pass
        return self.p.returncode


class Population:
    """The extra processes of the node sections: busy (C and Go CPU
    workloads at nice 19, so other users of the machine keep their share),
    idle Go programs with heap profiling on, and idle `tail -f` sleepers."""

    def __init__(self, bench, total, busy, go_idle, busy_secs):
        self.procs = []
        self.busy, self.go_pids = [], []
        chain = bench.cc(os.path.join(SRC, "tests", "cpu", "workloads", "chain.c"), "chain",
                         ("-O0",))
        split = bench.go(os.path.join(SRC, "tests", "cpu", "workloads", "split.go"), "split")
        idle = bench.go(os.path.join(HERE, "idle.go"), "idle")
        def nice():
            die_with_parent()
            os.nice(19)
        for i in range(busy):
            argv = [chain, str(busy_secs)] if i % 2 == 0 else [split, str(busy_secs), "1"]
            p = subprocess.Popen(argv, preexec_fn=nice, stdout=subprocess.DEVNULL)
            self.procs.append(p)
            self.busy.append(p.pid)
        for _ in range(go_idle):
            p = subprocess.Popen([idle], stdout=subprocess.PIPE, text=True,
                                 preexec_fn=die_with_parent)
            self.procs.append(p)
            self.go_pids.append(p.pid)
        # the sleepers, forked by one shell in a session of its own (a
        # Popen each took ~0.25 s at load 20: 5,000 took 20 min); each
        # exits within 60 s of the shell (--pid), which dies with the driver
        rest = max(0, total - busy - go_idle)
        self.sleepers = None
        if rest:
            self.sleepers = subprocess.Popen(
                ["sh", "-c", 'i=0; while [ $i -lt "$1" ]; do '
                 'tail -f -s 60 --pid=$$ /dev/null & i=$((i+1)); done; echo ready; wait',
                 "sh", str(rest)],
                stdout=subprocess.PIPE, text=True, start_new_session=True,
                preexec_fn=die_with_parent)
            self.sleepers.stdout.readline()
        # the Go programs print "ready" once their heap is built
        for p in self.procs[busy:busy + go_idle]:
            p.stdout.readline()

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
        for p in self.procs:
            p.wait()
        if self.sleepers:
            try:
                os.killpg(self.sleepers.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.sleepers.wait()


# ---------------------------------------------------------------- section 1

def settle(pid, quiet_s=0.005, step=0.5, limit=15.0):
    """Wait until the profiler's start-up work is over: its CPU time grew by
    less than quiet_s in the last step (an agent loads every process's
    symbols when it starts, which is not the steady cost measured here).
    Returns the seconds waited."""
    t0 = time.time()
    last = schedstat.oncpu_s(pid)
    while time.time() - t0 < limit:
        time.sleep(step)
        now = schedstat.oncpu_s(pid)
        if now is None or last is None or now - last < quiet_s:
            break
        last = now
    return time.time() - t0


def section_slowdown(b):
    a = b.a
    work = b.cc(os.path.join(HERE, "cpuwork.c"), "cpuwork")
    rounds = a.rounds or (1 if a.quick else 5)
    wr = a.work_rounds or (300 if a.quick else 12000)
    store = os.path.join(b.tmp, "slowdown-store")
    cfgs = {19: b.config("slow19", 19, "5s", store=store),
            99: b.config("slow99", 99, "5s", store=store)}
    kinds = [("none", None), ("pushprof 19 Hz", 19), ("pushprof 99 Hz", 99),
             ("perf record -F 99 -a -g", "perf")]
    runs = {k: [] for k, _ in kinds}
    log(f"slowdown: {rounds} round(s) of 4 runs, cpuwork {wr} rounds/thread")
    for r in range(rounds):
        for name, kind in kinds:
            prof, samples, err = None, None, None
            if kind == "perf":
                prof = Perf(b, 99)
            elif kind:
                prof = Agent(b, cfgs[kind], f"slow{kind}-{r}")
                if not prof.started():
                    err = "agent did not start: " + prof.tail()
            time.sleep(1.0)  # time to attach
            if isinstance(prof, Agent):
                # the first window symbolizes every process seen: start-up,
                # not the steady cost measured here
                prof.wait_windows(1, 60)
            if prof:
                settle_s = settle(prof.pid)
            c0 = schedstat.oncpu_s(prof.pid) if prof else 0
            out = subprocess.run([work, str(wr)], capture_output=True, text=True, timeout=3600,
                                 preexec_fn=die_with_parent)
            c1 = schedstat.oncpu_s(prof.pid) if prof else 0
            if kind == "perf":
                rc = prof.stop()
                samples = prof.samples
                if rc not in (0, -signal.SIGINT, 130) or not samples:
                    err = f"perf record rc={rc} samples={samples}: {prof.text[-500:]}"
            elif kind:
                rc = prof.stop()
                samples = sum(int(w.get("samples", 0)) for w in prof.windows())
                if rc != 0:
                    err = f"agent rc={rc}: " + prof.tail()
            f = logfields("x=" + out.stdout.strip().replace(" rounds/s", ""))
            row = {"round": r, "wall_rate": float(f.get("x", 0) or 0),
                   "settle_s": settle_s if prof else 0.0,
                   "cpu_rate": float(f.get("rounds_per_cpu_s", 0) or 0),
                   "seconds": float(f.get("seconds", 0) or 0),
                   "profiler_cpu_s": (c1 - c0) if (prof and c0 is not None and c1 is not None)
                   else 0.0,
                   "samples": samples}
            if err:
                b.errors.append(f"slowdown {name}: {err}")
                row["error"] = err
            runs[name].append(row)
            log(f"  round {r} {name}: {out.stdout.strip()} profiler_cpu_s="
                f"{row['profiler_cpu_s']:.3f} samples={samples} settle_s={row['settle_s']:.1f}")
    base = runs["none"]
    table = []
    for name, _ in kinds:
        rs = runs[name]
        # paired: each run against the baseline of its own round
        wall_ratio = median([x["wall_rate"] / base[i]["wall_rate"] for i, x in enumerate(rs)
                             if base[i]["wall_rate"]])
        cpu_ratio = median([x["cpu_rate"] / base[i]["cpu_rate"] for i, x in enumerate(rs)
                            if base[i]["cpu_rate"]])
        secs = median([x["seconds"] for x in rs])
        pcpu = median([x["profiler_cpu_s"] for x in rs])
        table.append({"name": name, "wall_rate_median": median([x["wall_rate"] for x in rs]),
                      "cpu_rate_median": median([x["cpu_rate"] for x in rs]),
                      "wall_ratio": wall_ratio, "cpu_ratio": cpu_ratio,
                      "wall_rate_min": min(x["wall_rate"] for x in rs),
                      "wall_rate_max": max(x["wall_rate"] for x in rs),
                      "seconds_median": secs, "profiler_cpu_s_median": pcpu,
                      "profiler_cpu_pct": 100.0 * pcpu / (secs * NCPU) if secs else 0.0,
                      "samples_median": median([x["samples"] or 0 for x in rs])
                      if name != "none" else None})
    b.results["slowdown"] = {"rounds": rounds, "work_rounds": wr, "table": table, "runs": runs}


# ---------------------------------------------------------------- sections 2, 3, 5

def perf_breakdown(data, binary):
    """Where a profiled process's CPU went, from `perf report`: the share
    per DSO (self time), and the inclusive share (children) of the
    process's own functions (those defined in binary) over 3%."""
    def report(*args):
        r = subprocess.run(["perf", "report", "-i", data, "--stdio", "-g", "none", *args],
                           capture_output=True, text=True, timeout=300)
        return [l for l in r.stdout.splitlines() if l.strip() and not l.startswith("#")]
    dsos = []
    for line in report("--no-children", "--sort", "dso"):
        m = re.match(r"\s*([\d.]+)%\s+(\S+)", line)
        if m:
            dsos.append((float(m.group(1)), m.group(2)))
    nm = subprocess.run(["nm", "--defined-only", binary], capture_output=True, text=True)
    own = {l.split()[-1] for l in nm.stdout.splitlines() if len(l.split()) >= 3}
    funcs = []
    for line in report("--children", "--sort", "sym"):
        m = re.match(r"\s*([\d.]+)%\s+([\d.]+)%\s+\[\.\]\s+(\S+)", line)
        if m and m.group(3) in own and float(m.group(1)) >= 3:
            funcs.append((float(m.group(1)), float(m.group(2)), m.group(3)))
    r = subprocess.run(["perf", "report", "-i", data, "--stdio", "--sort", "dso"],
                       capture_output=True, text=True, timeout=300)
    m = re.search(r"# Samples: (\d+)", r.stdout)
    samples = int(m.group(1)) if m else 0
    return {"dsos": dsos, "functions": funcs[:25], "samples": samples}


def smaps_top(pid, n=8):
    """The mappings of pid with the largest Rss: (kib, anon kib, name)."""
    out, cur = {}, None
    try:
        with open(f"/proc/{pid}/smaps") as f:
            for line in f:
                parts = line.split()
                if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
                    cur = parts[5] if len(parts) > 5 else "[anon]"
                    cur = os.path.basename(cur) if cur.startswith("/") else cur
                    out.setdefault(cur, [0, 0])
                elif parts and parts[0] == "Rss:" and cur:
                    out[cur][0] += int(parts[1])
                elif parts and parts[0] == "Anonymous:" and cur:
                    out[cur][1] += int(parts[1])
    except OSError:
        return []
    return sorted(((v[0], v[1], k) for k, v in out.items()), reverse=True)[:n]


def node_run(b, freq, interval, windows, kernel_stacks=True, diagnose=False):
    rcv = Sink()
    res = {"freq": freq, "interval": interval, "kernel_stacks": kernel_stacks}
    try:
        name = f"node{freq}" + ("" if kernel_stacks else "-nokernel")
        # go_heap on with its defaults (snapshots every 60 s, OOM capture armed):
        # the agent tracks the idle Go programs, as on a real node
        cfg = b.config(name, freq, interval, remote=rcv.address, kernel_stacks=kernel_stacks,
                       go_heap=True)
        with BpfStats():
            ag = Agent(b, cfg, name)
            try:
                st = ag.started()
                if not st:
                    raise RuntimeError("agent did not start: " + ag.tail())
                prog_id = st.get("bpf_prog_id", "0")
                # window 1 loads every process's symbols: the warm-up
                w = ag.wait_windows(1, 120)
                c_first, t_first = proc_cpu_s(ag.pid), time.time()
                first = len(w)
                prof = None
                if diagnose:
                    pdata = "/dev/shm/pushprof-bench-agent.data"
                    prof = subprocess.Popen(["perf", "record", "-F", "997", "-g", "-p",
                                             str(ag.pid), "-o", pdata, "--quiet"],
                                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                # side by side: an empty perf_event BPF program at the same
                # frequency (the floor any BPF sampler pays here)
                floor = None
                if b.bpffloor:
                    floor = subprocess.Popen([b.bpffloor, str(freq),
                                              str(max(1, int(windows * interval_s(interval))))],
                                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                             text=True)
                rss_series = []
                for k in range(1, windows + 1):
                    w = ag.wait_windows(first + k, 60 + 30 * k)
                    rss_series.append(proc_mem_kib(ag.pid).get("VmRSS"))
                c_last, t_last = proc_cpu_s(ag.pid), time.time()
                if floor:
                    out, errout = floor.communicate(timeout=120)
                    res["bpf_floor"] = logfields(out.strip()) if floor.returncode == 0 else None
                    if floor.returncode != 0:
                        b.errors.append("bpffloor: " + errout.strip()[-300:])
                if prof:
                    prof.send_signal(signal.SIGINT)
                    prof.wait(timeout=120)
                    res["agent_profile"] = perf_breakdown(pdata, b.pushprof)
                    os.unlink(pdata)
                    res["smaps_top"] = smaps_top(ag.pid)
                mem = proc_mem_kib(ag.pid)
                map_bytes, maps = bpf_maps_of(ag.pid)
                prog = bpftool_prog(prog_id)
                procs = host_processes()
            finally:
                rc = ag.stop()
        wins = ag.windows()
        steady = wins[first:first + windows] if len(wins) > first else []
        samples = sum(int(x.get("samples", 0)) for x in steady)
        cpu_s = (c_last - c_first) if (c_first is not None and c_last is not None) else 0.0
        win_cpu_ms = sum(float(x.get("agent_cpu_ms", 0)) for x in steady)
        with rcv.lock:
            calls = list(rcv.calls)
        wire = sum(calls)
        all_samples = sum(int(x.get("samples", 0)) for x in wins)
        res.update({
            "rc": rc, "windows": len(wins), "steady_windows": len(steady),
            "samples": samples, "cpu_s": cpu_s,
            "cpu_pct_of_one": 100 * cpu_s / (t_last - t_first) if t_last > t_first else None,
            "cpu_ms_per_1000": cpu_s * 1e3 / samples * 1000 if samples else None,
            "window_cpu_ms_per_1000": win_cpu_ms / samples * 1000 if samples else None,
            "bpf_run_cnt": prog.get("run_cnt", 0), "bpf_run_time_ns": prog.get("run_time_ns", 0),
            "bpf_ns_per_run": (prog["run_time_ns"] / prog["run_cnt"])
            if prog.get("run_cnt") else None,
            "vmrss_kib": mem.get("VmRSS"), "vmhwm_kib": mem.get("VmHWM"),
            "own_rss_kib": mem.get("OwnRss"), "bpf_map_rss_kib": mem.get("BpfMapRss"),
            "rss_anon_kib": mem.get("RssAnon"), "rss_file_kib": mem.get("RssFile"),
            "pss_kib": mem.get("Pss"), "rss_series_kib": rss_series,
            "bpf_map_bytes": map_bytes, "bpf_maps": len(maps),
            "host_processes": procs,
            "profiles_per_window": median([int(x.get("processes", 0)) for x in steady]),
            "stacks_per_window": median([int(x.get("stacks", 0)) for x in steady]),
            "samples_per_window": median([int(x.get("samples", 0)) for x in steady]),
            "gz_bytes_per_window": median([int(x.get("bytes", 0)) for x in steady]),
            "gz_bytes_per_sample": (sum(int(x.get("bytes", 0)) for x in steady) / samples)
            if samples else None,
            "flush_errors": sum(1 for x in wins if x.get("flush_error")),
            "go_heap_lines": sum(1 for l in ag.lines() if "go heap" in l or "go process" in l),
            "wire_calls": len(calls), "wire_ok": len(calls),
            "wire_bytes": wire, "wire_bytes_per_window": wire / len(wins) if wins else None,
            "wire_bytes_per_sample": wire / all_samples if all_samples else None,
            "lost": {k: sum(int(x.get(k, 0)) for x in steady)
                     for k in ("lost_map_full", "lost_stack_err", "lost_stacks_full",
                               "lost_collision", "truncated")},
        })
        if rc != 0:
            b.errors.append(f"node run {freq} Hz: agent rc={rc}: {ag.tail()}")
    finally:
        rcv.stop()
    return res


def oom_tracking(b, pop):
    """The OOM watcher (Go heap tracking for OOM capture) on the idle Go
    programs, when it is built (tests/oom/oomwatch)."""
    tool = os.path.join(b.build, "tests", "oom", "oomwatch")
    if not os.path.exists(tool):
        return {"available": False}
    out = os.path.join(b.tmp, "oomwatch")
    os.makedirs(out, exist_ok=True)
    args = [tool, "--out", out]
    for pid in pop.go_pids[:64]:
        args += ["--pid", str(pid)]
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                         preexec_fn=die_with_parent)
    tracked, res = 0, {"available": True}
    try:
        end = time.time() + 60
        while time.time() < end:
            line = p.stdout.readline()
            if not line:
                break
            if '"tracked"' in line:
                tracked += 1
            if '"ready"' in line:
                break
        time.sleep(3.0)  # mirror catches up with every tracked heap
        mem = proc_mem_kib(p.pid)
        mb, maps = bpf_maps_of(p.pid)
        res.update({"tracked": tracked, "go_processes": len(pop.go_pids),
                    "vmrss_kib": mem.get("VmRSS"), "vmhwm_kib": mem.get("VmHWM"),
            "own_rss_kib": mem.get("OwnRss"), "bpf_map_rss_kib": mem.get("BpfMapRss"),
                    "rss_anon_kib": mem.get("RssAnon"), "rss_file_kib": mem.get("RssFile"),
                    "pss_kib": mem.get("Pss"), "bpf_map_bytes": mb, "bpf_maps": len(maps)})
    finally:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    res["rc"] = p.returncode
    return res


def interval_s(text):
    """'10s' / '500ms' / '1m' -> seconds (the bench only writes these forms)."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(ms|s|m)", text)
    if not m:
        raise ValueError(f"interval {text!r}")
    return float(m.group(1)) * {"ms": 1e-3, "s": 1.0, "m": 60.0}[m.group(2)]


def coldmem(b):
    """This machine's cost of touching memory idle for 3 s vs warm."""
    try:
        tool = b.cc(os.path.join(HERE, "coldmem.c"), "coldmem")
        r = subprocess.run([tool, "3"], capture_output=True, text=True, timeout=60)
        return {k: float(v) for k, v in logfields(r.stdout.strip()).items()} \
            if r.returncode == 0 else None
    except (subprocess.SubprocessError, OSError, ValueError) as e:
        b.errors.append(f"coldmem: {e}")
        return None


def section_node(b):
    a = b.a
    q = a.quick
    try:
        b.bpffloor = b.cc(os.path.join(HERE, "bpffloor.c"), "bpffloor")
    except (subprocess.SubprocessError, OSError) as e:
        b.errors.append(f"bpffloor: {e}")
        b.bpffloor = None
    cold = coldmem(b)
    log(f"node: memory idle 3 s costs {cold} (us per access)")
    total, busy, goidle = (60, 4, 5) if q else (500, 20, 50)
    interval, windows = ("1s", 2) if q else ("10s", 5)
    # (Hz, kernel stacks): the last one shows what the kernel unwind costs
    freqs = [(99, True)] if q else [(19, True), (99, True), (99, False)]
    busy_secs = 40 if q else 60 + (len(freqs) + 1) * 80
    log(f"node: {total} extra processes ({busy} busy at nice 19, {goidle} idle Go), "
        f"{windows} steady windows of {interval}, runs (Hz, kernel stacks) {freqs}")
    pop = Population(b, total, busy, goidle, busy_secs)
    try:
        runs = []
        for f, ks in freqs:
            runs.append(node_run(b, f, interval, windows, ks))
            log(f"  {f} Hz kernel_stacks={ks}: " + json.dumps({k: v for k, v in runs[-1].items()
                                             if k != "lost"}))
        diag = None
        if not q and not a.no_diagnose:
            diag = node_run(b, 99, interval, windows, True, diagnose=True)
            log("  diagnose: " + json.dumps({k: diag.get(k) for k in
                                              ("agent_profile", "smaps_top")}))
        oom = oom_tracking(b, pop)
        log("  oomwatch: " + json.dumps(oom))
    finally:
        pop.stop()
    b.results["node"] = {"extra_processes": total, "busy": busy, "go_idle": goidle,
                         "interval": interval, "steady_windows": windows, "runs": runs,
                         "oomwatch": oom, "diagnose": diag, "coldmem": cold}


# ---------------------------------------------------------------- section 4

def section_goheap(b):
    a = b.a
    res = {}
    counts = [10000] if a.quick else [10000, 100000]
    script = os.path.join(HERE, "goheap", "bench.py")
    tool = os.path.join(b.build, "tests", "goheap", "goheap_tool")
    rows = []
    if os.path.exists(script) and os.path.exists(tool):
        r = subprocess.run(["/usr/bin/python3", script, b.build, *map(str, counts)],
                           capture_output=True, text=True, timeout=1800)
        for line in r.stdout.splitlines():
            if line.startswith("N=") and " snapbench " in line and rows:
                # the snapshot alone, for the row of the same N just printed
                rows[-1].update({"snapbench_" + k: v for k, v in logfields(line).items()
                                 if k != "N"})
            elif line.startswith("N="):
                rows.append(logfields(line))
        res["source"] = "bench/goheap/bench.py (goheap_tool bench, 15 iterations)"
        if not rows:
            b.errors.append("goheap bench printed nothing: " + (r.stdout + r.stderr)[-1500:])
    elif os.path.exists(tool):
        rows = goheap_fallback(b, tool, counts)
        res["source"] = "goheap_tool bench (tests/goheap), many.go"
    else:
        b.errors.append("goheap: tests/goheap/goheap_tool not built")
    res["snapshot"] = rows

    oom_script = os.path.join(SRC, "tests", "oom", "bench_oom.py")
    oomwatch = os.path.join(b.build, "tests", "oom", "oomwatch")
    if os.path.exists(oom_script) and os.path.exists(oomwatch):
        sizes = "10000" if a.quick else "10000,100000,1000000"
        env = dict(os.environ, OOM_BENCH_SIZES=sizes,
                   OOM_BENCH_KILLS="1" if a.quick else "10",
                   PYTHONPATH=os.pathsep.join([os.path.join(SRC, "tests", "oom"),
                                               os.path.join(SRC, "tests", "lib")]))
        log(f"oom: tests/oom/bench_oom.py sizes {sizes}")
        r = subprocess.run(["/usr/bin/python3", oom_script], capture_output=True, text=True,
                           timeout=3600, env=env)
        orows, kills, hdr = [], None, None
        for line in r.stdout.splitlines():
            parts = line.split()
            if line.startswith("buckets walked"):
                hdr = parts  # column names (newer versions add columns)
                continue
            if hdr and len(parts) == len(hdr) and parts[0].isdigit():
                row = dict(zip(hdr, parts))
                try:
                    orows.append({"buckets": int(row["buckets"]), "walked": int(row["walked"]),
                                  "new": int(row["new"]),
                                  "capture_ms": float(row["capture_ms"]),
                                  "mark_to_capture_us": float(row["mark_to_capture_us"]),
                                  "complete": row["complete"] == "True",
                                  "kernel_mib": float(row["kernel_MiB"]),
                                  "watcher_rss_mib": float(row["watcher_rss_MiB"])
                                  if "watcher_rss_MiB" in row else None})
                except (KeyError, ValueError):
                    continue
            if line.startswith("kills:"):
                kills = line
        res["oom"] = {"available": True, "rows": orows, "kills": kills, "rc": r.returncode}
        if not orows:
            b.errors.append("oom bench gave no rows: " + (r.stdout + r.stderr)[-1500:])
    else:
        res["oom"] = {"available": False}
    b.results["goheap"] = res


def goheap_fallback(b, tool, counts):
    """goheap_tool bench against tests/goheap/many.go (which takes a bucket
    count N, or in older trees a number of LEVELS giving 2^LEVELS)."""
    src = os.path.join(SRC, "tests", "goheap", "many.go")
    binary = b.go(src, "many")
    levels = "LEVELS" in open(src).read()
    rows = []
    for n in counts:
        arg = str(max(1, (n - 1).bit_length())) if levels else str(n)
        ready = os.path.join(b.tmp, "many.ready")
        if os.path.exists(ready):
            os.unlink(ready)
        env = dict(os.environ, PP_MEMPROFILERATE="1")
        env.pop("GODEBUG", None)
        p = subprocess.Popen([binary, arg, os.path.join(b.tmp, "own.pb.gz"), ready], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             preexec_fn=die_with_parent)
        try:
            end = time.time() + 300
            while not os.path.exists(ready) and time.time() < end and p.poll() is None:
                time.sleep(0.05)
            r = subprocess.run([tool, "bench", str(p.pid), "5" if b.a.quick else "15",
                                "1000000"], capture_output=True, text=True, timeout=600)
            f = logfields(r.stdout)
            f["N"] = str(n)
            rows.append(f)
        finally:
            p.kill()
            p.wait()
    return rows


# ---------------------------------------------------------------- report

def fmt(x, nd=1):
    if x is None or (isinstance(x, float) and x != x):
        return "n/a"
    if isinstance(x, float):
        return f"{x:,.{nd}f}"
    return f"{x:,}"


def verdict(ok):
    return "n/a" if ok is None else ("met" if ok else "**missed**")


def runlabel(r):
    return f"{r['freq']}" + ("" if r.get("kernel_stacks", True) else " (kernel_stacks: false)")


def est_slowdown(t):
    """Percent throughput lost by a workload that fills every CPU."""
    return (1 - t["cpu_ratio"] * (1 - t["profiler_cpu_pct"] / 100)) * 100


def report(b):
    R = b.results
    L = [f"# pushprof benchmark results{' (quick mode: checks the suite works, figures mean little)' if R['quick'] else ''}",
         "",
         f"{R['started']}, kernel {R['kernel']}, {R['ncpu']} CPUs. Absolute times on a shared VM "
         "are noisy; read the ratios (same run) and medians.", ""]
    s = R.get("slowdown")
    if s:
        L += ["## 1. Workload slowdown (bench/cpuwork on every CPU)", "",
              f"{s['rounds']} round(s) of the order none, pushprof 19 Hz, pushprof 99 Hz, perf "
              f"record; cpuwork {s['work_rounds']} rounds per thread. Each profiler gets 1 s to "
              "attach; pushprof (5 s windows) also its first window, which symbolizes every "
              "process on the host; then until its CPU use settles (< 5 ms per 0.5 s, at most "
              "15 s) before cpuwork starts. Ratio = median over rounds "
              "of (run / baseline of the same round). *wall* = rounds per second of wall time; "
              "*cpu* = rounds per CPU-second charged to the workload (not moved by other load "
              "on the machine). Profiler CPU = the profiler's own on-CPU time (schedstat, all "
              "threads) while cpuwork ran, as a share of all CPUs.", "",
              "| run | wall rounds/s (median) | wall ratio | slowdown (wall) | CPU-time ratio | "
              "profiler CPU (share of all CPUs) | est. slowdown | samples / run | goal |",
              "|---|---|---|---|---|---|---|---|---|"]
        perf = next(t for t in s["table"] if t["name"].startswith("perf"))
        for t in s["table"]:
            goal = GOALS["slowdown_99"] if t["name"] == "pushprof 99 Hz" else ""
            L.append(f"| {t['name']} | {fmt(t['wall_rate_median'])} | {t['wall_ratio']:.4f} | "
                     f"{(1 - t['wall_ratio']) * 100:+.2f}% | {t['cpu_ratio']:.4f} | "
                     f"{t['profiler_cpu_pct']:.3f}% | {est_slowdown(t):+.2f}% | "
                     f"{fmt(t['samples_median']) if t['samples_median'] is not None else ''} | "
                     f"{goal} |")
        p99 = next(t for t in s["table"] if t["name"] == "pushprof 99 Hz")
        base = s["table"][0]
        spread = (base["wall_rate_max"] - base["wall_rate_min"]) / base["wall_rate_median"] \
            if base["wall_rate_median"] else float("nan")
        L += ["", "*est. slowdown* = 1 − CPU-time ratio × (1 − profiler share): what a workload "
              "that fills every CPU loses, from figures that other load on the machine does not "
              "move much (the kernel here has no IRQ time accounting, so the sampling interrupt "
              "and the BPF program are charged to the interrupted workload and show in its "
              "CPU-time ratio).", ""]
        runs = s["runs"]

        def noise(name, key):
            """Half the range of the per-round ratios of run `name`, in %."""
            rs = [x[key] / runs["none"][i][key] for i, x in enumerate(runs[name])
                  if runs["none"][i][key]]
            return (max(rs) - min(rs)) / 2 * 100 if len(rs) > 1 else float("nan")

        for label, f99, fperf, key in (("wall", (1 - p99["wall_ratio"]) * 100,
                                        (1 - perf["wall_ratio"]) * 100, "wall_rate"),
                                       ("est.", est_slowdown(p99), est_slowdown(perf),
                                        "cpu_rate")):
            nz = max(noise("pushprof 99 Hz", key), noise(perf["name"], key))
            text = (f"- Slowdown at 99 Hz ({label}) {f99:+.2f}% vs perf record {fperf:+.2f}%; "
                    + (f"round-to-round noise ±{nz:.2f}% (half the range of the per-round "
                       "ratios). " if nz == nz else "one round, no noise estimate. "))
            if nz != nz or nz >= 0.5:
                text += ("Noise is larger than the 0.5% goal: this run cannot tell whether the "
                         "goals are met.")
            else:
                text += (f"Under 0.5%: {verdict(f99 < 0.5)}; at most 1/5 of perf's: "
                         + (verdict(f99 <= fperf / 5) if fperf > 0 else
                            "n/a (perf showed no slowdown)") + ".")
            L.append(text)
        L.append(f"- Baseline wall spread (max−min)/median over the rounds: {spread * 100:.1f}%.")
        nd = R.get("node")
        bpf99 = next((r for r in (nd or {}).get("runs", [])
                      if r["freq"] == 99 and r.get("kernel_stacks", True)), None)
        if bpf99 and bpf99.get("bpf_ns_per_run"):
            bshare = bpf99["bpf_ns_per_run"] * 99 / 1e9 * 100
            L.append(f"- From parts that noise does not hide: pushprof at 99 Hz = its own CPU "
                     f"{p99['profiler_cpu_pct']:.3f}% of the machine + BPF "
                     f"{bpf99['bpf_ns_per_run']:,.0f} ns × 99 Hz = {bshare:.3f}% of each CPU "
                     f"→ ≈ {p99['profiler_cpu_pct'] + bshare:.2f}%; perf record's own CPU is "
                     f"{perf['profiler_cpu_pct']:.3f}% (its in-kernel unwinding cannot be "
                     "separated here: no PMU, no IRQ time accounting).")
        L.append("")
    n = R.get("node")
    if n:
        L += ["## 2. Agent cost (steady state, whole host, pushing over gRPC to a local sink)", "",
              f"{n['extra_processes']} extra processes ({n['busy']} busy at nice 19, "
              f"{n['go_idle']} idle Go programs, the rest sleeping); {n['steady_windows']} "
              f"windows of {n['interval']} after the first (which loads every process's "
              "symbols). Agent CPU = utime+stime from /proc/PID/stat between the end of window "
              "1 and the end of the last window measured, over the samples of those windows; "
              "*window work* = the agent's own agent_cpu_ms per window (drain, symbolize, "
              "encode, push). BPF = run_time_ns / run_cnt with kernel.bpf_stats_enabled=1; "
              "*empty BPF* = an empty perf_event program (bench/bpffloor.c) on the same "
              "cpu-clock events at the same rate, run side by side: what any BPF sampler pays "
              "here before doing anything.", "",
              "| Hz | samples | agent CPU ms / 1,000 samples | window work ms / 1,000 | "
              "agent CPU, % of one CPU | BPF ns / sample | empty BPF ns / run | BPF runs | "
              "lost (map full) | push errors | goal CPU | goal BPF |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in n["runs"]:
            c, bp = r.get("cpu_ms_per_1000"), r.get("bpf_ns_per_run")
            fl = (r.get("bpf_floor") or {}).get("ns_per_run")
            L.append(f"| {runlabel(r)} | {fmt(r['samples'])} | {fmt(c, 2)} "
                     f"({verdict(c <= 2 if c is not None else None)}) | "
                     f"{fmt(r.get('window_cpu_ms_per_1000'), 2)} | "
                     f"{fmt(r.get('cpu_pct_of_one'), 2)}% | {fmt(bp, 0)} "
                     f"({verdict(bp <= 1000 if bp is not None else None)}) | "
                     f"{fl if fl is not None else 'n/a'} | "
                     f"{fmt(r['bpf_run_cnt'])} | {fmt(r['lost']['lost_map_full'])} | "
                     f"{r.get('flush_errors', 0)} | {GOALS['cpu_per_1000']} | "
                     f"{GOALS['bpf_per_sample']} |")
        cm = n.get("coldmem")
        if cm:
            L += ["", f"Memory on this machine: a random read costs {cm['warm_us']:.2f} µs warm and "
                  f"{cm['cold_us']:.1f} µs after {cm['idle_s']:.0f} s idle (bench/coldmem.c, 64 MiB "
                  "of 4 KiB pages). The agent's window work runs on data untouched since the "
                  "previous window, so where this gap is large (VMs whose host tracks or reclaims "
                  "idle guest memory) it dominates the agent's CPU figures."]
        L += ["", "## 3. Agent memory (steady state)", "",
              "The agent runs with go_heap enabled (defaults), tracking the idle Go programs. "
              "VmRSS counts shared library pages (libgrpc, OpenSSL, ...) in full; RssAnon is the "
              "agent's own heap and stacks; PSS splits shared pages among their users. "
              "*own RSS* = VmRSS minus the BPF maps the agent mmaps (the OOM ring buffer, "
              "map .bss), which VmRSS counts but which are the kernel memory in the BPF maps "
              "column; the goal is checked against it. "
              "*VmRSS per window* is read after each steady window (is it flat?).", "",
              "| process | Hz | host processes | VmRSS | own RSS | VmHWM | RssAnon | RssFile | PSS | "
              "BPF maps (memlock) | VmRSS per window (MiB) | goal |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in n["runs"]:
            rss = r.get("own_rss_kib") or r.get("vmrss_kib")
            L.append(f"| pushprof run | {runlabel(r)} | {fmt(r['host_processes'])} | "
                     f"{fmt((r.get('vmrss_kib') or 0) / 1024, 1)} MiB | "
                     f"{fmt((rss or 0) / 1024, 1)} MiB | "
                     f"{fmt((r.get('vmhwm_kib') or 0) / 1024, 1)} MiB | "
                     f"{fmt((r.get('rss_anon_kib') or 0) / 1024, 1)} MiB | "
                     f"{fmt((r.get('rss_file_kib') or 0) / 1024, 1)} MiB | "
                     f"{fmt((r.get('pss_kib') or 0) / 1024, 1)} MiB | "
                     f"{fmt(r['bpf_map_bytes'] / 2**20, 1)} MiB in {r['bpf_maps']} maps | "
                     + " ".join(f"{(x or 0) / 1024:.1f}" for x in r.get("rss_series_kib") or [])
                     + " | "
                     f"{GOALS['rss']}: {verdict(rss is not None and rss <= 16384)} |")
        o = n["oomwatch"]
        if o.get("available"):
            L.append(f"| oomwatch, {o.get('tracked')}/{o.get('go_processes')} Go processes "
                     f"tracked | - | | {fmt((o.get('vmrss_kib') or 0) / 1024, 1)} MiB | "
                     f"{fmt((o.get('own_rss_kib') or 0) / 1024, 1)} MiB | "
                     f"{fmt((o.get('vmhwm_kib') or 0) / 1024, 1)} MiB | "
                     f"{fmt((o.get('rss_anon_kib') or 0) / 1024, 1)} MiB | "
                     f"{fmt((o.get('rss_file_kib') or 0) / 1024, 1)} MiB | "
                     f"{fmt((o.get('pss_kib') or 0) / 1024, 1)} MiB | "
                     f"{fmt(o.get('bpf_map_bytes', 0) / 2**20, 1)} MiB in {o.get('bpf_maps')} "
                     "maps | | |")
        else:
            L.append("| oomwatch | | | | | | | | | | | not measured: tests/oom/oomwatch is not "
                     "built in this tree |")
        W = ["## 5. Wire (gzip pprof, WriteRaw to a local sink)", "",
             "Same runs as section 2: per steady window, the gzip pprof bytes the agent "
             "handed over (one profile per process) and the WriteRaw request bytes the "
             "sink got (all windows, incl. labels and framing).", "",
              "| Hz | profiles / window | gzip bytes / window | gzip bytes / sample | "
              "WriteRaw bytes / window | WriteRaw bytes / sample | calls OK |",
              "|---|---|---|---|---|---|---|"]
        for r in n["runs"]:
            W.append(f"| {runlabel(r)} | {fmt(r['profiles_per_window'], 0)} | "
                     f"{fmt(r['gz_bytes_per_window'], 0)} | {fmt(r['gz_bytes_per_sample'], 1)} | "
                     f"{fmt(r['wire_bytes_per_window'], 0)} | "
                     f"{fmt(r['wire_bytes_per_sample'], 1)} | {r['wire_ok']}/{r['wire_calls']} |")
        W.append("")
        L.append("")
    g = R.get("goheap")
    if g:
        L += ["## 4. Go heap", "", f"Live snapshot: {g.get('source', 'not run')}; "
              "read = walking the buckets with process_vm_readv; snapshot = read + symbolize + "
              "pprof + gzip.", "",
              "| buckets | read ms (median) | snapshot ms (median) | snapshot CPU ms (min) | "
              "gzip bytes | goal |", "|---|---|---|---|---|---|"]
        for r in g.get("snapshot", []):
            nb = int(r.get("buckets", r.get("N", 0)))
            sn = float(r.get("snapshot_ms_median", "nan"))
            goal = ""
            if int(r.get("N", 0)) >= 100000:
                goal = f"{GOALS['snapshot_100k']}: {verdict(sn < 50)}"
            L.append(f"| {nb:,} | {r.get('read_ms_median')} | {r.get('snapshot_ms_median')} | "
                     f"{r.get('snapshot_cpu_ms_min')} | {fmt(int(r.get('pprof_gz_bytes', 0)))} "
                     f"| {goal} |")
        o = g.get("oom", {})
        L += ["", "OOM capture (BPF walk of the victim's buckets at OOM-kill time; "
              "tests/oom/bench_oom.py):", ""]
        if o.get("available"):
            L += ["| buckets | walked | new since mirror | capture ms | mark→capture µs | "
                  "complete | kernel MiB | watcher RSS MiB | goal |",
                  "|---|---|---|---|---|---|---|---|---|"]
            for r in o["rows"]:
                goal = (f"{GOALS['oom_1m']}; taken here as ≤ 1/4 of it (500 ms): "
                        f"{verdict(r['capture_ms'] <= 500)}") if r["buckets"] >= 1000000 else ""
                L.append(f"| {r['buckets']:,} | {r['walked']:,} | {r['new']:,} | "
                         f"{r['capture_ms']:.2f} | {r['mark_to_capture_us']:.1f} | "
                         f"{r['complete']} | {r['kernel_mib']:.1f} | "
                         f"{fmt(r.get('watcher_rss_mib'), 0)} | {goal} |")
            if o.get("kills"):
                L += ["", o["kills"]]
        else:
            L.append("Not measured: tests/oom/bench_oom.py and the oomwatch tool are not in "
                     "this tree (the OOM branch is not merged).")
        L.append("")
    if n:
        L += W
    d = n.get("diagnose") if n else None
    if d:
        ap_ = d.get("agent_profile") or {}
        L += ["## Diagnostics: where the agent's CPU and memory go (99 Hz, extra run)", "",
              "`perf record -F 997 -g -p AGENT` over the steady windows of a separate run (perf "
              "adds to the agent's cost in that run, so its figures are not used above); "
              f"{ap_.get('samples', 0)} samples. Call chains that pass through libc or zlib "
              "(built without frame pointers) are cut, so inclusive shares undercount.", "",
              "Self time by DSO: " + ", ".join(f"{dso} {pct:.0f}%" for pct, dso in
                                               ap_.get("dsos", [])[:8]), "",
              "Inclusive time of the agent's own functions (≥ 3%, callees in the kernel and "
              "libraries included):", "",
              "| inclusive % | self % | function |", "|---|---|---|"]
        for ch, sf, sym in ap_.get("functions", []):
            L.append(f"| {ch:.1f} | {sf:.1f} | `{sym}` |")
        L += ["", "Largest mappings of the agent by Rss (smaps):", "",
              "| Rss KiB | of which anonymous | mapping |", "|---|---|---|"]
        for rss, anon, name in d.get("smaps_top") or []:
            L.append(f"| {rss:,} | {anon:,} | {name} |")
        L.append("")
    if b.errors:
        L += ["## Errors", ""] + [f"- {e}" for e in b.errors] + [""]
    return "\n".join(L)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--build", default=os.path.join(SRC, "build"))
    ap.add_argument("--out", default=None)
    ap.add_argument("--sections", default="1,2,3,4,5")
    ap.add_argument("--rounds", type=int, default=0, help="slowdown rounds (default 5; quick 1)")
    ap.add_argument("--no-diagnose", action="store_true",
                    help="skip the extra 99 Hz run with perf attached to the agent")
    ap.add_argument("--work-rounds", type=int, default=0,
                    help="cpuwork rounds per thread (default 12000; quick 300)")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench: run as root (BPF, perf -a, bpf_stats)")
    b = Bench(a)
    sec = set(a.sections.split(","))
    steps = [("1", section_slowdown), ("2", section_node), ("4", section_goheap)]
    if sec & {"3", "5"}:
        sec.add("2")
    for key, fn in steps:
        if key not in sec:
            continue
        try:
            fn(b)
        except Exception as e:  # noqa: BLE001 - report it, keep the other sections
            import traceback
            traceback.print_exc()
            b.errors.append(f"section {key}: {type(e).__name__}: {e}")
    md = report(b)
    with open(os.path.join(b.out, "results.md"), "w") as f:
        f.write(md + "\n")
    b.results["bpf_stats_restored"] = BpfStats.restored
    b.results["errors"] = b.errors
    with open(os.path.join(b.out, "results.json"), "w") as f:
        json.dump(b.results, f, indent=1, default=str)
    print(md)
    sys.exit(1 if b.errors else 0)


if __name__ == "__main__":
    main()
