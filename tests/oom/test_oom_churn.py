"""The mirror and the BPF walk together: a victim that makes a new bucket
for every block it leaks, so at the kill some buckets are mirrored (only
their counters are copied) and the newest are not (copied whole). Every
bucket it reported making is in the profile. Then the fallback capture
point: with the signal_deliver hook off, sched_process_exit (before
exit_mm) still captures a complete profile."""
import os
import re

import pptest
from pptest import check, tmpdir
import oomlib


def churn_traces(profile):
    out = pptest.pprof("-traces", profile)
    return sum(1 for block in out.split("-----------+") if "main.churn" in block)


def main():
    oomlib.cleanup_stale()
    d = tmpdir()
    leak, _, _ = oomlib.build_workloads(d)

    out = os.path.join(d, "churn")
    os.makedirs(out)
    w = oomlib.Watcher(out, "--mirror-interval-ms", "300")
    try:
        with oomlib.Cgroup("churn", 100) as cg:
            v = oomlib.Victim(cg, [leak, "-rate", "1", "-churn", "1", "-slow", "15ms"])
            check(v.ready(), "victim started")
            check(w.tracked(v.pid), "tracked")
            v.go()
            check(v.wait() == -9, "SIGKILLed")
            r = w.result(v.pid)
            made = 0
            for line in v.lines.all:
                m = re.match(r"churn (\d+)$", line)
                if m:
                    made = int(m.group(1))
            check(made >= 20, f"victim made {made} churn buckets")
            if check(r is not None and r["event"] == "profile", "profile", str(r)):
                check(r["complete"], "complete", r["reason"])
                check(r["buckets"] > r["new_buckets"], "some buckets came from the mirror",
                      f"{r['buckets']} walked, {r['new_buckets']} new")
                n = churn_traces(r["file"])
                check(n >= made, f"all {made} churn buckets in the profile", str(n))
                print(f"walked {r['buckets']}, copied whole {r['new_buckets']}, churn {n}")
        check(w.alive(), "watcher alive")
    finally:
        w.stop()

    out = os.path.join(d, "exit")
    os.makedirs(out)
    w = oomlib.Watcher(out, "--exit-hook-only")
    try:
        with oomlib.Cgroup("exit", 100) as cg:
            rc, r, tr = oomlib.oom_one(w, cg, [leak])
            check(rc == -9, "exit hook: SIGKILLed")
            if check(r is not None and r["event"] == "profile", "exit hook: profile", str(r)):
                check(r["complete"], "exit hook: complete", r["reason"])
                check(r["flags"] & 256, "exit hook: captured at sched_process_exit",
                      str(r["flags"]))
                check(oomlib.top_inuse(r["file"]) == "main.leakyAllocator",
                      "exit hook: top inuse_space is the leak")
    finally:
        w.stop()
    oomlib.finish(d)


if __name__ == "__main__":
    main()
