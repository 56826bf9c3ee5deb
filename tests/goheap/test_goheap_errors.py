"""Clear errors and distinct exit codes: no such process (3), not a Go
program (4, also a kernel thread), memory profiling disabled (5: a program
without any pprof reference), permission denied (6: an unprivileged user);
enable_profiling turns a rate-0 program's profiling on, after which a later
snapshot holds its allocations (plain and stripped builds); a process that
exits before or during the read gives an error or an incomplete profile,
never a crash."""
import os
import random
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ghlib  # noqa: E402
import pptest  # noqa: E402
from pptest import check, done  # noqa: E402

tmp = ghlib.tmpdir("pushprof-goheap-err-")
out = os.path.join(tmp, "out.pb.gz")


def snap(pid, *extra, output=out):
    if os.path.exists(output):
        os.unlink(output)
    return pptest.pushprof("snapshot", "--pid", str(pid), "--output", output, *extra)


def no_crash(r, what):
    check(r.returncode >= 0 and "Sanitizer" not in r.stderr and "runtime error" not in r.stderr,
          f"{what}: no crash", f"rc={r.returncode} {r.stderr[-400:]}")


# Not a Go program.
p = subprocess.Popen(["sleep", "60"])
r = snap(p.pid)
check(r.returncode == 4, "non-Go process: exit 4", f"{r.returncode} {r.stderr}")
check("not a Go program" in r.stderr, "non-Go process: says so", r.stderr)
check(not os.path.exists(out), "non-Go process: no profile written")
p.kill()
p.wait()

r = snap(2)
check(r.returncode == 4 and "kernel thread" in r.stderr, "kernel thread: exit 4, says so",
      f"{r.returncode} {r.stderr}")

# No such process: a pid that just exited and was reaped.
p = subprocess.Popen(["true"])
p.wait()
r = snap(p.pid)
check(r.returncode == 3, "exited process: exit 3", f"{r.returncode} {r.stderr}")
check("no such process" in r.stderr, "exited process: says so", r.stderr)

r = pptest.pushprof("snapshot", "--pid", "abc")
check(r.returncode == 2, "bad --pid: exit 2", f"{r.returncode} {r.stderr}")
r = pptest.pushprof("snapshot", "--pid", "1", "--view", "newest")
check(r.returncode == 2, "bad --view: exit 2", f"{r.returncode} {r.stderr}")

# Rate 0: a program that references no heap profile.
norate_builds = [("plain", "go"), ("stripped", "go")]
norate_builds += [("stripped", go) for _, go in ghlib.toolchains()[1:]]
for variant, go in norate_builds:
    binary = ghlib.build("norate", tmp, variant, go)
    if go != "go":
        variant += "-go1.23"
    with ghlib.Workload(binary, [], os.path.join(tmp, "ready")) as w:
        r = snap(w.pid)
        check(r.returncode == 5, f"{variant} rate-0 program: exit 5", f"{r.returncode} {r.stderr}")
        check("memory profiling disabled" in r.stderr, f"{variant} rate-0: says "
              "'memory profiling disabled'", r.stderr)
        check(not os.path.exists(out), f"{variant} rate-0: no profile written")
        # Still disabled a moment later (nothing changed by looking).
        time.sleep(0.3)
        r = snap(w.pid)
        check(r.returncode == 5, f"{variant} rate-0: still disabled without enable_profiling",
              f"{r.returncode} {r.stderr}")
        r = snap(w.pid, "--enable-profiling")
        check(r.returncode == 5 and "wrote runtime.MemProfileRate=524288" in r.stderr,
              f"{variant} --enable-profiling: writes the rate, says so",
              f"{r.returncode} {r.stderr}")
        ok = None
        deadline = time.time() + 10
        while time.time() < deadline:
            time.sleep(0.25)
            ok = snap(w.pid)
            if ok.returncode == 0:
                break
        if check(ok is not None and ok.returncode == 0,
                 f"{variant}: a later snapshot succeeds", ok and ok.stderr):
            fns = ghlib.per_function(out, "alloc_space")
            check("main.leaker" in fns and fns["main.leaker"][0] > 0,
                  f"{variant}: the later snapshot holds main.leaker's allocations",
                  str(fns))
            check(ghlib.period(out) == 524288, f"{variant}: its period is 524288",
                  str(ghlib.period(out)))
        r = snap(w.pid, "--enable-profiling")
        check(r.returncode == 0 and "wrote" not in r.stderr,
              f"{variant} --enable-profiling on an enabled program: no write", r.stderr)

# Permission denied: an unprivileged user against root's Go program.
binary = os.path.join(tmp, "norate-plain")
with ghlib.Workload(binary, [], os.path.join(tmp, "ready")) as w:
    nobody_out = os.path.join("/tmp", f"pushprof-nobody-{os.getpid()}.pb.gz")
    r = pptest.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                    pptest.PUSHPROF, "snapshot", "--pid", str(w.pid), "--output", nobody_out])
    check(r.returncode == 6, "unprivileged user: exit 6", f"{r.returncode} {r.stderr}")
    check("ermission denied" in r.stderr or "not allowed" in r.stderr,
          "unprivileged user: says permission denied", r.stderr)
    if os.path.exists(nobody_out):
        os.unlink(nobody_out)

# Exit before the read: attached, then SIGKILLed, then goheap_read().
many = ghlib.build("many", tmp, "plain")
w = ghlib.Workload(many, ["65536", os.path.join(tmp, "many-own.pb.gz")],
                   os.path.join(tmp, "ready"), env={"PP_MEMPROFILERATE": "1"})
r = pptest.run([ghlib.TOOL, "kill-then-read", str(w.pid)])
w.stop()
check(r.returncode == 0 and "rc=-3 " in r.stdout and "exited" in r.stdout,
      "process killed after attach: goheap_read returns -ESRCH, 'the process exited'",
      r.stdout + r.stderr)

# Exit during the read: kill at random moments while snapshots run.
outcomes = {}
random.seed(4)
for i in range(6):
    w = ghlib.Workload(many, ["65536", os.path.join(tmp, "many-own.pb.gz")],
                       os.path.join(tmp, "ready"), env={"PP_MEMPROFILERATE": "1"})
    o = os.path.join(tmp, f"race{i}.pb.gz")
    sp = subprocess.Popen([pptest.PUSHPROF, "snapshot", "--pid", str(w.pid), "--output", o,
                           "--max-buckets", "200000"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(random.uniform(0.005, 0.08))
    w.stop()
    so, se = sp.communicate(timeout=60)
    r = subprocess.CompletedProcess(sp.args, sp.returncode, so, se)
    no_crash(r, f"kill during snapshot #{i}")
    stats = ghlib.snapshot_stats(se)
    kind = ("ok" if r.returncode == 0 and stats.get("complete") == "true" else
            "incomplete" if r.returncode == 0 else f"exit{r.returncode}")
    outcomes[kind] = outcomes.get(kind, 0) + 1
    check(r.returncode in (0, 3), f"kill during snapshot #{i}: exit 0 or 3 ({kind})", se)
    if r.returncode == 0:
        pptest.pprof("-top", o)    # parses
        if stats.get("complete") != "true":
            check("exited" in stats.get("reason", ""), f"#{i}: incomplete says the process "
                  "exited", se)
    else:
        check("exited" in se or "no such process" in se, f"#{i}: says the process is gone", se)
print("outcomes:", outcomes)

done()
