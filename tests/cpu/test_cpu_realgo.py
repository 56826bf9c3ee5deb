"""CPU stacks of a real Go program nobody here wrote against its own profiler:
Debian's Prometheus (Go 1.19, stripped, cgo) under HTTP load,
sampled by pushprof while its own /debug/pprof/profile records the same
seconds (realgo.py). Over the top 15 leaves of pushprof's profile, the
share of samples under a caller Go's own profile never shows for that leaf:
with the leaf tables at most 3 %, the goal (docs/performance.md; measured 0.5-1.2 % in
single 20 s runs since Go prologues and epilogues are decoded, 2.5-4.0 %
before, against a noise floor of 0.5-3.9 %: Go's own profile split in two
random halves, whose "wrong" callers are legitimate ones the other half did
not happen to sample), without them (PUSHPROF_FRAMELESS=off) at least 15 % (the
~30 % before the tables: the test sees the defect). Skipped when prometheus is not
installed (scripts/setup.sh --tests installs it).

Under load the comparison gets noisier, not the stacks worse: with both CPUs
busy elsewhere Prometheus gets half the samples, and the noise floor rose to
1.9-3.5 % in single rounds (measured 2026-12-02, two spinning shells and two
builds beside it). The bound is the goal plus the floor's excess over the 1 %
a quiet machine shows: 3 % when the floor is at most 1 %, 3 % + (floor - 1 %)
above that, always far under the plain walk's >= 15 %. Stacks under
runtime.sysmon are left out of the comparison: Go's own profiler never
samples that thread (realgo.py, UNSEEN_BY_GO).
"""
import shutil

import realgo
from pptest import PUSHPROF, check, done

if not shutil.which("prometheus"):
    print("prometheus not installed (scripts/setup.sh --tests installs it): skipped")
    raise SystemExit(77)


def bound(t):
    """The goal, 3 %, plus the noise floor's excess over a quiet 1 %."""
    return 0.03 + max(0.0, t["gbad"] / max(t["gn"], 1) - 0.01)


tot = realgo.measure(PUSHPROF, secs=20, rounds=1, top=15)
for _ in range(2):
    # One 20 s round has a noise floor of up to ~4 % (legitimate callers Go's
    # own profile did not happen to sample): on a miss, a second round is
    # pooled with the first, which halves that noise; a real loss of callers
    # (the plain walk: >= 15 %) stays far above the goal either way. A loaded
    # host gives Prometheus less CPU, so fewer samples in 20 s: pooled too.
    if tot["on"]["bad"] > bound(tot["on"]) * max(tot["on"]["n"], 1):
        print(f"over {100 * bound(tot['on']):.1f} %: pooling another round")
    elif min(tot["on"]["n"], tot["off"]["n"]) < 300:
        print(f"{tot['off']['n']} / {tot['on']['n']} samples: pooling another round")
    else:
        break
    more = realgo.measure(PUSHPROF, secs=20, rounds=1, top=15)
    for k in tot:
        for f in ("bad", "n", "gbad", "gn"):
            tot[k][f] += more[k][f]
off, on = tot["off"], tot["on"]
share = {k: t["bad"] / max(t["n"], 1) for k, t in tot.items()}
floor = on["gbad"] / max(on["gn"], 1)
print(f"wrong caller: off {100 * share['off']:.1f}%, on {100 * share['on']:.1f}% "
      f"(noise floor {100 * floor:.1f}%)")
check(on["n"] >= 300 and off["n"] >= 300, "enough samples in the top leaves",
      f"off {off['n']} on {on['n']}")
check(share["on"] <= bound(on),
      "with the leaf tables: callers as Go's own profile shows them",
      f"{100 * share['on']:.1f}% wrong, bound {100 * bound(on):.1f}%, "
      f"noise floor {100 * floor:.1f}%")
check(share["off"] >= 0.15, "without them the plain walk loses callers",
      f"{100 * share['off']:.1f}% wrong")
done()
