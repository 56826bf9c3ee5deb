#!/usr/bin/python3
"""Heap snapshot cost of two builds, side by side (docs/performance.md,
"Issue 16: second steps"). Run as root with Debian's python3:

  /usr/bin/python3 bench/goheap/snap_ab.py --a OLD_BUILD_DIR --b NEW_BUILD_DIR
      [--buckets 100000] [--rounds 3]

Starts tests/goheap/many.go once with --buckets distinct buckets
(MemProfileRate 1), then alternates A B / B A: each build's `goheap_tool
bench PID 15` (snapshot_cpu_ms_min: read + build + encode + gzip) and its
`pushprof snapshot --pid PID` under /usr/bin/time (user+sys, peak RSS).
"""
import argparse
import os
import re
import subprocess
import sys

SRC = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
ap = argparse.ArgumentParser()
ap.add_argument("--a", required=True)
ap.add_argument("--b", required=True)
ap.add_argument("--buckets", type=int, default=100000)
ap.add_argument("--rounds", type=int, default=3)
o = ap.parse_args()
os.environ.setdefault("PUSHPROF_BUILD_DIR", os.path.abspath(o.b))
os.environ.setdefault("PUSHPROF_SOURCE_DIR", SRC)
sys.path.insert(0, os.path.join(SRC, "tests", "lib"))
sys.path.insert(0, os.path.join(SRC, "tests", "goheap"))
import ghlib  # noqa: E402

tmp = ghlib.tmpdir("pushprof-snap-ab-")
binary = ghlib.build("many", tmp, "plain")
builds = {"A": os.path.abspath(o.a), "B": os.path.abspath(o.b)}
with ghlib.Workload(binary, [str(o.buckets), os.path.join(tmp, "own.pb.gz")],
                    os.path.join(tmp, "ready"), env={"PP_MEMPROFILERATE": "1"}) as w:
    snap = {"A": [], "B": []}
    cmd = {"A": [], "B": []}
    for r in range(o.rounds):
        for k in ("A", "B") if r % 2 == 0 else ("B", "A"):
            d = builds[k]
            out = subprocess.run([os.path.join(d, "tests", "goheap", "goheap_tool"), "bench",
                                  str(w.pid), "15", "1000000"],
                                 capture_output=True, text=True).stdout
            m = re.search(r"snapshot_cpu_ms_min=([\d.]+)", out)
            if not m:
                sys.exit(f"{k}: goheap_tool bench printed: {out}")
            snap[k].append(float(m.group(1)))
            t = subprocess.run(["/usr/bin/time", "-f", "%U %S %M", os.path.join(d, "pushprof"),
                                "snapshot", "--pid", str(w.pid), "--max-buckets", "1000000",
                                "--output", os.path.join(tmp, "s.pb.gz")],
                               capture_output=True, text=True)
            u, s, mx = t.stderr.strip().split("\n")[-1].split()
            cmd[k].append((round(float(u) + float(s), 2), int(mx)))
            print(f"{k}: snapshot_cpu_ms_min {snap[k][-1]:.1f}, command user+sys "
                  f"{cmd[k][-1][0]} s, peak RSS {cmd[k][-1][1]} KiB", flush=True)
    for k in ("A", "B"):
        print(f"{k}: snapshot CPU ms {sorted(snap[k])}, command s {sorted(c[0] for c in cmd[k])}")
