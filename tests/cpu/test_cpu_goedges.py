"""Go leaves sampled in their prologue or epilogue against Go's own CPU
profiler (compiled Go functions, not only frameless ones).

workloads/edges.go spends its time in main.step, a small function with a
frame called at a very high rate from main.edgeA and main.edgeB (70/30).
For a few instructions at its start and end (`sub; mov %rbp; lea` and
`add; ret` up to Go 1.20, `push %rbp; mov %rsp,%rbp` and `ret` from Go
1.21) %rbp is still the caller's frame, so a plain frame-pointer walk hangs
those samples under the grand-caller. BPF decodes those instructions at the
leaf (bpf/cpu_abi.h, "Go prologues and epilogues").

Run for the Go 1.19 build and, when installed, the Go 1.23 build: with the
tables off (PUSHPROF_FRAMELESS=off, the plain walk) and on. The share of
main.step's samples under a caller Go's own profile never shows must be
<= 3 % with the tables on, and visible (>= 5 %) without them, so that the
comparison can see the defect at all; the 70/30 split by caller within 5
points; the whole chain; go_edge counted in the window lines only when on;
every profile parses with `go tool pprof`.
"""
import collections

import cputest as ct
from pptest import check, done, tmpdir

KERNEL = "[kernel.kallsyms]"
LEAF = "main.step"
WANT = 400          # pushprof samples of the leaf
TIME_LIMIT = 120    # seconds per run, generous for a loaded machine

d = tmpdir()
builds = ct.build_go_versions("edges", d)


def callers(samples):
    """Counter of main.step's immediate caller over user frames."""
    out = collections.Counter()
    for frames, kinds, v, _ in samples:
        user = [f for f, k in zip(frames, kinds) if k != KERNEL]
        if user and user[0] == LEAF:
            out[user[1] if len(user) > 1 else "<none>"] += v
    return out


def go_edge(log):
    return sum(int(ct.logfields(l).get("go_edge", "0")) for l in ct.window_lines(log))


for name, exe in builds:
    res = {}
    for tag, on in (("off", False), ("on", True)):
        def enough(samples):
            return sum(callers(samples).values()) >= WANT
        ours, go, files, log = ct.run_with_go_profile(
            d, f"{name}-{tag}", [exe, "{gprof}", str(TIME_LIMIT + 30), "2"], on, enough,
            TIME_LIMIT)
        mine, theirs = callers(ours), callers(go)
        known = set(theirs) - {"<none>"}
        n = sum(mine.values())
        wrong = sum(v for c, v in mine.items() if c not in known)
        res[tag] = (n, wrong / n if n else 1.0, mine, theirs, ours, files, log)
        print(f"[{name} {tag}] {LEAF}: {n} samples, wrong caller {100 * wrong / max(n, 1):.1f}%"
              f", go_edge {go_edge(log)}")
        print(f"    pushprof: {mine.most_common(5)}")
        print(f"    go:       {theirs.most_common(5)}")
    n, share, mine, theirs, ours, files, log = res["on"]
    check(n >= WANT and sum(theirs.values()) >= 100, f"{name}: enough samples",
          f"pushprof {n} go {sum(theirs.values())}")
    check(share <= 0.03, f"{name}: <= 3% of {LEAF}'s samples under a caller Go never shows",
          f"{100 * share:.1f}% (plain walk: {100 * res['off'][1]:.1f}%)")
    check(res["off"][1] >= 0.05, f"{name}: without the fix the caller is lost for some samples",
          f"{100 * res['off'][1]:.1f}%")
    check(go_edge(res["off"][6]) == 0 and go_edge(log) > 0,
          f"{name}: go_edge counted only with the tables on",
          f"off {go_edge(res['off'][6])} on {go_edge(log)}")
    a, b = mine["main.edgeA"], mine["main.edgeB"]
    split = a / (a + b) if a + b else 0
    check(abs(split - 0.70) <= 0.05, f"{name}: 70/30 split by caller within 5 points",
          f"edgeA {split:.3f} (Go's own: {theirs['main.edgeA']} / {theirs['main.edgeB']})")
    chain = sum(v for frames, kinds, v, _ in ours
                if ct.has_chain([f for f, k in zip(frames, kinds) if k != KERNEL],
                                [LEAF, "main.edgeA", "main.main.func1"]))
    check(chain > 0, f"{name}: main.main.func1 -> main.edgeA -> {LEAF}, whole", str(chain))
    parsed = [ct.pprof_parses(p) for p in files]
    check(files and all(parsed), f"{name}: every profile parses with go tool pprof",
          f"{parsed.count(False)} of {len(files)} failed")
done()
