"""pprof encoder (agent/ship/pprof.c) read back by `go tool pprof`.

pprof_gen (C, linked with libpushprof) builds a CPU-like profile, a
Go-heap-like profile (4 sample types) and a 5,000-sample one, runs C-level
checks (interning, validator, gunzip bounds) and writes a manifest of every
pprof_add_sample() call. Here the expected merged profile is computed from
the manifest, independently of the C code, and compared with what
`go tool pprof -raw` and `-top` (google/pprof's parser, the one Parca uses)
read from the .pb.gz files.
"""
import collections
import os
import re
import sys

from pptest import check, done, pprof, run, tmpdir

GEN = sys.argv[1]
out = tmpdir("pushprof-pprof-")

p = run([GEN, out], timeout=120)
print(p.stdout)
check(p.returncode == 0, "pprof_gen C checks pass", p.stderr[-2000:])
for line in p.stdout.splitlines():
    if line.startswith("FIGURE"):
        print(line)


def read_manifest(name):
    locs, samples, count = {}, [], None
    with open(os.path.join(out, name)) as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if parts[0] == "L":
                locs[int(parts[1])] = (int(parts[2], 16), parts[3].split(";"))
            elif parts[0] == "S":
                vals = tuple(int(v) for v in parts[1].split(","))
                stack = tuple(int(x) for x in parts[2].split(";"))
                labels = []
                for kv in parts[3].split(","):
                    k, v = kv.split("=", 1)
                    labels.append((k, v.lstrip("#")))
                samples.append((vals, stack, tuple(sorted(labels))))
            elif parts[0] == "N":
                count = int(parts[1])
    return locs, samples, count


def expected(locs, samples):
    """Merge identical (stack, labels) by adding values; stacks as addresses."""
    agg = {}
    for vals, stack, labels in samples:
        key = (tuple(locs[i][0] for i in stack), labels)
        if key in agg:
            agg[key] = tuple(a + b for a, b in zip(agg[key], vals))
        else:
            agg[key] = vals
    return agg


def parse_raw(text):
    """Samples and locations from `go tool pprof -raw` output."""
    lines = text.splitlines()
    header, types, samples, locs = {}, [], [], {}
    section = "head"
    cur_loc = None
    for line in lines:
        if line == "Samples:":
            section = "samples_header"
            continue
        if line == "Locations":
            section = "locations"
            continue
        if line == "Mappings":
            section = "mappings"
            continue
        if section == "head":
            k, _, v = line.partition(": ")
            header.setdefault(k, []).append(v)
        elif section == "samples_header":
            types = [t.replace("[dflt]", "") for t in line.split()]
            header["dflt"] = [t.replace("[dflt]", "") for t in line.split() if "[dflt]" in t]
            section = "samples"
        elif section == "samples":
            m = re.match(r"^\s+([-\d\s]+):\s*([\d\s]*)$", line)
            if m:
                vals = tuple(int(v) for v in m.group(1).split())
                stack = tuple(int(x) for x in m.group(2).split())
                samples.append([vals, stack, []])
                continue
            m = re.match(r"^\s+(\w+):\[(.*)\]$", line)
            if m and samples:
                samples[-1][2].append((m.group(1), m.group(2)))
        elif section == "locations":
            m = re.match(r"^\s+(\d+): (0x[0-9a-f]+) M=\d+ (\S+) ", line)
            if m:
                cur_loc = int(m.group(1))
                locs[cur_loc] = (int(m.group(2), 16), [m.group(3)])
                continue
            m = re.match(r"^\s+(\S+) \S+:\d+ s=\d+$", line)
            if m and cur_loc is not None:
                locs[cur_loc][1].append(m.group(1))
    return header, types, samples, locs


def got_merged(samples, locs):
    agg = {}
    dups = 0
    for vals, stack, labels in samples:
        lab = tuple(sorted((k, v.split()[0]) for k, v in labels))
        key = (tuple(locs[i][0] for i in stack), lab)
        if key in agg:
            dups += 1
            agg[key] = tuple(a + b for a, b in zip(agg[key], vals))
        else:
            agg[key] = vals
    return agg, dups


def top_flat(text):
    """function name -> flat value from `go tool pprof -top` (numbers only)."""
    flat = {}
    for line in text.splitlines():
        m = re.match(r"^\s*(\d+)B?\s+[\d.]+%\s+[\d.]+%\s+(\d+)B?\s+[\d.]+%\s+(.+?)( \(inline\))?$", line)
        if m:
            flat[m.group(3)] = (int(m.group(1)), int(m.group(2)))
    return flat


