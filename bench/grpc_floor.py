#!/usr/bin/python3
"""The floor under the agent's gRPC threads: a process that only has libgrpc
initialized (and one idle channel) wakes its timer threads by itself.

  /usr/bin/python3 bench/grpc_floor.py [--seconds 60]

Builds bench/grpc_floor.c, runs it as `grpc_init()` alone and with one idle
channel, and prints per libgrpc thread how often it ran and its CPU time,
per minute (schedstat). docs/performance.md compares them with the agent's
own gRPC threads (bench/window_ab.py's runs_per_min and threads_ms).
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "lib"))
from schedstat import threads as sched  # noqa: E402  {tid: (comm, ns, runs)}


def measure(binary, args, seconds):
    p = subprocess.Popen([binary, *args], stdout=subprocess.PIPE, text=True)
    try:
        p.stdout.readline()  # "ready"
        time.sleep(3)  # threads started, first timers set
        a = sched(p.pid)
        time.sleep(seconds)
        b = sched(p.pid)
    finally:
        p.kill()
        p.wait()
    rows = []
    for tid, (comm, ns, runs) in sorted(b.items()):
        _, ns0, runs0 = a.get(tid, (comm, 0, 0))
        if runs > runs0:
            rows.append((comm, (runs - runs0) * 60 / seconds, (ns - ns0) / 1e6 * 60 / seconds))
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=60)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        binary = os.path.join(d, "grpc_floor")
        subprocess.run(["cc", "-O2", "-o", binary, os.path.join(HERE, "grpc_floor.c"),
                        "-lgrpc", "-lgpr"], check=True)
        for label, args in (("grpc_init() only", []),
                            ("one idle channel", ["127.0.0.1:9"])):
            rows = measure(binary, args, a.seconds)
            print(f"{label}: {sum(r[1] for r in rows):.0f} runs/min, "
                  f"{sum(r[2] for r in rows):.1f} ms/min")
            for comm, runs, ms in rows:
                print(f"  {comm:16s} {runs:6.0f} runs/min {ms:7.1f} ms/min")


if __name__ == "__main__":
    main()
