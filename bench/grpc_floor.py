#!/usr/bin/python3
"""The floor under the agent's gRPC threads: a process that only has libgrpc
initialized (and one idle channel) wakes its timer threads by itself.

  /usr/bin/python3 bench/grpc_floor.py [--seconds 60]
  /usr/bin/python3 bench/grpc_floor.py --push [--period 10] [--seconds 60] [--rounds 2]

Builds bench/grpc_floor.c, runs it as `grpc_init()` alone and with one idle
channel, and prints per libgrpc thread how often it ran and its CPU time,
per minute (schedstat). docs/performance.md compares them with the agent's
own gRPC threads (bench/window_ab.py's runs_per_min and threads_ms).

--push asks whether libgrpc's idle cost can be avoided by keeping nothing
of it between pushes: against a local WriteRaw receiver (tests/lib/
receiver.py), one empty WriteRaw every --period seconds, `warm` (one
grpc_init() and one channel for the run, as the agent does) and `cold`
(grpc_init, channel, call, grpc_shutdown each time), alternating per round,
whole-process CPU per minute and per call (getrusage, every thread).
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


def push(binary, d, a):
    sys.path.insert(0, os.path.join(HERE, "..", "tests", "lib"))
    from receiver import Receiver
    rcv = Receiver(os.path.join(d, "rcv")).start()
    try:
        for r in range(a.rounds):
            modes = ("warm", "cold") if r % 2 == 0 else ("cold", "warm")
            for mode in modes:
                out = subprocess.run([binary, rcv.address, mode, str(a.period), str(a.seconds)],
                                     capture_output=True, text=True)
                line = out.stdout.strip() or out.stderr.strip()
                print(f"round {r + 1}: {line}", flush=True)
                if out.returncode:
                    sys.exit(f"grpc_floor {mode}: exit {out.returncode}")
    finally:
        rcv.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--push", action="store_true",
                    help="warm vs cold channel, one WriteRaw every --period s")
    ap.add_argument("--period", type=float, default=10)
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        binary = os.path.join(d, "grpc_floor")
        subprocess.run(["cc", "-O2", "-o", binary, os.path.join(HERE, "grpc_floor.c"),
                        "-lgrpc", "-lgpr"], check=True)
        if a.push:
            push(binary, d, a)
            return
        for label, args in (("grpc_init() only", []),
                            ("one idle channel", ["127.0.0.1:9"])):
            rows = measure(binary, args, a.seconds)
            print(f"{label}: {sum(r[1] for r in rows):.0f} runs/min, "
                  f"{sum(r[2] for r in rows):.1f} ms/min")
            for comm, runs, ms in rows:
                print(f"  {comm:16s} {runs:6.0f} runs/min {ms:7.1f} ms/min")


if __name__ == "__main__":
    main()
