"""Capacity and honesty: a victim with 100,000+ buckets gives a complete
profile (counters of the mirrored buckets copied at OOM time); too small a
max_buckets or max_stack_depth gives a profile marked incomplete with the
reason, in the labels and in the result."""
import os

from pptest import check, tmpdir
import oomlib

NB = 120000


def run_case(d, leak, name, wargs, vargs, limit, mirrored=0):
    out = os.path.join(d, name)
    os.makedirs(out)
    w = oomlib.Watcher(out, *wargs)
    try:
        with oomlib.Cgroup(name, limit) as cg:
            rc, res, tr = oomlib.oom_one(w, cg, [leak, *vargs], mirrored=mirrored)
            check(tr is not None, f"{name}: tracked")
            check(rc == -9, f"{name}: SIGKILLed ({rc})")
        alive = w.alive()
    finally:
        w.stop()
    check(alive, f"{name}: watcher alive")
    return res


def main():
    oomlib.cleanup_stale()
    d = tmpdir()
    leak, _, _ = oomlib.build_workloads(d)

    r = run_case(d, leak, "many", ["--max-buckets", "200000"],
                 ["-buckets", str(NB), "-rate", "1"], 200, mirrored=NB)
    if check(r is not None and r["event"] == "profile", "many buckets: profile", str(r)):
        check(r["complete"], "many buckets: complete", r["reason"])
        check(r["buckets"] >= NB, f"many buckets: >= {NB} buckets walked",
              str(r["buckets"]))
        check(r["new_buckets"] < 1000, "many buckets: mirrored, few copied whole",
              str(r["new_buckets"]))
        check(r["labels"].get("oom_complete") == "true", "many buckets: label complete")
        check(oomlib.top_inuse(r["file"]) == "main.leakyAllocator",
              "many buckets: top inuse_space is the leak")
        print(f"capture of {r['buckets']} buckets took {r['capture_ns']} ns")

    r = run_case(d, leak, "fewb", ["--max-buckets", "1000"],
                 ["-buckets", "5000", "-rate", "1"], 120, mirrored=1000)
    if check(r is not None and r["event"] == "profile", "max_buckets 1000: profile", str(r)):
        check(not r["complete"] and "bucket_limit" in r["reason"],
              "max_buckets 1000: incomplete, bucket_limit", r["reason"])
        check(r["labels"].get("oom_complete") == "false" and
              "bucket_limit" in r["labels"].get("oom_incomplete_reason", ""),
              "max_buckets 1000: labels say why", str(r["labels"]))
        check(r["buckets"] == 1000, "max_buckets 1000: 1000 walked", str(r["buckets"]))

    # a one-page ring cannot hold a single 256-bucket counter chunk: records
    # are lost, and the profile says so (whatever the END record's fate)
    r = run_case(d, leak, "tinyring", ["--ring-bytes", "4096"],
                 ["-buckets", "5000", "-rate", "1"], 120, mirrored=5000)
    if check(r is not None and r["event"] == "profile", "4 KiB ring: profile", str(r)):
        check(not r["complete"] and "ring_full" in r["reason"],
              "4 KiB ring: incomplete, ring_full", r["reason"])
        check(r["labels"].get("oom_complete") == "false", "4 KiB ring: label complete=false")

    r = run_case(d, leak, "shallow", ["--max-depth", "8"], ["-depth", "20"], 100)
    if check(r is not None and r["event"] == "profile", "max_depth 8: profile", str(r)):
        check(not r["complete"] and "stack_truncated" in r["reason"],
              "max_depth 8: incomplete, stack_truncated", r["reason"])
        check("stack_truncated" in r["labels"].get("oom_incomplete_reason", ""),
              "max_depth 8: label says why", str(r["labels"]))
        check(oomlib.top_inuse(r["file"]) == "main.leakyAllocator",
              "max_depth 8: leaf frames kept")
    oomlib.finish(d)


if __name__ == "__main__":
    main()
