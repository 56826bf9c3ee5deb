"""perf map files for JIT code (/tmp/perf-PID.map), read as the process sees
it and never trusted. A miniature JIT (workloads/jitwl.c, static) runs in a
chroot of its own, each copy leaving a different file at its perf-map path:
- A, also in its own PID namespace (so the file is /tmp/perf-1.map inside
  its root): a real map; its JIT frames must be named "jit_hot_code" (the
  later of two lines for the same code), malformed lines skipped;
- B: an absolute symlink, C: a relative one (../../..), both to a map on
  the host, outside their root, naming everything "escaped_name": that name
  must never appear;
- D: a FIFO, which must neither block the agent nor be read;
- E: a real map naming code that runs from a memfd mapped twice (writable
  and executable, as .NET does): named "jit_hot_code" too;
- F: in a mount namespace of its own where its /tmp is a FUSE mount whose
  daemon never answers (nobody reads /dev/fuse: the process itself holds
  the descriptor): even a lookup of /tmp/perf-PID.map there waits forever,
  deaf to the signals the agent blocks; the agent must not look.
The agent keeps producing windows throughout, exits 0 on SIGINT, and
every profile parses with `go tool pprof`.
"""
import os
import shutil
import signal
import subprocess
import time

import cputest as ct
import pptest
from pptest import check, done, tmpdir, local_name

d = tmpdir()
jit = ct.build_c("jitwl", d, flags=["-static"])
outside = os.path.join(d, "outside.map")
with open(outside, "w") as f:
    f.write("0 7fffffffffff escaped_name\n")

cases = {
    "A": ["map"],
    "B": ["symlink", outside],
    "C": ["symlink", "../../../../../../../../.." + outside],
    "D": ["fifo"],
    "E": ["memfd"],
    "F": ["none"],
}
# F: mount the stalled FUSE on its root's /tmp inside a new mount
# namespace, then become the workload, holding /dev/fuse open
STALL = """
import ctypes, os, sys
root = sys.argv[1]
fd = os.open("/dev/fuse", os.O_RDWR)
os.set_inheritable(fd, True)
opts = f"fd={fd},rootmode=40000,user_id=0,group_id=0".encode()
if ctypes.CDLL(None, use_errno=True).mount(b"stall", (root + "/tmp").encode(), b"fuse.stall",
                                           0, opts) != 0:
    print("nofuse", os.strerror(ctypes.get_errno()), flush=True)
    sys.exit(1)
os.execvp("chroot", ["chroot", root] + sys.argv[2:])
"""
have_fuse = os.path.exists("/dev/fuse")
if not have_fuse:
    print("note: no /dev/fuse: case F skipped")
    del cases["F"]
procs = {}
for name, args in cases.items():
    root = os.path.join(d, "root" + name)
    os.makedirs(root)
    shutil.copy(jit, os.path.join(root, "jitwl"))
    cmd = ["chroot", root, "/jitwl", "60", *args]
    if name == "A":
        cmd = ["unshare", "--pid", "--fork"] + cmd
    if name == "F":
        os.makedirs(os.path.join(root, "tmp"))
        cmd = ["unshare", "--mount", "--propagation", "private", "/usr/bin/python3", "-c",
               STALL, root, "/jitwl", "60", *args]
    procs[name] = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
for name, p in procs.items():
    line = p.stdout.readline()
    check(line.startswith("ready"), f"{name}: workload ready", line)


def jit_pid(name):
    """The jitwl process of a case (unshare forks it as a child)."""
    pid = procs[name].pid
    if name != "A":
        return pid
    for _ in range(100):
        kids = open(f"/proc/{pid}/task/{pid}/children").read().split()
        if kids:
            return int(kids[0])
        time.sleep(0.05)
    return pid


pids = {name: jit_pid(name) for name in procs}
print("pids", pids, "A's NSpid:",
      [l for l in open(f"/proc/{pids['A']}/status") if l.startswith("NSpid")])
cfg, store = ct.write_config(d, 'targets:\n  - comm_regex: "^jitwl$"\n')
agent = pptest.Agent(cfg, args=["--duration", "40s"])
# 50 samples of A naming jit_hot_code, at least 4 windows, at most 30 s
t0 = time.time()
ct.collect_until(store, lambda path: ct.Prof(path).count_where(lambda fr: "jit_hot_code" in fr)
                 if local_name(path).pid == pids["A"] else 0, 50, 4.2)
elapsed = time.time() - t0
log, files = ct.stop_checked(agent, store, procs.values())
try:
    os.kill(pids["A"], signal.SIGKILL)  # unshare's child outlives it
except ProcessLookupError:
    pass
wins = ct.window_lines(log)
# a blocked agent builds no window after its first look at the FIFO (and
# would not exit on SIGINT); a busy host may merge a late window into the
# next, never hold them off for long
gap = pptest.largest_window_gap(log.splitlines(), t0 + 2, t0 + elapsed)
check(len(wins) >= 3 and gap <= 5, "windows keep coming (nothing blocked)",
      f"{len(wins)} windows in {elapsed:.1f} s, largest gap {gap:.1f} s")
jit_frames = {n: {} for n in pids}
for path in files:
    pid = local_name(path).pid
    name = next((n for n, p in pids.items() if p == pid), None)
    if not name:
        continue
    for frames, kinds, v, labels in ct.Prof(path).samples:
        for f, k in zip(frames, kinds):
            if (k == "" or k.startswith("/memfd:")) and not f.startswith("["):
                jit_frames[name][f] = jit_frames[name].get(f, 0) + v
for name in pids:
    top = sorted(jit_frames[name].items(), key=lambda x: -x[1])[:5]
    print(f"{name}: frames in anonymous memory {sum(jit_frames[name].values())}: {top}")
a = jit_frames["A"]
check(a.get("jit_hot_code", 0) >= 20, "A: JIT frames named from the perf map", str(a))
check(all(f == "jit_hot_code" for f in a), "A: the later line wins, nothing else named",
      str(a))
e = jit_frames["E"]
check(e.get("jit_hot_code", 0) >= 20 and all(f == "jit_hot_code" for f in e),
      "E: JIT code in a memfd named from the perf map", str(e))
for name in "BCDF" if have_fuse else "BCD":
    fr = jit_frames[name]
    check(sum(fr.values()) >= 20, f"{name}: its JIT code was sampled", str(fr))
    check("escaped_name" not in fr and all(f.startswith("0x") for f in fr),
          f"{name}: nothing read from outside its root / from a FIFO", str(fr))
check("escaped_name" not in open(os.path.join(d, "outside.map")).read() or
      not any("escaped_name" in str(v) for v in jit_frames.values()),
      "escaped_name never appears")
done()
