#!/usr/bin/python3
"""How the agent's cost grows with the node (docs/performance.md, "How cost
grows"). Run as root with Debian's python3:

  /usr/bin/python3 bench/scale.py [--axis processes,goprogs] [--freq 19]
      [--interval 10s] [--windows 3] [--quick] [--build DIR] [--out DIR]

Axes (each point a fresh population and a fresh agent, whole host, go_heap
on with its defaults, pushing over gRPC to a local WriteRaw sink; the first
window, which loads every process's symbols, is warm-up):

  processes  100 / 1,000 / 5,000 extra processes: 2 busy (a C and a Go
             CPU workload at nice 19, so that every window has samples),
             10 idle Go programs with heap profiling on, the rest idle
             (`tail -f`);
  goprogs    10 / 50 / 200 idle Go programs (bench/idle.go: a few thousand
             live objects, heap profiling on) beside the 2 busy ones;
  stacks     ~1k / 10k / 100k distinct stacks per window: bench/stacks.c
             on every CPU (2^BITS different call chains), at 99 Hz with
             10 s windows (BITS 10), 1,000 Hz with 10 s windows (BITS 14)
             and 1,000 Hz with 60 s windows (BITS 17): this 2-CPU machine
             takes no more samples than that;
  rates      the window work at the sample rates of 16-, 64- and 256-CPU
             nodes at 19 and 99 Hz: build/bench-replay (bench/replay.c)
             records a window of this host (with the processes axis's
             population of 100, 2 busy) and replays it, enlarged with
             other thread ids, through cpu_profiles_build.

Each row: agent CPU in % of one CPU over the steady windows, agent CPU per
window, VmRSS without BPF map pages (own RSS), RssAnon, gzip pprof bytes
per window, WriteRaw bytes per window. Printed as Markdown tables; the
JSON goes to OUT/scale.json. --targeted profiles only the benchmark's
processes (`targets:` by executable: its temporary directory and `tail`, the
sleepers), so that other work on the machine (builds, other tests) is
neither sampled nor symbolized; the agent still scans every process. --quick: 20 / 100 processes, 2 / 5 Go
programs, 1 s windows: proves the script works, its figures mean little.
"""
import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench  # noqa: E402  (bench/bench.py: Population, node_run, Bench)


def target_only_bench(b):
    """--targeted: profile only the benchmark's processes (its temporary
    directory's executables and `tail`, the sleepers); the agent still scans
    every process. Other work on a shared machine (builds, tests) is then
    neither sampled nor symbolized. Also used by mem_ab.py and window_ab.py."""
    b.extra_config = ("targets: [{exe_regex: '^(%s/|/usr/bin/tail$)'}]\n"
                      % b.tmp.replace(".", "\\."))


def point(b, total, go_idle, freq, interval, windows):
    busy_secs = 60 + windows * 2 * bench.interval_s(interval) + 120
    t0 = time.time()
    pop = bench.Population(b, total, 2, go_idle, busy_secs)
    spawn = time.time() - t0
    try:
        r = bench.node_run(b, freq, interval, windows)
    finally:
        pop.stop()
    return {"extra_processes": total, "go_programs": go_idle, "spawn_s": round(spawn, 1),
            **figures(r)}


def figures(r):
    """A point's row from a bench.node_run() result."""
    steady = max(1, r.get("steady_windows") or 1)
    return {
        "host_processes": r.get("host_processes"),
        "cpu_pct_of_one": r.get("cpu_pct_of_one"),
        "cpu_ms_per_window": (r.get("cpu_s") or 0) * 1e3 / steady,
        "own_rss_kib": r.get("own_rss_kib"), "rss_anon_kib": r.get("rss_anon_kib"),
        "gz_bytes_per_window": r.get("gz_bytes_per_window"),
        "wire_bytes_per_window": r.get("wire_bytes_per_window"),
        "stacks_per_window": r.get("stacks_per_window"),
        "samples_per_window": r.get("samples_per_window"),
        "samples": r.get("samples"), "lost": r.get("lost"), "rc": r.get("rc"),
    }


def point_stacks(b, freq, interval, windows, bits):
    exe = b.cc(os.path.join(HERE, "stacks.c"), "stacks", ("-O1", "-fno-optimize-sibling-calls"))
    secs = 60 + (windows + 2) * bench.interval_s(interval)

    def nice():
        bench.die_with_parent()
        os.nice(19)
    workers = [bench.subprocess.Popen([exe, str(secs), str(bits)], preexec_fn=nice)
               for _ in range(bench.NCPU)]
    try:
        r = bench.node_run(b, freq, interval, windows)
    finally:
        for w in workers:
            w.kill()
            w.wait()
    return {"bits": bits, "freq": freq, "interval": interval, **figures(r)}


