"""Benchmark (meson test --benchmark, or run directly): BPF capture time for
10,000 / 100,000 / 1,000,000 buckets, kernel memory, and the capture
success rate over N kills in a row (OOM_BENCH_KILLS, default 20).
OOM_BENCH_SIZES overrides the bucket counts (comma-separated)."""
import os
import statistics

from pptest import check, tmpdir
import oomlib

SIZES = [int(x) for x in os.environ.get("OOM_BENCH_SIZES", "10000,100000,1000000").split(",")]
KILLS = int(os.environ.get("OOM_BENCH_KILLS", "20"))


def wait_mirrored(w, n, timeout=300):
    return w.event(lambda e: e.get("event") == "status" and e.get("mirrored", 0) >= n, timeout)


def main():
    oomlib.cleanup_stale()
    d = tmpdir()
    leak, _, _ = oomlib.build_workloads(d)
    rows = []
    for n in SIZES:
        out = os.path.join(d, f"b{n}")
        os.makedirs(out)
        maxb = n + 5000
        w = oomlib.Watcher(out, "--max-buckets", str(maxb))
        try:
            # buckets ~350 B each in the victim (48 + 8*nstk + 128) + the objects
            limit = 150 + n * 600 // 1000000 + n // 1600
            with oomlib.Cgroup(f"bench{n}", limit) as cg:
                v = oomlib.Victim(cg, [leak, "-buckets", str(n), "-rate", "1"])
                check(v.ready(600), f"{n}: victim made its buckets")
                check(w.tracked(v.pid), f"{n}: tracked")
                check(wait_mirrored(w, n) is not None, f"{n}: mirror caught up")
                with open(f"/proc/{w.p.pid}/status") as f:
                    rss = [l.split()[1] for l in f if l.startswith(("VmRSS:", "VmHWM:"))]
                print(f"{n}: watcher before the kill: VmRSS {int(rss[1]) // 1024} MiB, "
                      f"VmHWM {int(rss[0]) // 1024} MiB (mirror)")
                v.go()
                v.wait(120)
                r = w.result(v.pid, 60)
            hwm = 0
            with open(f"/proc/{w.p.pid}/status") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        hwm = int(line.split()[1]) // 1024
            if check(r is not None and r["event"] == "profile", f"{n}: profile", str(r)):
                check(r["complete"], f"{n}: complete", r["reason"])
                rows.append((n, r["buckets"], r["new_buckets"], r["capture_ns"],
                             r["mark_to_capture_ns"], r["complete"], hwm))
        finally:
            st = w.stop()
        if st and rows:
            rows[-1] = rows[-1] + (st["kernel_bytes"],)
    print("buckets walked new capture_ms mark_to_capture_us complete watcher_rss_MiB kernel_MiB")
    for row in rows:
        n, walked, new, cap, m2c, comp, hwm = row[:7]
        kb = row[7] if len(row) > 7 else 0
        print(f"{n} {walked} {new} {cap / 1e6:.2f} {m2c / 1e3:.1f} {comp} {hwm} {kb / 2**20:.1f}")

    out = os.path.join(d, "kills")
    os.makedirs(out)
    w = oomlib.Watcher(out)
    ok, caps = 0, []
    try:
        for i in range(KILLS):
            with oomlib.Cgroup(f"kill{i}", 100) as cg:
                rc, r, _ = oomlib.oom_one(w, cg, [leak])
                if r and r["event"] == "profile" and r["complete"] and \
                        oomlib.top_inuse(r["file"]) == "main.leakyAllocator":
                    ok += 1
                    caps.append(r["capture_ns"])
    finally:
        w.stop()
    check(ok == KILLS, f"{ok}/{KILLS} kills gave a complete profile with the leak on top")
    if caps:
        print(f"kills: {ok}/{KILLS} complete; capture_us median {statistics.median(caps)/1e3:.1f}"
              f" max {max(caps)/1e3:.1f}")
    oomlib.finish(d)


if __name__ == "__main__":
    main()
