"""The symbolizer opens files a target controls without trusting them.

A chrooted process's mappings are named in /proc/PID/maps by their path as
the agent sees it (/tmp/.../root/bin/worker), and the agent opens them
through /proc/PID/map_files or, failing that, under /proc/PID/root. Inside
its chroot the process can create that same host path itself: here a FIFO
(an open() of it blocks until a writer comes) and, for a second process, a
symlink to a file outside its root. The agent runs without CAP_SYS_ADMIN
and CAP_CHECKPOINT_RESTORE (setpriv --bounding-set), so map_files is closed
to it and the fallback is taken, as on a node where the agent has fewer
privileges.

Before the fix the loop blocked in open() on the FIFO: no window for as
long as the FIFO had no writer, SIGTERM did not stop the agent. Now: windows
keep coming, SIGTERM exits 0 promptly, the planted files are never opened
for reading (the FIFO's reader count stays 0; the outside file's frames are
not named from it)."""
import os
import shutil
import signal
import subprocess
import time

import cputest as ct
import pptest
from pptest import check, done, tmpdir, local_name

if not pptest.have("setpriv") or not pptest.have("chroot"):
    print("SKIP: setpriv or chroot missing")
    raise SystemExit(77)

d = tmpdir()
worker = ct.build_c("chain", d, flags=["-static"])
procs = []
CHAIN_FUNCS = ("main", "a", "b", "c")  # workloads/chain.c


def chroot_with_plant(name, plant):
    """A root dir with the static worker at /bin/worker, and plant() making
    the worker's host path inside that root."""
    root = os.path.join(d, name)
    os.makedirs(os.path.join(root, "bin"))
    shutil.copy(worker, os.path.join(root, "bin", "worker"))
    inner = os.path.join(root, root.lstrip("/"), "bin")
    os.makedirs(inner)
    plant(os.path.join(inner, "worker"))
    p = subprocess.Popen(["chroot", root, "/bin/worker", "60"])
    procs.append(p)
    return root, p


fifo_root, fifo_p = chroot_with_plant("fifo-root", os.mkfifo)
outside = os.path.join(d, "outside-elf")
shutil.copy(worker, outside)  # a real ELF outside the root: must not be read
link_root, link_p = chroot_with_plant("link-root", lambda p: os.symlink(outside, p))
time.sleep(0.3)
cfg, store = ct.write_config(d, "targets:\n  - pids: [%d, %d]\n" % (fifo_p.pid, link_p.pid))
# a blocked agent fails the test (no "agent started" within 30 s, or no exit
# within 15 s of SIGTERM): pptest.Agent never blocks on the agent's output
agent = pptest.Agent(cfg, os.path.join(d, "agent.log"),
                     wrap=["setpriv", "--bounding-set", "-sys_admin,-checkpoint_restore", "--"])
try:
    check(agent.started, "agent started (not blocked at its first look at the targets)",
          agent.log()[-500:])
    # map_files is really closed to the agent: the fallback path is what runs
    st = subprocess.run(["setpriv", "--bounding-set", "-sys_admin,-checkpoint_restore", "--",
                         "cat", f"/proc/{fifo_p.pid}/map_files/" +
                         os.listdir(f"/proc/{fifo_p.pid}/map_files")[0]],
                        capture_output=True, timeout=10)
    check(st.returncode != 0, "without those capabilities map_files cannot be opened",
          st.stderr.decode()[-200:])
    # a blocked agent builds no window after its first look at the paths
    t0 = time.time()
    while len(agent.windows()) < 4 and time.time() - t0 < 30:
        time.sleep(0.3)
    rc, took = agent.stop(signal.SIGTERM, 15)
    text = agent.log()
    wins = ct.window_lines(text)
    print(f"{len(wins)} windows in {time.time() - t0:.0f} s; SIGTERM -> exit {rc} in {took:.1f}s")
    check(rc == 0 and took < 5, "SIGTERM: exit 0 within 5 s", f"rc={rc} took={took:.1f}s")
    check(len(wins) >= 4, "windows keep coming with a FIFO planted at the mapped path",
          f"{len(wins)} windows")
    profs = [ct.Prof(p) for p in ct.profiles(store)]
    pids = {local_name(p).pid for p in ct.profiles(store)}
    check(fifo_p.pid in pids and link_p.pid in pids, "both chrooted workers were profiled",
          str(pids))
    named = set()
    for p in profs:
        named |= {fr for frames, _, _, _ in p.samples for fr in frames}
    check(not named & set(CHAIN_FUNCS),
          "the symlink out of the root was not followed (no names from the outside ELF)",
          str(sorted(named)[:20]))
finally:
    if agent.alive():
        agent.stop(signal.SIGKILL)
    for p in procs:
        p.kill()
        p.wait()
done()
