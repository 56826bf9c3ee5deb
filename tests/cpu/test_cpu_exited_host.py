"""Whole-host mode and processes that exit before they are ever read: the
agent reads no new process ahead on the whole host, so a program that runs
0.3 s and exits mid-window is gone before the window's build looks at it.
Its mappings come from the kernel's mmap records kept for it
(agent/cpu/maprec.h, sym_add_mapping): its user frames have their file
mapping (2 % tolerated: a ring overflowing on a busy host), its libc frames
are named (libc's symbols are loaded from the live processes that map it),
and its profiles parse with `go tool pprof`. Before those records every
user frame of such a process was a bare address without a mapping.
"""
import os
import shutil
import subprocess
import time

import cputest as ct
import pptest
from pptest import check, done, tmpdir

RUNS = 5

d = tmpdir()
prog = os.path.join(d, "shorthost")
shutil.copy(ct.build_c("libcburn", d), prog)

cfg, store = ct.write_config(d, "")  # no targets: the whole host
agent = pptest.Agent(cfg, args=["--duration", "60s"])
check(agent.started, "agent starts", agent.log()[-600:])
pids = []
for i in range(RUNS):
    p = subprocess.Popen([prog, "0.3"])
    pids.append(p.pid)
    p.wait()
    time.sleep(0.2)
ct.wait_pid_window(store, pids[-1])
log, files = ct.stop_checked(agent, store)
samples = mapped = nomap = libc = 0
for _, frames, kinds, v in ct.pid_samples(files, set(pids)):
    samples += v
    for f, k in ct.user_frames(frames, kinds):
        if not k.startswith("/"):
            nomap += v
        else:
            mapped += v
            if "/libc.so" in k and not f.startswith("0x"):
                libc += v
print(f"{len(pids)} runs: samples {samples}, user frames with a mapping {mapped}, "
      f"without {nomap}, named libc frames {libc}")
print("\n".join(l for l in log.splitlines() if "cpu window" in l)[-1500:])
check(samples >= 20, "the short-lived processes were sampled", f"{samples}")
check(nomap <= 0.02 * (mapped + nomap) and mapped > 0,
      "their user frames have their file mapping", f"{nomap} without of {mapped + nomap}")
check(libc > 0, "their libc frames are named", f"{libc}")
done()
