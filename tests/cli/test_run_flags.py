"""`pushprof run` as a Parca Agent user would start it: without a
config file it runs on the built-in defaults (config/pushprof.yaml as
shipped); Parca Agent's flag names override the file, meet the same checks
as the keys (a bad value exits 2 naming the flag) and survive a SIGHUP
reload; the start line names where profiles go.

Real agent, real BPF, the real test receiver on loopback: the node label a
flag sets is the one on the profiles that arrive."""
import glob
import gzip
import os
import re
import signal
import subprocess
import time

import pptest
import rellib as rl
from pptest import PUSHPROF, SOURCE_DIR, check, done, tmpdir

d = tmpdir("pushprof-cli-flags-")
busy = subprocess.Popen(["/bin/sh", "-c", "while :; do :; done"])


def run(*args, timeout=60):
    return subprocess.run([PUSHPROF, "run", *args], capture_output=True, text=True,
                          timeout=timeout)


try:
    # 1. bad flags: exit 2, the message names the flag
    for args, want in ((["--remote-store-insecure=maybe"], "--remote-store-insecure:"),
                       (["--http-address", "nowhere"], "--http-address:"),
                       (["--log-level", "loud"], "--log-level:"),
                       (["--node"], "--node needs a value"),
                       (["--remote-store-adress", "x:1"], "unknown argument"),
                       (["--config", os.path.join(d, "absent.yaml")], "cannot open config"),
                       (["--profiling-cpu-sampling-frequency", "5000"],
                        "--profiling-cpu-sampling-frequency:"),
                       # a token in argv is refused, never used (every user reads cmdline)
                       (["--remote-store-bearer-token", "s3cr3t"],
                        "--remote-store-bearer-token is not accepted")):
        r = run("--duration", "1s", *args)
        check(r.returncode == 2 and want in r.stderr, f"run {' '.join(args)}: exit 2, '{want}'",
              f"rc={r.returncode} {r.stderr[-300:]}")

    # 1e. nowhere to put profiles: neither remote_store.address nor
    # local_store.directory is a config error (exit 2, FILE:LINE:COL, both
    # keys and both flags named), never a run that drops every profile; a
    # flag that names a store fixes it, one that turns the last store off
    # is named in the error
    nowhere = "nowhere to put profiles: remote_store.address and local_store.directory"
    fixes = "--remote-store-address or --local-store"
    none = rl.write_config(os.path.join(d, "none.yaml"), cpu=False)
    r = run("--config", none, "--duration", "2s")
    check(r.returncode == 2 and f"pushprof: {none}:1:1: {nowhere}" in r.stderr
          and fixes in r.stderr and "agent started" not in r.stderr,
          "no store: exit 2 before starting, naming both keys and both flags",
          f"rc={r.returncode} {r.stderr[-500:]}")
    r = subprocess.run([PUSHPROF, "check-config", "--no-file-checks", none],
                       capture_output=True, text=True, timeout=30)
    check(r.returncode == 2 and f"{none}:1:1: {nowhere}" in r.stderr and r.stdout == "",
          "check-config refuses it the same way", f"rc={r.returncode} {r.stderr[-500:]}")
    fstore = os.path.join(d, "flag-store")
    # (and --flag=value works for run's own flags as for the others)
    r = run(f"--config={none}", "--duration=2s", "--local-store", fstore)
    started = [ln for ln in r.stderr.splitlines() if "agent started" in ln]
    check(r.returncode == 0 and started and f"local_store={fstore}" in started[0]
          and "remote_store=none" in started[0],
          "--local-store gives it a destination", f"rc={r.returncode} {r.stderr[-500:]}")
    faddr = f"127.0.0.1:{rl.free_port()}"
    r = run("--config", none, "--duration", "2s", "--remote-store-address", faddr,
            "--remote-store-insecure")
    started = [ln for ln in r.stderr.splitlines() if "agent started" in ln]
    check(r.returncode == 0 and started and f"remote_store={faddr}" in started[0]
          and "local_store=none" in started[0],
          "--remote-store-address gives it a destination", f"rc={r.returncode} {r.stderr[-500:]}")
    # 1f. remote_store as a list: a --remote-store-* flag cannot say which
    # store it is for, so it is refused (naming the flag and the list)
    lst = rl.write_config(os.path.join(d, "list.yaml"), cpu=False,
                          extra=f"remote_store:\n  - address: \"{faddr}\"\n"
                          "  - {address: \"127.0.0.1:1\", protocol: pyroscope}\n")
    for flag, val in (("--remote-store-address", "x:1"), ("--remote-store-insecure", None)):
        r = run("--config", lst, "--duration", "2s", flag, *([val] if val else []))
        check(r.returncode == 2 and f"{flag} sets remote_store." in r.stderr
              and f"remote_store in {lst}:" in r.stderr and "is a list of stores" in r.stderr
              and "agent started" not in r.stderr,
              f"{flag} with a list of stores: exit 2, naming the flag",
              f"rc={r.returncode} {r.stderr[-500:]}")
    has = rl.write_config(os.path.join(d, "has-store.yaml"), cpu=False,
                          store=os.path.join(d, "s-has"))
    r = run("--config", has, "--duration", "2s", "--local-store", "")
    check(r.returncode == 2 and f"--local-store: {nowhere}" in r.stderr,
          "--local-store \"\" turning off the only store: exit 2, naming the flag",
          f"rc={r.returncode} {r.stderr[-500:]}")
    # SIGHUP to a file without a store: rejected, the running config stays
    hup = rl.write_config(os.path.join(d, "hup-store.yaml"), cpu=False,
                          store=os.path.join(d, "s-hup"))
    agent = pptest.Agent(hup, os.path.join(d, "hup-store.log"))
    try:
        check(agent.started is not None, "agent with a local store starts", agent.log()[-500:])
        rl.write_config(hup, cpu=False)
        agent.p.send_signal(signal.SIGHUP)
        rej = agent.wait_log("config reload rejected", 30)
        check(rej is not None and "nowhere to put profiles" in rej
              and agent.p.poll() is None and agent.count("agent started") == 1,
              "SIGHUP with no store: reload rejected, the agent goes on", rej)
    finally:
        rc, _ = agent.stop()
        check(rc == 0, "and stops cleanly", rc)

    # 1a. help: `pushprof help run` is `pushprof run --help`, which names every flag
    h1 = subprocess.run([PUSHPROF, "help", "run"], capture_output=True, text=True, timeout=30)
    h2 = subprocess.run([PUSHPROF, "run", "--help"], capture_output=True, text=True, timeout=30)
    check(h1.returncode == 0 and h1.stdout == h2.stdout and all(
        f in h1.stdout for f in ("--config", "--duration", "--node", "--remote-store-address",
                                 "--remote-store-insecure", "--remote-store-bearer-token-file",
                                 "--local-store", "--http-address", "--log-level")),
          "pushprof help run = run --help, every flag described", h1.stdout[-400:])
    # one table describes them all: each flag's own line, once
    heads = [ln.split()[0].split("[")[0] for ln in h1.stdout.splitlines()
             if ln.startswith("  --")]
    check(len(heads) == len(set(heads)) == 15, "each flag described once", heads)

    # 1b. the HTTP port is taken: exit 1 and say so, unless http_optional
    import socket
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        tport = taken.getsockname()[1]
        cfgp = rl.write_config(os.path.join(d, "taken.yaml"), cpu=False,
                               http=f"127.0.0.1:{tport}", store=os.path.join(d, "s0"))
        r = run("--config", cfgp, "--duration", "2s")
        check(r.returncode == 1 and f"cannot listen on 127.0.0.1:{tport}" in r.stderr
              and "http_optional: true" in r.stderr,
              "HTTP port taken: exit 1, naming the address and the way out", r.stderr[-500:])
        with open(cfgp, "a") as f:
            f.write("http_optional: true\n")
        r = run("--config", cfgp, "--duration", "2s")
        check(r.returncode == 0 and "http endpoint not started" in r.stderr,
              "with http_optional: true it warns and runs", r.stderr[-500:])

    # 1c. files the config names: every unreadable one reported, by
    # check-config (unless --no-file-checks) and by run
    fifo = os.path.join(d, "ca.fifo")
    os.mkfifo(fifo)
    good = os.path.join(d, "snap-token")
    with open(good, "w") as f:
        f.write("t0ken\n")
    cfgf = rl.write_config(os.path.join(d, "files.yaml"), cpu=False,
                           store=os.path.join(d, "s1"),
                           extra=(f"remote_store: {{address: \"127.0.0.1:1\", ca_file: {fifo}, "
                                  f"bearer_token_file: {d}/no-such-token}}\n"
                                  f"snapshot_api: {{bearer_token_file: {good}}}\n"))
    r = subprocess.run([PUSHPROF, "check-config", cfgf], capture_output=True, text=True,
                       timeout=30)
    check(r.returncode == 2 and f"remote_store.ca_file {fifo}: not a regular file" in r.stderr
          and f"remote_store.bearer_token_file {d}/no-such-token: No such file" in r.stderr
          and "snapshot_api" not in r.stderr,
          "check-config reports every unreadable file, and only those", r.stderr[-600:])
    r = subprocess.run([PUSHPROF, "check-config", "--no-file-checks", cfgf],
                       capture_output=True, text=True, timeout=30)
    check(r.returncode == 0, "--no-file-checks: lint only", r.stderr[-300:])
    t0 = time.time()
    r = run("--config", cfgf, "--duration", "2s")
    check(r.returncode == 2 and "no-such-token" in r.stderr and "not a regular file" in r.stderr
          and time.time() - t0 < 10,
          "run refuses to start without them (and does not block on the FIFO)", r.stderr[-600:])

    # 1d. delivery errors say what to do
    hrcv = rl.Rcv(os.path.join(d, "hrcv"), rl.free_port())
    trcv = rl.Rcv(os.path.join(d, "trcv"), rl.free_port(), "--token", "right")
    wrong = os.path.join(d, "wrong-token")
    with open(wrong, "w") as f:
        f.write("wrong\n")
    try:
        for what, extra, want in (
                ("TLS against a plaintext server",
                 f"remote_store: {{address: \"127.0.0.1:{hrcv.port}\", timeout: 2s}}\n",
                 "set remote_store.insecure: true"),
                ("a token the server refuses",
                 f"remote_store: {{address: \"127.0.0.1:{trcv.port}\", insecure: true, "
                 f"bearer_token_file: {wrong}}}\n",
                 "refused the token from remote_store.bearer_token_file"),
                ("no token where one is needed",
                 f"remote_store: {{address: \"127.0.0.1:{trcv.port}\", insecure: true}}\n",
                 "no credential is configured"),
                ("nothing listening",
                 f"remote_store: {{address: \"127.0.0.1:{rl.free_port()}\", insecure: true, "
                 f"timeout: 2s}}\n",
                 "cannot connect to remote_store.address")):
            c = rl.write_config(os.path.join(d, "hint.yaml"), cpu=True, interval="1s",
                                targets=f"targets:\n  - pids: [{busy.pid}]\n", extra=extra)
            # 8 s: a loaded host's ASan start-up (BPF load, symbols) may
            # take the first seconds before any window is pushed
            r = run("--config", c, "--duration", "8s")
            errs = [ln for ln in r.stderr.splitlines() if "flush_error=" in ln]
            # gRPC may log the handshake's reason just after the first call
            # failed: a later window's error carries it
            check(any(want in e for e in errs), f"delivery error hint: {what}",
                  (errs[-1] if errs else r.stderr)[-700:])
    finally:
        hrcv.stop()
        trcv.stop()

    # 1f. Parca Agent's other names: --config-path, --local-store-directory,
    # --profiling-duration, --profiling-cpu-sampling-frequency
    pstore = os.path.join(d, "parca-store")
    r = run("--config-path", none, "--local-store-directory", pstore, "--profiling-duration",
            "1s", "--profiling-cpu-sampling-frequency", "49", "--duration", "2s")
    st = [ln for ln in r.stderr.splitlines() if "agent started" in ln]
    check(r.returncode == 0 and st and f"local_store={pstore}" in st[0]
          and "frequency_hz=49 " in st[0] and "interval_ms=1000 " in st[0]
          and f"config={none}" in st[0],
          "Parca Agent's flag names set the same keys", (st or [r.stderr[-800:]])[0])

    # 2. no config file: the built-in defaults (in a mount namespace where
    # /etc/pushprof is empty, whatever this machine has installed there)
    store = os.path.join(d, "store")
    port = rl.free_port()
    wrap = []
    if os.path.isdir("/etc/pushprof"):
        wrap = ["unshare", "-m", "sh", "-c",
                'mount -t tmpfs none /etc/pushprof && exec "$@"', "sh"]
    a = pptest.Agent(None, wrap=wrap, args=["--duration", "4s", "--local-store", store,
                                            "--node", "flagnode", "--http-address",
                                            f"127.0.0.1:{port}", "--remote-store-address", ""])
    rc, _ = a.wait(90)
    started = [a.started] if a.started else []
    check(rc == 0 and "no config file: running on the built-in defaults" in a.log(),
          "no config file: runs on the built-in defaults", a.log()[-1500:])
    check(started and "node=flagnode" in started[0] and f"local_store={store}" in started[0]
          and "remote_store=none" in started[0] and f"http_port={port}" in started[0]
          and 'config="built-in defaults (config/pushprof.yaml)"' in started[0],
          "start line: the flags' node, destinations and the built-in config", started[:1])
    # the shipped file's values: its frequency and interval
    shipped = open(os.path.join(SOURCE_DIR, "config", "pushprof.yaml")).read()
    hz = re.search(r"^\s*frequency_hz:\s*(\d+)", shipped, re.M).group(1)
    iv = re.search(r"^cpu:\n(?:\s+.*\n)*?\s+interval:\s*(\d+)s", shipped, re.M).group(1)
    check(started and f"frequency_hz={hz} " in started[0]
          and f"interval_ms={int(iv) * 1000} " in started[0],
          f"built-in values are the shipped file's ({hz} Hz, {iv} s)", started[:1])
    files = glob.glob(os.path.join(store, "**", "*.pb.gz"), recursive=True)
    ok = bool(files)
    for f in files[:3]:
        with gzip.open(f) as g:
            ok = ok and len(g.read()) > 0
    check(ok, "profiles written to the --local-store directory", files[:3])

    # 3. flags over a file, with a real receiver; kept across SIGHUP
    rport = rl.free_port()
    rcv = rl.Rcv(os.path.join(d, "rcv"), rport)
    cfg = rl.write_config(os.path.join(d, "a.yaml"), cpu=True, interval="1s",
                          targets=f"targets:\n  - pids: [{busy.pid}]\n",
                          remote="127.0.0.1:1")  # nothing listens: the flag must win
    check("node: rel-node" in open(cfg).read(), "the file names another node")
    agent = pptest.Agent(cfg, os.path.join(d, "agent.log"),
                     args=("--node", "flagnode", "--remote-store-address", f"127.0.0.1:{rport}",
                           "--remote-store-insecure"))
    try:
        check(agent.started and "node=flagnode" in agent.started
              and f"remote_store=127.0.0.1:{rport}" in agent.started,
              "flags override the file's node and remote store", agent.started)

        def nodes():
            return {s["labels"].get("node") for s in rcv.series()}
        t_end = time.time() + 30
        while time.time() < t_end and not nodes():
            time.sleep(0.5)
        check(nodes() == {"flagnode"}, "profiles arrive at the flag's store with the flag's node",
              nodes())
        # reload with a changed file: the flags still apply
        with open(cfg, "a") as f:
            f.write("external_labels: {reloaded: \"yes\"}\n")
        agent.p.send_signal(signal.SIGHUP)
        again = agent.wait_log("agent started", 30, after=1)
        check(again is not None and "node=flagnode" in again
              and f"remote_store=127.0.0.1:{rport}" in again,
              "after SIGHUP the flags still override the file", again)
        n0 = len(rcv.series())
        t_end = time.time() + 30
        while time.time() < t_end and not any(
                s["labels"].get("reloaded") for s in rcv.series()[n0:]):
            time.sleep(0.5)
        new = rcv.series()[n0:]
        check(any(s["labels"].get("reloaded") == "yes" for s in new)
              and all(s["labels"].get("node") == "flagnode" for s in new),
              "profiles after the reload: the file's new label, the flag's node",
              [s["labels"] for s in new[:3]])
    finally:
        agent.stop()
        rcv.stop()
finally:
    busy.kill()
    busy.wait()
done()
