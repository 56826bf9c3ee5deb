#!/usr/bin/python3
"""BPF cost per sample of two pushprof builds, side by side (run as root).

  /usr/bin/python3 bench/bpf_ab.py --a OLD/pushprof --b NEW/pushprof
      [--rounds 4] [--secs 20] [--freq 99] [--targeted] [--together [--drift]]
      [--workload leaves|gcstack|cframes|split|cpuwork] [--a-env K=V ...] [--b-env K=V ...]

Both agents sample the same running workload (tests/cpu/workloads/leaves.go:
Go code spending its time in frameless leaves, 2 goroutines; or gcstack.go:
garbage collection through runtime.systemstack and write barriers) in turns,
A B B A A B ..., one agent at a time, each for --secs (--together: both at
once, each with its own events and program, --rounds times; add --drift
so that B samples 1 Hz slower: at equal rates the two timers keep one
phase for a whole round and the program that fires second finds the
caches warm, which scattered A/A rounds by +-20 %, against +-4 % drifting); with
kernel.bpf_stats_enabled=1 (restored afterwards) the program's
run_time_ns / run_cnt is read from `bpftool prog show` at the end of each
turn. Whole host by default (every non-idle sample takes the full path);
--targeted samples only the workload (other processes' samples are
filtered out early and still count as runs). Prints each turn and the
medians; the ratio B/A is the cost change.

--workload split (tests/cpu/workloads/split.go: Go stacks the plain walk
already gets right, main -> hot|cold -> spin) and cpuwork (bench/cpuwork.c,
the C benchmark of docs/performance.md) measure what the tables cost where
they change nothing: the lookups alone. Each turn also reports the mean
frames per sample of the agent's CPU profiles: a build that finds callers
the other misses reads and stores more frames, so the last line gives the
paired ratio of ns per frame too.

--workload cframes samples tests/cpu/workloads/cframes.c instead (C built
with -O2 -fno-omit-frame-pointer -momit-leaf-frame-pointer: a hot
frameless leaf and a tiny function sampled in its prologue); with the same
binary for A and B and --a-env PUSHPROF_FRAMELESS=go (no .eh_frame tables)
it measures what the C/C++ tables cost per sample.
"""
import argparse
import glob
import gzip
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.abspath(os.path.join(HERE, ".."))
STATS = "/proc/sys/kernel/bpf_stats_enabled"
sys.path.insert(0, os.path.join(SRC, "tests", "lib"))


PROFILE_FRAMES = set()     # agents whose figure came from their profiles


def frames_per_sample(d, log):
    """Mean user frames per sample that an agent's BPF walk stored: from its
    window lines (samples=, user_frames=), else (builds before that figure)
    the user locations per sample of the CPU profiles in its local store,
    which miss the frames symbolization drops (wrappers, junk).
    A build that gets more callers right reads more frames, so ns/run is
    best compared next to it (ns per frame)."""
    n = f = 0
    for m in re.finditer(r"samples=(\d+) user_frames=(\d+)", log or ""):
        n += int(m.group(1))
        f += int(m.group(2))
    if n:
        return f / n
    PROFILE_FRAMES.add(d)
    from receiver import load_protos
    profile_pb2 = load_protos()[0]
    frames = samples = 0
    for path in glob.glob(os.path.join(d, "store", "*.pb.gz")):
        p = profile_pb2.Profile()
        with gzip.open(path) as f:
            p.ParseFromString(f.read())
        if not p.sample_type or p.string_table[p.sample_type[0].type] != "samples":
            continue
        user = {loc.id for loc in p.location if loc.address < 1 << 63}
        for s in p.sample:
            frames += s.value[0] * sum(1 for i in s.location_id if i in user)
            samples += s.value[0]
    return frames / samples if samples else float("nan")


def prog(prog_id):
    r = subprocess.run(["bpftool", "-j", "prog", "show", "id", str(prog_id)],
                       capture_output=True, text=True)
    return json.loads(r.stdout) if r.returncode == 0 else {}


