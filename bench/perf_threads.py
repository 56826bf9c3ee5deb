#!/usr/bin/python3
"""Where each of the agent's threads spends its CPU, from a `perf record -g`
file (window_ab.py --perf DIR writes them).

  /usr/bin/python3 bench/perf_threads.py FILE.data [--thread pushprof [--exact]] [--top 25]

Prints the samples per thread name, then for the chosen thread (a prefix of
its name) the functions with the most samples anywhere in their stacks
(inclusive) and at the leaf (self), with their share of that thread's samples.
"""
import argparse
import collections
import subprocess


def stacks(path):
    """(comm, [frames leaf first]) per sample of `perf script`."""
    out = subprocess.run(["perf", "script", "-i", path, "-F", "comm,tid,ip,sym,dso"],
                         capture_output=True, text=True, check=True).stdout
    comm, frames = None, []
    for line in out.splitlines():
        if not line.strip():
            if comm is not None:
                yield comm, frames
            comm, frames = None, []
        elif not line.startswith((" ", "\t")):
            comm = line.rsplit(None, 1)[0].strip()
        else:
            parts = line.split(None, 1)
            sym = parts[1].rsplit(" (", 1)[0] if len(parts) > 1 else "?"
            frames.append(sym)
    if comm is not None:
        yield comm, frames


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("--thread", default="pushprof")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--exact", action="store_true", help="the thread name exactly, not a prefix")
    a = ap.parse_args()
    per_thread = collections.Counter()
    incl, self_ = collections.Counter(), collections.Counter()
    n = 0
    for comm, frames in stacks(a.file):
        per_thread[comm] += 1
        if not (comm == a.thread if a.exact else comm.startswith(a.thread)):
            continue
        n += 1
        if frames:
            self_[frames[0]] += 1
        for f in set(frames):
            incl[f] += 1
    total = sum(per_thread.values())
    print(f"{total} samples")
    for comm, c in per_thread.most_common():
        print(f"  {c:7d} {100 * c / total:5.1f}%  {comm}")
    print(f"\n{a.thread}*: {n} samples; inclusive")
    for f, c in incl.most_common(a.top):
        print(f"  {c:7d} {100 * c / max(n, 1):5.1f}%  {f}")
    print(f"\n{a.thread}*: self")
    for f, c in self_.most_common(a.top):
        print(f"  {c:7d} {100 * c / max(n, 1):5.1f}%  {f}")


if __name__ == "__main__":
    main()
