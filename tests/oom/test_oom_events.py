"""Never silent: a non-Go victim, an untracked Go victim and a Go victim
whose memory profiling is off each give an explicit event and leave the
watcher working; with enable_profiling the rate-0 program gives a real
profile."""
import os

from pptest import check, tmpdir
import oomlib


def main():
    oomlib.cleanup_stale()
    d = tmpdir()
    leak, norate, cleak = oomlib.build_workloads(d)
    out = os.path.join(d, "out")
    os.makedirs(out)
    w = oomlib.Watcher(out)
    try:
        with oomlib.Cgroup("cprog", 64) as cg:
            rc, res, _ = oomlib.oom_one(w, cg, [cleak], tracked=False)
            check(rc == -9, f"C victim SIGKILLed ({rc})")
            check(res is not None and res["event"] == "oom_event" and
                  res["reason"].startswith("not_tracked"), "C victim: not_tracked event",
                  str(res))
            check(res and res["comm"] == "cleak", "C victim: comm from mark_victim")
            check(res and res["anon_rss_kb"] > 30 * 1024, "C victim: RSS figures")

        with oomlib.Cgroup("untracked", 80, tracked=False) as cg:
            rc, res, _ = oomlib.oom_one(w, cg, [leak], tracked=False)
            check(rc == -9, f"untracked Go victim SIGKILLed ({rc})")
            check(res is not None and res["event"] == "oom_event" and
                  res["reason"].startswith("not_tracked"), "untracked Go: not_tracked event",
                  str(res))

        with oomlib.Cgroup("norate", 80) as cg:
            rc, res, tr = oomlib.oom_one(w, cg, [norate])
            check(tr is not None, "rate-0 Go victim tracked")
            check(rc == -9, f"rate-0 victim SIGKILLed ({rc})")
            check(res is not None and res["event"] == "oom_event" and
                  res["reason"].startswith("profiling_disabled") and res["rate"] == 0,
                  "rate-0 Go: profiling_disabled event", str(res))

        # the watcher still works after all that
        with oomlib.Cgroup("after", 100) as cg:
            rc, res, _ = oomlib.oom_one(w, cg, [leak])
            check(res is not None and res["event"] == "profile" and res["complete"],
                  "a Go victim afterwards still gives a profile", str(res))
        check(w.alive(), "watcher alive")
    finally:
        st = w.stop()
    check(st and st["events"] - w.foreign_events() == 3 and st["profiles"] == 1,
          "stats: 3 events, 1 profile (of this test's victims)",
          f"{st}, other processes' events {w.foreign_events()}")

    # go_heap.enable_profiling: the same rate-0 program gives a real profile
    out2 = os.path.join(d, "out2")
    os.makedirs(out2)
    w = oomlib.Watcher(out2, "--enable-profiling")
    try:
        with oomlib.Cgroup("enabled", 100) as cg:
            rc, res, tr = oomlib.oom_one(w, cg, [norate])
            check(tr is not None and tr.get("enabled_profiling") is True,
                  "enable_profiling: rate written into the process", str(tr))
            if check(res is not None and res["event"] == "profile",
                     "enable_profiling: a profile", str(res)):
                check(res["rate"] == 524288, "enable_profiling: rate 512 KiB at capture")
                check(oomlib.top_inuse(res["file"]) == "main.leakyNoRate",
                      "enable_profiling: top inuse_space is main.leakyNoRate")
    finally:
        w.stop()
    oomlib.finish(d)


if __name__ == "__main__":
    main()
