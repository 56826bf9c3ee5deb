"""The spool on disk, through the real agent.

1. Corrupt files planted in the spool (garbage, a torn copy of a real batch,
   an empty file), older than everything else, are moved aside as .corrupt
   with a log line and a metric, and every real batch behind them is still
   delivered.
2. spool.max_bytes holds while the store is away: the spool never exceeds
   it, the oldest batches go first, each drop is logged and counted, and
   delivered + dropped == handed over."""
import os
import subprocess
import time

import pptest
import rellib as rl
from pptest import check, done, tmpdir

d = tmpdir("pushprof-rel-spool-")
busy = rl.build_go("busyalloc", d)
work = subprocess.Popen([busy, "0"])
targets = f"targets:\n  - pids: [{work.pid}]\n"
port = rl.free_port()
agent = rcv = None
try:
    # -- 1: corrupt files --------------------------------------------------
    spool, store = os.path.join(d, "spool"), os.path.join(d, "store")
    cfg = rl.write_config(os.path.join(d, "a.yaml"), remote=f"127.0.0.1:{port}", spool=spool,
                          store=store, targets=targets)
    agent = pptest.Agent(cfg, os.path.join(d, "a1.log"))      # no receiver: everything spools
    rl.wait_for(lambda: len(rl.spool_files(spool)) >= 3, 20)
    rc, _ = agent.stop()
    real = rl.spool_files(spool)
    check(rc == 0 and len(real) >= 3, "an outage left real batches in the spool", f"{len(real)}")
    with open(os.path.join(spool, "00000000000000000001.spool"), "wb") as f:
        f.write(b"PPSPOOL1" + os.urandom(300))
    with open(real[0], "rb") as f:
        data = f.read()
    with open(os.path.join(spool, "00000000000000000002.spool"), "wb") as f:
        f.write(data[:len(data) // 2])
    open(os.path.join(spool, "00000000000000000003.spool"), "wb").close()
    rcv = rl.Rcv(os.path.join(d, "rcv1"), port)
    agent = pptest.Agent(cfg, os.path.join(d, "a2.log"))
    drained = rl.wait_for(lambda: not rl.spool_files(spool), 30)
    check(drained, "the spool drains past the corrupt files", str(rl.spool_files(spool)))
    corrupt = sorted(f for f in os.listdir(spool) if f.endswith(".corrupt"))
    check(corrupt == [f"0000000000000000000{i}.spool.corrupt" for i in (1, 2, 3)],
          "all three moved aside as <name>.corrupt", str(corrupt))
    lines = [l for l in agent.log().splitlines() if "corrupt spool files moved aside" in l]
    print("\n".join(lines))
    check(lines and "files=3" in lines[0] and ".corrupt" in lines[0],
          "a log line says the corrupt files were moved aside")
    # the counters are updated when the flush that drained the spool ends
    rl.wait_for(lambda: agent.metrics().get("pushprof_spool_corrupt_files_total"), 10)
    m = agent.metrics()
    check(m.get("pushprof_spool_corrupt_files_total") == 3,
          "/metrics pushprof_spool_corrupt_files_total == 3",
          str(m.get("pushprof_spool_corrupt_files_total")))
    agent.stop()
    local = rl.file_hashes(rl.local_files(store))
    got = rcv.hashes()
    missing = [p for p, h in local.items() if h not in got]
    check(local and not missing, "every real profile delivered despite the corrupt files",
          f"{len(missing)} of {len(local)} missing")
    rcv.stop()

    # -- 2: max_bytes --------------------------------------------------------
    spool2, store2 = os.path.join(d, "spool2"), os.path.join(d, "store2")
    cap = 8192
    cfg2 = rl.write_config(os.path.join(d, "b.yaml"), remote=f"127.0.0.1:{port}",
                           store=store2, targets=targets,
                           extra=f"spool: {{directory: {spool2}, max_bytes: {cap}}}\n")
    agent = pptest.Agent(cfg2, os.path.join(d, "b.log"))
    seen, peak = set(), 0
    end = time.time() + 14
    while time.time() < end:
        files = rl.spool_files(spool2)
        seen |= {os.path.basename(f) for f in files}
        peak = max(peak, sum(os.path.getsize(f) for f in files if os.path.exists(f)))
        time.sleep(0.1)
    left = {os.path.basename(f) for f in rl.spool_files(spool2)}
    gone = seen - left
    print(f"spool cap {cap}: peak {peak} bytes, {len(seen)} files seen, {len(gone)} dropped, "
          f"{len(left)} left")
    check(peak <= cap, "spool never exceeds spool.max_bytes", f"peak {peak}")
    check(gone and left and max(gone) < min(left), "the oldest batches were dropped first",
          f"gone {sorted(gone)[-2:]} left {sorted(left)[:2]}")
    # counted when the flush that dropped them ends
    rl.wait_for(lambda: agent.metrics().get("pushprof_spool_dropped_files_total", 0)
                >= len(gone), 10)
    m = agent.metrics()
    dropped = m.get('pushprof_profiles_dropped_total{cause="spool_full"}', 0)
    check(dropped >= len(gone), "/metrics counts the dropped profiles (cause spool_full)",
          f"{dropped} for {len(gone)} files")
    check(m.get("pushprof_spool_dropped_files_total", 0) >= len(gone),
          "/metrics counts the dropped files")
    check("spool full, dropped the oldest profiles" in agent.log(), "each drop is logged")
    rcv = rl.Rcv(os.path.join(d, "rcv2"), port)
    check(rl.wait_for(lambda: not rl.spool_files(spool2), 60), "what is left is delivered")
    work.kill()
    work.wait()

    def tally():
        m = agent.metrics()
        return (rl.msum(m, "pushprof_profiles_submitted_total"),
                m.get("pushprof_profiles_delivered_total", 0),
                rl.msum(m, "pushprof_profiles_dropped_total"), len(rl.local_files(store2)))
    # the last windows are still on their way: settle on the books balancing
    # (bounded), not on a sleep
    rl.wait_for(lambda: (lambda s, dl, dr, n: s == n and dl + dr == s and
                         dl == len(rcv.series()))(*tally()), 60, 0.5)
    sub, dl, dr, nlocal = tally()
    print(f"handed over {sub:.0f} (local_store {nlocal}), delivered {dl:.0f}, dropped {dr:.0f}")
    check(sub == nlocal and dl + dr == sub and dl == len(rcv.series()),
          "delivered + dropped == handed over, delivered == received",
          f"{dl}+{dr} vs {sub}, received {len(rcv.series())}")
    rc, _ = agent.stop()
    check(rc == 0, "agent exits 0")
    rcv.stop()

    # -- 3: heap-only agent (no CPU windows, no periodic snapshots) ----------
    # still drains a spool left by an earlier run
    spool3 = os.path.join(d, "spool3")
    work = subprocess.Popen([busy, "0"])
    cfg3 = rl.write_config(os.path.join(d, "c.yaml"), remote=f"127.0.0.1:{port}",
                           spool=spool3, targets=f"targets:\n  - pids: [{work.pid}]\n")
    agent = pptest.Agent(cfg3, os.path.join(d, "c1.log"))
    rl.wait_for(lambda: len(rl.spool_files(spool3)) >= 2, 20)
    agent.stop()
    n3 = len(rl.spool_files(spool3))
    cfg4 = rl.write_config(os.path.join(d, "d.yaml"), remote=f"127.0.0.1:{port}",
                           spool=spool3, interval="2s",
                           go_heap="{enabled: true, interval: 0s}", cpu=False)
    rcv = rl.Rcv(os.path.join(d, "rcv3"), port)
    agent = pptest.Agent(cfg4, os.path.join(d, "c2.log"))
    check(agent.started is not None, "heap-only agent started", agent.log()[-300:])
    drained = rl.wait_for(lambda: not rl.spool_files(spool3), 15)
    check(n3 >= 2 and drained and len(rcv.series()) >= n3,
          "a heap-only agent delivers the spool an earlier run left",
          f"{n3} files, {len(rl.spool_files(spool3))} left, {len(rcv.series())} received")
    rc, _ = agent.stop()
    check(rc == 0, "heap-only agent exits 0")
finally:
    if agent and agent.p.poll() is None:
        agent.p.kill()
    if work.poll() is None:
        work.kill()
    if rcv:
        rcv.stop()
done()
