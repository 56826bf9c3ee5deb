"""[vdso] frames are named: a C workload calling clock_gettime in a tight
loop spends most of its time in the vDSO (no kernel entry). Frames whose
mapping is [vdso] must be named with the vDSO's own symbol names
(__vdso_clock_gettime, as perf names them, so they stay apart from libc's
clock_gettime wrapper), none left as a raw address. Profiles parse with
`go tool pprof`.
"""
import os
import subprocess

import cputest as ct
import pptest
from pptest import check, done, tmpdir

d = tmpdir()
prog = ct.build_c("vdsoloop", d)
w = subprocess.Popen([prog, "60"])
cfg, store = ct.write_config(d, f"targets:\n  - pids: [{w.pid}]\n")
agent = pptest.Agent(cfg, args=["--duration", "40s"])
# 200 [vdso] frames, at least 2 windows, at most 30 s
ct.collect_until(store, lambda path: sum(v * k.count("[vdso]")
                                         for f, k, v, l in ct.Prof(path).samples), 200, 2.2)
log, files = ct.stop_checked(agent, store, [w])
names = {}
samples = 0
for path in files:
    for frames, kinds, v, labels in ct.Prof(path).samples:
        samples += v
        for f, k in zip(frames, kinds):
            if k == "[vdso]":
                names[f] = names.get(f, 0) + v
total = sum(names.values())
print(f"samples {samples}, [vdso] frames {total}: {names}")
check(total >= 50, "the workload was sampled in the vDSO", f"{total} of {samples}")
unnamed = {f: v for f, v in names.items() if f.startswith("0x")}
check(not unnamed, "no [vdso] frame left as an address", str(unnamed))
check(names.get("__vdso_clock_gettime", 0) > total // 2,
      "most [vdso] frames are __vdso_clock_gettime", str(names))
done()