def start(binary, d, pid, secs, freq, targeted, env=None, cpu_extra=""):
    """An agent and its BPF program's id."""
    os.makedirs(d, exist_ok=True)
    store = os.path.join(d, "store")
    shutil.rmtree(store, ignore_errors=True)    # this turn's profiles only
    cfg = os.path.join(d, "cfg.yaml")
    extra = ", " + cpu_extra if cpu_extra else ""
    with open(cfg, "w") as f:
        f.write(f"node: bench\nlog: {{level: info}}\nhttp_address: \"\"\n"
                f"spool: {{directory: \"\"}}\ncpu: {{frequency_hz: {freq}, interval: 5s{extra}}}\n"
                f"go_heap: {{enabled: false}}\nlocal_store: {{directory: {store}}}\n")
        if targeted:
            f.write(f"targets:\n  - pids: [{pid}]\n")
    a = subprocess.Popen([binary, "run", "--config", cfg, "--duration", f"{int(secs) + 30}s"],
                         stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
                         env=dict(os.environ, **(env or {})))
    prog_id, seen = None, []
    for line in a.stderr:
        seen.append(line)
        m = re.search(r"bpf_prog_id=(\d+)", line)
        if m:
            prog_id = int(m.group(1))
            break
    if prog_id is None:
        a.kill()
        sys.exit(f"{binary}: no 'agent started' line:\n" + "".join(seen))
    return a, prog_id


def delta(p0, p1):
    cnt = p1.get("run_cnt", 0) - p0.get("run_cnt", 0)
    ns = p1.get("run_time_ns", 0) - p0.get("run_time_ns", 0)
    return ns / cnt if cnt else float("nan"), cnt


def turn(binary, d, pid, secs, freq, targeted, env=None, cpu_extra=""):
    a, prog_id = start(binary, d, pid, secs, freq, targeted, env, cpu_extra)
    p0 = prog(prog_id)
    time.sleep(secs)
    p1 = prog(prog_id)
    a.send_signal(signal.SIGINT)
    _, log = a.communicate(timeout=60)
    return delta(p0, p1) + (frames_per_sample(d, log),)


