"""Go leaves whose %rbp is not their own frame against Go's own CPU profiler
(the frameless-leaf tables).

workloads/leaves.go spends its time in leaves with a zero-size frame (no
saved frame pointer): runtime.memmove (a large copy from main.copyBig),
runtime.memclrNoHeapPointers (a clearing loop in main.clearBig), and the
compiled leaf main.mix called from main.hotA and main.hotB 70/30, and
runtime/internal/syscall.Syscall6 (reads of /dev/zero: time in the kernel
under a frameless assembly leaf); also in
crypto/sha256.block (assembly with a frame that uses %rbp as data: the
plain walk reads junk above it).
It runs runtime/pprof's CPU profiler on itself while the agent samples it.

Run twice: with the frameless table off (PUSHPROF_FRAMELESS=off: the plain
frame-pointer walk, which goes from the leaf to the grand-caller) and on.
For each leaf, the share of pushprof's samples whose immediate caller Go
never shows for that leaf ("wrong caller") is printed for both runs and
must be <= 3 % with the table for every leaf. Also: the 70/30
split of main.mix by caller within 5 points, the whole chain main.main ->
main.hotA -> main.mix, and every profile parses with `go tool pprof`.
Sampling goes on until every leaf has enough samples (bounded in time),
so the test does not depend on the machine's speed.
"""
import collections

import cputest as ct
from pptest import check, done, tmpdir

KERNEL = "[kernel.kallsyms]"
FRAMELESS = ["runtime.memmove", "runtime.memclrNoHeapPointers", "main.mix",
             "runtime/internal/syscall.Syscall6"]
OTHER = ["crypto/sha256.block"]
WANT = 300          # pushprof samples per frameless leaf
GO_WANT = 100       # Go's own samples per frameless leaf (it samples at 100 Hz)
TIME_LIMIT = 120    # seconds per run, generous for a loaded machine

d = tmpdir()
leaves = ct.build_go("leaves", d)


def callers(samples):
    """leaf -> Counter(immediate caller) over user frames ('<none>' when
    the stack ends at the leaf)."""
    out = collections.defaultdict(collections.Counter)
    for frames, kinds, v, _ in samples:
        user = [f for f, k in zip(frames, kinds) if k != KERNEL]
        if user and user[0] in FRAMELESS + OTHER:
            out[user[0]][user[1] if len(user) > 1 else "<none>"] += v
    return out


def run(tag, frameless):
    def enough(samples):
        c = callers(samples)
        return all(sum(c[l].values()) >= WANT for l in FRAMELESS)
    return ct.run_with_go_profile(d, tag, [leaves, "{gprof}", str(TIME_LIMIT + 30), "2"],
                                  frameless, enough, TIME_LIMIT)


def report(tag, ours, go):
    """Per leaf: (samples, wrong-caller share); prints both distributions."""
    mine, theirs = callers(ours), callers(go)
    res = {}
    for leaf in FRAMELESS + OTHER:
        n = sum(mine[leaf].values())
        known = set(theirs[leaf]) - {"<none>"}  # a stack that ends there: no caller
        wrong = sum(v for c, v in mine[leaf].items() if c not in known)
        res[leaf] = (n, wrong / n if n else 1.0)
        print(f"[{tag}] {leaf}: {n} samples, wrong caller {100 * res[leaf][1]:.1f}%")
        print(f"    pushprof: {mine[leaf].most_common(5)}")
        print(f"    go:       {theirs[leaf].most_common(5)}")
    return res, mine, theirs


off_samples, off_go, _, off_log = run("off", False)
on_samples, on_go, on_files, on_log = run("on", True)
before, _, _ = report("off", off_samples, off_go)
after, mine, theirs = report("on", on_samples, on_go)


def fl_leaf(log):
    return sum(int(ct.logfields(l).get("frameless_leaf", "0")) for l in ct.window_lines(log))


check(fl_leaf(off_log) == 0, "off: no caller read from [sp]", str(fl_leaf(off_log)))
check(fl_leaf(on_log) > 0, "on: callers read from [sp] (frameless_leaf in the window lines)",
      str(fl_leaf(on_log)))
for leaf in FRAMELESS:
    n, share = after[leaf]
    gn = sum(theirs[leaf].values())
    check(n >= WANT and gn >= GO_WANT, f"{leaf}: enough samples", f"pushprof {n} go {gn}")
    check(share <= 0.03, f"{leaf}: <= 3% of samples under a caller Go never shows",
          f"{100 * share:.1f}% (without the table: {100 * before[leaf][1]:.1f}%)")
    # the comparison must be able to see the defect at all
    check(before[leaf][1] >= 0.2, f"{leaf}: without the table the caller is lost",
          f"{100 * before[leaf][1]:.1f}%")
for leaf in OTHER:
    # assembly with a frame that uses %rbp as data: the caller from pcsp
    n, share = after[leaf]
    check(n >= WANT // 3 and share <= 0.03,
          f"{leaf}: <= 3% of samples under a caller Go never shows",
          f"{n} samples, {100 * share:.1f}% (without the table: {100 * before[leaf][1]:.1f}%)")
    check(before[leaf][1] >= 0.2, f"{leaf}: without the table the caller is lost",
          f"{100 * before[leaf][1]:.1f}%")

# The first window holds the target's first samples: the agent analyses a
# new executable before it allows the pid (allowed first, they were walked
# plainly until the table was in, 0.3-0.6 s for a large binary)
first = next((c for c in (callers(ct.Prof(p).samples) for p in on_files)
              if any(c[l] for l in FRAMELESS)), None)
if check(first is not None, "on: a first window with frameless leaves"):
    n = sum(sum(first[l].values()) for l in FRAMELESS)
    bad = sum(v for l in FRAMELESS for c, v in first[l].items()
              if c not in set(theirs[l]) - {"<none>"})
    check(bad <= 0.03 * n, "on: first window: <= 3% of frameless-leaf samples under a wrong "
          "caller", f"{bad} of {n}")

a, b = mine["main.mix"]["main.hotA"], mine["main.mix"]["main.hotB"]
ga, gb = theirs["main.mix"]["main.hotA"], theirs["main.mix"]["main.hotB"]
share = a / (a + b) if a + b else 0
print(f"main.mix by caller: hotA {a} hotB {b} ({100 * share:.1f}% hotA; Go's own: "
      f"hotA {ga} hotB {gb})")
check(abs(share - 0.70) <= 0.05, "main.mix: 70/30 split by caller within 5 points",
      f"hotA {share:.3f} (Go's own: {ga / (ga + gb) if ga + gb else 0:.3f})")
chain = sum(v for frames, kinds, v, _ in on_samples
            if ct.has_chain([f for f, k in zip(frames, kinds) if k != KERNEL],
                            ["main.mix", "main.hotA", "main.main"]))
check(chain > 0, "main.main -> main.hotA -> main.mix, whole", str(chain))
parsed = [ct.pprof_parses(p) for p in on_files]
check(on_files and all(parsed), "every profile parses with go tool pprof",
      f"{parsed.count(False)} of {len(on_files)} failed")
done()
