"""One heap interval wakes the agent's loop about twice (to queue the
snapshots, and once the worker's queue has run empty), not once for every
tracked program: the periodic snapshots are pushed with the next window
anyway, and a wake-up costs an idle VM more than the collecting does.
Six idle Go programs, a 2 s heap interval, no CPU windows, targets found
by a /proc scan every second (PUSHPROF_PROC_EVENTS=off: with process
events, other processes on the host wake the loop too, as they should: a
burst of them failed this test once): the loop thread may sleep and be
woken (voluntary context switches: a busy host's preemptions do not count)
fewer times than there are snapshots: about twice an interval plus the
scans (~25 in 12 s), where it was woken once per finished snapshot before
(~54). Every program's profiles still reach the store. Serial."""
import glob
import os
import time

import ghlib
import pptest
from pptest import check, done
from schedstat import thread_wakeups

tmp = ghlib.tmpdir("pushprof-goheap-wakeups-")
binary = ghlib.build("many", tmp, "plain")
NPROG = 6
INTERVAL_S = 2
WATCH_S = 12

store = os.path.join(tmp, "store")
os.makedirs(store)
cfg = os.path.join(tmp, "pushprof.yaml")
with open(cfg, "w") as f:
    f.write("node: wakeups-test\nlog: {level: debug}\nhttp_address: ''\n"
            f"spool: {{directory: ''}}\nlocal_store: {{directory: {store}}}\n"
            "cpu: {enabled: false}\n"
            f"targets: [{{exe_regex: '/{os.path.basename(binary)}$'}}]\n"
            f"go_heap: {{enabled: true, interval: {INTERVAL_S}s, on_oom: false}}\n")

progs = [ghlib.Workload(binary, ["100", os.path.join(tmp, f"own{i}.pb.gz")],
                        os.path.join(tmp, f"ready{i}"), env={"PP_MEMPROFILERATE": "1"})
         for i in range(NPROG)]
agent = pptest.Agent(cfg, env={"PUSHPROF_PROC_EVENTS": "off"})
try:
    check(agent.started, "agent starts", agent.log()[-800:])
    tracked = 0
    end = time.time() + 20
    while time.time() < end and tracked < NPROG:
        # this test's programs (another test run's of the same name
        # may be tracked too)
        tracked = sum(1 for w in progs if any("tracking go process" in ln and
                                              f"pid={w.pid} " in ln for ln in agent.lines))
        time.sleep(0.1)
    check(tracked == NPROG, f"all {NPROG} programs tracked", f"{tracked}")
    # the start's young targets (5 s of re-reads) and first snapshots done
    time.sleep(6)
    r0 = thread_wakeups(agent.pid, "pushprof")
    n0 = sum(1 for ln in agent.lines if '"go heap snapshot"' in ln)
    time.sleep(WATCH_S)
    wakes = thread_wakeups(agent.pid, "pushprof") - r0
    snaps = sum(1 for ln in agent.lines if '"go heap snapshot"' in ln) - n0
    print(f"loop wake-ups in {WATCH_S} s: {wakes}; snapshots: {snaps}")
    check(snaps >= NPROG * (WATCH_S // INTERVAL_S - 1),
          "every program snapshotted each interval", f"{snaps} snapshots")
    check(wakes < snaps, "the loop wakes about twice an interval, not per snapshot",
          f"{wakes} wake-ups in {WATCH_S} s for {snaps} snapshots")
    files = glob.glob(os.path.join(store, "**", "*.pb.gz"), recursive=True)
    for w in progs:
        mine = [p for p in files if f"-{w.pid}-" in p]
        check(len(mine) >= WATCH_S // INTERVAL_S, f"pid {w.pid}: its profiles in the store",
              f"{len(mine)} files")
finally:
    rc, _ = agent.stop()
    for w in progs:
        w.stop()
check(rc == 0, "agent exits 0", f"rc={rc}")
done()
