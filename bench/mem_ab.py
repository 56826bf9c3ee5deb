#!/usr/bin/python3
"""Agent memory A/B: the node population of bench.py section 3 (500 extra
processes: 20 busy at nice 19, 50 idle Go programs, the rest sleeping), then
`pushprof run` (whole host, go_heap on, pushing to a local sink) with each
binary in turn, alternating, for --rounds rounds. Each run waits for window 1
(the warm-up that loads every process's symbols) and --windows more, then
reads VmRSS, own RSS (VmRSS without the BPF maps it mmaps), RssAnon and Pss.

  sudo /usr/bin/python3 bench/mem_ab.py --build build \
      --bin before=/tmp/base/pushprof --bin after=build/pushprof [--rounds 3] \
      [--bin arena1=build/pushprof --env arena1:MALLOC_ARENA_MAX=1] \
      [--procs 500 --busy 20 --go-idle 50] [--targeted]

--targeted profiles only the benchmark's processes (bench/scale.py): other
work on a shared machine then does not load the agent's symbol caches.

Prints one line per run and a median per binary (KiB)."""
import argparse
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench as B  # noqa: E402 - the population, sink and agent helpers
import scale  # noqa: E402 - target_only_bench (--targeted)


def one_run(b, binary, name, freq, interval, windows, top, env):
    b.pushprof = binary
    rcv = B.Sink()
    saved = dict(os.environ)
    try:
        cfg = b.config(name, freq, interval, remote=rcv.address, go_heap=True)
        os.environ.update(env)
        try:
            ag = B.Agent(b, cfg, name)
        finally:
            os.environ.clear()
            os.environ.update(saved)
        try:
            if not ag.started():
                raise RuntimeError("agent did not start: " + ag.tail())
            first = len(ag.wait_windows(1, 120))
            c0 = B.proc_cpu_s(ag.pid)
            ag.wait_windows(first + windows, 60 + 30 * windows)
            mem = B.proc_mem_kib(ag.pid)
            # agent CPU (user+sys) over the steady windows (after window 1)
            mem["cpu_s"] = B.proc_cpu_s(ag.pid) - c0
            mem["host_processes"] = B.host_processes()
            if top:
                mem["top"] = B.smaps_top(ag.pid, 10)
        finally:
            rc = ag.stop()
        mem["rc"] = rc
        return mem
    finally:
        rcv.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--out", default="")
    ap.add_argument("--bin", action="append", required=True, help="label=path")
    ap.add_argument("--env", action="append", default=[],
                    help="label:KEY=VALUE, in that binary's environment (e.g. MALLOC_ARENA_MAX)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--windows", type=int, default=3)
    ap.add_argument("--freq", type=int, default=99)
    ap.add_argument("--interval", default="10s")
    ap.add_argument("--top", action="store_true", help="also print the largest mappings")
    ap.add_argument("--procs", type=int, default=500)
    ap.add_argument("--busy", type=int, default=20)
    ap.add_argument("--go-idle", type=int, default=50)
    ap.add_argument("--targeted", action="store_true")
    a = ap.parse_args()
    a.quick, a.no_diagnose = False, True
    b = B.Bench(a)
    if a.targeted:
        scale.target_only_bench(b)
    bins = [x.split("=", 1) for x in a.bin]
    envs = {lab: {} for lab, _ in bins}
    for x in a.env:
        lab, kv = x.split(":", 1)
        k, v = kv.split("=", 1)
        envs[lab][k] = v
    keys = ("VmRSS", "OwnRss", "RssAnon", "Pss", "BpfMapRss", "cpu_s")
    pop = B.Population(b, a.procs, a.busy, a.go_idle, 60 + a.rounds * len(bins) * (40 + 12 * a.windows))
    res = {lab: [] for lab, _ in bins}
    try:
        for r in range(a.rounds):
            order = bins if r % 2 == 0 else bins[::-1]
            for lab, path in order:
                m = one_run(b, os.path.abspath(path), f"mem-{lab}", a.freq, a.interval,
                            a.windows, a.top, envs[lab])
                res[lab].append(m)
                print(json.dumps({"round": r, "bin": lab, **m}), flush=True)
    finally:
        pop.stop()
    for lab, _ in bins:
        med = {k: statistics.median(m.get(k, 0) for m in res[lab]) for k in keys}
        print(f"{lab}: median KiB " + " ".join(f"{k}={v:.{3 if k == 'cpu_s' else 0}f}" for k, v in med.items()))


if __name__ == "__main__":
    main()
