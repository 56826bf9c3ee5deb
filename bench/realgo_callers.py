#!/usr/bin/python3
"""CPU stacks of a real Go program nobody here wrote (Debian's Prometheus)
against its own profiler, with the leaf tables off and on: see
tests/cpu/realgo.py. Run as root, with prometheus installed:

  /usr/bin/python3 bench/realgo_callers.py [--pushprof build/pushprof]
      [--secs 20] [--rounds 2] [--top 15]
"""
import argparse
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.abspath(os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(SRC, "tests", "lib"))
sys.path.insert(0, os.path.join(SRC, "tests", "cpu"))
import realgo  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pushprof", default=os.path.join(SRC, "build", "pushprof"))
    ap.add_argument("--secs", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--top", type=int, default=15)
    o = ap.parse_args()
    if not shutil.which("prometheus"):
        sys.exit("prometheus is not installed (apt-get install prometheus)")
    tot = realgo.measure(o.pushprof, o.secs, o.rounds, o.top,
                         report=lambda s: print(s, flush=True))
    for key in ("off", "on"):
        t = tot[key]
        print(f"{key}: wrong caller {100 * t['bad'] / max(t['n'], 1):.1f}% of {t['n']} samples "
              f"in the top leaves; noise floor {100 * t['gbad'] / max(t['gn'], 1):.1f}%")


if __name__ == "__main__":
    main()
