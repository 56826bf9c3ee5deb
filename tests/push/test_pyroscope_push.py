"""`pushprof run` with remote_store.protocol: pyroscope, end to end:
the real agent and BPF sampler on a real Go program, pushing to the
Pyroscope-rules receiver (tests/lib/pyroscope_receiver.py), which refuses
what Pyroscope refuses.

1. gRPC, multi-tenant, basic auth, a 3 s outage in the middle:
   - CPU series are process_cpu with sample type cpu/nanoseconds (values
     samples x period); heap series are memory with Go's four sample types;
   - service_name is derived (comm) and no per-thread series are made;
   - tenant and credentials arrive; the password is in no log line, /metrics
     or the agent's command line;
   - what the outage held back is delivered after it; no other refusal.
2. Connect over HTTP, the address given as a URL (as Alloy's
   pyroscope.write takes it), service_name from external_labels, thread
   labels switched on: accepted as such.
3. Connect over HTTP to a Pyroscope whose clock is 2 h ahead: every profile
   is older than its ingestion window and refused (INVALID_ARGUMENT); the
   agent drops them with a log line and counts them
   (pushprof_profiles_dropped_total{cause="refused"}), never retries them,
   and leaves nothing in its spool.
4. A refused basic-auth password and TLS against a plaintext Connect port:
   the log line says what to fix, without the password.
"""
import gzip
import os
import subprocess
import time

import pptest
import rellib as rl
from pptest import check, done, tmpdir
from pyroscope_receiver import PyroscopeReceiver

d = tmpdir()
PASSWORD = "pw-Zq8-never-logged"
pwfile = os.path.join(d, "pw")
with open(pwfile, "w") as f:
    f.write(PASSWORD + "\n")
os.chmod(pwfile, 0o600)
gowork = subprocess.Popen([rl.build_go("busyalloc", d), "0"])
FREQ = 49
PERIOD = 1_000_000_000 // FREQ


def config(name, remote, extra=""):
    path = os.path.join(d, name + ".yaml")
    spool = os.path.join(d, name + "-spool")
    store = os.path.join(d, name + "-store")
    rl.write_config(path, spool=spool, store=store, freq=FREQ, interval="1s",
                    go_heap="{interval: 1s}", targets=f"targets:\n  - pids: [{gowork.pid}]\n",
                    extra="remote_store:\n" + remote + extra)
    return path, spool, store


def sample_types(p):
    return [(p.string_table[t.type], p.string_table[t.unit]) for t in p.sample_type]


def by_name(series, name):
    return [s for s in series if s["labels"].get("__name__") == name]


