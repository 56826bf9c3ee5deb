"""Processes that exit mid-window: short-lived programs (C using libc, and
Go) started after the agent, each burning CPU for 0.3 s and exiting inside
a 1 s window, are matched by exe_regex. Their mappings and symbols must be
kept until the window holding their samples is built: every user frame in
their profiles has its file mapping (libc too, which ld.so maps after the
exec that made them targets), frames in the executables are all named,
libc's rand() is named (from .dynsym), and the chains main -> burn -> mix
and main.main -> main.hot -> main.spin are there. Profiles parse with
`go tool pprof`.
"""
import os
import shutil
import signal
import subprocess
import time

import cputest as ct
from pptest import check, done, tmpdir

KERNEL_START = 0xffff800000000000
RUNS = 6

d = tmpdir()
cprog = os.path.join(d, "shortc")
goprog = os.path.join(d, "shortgo")
shutil.copy(ct.build_c("libcburn", d), cprog)
shutil.copy(ct.build_go("split", d), goprog)

cfg, store = ct.write_config(d, 'targets:\n  - exe_regex: "/short(c|go)$"\n')
agent = ct.start_agent(cfg, "60s")
started = ct.wait_started(agent)
check(any("agent started" in l for l in started), "agent starts", "".join(started)[-600:])
pids = {"c": [], "go": []}
t0 = time.time()
for i in range(RUNS):
    for name, path in (("c", cprog), ("go", goprog)):
        p = subprocess.Popen([path, "0.3"], env=dict(os.environ, GOMAXPROCS="1"))
        pids[name].append(p.pid)
        p.wait()
        time.sleep(0.15)
# wait (at most 20 s) for the window holding the last run's samples, then
# one window more
deadline = time.time() + 20
last = pids["go"][-1]
while time.time() < deadline:
    if any(int(os.path.basename(p).split("-")[2]) == last for p in ct.profiles(store)):
        time.sleep(1.2)
        break
    time.sleep(0.3)
agent.send_signal(signal.SIGINT)
rc, log = ct.finish(agent)
print(log[-2500:])
check(rc == 0, "agent exits 0 on SIGINT", f"rc={rc}")

files = ct.profiles(store)
check(files and all(ct.pprof_parses(p) for p in files),
      "every profile parses with go tool pprof", f"{len(files)} files")
stats = {}
nomap_pids = set()
prog = {"c": cprog, "go": goprog}
for name in pids:
    want = set(pids[name])
    samples = named = unnamed = nomap = chains = libc = 0
    unnamed_ex = []
    for path in files:
        if int(os.path.basename(path).split("-")[2]) not in want:
            continue
        pr = ct.Prof(path)
        for frames, kinds, v, labels in pr.samples:
            samples += v
            for f, k in zip(frames, kinds):
                if k.startswith("[") or f.startswith("["):
                    continue    # kernel, [vdso], pseudo frames
                if not k.startswith("/"):
                    nomap += v
                    unnamed_ex.append(f"{f} (no mapping)")
                    nomap_pids.add(int(os.path.basename(path).split("-")[2]))
                elif "/libc.so" in k:
                    libc += v if not f.startswith("0x") else 0
                elif k != prog[name]:
                    continue    # ld.so: stripped, its internal functions have no names
                elif f.startswith("0x"):
                    unnamed += v
                    unnamed_ex.append(f"{f} {k}")
                else:
                    named += v
            if name == "c" and ct.has_chain(frames, ["mix", "burn", "main"]):
                chains += v
            if name == "go" and ct.has_chain(frames, ["main.spin", "main.hot", "main.main"]):
                chains += v
    stats[name] = (samples, named, unnamed, nomap, chains, libc)
    print(f"{name}: samples {samples}, executable frames named {named}, unnamed {unnamed}, "
          f"frames without a mapping {nomap} {sorted(set(unnamed_ex))[:8]}, "
          f"full chains {chains}, named libc frames {libc}")
    check(samples >= 20, f"{name}: the short-lived processes were sampled", f"{samples}")
    check(nomap == 0, f"{name}: every user frame has its file mapping", f"{nomap}")
    check(unnamed == 0 and named > 0, f"{name}: every frame in the executable is named",
          f"{unnamed} unnamed of {named + unnamed}")
    check(chains > 0, f"{name}: full chains present", f"{chains}")
for pid in sorted(nomap_pids):
    print(f"pid {pid} had frames without a mapping; its log lines:")
    print("\n".join(l for l in log.splitlines() if f"pid={pid} " in l or l.endswith(f"pid={pid}")))
check(stats["c"][5] > 0, "c: libc frames (libc is mapped after exec) are named",
      f"{stats['c'][5]}")
done()
