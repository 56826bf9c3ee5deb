"""Stacks stay stored in BPF across windows, and user space evicts the ones
no count names (bpf/cpu_abi.h, agent/cpu.c "Stack copies"):
- a C workload runs main -> phase -> spin_a for 1.5 s, sleeps 3.5 s (its
  stacks age out, PUSHPROF_STACK_KEEP=2 windows: stacks_evicted), runs again (the same stacks, stored
  anew: stacks_read after the gap); in every window that holds its
  samples the chain is whole and named, and no sample is counted as lost
  to an eviction (lost_stack_evicted=0);
- PUSHPROF_STACK_EVICT_ALL=1 deletes every stored stack at every drain
  while the workload keeps running (the race between a program run that
  found a stack and the delete, at its most frequent): every window still
  names the chain, nothing is lost, and a stack found just before its
  delete resolves from the kept copy (stacks_from_copy, when it happens).
Profiles parse with `go tool pprof`.
"""
import os
import subprocess

import cputest as ct
import pptest
from pptest import check, done, tmpdir, local_name

d = tmpdir()
wl = ct.build_c("phases", d)
CHAIN = ["spin_a", "phase", "main"]


def run(tag, argv, secs, env=None):
    p = subprocess.Popen([wl] + argv)
    sub = os.path.join(d, tag)
    os.makedirs(sub)
    cfg, store = ct.write_config(sub, f"targets:\n  - pids: [{p.pid}]\n")
    agent = pptest.Agent(cfg, args=["--duration", f"{secs}s"], env=env)
    check(agent.started, f"{tag}: agent starts", agent.log()[-600:])
    rc, _ = agent.wait()
    p.kill()
    p.wait()
    log = agent.log()
    check(rc == 0, f"{tag}: agent exits 0", f"rc={rc}")
    wins = [ct.logfields(w) for w in ct.window_lines(log)]
    for w in wins:
        print(tag, " ".join(f"{k}={w.get(k)}" for k in (
            "window", "samples", "stacks", "stacks_new", "stacks_read", "stacks_from_copy",
            "stacks_evicted", "stacks_stored", "lost_stack_evicted")))
    files = [f for f in ct.profiles(store) if local_name(f).pid == p.pid]
    check(files and all(ct.pprof_parses(f) for f in files),
          f"{tag}: profiles parse with go tool pprof", f"{len(files)} files")
    bad = []
    for f in files:
        pr = ct.Prof(f)
        tot = pr.total()
        full = pr.count_where(lambda fr: ct.has_chain(fr, CHAIN))
        if tot >= 5 and full < 0.9 * tot:
            bad.append((local_name(f), full, tot, pr.samples[:2]))
    check(not bad, f"{tag}: every window names main -> phase -> spin_a in >= 90 % of samples",
          str(bad[:3]))
    check(wins and all(w.get("lost_stack_evicted") == "0" for w in wins),
          f"{tag}: no sample lost to an eviction")
    return wins, files


# 1: eviction by age across the idle gap, then the same stacks again
wins, files = run("age", ["14", "1.5", "3.5"], 14, env={"PUSHPROF_STACK_KEEP": "2"})
check(len(files) >= 3, "age: profiles of both busy phases", f"{len(files)} files")
ev = [i for i, w in enumerate(wins) if int(w.get("stacks_evicted", 0)) > 0]
check(ev, "age: stacks evicted while the workload sleeps")
again = [i for i, w in enumerate(wins)
         if ev and i > ev[0] and int(w.get("stacks_read", 0)) > 0 and int(w.get("samples", 0)) > 0]
check(again, "age: after an eviction the workload's stacks are read again (stored anew)")
stored = [int(w.get("stacks_stored", 0)) for w in wins]
check(all(s <= 4 * max(1, max(int(w.get("stacks", 0)) for w in wins)) for s in stored),
      "age: stored stacks stay bounded", str(stored))

# 2: every stack deleted at every drain while the workload runs
wins, files = run("evictall", ["8", "8", "0"], 7, env={"PUSHPROF_STACK_EVICT_ALL": "1"})
busy = [w for w in wins[1:-1] if int(w.get("samples", 0)) > 0]
check(len(busy) >= 3 and all(int(w.get("stacks_evicted", 0)) > 0 for w in busy),
      "evictall: stacks deleted at every drain", str([w.get("stacks_evicted") for w in wins]))
check(all(int(w.get("stacks_read", 0)) > 0 for w in busy),
      "evictall: every window reads its stacks again")
print("evictall: counts resolved from a kept copy (the delete race):",
      sum(int(w.get("stacks_from_copy", 0)) for w in wins))
done()