def check_profile(name, types, sample_index, top_args):
    path = os.path.join(out, name + ".pb.gz")
    locs, samples, count = read_manifest(name + ".txt")
    exp = expected(locs, samples)
    try:
        raw = pprof("-raw", path)
    except RuntimeError as e:
        check(False, f"{name}: go tool pprof -raw parses it", str(e))
        return None
    header, got_types, got_samples, got_locs = parse_raw(raw)
    check(got_types == types, f"{name}: sample types {types}", got_types)
    check(len(got_samples) == count == len(exp),
          f"{name}: {len(exp)} distinct samples after merging {len(samples)} adds",
          f"pprof {len(got_samples)}, builder {count}, expected {len(exp)}")
    got, dups = got_merged(got_samples, got_locs)
    check(dups == 0, f"{name}: no duplicate (stack, labels) left unmerged", dups)
    check(got == exp, f"{name}: every sample's stack, labels and values as added",
          f"missing {set(exp) - set(got)} extra {set(got) - set(exp)}"[:1500])
    by_addr = {a: names for a, names in got_locs.values()}
    ok = all(by_addr.get(a) == names for a, names in locs.values())
    check(ok, f"{name}: location function names (inline frames innermost first)",
          f"{by_addr} vs {locs}")

    # -top: flat per innermost frame and cum of the root, computed from the manifest.
    idx = [t.split("/")[0] for t in types].index(sample_index)
    want_flat = collections.Counter()
    total = 0
    for (stack, _), vals in exp.items():
        leaf = [n for lid, (a, n) in locs.items() if a == stack[0]][0][0]
        want_flat[leaf] += vals[idx]
        total += vals[idx]
    top = pprof("-top", f"-sample_index={sample_index}", *top_args, path)
    flat = top_flat(top)
    check(all(flat.get(f, (None,))[0] == v for f, v in want_flat.items()),
          f"{name}: -top flat {sample_index} per function", f"{dict(want_flat)} vs {flat}\n{top}")
    want_cum = collections.Counter()
    names_at = {a: n for a, n in locs.values()}
    for (stack, _), vals in exp.items():
        for fn in {n for a in stack for n in names_at[a]}:
            want_cum[fn] += vals[idx]
    check(all(flat.get(f, (None, None))[1] == v for f, v in want_cum.items()),
          f"{name}: -top cum {sample_index} per function (total {total})",
          f"{dict(want_cum)} vs {flat}")
    return header, got_samples, top


r = check_profile("cpu", ["samples/count", "cpu/nanoseconds"], "samples", [])
if r:
    header, samples, top = r
    check(header.get("Comment") == ["pushprof test comment one", "comment two"],
          "cpu: comments", header.get("Comment"))
    check(header.get("PeriodType") == ["cpu nanoseconds"] and header.get("Period") == ["52631578"],
          "cpu: period type and period", header)
    check(header.get("Duration") == ["10s"], "cpu: duration", header.get("Duration"))
    unit_labels = [l for s in samples for l in s[2] if l[0] == "bytes"]
    check(unit_labels == [("bytes", "4096 bytes")], "cpu: numeric label with unit", unit_labels)
    check(any(("thread_name", "worker") in s[2] for s in samples) and
          any(("cpu", "2") in s[2] for s in samples), "cpu: string and numeric labels")
    check("Build ID: abcdef0123" in top and "File: testprog" in top, "cpu: mapping file and build id")
    check("inlined_helper (inline)" in top, "cpu: inlined frame shown as inline")

r = check_profile("heap", ["alloc_objects/count", "alloc_space/bytes",
                           "inuse_objects/count", "inuse_space/bytes"],
                  "alloc_space", ["-unit=B"])
if r:
    header, samples, top = r
    check(header.get("dflt") == ["inuse_space/bytes"], "heap: default sample type inuse_space",
          header.get("dflt"))
    check(header.get("PeriodType") == ["space bytes"] and header.get("Period") == ["524288"],
          "heap: period space/bytes 524288")
    top_default = pprof("-top", os.path.join(out, "heap.pb.gz"))
    check("Type: inuse_space" in top_default, "heap: -top uses inuse_space by default")

big = pprof("-raw", os.path.join(out, "big.pb.gz"))
_, _, bs, _ = parse_raw(big)
check(len(bs) == 5000, "big: 5,000 samples parsed by go tool pprof", len(bs))
done()
