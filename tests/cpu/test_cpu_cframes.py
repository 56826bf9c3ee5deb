"""C prologues, epilogues and frameless leaves from .eh_frame
(bpf/cpu_abi.h "C and C++: prologues, epilogues, frameless
leaves").

workloads/cframes.c, built with -O2 -fno-omit-frame-pointer
-momit-leaf-frame-pointer: a hot frameless leaf (with a stack frame of its
own, no %rbp) called by hotA and hotB 70/30, and mid(), a tiny function
with a frame pointer called at a very high rate by pro(), so that many of
its samples land on `push %rbp`, `mov %rsp,%rbp`, `pop %rbp` or `ret`; it
calls tip(), a frameless leaf with no stack use.

Run twice: with the tables off (PUSHPROF_FRAMELESS=off: the plain
frame-pointer walk, which loses the leaf's caller) and on. Prints for each
leaf the share of samples without the full chain in both runs; with the
tables: >= 97 % of leaf's samples have main -> hotA|hotB -> leaf, the split
is 70/30 within 5 points, >= 97 % of mid's samples (prologue and epilogue
included) have main -> pro -> mid, and tip's main -> pro -> mid -> tip;
without them the share must be visibly lower (the test can fail). Every
profile parses with `go tool pprof`. A third, short run samples a copy whose
.eh_frame is random bytes (hostile input): the agent keeps sampling it and
exits 0. Sampling goes on until each function
has enough samples, bounded by the workload's own CPU time (a loaded host
gives it a third of a CPU: 90 s of wall time once gave tip 92 samples of
100), with a wall-time cap.
"""
import os
import signal
import subprocess
import time

import cputest as ct
import pptest
import schedstat
from pptest import check, done, tmpdir

KERNEL = "[kernel.kallsyms]"
CHAINS = {   # leaf -> the full chains (callee first) it may have
    "leaf": [["leaf", "hotA", "main"], ["leaf", "hotB", "main"]],
    "mid": [["mid", "pro", "main"]],
    "tip": [["tip", "mid", "pro", "main"]],
}
WANT = {"leaf": 600, "mid": 300, "tip": 100}
CPU_LIMIT = 60      # workload CPU seconds per run (quiet: ~25 s reach WANT)
WALL_LIMIT = 200    # seconds per run, however loaded the machine

d = tmpdir()
work = ct.build_c("cframes", d, ["-O2", "-momit-leaf-frame-pointer"])


def user(frames, kinds):
    return [f for f, k in zip(frames, kinds) if k != KERNEL]


def by_leaf(samples):
    """leaf -> (samples, samples with a full chain, Counter of callers)."""
    out = {l: [0, 0, {}] for l in CHAINS}
    for frames, kinds, v, _ in samples:
        u = user(frames, kinds)
        if not u or u[0] not in CHAINS:
            continue
        r = out[u[0]]
        r[0] += v
        # the chain ends the stack: nothing between main and the leaf lost,
        # nothing invented (libc's __libc_start_call_main etc. may follow)
        if any(u[:len(c)] == c for c in CHAINS[u[0]]):
            r[1] += v
        caller = u[1] if len(u) > 1 else "<none>"
        r[2][caller] = r[2].get(caller, 0) + v
    return out


def run(tag, on, binary=None, limit=CPU_LIMIT, want=WANT):
    rd = os.path.join(d, tag)
    os.makedirs(rd)
    w = subprocess.Popen([binary or work, str(WALL_LIMIT + 30)])
    cfg, store = ct.write_config(rd, f"targets:\n  - pids: [{w.pid}]\n")
    agent = pptest.Agent(cfg, args=["--duration", f"{WALL_LIMIT + 20}s"],
                         env={"PUSHPROF_FRAMELESS": None if on else "off"})
    t0 = time.time()
    seen, samples = set(), []
    while time.time() - t0 < WALL_LIMIT and (schedstat.oncpu_s(w.pid) or 0) < limit:
        time.sleep(1)
        for path in ct.profiles(store):
            if path not in seen:
                seen.add(path)
                samples += ct.Prof(path).samples
        b = by_leaf(samples)
        if all(b[l][0] >= want[l] for l in CHAINS) and time.time() - t0 >= 3:
            break
    time.sleep(1.2)     # the window holding the last samples
    rc, _ = agent.stop(signal.SIGINT, 60)
    log = agent.log()
    w.kill()
    w.wait()
    files = ct.profiles(store)
    for path in files:
        if path not in seen:
            samples += ct.Prof(path).samples
    print(f"[{tag}] {time.time() - t0:.0f}s, {len(files)} profiles")
    check(rc == 0, f"{tag}: agent exits 0", f"rc {rc}\n{log[-3000:]}")
    return by_leaf(samples), files, log


