#!/usr/bin/python3
"""What a CPU window costs the agent for processes it samples for the first
time, two builds side by side (run as root).

  /usr/bin/python3 bench/newproc_ab.py --a OLD/pushprof --b NEW/pushprof
      [--rounds 4] [--procs 50] [--hz 99]

Each run starts one agent (whole host, go_heap off, pushing to a local
WriteRaw sink), waits for its first window (start-up), starts one process
of the kind measured and waits for the window that holds it (its files,
sh and libc, are loaded then: once per file, not per process), then
starts --procs new processes at once (`sh -c`: a short busy loop, then
`sleep`), so that a window holds that many processes it has never seen:
their first label reads and maps, as when a node starts a batch of jobs or
a Go fleet's forced GCs (every 2 minutes) fall together. Reported per run: that window's loop work (`loop_cpu_ms` less
the process events taken between two profiles, `events_cpu_ms`), its
processes and samples, and the window after it (the same processes,
known by then). Runs alternate A B / B A; the medians per build close.
CPU time of the loop thread, not wall time; a quiet host gives the
steadier figures.
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench  # noqa: E402  (Bench, Sink, Agent)

# ~20-40 ms of CPU each (dash), then nothing until killed
BUSY = 'i=0; while [ $i -lt 30000 ]; do i=$((i+1)); done; sleep 120'


def run_one(b, binary, hz, nprocs):
    b.pushprof = binary
    sink = bench.Sink()
    procs = []
    try:
        cfg = b.config(f"np{hz}", hz, "10s", remote=sink.address)
        ag = bench.Agent(b, cfg, f"np{hz}")
        try:
            if not ag.started():
                raise RuntimeError("agent did not start: " + ag.tail())
            first = len(ag.wait_windows(1, 60))
            time.sleep(1)
            procs = [subprocess.Popen(["sh", "-c", BUSY], preexec_fn=bench.die_with_parent)]
            first = len(ag.wait_windows(first + 1, 60))
            time.sleep(1)
            procs += [subprocess.Popen(["sh", "-c", BUSY], preexec_fn=bench.die_with_parent)
                      for _ in range(nprocs)]
            w = ag.wait_windows(first + 3, 60)
        finally:
            ag.stop()
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()
        sink.stop()
    after = w[first:first + 3]
    if not after:
        raise RuntimeError("no window after the processes started")

    def work(x):
        return float(x.get("loop_cpu_ms", 0)) - float(x.get("events_cpu_ms", 0))

    # the window that holds most of them (their busy loops may straddle two)
    k = max(range(len(after)), key=lambda i: int(after[i].get("processes", 0)))
    nxt = after[k + 1] if k + 1 < len(after) else None
    return {"processes": int(after[k].get("processes", 0)),
            "samples": int(after[k].get("samples", 0)),
            "maps_read": int(after[k].get("maps_read", 0)),
            "window_ms": round(work(after[k]), 2),
            "next_processes": int(nxt.get("processes", 0)) if nxt else None,
            "next_window_ms": round(work(nxt), 2) if nxt else None}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--a", required=True)
    ap.add_argument("--b", required=True)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--procs", type=int, default=50)
    ap.add_argument("--hz", type=int, default=99)
    ap.add_argument("--out", default="/tmp/pushprof-newproc-ab")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("newproc_ab: run as root (BPF)")
    ns = argparse.Namespace(build=os.path.join(bench.SRC, "build"), out=a.out, quick=False)
    b = bench.Bench(ns)
    res = {"a": [], "b": []}
    for r in range(a.rounds):
        order = (("a", a.a), ("b", a.b)) if r % 2 == 0 else (("b", a.b), ("a", a.a))
        for key, binary in order:
            x = run_one(b, os.path.abspath(binary), a.hz, a.procs)
            res[key].append(x)
            print(f"round {r} {key}: {x}", flush=True)
    bench.print_ab(res, ("window_ms", "next_window_ms"))
    per = [x["window_ms"] / max(1, x["processes"]) for x in res["a"]], \
          [x["window_ms"] / max(1, x["processes"]) for x in res["b"]]
    print(f"ms per process in that window: A {statistics.median(per[0]):.3f}  "
          f"B {statistics.median(per[1]):.3f}")


if __name__ == "__main__":
    main()
