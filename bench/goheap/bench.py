#!/usr/bin/python3
"""Benchmark: time to snapshot 10,000 and 100,000 Go heap buckets and the
memory the reader needs while doing it.

Builds tests/goheap/many.go, runs it with N distinct buckets at
MemProfileRate 1, and runs `goheap_tool bench PID ITER` (tests/goheap/
goheap_tool.c) against it: wall and CPU time of goheap_read (walking the
buckets with process_vm_readv) and of goheap_snapshot (read + symbolize +
build the pprof + gzip + labels), min and median, and the tool's peak RSS;
then `goheap_tool snapbench PID 15`: goheap_snapshot alone, CPU min/median,
minor page faults per snapshot, bytes read from the target.

usage: bench/goheap/bench.py [BUILD_DIR] [N ...]     (default: build 10000 100000)
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.abspath(os.path.join(HERE, "..", ".."))
args = sys.argv[1:]
build = os.path.abspath(args.pop(0) if args and not args[0].isdigit() else os.path.join(SRC, "build"))
counts = [int(a) for a in args] or [10000, 100000]
os.environ.setdefault("PUSHPROF_BUILD_DIR", build)
os.environ.setdefault("PUSHPROF_SOURCE_DIR", SRC)
sys.path.insert(0, os.path.join(SRC, "tests", "lib"))
sys.path.insert(0, os.path.join(SRC, "tests", "goheap"))
import ghlib  # noqa: E402
import pptest  # noqa: E402

tmp = ghlib.tmpdir("pushprof-bench-goheap-")
binary = ghlib.build("many", tmp, "plain")
for n in counts:
    with ghlib.Workload(binary, [str(n), os.path.join(tmp, "own.pb.gz")],
                        os.path.join(tmp, "ready"), env={"PP_MEMPROFILERATE": "1"}) as w:
        rss = 0
        with open(f"/proc/{w.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1])
        r = pptest.run([ghlib.TOOL, "bench", str(w.pid), "15", "1000000"], timeout=600)
        print(f"N={n} target_rss_kb={rss} {r.stdout.strip()}{r.stderr.strip()}")
        # goheap_snapshot alone, with its page faults (the agent's path)
        r = pptest.run([ghlib.TOOL, "snapbench", str(w.pid), "15"], timeout=600)
        print(f"N={n} snapbench {r.stdout.strip()}{r.stderr.strip()}")
        sys.stdout.flush()
