"""Stacks of every size reach the profile whole. The sampler keeps stacks of
up to 32 frames and longer ones in two maps of different value sizes
(bpf/cpu_abi.h, CPU_SMALL_DEPTH); workloads/deep.c runs three threads with
stacks of about 8 frames (short), about 55 (long) and 300+ (recursion).

Run 1, default depth (127): the short and the long chains are complete in
order, leaf first (spin_short s3 s2 s1 run_short; spin_long l48 ... l1
run_long); the recursion's stacks stop at 127 frames and the window lines
count them as truncated.
Run 2, cpu.max_stack_depth 32 (a stack of exactly the small maps' size) and
run 3, 33 (one frame over it): the long thread's stacks are its 32 or 33
leaf-most frames, exactly. Every profile parses with `go tool pprof`.
"""
import os
import subprocess

import cputest as ct
import pptest
from pptest import check, done, tmpdir, local_name

d = tmpdir()
deep = ct.build_c("deep", d, flags=("-pthread",))
SHORT = ["spin_short", "s3", "s2", "s1", "run_short"]
LONG = ["spin_long"] + [f"l{i}" for i in range(48, 0, -1)] + ["run_long"]


def run(depth):
    w = subprocess.Popen([deep, "40"])
    sub = os.path.join(d, f"depth{depth or 127}")
    os.makedirs(sub)
    cfg, store = ct.write_config(sub, f"targets:\n  - pids: [{w.pid}]\n")
    if depth:
        with open(cfg) as f:
            text = f.read()
        with open(cfg, "w") as f:
            f.write(text.replace("interval: 1s}", f"interval: 1s, max_stack_depth: {depth}}}"))
    agent = pptest.Agent(cfg, args=["--duration", "40s"])

    def longs(path):
        if local_name(path).pid != w.pid:
            return 0
        return ct.Prof(path).count_where(lambda f: f[:1] == ["spin_long"])
    got = ct.collect_until(store, longs, enough=150, min_secs=2.5, max_secs=30)
    log, files = ct.stop_checked(agent, store, [w])
    samples = [s for p in files if local_name(p).pid == w.pid for s in ct.Prof(p).samples]
    return got, samples, ct.window_lines(log)


def share(samples, leaf, pred):
    n = sum(v for f, k, v, l in samples if f[:1] == [leaf])
    ok = sum(v for f, k, v, l in samples if f[:1] == [leaf] and pred(f))
    return ok, n


got, samples, wins = run(0)
check(got >= 100, "the long thread was sampled", f"{got} samples")
for leaf, chain in (("spin_short", SHORT), ("spin_long", LONG)):
    ok, n = share(samples, leaf, lambda f, c=chain: f[:len(c)] == c)
    check(n >= 50 and ok >= 0.97 * n, f"{leaf}: the whole chain, leaf first, {len(chain)} frames",
          f"{ok}/{n}")
ok, n = share(samples, "spin_rec", lambda f: len(f) == 127 and set(f[1:]) == {"rec"})
check(n >= 50 and ok >= 0.97 * n, "the recursion: 127 frames, spin_rec under rec only",
      f"{ok}/{n}")
trunc = sum(int(ct.logfields(x).get("truncated", 0)) for x in wins)
check(trunc >= n, "truncated stacks counted in the window lines", f"truncated={trunc}, {n} samples")

for depth in (32, 33):
    got, samples, _ = run(depth)
    ok, n = share(samples, "spin_long", lambda f, k=depth: f == LONG[:k])
    check(n >= 50 and ok >= 0.97 * n,
          f"max_stack_depth {depth}: the long thread's {depth} leaf-most frames, exactly",
          f"{ok}/{n}")
done()
