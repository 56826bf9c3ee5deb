"""scaleHeapSample: pushprof's C port (math.Exp as Go computes it on amd64)
gives the same int64 values as Go's own code for 200,000 inputs; the count
of inputs where glibc's exp() would have differed is printed."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ghlib  # noqa: E402
import pptest  # noqa: E402
from pptest import check, done  # noqa: E402

tmp = ghlib.tmpdir("pushprof-goheap-scale-")
gobin = ghlib.build("scale", tmp, "plain")
ref = pptest.run([gobin], timeout=120).stdout.splitlines()
inputs = "\n".join(" ".join(line.split()[:3]) for line in ref) + "\n"
ours = pptest.run([ghlib.TOOL, "scale"], input=inputs, timeout=120).stdout.splitlines()
check(len(ours) == len(ref) and len(ref) > 100000, "every input computed",
      f"{len(ours)} vs {len(ref)}")
bad, glibc_bad = [], 0
for a, b in zip(ref, ours):
    ga, gb = a.split(), b.split()
    if ga[:5] != gb[:5]:
        bad.append(f"go={a} ours={' '.join(gb[:5])}")
    if ga[3:5] != gb[5:7]:
        glibc_bad += 1
check(not bad, "identical to Go's scaleHeapSample", "; ".join(bad[:5]) + f" ({len(bad)} differ)")
print(f"inputs where glibc exp() would differ from Go: {glibc_bad} of {len(ref)}")
done()
