"""Ground truth: a Go program writes its own heap profile with
pprof.WriteHeapProfile and then idles; a snapshot read from outside must
equal it for every function and all four sample types - for plain, PIE,
stripped and stripped PIE builds, at the default rate and at rate 1.

Also checks: the period is the process's rate, the 25-deep recursion is
kept, inlined frames are expanded, the `latest` view adds the allocations
made after the last published cycle, and --push delivers the profile with
the series labels to a Parca-compatible receiver."""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ghlib  # noqa: E402
import pptest  # noqa: E402
from pptest import check, done  # noqa: E402

tmp = ghlib.tmpdir("pushprof-goheap-truth-")
RATES = (("default", None, 524288), ("rate1", "1", 1))

builds = [(variant, "go1.19", "go") for variant in ghlib.VARIANTS]
builds += [(variant, tc, go) for tc, go in ghlib.toolchains()[1:] for variant in ghlib.VARIANTS]
for variant, tc, go in builds:
    binary = ghlib.build("truth", tmp, variant, go)
    for rname, rate, want_period in RATES:
        tag = f"{tc}/{variant}/{rname}"
        own = os.path.join(tmp, f"own-{tc}-{variant}-{rname}.pb.gz")
        snap = os.path.join(tmp, f"snap-{tc}-{variant}-{rname}.pb.gz")
        env = {"PP_MEMPROFILERATE": rate} if rate else {}
        with ghlib.Workload(binary, [own], os.path.join(tmp, "ready"), env=env) as w:
            r = pptest.pushprof("snapshot", "--pid", str(w.pid), "--output", snap)
            latest = os.path.join(tmp, f"latest-{tc}-{variant}-{rname}.pb.gz")
            rl = pptest.pushprof("snapshot", "--pid", str(w.pid), "--view", "latest",
                                 "--output", latest)
        if not check(r.returncode == 0, f"{tag}: snapshot exits 0", r.stderr):
            continue
        stats = ghlib.snapshot_stats(r.stderr)
        check(stats.get("complete") == "true", f"{tag}: complete", r.stderr)
        diffs = ghlib.compare(own, snap)
        check(not diffs, f"{tag}: equals the program's own profile (4 sample types, "
              f"per function)", "; ".join(diffs[:8]))
        check(ghlib.period(snap) == want_period, f"{tag}: period is the process's rate "
              f"{want_period}", str(ghlib.period(snap)))
        frames = ghlib.max_frames_of(snap, "main.deepRetain")
        check(frames >= 20, f"{tag}: the recursion keeps 20+ frames of main.deepRetain",
              str(frames))
        traces = pptest.pprof("-traces", snap)
        check("main.newMap (inline)" in traces, f"{tag}: inlined frame expanded", "")
        # latest = active + all futures: it holds what the program allocated
        # after the last GC, e.g. while writing its own profile - at rate 1
        # surely (runtime/pprof's own buffers).
        if check(rl.returncode == 0, f"{tag}: --view latest exits 0", rl.stderr):
            fl = ghlib.per_function(latest, "alloc_space")
            fr = ghlib.per_function(snap, "alloc_space")
            total_l = sum(v[0] for v in fl.values())
            total_r = sum(v[0] for v in fr.values())
            check(total_l >= total_r, f"{tag}: latest holds at least the runtime view",
                  f"{total_l} < {total_r}")
            if rate == "1":
                newer = [f for f in fl if f.startswith("runtime/pprof.") and f not in fr]
                check(bool(newer), f"{tag}: latest includes allocations not yet published "
                      "(runtime/pprof.* while writing the profile)", str(sorted(fl)[:20]))

# Before any GC: every sample is in the unpublished cycles; runtime.MemProfile
# then adds them all (its "clear" case), and so must the runtime view.
import signal  # noqa: E402
import time  # noqa: E402

binary = ghlib.build("nogc", tmp, "plain")
own = os.path.join(tmp, "own-nogc.pb.gz")
snap = os.path.join(tmp, "snap-nogc.pb.gz")
ready = os.path.join(tmp, "ready-nogc")
with ghlib.Workload(binary, [own], ready) as w:
    r = pptest.pushprof("snapshot", "--pid", str(w.pid), "--output", snap)
    w.p.send_signal(signal.SIGUSR1)
    deadline = time.time() + 30
    while not os.path.exists(ready + ".done") and time.time() < deadline:
        time.sleep(0.02)
if check(r.returncode == 0, "no GC yet: snapshot exits 0", r.stderr):
    diffs = ghlib.compare(own, snap)
    check(not diffs, "no GC yet: runtime view equals the program's own profile (all cycles)",
          "; ".join(diffs[:8]))
    fns = ghlib.per_function(snap, "inuse_space")
    check(fns.get("main.grow", (0, 0))[0] > 0, "no GC yet: main.grow's memory is there",
          str(fns))

# --push: delivered with the series labels.
from receiver import Receiver  # noqa: E402

binary = os.path.join(tmp, "truth-plain")
own = os.path.join(tmp, "own-push.pb.gz")
rdir = os.path.join(tmp, "recv")
os.makedirs(rdir, exist_ok=True)
with Receiver(rdir) as recv, ghlib.Workload(binary, [own], os.path.join(tmp, "ready")) as w:
    cfg = os.path.join(tmp, "push.yaml")
    # the agent's spool, with a backlog that is not this command's to send
    # (CI: a snapshot --push replayed another agent's spooled OOM profile)
    spool = os.path.join(tmp, "agent-spool")
    os.makedirs(spool)
    with open(os.path.join(spool, "0000000000000001-other.spool"), "wb") as f:
        f.write(b"PPSPOOL-not-this-commands" * 10)
    with open(cfg, "w") as f:
        f.write(f"node: testnode\nexternal_labels: {{cluster: c1, pid: notme}}\n"
                f"remote_store: {{address: '{recv.address}', insecure: true}}\n"
                f"spool: {{directory: {spool}}}\n")
    r = pptest.pushprof("snapshot", "--pid", str(w.pid), "--push", "--config", cfg)
    check(sorted(os.listdir(spool)) == ["0000000000000001-other.spool"],
          "--push leaves the agent's spool alone", os.listdir(spool))
    check(r.returncode == 0, "--push exits 0", r.stderr)
    series = recv.series()
    check(len(series) == 1, "one series pushed", json.dumps(series)[:400])
    if series:
        labels = series[0]["labels"]
        want = {"__name__": "memory", "node": "testnode", "pid": str(w.pid),
                "comm": os.path.basename(binary)[:15], "trigger": "on_demand",
                "view": "runtime", "cluster": "c1"}
        for k, v in want.items():
            check(labels.get(k) == v, f"push label {k}={v}", str(labels))
        check(labels.get("executable", "").endswith("truth-plain"), "push label executable",
              str(labels))
        check("cgroup" in labels, "push label cgroup", str(labels))
        files = series[0].get("files", [])
        if check(len(files) == 1, "one profile in the series", str(series[0])):
            diffs = ghlib.compare(own, os.path.join(rdir, files[0]))
            check(not diffs, "pushed profile equals the program's own", "; ".join(diffs[:5]))

done()
