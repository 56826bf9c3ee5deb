"""Whole-host mode (no targets): a Go program started after the agent is
found and tracked for heap profiles within a few seconds, whichever way the
agent hears of new processes — the netlink proc connector, BPF tracepoints
(what a DaemonSet pod gets) or, with neither, /proc scans — and its heap
profile lands in the local store. The same program started again after the
first exited is tracked from the analysis the agent kept (gotrack_keep.c),
and its profile still names its functions."""
import glob
import os
import time

import ghlib
import pptest
from pptest import check, done

tmp = ghlib.tmpdir("pushprof-goheap-host-")
binary = ghlib.build("many", tmp, "plain")


for source, shown in (("netlink", "netlink"), ("bpf", "bpf"), ("off", "none")):
    d = os.path.join(tmp, source)
    store = os.path.join(d, "store")
    os.makedirs(store)
    cfg = os.path.join(d, "pushprof.yaml")
    with open(cfg, "w") as f:
        f.write("node: host-test\nlog: {level: debug}\nhttp_address: ''\n"
                f"spool: {{directory: ''}}\nlocal_store: {{directory: {store}}}\n"
                "cpu: {enabled: false}\n"
                "go_heap: {enabled: true, interval: 2s, on_oom: false}\n")
    agent = pptest.Agent(cfg, env={"PUSHPROF_PROC_EVENTS": source})
    try:
        started = agent.started
        check(started is not None and f"proc_events={shown}" in started,
              f"{source}: agent started, process events from {shown}", str(started))
        t0 = time.time()
        with ghlib.Workload(binary, ["1000", os.path.join(d, "own.pb.gz")],
                            os.path.join(d, "ready"), env={"PP_MEMPROFILERATE": "1"}) as w:
            line = agent.wait_log(f"pid={w.pid} ", 20)
            took = time.time() - t0
            check(line is not None and "tracking go process" in line,
                  f"{source}: the new Go program is tracked ({took:.1f} s after its start)",
                  "".join(agent.lines[-20:]))
            # from events (or the 1 s scans without them), not the full
            # /proc listing once a minute; the time includes the program's
            # own start-up, which a loaded host stretches
            check(took < 15, f"{source}: tracked within 15 s", f"{took:.1f} s")
            end = time.time() + 10
            files = []
            while time.time() < end and not files:
                files = [p for p in glob.glob(os.path.join(store, "**", "*.pb.gz"),
                                              recursive=True) if f"-{w.pid}-" in p]
                time.sleep(0.2)
            check(files, f"{source}: its heap profile is in the local store",
                  str(glob.glob(os.path.join(store, "**", "*"), recursive=True)[:10]))
            if files:
                top = pptest.pprof("-top", "-sample_index=alloc_space", files[0])
                check("main." in top, f"{source}: the profile names the program's functions",
                      top[-600:])
        if source == "netlink":
            # the first exited: a second run of the same executable reuses
            # the kept analysis instead of analysing the file again (the
            # agent lets go of an exited one at its next interval, 2 s here;
            # before that the second would share the first's analysis)
            # (on a loaded host, later: a run that still shares is ended and
            # the next one tried, at most three)
            for i in range(2, 5):
                time.sleep(3)
                w2 = ghlib.Workload(binary, ["1000", os.path.join(d, f"own{i}.pb.gz")],
                                    os.path.join(d, f"ready{i}"),
                                    env={"PP_MEMPROFILERATE": "1"})
                line = agent.wait_log(f"pid={w2.pid} ", 20)
                if line is not None and "analysis=shared" in line and i < 4:
                    print(f"run {i}: {line.strip()}: the first not let go yet")
                    w2.stop()
                    continue
                break
            with w2:
                check(line is not None and "analysis=kept" in line,
                      f"{source}: a second run is tracked from the kept analysis", str(line))
                end = time.time() + 10
                files = []
                while time.time() < end and not files:
                    files = [p for p in glob.glob(os.path.join(store, "**", "*.pb.gz"),
                                                  recursive=True) if f"-{w2.pid}-" in p]
                    time.sleep(0.2)
                top = pptest.pprof("-top", "-sample_index=alloc_space", files[0]) if files \
                    else ""
                check("main." in top, f"{source}: its profile names the program's functions",
                      top[-600:])
    finally:
        rc, _ = agent.stop()
    check(rc == 0, f"{source}: agent exits 0 on SIGTERM", f"rc={rc}")
done()
