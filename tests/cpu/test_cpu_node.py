"""JIT code named from a real runtime's perf map: Node.js (`node`, from
Debian's nodejs or an existing installation) run with --perf-basic-prof
writes /tmp/perf-PID.map as it compiles; the hot JavaScript function
hotLoop (workloads/hot.js) must appear by name in the agent's CPU profile,
and the profiles parse with `go tool pprof`.
"""
import os
import shutil
import subprocess

import cputest as ct
import pptest
from pptest import check, done, tmpdir

node = shutil.which("node") or shutil.which("nodejs")
if not node:
    print("node not installed (scripts/setup.sh installs nodejs): skipped")
    raise SystemExit(77)
d = tmpdir()
w = subprocess.Popen([node, "--perf-basic-prof", os.path.join(ct.WORK, "hot.js"), "60"],
                     cwd=d)
cfg, store = ct.write_config(d, f"targets:\n  - pids: [{w.pid}]\n")
agent = pptest.Agent(cfg, args=["--duration", "40s"])
# 50 samples naming hotLoop, at least 2 windows, at most 30 s
hot = ct.collect_until(store, lambda path: ct.Prof(path).count_where(
    lambda fr: any("hotLoop" in f for f in fr)), 50, 2.2)
log, files = ct.stop_checked(agent, store, [w])
perfmap = f"/tmp/perf-{w.pid}.map"
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
