"""Hostile target memory: the bucket list of a live Go program is corrupted
through /proc/PID/mem (a loop, an absurd nstk, a pointer to unmapped
memory, a misaligned pointer); every snapshot still ends, exits 0 with a
profile marked incomplete and the reason, and never reads a bucket twice.
Also: stacks cut at go_heap.max_stack_depth are counted."""
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ghlib  # noqa: E402
import pptest  # noqa: E402
from pptest import check, done  # noqa: E402

tmp = ghlib.tmpdir("pushprof-goheap-hostile-")
binary = ghlib.build("truth", tmp, "plain")
r = pptest.run([ghlib.TOOL, "vars", binary])
v = dict(kv.split("=", 1) for kv in r.stdout.split())
mbuckets = int(v["mbuckets"], 16)   # non-PIE: runtime address = link-time address


def snap(pid, *extra):
    out = os.path.join(tmp, "s.pb.gz")
    r = pptest.pushprof("snapshot", "--pid", str(pid), "--output", out, *extra)
    return r, ghlib.snapshot_stats(r.stderr), out


with ghlib.Workload(binary, [os.path.join(tmp, "own.pb.gz")], os.path.join(tmp, "ready"),
                    env={"PP_MEMPROFILERATE": "1"}) as w:
    mem = open(f"/proc/{w.pid}/mem", "r+b", buffering=0)

    def rd(addr, n):
        mem.seek(addr)
        return mem.read(n)

    def wr(addr, data):
        mem.seek(addr)
        mem.write(data)

    def u64(addr):
        return struct.unpack("<Q", rd(addr, 8))[0]

    def walk():
        res = []
        b = u64(mbuckets)
        while b and len(res) < 100000:
            res.append(b)
            b = u64(b + 8)
        return res

    buckets = walk()
    n = len(buckets)
    check(n > 20, "the workload has buckets", str(n))

    # the idle program may still prepend a bucket while the snapshot runs
    # (see corrupt()): every bucket of the list before, none past it after
    r, st, _ = snap(w.pid)
    after = len(walk())
    check(r.returncode == 0 and st.get("complete") == "true" and
          st.get("buckets", "").isdigit() and n <= int(st["buckets"]) <= after,
          "intact list: complete, every bucket", f"{n}..{after} buckets: {r.stderr}")

    def corrupt(addr, data, what, want_reason, want_buckets):
        # The idle program may still prepend a bucket (e.g. its first
        # sleep), also while the snapshot runs: count from the list as it
        # is before the snapshot and as it is after; the snapshot read the
        # head at one of those moments.
        lo = want_buckets + walk().index(buckets[0])
        old = rd(addr, len(data))
        wr(addr, data)
        try:
            r, st, out = snap(w.pid)
        finally:
            wr(addr, old)
        hi = want_buckets + walk().index(buckets[0])
        check(r.returncode == 0, f"{what}: exits 0", r.stderr)
        check(st.get("complete") == "false" and want_reason in st.get("reason", ""),
              f"{what}: incomplete, reason '{want_reason}'", r.stderr)
        check(st.get("buckets", "").isdigit() and lo <= int(st["buckets"]) <= hi,
              f"{what}: {lo}{'' if lo == hi else f'..{hi}'} buckets kept", r.stderr)
        if r.returncode == 0:
            comments = pptest.pprof("-comments", out)
            check(want_reason in comments, f"{what}: the profile says why", comments)

    # The oldest bucket's allnext back to the third: a loop of n-2.
    corrupt(buckets[-1] + 8, struct.pack("<Q", buckets[2]), "loop", "loops", n)
    # A loop onto itself.
    corrupt(buckets[5] + 8, struct.pack("<Q", buckets[5]), "self loop", "loops", 6)
    # A loop longer than half of max_buckets: the limit is reached before the
    # loop is seen, and still no bucket is kept twice.
    # The list's distinct buckets are the n above plus any the program
    # prepended meanwhile (counted after, as corrupt() does): a bucket kept
    # twice would take the count past them, up to the limit.
    old = rd(buckets[-1] + 8, 8)
    wr(buckets[-1] + 8, struct.pack("<Q", buckets[1]))
    try:
        r, st, _ = snap(w.pid, "--max-buckets", str(n + n // 2))
    finally:
        wr(buckets[-1] + 8, old)
    distinct = n + walk().index(buckets[0])
    check(r.returncode == 0 and st.get("complete") == "false" and
          "loops" in st.get("reason", "") and st.get("buckets", "").isdigit() and
          n <= int(st["buckets"]) <= distinct,
          "loop found at the bucket limit: each bucket once, reason 'loops'",
          f"{n}..{distinct} distinct buckets: {r.stderr}")
    corrupt(buckets[3] + 40, struct.pack("<Q", 1 << 40), "nstk 2^40", "claims", 3)
    corrupt(buckets[3] + 40, struct.pack("<Q", 1025), "nstk 1025", "claims", 3)
    corrupt(buckets[2] + 8, struct.pack("<Q", 0x10), "pointer to unmapped memory",
            "not readable", 3)
    corrupt(buckets[2] + 8, struct.pack("<Q", buckets[4] + 3), "misaligned pointer",
            "misaligned", 3)
    corrupt(buckets[4] + 16, struct.pack("<Q", 2), "block-profile type", "type 2", 4)
    mem.close()

    r, st, out = snap(w.pid, "--max-stack-depth", "5")
    check(r.returncode == 0 and int(st.get("truncated_stacks", 0)) > 0,
          "max_stack_depth 5: stacks truncated and counted", r.stderr)
    if r.returncode == 0:
        frames = ghlib.max_frames_of(out, "main.deepRetain")
        check(0 < frames <= 5, "max_stack_depth 5: at most 5 frames kept", str(frames))

# Buckets as an OOM capture could deliver them (garbage PCs, empty, deep and
# recursive stacks, frees above allocs): both views build a profile that
# passes Parca's rules.
r = pptest.run([ghlib.TOOL, "fuzz-profile", binary, "150"], timeout=300)
check(r.returncode == 0 and r.stdout.startswith("ok 150"),
      "150 random bucket sets: valid profiles in both views", r.stdout + r.stderr[-500:])

done()
