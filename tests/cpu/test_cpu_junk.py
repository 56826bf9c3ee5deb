"""Junk frames: return addresses the frame-pointer walk reads from data,
not from frames, must end the stack. Two workloads:
- junkfp (C): spins with %rbp pointing at data, so the walk reads a
  SHA-256 constant or a data address as the caller, every time;
- shaloop (Go): hashes with crypto/sha256, whose amd64 assembly uses %rbp
  as a data register (on this CPU's code path it may or may not).
Every user location in the agent's profiles must lie in an executable
mapping of its process (read from /proc/PID/maps while it runs). Stacks
cut are marked with a "[truncated: junk return address]" frame below the
frames that stay (junkfp's spin_junk), and counted in the window log line
(truncated_junk=) and pushprof_cpu_lost_total{cause="junk_frame"}.
Profiles parse with `go tool pprof`.
"""
import os
import subprocess

import cputest as ct
import pptest
from pptest import check, done, tmpdir, local_name

KERNEL_START = 0xffff800000000000
JUNK = "[truncated: junk return address]"

d = tmpdir()
work = {
    "junkfp": subprocess.Popen([ct.build_c("junkfp", d), "60"]),
    "shaloop": subprocess.Popen([ct.build_go("shaloop", d), "60", "2"],
                                env=dict(os.environ, GOMAXPROCS="2")),
}
pids = {name: p.pid for name, p in work.items()}


def exec_ranges(pid):
    out = []
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            parts = line.split()
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            if parts[1][2] == "x":
                out.append((lo, hi))
    return out


port = ct.free_port()
cfg, store = ct.write_config(d, "targets:\n  - pids: [%s]\n" % ", ".join(
    str(p) for p in pids.values()), http=f"127.0.0.1:{port}")
agent = pptest.Agent(cfg, args=["--duration", "40s"])
# 1500 samples, at least 3 windows, at most 30 s
ct.collect_until(store, lambda path: ct.Prof(path).total(), 1500, 3.2)
ranges = {name: exec_ranges(pid) for name, pid in pids.items()}
try:
    metrics = ct.metrics(port)
except OSError as e:
    print("metrics:", e)
    metrics = {}
log, files = ct.stop_checked(agent, store, work.values())

by_pid = {pid: name for name, pid in pids.items()}
bad, user_locs, junk_total = [], 0, 0
st = {name: {"samples": 0, "cut": 0, "kept_leaf": 0, "sha": 0} for name in pids}
for path in files:
    name = by_pid.get(local_name(path).pid)
    if not name:
        continue
    pr = ct.Prof(path)
    for loc in pr.p.location:
        if loc.address == 0 or loc.address >= KERNEL_START:
            continue
        user_locs += 1
        if not any(lo <= loc.address < hi for lo, hi in ranges[name]):
            bad.append(f"{name}: 0x{loc.address:x} {pr.locs[loc.id]}")
    for frames, kinds, v, labels in pr.samples:
        s = st[name]
        s["samples"] += v
        if frames and frames[-1] == JUNK:
            s["cut"] += v
            junk_total += v
            if "spin_junk" in frames:
                s["kept_leaf"] += v
        if any(f.startswith("crypto/sha256.") for f in frames):
            s["sha"] += v
for name, s in st.items():
    print(f"{name}: samples {s['samples']}, cut at a junk frame {s['cut']} "
          f"({100.0 * s['cut'] / max(s['samples'], 1):.1f} %), sha256 samples {s['sha']}")
print(f"user locations {user_locs}, outside executable mappings {len(bad)}")
check(st["junkfp"]["samples"] >= 100 and st["shaloop"]["samples"] >= 100,
      "both workloads were sampled", str(st))
check(user_locs > 0 and not bad, "no user location outside an executable mapping",
      "; ".join(bad[:10]))
check(st["junkfp"]["cut"] > st["junkfp"]["samples"] // 2,
      "junkfp: its stacks in spin_junk are cut at the junk frame", str(st["junkfp"]))
check(st["junkfp"]["kept_leaf"] > 0, "junkfp: the sampled function above the cut stays",
      str(st["junkfp"]))
check(st["shaloop"]["sha"] > 0, "shaloop: the sha256 frames are kept and named",
      str(st["shaloop"]))
wins = ct.window_lines(log)
cut = sum(int(ct.logfields(l).get("truncated_junk", "0")) for l in wins)
check(wins and all("truncated_junk" in ct.logfields(l) for l in wins),
      "window lines carry truncated_junk", wins[0] if wins else "no window lines")
check(cut >= junk_total > 0, "the log counts every cut stack in the profiles",
      f"log {cut}, profiles {junk_total}")
m = metrics.get('pushprof_cpu_lost_total{cause="junk_frame"}', 0)
check(m > 0, "/metrics counts junk-frame cuts", f"{m}")
done()
