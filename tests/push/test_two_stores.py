"""remote_store as a list (issue 13): one agent, real BPF on a real Go program,
pushing to a Parca receiver (tests/lib/receiver.py, its own process so it can
be stopped and started again on the same port) and a Pyroscope receiver
(tests/lib/pyroscope_receiver.py) at once.

1. Both up: each gets CPU and heap profiles in its own protocol's form
   (Parca: parca_agent, samples/count, no service_name; Pyroscope:
   process_cpu, cpu/nanoseconds, service_name); /metrics counts deliveries
   per store (store="...").
2. Pyroscope answering UNAVAILABLE for 8 s: Parca gets every window, the
   Pyroscope profiles wait in spool/pyro and are replayed: every window of
   the outage reaches Pyroscope (a window has the same time in both
   encodings, so Parca's copy is the count).
3. The Parca receiver stopped for a while: Pyroscope keeps receiving every
   CPU window (no gap in its profiles' times), Parca's profiles go to its own
   spool directory (spool/<name>), Pyroscope's stays empty.
4. The Parca receiver back: its spool is replayed; every profile the agent
   handed over (its local_store copy) reached Parca, by content: none lost.
5. The same with a Parca that accepts connections and never answers (its
   calls time out): Pyroscope still gets every window; none lost after.
6. SIGHUP reloads the list config.

The waits are for conditions (bounded generously: the Python receiver
validates every profile and, on a loaded machine beside an ASan agent, can
take longer than remote_store.timeout per call, which the agent then
resends), never for fixed times, except the outages themselves.
"""
import gzip
import os
import signal
import time

import pptest
import receiver
import rellib as rl
from pptest import check, done, tmpdir
from pyroscope_receiver import PyroscopeReceiver

d = tmpdir()
gowork = rl.subprocess.Popen([rl.build_go("busyalloc", d), "0"])
FREQ = 49
PERIOD = 1_000_000_000 // FREQ
parca_port = rl.free_port()
PARCA_NAME = f"parca-127.0.0.1_{parca_port}"  # the default name: protocol-address
spool = os.path.join(d, "spool")
store = os.path.join(d, "store")


def by_name(series, name):
    return [s for s in series if s["labels"].get("__name__") == name]


def parca_cpu(rcvs):
    return [s for r in rcvs for s in by_name(r.series(), "parca_agent")]


def parca_windows(rcvs, t0, t1):
    """Sorted distinct time_nanos of the Parca CPU profiles of windows that
    started between t0 and t1 (seconds)."""
    pb = receiver.load_protos()[0]
    out = set()
    for r in rcvs:
        for s in by_name(r.series(), "parca_agent"):
            for f in s["files"]:
                with open(os.path.join(r.out, f), "rb") as fh:
                    p = pb.Profile.FromString(gzip.decompress(fh.read()))
                if t0 <= p.time_nanos / 1e9 <= t1:
                    out.add(p.time_nanos)
    return sorted(out)


