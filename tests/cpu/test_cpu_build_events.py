"""A new target is let through while a window is being built.

On a loaded node (an ASan build, both CPUs busy) building one window took
the loop thread seconds, and process events waited until it was done: a
target that lived shorter than the build was never sampled. The agent now
takes process events between two processes' profiles.

Here the build is made slow on purpose (PUSHPROF_TEST_PROFILE_DELAY_MS: each
profile handed over 1 s late, as on that node), four targets keep every
build at >= 4 s, and a short target (2 s of CPU) is started just after the
build has handed over its first profile: >= 3 s of build remain. It must be
sampled (before: 0 samples, its start was read after it had exited).
"""
import os
import shutil
import subprocess
import time

import cputest as ct
import pptest
from pptest import check, done, tmpdir, local_name

d = tmpdir()
chain = ct.build_c("chain", d)
cfg, store = ct.write_config(d, """targets:
  - comm_regex: "^chain"
""")
bg = [subprocess.Popen(["nice", "-n", "19", chain, "40"]) for _ in range(4)]
short = None
try:
    agent = pptest.Agent(cfg, args=["--duration", "16s"],
                         env={"PUSHPROF_TEST_PROFILE_DELAY_MS": "1000"})
    check(agent.started, "agent starts", agent.log())

    def files():
        return len(ct.profiles(store)) if os.path.isdir(store) else 0

    # a window built whole (the four targets' profiles), then the first
    # profile of the next build: that build is in progress now
    deadline = time.time() + 30
    while len(ct.window_lines(agent.log())) < 1 and time.time() < deadline:
        time.sleep(0.02)
    n = files()
    while files() == n and time.time() < deadline:
        time.sleep(0.01)
    check(time.time() < deadline, "a build in progress was seen", agent.log()[-1500:])
    short = subprocess.Popen([chain, "2"])
    t0 = time.time()
    short.wait()
    life = time.time() - t0
    rc, _ = agent.wait(60)
    log = agent.log()
    print(log[-2000:])
    check(rc == 0, "agent exits 0", f"rc={rc}")
    samples = 0
    for path in ct.profiles(store):
        if local_name(path).pid == short.pid:
            samples += ct.Prof(path).total()
    builds = [float(ct.logfields(l).get("dur_ms", 0) or 0) for l in ct.window_lines(log)]
    print(f"short target: lived {life:.2f} s, {samples} samples; windows {len(builds)}")
    check(samples >= 10,
          "a target started during a window build (>= 3 s left) that lives 2 s is sampled",
          f"{samples} samples")
finally:
    for p in bg + ([short] if short else []):
        p.kill()
        p.wait()
    shutil.rmtree(d, ignore_errors=True)
done()
