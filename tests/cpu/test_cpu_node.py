"""JIT code named from a real runtime's perf map: Node.js (`node`, from
Debian's nodejs or an existing installation) run with --perf-basic-prof
writes /tmp/perf-PID.map as it compiles; the hot JavaScript function
hotLoop (workloads/hot.js) must appear by name in the agent's CPU profile,
and the profiles parse with `go tool pprof`.
"""
import os
import shutil
import signal
import subprocess
import time

import cputest as ct
from pptest import check, done, tmpdir

node = shutil.which("node") or shutil.which("nodejs")
if not node:
    print("node not installed (scripts/setup.sh installs nodejs): skipped")
    raise SystemExit(77)
d = tmpdir()
w = subprocess.Popen([node, "--perf-basic-prof", os.path.join(ct.WORK, "hot.js"), "60"],
                     cwd=d)
cfg, store = ct.write_config(d, f"targets:\n  - pids: [{w.pid}]\n")
agent = ct.start_agent(cfg, "40s")
ct.wait_started(agent)
# until 50 samples name hotLoop (at least 2 windows, at most 30 s)
t0 = time.time()
seen, hot = set(), 0
while time.time() - t0 < 30:
    time.sleep(0.5)
    for path in ct.profiles(store):
        if path not in seen:
            seen.add(path)
            hot += ct.Prof(path).count_where(lambda fr: any("hotLoop" in f for f in fr))
    if hot >= 50 and time.time() - t0 >= 2.2:
        break
agent.send_signal(signal.SIGINT)
rc, log = ct.finish(agent)
w.kill()
w.wait()
perfmap = f"/tmp/perf-{w.pid}.map"
print(log[-1500:])
check(rc == 0, "agent exits 0 on SIGINT", f"rc={rc}")
files = ct.profiles(store)
check(files and all(ct.pprof_parses(p) for p in files),
      "every profile parses with go tool pprof", f"{len(files)} files")
samples, names = 0, {}
for path in files:
    for frames, kinds, v, labels in ct.Prof(path).samples:
        samples += v
        for f, k in zip(frames, kinds):
            if k == "" and not f.startswith("["):
                key = f if not f.startswith("0x") else "(unnamed)"
                names[key] = names.get(key, 0) + v
print(f"samples {samples}, frames in anonymous memory: "
      f"{sorted(names.items(), key=lambda x: -x[1])[:6]}")
check(hot >= 20, "hotLoop is named in the profile", f"{hot} samples of {samples}")
if os.path.exists(perfmap):
    os.unlink(perfmap)
done()
