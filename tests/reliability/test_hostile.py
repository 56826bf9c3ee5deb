"""Hostile processes through the real agent (CPU windows + Go heap
snapshots every second, targets chosen by executable path):

- a Go process whose executable was deleted after start, one whose path was
  replaced by another file, one whose path now holds a truncated copy (a
  running executable cannot be truncated in place: ETXTBSY), each before and
  after the agent first looked at it;
- a stream of short-lived Go processes (exit mid-read, pids coming and
  going) while snapshots run;
- real pid reuse: a Go process exits and a different Go program is started
  under the same pid (via /proc/sys/kernel/ns_last_pid); its snapshots must
  describe the new program, not the old one.

Expected: no crash, exit 0 on SIGTERM, no sanitizer report, bounded agent
CPU time, clear log lines, every pushed profile valid (the receiver checks
them), heap profiles still taken from the damaged processes."""
import errno
import os
import re
import shutil
import subprocess
import time

import pptest
import rellib as rl
from pptest import check, done, local_name, tmpdir

d = tmpdir("pushprof-rel-hostile-")
bins = os.path.join(d, "bin")
os.makedirs(bins)
busy = rl.build_go("busyalloc", bins)
short = rl.build_go("shortgo", bins)
other = rl.build_go("otheralloc", bins)
procs = []


def start_copy(name, secs="0"):
    path = os.path.join(bins, name)
    shutil.copy(busy, path)
    p = subprocess.Popen([path, secs])
    procs.append(p)
    return path, p


def damage(path, how):
    if how == "deleted":
        os.unlink(path)
    elif how == "replaced":
        shutil.copy(short, path + ".new")
        os.rename(path + ".new", path)
    elif how == "truncated":
        try:
            with open(path, "r+b") as f:
                f.truncate(4096)
            print("truncated in place (unexpected)")
        except OSError as e:
            check(e.errno == errno.ETXTBSY, "a running executable cannot be truncated in place",
                  str(e))
        with open(path, "rb") as f:
            head = f.read(4096)
        with open(path + ".new", "wb") as f:
            f.write(head)
        os.chmod(path + ".new", 0o755)
        os.rename(path + ".new", path)


kinds = ("deleted", "replaced", "truncated")
early = {}
for k in kinds:  # damaged before the agent ever sees them
    path, p = start_copy(f"early-{k}")
    time.sleep(0.2)
    damage(path, k)
    early[k] = p.pid

rcv = rl.Rcv(os.path.join(d, "rcv"), rl.free_port())
store = os.path.join(d, "store")
cfg = rl.write_config(os.path.join(d, "a.yaml"), remote=f"127.0.0.1:{rcv.port}", store=store,
                      spool=os.path.join(d, "spool"), level="debug",
                      go_heap="{enabled: true, interval: 1s}",
                      targets=f"targets:\n  - exe_regex: '^{re.escape(bins)}/'\n")
