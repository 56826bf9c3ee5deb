"""A Go program leaking from one function is OOM-killed in a 100 MiB memory
cgroup, five times in a row: each kill yields one complete profile whose top
inuse_space function is the leaking one, with the OOM labels and the
victim's RSS figures in the comments. The watcher's thread wakes about every
4 s with idle programs and sleeps without any."""
import json
import os
import time

from pptest import check, tmpdir
import oomlib
from schedstat import thread_wakeups

KILLS = int(os.environ.get("OOM_KILLS", "5"))


def quiet_wakeups(w, secs, limit, tries=3):
    """Wake-ups (voluntary context switches: a preemption on a busy host
    is not one) of the watcher's thread over secs, measured again up to
    tries times while above limit: another OOM kill on the host (the
    watcher sees every victim) rightly wakes it. A watcher that wakes too
    often does so in every stretch. Returns (wake-ups, seconds) of the
    last stretch."""
    for _ in range(tries):
        r0, t0 = thread_wakeups(w.p.pid, "pushprof-oom"), time.monotonic()
        time.sleep(secs)
        runs = thread_wakeups(w.p.pid, "pushprof-oom") - r0
        took = time.monotonic() - t0
        if runs <= limit:
            break
        print(f"  {runs} wake-ups in {took:.1f}s: measuring again")
    return runs, took


def main():
    oomlib.cleanup_stale()
    d = tmpdir()
    leak, _, _ = oomlib.build_workloads(d)
    out = os.path.join(d, "out")
    os.makedirs(out)
    w = oomlib.Watcher(out)
    ok = 0
    times = []
    try:
        for i in range(KILLS):
            with oomlib.Cgroup(f"basic{i}", 100) as cg:
                rc, res, tr = oomlib.oom_one(w, cg, [leak])
                check(tr is not None, f"kill {i}: victim tracked before it leaks")
                check(rc == -9, f"kill {i}: victim was SIGKILLed (status {rc})")
                if not check(res is not None and res["event"] == "profile",
                             f"kill {i}: a profile, not an event", str(res)):
                    continue
                check(res["complete"], f"kill {i}: profile complete", res["reason"])
                lab = res["labels"]
                want = {"__name__": "memory", "trigger": "oom", "pid": str(res["pid"]),
                        "comm": "leak", "executable": leak, "cgroup": cg.rel,
                        "oom_complete": "true"}
                for k, v in want.items():
                    check(lab.get(k) == v, f"kill {i}: label {k}={v}", str(lab.get(k)))
                check(lab.get("node"), f"kill {i}: label node set")
                check("oom_incomplete_reason" not in lab, f"kill {i}: no incomplete reason")
                top = oomlib.top_inuse(res["file"])
                check(top == "main.leakyAllocator", f"kill {i}: top inuse_space function",
                      str(top))
                cm = " ".join(oomlib.comments(res["file"]))
                check("anon_rss=" in cm and "total_vm=" in cm and "pgtables=" in cm,
                      f"kill {i}: RSS figures in the comments", cm)
                # the cgroup limit is 100 MiB: most of it is anonymous memory
                check(60 * 1024 <= res["anon_rss_kb"] <= 110 * 1024,
                      f"kill {i}: anon_rss from mark_victim", str(res["anon_rss_kb"]))
                check(res["rate"] == 524288, f"kill {i}: MemProfileRate read at capture",
                      str(res["rate"]))
                times.append(res["capture_ns"])
                ok += 1
        check(w.alive(), "watcher alive after the kills")

        # a tracked program that exits without an OOM kill: the watcher
        # drops it by itself (its pidfd, or /proc every 5 s without one)
        with oomlib.Cgroup("exits", 500) as cg:
            v = oomlib.Victim(cg, [leak])
            tr = v.ready() and w.tracked(v.pid)
            check(bool(tr), "a program that will exit is tracked")
            n = len(w.lines.all)
            v.p.kill()
            v.wait()
            t0 = time.monotonic()

            def untracked():  # a status line printed after the kill
                for line in w.lines.all[n:]:
                    try:
                        e = json.loads(line)
                    except ValueError:
                        continue
                    if e.get("event") == "status" and e.get("tracked") == 0:
                        return True
                return False
            while tr and not untracked() and time.monotonic() - t0 < 30:
                time.sleep(0.1)
            took = time.monotonic() - t0
            check(tr and untracked(), "the exited program is untracked without an OOM kill",
                  f"not after {took:.1f}s")
            print(f"untracked {took:.1f}s after the exit")
            check(w.result(v.pid, 1) is None, "and no profile or OOM event names it")

    finally:
        st = w.stop()
    check(ok == KILLS, f"{KILLS} kills -> {KILLS} profiles", f"{ok}")
    check(st is not None and st["profiles"] == KILLS and st["events"] == w.foreign_events(),
          "watcher counted every profile and no event (of this test's victims)",
          f"{st}, other processes' events {w.foreign_events()}")

    # idle programs are read together, on a 4 s grid, and the watcher
    # sleeps until the next is due (oom_internal.h): with the agent's 1 s
    # mirror period its thread runs about once per 4 s (it ran every
    # second before: 16 times in 16 s)
    w = oomlib.Watcher(out, "--mirror-interval-ms", "1000")
    try:
        with oomlib.Cgroup("idle", 500) as cg:
            vs = [oomlib.Victim(cg, [leak]) for _ in range(3)]
            try:
                check(all(v.ready() and w.tracked(v.pid) for v in vs),
                      "three idle programs tracked")
                time.sleep(10)  # empty reads 1 s, 2 s, then 4 s apart
                runs, took = quiet_wakeups(w, 16, 8)
                print(f"watcher thread woke {runs} times in {took:.1f}s with 3 idle programs")
                check(runs <= 8, "the watcher of idle programs wakes about every 4 s",
                      f"{runs} wake-ups in {took:.1f}s")
                check(w.alive(), "watcher alive with idle programs")
            finally:
                for v in vs:
                    v.p.kill()
                    v.wait()
        # no targets left: nothing is due, and what can happen (a new
        # target, a victim's ring record, the stop) wakes it; it woke every
        # second before (8 times in 8 s)
        time.sleep(6)  # the exits are seen at the next pass (<= 4 s)
        runs, took = quiet_wakeups(w, 8, 2)
        print(f"watcher thread woke {runs} times in {took:.1f}s without targets")
        check(runs <= 2, "the watcher without targets sleeps", f"{runs} wake-ups in {took:.1f}s")
        check(w.alive(), "watcher alive without targets")
    finally:
        w.stop()
    print(f"capture_ns per kill: {times}")
    oomlib.finish(d)


if __name__ == "__main__":
    main()
