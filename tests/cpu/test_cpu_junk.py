"""Junk frames: a Go workload hashing with crypto/sha256, whose assembly
uses %rbp as a data register, so the frame-pointer walk reads SHA-256 state
and stack words as return addresses. Every user location in the agent's
profiles must lie in an executable mapping of the process (read from
/proc/PID/maps while it runs); stacks cut there are counted in the window
log line (truncated_junk=) and pushprof_cpu_lost_total{cause="junk_frame"},
and marked with a "[truncated: junk return address]" frame; the hashing
frames (below the cut) stay. Profiles parse with
`go tool pprof`.
"""
import os
import subprocess

import cputest as ct
from pptest import check, done, tmpdir

KERNEL_START = 0xffff800000000000
JUNK = "[truncated: junk return address]"

d = tmpdir()
sha = ct.build_go("shaloop", d)
w = subprocess.Popen([sha, "60", "2"], env=dict(os.environ, GOMAXPROCS="2"))


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
cfg, store = ct.write_config(d, f"targets:\n  - pids: [{w.pid}]\n", http=f"127.0.0.1:{port}")
agent = ct.start_agent(cfg, "40s")
ct.wait_started(agent)
# 1500 samples, at least 3 windows, at most 30 s
ct.collect_until(store, lambda path: ct.Prof(path).total(), 1500, 3.2)
ranges = exec_ranges(w.pid)
try:
    metrics = ct.metrics(port)
except OSError as e:
    print("metrics:", e)
    metrics = {}
log, files = ct.stop_checked(agent, store, [w])
bad, user_locs, samples, junk_samples, sha_samples, sha_rooted = [], 0, 0, 0, 0, 0
for path in files:
    pr = ct.Prof(path)
    for loc in pr.p.location:
        if loc.address == 0 or loc.address >= KERNEL_START:
            continue
        user_locs += 1
        if not any(lo <= loc.address < hi for lo, hi in ranges):
            bad.append(f"0x{loc.address:x} {pr.locs[loc.id]}")
    for frames, kinds, v, labels in pr.samples:
        samples += v
        if frames and frames[-1] == JUNK:
            junk_samples += v
        if any(f.startswith("crypto/sha256.") for f in frames):
            sha_samples += v
            if "main.hashLoop" in frames:
                sha_rooted += v
print(f"samples {samples}, user locations {user_locs}, outside executable mappings "
      f"{len(bad)}, stacks cut at a junk frame {junk_samples} "
      f"({100.0 * junk_samples / max(samples, 1):.1f} %), sha256 samples {sha_samples}, "
      f"of which under main.hashLoop {sha_rooted}")
check(samples >= 300, "the hashing workload was sampled", f"{samples}")
check(user_locs > 0 and not bad, "no user location outside an executable mapping",
      "; ".join(bad[:10]))
wins = ct.window_lines(log)
cut = sum(int(ct.logfields(l).get("truncated_junk", "0")) for l in wins)
check(wins and all("truncated_junk" in ct.logfields(l) for l in wins),
      "window lines carry truncated_junk", wins[0] if wins else "no window lines")
check(cut > 0 and junk_samples > 0, "stacks cut at junk frames are counted and marked",
      f"log {cut}, profiles {junk_samples}")
check(cut >= junk_samples, "the log counts every cut stack in the profiles",
      f"log {cut} < profiles {junk_samples}")
m = metrics.get('pushprof_cpu_lost_total{cause="junk_frame"}', 0)
check(m > 0, "/metrics counts junk-frame cuts", f"{m}")
check(sha_samples > 0, "the sha256 frames themselves are kept and named", f"{sha_samples}")
done()
