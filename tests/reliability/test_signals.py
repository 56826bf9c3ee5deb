"""Signals against the real agent.

SIGTERM and SIGINT: exit 0 within 5 s, the partial window (10 s window cut
after ~2 s) is flushed to the receiver, the BPF program is gone afterwards.
SIGHUP: an invalid new config is rejected with its FILE:LINE:COL error and
the agent keeps working on the old one; a valid one takes effect (the new
external label shows up in the next profiles). A storm of SIGHUPs (every
50 ms for 10 s) and SIGHUP-then-SIGTERM leave the agent alive, then exiting
0, with every profile delivered."""
import os
import re
import signal
import subprocess
import time

import pptest
import rellib as rl
from pptest import check, done, run, tmpdir

d = tmpdir("pushprof-rel-signals-")
busy = rl.build_go("busyalloc", d)
work = subprocess.Popen([busy, "0"])
rcv = rl.Rcv(os.path.join(d, "rcv"), rl.free_port())
targets = f"targets:\n  - pids: [{work.pid}]\n"
agent = None
try:
    for sig in (signal.SIGTERM, signal.SIGINT):
        name = signal.Signals(sig).name
        before = len(rcv.series())
        cfg = rl.write_config(os.path.join(d, f"{name}.yaml"), remote=f"127.0.0.1:{rcv.port}",
                              interval="10s", targets=targets, timeout="5s")
        t_start = time.time()
        agent = pptest.Agent(cfg, os.path.join(d, f"{name}.log"))
        m = re.search(r"bpf_prog_id=(\d+)", agent.started or "")
        prog = m.group(1) if m else None
        check(prog and run(["bpftool", "prog", "show", "id", prog]).returncode == 0,
              f"{name}: BPF program {prog} loaded while running")
        code, body = agent.get("/readyz")
        check(code == 503 and "first" in body,
              f"{name}: /readyz 503 until the first window is built", f"{code} {body}")
        check(agent.get("/healthz")[0] == 200, f"{name}: /healthz 200 meanwhile")
        time.sleep(2)
        ran = time.time() - t_start
        rc, took = agent.stop(sig)
        print(f"{name}: rc={rc} in {took:.2f}s")
        check(rc == 0, f"{name}: exit 0", f"rc={rc}")
        check(took < 5, f"{name}: exits within 5 s", f"{took:.1f}s")
        new = rcv.series()[before:]
        # at-least-once: a request accepted just after the agent's deadline
        # comes again, so count distinct profiles
        distinct = {rl.sha(open(os.path.join(rcv.out, s["files"][0]), "rb").read())
                    for s in new}
        check(len(distinct) == 1, f"{name}: the partial window was pushed",
              f"{len(new)} series, {len(distinct)} distinct")
        if new:
            p = rl.decode(os.path.join(rcv.out, new[0]["files"][0]))
            # the window opens once the agent is up and ends at the signal:
            # 2 s of sleep at least, at most the whole run (slow on a busy machine)
            check(1.5e9 < p.duration_nanos < (ran + 1) * 1e9 and len(p.sample) > 0,
                  f"{name}: it covers the run (~2 s), with samples",
                  f"{p.duration_nanos / 1e9:.2f}s of {ran:.2f}s")
        show = run(["bpftool", "prog", "show", "id", prog]) if prog else None
        check(show is not None and show.returncode != 0,
              f"{name}: BPF program detached and unloaded", show.stdout if show else "")
        check("agent stopped" in agent.log(), f"{name}: 'agent stopped' logged")

    # SIGHUP
    path = os.path.join(d, "hup.yaml")
    base = dict(remote=f"127.0.0.1:{rcv.port}", interval="1s", targets=targets,
                http=f"127.0.0.1:{rl.free_port()}")
    rl.write_config(path, extra="external_labels: {gen: one}\n", **base)
    agent = pptest.Agent(path, os.path.join(d, "hup.log"))
    check(agent.wait_log('msg="cpu window"', 10, after=1) is not None, "SIGHUP: agent running")
    good = open(path).read()
    with open(path, "w") as f:
        f.write(good.replace("cpu: {", "cpu: {bogus_key: 1, "))
    nwin = len(agent.windows())
    agent.p.send_signal(signal.SIGHUP)
    rej = agent.wait_log("config reload rejected", 10)
    check(rej is not None and re.search(re.escape(path) + r":\d+:\d+: ", rej) is not None,
          "SIGHUP with an invalid config: rejected with FILE:LINE:COL", str(rej))
    print(rej)
    rl.wait_for(lambda: len(agent.windows()) >= nwin + 2, 30)
    check(len(agent.windows()) >= nwin + 2, "SIGHUP invalid: windows continue",
          f"{nwin} -> {len(agent.windows())}")
    check(agent.p.poll() is None and agent.get("/readyz")[0] == 200,
          "SIGHUP invalid: still running and ready")
    last = rcv.series()[-1]["labels"]
    check(last.get("gen") == "one", "SIGHUP invalid: the old config stays", str(last))

    with open(path, "w") as f:
        f.write(good.replace("gen: one", "gen: two"))
    n_before = len(rcv.series())
    agent.p.send_signal(signal.SIGHUP)
    check(agent.wait_log("config reloaded", 10) is not None, "SIGHUP valid: 'config reloaded'")
    rl.wait_for(lambda: any(s["labels"].get("gen") == "two" for s in rcv.series()[n_before:]),
                15)
    new = rcv.series()[n_before:]
    gens = [s["labels"].get("gen") for s in new]
    print(f"after the valid reload: gen labels {gens}")
    check("two" in gens, "SIGHUP valid: the new external label appears in the next profiles",
          str(gens))
    check(gens and gens[-1] == "two" and agent.p.poll() is None,
          "SIGHUP valid: still running with the new config")
    check(rl.wait_for(lambda: agent.get("/readyz")[0] == 200, 10),
          "SIGHUP valid: /readyz 200 after the restart")
    rc, took = agent.stop(signal.SIGTERM)
    check(rc == 0 and took < 5, "after reloads: SIGTERM exits 0 within 5 s",
          f"rc={rc} {took:.1f}s")

    # A SIGHUP storm (every 50 ms for 10 s, each one a valid reload) and
    # SIGHUP then SIGTERM at once: a signal that arrives while one run ends
    # and the next starts must wait for the next run, never take its default
    # action (exit 129, which systemd's Restart=on-failure takes for clean).
    # Every profile handed over is delivered, or spooled and delivered by
    # the next agent on the same spool.
    store, spool = os.path.join(d, "store-storm"), os.path.join(d, "spool-storm")
    path = os.path.join(d, "storm.yaml")
    rl.write_config(path, store=store, spool=spool, **base)
    agent = pptest.Agent(path, os.path.join(d, "storm.log"))
    check(agent.started is not None, "HUP storm: agent started")
    sent = 0
    t_end = time.time() + 10
    while time.time() < t_end and agent.p.poll() is None:
        agent.p.send_signal(signal.SIGHUP)
        sent += 1
        time.sleep(0.05)
    alive = agent.p.poll() is None
    reloads = agent.count("config reloaded")
    print(f"HUP storm: {sent} SIGHUPs, {reloads} reloads, alive={alive}, "
          f"rc={agent.p.returncode}")
    check(alive, "HUP storm: the agent survives 10 s of SIGHUP every 50 ms",
          f"rc={agent.p.returncode} after {sent} signals")
    check(reloads >= 2, "HUP storm: the agent reloaded", f"{reloads}")
    check(rl.wait_for(lambda: agent.get("/healthz")[0] == 200, 30),
          "HUP storm: /healthz 200 afterwards")
    # a loaded machine may finish no window while reloads keep restarting
    # the run: let one be handed over, so that there is something to deliver
    rl.wait_for(lambda: rl.local_files(store), 30)
    agent.p.send_signal(signal.SIGHUP)
    rc, took = agent.stop(signal.SIGTERM)
    check(rc == 0, "SIGHUP then SIGTERM at once: exit 0", f"rc={rc} in {took:.1f}s")
    if rl.spool_files(spool):  # undelivered at the stop: the next agent sends them
        a2 = pptest.Agent(rl.write_config(os.path.join(d, "drain.yaml"), spool=spool,
                                      remote=f"127.0.0.1:{rcv.port}", cpu=False,
                                      go_heap="{enabled: true, interval: 0s}"),
                      os.path.join(d, "drain.log"))
        rl.wait_for(lambda: not rl.spool_files(spool), 60)
        a2.stop()
    missing = rl.wait_delivered(store, [rcv], 30)
    n = len(rl.local_files(store))
    check(n > 0 and not missing, "HUP storm: every profile handed over was delivered",
          f"{len(missing)} of {n} missing")
finally:
    if agent and agent.p.poll() is None:
        agent.p.kill()
    work.kill()
    rcv.stop()
done()
