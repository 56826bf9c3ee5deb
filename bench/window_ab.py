#!/usr/bin/python3
"""Agent CPU of two pushprof binaries, side by side on one node population.

  /usr/bin/python3 bench/window_ab.py --a OLD/pushprof --b NEW/pushprof
      [--hz 99] [--rounds 3] [--windows 4] [--interval 10s]
      [--procs 500 --busy 20 --go-idle 50] [--perf DIR] [--targeted]

Starts the population of bench.py's section 2 once (busy C and Go
workloads at nice 19, idle Go programs, sleepers), then runs the agents
A B A B ... (go_heap on, pushing to a local WriteRaw sink). For each run,
over the steady windows (the first window, which loads every process's
symbols, left out): agent CPU (utime+stime from /proc/PID/stat) per 1,000
samples, and the agent's own agent_cpu_ms per window (drain, symbolize,
build, encode, push) per 1,000 samples and per window. The sample path
(path_ms_per_1000, issue 16's goal) is the loop thread's window work less
the process events it took between two profiles (events_cpu_ms: new
executables' tables and symbols), plus the pusher thread's CPU (which
pushes heap profiles too: an upper bound). Prints one line per
run, then the medians per binary and their ratio B/A. --perf DIR also
records `perf record -g` of each agent's steady windows into DIR. Needs
root (BPF). The figures are CPU time, not wall time: other load on the
machine moves them less, but cold memory (a loaded VM) still shows.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench  # noqa: E402  (bench.py: population, agent, sink)
import scale  # noqa: E402  (target_only_bench: --targeted)
from schedstat import threads as thread_ns  # noqa: E402  {tid: (comm, ns, runs)}


def run_one(b, binary, hz, interval, windows, perf_out):
    b.pushprof = binary
    sink = bench.Sink()
    try:
        cfg = b.config(f"ab{hz}", hz, interval, remote=sink.address, go_heap=True)
        ag = bench.Agent(b, cfg, f"ab{hz}")
        prof = None
        try:
            if not ag.started():
                raise RuntimeError("agent did not start: " + ag.tail())
            w = ag.wait_windows(1, 120)
            first = len(w)
            c0 = bench.proc_cpu_s(ag.pid)
            t0 = thread_ns(ag.pid)
            if perf_out:
                prof = subprocess.Popen(["perf", "record", "-F", "4999", "-g", "-p",
                                         str(ag.pid), "-o", perf_out, "--quiet"],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            ag.wait_windows(first + windows, 60 + 30 * windows)
            c1 = bench.proc_cpu_s(ag.pid)
            t1 = thread_ns(ag.pid)
            mem = bench.proc_mem_kib(ag.pid)
            if prof:
                prof.send_signal(2)
                prof.wait(timeout=120)
        finally:
            ag.stop()
        steady = ag.windows()[first:first + windows]
        samples = sum(int(x.get("samples", 0)) for x in steady)
        win_ms = [float(x.get("agent_cpu_ms", 0)) for x in steady]
        loop_ms = [float(x.get("loop_cpu_ms", 0)) for x in steady]
        events_ms = [float(x.get("events_cpu_ms", 0)) for x in steady]
        # the sample path: the loop's window work without the process events
        # it took between two profiles, plus the pusher thread (which also
        # pushes the heap profiles: an upper bound)
        path_ms = [lm - em for lm, em in zip(loop_ms, events_ms)]
        push_ms = sum((t1[k][1] - t0.get(k, ("", 0, 0))[1]) / 1e6
                      for k in t1 if t1[k][0] == "pushprof-send")
        return {
            "samples": samples,
            # each thread's CPU over the steady windows (ms), in thread-creation
            # order: the agent's threads are "pushprof" (the loop first; the
            # OOM watcher, gotrack's worker, the pusher...) and gRPC's
            "threads_ms": [[i, t1[k][0], round((t1[k][1] - t0.get(k, ("", 0, 0))[1]) / 1e6, 1)]
                           for i, k in enumerate(sorted(t1))
                           if t1[k][1] - t0.get(k, ("", 0, 0))[1] > 1e6],
            # how often each thread ran over those windows, per minute
            "runs_per_min": [[t1[k][0], round((t1[k][2] - t0.get(k, ("", 0, 0))[2]) * 60 /
                                              (windows * bench.interval_s(interval)))]
                             for k in sorted(t1) if t1[k][2] > t0.get(k, ("", 0, 0))[2]],
            "rss_anon_kib": mem.get("RssAnon"), "own_rss_kib": mem.get("OwnRss"),
            # user+sys of the whole agent over the steady windows, in % of one CPU
            "cpu_pct_of_one": (c1 - c0) * 100 / (windows * bench.interval_s(interval)),
            "cpu_ms_per_1000": (c1 - c0) * 1e6 / samples if samples else None,
            "win_ms_per_1000": sum(win_ms) * 1000 / samples if samples else None,
            "win_ms_median": statistics.median(win_ms) if win_ms else None,
            # the loop thread's own CPU in the window work (no other thread's)
            "loop_ms_per_1000": sum(loop_ms) * 1000 / samples if samples else None,
            "maps_read_kept": [steady[-1].get("maps_read"), steady[-1].get("maps_kept")]
            if steady else None,
            "events_ms_per_1000": sum(events_ms) * 1000 / samples if samples else None,
            "push_ms_per_1000": push_ms * 1000 / samples if samples else None,
            "path_ms_per_1000": (sum(path_ms) + push_ms) * 1000 / samples if samples else None,
            # the median window's path (loop without events) per 1,000 of its samples
            "path_ms_per_1000_median_window": statistics.median(
                [pm * 1000 / int(x.get("samples", 1) or 1) for pm, x in zip(path_ms, steady)])
            if steady else None,
            "processes": statistics.median([int(x.get("processes", 0)) for x in steady])
            if steady else 0,
        }
    finally:
        sink.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--a", required=True)
    ap.add_argument("--b", required=True)
    ap.add_argument("--hz", type=int, default=99)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--windows", type=int, default=4)
    ap.add_argument("--interval", default="10s")
    ap.add_argument("--procs", type=int, default=500)
    ap.add_argument("--busy", type=int, default=20)
    ap.add_argument("--go-idle", type=int, default=50)
    ap.add_argument("--perf", default=None)
    ap.add_argument("--targeted", action="store_true",
                    help="profile only the benchmark's processes (bench/scale.py)")
    ap.add_argument("--out", default="/tmp/pushprof-window-ab")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("window_ab: run as root (BPF)")
    ns = argparse.Namespace(build=os.path.join(bench.SRC, "build"), out=a.out, quick=False)
    b = bench.Bench(ns)
    if a.targeted:
        scale.target_only_bench(b)
    per = (a.rounds * 2) * (bench.interval_s(a.interval) * (a.windows + 1) + 15)
    pop = bench.Population(b, a.procs, a.busy, a.go_idle, int(per) + 60)
    res = {"a": [], "b": []}
    if a.perf:
        os.makedirs(a.perf, exist_ok=True)  # perf record -o fails quietly without it
    try:
        for r in range(a.rounds):
            for key, binary in (("a", a.a), ("b", a.b)):
                perf_out = os.path.join(a.perf, f"{key}{r}.data") if a.perf else None
                x = run_one(b, os.path.abspath(binary), a.hz, a.interval, a.windows, perf_out)
                res[key].append(x)
                print(f"round {r} {key}: " + json.dumps(x), flush=True)
    finally:
        pop.stop()
    bench.print_ab(res, ("cpu_pct_of_one", "rss_anon_kib", "own_rss_kib", "cpu_ms_per_1000",
                         "win_ms_per_1000", "win_ms_median", "loop_ms_per_1000",
                         "events_ms_per_1000", "push_ms_per_1000", "path_ms_per_1000",
                         "path_ms_per_1000_median_window"))


if __name__ == "__main__":
    main()