try:
    # ---- 1. gRPC, tenant, basic auth, an outage ---------------------------
    rcv = PyroscopeReceiver(os.path.join(d, "r1"), tenant_required=True,
                            basic=("alice", PASSWORD)).start()
    cfg, spool, store = config("grpc", f"  address: \"{rcv.address}\"\n  protocol: pyroscope\n"
                               f"  insecure: true\n  tenant_id: team-a\n"
                               f"  basic_auth: {{username: alice, password_file: {pwfile}}}\n")
    agent = pptest.Agent(cfg, os.path.join(d, "grpc.log"))
    check(agent.started and "remote_protocol=pyroscope/grpc" in agent.started,
          "start line names the protocol", str(agent.started))
    rl.wait_for(lambda: len(rcv.series()) >= 2, 20, 0.2)
    rcv.outage(3)
    time.sleep(4.5)
    rl.wait_for(lambda: len(by_name(rcv.series(), "memory")) >= 2, 20, 0.2)
    m = agent.metrics()
    with open(f"/proc/{agent.pid}/cmdline", "rb") as f:
        argv = f.read().decode(errors="replace")
    rc, _ = agent.stop()
    log = agent.log()
    check(rc == 0, "agent exits 0", f"rc={rc} {log[-1500:]}")
    calls = rcv.calls()
    series = rcv.series()
    check(calls and all(c["auth"] == "ok" and c["org_id"] == "team-a" for c in calls),
          "every call carries the tenant and the basic-auth credential",
          str([(c["auth"], c["org_id"]) for c in calls][:5]))
    check(all(s["tenant"] == "team-a" for s in rcv.series()), "stored under tenant team-a")
    bad = [c for c in rcv.refusals() if c["status"] != "UNAVAILABLE"]
    check(not bad, "no refusal but the outage's UNAVAILABLE", str(bad[:3]))
    check(any(c["status"] == "UNAVAILABLE" for c in calls), "the outage was met")
    local = rl.local_files(store)
    check(len(series) == len(local), "everything handed over is delivered after the outage",
          f"{len(series)} received, {len(local)} written locally")
    check(not rl.spool_files(spool), "the spool is empty at the end")

    cpu = by_name(series, "process_cpu")
    check(len(cpu) >= 3, "CPU series named process_cpu", f"{len(cpu)} of {len(series)}")
    cpu_ok = True
    for s in cpu:
        p = rcv.profile(s)
        vals = [v for smp in p.sample for v in smp.value]
        if (sample_types(p) != [("cpu", "nanoseconds")] or p.period != PERIOD or
                (p.string_table[p.period_type.type], p.string_table[p.period_type.unit])
                != ("cpu", "nanoseconds") or not vals or any(v % PERIOD for v in vals)):
            cpu_ok = False
            print("bad CPU profile:", sample_types(p), p.period, vals[:5])
    check(cpu and cpu_ok, "CPU: sample type cpu/nanoseconds, values samples x period")
    funcs = {p.string_table[f.name] for p in map(rcv.profile, cpu) for f in p.function}
    check("main.main" in funcs, "CPU: Go frames are named", str(sorted(funcs)[:10]))
    heap = by_name(series, "memory")
    check(heap and all(sample_types(rcv.profile(s)) ==
                       [("alloc_objects", "count"), ("alloc_space", "bytes"),
                        ("inuse_objects", "count"), ("inuse_space", "bytes")] for s in heap),
          "heap: memory with Go's four sample types", f"{len(heap)} heap series")
    check(all(s["labels"].get("service_name") == "busyalloc" for s in series),
          "service_name derived from comm on every series",
          str({s["labels"].get("service_name") for s in series}))
    stored = [ls for s in series for ls in s["stored"]]
    check(stored and not any("thread_id" in ls or "thread_name" in ls or "cpu" in ls
                             for ls in stored),
          "no per-thread or per-CPU series by default", str(stored[:2]))
    p0 = os.path.join(d, "cpu0.pb.gz")
    with open(p0, "wb") as f:
        f.write(gzip.compress(rcv.profile(cpu[0]).SerializeToString()))
    check(bool(pptest.pprof("-raw", p0)), "a received CPU profile parses (go tool pprof)")
    check(PASSWORD not in log and PASSWORD not in argv and
          not any(PASSWORD in k for k in m), "the password is in no log line, metric or argv")
    rcv.stop()

    # ---- 2. Connect over HTTP, service_name from the config, thread labels
    rcv = PyroscopeReceiver(os.path.join(d, "r2")).start()
    # the address as Alloy's pyroscope.write takes it: a URL
    cfg, spool, store = config("http", f"  address: \"http://127.0.0.1:{rcv.http_port}\"\n"
                               "  protocol: pyroscope\n",
                               "external_labels: {service_name: checkout}\n")
    with open(cfg) as f:
        text = f.read()
    with open(cfg, "w") as f:
        f.write(text.replace("interval: 1s}", "interval: 1s, thread_labels: true, cpu_label: true}",
                             1))
    agent = pptest.Agent(cfg, os.path.join(d, "http.log"))
    check(agent.started and "remote_protocol=pyroscope/http" in agent.started,
          "start line: pyroscope/http")
    rl.wait_for(lambda: len(by_name(rcv.series(), "process_cpu")) >= 2, 20, 0.2)
    rc, _ = agent.stop()
    series = rcv.series()
    check(rc == 0 and series and all(c["proto"] == "connect" and c["status"] == "OK"
                                     for c in rcv.calls()),
          "Connect over HTTP: every call accepted", str(rcv.refusals()[:2]))
    check(all(s["labels"].get("service_name") == "checkout" for s in series),
          "service_name from external_labels wins over the derived one")
    stored = [ls for s in by_name(series, "process_cpu") for ls in s["stored"]]
    check(any("thread_id" in ls for ls in stored),
          "thread_labels: true makes per-thread series, as Pyroscope stores them")
    check(any("cpu" in ls for ls in stored), "cpu_label: true makes per-CPU series")
    rcv.stop()

    # ---- 3. a Pyroscope whose ingestion window has passed -----------------
    rcv = PyroscopeReceiver(os.path.join(d, "r3"), now=lambda: time.time() + 7200).start()
    cfg, spool, store = config("old", f"  address: \"127.0.0.1:{rcv.http_port}\"\n"
                               "  protocol: pyroscope\n  transport: http\n  insecure: true\n")
    agent = pptest.Agent(cfg, os.path.join(d, "old.log"))
    rl.wait_for(lambda: agent.count("dropping profiles the server refused") >= 2, 20, 0.2)
    time.sleep(1.5)
    m = agent.metrics()
    rc, _ = agent.stop()
    log = agent.log()
    refused = rcv.refusals()
    check(refused and all(c["status"] == "INVALID_ARGUMENT" for c in refused),
          "Pyroscope refuses every profile as too old", str(refused[:1]))
    dropped = m.get('pushprof_profiles_dropped_total{cause="refused"}', 0)
    check(dropped >= 2, "refused profiles are counted as dropped", f"{dropped}")
    check(len(refused) == agent.count("dropping profiles the server refused") +
          agent.count("dropping a spooled batch the server refused"),
          "each refused call is one drop, never retried",
          f"{len(refused)} refusals; log: {log[-800:]}")
    check(rc == 0 and not rl.spool_files(spool), "agent exits 0, nothing left in its spool")
    rcv.stop()

    # ---- 4. delivery errors say what to do --------------------------------
    rcv = PyroscopeReceiver(os.path.join(d, "r4"), basic=("alice", PASSWORD)).start()
    wrong = os.path.join(d, "wrong-pw")
    with open(wrong, "w") as f:
        f.write("not-the-password\n")
    for name, remote, want in (
            ("wrongpw", f"  address: \"http://127.0.0.1:{rcv.http_port}\"\n  protocol: pyroscope\n"
             f"  basic_auth: {{username: alice, password_file: {wrong}}}\n",
             "hint: the server refused remote_store.basic_auth"),
            ("tls2plain", f"  address: \"https://127.0.0.1:{rcv.http_port}\"\n"
             "  protocol: pyroscope\n  timeout: 15s\n",
             "hint: TLS handshake with a server that speaks plaintext")):
        cfg, spool, store = config(name, remote)
        agent = pptest.Agent(cfg, os.path.join(d, name + ".log"))
        # the hint comes with the server's answer; a loaded machine (the
        # receiver is Python) may take seconds to give it: wait for it,
        # not for a timeout of the agent's own
        hit = agent.wait_log(want, 60)
        agent.stop()
        check(hit, f"{name}: the error carries the hint '{want}'",
              [ln for ln in agent.log().splitlines() if "error" in ln][-1:])
        check("not-the-password" not in agent.log(), f"{name}: no password in the log")
    rcv.stop()
finally:
    gowork.kill()
    gowork.wait()
done()
