"""A victim killed while its newest bucket's counter record runs into a page
it never touched (tests/oom/straddle.go sets this up and checks it with
/proc/self/pagemap). The runtime reads that part as zeros; the BPF walk
cannot fault it in. The capture must still be complete, name the leak, and
say how many records it read partly as never-touched memory."""
import os

import pptest
from pptest import check, tmpdir
import oomlib


def main():
    oomlib.cleanup_stale()
    d = tmpdir()
    exe = pptest.go_build(os.path.join(oomlib.HERE, "straddle.go"), os.path.join(d, "straddle"))
    out = os.path.join(d, "out")
    os.makedirs(out)
    # no periodic mirror pass between the new buckets and the kill
    w = oomlib.Watcher(out, "--mirror-interval-ms", "60000")
    try:
        with oomlib.Cgroup("straddle", 100) as cg:
            rc, r, tr = oomlib.oom_one(w, cg, [exe])
            check(tr is not None, "tracked")
            check(rc == -9, f"SIGKILLed ({rc})")
            if check(r is not None and r["event"] == "profile", "profile", str(r)):
                check(r["complete"], "complete", r["reason"])
                check(r["absent_records"] >= 1,
                      "the straddling record is counted as absent",
                      str(r["absent_records"]))
                check(oomlib.top_inuse(r["file"]) == "main.leakyAllocator",
                      "top inuse_space is the leak")
        check(w.alive(), "watcher alive")
    finally:
        w.stop()
    oomlib.finish(d)


if __name__ == "__main__":
    main()
