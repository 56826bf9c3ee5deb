"""A remote store that accepts connections and never answers: the per-call
deadline (remote_store.timeout: 1s) holds, CPU windows keep coming about on
schedule, the profiles land in the spool, and a normal receiver on the same
port later gets all of them. SIGTERM while the store hangs still exits 0
within 5 s, even with the default remote_store.timeout of 10 s and a
WriteRaw in flight: a stop request cuts the call short (2 s grace) and the
window goes to the spool."""
import os
import signal
import subprocess
import time

import pptest
import rellib as rl
from pptest import check, done, tmpdir

HANG = 20
d = tmpdir("pushprof-rel-hang-")
busy = rl.build_go("busyalloc", d)
work = subprocess.Popen([busy, "0"])
port = rl.free_port()
spool, store = os.path.join(d, "spool"), os.path.join(d, "store")
cfg = rl.write_config(os.path.join(d, "a.yaml"), remote=f"127.0.0.1:{port}", spool=spool,
                      store=store, timeout="1s", targets=f"targets:\n  - pids: [{work.pid}]\n")
hang = rl.Rcv(os.path.join(d, "rcv-hang"), port, "--hang")
good = None
agent = None
try:
    agent = pptest.Agent(cfg, os.path.join(d, "agent.log"))
    check(agent.started is not None, "agent started")
    t0 = time.time()
    time.sleep(HANG)
    wins = agent.windows()
    calls = hang.calls()
    spooled = rl.spool_files(spool)
    m = agent.metrics()
    print(f"{len(wins)} windows in {HANG}s against a hanging store; {len(calls)} calls "
          f"reached it; {len(spooled)} spool files")
    check(len(calls) > 0 and all(c["status"] == "HANG" for c in calls),
          "the hanging receiver got calls and answered none", str(calls[:2]))
    # pushes run on the outbox's sender thread: windows stay on schedule
    check(len(wins) >= HANG * 0.8, "windows keep flowing while the store hangs",
          f"{len(wins)} windows in {HANG}s")
    check(len(spooled) > 0, "profiles land in the spool", str(spooled))
    dl = m.get('pushprof_write_requests_total{status="DEADLINE_EXCEEDED"}', 0)
    check(dl > 0, "/metrics counts DEADLINE_EXCEEDED", str(
        {k: v for k, v in m.items() if "write_requests" in k}))
    lat_n = m.get("pushprof_write_latency_seconds_count", 0)
    lat_s = m.get("pushprof_write_latency_seconds_sum", 0)
    check(lat_n > 0 and lat_s / lat_n < 1.6, "deadline holds: mean attempt <= timeout + slack",
          f"{lat_s:.1f}s over {lat_n:.0f} attempts")
    hang.stop()
    good = rl.Rcv(os.path.join(d, "rcv-good"), port)
    # bounded generously: the receiver is Python and, on a loaded machine,
    # slower than the 1 s timeout for large calls (the agent shrinks them)
    drained = rl.wait_for(lambda: not rl.spool_files(spool), 180, 0.5)
    check(drained, "spool drained once a normal receiver replaces the hanging one")
    work.kill()
    work.wait()
    # what the last windows held goes out with the next flushes; how soon
    # depends on the agent's backoff and the receiver's speed, not on a sleep
    t_settle = time.time()
    missing = rl.wait_delivered(store, [good], 180)
    local = rl.local_files(store)
    print(f"delivered everything {time.time() - t_settle:.1f}s after the workload stopped")
    check(local and not missing, "every profile produced during the hang is delivered",
          f"{len(missing)} of {len(local)} missing")
    rc, took = agent.stop()
    check(rc == 0, "agent exits 0", f"rc={rc}")

    # SIGTERM while the store hangs, default timeout (10 s per attempt, 30 s
    # with retries): still out within 5 s, the window spooled
    hang2 = rl.Rcv(os.path.join(d, "rcv-hang2"), rl.free_port(), "--hang")
    work = subprocess.Popen([busy, "0"])
    spool2 = os.path.join(d, "spool2")
    cfg2 = rl.write_config(os.path.join(d, "b.yaml"), remote=f"127.0.0.1:{hang2.port}",
                           spool=spool2, timeout="10s",
                           targets=f"targets:\n  - pids: [{work.pid}]\n")
    agent = pptest.Agent(cfg2, os.path.join(d, "agent2.log"))
    rl.wait_for(lambda: len(hang2.calls()) > 0, 15)
    time.sleep(1.0)
    rc, took = agent.stop(signal.SIGTERM)
    check(rc == 0 and took < 5, "SIGTERM while the store hangs (timeout 10s, a call in flight): exit 0 in < 5 s",
          f"rc={rc} took={took:.1f}s")
    check(len(rl.spool_files(spool2)) > 0, "the last window went to the spool")
    hang2.stop()
finally:
    if agent and agent.p.poll() is None:
        agent.p.kill()
    if work.poll() is None:
        work.kill()
    hang.stop()
    if good:
        good.stop()
done()
