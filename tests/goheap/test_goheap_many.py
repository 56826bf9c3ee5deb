"""More than 100,000 distinct buckets: a snapshot is complete and equals the
program's own profile; with go_heap.max_buckets below the count it is marked
incomplete, says why (stderr and a profile comment) and still parses."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ghlib  # noqa: E402
import pptest  # noqa: E402
from pptest import check, done  # noqa: E402

tmp = ghlib.tmpdir("pushprof-goheap-many-")
binary = ghlib.build("many", tmp, "plain")
own = os.path.join(tmp, "own.pb.gz")
snap = os.path.join(tmp, "snap.pb.gz")
part = os.path.join(tmp, "part.pb.gz")
cfg = os.path.join(tmp, "cfg.yaml")
with open(cfg, "w") as f:
    f.write("go_heap: {max_buckets: 50000}\n")

N = 120000   # distinct stacks, one bucket each
with ghlib.Workload(binary, [str(N), own], os.path.join(tmp, "ready"),
                    env={"PP_MEMPROFILERATE": "1"}) as w:
    r = pptest.pushprof("snapshot", "--pid", str(w.pid), "--output", snap,
                        "--max-buckets", "1000000")
    rp = pptest.pushprof("snapshot", "--pid", str(w.pid), "--output", part, "--config", cfg)
    rd = pptest.pushprof("snapshot", "--pid", str(w.pid), "--output", part + ".def")
    # pprof_encode writes the wire format itself: the bytes must be the ones
    # protobuf-c packs for the same message (unpacked and repacked).
    rc_ = pptest.run([ghlib.TOOL, "canon", str(w.pid)], timeout=300)
check("canon ok" in rc_.stdout, "the encoding equals protobuf-c's packing", rc_.stdout + rc_.stderr)

if check(r.returncode == 0, "snapshot of >100,000 buckets exits 0", r.stderr):
    st = ghlib.snapshot_stats(r.stderr)
    check(int(st.get("buckets", 0)) > N, f"more than {N} buckets read", r.stderr)
    check(st.get("complete") == "true", "complete", r.stderr)
    diffs = ghlib.compare_raw(own, snap)
    check(not diffs, "equals the program's own profile", "; ".join(diffs[:5]))
    nsamples = pptest.pprof("-raw", snap).count("bytes:[")
    check(nsamples > N, f"one sample per distinct bucket (> {N})", str(nsamples))
    print("stats:", st)

if check(rp.returncode == 0, "max_buckets 50000 (config): exits 0", rp.stderr):
    st = ghlib.snapshot_stats(rp.stderr)
    check(st.get("buckets") == "50000" and st.get("complete") == "false",
          "reads exactly 50000 buckets, incomplete", rp.stderr)
    check("max_buckets" in st.get("reason", ""), "the reason names go_heap.max_buckets",
          rp.stderr)
    comments = pptest.pprof("-comments", part)
    check("incomplete" in comments and "max_buckets" in comments,
          "the profile carries the reason as a comment", comments)

# The default limit is 100,000 (config default): incomplete here too.
if check(rd.returncode == 0, "default limit: exits 0", rd.stderr):
    st = ghlib.snapshot_stats(rd.stderr)
    check(st.get("buckets") == "100000" and st.get("complete") == "false",
          "default go_heap.max_buckets (100000) applies", rd.stderr)

done()