agent = pptest.Agent(cfg, os.path.join(d, "agent.log"))
late = {}
try:
    check(agent.started is not None, "agent started")
    for k in kinds:  # seen by the agent first, damaged afterwards
        path, p = start_copy(f"late-{k}")
        late[k] = (path, p)
    time.sleep(2.5)
    for k, (path, p) in late.items():
        damage(path, k)
    late = {k: p.pid for k, (path, p) in late.items()}

    # short-lived Go processes while snapshots run
    t_end = time.time() + 10
    n_short = 0
    live = []
    while time.time() < t_end:
        live.append(subprocess.Popen([short, "3000"]))
        n_short += 1
        live = [p for p in live if p.poll() is None]
        time.sleep(0.03)
    for p in live:
        p.wait()
    print(f"{n_short} short-lived Go processes started")

    # real pid reuse: A exits, B (another program) gets A's pid
    a = subprocess.Popen([busy, "3"])
    pid_a = a.pid
    time.sleep(2.2)  # tracked and snapshotted at least once
    a.wait()
    b = None
    for _ in range(20):
        with open("/proc/sys/kernel/ns_last_pid", "w") as f:
            f.write(str(pid_a - 1))
        c = subprocess.Popen([other, "60"])
        if c.pid == pid_a:
            b = c
            break
        c.kill()
        c.wait()
    check(b is not None, f"pid {pid_a} reused by a different Go program")
    if b:
        procs.append(b)
        # until a snapshot of the new program exists (the loop may lag
        # under ASan): at most 30 s
        def new_seen():
            for f in rl.local_files(store):
                if local_name(f)[1::2] == ("heap-interval", pid_a):
                    p = rl.decode(f)
                    if any(p.string_table[fn.name] == "main.otherAlloc" for fn in p.function):
                        return True
            return False
        rl.wait_for(new_seen, 30, 0.5)
        time.sleep(1.5)
    with open(f"/proc/{agent.pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    agent_cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    m = agent.metrics()
    rc, took = agent.stop()
    log = agent.log()
    check(rc == 0, "agent survives and exits 0 on SIGTERM", f"rc={rc}")
    print(f"agent CPU {agent_cpu:.1f}s; heap snapshots by result: "
          + str({k: v for k, v in m.items() if "go_heap_snapshots" in k}))

    def heap_pids():
        out = {}
        for f in rl.local_files(store):
            n = local_name(f)
            if n.type.startswith("heap-"):
                out.setdefault(n.pid, []).append(f)
        return out

    hp = heap_pids()
    for k in kinds:
        for when, pid in (("early", early[k]), ("late", late[k])):
            said = [l for l in log.splitlines() if f"pid={pid} " in l and
                    ("level=warn" in l or "level=error" in l)]
            ok = bool(hp.get(pid)) or bool(said)
            check(ok, f"{when}-{k} binary: heap profiles still taken, or a clear log line",
                  f"pid {pid}: {len(hp.get(pid, []))} profiles")
            print(f"  {when}-{k} pid {pid}: {len(hp.get(pid, []))} heap profiles"
                  + (f"; log: {said[0][:200]}" if said else ""))
    if b:
        funcs_new = []
        for f in hp.get(pid_a, []):
            p = rl.decode(f)
            names = {p.string_table[fn.name] for fn in p.function}
            funcs_new.append(("main.otherAlloc" in names, "main.grow" in names))
        print(f"  reused pid {pid_a}: (otherAlloc, grow) per profile {funcs_new}")
        check(any(o and not g for o, g in funcs_new),
              "after pid reuse the snapshots describe the new program",
              str(funcs_new))
        check(all(not (o and g) for o, g in funcs_new),
              "no snapshot mixes the old and the new program")
    bad = [c for c in rcv.calls() if c["status"] not in ("OK",)]
    check(rcv.calls() and not bad, "every push accepted by the receiver's Parca checks",
          str(bad[:2]))
    crashes = [l for l in log.splitlines() if "level=error" in l]
    print("\n".join(crashes[:5]))
    warns = [l for l in log.splitlines() if "level=warn" in l]
    check(all("error=" in l for l in warns if "snapshot failed" in l or "not tracked" in l),
          "failures are logged with their error")
    check(agent_cpu < 0.5 * (14 + 2.5 + 8), "bounded work: agent CPU time",
          f"{agent_cpu:.1f}s")
    # a long-lived process whose heap just grows is the same process: it must
    # be analyzed once, not taken for a reused pid again and again
    again = {pid: sum(1 for l in log.splitlines()
                      if "tracking go process" in l and f"pid={pid} " in l)
             for pid in list(early.values()) + list(late.values())}
    check(all(n == 1 for n in again.values()),
          "each long-lived Go process is analyzed once (no false pid reuse)", str(again))
finally:
    if agent.p.poll() is None:
        agent.p.kill()
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()
    rcv.stop()
done()
