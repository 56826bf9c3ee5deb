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


class Serve:
    """A long-lived `symtool serve`: one symbolizer across commands."""

    def __init__(self, env=None):
        e = dict(os.environ)
        e.update(env or {})
        self.p = subprocess.Popen([SYMTOOL, "serve"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True, env=e)

    def cmd(self, line):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()
        out = []
        while True:
            l = self.p.stdout.readline()
            if not l or l == "END\n":
                break
            out.append(l)
        return "".join(out)

    def resolve(self, pid, addrs):
        return parse_results(self.cmd(f"resolve {pid} " + " ".join(f"{a:x}" for a in addrs)))

    def stats(self):
        return {k: int(v) for k, v in (l.split() for l in self.cmd("stats").splitlines())}

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=30)
        return self.p.returncode


def parse_results(out):
    """resolve/kernel output -> {addr: {"frames": [...], "source": n, "vaddr": v,
    "map": {...} or None}}; "error" key for a call error."""
    res, cur = {}, None
    for line in out.splitlines():
        if line.startswith("pc "):
            f = line.split()
            cur = {"frames": [], "source": int(f[3]), "vaddr": int(f[4], 16), "map": None}
            res[int(f[1], 16)] = cur
        elif line.startswith("  @ ") and cur is not None:
            f = line[4:].split("|")
            cur["map"] = {"path": f[0], "start": int(f[1], 16), "limit": int(f[2], 16),
                          "offset": int(f[3], 16), "build_id": f[4], "kind": int(f[5]),
                          "go_version": f[6], "error": f[7]}
        elif line.startswith("  ") and cur is not None:
            f = line[2:].split("\t")
            cur["frames"].append((f[0], f[1], int(f[2]), f[3] == "1"))
        elif line.startswith("error"):
            res["error"] = line
    return res


def read_maps(pid):
    with open(f"/proc/{pid}/maps") as f:
        return parse_maps_lines(f.read().splitlines())


def link_to_runtime(vaddr, path, maps, segs):
    """Link-time vaddr of `path` -> runtime address in a live process."""
    for soff, sva, filesz, memsz in segs:
        if sva <= vaddr < sva + filesz:
            foff = vaddr - sva + soff
            for s, e, off, perms, p in maps:
                if p == path and off <= foff < off + (e - s):
                    return s + foff - off
    return None


def nm_funcs(path, dynamic=False):
    """{name: (vaddr, size)} of defined text symbols, from binutils nm."""
    args = ["nm", "-S", "--defined-only"] + (["-D"] if dynamic else []) + [path]
    out = subprocess.run(args, capture_output=True, text=True).stdout
    r = {}
    for line in out.splitlines():
        f = line.split()
        if len(f) == 4 and f[2] in "tTwWiI":
            r.setdefault(f[3].split("@")[0], (int(f[0], 16), int(f[1], 16)))
    return r


def gnu_build_id(path):
    out = subprocess.run(["readelf", "-n", path], capture_output=True, text=True).stdout
    m = re.search(r"Build ID: ([0-9a-f]+)", out)
    return m.group(1) if m else ""
