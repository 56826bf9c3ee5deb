"""Helpers shared by the tests/sym tests."""
import os
import re
import subprocess

import pptest

SYMTOOL = os.environ.get("SYMTOOL", os.path.join(pptest.BUILD_DIR, "tests/sym/symtool"))
HERE = os.path.dirname(os.path.abspath(__file__))


def symtool(*args, check=True, timeout=60):
    p = pptest.run([SYMTOOL, *[str(a) for a in args]], timeout=timeout)
    if check and p.returncode != 0:
        raise RuntimeError(f"symtool {args} exited {p.returncode}: {p.stdout} {p.stderr}")
    return p


def parse_frames(out):
    """`symtool pclntab/resolve` output -> {pc: [(func, file, line, inlined)]}."""
    res, cur = {}, None
    for line in out.splitlines():
        if line.startswith("pc "):
            _, pc, n = line.split()[:3]
            cur = res.setdefault(int(pc, 16), [])
        elif line.startswith("  ") and cur is not None:
            f = line[2:].split("\t")
            cur.append((f[0], f[1], int(f[2]), f[3] == "1"))
    return res


def load_segments(path):
    """PT_LOAD (offset, vaddr, filesz) from readelf (binutils, not our reader)."""
    out = subprocess.run(["readelf", "-lW", path], capture_output=True, text=True,
                         check=True).stdout
    segs = []
    for line in out.splitlines():
        f = line.split()
        if f and f[0] == "LOAD":
            segs.append((int(f[1], 16), int(f[2], 16), int(f[4], 16), int(f[5], 16)))
    return segs


def parse_maps_lines(lines):
    maps = []
    for l in lines:
        f = l.split(None, 5)
        if len(f) < 6:
            continue
        s, e = (int(x, 16) for x in f[0].split("-"))
        maps.append((s, e, int(f[2], 16), f[1], f[5].strip()))
    return maps


def runtime_to_link(addr, maps, segs):
    """Runtime address -> link-time vaddr through the mapping and PT_LOAD."""
    for s, e, off, perms, path in maps:
        if s <= addr < e:
            foff = addr - s + off
            for soff, vaddr, filesz, memsz in segs:
                if soff <= foff < soff + memsz:
                    return foff - soff + vaddr
    return None


def parse_goworkload(out):
    """goworkload stdout -> (maps lines, [(name, [pcs], [(pc, func, file, line)])])."""
    maps, stacks = [], []
    for line in out.splitlines():
        if line.startswith("MAP "):
            maps.append(line[4:])
        elif line.startswith("STACK "):
            stacks.append((line[6:], [], []))
        elif line.startswith("PC "):
            stacks[-1][1].extend(int(x, 16) for x in line[3:].split())
        elif line.startswith("FRAME "):
            pc, fn, file, ln = line[6:].split("\t")
            stacks[-1][2].append((int(pc, 16), fn, file, int(ln)))
    return maps, stacks


def compare_stack(name, pcs, frames, resolve):
    """Walk the physical frames of one runtime.Callers stack: resolve(pc-1)
    -> our frames (innermost first) must equal the next k runtime frames.
    Returns a list of mismatch strings (empty = equal)."""
    errs = []
    i = 0
    while i < len(pcs):
        got = resolve(pcs[i])
        if not got:
            errs.append(f"{name}: pc {pcs[i]:x} unresolved")
            i += 1
            continue
        want = frames[i:i + len(got)]
        g = [(f[0], f[1], f[2]) for f in got]
        w = [(f[1], f[2], f[3]) for f in want]
        if g != w:
            errs.append(f"{name}: pc {pcs[i]:x}: got {g} want {w}")
        i += len(got)
    return errs
