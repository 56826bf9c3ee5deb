"""[vdso] frames are named: a C workload calling clock_gettime in a tight
loop spends most of its time in the vDSO (no kernel entry). Frames whose
mapping is [vdso] must be named with the vDSO's own symbol names
(__vdso_clock_gettime, as perf names them, so they stay apart from libc's
clock_gettime wrapper), none left as a raw address. The vDSO's static
helpers have no symbol: on a KVM guest (clocksource kvm-clock) most of the
time is in the pvclock reader, named `[vdso]+0xOFF` after the start of the
code without a symbol, the same in every process. Profiles parse with
`go tool pprof`.
"""
import re
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
odd = {f: v for f, v in names.items()
       if not f.startswith("__vdso_") and not re.fullmatch(r"\[vdso\]\+0x[0-9a-f]+", f)}
check(not odd, "every [vdso] frame is a vDSO symbol or [vdso]+0xOFF", str(odd))
check(names.get("__vdso_clock_gettime", 0) > 0, "__vdso_clock_gettime is named", str(names))
helpers = {f for f in names if f.startswith("[vdso]+")}
check(len(helpers) <= 4, "code without a symbol: one name per gap, not per address", str(helpers))
with open("/sys/devices/system/clocksource/clocksource0/current_clocksource") as f:
    clock = f.read().strip()
if clock == "tsc":	# rdtsc inline in __vdso_clock_gettime: no helper
    check(names.get("__vdso_clock_gettime", 0) > total // 2,
          "clocksource tsc: most [vdso] frames are __vdso_clock_gettime", str(names))
done()
