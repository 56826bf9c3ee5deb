"""How cost grows works (bench/scale.py --quick --targeted): each axis
(processes on the node, Go programs tracked, distinct stacks per window,
replayed sample rates) runs the real agent, or build/bench-replay, on real
processes and produces its figures. Performance itself is not asserted here
(a shared CI machine); the figures are in docs/performance.md."""
import json
import os
import subprocess

import pptest
from pptest import BUILD_DIR, SOURCE_DIR, check, done

out = pptest.tmpdir("pushprof-bench-scale-")
r = subprocess.run(["/usr/bin/python3", os.path.join(SOURCE_DIR, "bench", "scale.py"), "--quick",
                    "--targeted", "--axis", "processes,goprogs,stacks,rates",
                    "--build", os.path.abspath(BUILD_DIR), "--out", out],
                   capture_output=True, text=True, timeout=280)
print(r.stderr[-3000:])
print(r.stdout)
check(r.returncode == 0, "scale.py --quick exits 0 (no point reported an error)",
      f"rc={r.returncode}")
res = json.load(open(os.path.join(out, "scale.json")))
for axis, n in (("processes", 2), ("goprogs", 2), ("stacks", 1)):
    rows = res.get(axis, [])
    # CPU comes in 10 ms ticks: a quick point on a quiet machine may
    # read 0, so the check is that it was read, not that it is positive
    check(len(rows) == n and all(x["rc"] == 0 and x["cpu_ms_per_window"] is not None and
                                 x["cpu_ms_per_window"] >= 0 and
                                 (x["rss_anon_kib"] or 0) > 0 for x in rows),
          f"{axis}: every point measured the agent's CPU and memory", str(rows))
for x in res.get("processes", []):
    check(x["host_processes"] >= x["extra_processes"],
          f"processes: the {x['extra_processes']} extra processes were running",
          str(x["host_processes"]))
st = res.get("stacks", [{}])[0]
check((st.get("stacks_per_window") or 0) > 0 and (st.get("samples_per_window") or 0) > 0,
      "stacks: bench/stacks.c sampled, stacks per window counted", str(st))
rates = res.get("rates", "")
check("| 16 | 19 |" in rates and "Recorded" in rates,
      "rates: bench-replay recorded a window and replayed it at 16 CPUs x 19 Hz", rates)
done()