rcv1 = rl.Rcv(os.path.join(d, "parca1"), parca_port)
rcvs = [rcv1]
pyro = PyroscopeReceiver(os.path.join(d, "pyro")).start()
agent = None
try:
    cfg = os.path.join(d, "two.yaml")
    rl.write_config(cfg, spool=spool, store=store, freq=FREQ, interval="1s",
                    go_heap="{interval: 2s}", targets=f"targets:\n  - pids: [{gowork.pid}]\n",
                    extra="remote_store:\n"
                    f"  - address: \"127.0.0.1:{parca_port}\"\n    insecure: true\n"
                    # the Python receiver validates every profile: on a busy
                    # machine a call can take longer than 10 s, and resends
                    # would only add to its backlog
                    "    timeout: 60s\n"
                    f"  - name: pyro\n    address: \"{pyro.address}\"\n"
                    "    protocol: pyroscope\n    insecure: true\n")
    agent = pptest.Agent(cfg, os.path.join(d, "agent.log"))
    check(agent.started and f"{PARCA_NAME}=127.0.0.1:{parca_port}" in agent.started and
          "remote_protocol=parca/grpc,pyroscope/grpc" in agent.started,
          "the start line names both stores", str(agent.started))

    # ---- 1. both up --------------------------------------------------------
    rl.wait_for(lambda: len(by_name(pyro.series(), "process_cpu")) >= 3 and
                len(parca_cpu([rcv1])) >= 3 and by_name(pyro.series(), "memory") and
                by_name(rcv1.series(), "memory"), 60, 0.2)
    pcpu = parca_cpu([rcv1])
    ycpu = by_name(pyro.series(), "process_cpu")
    check(len(pcpu) >= 3 and len(ycpu) >= 3, "both stores receive CPU profiles",
          f"parca {len(pcpu)}, pyroscope {len(ycpu)}")
    check(by_name(rcv1.series(), "memory") and by_name(pyro.series(), "memory"),
          "both stores receive heap profiles")
    check(not by_name(rcv1.series(), "process_cpu") and
          not by_name(pyro.series(), "parca_agent"),
          "each store gets only its own protocol's CPU encoding")
    check(all("service_name" not in s["labels"] for s in rcv1.series()),
          "Parca series carry no service_name")
    check(all(s["labels"].get("service_name") == "busyalloc" for s in pyro.series()),
          "every Pyroscope series has service_name",
          str({s["labels"].get("service_name") for s in pyro.series()}))
    check(all(s["sample_types"] == [["cpu", "nanoseconds"]] for s in ycpu),
          "Pyroscope CPU: cpu/nanoseconds", str(ycpu[0]["sample_types"]))
    p = pyro.profile(ycpu[0])
    check(all(v % PERIOD == 0 for smp in p.sample for v in smp.value),
          "Pyroscope CPU values are samples x period")
    m = agent.metrics()
    check(m.get(f'pushprof_profiles_delivered_total{{store="{PARCA_NAME}"}}', 0) >= 3 and
          m.get('pushprof_profiles_delivered_total{store="pyro"}', 0) >= 3,
          "/metrics: deliveries per store",
          str({k: v for k, v in m.items() if "delivered" in k}))

    # ---- 2. Pyroscope down (UNAVAILABLE) while Parca is up -----------------
    ydir = os.path.join(spool, "pyro")
    pdir = os.path.join(spool, PARCA_NAME)
    t_out = time.time()
    pyro.outage(8)
    rl.wait_for(lambda: len(rl.spool_files(ydir)) >= 2, 30, 0.2)
    check(len(rl.spool_files(ydir)) >= 2 and not rl.spool_files(pdir),
          "Pyroscope's profiles are spooled in its own directory, Parca's is empty",
          f"{len(rl.spool_files(ydir))} in {ydir}, {len(rl.spool_files(pdir))} in {pdir}")
    time.sleep(max(0, t_out + 9 - time.time()))
    rl.wait_for(lambda: not rl.spool_files(ydir), 120, 0.5)
    t_back = time.time()
    check(not rl.spool_files(ydir), "Pyroscope's spool is replayed once it is back")
    # the same window has the same time in both encodings: every window of
    # the outage that Parca got (no gap), Pyroscope got too, after it
    pw = parca_windows([rcv1], t_out, t_back)

    def pyro_windows():
        return {s["time_nanos"] for s in by_name(pyro.series(), "process_cpu")}
    # the last windows may still be on their way (each store is flushed on
    # its own)
    rl.wait_for(lambda: not set(pw) - pyro_windows(), 60, 0.5)
    yw = pyro_windows()
    gaps = [(b - a) / 1e9 for a, b in zip(pw, pw[1:])]
    check(len(pw) >= 6 and max(gaps) < 3.5, "Parca gets every window while Pyroscope is down",
          f"{len(pw)} windows, largest gap {max(gaps or [0]):.1f} s")
    check(pw and not set(pw) - yw, "every window of the outage reached Pyroscope (none lost)",
          f"{len(set(pw) - yw)} of {len(pw)} missing")
    check(any(c["status"] == "UNAVAILABLE" for c in pyro.calls()), "the outage was met")
    print(f"Pyroscope outage: {len(pw)} windows at Parca, all at Pyroscope after "
          f"{t_back - t_out:.1f} s")

    # ---- 3. Parca down -----------------------------------------------------
    rcv1.stop()
    t_down = time.time()
    rl.wait_for(lambda: len(rl.spool_files(pdir)) >= 3, 40, 0.2)
    time.sleep(6)
    m = agent.metrics()
    t_up = time.time()

    def pyro_during(t0, t1):
        return [s for s in by_name(pyro.series(), "process_cpu")
                if t0 < s["time_nanos"] / 1e9 <= t1]
    # the windows up to now may still be on their way (a busy host)
    rl.wait_for(lambda: len(pyro_during(t_down, t_up)) >= (t_up - t_down) / 2, 30, 0.5)
    ycpu = by_name(pyro.series(), "process_cpu")
    during = pyro_during(t_down, t_up)
    check(len(during) >= (t_up - t_down) / 2,
          "Pyroscope keeps receiving while Parca is down",
          f"{len(during)} CPU profiles in {t_up - t_down:.0f} s")
    times = sorted({s["time_nanos"] for s in ycpu})
    gaps = [(b - a) / 1e9 for a, b in zip(times, times[1:])]
    check(gaps and max(gaps) < 3.5, "no gap in Pyroscope's CPU windows",
          f"largest gap {max(gaps or [0]):.1f} s")
    check(len(rl.spool_files(pdir)) >= 3 and not rl.spool_files(ydir),
          "Parca's profiles are spooled in its own directory, Pyroscope's is empty",
          f"{len(rl.spool_files(pdir))} in {pdir}, {len(rl.spool_files(ydir))} in {ydir}")
    check(not rl.spool_files(spool), "nothing spooled at the top of spool.directory")
    check(m.get(f'pushprof_spool_files{{store="{PARCA_NAME}"}}', 0) >= 1 and
          m.get('pushprof_spool_files{store="pyro"}', 0) == 0,
          "/metrics: spool files per store", str({k: v for k, v in m.items() if "spool" in k}))

    # ---- 4. Parca back: the spool replays ---------------------------------
    rcv2 = rl.Rcv(os.path.join(d, "parca2"), parca_port)
    rcvs.append(rcv2)
    missing = rl.wait_delivered(store, [rcv1, rcv2], 300)
    check(not missing, "every profile handed over reached Parca (none lost)",
          f"{len(missing)} of {len(rl.local_files(store))} missing")
    print(f"Parca outage: {len(during)} Pyroscope windows meanwhile, "
          f"{len(rl.local_files(store))} profiles handed over, all at Parca")
    rl.wait_for(lambda: not rl.spool_files(pdir), 60, 0.5)
    check(not rl.spool_files(pdir), "Parca's spool is empty once it is back")
    check(len(rl.local_files(store)) >= 10, "local_store holds what was handed over",
          f"{len(rl.local_files(store))} profiles")

    # ---- 5. Parca hangs (accepts, never answers): the same ------------------
    rcv2.stop()
    rcv3 = rl.Rcv(os.path.join(d, "parca3"), parca_port, "--hang")
    rcvs.append(rcv3)
    hung = rl.wait_for(lambda: any(c["status"] == "HANG" for c in rcv3.calls()), 90, 0.5)
    check(hung, "Parca's calls hang")
    t_hang = time.time()
    time.sleep(8)
    rl.wait_for(lambda: len(pyro_during(t_hang, t_hang + 8)) >= 5, 30, 0.5)
    ycpu = by_name(pyro.series(), "process_cpu")
    during = pyro_during(t_hang, time.time())
    times = sorted({s["time_nanos"] for s in ycpu})
    gaps = [(b - a) / 1e9 for a, b in zip(times, times[1:])]
    check(len(during) >= 5 and max(gaps) < 3.5,
          "Pyroscope gets every window while Parca hangs",
          f"{len(during)} CPU profiles in {time.time() - t_hang:.0f} s, largest gap "
          f"{max(gaps):.1f} s")
    rcv3.stop()
    rcv4 = rl.Rcv(os.path.join(d, "parca4"), parca_port)
    rcvs.append(rcv4)
    missing = rl.wait_delivered(store, [rcv1, rcv2, rcv4], 300)
    check(not missing, "after the hang too, every profile reached Parca (none lost)",
          f"{len(missing)} of {len(rl.local_files(store))} missing")

    # ---- 6. SIGHUP reloads the list ---------------------------------------
    agent.p.send_signal(signal.SIGHUP)
    again = agent.wait_log("agent started", 30, after=1)
    check(again and "remote_store=" in again and "pyro=" in again, "SIGHUP: restarted with "
          "both stores", str(again))
    n0 = len(by_name(pyro.series(), "process_cpu"))
    rl.wait_for(lambda: len(by_name(pyro.series(), "process_cpu")) > n0 + 1, 20, 0.2)
    check(len(by_name(pyro.series(), "process_cpu")) > n0 + 1, "pushing again after the reload")
    rc, _ = agent.stop()
    check(rc == 0, "agent exits 0", agent.log()[-1500:])
    refused = [c for c in pyro.refusals() if c["status"] != "UNAVAILABLE"]
    check(not refused, "Pyroscope refused nothing but the outage's UNAVAILABLE",
          str(refused[:2]))
finally:
    if agent and agent.p.poll() is None:
        agent.stop()
    for r in rcvs:
        r.stop()
    pyro.stop()
    gowork.kill()
    gowork.wait()
done()
