#!/usr/bin/python3
"""Make the seeds of the fuzz_gobin and fuzz_buckets targets.

    tests/goheap/make_fuzz_seeds.py            (needs go; writes into fuzz-seeds/)

A real Go executable is ~1 MB, mostly code the analysis never reads, so the
fuzz_gobin seeds are fuzzseed.go's executable rewritten with only what
gobin.c, elfsym.c and gopclntab.c look at. The ELF and program headers are
the original ones (the segments are not file-backed any more: the analysis
reads sections); sections are re-laid out back to back:

  go119-stripped     no .symtab: variables decoded from the code of the
                     runtime functions vars_from_code() scans (each kept as a
                     ".text.fn" piece at its address, ahead of a NOBITS .text
                     so file_read_at() finds the piece), the whole
                     .gopclntab, and .rodata's go.func.* tail (the inline
                     trees). moduledata requires go.func.* and rodata's start
                     in one section, so that .rodata's header starts its
                     file offset earlier, over other bytes nobody reads.
                     Also fuzz_buckets' symbol fixture. ~350 KB: the
                     pclntab alone is 256 KB and cannot be cut without
                     re-encoding it.
  go119-nopctab      the same without pc-value tables and inline trees
                     (pctab removed, pclnOffset moved up): names and
                     function ranges only. < 200 KB.
  go119-symtab       no pclntab: .symtab with the three runtime variables
                     and the kept functions, GNU-free Go build id note,
                     Go 1.18+ inline buildinfo. A few KB.
  go117-buildinfo    go119-symtab with the pre-1.18 buildinfo (two pointers
                     to Go strings in .data).

The fuzz_buckets seeds are memory images in fuzz_buckets.c's input format,
with stacks of the fixture's real PCs (main.leak with its inlined grow,
runtime.mallocgc, main.main): a valid list, the same with a loop, a
misaligned/unmapped next pointer, a huge nstk, a bad type, and the process
exiting during the walk.
"""
import os
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
GOBIN_DIR = os.path.join(HERE, "fuzz-seeds", "fuzz_gobin")
BUCKETS_DIR = os.path.join(HERE, "fuzz-seeds", "fuzz_buckets")

# vars_from_code()'s functions (gobin.c), plus main.* for symbolization.
KEEP_FUNCS = [
    "runtime.MemProfile", "runtime.memProfileInternal", "runtime.mProf_FlushLocked",
    "runtime.stkbucket", "runtime.mProf_Flush", "runtime.mProf_PostSweep",
    "runtime.mProf_Malloc", "runtime.mProf_Free", "runtime.mallocgc",
    "runtime.profilealloc", "runtime.nextSample", "runtime.parsedebugvars",
    "runtime.parsegodebug", "main.main", "main.leak",
]
KEEP_VARS = ["runtime.mbuckets", "runtime.MemProfileRate", "runtime.mProfCycle"]

SHT_PROGBITS, SHT_SYMTAB, SHT_STRTAB, SHT_NOBITS = 1, 2, 3, 8
SHF_WRITE, SHF_ALLOC, SHF_EXECINSTR = 1, 2, 4


