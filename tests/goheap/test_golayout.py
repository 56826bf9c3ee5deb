"""The Go runtime layout pushprof mirrors is stated once (bpf/golayout.h),
each item with the runtime source lines it copies, for Go 1.19 and 1.23;
the heap profile code cites the runtime/pprof functions it ports. Every
such citation is checked against the Go sources installed here
(/usr/lib/go-1.19/src, /usr/lib/go-1.23/src): the cited line must hold the
cited declaration, and every citation must be one this test knows, so a
moved line or a new unchecked citation fails here."""
import os
import re

from pptest import check, done

ROOT = os.environ.get("PUSHPROF_SOURCE_DIR",
                      os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
FILES = ["bpf/golayout.h", "agent/goheap/goheap_scale.c", "agent/goheap/goheap_pprof.c"]
GOROOT = {"1.19": "/usr/lib/go-1.19", "1.23": "/usr/lib/go-1.23"}
VERSION = {"1.19": "go1.19.8", "1.23": "go1.23.5"}   # what golayout.h says it was checked on
GOFILE = {"mprof.go": "runtime/mprof.go", "protomem.go": "runtime/pprof/protomem.go",
          "proto.go": "runtime/pprof/proto.go"}

# The text before a citation on its line -> what the cited Go line holds.
DECL = {
    "runtime.bucket": r"^type bucket struct",
    "bucket.stk()": r"^func \(b \*bucket\) stk\(\)",
    "memProfile bucketType = 1 + iota": r"^\s*memProfile bucketType = 1 \+ iota",
    "maxStack": r"^\s*maxStack\s*= 32$",
    "maxProfStackDepth": r"^\s*maxProfStackDepth\s*= 1024$",
    "runtime.memRecordCycle": r"^type memRecordCycle struct",
    "runtime.memRecord": r"^type memRecord struct",
    "active memRecordCycle": r"^\s*active\s+memRecordCycle$",
    "future [3]memRecordCycle": r"^\s*future\s+\[3\]memRecordCycle$",
    "It follows the stack: bucket.mp()": r"^func \(b \*bucket\) mp\(\)",
    "runtime.mbuckets": r"^\s*mbuckets\s+atomic\.UnsafePointer",
    "runtime.mProfCycle": r"^\s*mProfCycle\s+mProfCycleHolder$",
    "type mProfCycleHolder": r"^type mProfCycleHolder struct",
    "index := cycle % 3 in MemProfile": r"^\s*index := cycle % uint32\(len\(memRecord\{\}\.future\)\)",
    "runtime.MemProfileRate": r"^var MemProfileRate int",
    "scaleHeapSample": r"^func scaleHeapSample\(",
    "writeHeapProto": r"^func writeHeapProto\(",
    "appendLocsForStack": r"^func \(b \*profileBuilder\) appendLocsForStack\(",
}

CITE = re.compile(r"(?:[\w/]*/)?(\w+\.go):(\d+) \((1\.19|1\.23)\)(?:, :(\d+) \((1\.23)\))?")

for v, root in GOROOT.items():
    with open(os.path.join(root, "VERSION")) as f:
        have = f.read().split()[0]
    check(have == VERSION[v], f"Go {v} sources are {VERSION[v]}, the release cited",
          f"{root} has {have}: check the citations against it and update VERSION here")

src = {}


def go_line(v, gofile, n):
    key = (v, gofile)
    if key not in src:
        with open(os.path.join(GOROOT[v], "src", GOFILE[gofile])) as f:
            src[key] = f.read().split("\n")
    lines = src[key]
    return lines[n - 1] if 0 < n <= len(lines) else ""


seen = set()
ncites = 0
for rel in FILES:
    with open(os.path.join(ROOT, rel)) as f:
        for lineno, text in enumerate(f, 1):
            m = CITE.search(text)
            if not m:
                continue
            label = text[:m.start()].strip(" */\t").removesuffix("runtime/").strip()
            label = label.rstrip(":").strip()
            where = f"{rel}:{lineno}"
            check(label in DECL, f"{where}: citation '{label}' is one this test checks",
                  "add it to DECL with the declaration the cited line must hold")
            if label not in DECL:
                continue
            seen.add(label)
            gofile = m.group(1)
            cites = [(m.group(3), int(m.group(2)))]
            if m.group(4):
                cites.append((m.group(5), int(m.group(4))))
            for v, n in cites:
                ncites += 1
                got = go_line(v, gofile, n)
                check(re.search(DECL[label], got) is not None,
                      f"{where}: {label} at {gofile}:{n} in Go {v}", f"that line is {got!r}")

check(seen == set(DECL), "every known citation is still there",
      f"missing: {sorted(set(DECL) - seen)}")
print(f"{ncites} citations of {len(seen)} declarations checked")
done()