def together(o, d, pid, b_first):
    """Both agents at once, each with its own perf events and program: the
    same load for both. Which one starts first alternates: if their events
    fire back to back, the second program finds the caches warm."""
    bf = o.freq - 1 if o.drift else o.freq
    if b_first:
        b, ib = start(o.b, os.path.join(d, "b"), pid, o.secs, bf, o.targeted, o.benv, o.bcpu)
    a, ia = start(o.a, os.path.join(d, "a"), pid, o.secs, o.freq, o.targeted, o.aenv, o.acpu)
    if not b_first:
        b, ib = start(o.b, os.path.join(d, "b"), pid, o.secs, bf, o.targeted, o.benv, o.bcpu)
    time.sleep(2)   # past both agents' start-up work
    a0, b0 = prog(ia), prog(ib)
    time.sleep(o.secs)
    a1, b1 = prog(ia), prog(ib)
    for x in (a, b):
        x.send_signal(signal.SIGINT)
    la, lb = (x.communicate(timeout=60)[1] for x in (a, b))
    return (delta(a0, a1) + (frames_per_sample(os.path.join(d, "a"), la),),
            delta(b0, b1) + (frames_per_sample(os.path.join(d, "b"), lb),))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--a", required=True)
    ap.add_argument("--b", required=True)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--secs", type=float, default=20)
    ap.add_argument("--freq", type=int, default=99)
    ap.add_argument("--targeted", action="store_true")
    ap.add_argument("--together", action="store_true",
                    help="run A and B at the same time, --rounds times")
    ap.add_argument("--drift", action="store_true",
                    help="with --together, B samples at --freq - 1 Hz: the two "
                    "programs' events drift through every phase once a second, "
                    "so neither keeps finding the caches the other warmed")
    ap.add_argument("--a-cpu", dest="acpu", default="",
                    help="extra keys for A's cpu: section, e.g. 'cpu_label: false'")
    ap.add_argument("--b-cpu", dest="bcpu", default="",
                    help="extra keys for B's cpu: section (an older A may not know them)")
    ap.add_argument("--workload", choices=["leaves", "gcstack", "cframes", "split", "cpuwork"], default="leaves")
    ap.add_argument("--a-env", action="append", default=[], help="K=V for agent A")
    ap.add_argument("--b-env", action="append", default=[], help="K=V for agent B")
    o = ap.parse_args()
    o.aenv = dict(kv.split("=", 1) for kv in o.a_env)
    o.benv = dict(kv.split("=", 1) for kv in o.b_env)
    d = tempfile.mkdtemp(prefix="pushprof-bpf-ab-")
    if o.workload in ("leaves", "gcstack", "split"):
        work = os.path.join(d, o.workload)
        subprocess.run(["go", "build", "-o", work,
                        os.path.join(SRC, "tests", "cpu", "workloads", o.workload + ".go")],
                       check=True, env=dict(os.environ, GO111MODULE="off"))
        args = ["100000", "2"] if o.workload == "split" else [os.path.join(d, "go.pprof"),
                                                             "100000", "2"]
        w = subprocess.Popen([work] + args, env=dict(os.environ, GOMAXPROCS="2"))
    elif o.workload == "cpuwork":
        work = os.path.join(d, "cpuwork")
        subprocess.run(["cc", "-O2", "-fno-omit-frame-pointer", "-pthread", "-o", work,
                        os.path.join(HERE, "cpuwork.c")], check=True)
        w = subprocess.Popen([work, "100000000"], stdout=subprocess.DEVNULL)
    else:
        work = os.path.join(d, "cframes")
        subprocess.run(["cc", "-O2", "-g", "-fno-omit-frame-pointer", "-momit-leaf-frame-pointer",
                        "-o", work, os.path.join(SRC, "tests", "cpu", "workloads", "cframes.c")],
                       check=True)
        w = subprocess.Popen([work, "100000"])
    with open(STATS) as f:
        old = f.read().strip()
    res = {"A": [], "B": []}
    fps = {"A": [], "B": []}
    # SIGTERM too must restore the sysctl and stop the workload
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(1))
    try:
        with open(STATS, "w") as f:
            f.write("1")
        if o.together:
            for r in range(o.rounds):
                (na, ca, fa), (nb, cb, fb) = together(o, d, w.pid, r % 2 == 1)
                res["A"].append(na)
                res["B"].append(nb)
                fps["A"].append(fa)
                fps["B"].append(fb)
                print(f"{'B' if r % 2 else 'A'} started first: A: {na:.0f} ns/run over {ca} runs,"
                      f" {fa:.2f} frames/sample, B: {nb:.0f} ns/run over {cb} runs,"
                      f" {fb:.2f} frames/sample, B/A {nb / na:.3f}", flush=True)
        order = []
        for r in range(0 if o.together else o.rounds):
            order += ["A", "B"] if r % 2 == 0 else ["B", "A"]
        for which in order:
            ns, cnt, fr = turn(o.a if which == "A" else o.b, os.path.join(d, which.lower()),
                               w.pid, o.secs, o.freq, o.targeted,
                               o.aenv if which == "A" else o.benv,
                               o.acpu if which == "A" else o.bcpu)
            res[which].append(ns)
            fps[which].append(fr)
            print(f"{which}: {ns:.0f} ns/run over {cnt} runs, {fr:.2f} frames/sample", flush=True)
    finally:
        with open(STATS, "w") as f:
            f.write(old)
        w.kill()
        w.wait()
        shutil.rmtree(d, ignore_errors=True)
    ma, mb = statistics.median(res["A"]), statistics.median(res["B"])
    # paired: the same round (--together) or neighbouring turns (A B, B A)
    ratios = [b / a for a, b in zip(res["A"], res["B"])]
    print(f"median A {ma:.0f} ns/run, B {mb:.0f} ns/run, B/A {mb / ma:.3f}; median of paired "
          f"B/A {statistics.median(ratios):.3f} {[round(r, 3) for r in ratios]} "
          f"(A runs {[round(x) for x in res['A']]}, B runs {[round(x) for x in res['B']]})")
    fa, fb = statistics.median(fps["A"]), statistics.median(fps["B"])
    print(f"frames per sample: median A {fa:.2f}, B {fb:.2f}; paired B/A ns per frame "
          f"{statistics.median(r * x / y for r, x, y in zip(ratios, fps['A'], fps['B'])):.3f}"
          + (" (a build without user_frames= in its window lines: user locations per sample of"
             " its profiles, so frames symbolization dropped are missing; roughly comparable)"
             if PROFILE_FRAMES else ""))


if __name__ == "__main__":
    main()
