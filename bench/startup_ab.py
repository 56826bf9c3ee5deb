#!/usr/bin/python3
"""Start-up cost of two builds, side by side (docs/performance.md, issue 16:
the dynamic loader's share of every command). Run as root:

  /usr/bin/python3 bench/startup_ab.py --a OLD_BUILD_DIR --b NEW_BUILD_DIR
      [--rounds 4] [--repeat 20] [--rss-seconds 10]

For `version`, `check-config config/pushprof.yaml` and `run --help`,
alternates A B / B A, each round `perf stat -r REPEAT -e task-clock` (CPU
time: user+sys of the process, whatever else loads the machine), and prints
each build's median of the rounds' means and B/A. Then the VmRSS of an idle
`pushprof run` (local store, no remote store, cpu sampling on, the HTTP
endpoint on) after --rss-seconds, A and B alternately.
"""
import argparse
import os
import re
import statistics
import subprocess
import tempfile
import time

SRC = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
ap = argparse.ArgumentParser()
ap.add_argument("--a", required=True)
ap.add_argument("--b", required=True)
ap.add_argument("--rounds", type=int, default=4)
ap.add_argument("--repeat", type=int, default=20)
ap.add_argument("--rss-seconds", type=float, default=10)
o = ap.parse_args()
builds = {"A": os.path.join(os.path.abspath(o.a), "pushprof"),
          "B": os.path.join(os.path.abspath(o.b), "pushprof")}
cmds = {"version": ["version"],
        "check-config": ["check-config", "--no-file-checks",
                         os.path.join(SRC, "config", "pushprof.yaml")],
        "run --help": ["run", "--help"]}


def task_clock_ms(argv):
    r = subprocess.run(["perf", "stat", "-r", str(o.repeat), "-x,", "-e", "task-clock"] + argv,
                       capture_output=True, text=True)
    for ln in r.stderr.splitlines():
        f = ln.split(",")
        if len(f) > 2 and f[2].startswith("task-clock"):
            return float(f[0])
    raise SystemExit(f"perf stat printed: {r.stderr}")


for name, args in cmds.items():
    ms = {"A": [], "B": []}
    for r in range(o.rounds):
        for k in ("A", "B") if r % 2 == 0 else ("B", "A"):
            ms[k].append(task_clock_ms([builds[k]] + args))
    a, b = statistics.median(ms["A"]), statistics.median(ms["B"])
    print(f"{name:14s} task-clock ms  A {a:6.2f}  B {b:6.2f}  B/A {b / a:.2f}  "
          f"(A {sorted(round(x, 1) for x in ms['A'])}, B {sorted(round(x, 1) for x in ms['B'])})",
          flush=True)

tmp = tempfile.mkdtemp(prefix="pushprof-startup-ab-")
cfg = os.path.join(tmp, "idle.yaml")
with open(cfg, "w") as f:
    f.write(f"node: bench\nhttp_address: \"127.0.0.1:17391\"\n"
            f"cpu: {{enabled: true}}\ngo_heap: {{enabled: false}}\n"
            f"spool: {{directory: \"\"}}\nlocal_store: {{directory: {tmp}/store}}\n")
rss = {"A": [], "B": []}
for r in range(2):
    for k in ("A", "B") if r % 2 == 0 else ("B", "A"):
        p = subprocess.Popen([builds[k], "run", "--config", cfg], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        time.sleep(o.rss_seconds)
        with open(f"/proc/{p.pid}/status") as f:
            rss[k].append(int(re.search(r"^VmRSS:\s+(\d+)", f.read(), re.M).group(1)))
        with open(f"/proc/{p.pid}/maps") as f:
            libs = len({ln.split()[-1] for ln in f if ".so" in ln})
        p.terminate()
        p.wait(timeout=30)
        print(f"{k}: idle run VmRSS {rss[k][-1]} KiB, {libs} shared objects mapped", flush=True)
a, b = statistics.mean(rss["A"]), statistics.mean(rss["B"])
print(f"idle run VmRSS KiB  A {a:.0f}  B {b:.0f}  B/A {b / a:.2f}")
