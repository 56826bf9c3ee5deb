"""Two Go programs in two memory cgroups leak at the same moment and are
OOM-killed together: two profiles, one per victim, each complete and
pointing at the leaking function."""
import os

from pptest import check, tmpdir
import oomlib


def main():
    oomlib.cleanup_stale()
    d = tmpdir()
    leak, _, _ = oomlib.build_workloads(d)
    out = os.path.join(d, "out")
    os.makedirs(out)
    w = oomlib.Watcher(out)
    try:
        with oomlib.Cgroup("twoA", 100) as ca, oomlib.Cgroup("twoB", 120) as cb:
            va = oomlib.Victim(ca, [leak])
            vb = oomlib.Victim(cb, [leak, "-depth", "3"])
            check(va.ready() and vb.ready(), "both victims started")
            check(w.tracked(va.pid) and w.tracked(vb.pid), "both tracked")
            va.go()
            vb.go()
            ra, rb = va.wait(), vb.wait()
            check(ra == -9 and rb == -9, f"both SIGKILLed ({ra}, {rb})")
            res = {}
            for v, cg in ((va, ca), (vb, cb)):
                r = w.result(v.pid)
                res[v.pid] = r
                if not check(r is not None and r["event"] == "profile",
                             f"pid {v.pid}: profile", str(r)):
                    continue
                check(r["complete"], f"pid {v.pid}: complete", r["reason"])
                check(r["labels"]["cgroup"] == cg.rel, f"pid {v.pid}: its own cgroup",
                      r["labels"]["cgroup"])
                check(oomlib.top_inuse(r["file"]) == "main.leakyAllocator",
                      f"pid {v.pid}: top inuse_space is main.leakyAllocator")
            files = {r["file"] for r in res.values() if r and r.get("file")}
            check(len(files) == 2, "two distinct profiles", str(files))
            # overlap: both were marked before either capture was reported
            profs = [e for e in w.events() if e.get("event") == "profile"]
            check(len(profs) == 2, "exactly two results", str(len(profs)))
        check(w.alive(), "watcher alive")
    finally:
        st = w.stop()
    check(st and st["marks"] >= 2 and st["profiles"] == 2, "stats: 2 marks, 2 profiles",
          str(st))
    oomlib.finish(d)


if __name__ == "__main__":
    main()