def table(title, rows, key, label):
    out = [f"### {title}", "",
           f"| {label} | host processes | agent CPU % of one CPU | CPU ms / window | "
           "own RSS MiB | RssAnon MiB | gzip bytes / window | WriteRaw bytes / window |",
           "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        def f(x, nd=2):
            return "–" if x is None else f"{x:,.{nd}f}"
        mib = lambda k: None if r.get(k) is None else r[k] / 1024  # noqa: E731
        out.append(f"| {r[key]:,} | {r['host_processes'] or '–'} | {f(r['cpu_pct_of_one'], 3)} | "
                   f"{f(r['cpu_ms_per_window'], 1)} | {f(mib('own_rss_kib'), 1)} | "
                   f"{f(mib('rss_anon_kib'), 1)} | {f(r['gz_bytes_per_window'], 0)} | "
                   f"{f(r['wire_bytes_per_window'], 0)} |")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--axis", default="processes,goprogs")
    ap.add_argument("--freq", type=int, default=19)
    ap.add_argument("--interval", default="10s")
    ap.add_argument("--windows", type=int, default=3)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--targeted", action="store_true")
    ap.add_argument("--build", default=os.path.join(bench.SRC, "build"))
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("scale: run as root (BPF)")
    a.no_diagnose = True
    b = bench.Bench(a)
    if a.targeted:
        target_only_bench(b)
    interval, windows = ("1s", 2) if a.quick else (a.interval, a.windows)
    axes = a.axis.split(",")
    res = {"started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
           "freq": a.freq, "interval": interval, "windows": windows,
           "load_before": os.getloadavg()}
    res["targeted"] = a.targeted
    md = [f"Agent at {a.freq} Hz, {windows} steady windows of {interval}, "
          f"{'targeted at the benchmark processes' if a.targeted else 'whole host'}, started "
          f"{res['started']}, load average before {res['load_before'][0]:.1f}."]
    if "processes" in axes:
        pts = [20, 100] if a.quick else [100, 1000, 5000]
        rows = []
        for n in pts:
            bench.log(f"scale: {n} extra processes")
            rows.append(point(b, n, min(10, n // 10), a.freq, interval, windows))
            bench.log("  " + json.dumps(rows[-1]))
        res["processes"] = rows
        md.append(table("Processes on the node", rows, "extra_processes", "extra processes"))
    if "goprogs" in axes:
        pts = [2, 5] if a.quick else [10, 50, 200]
        rows = []
        for g in pts:
            bench.log(f"scale: {g} Go programs")
            rows.append(point(b, g + 2, g, a.freq, interval, windows))
            bench.log("  " + json.dumps(rows[-1]))
        res["goprogs"] = rows
        md.append(table("Go programs tracked", rows, "go_programs", "Go programs"))
        if len(rows) >= 2 and all(r["rss_anon_kib"] for r in (rows[0], rows[-1])):
            dg = rows[-1]["go_programs"] - rows[0]["go_programs"]
            per_kib = (rows[-1]["rss_anon_kib"] - rows[0]["rss_anon_kib"]) / dg
            per_ms = (rows[-1]["cpu_ms_per_window"] - rows[0]["cpu_ms_per_window"]) / dg
            md.append(f"\nPer Go program tracked ({rows[0]['go_programs']} → "
                      f"{rows[-1]['go_programs']}): {per_kib:.1f} KiB of RssAnon, "
                      f"{per_ms:.2f} ms of agent CPU per window.")
    if "stacks" in axes:
        pts = [(99, "1s", 8)] if a.quick else [(99, "10s", 10), (1000, "10s", 14),
                                                (1000, "60s", 17)]
        rows = []
        for freq, iv, bits in pts:
            bench.log(f"scale: stacks, {freq} Hz, {iv} windows, {bits} bits")
            rows.append(point_stacks(b, freq, iv, 2 if a.quick else windows, bits))
            bench.log("  " + json.dumps(rows[-1]))
        res["stacks"] = rows
        md.append("### Distinct stacks per window\n\n"
                  "| Hz, window | stacks / window | samples / window | agent CPU % of one CPU | "
                  "CPU ms / window | own RSS MiB | RssAnon MiB | gzip bytes / window | lost |\n"
                  "|---|---|---|---|---|---|---|---|---|\n" + "\n".join(
                      f"| {r['freq']} Hz, {r['interval']} | {r['stacks_per_window']:,} | "
                      f"{r['samples_per_window']:,} | {r['cpu_pct_of_one'] or 0:.3f} | "
                      f"{r['cpu_ms_per_window']:.1f} | {(r['own_rss_kib'] or 0) / 1024:.1f} | "
                      f"{(r['rss_anon_kib'] or 0) / 1024:.1f} | {r['gz_bytes_per_window'] or 0:,.0f} | "
                      f"{sum((r['lost'] or {}).values())} |" for r in rows))
    if "rates" in axes:
        exe = os.path.join(b.build, "bench-replay")
        pop = bench.Population(b, 20 if a.quick else 100, 2, 2 if a.quick else 10, 600)
        try:
            args = [exe, "--record-secs", "2" if a.quick else "10", "--rounds",
                    "1" if a.quick else "3"]
            if a.quick:
                args += ["--cpus", "16", "--hz", "19"]
            bench.log("scale: rates: " + " ".join(args))
            out = bench.subprocess.run(args, capture_output=True, text=True, timeout=1200)
        finally:
            pop.stop()
        if out.returncode != 0:
            b.errors.append("bench-replay: " + out.stderr.strip()[-300:])
        res["rates"] = out.stdout
        md.append("### Samples per second (replayed windows)\n\n" + out.stdout.strip())
    res["errors"] = b.errors
    os.makedirs(b.out, exist_ok=True)
    with open(os.path.join(b.out, "scale.json"), "w") as f:
        json.dump(res, f, indent=1, default=str)
    print("\n\n".join(md))
    sys.exit(1 if b.errors else 0)


if __name__ == "__main__":
    main()
