#!/usr/bin/python3
"""The kernel symbol table kept compact (symbolize_kernel.c: 32-bit offsets
in blocks, names as word ids) names every kernel text symbol exactly as
/proc/kallsyms does: every symbol's address and the byte after it, with its
module's mapping; and a synthetic kallsyms (SYMTOOL_KALLSYMS) with what the
real one may lack: a gap of more than 4 GiB inside a block, addresses shared
by several names, a 500-byte name, names of separators only."""
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import pptest  # noqa: E402
from pptest import check, done  # noqa: E402
import symlib  # noqa: E402
from symlib import Serve  # noqa: E402


def table(path):
    """addr -> (set of names, module or None), text symbols only."""
    t = {}
    with open(path) as f:
        for line in f:
            p = line.rstrip("\n").split("\t")
            head = p[0].split(" ")
            if len(head) != 3 or head[1] not in "tTwW" or not head[2]:
                continue
            a = int(head[0], 16)
            mod = p[1].strip("[]") if len(p) > 1 else None
            names, _ = t.setdefault(a, (set(), mod))
            names.add(head[2])
    return t


def verify(sv, t, what):
    addrs = sorted(t)
    q = {}
    for i, a in enumerate(addrs):
        q[a] = a
        nxt = addrs[i + 1] if i + 1 < len(addrs) else a + 2
        if nxt > a + 1:
            q[a + 1] = a
    keys = sorted(q)
    bad, n = [], 0
    for c in range(0, len(keys), 3000):
        chunk = keys[c:c + 3000]
        res = symlib.parse_results(sv.cmd("kernel " + " ".join(f"{a:x}" for a in chunk)))
        for a in chunk:
            names, mod = t[q[a]]
            r = res.get(a) or {}
            fr = r.get("frames") or []
            path = (r.get("map") or {}).get("path")
            want = f"[{mod}]" if mod else "[kernel.kallsyms]"
            n += 1
            if not fr or fr[0][0] not in names or path != want:
                bad.append((hex(a), sorted(names)[:2], fr[:1], path, want))
    check(n == len(q) and not bad,
          f"{what}: {n} addresses ({len(t)} symbols and the byte after each) named exactly, "
          f"with their module's mapping", f"{len(bad)} wrong, e.g. {bad[:3]}")


def main():
    sv = Serve()
    try:
        verify(sv, table("/proc/kallsyms"), "/proc/kallsyms")
    finally:
        sv.close()

    lines, base = [], 0xffffffff81000000
    for i in range(200):
        lines.append(f"{base + i * 0x40:016x} T fn_{i}_x.part.{i % 3}")
    lines.append(f"{base + 200 * 0x40:016x} t __")
    lines.append(f"{base + 201 * 0x40:016x} T {'long_' * 100}name")
    lines.append(f"{base + 202 * 0x40:016x} W dup_a")
    lines.append(f"{base + 202 * 0x40:016x} t dup_b")
    lines.append(f"{base + 203 * 0x40:016x} D data_is_not_text")
    for i in range(5):  # far below the rest: more than 4 GiB before it
        lines.append(f"{0x100000000000 + i * 0x20:016x} t low_{i}")
    for i in range(40):
        lines.append(f"{0xffffffffc0000000 + i * 0x80:016x} t mod_fn_{i}\t[mymod]")
    lines.append(f"{0xffffffffc0001400:016x} t other_fn\t[othermod]")
    with tempfile.NamedTemporaryFile("w", suffix=".kallsyms", delete=False) as f:
        f.write("\n".join(lines) + "\n")
        path = f.name
    try:
        sv = Serve({"SYMTOOL_KALLSYMS": path})
        try:
            t = table(path)
            verify(sv, t, "synthetic kallsyms")
            r = symlib.parse_results(sv.cmd(f"kernel {0x100000000000 - 1:x} "
                                            f"{0x100000000000 + 0x80 + (1 << 20):x}"))
            check(all(not x["frames"] for x in r.values()) and len(r) == 2,
                  "below the first symbol and 1 MiB past a symbol stay unresolved", str(r))
        finally:
            sv.close()
    finally:
        os.unlink(path)
    done()


if __name__ == "__main__":
    main()