class Elf:
    def __init__(self, data):
        self.data = data
        (self.ehdr,) = (data[:64],)
        f = struct.unpack_from("<16sHHIQQQIHHHHHH", data, 0)
        self.phoff, self.shoff = f[5], f[6]
        self.phentsize, self.phnum, self.shentsize, self.shnum, self.shstrndx = f[9:14]
        self.secs = []
        for i in range(self.shnum):
            s = struct.unpack_from("<IIQQQQIIQQ", data, self.shoff + i * 64)
            self.secs.append(dict(name_off=s[0], type=s[1], flags=s[2], addr=s[3],
                                  offset=s[4], size=s[5], link=s[6], info=s[7],
                                  align=s[8], entsize=s[9]))
        strs = self.secs[self.shstrndx]
        for s in self.secs:
            o = strs["offset"] + s["name_off"]
            s["name"] = data[o:data.index(b"\0", o)].decode()

    def sec(self, name):
        return next((s for s in self.secs if s["name"] == name), None)

    def bytes_of(self, s):
        return self.data[s["offset"]:s["offset"] + s["size"]]

    def symbols(self):
        """name -> (value, size, info) from .symtab."""
        st, out = self.sec(".symtab"), {}
        strtab = self.secs[st["link"]]
        for i in range(st["size"] // 24):
            nm, info, other, shndx, val, size = struct.unpack_from(
                "<IBBHQQ", self.data, st["offset"] + i * 24)
            o = strtab["offset"] + nm
            out[self.data[o:self.data.index(b"\0", o)].decode()] = (val, size, info, shndx)
        return out


class Out:
    """A new ELF: the original headers, then sections back to back."""

    def __init__(self, src):
        self.src = src
        self.blob = bytearray(src.data[:src.phoff + src.phnum * src.phentsize])
        self.secs = [dict(name="", type=0, flags=0, addr=0, offset=0, size=0, link=0,
                          info=0, align=0, entsize=0)]

    def put(self, data, align=32):
        while len(self.blob) % align:
            self.blob.append(0)
        off = len(self.blob)
        self.blob += data
        return off

    def add(self, name, type_, flags, addr, data=b"", size=None, offset=None, **kw):
        if offset is None:
            offset = self.put(data) if type_ != SHT_NOBITS else len(self.blob)
        s = dict(name=name, type=type_, flags=flags, addr=addr, offset=offset,
                 size=len(data) if size is None else size, link=0, info=0, align=8,
                 entsize=0)
        s.update(kw)
        self.secs.append(s)
        return len(self.secs) - 1

    def copy(self, name, data=None):
        s = self.src.sec(name)
        return self.add(name, s["type"], s["flags"], s["addr"],
                        self.src.bytes_of(s) if data is None else data,
                        size=s["size"] if s["type"] == SHT_NOBITS else None,
                        align=s["align"], entsize=s["entsize"])

    def finish(self):
        names = bytearray(b"\0")
        for s in self.secs:
            if s["name"]:
                s["name_off"] = len(names)
                names += s["name"].encode() + b"\0"
            else:
                s["name_off"] = 0
        shstrndx = self.add(".shstrtab", SHT_STRTAB, 0, 0, bytes(names + b".shstrtab\0"))
        self.secs[shstrndx]["name_off"] = len(names)
        shoff = self.put(b"", 8)
        for s in self.secs:
            self.blob += struct.pack("<IIQQQQIIQQ", s["name_off"], s["type"], s["flags"],
                                     s["addr"], s["offset"], s["size"], s["link"], s["info"],
                                     s["align"], s["entsize"])
        struct.pack_into("<Q", self.blob, 0x28, shoff)
        struct.pack_into("<HHH", self.blob, 0x3a, 64, len(self.secs), shstrndx)
        return bytes(self.blob)


def code_pieces(out, src, syms):
    # pclntab's function ends are the next function's entry (alignment
    # padding included), and gobin reads [entry, end): cut there, not at
    # the symbol's size.
    t = src.sec(".text")
    entries = sorted(v[0] for v in syms.values()
                     if t["addr"] <= v[0] < t["addr"] + t["size"])
    for f in KEEP_FUNCS:
        if f in syms and syms[f][1]:
            val = syms[f][0]
            size = next((e for e in entries if e > val), t["addr"] + t["size"]) - val
            out.add(".text.fn", SHT_PROGBITS, SHF_ALLOC | SHF_EXECINSTR, val,
                    src.data[t["offset"] + val - t["addr"]:][:size])


def data_sections(out):
    for n in (".noptrdata", ".data", ".bss", ".noptrbss", ".note.go.buildid"):
        out.copy(n)
    t = out.src.sec(".text")
    out.add(".text", SHT_NOBITS, t["flags"], t["addr"], size=t["size"], align=32)


def stripped(src, syms, pctab=True):
    out = Out(src)
    code_pieces(out, src, syms)
    pcln = src.bytes_of(src.sec(".gopclntab"))
    if pctab:
        ro = src.sec(".rodata")
        gofunc = syms["go.func.*"][0]
        tail = src.bytes_of(ro)[gofunc - ro["addr"]:]
        pcln_idx = out.copy(".gopclntab", pcln)
        # .rodata from its start: only [gofunc, end) is real, see the docstring
        off = out.put(tail) - (gofunc - ro["addr"])
        assert off >= 0
        out.add(".rodata", SHT_PROGBITS, ro["flags"], ro["addr"], size=ro["size"],
                offset=off, align=32)
        del pcln_idx
    else:
        # header words: 8 + 8*i, pctabOffset i=6, pclnOffset i=7 (Go 1.18+)
        pct, pcl = struct.unpack_from("<QQ", pcln, 8 + 8 * 6)
        cut = bytearray(pcln[:pct] + pcln[pcl:])
        struct.pack_into("<Q", cut, 8 + 8 * 7, pct)
        out.copy(".gopclntab", bytes(cut))
    out.copy(".go.buildinfo")
    data_sections(out)
    return out.finish()


def with_symtab(src, syms, old_buildinfo=False):
    out = Out(src)
    code_pieces(out, src, syms)
    bi = bytearray(src.bytes_of(src.sec(".go.buildinfo")))
    if old_buildinfo:
        # pre-1.18: ptrsize 8, flags 0, then pointers to two Go strings
        # (version, module info), here in a section of their own
        ver = b"go1.17.13"
        base = 0x4f8000
        strs = struct.pack("<QQQQ", base + 32, len(ver), base + 32 + len(ver), 0) + ver
        out.add(".data.bi", SHT_PROGBITS, SHF_ALLOC | SHF_WRITE, base, strs)
        bi[14:16] = bytes([8, 0])
        bi[16:32] = struct.pack("<QQ", base, base + 16)
        bi = bi[:32]
    out.copy(".go.buildinfo", bytes(bi))
    data_sections(out)
    names, ents = bytearray(b"\0"), [b"\0" * 24]
    for n in KEEP_VARS + KEEP_FUNCS:
        if n in syms:
            val, size, info, shndx = syms[n]
            ents.append(struct.pack("<IBBHQQ", len(names), info, 0, 1, val, size))
            names += n.encode() + b"\0"
    strndx = out.add(".strtab", SHT_STRTAB, 0, 0, bytes(names), align=1)
    out.add(".symtab", SHT_SYMTAB, 0, 0, b"".join(ents), link=strndx, info=1, entsize=24)
    return out.finish()


# ---- fuzz_buckets memory images (see fuzz_buckets.c) ----

def bucket(nxt, typ, size, stk, recs):
    """runtime.bucket: next, allnext, typ, hash, size, nstk, stk[], memRecord."""
    b = struct.pack("<QQQQQQ", 0, nxt, typ, 0x1234, size, len(stk))
    b += b"".join(struct.pack("<Q", pc) for pc in stk)
    for r in recs:	# active, future[0..2]
        b += struct.pack("<QQQQ", *r)
    return b


def image(flags, max_buckets, max_depth, cycle, rate, head, segs, esrch_after=0):
    h = struct.pack("<BBHHHIIqQ", flags, esrch_after, max_buckets, max_depth, 0, cycle, 0,
                    rate, head)
    for addr, data in segs:
        h += struct.pack("<QI", addr, len(data)) + data
    return h


def bucket_seeds(syms):
    def ret(f, off):	# a return address inside function f
        return syms[f][0] + off
    leak, mainf, malloc = syms["main.leak"], syms["main.main"], syms["runtime.mallocgc"]
    stk_a = [ret("runtime.mallocgc", 0x100), ret("main.leak", 0x40), ret("main.main", 0x20)]
    stk_b = [ret("main.leak", 0x60), ret("main.leak", 0x90), ret("main.main", 0x30)]
    stk_c = [0x7fff0000dead, ret("main.main", 0x50)]	# unsymbolized leaf
    zero = (0, 0, 0, 0)
    base = 0xc000100000
    recs1 = [(10, 4, 640, 256), (1, 0, 64, 0), zero, (2, 1, 128, 64)]
    recs2 = [zero, (3, 0, 300, 0), zero, zero]		# only a future cycle
    bs = [(stk_a, 64, recs1), (stk_b, 128, recs2), (stk_c, 4096, recs1), (stk_a, 64, recs2)]
    blob, addrs = b"", []
    for i in range(len(bs)):
        addrs.append(base + len(blob))
        stk, size, recs = bs[i]
        blob += bucket(0, 1, size, stk, recs)
    # link them: allnext at +8
    blob = bytearray(blob)
    for i, a in enumerate(addrs):
        nxt = addrs[i + 1] if i + 1 < len(addrs) else 0
        struct.pack_into("<Q", blob, a - base + 8, nxt)
    good = bytes(blob)
    loop = bytearray(good)
    struct.pack_into("<Q", loop, addrs[-1] - base + 8, addrs[1])
    bad_next = bytearray(good)
    struct.pack_into("<Q", bad_next, addrs[2] - base + 8, 0xc0dedbad001)
    unmapped = bytearray(good)
    struct.pack_into("<Q", unmapped, addrs[2] - base + 8, 0xc000900000)
    huge = bytearray(good)
    struct.pack_into("<Q", huge, addrs[1] - base + 40, 5000)
    badtype = bytearray(good)
    struct.pack_into("<Q", badtype, addrs[1] - base + 16, 2)
    deep = bucket(0, 1, 32, [ret("main.leak", 0x40)] * 40 + stk_a, [recs1[0]] + [zero] * 3)
    head = addrs[0]
    # Findings of the first runs (undefined behaviour, fixed), kept as seeds:
    # scaleHeapSample's float->int64 out of range (rate 2^62, average size 1),
    # an empty stack (stk NULL in a stored heap), and two identical samples
    # whose values overflow int64 when pprof merges them.
    big = (1 << 60, 0, 1 << 60, 0)
    scale = bucket(0, 1, 1, [ret("main.leak", 0x40)], [big, zero, zero, zero])
    empty = bucket(0, 1, 64, [], recs1)
    hv = (1 << 56, 0, 64 << 56, 0)
    m1 = bucket(base + 0x20000 + 184, 1, 64, [ret("main.leak", 0x40)], [hv] + [zero] * 3)
    m2 = bucket(0, 1, 64, [ret("main.leak", 0x40)], [hv] + [zero] * 3)
    assert len(m1) == 184	# m2 right after m1
    findings = {
        "ub-scale-overflow": image(0, 100, 64, 2, 1 << 62, base + 0x20000,
                                   [(base + 0x20000, scale)]),
        "ub-empty-stack": image(0, 100, 64, 2, 1, base + 0x20000, [(base + 0x20000, empty)]),
        "ub-merge-overflow": image(0, 100, 64, 2, 1, base + 0x20000,
                                   [(base + 0x20000, m1 + m2)]),
    }
    return findings | {
        "list-read": image(0, 100, 64, 5 << 1, 512 * 1024, head, [(base, good)]),
        "list-snapshot": image(1, 100, 64, 5 << 1, 512 * 1024, head, [(base, good)]),
        "list-latest": image(3, 100, 64, 4 << 1 | 1, 1, head, [(base, good)]),
        "loop-read": image(0, 100, 64, 2, 512 * 1024, head, [(base, bytes(loop))]),
        "loop-snapshot": image(1, 100, 64, 2, 512 * 1024, head, [(base, bytes(loop))]),
        "loop-limit": image(0, 3, 64, 2, 512 * 1024, head, [(base, bytes(loop))]),
        "misaligned": image(0, 100, 64, 2, 4096, head, [(base, bytes(bad_next))]),
        "unmapped": image(1, 100, 64, 2, 4096, head, [(base, bytes(unmapped))]),
        "huge-nstk": image(0, 100, 64, 2, 4096, head, [(base, bytes(huge))]),
        "bad-type": image(1, 100, 64, 2, 4096, head, [(base, bytes(badtype))]),
        "exits": image(1, 100, 64, 2, 4096, head, [(base, good)], esrch_after=5),
        "deep-truncated": image(0, 100, 8, 2, 4096, base + 0x10000,
                                [(base + 0x10000, deep)]),
        "disabled": image(1, 100, 64, 0, 0, 0, []),
    }


def main():
    with tempfile.TemporaryDirectory() as tmp:
        exe = os.path.join(tmp, "fuzzseed")
        with open(os.path.join(tmp, "go.mod"), "w") as f:
            f.write("module fuzzseed\ngo 1.19\n")
        subprocess.run(["cp", os.path.join(HERE, "fuzzseed.go"), tmp], check=True)
        # -w: no DWARF (never read); the symbols are kept here to find the
        # functions and are dropped from the stripped seeds.
        subprocess.run(["go", "build", "-trimpath", "-ldflags=-w", "-o", exe, "."], cwd=tmp,
                       check=True, env=dict(os.environ, CGO_ENABLED="0", GOFLAGS=""))
        src = Elf(open(exe, "rb").read())
    syms = src.symbols()
    missing = [n for n in KEEP_VARS + ["main.leak", "go.func.*"] if n not in syms]
    if missing:
        sys.exit(f"make_fuzz_seeds: {missing} not in the executable")
    os.makedirs(GOBIN_DIR, exist_ok=True)
    os.makedirs(BUCKETS_DIR, exist_ok=True)
    seeds = {
        "go119-stripped": stripped(src, syms),
        "go119-nopctab": stripped(src, syms, pctab=False),
        "go119-symtab": with_symtab(src, syms),
        "go117-buildinfo": with_symtab(src, syms, old_buildinfo=True),
    }
    for name, data in seeds.items():
        with open(os.path.join(GOBIN_DIR, name), "wb") as f:
            f.write(data)
        print(f"{name}: {len(data)} bytes")
    for name, data in bucket_seeds(syms).items():
        with open(os.path.join(BUCKETS_DIR, name), "wb") as f:
            f.write(data)
    print(f"fuzz_buckets: {len(bucket_seeds(syms))} seeds")


if __name__ == "__main__":
    main()