def cfa(log, key):
    return sum(int(ct.logfields(l).get(key, "0")) for l in ct.window_lines(log))


off, _, off_log = run("off", False)
on, on_files, on_log = run("on", True)
for tag, b in (("off", off), ("on", on)):
    for l in CHAINS:
        n, full, callers = b[l]
        print(f"[{tag}] {l}: {n} samples, full chain {100 * full / max(n, 1):.1f}%, "
              f"callers {sorted(callers.items(), key=lambda x: -x[1])[:5]}")

check(cfa(off_log, "frameless_leaf") == 0, "off: no caller from .eh_frame", str(cfa(off_log, "frameless_leaf")))
check(cfa(on_log, "frameless_leaf") > 0, "on: callers from .eh_frame (frameless_leaf in the window lines)",
      str(cfa(on_log, "frameless_leaf")))
check(cfa(on_log, "frameless_fault") == 0, "on: no unreadable stack slot", str(cfa(on_log, "frameless_fault")))
for l in CHAINS:
    n, full, _ = on[l]
    on_share = full / n if n else 0
    off_share = off[l][1] / off[l][0] if off[l][0] else 0
    check(n >= WANT[l], f"{l}: enough samples", f"{n}")
    check(on_share >= 0.97, f"{l}: >= 97% of samples with the full chain",
          f"{100 * on_share:.1f}% (without the tables: {100 * off_share:.1f}%)")
    # the test must be able to see the defect: the frameless leaves lose
    # their caller always, mid only in its prologue and epilogue
    check(off_share <= (0.9 if l == "mid" else 0.2),
          f"{l}: without the tables the chain is visibly broken", f"{100 * off_share:.1f}%")
# hostile: the same program with .eh_frame overwritten by random bytes
ehsize = int(subprocess.run(["objdump", "-h", work], capture_output=True, text=True).stdout
             .split(".eh_frame ")[1].split()[0], 16)
junk = os.path.join(d, "junk.bin")
with open(junk, "wb") as f:
    f.write(os.urandom(ehsize))
bad = os.path.join(d, "cframes-badcfi")
subprocess.run(["objcopy", "--update-section", f".eh_frame={junk}", work, bad], check=True)
hb, h_files, _ = run("hostile", True, bad, 20, {"leaf": 100, "mid": 0, "tip": 0})
check(hb["leaf"][0] > 0, "hostile .eh_frame: the process is still sampled", str(hb["leaf"][0]))
h_parsed = [ct.pprof_parses(p) for p in h_files]
check(h_files and all(h_parsed), "hostile .eh_frame: every profile parses",
      f"{h_parsed.count(False)} of {len(h_files)} failed")

a, b_ = on["leaf"][2].get("hotA", 0), on["leaf"][2].get("hotB", 0)
share = a / (a + b_) if a + b_ else 0
print(f"leaf by caller: hotA {a} hotB {b_} ({100 * share:.1f}% hotA)")
check(abs(share - 0.70) <= 0.05, "leaf: 70/30 split by caller within 5 points", f"{share:.3f}")
parsed = [ct.pprof_parses(p) for p in on_files]
check(on_files and all(parsed), "every profile parses with go tool pprof",
      f"{parsed.count(False)} of {len(on_files)} failed")
done()
