"""Hostile ELF files and Go tables: errors, never crashes.

Corrupt copies of real binaries (C PIE exe, shared library, Go, stripped Go
PIE): truncated at many sizes, random bytes in the ELF header, program
headers, section header table, symbol/string tables and the .gopclntab, and
raw mutated pclntab bytes. `symtool torture` loads each and runs every
lookup over it. Meaningful under ASan/UBSan (build-asan): any invalid
read aborts the run.
"""
import os
import random
import struct
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pptest  # noqa: E402
from pptest import check, done  # noqa: E402
import symlib  # noqa: E402

d = pptest.tmpdir()
H = symlib.HERE
rnd = random.Random(int(os.environ.get("SYM_CORRUPT_SEED", "7")))

srcs = {}
srcs["c-pie"] = os.path.join(d, "c-pie")
pptest.run(["cc", "-O1", "-fPIE", "-pie", "-o", srcs["c-pie"], os.path.join(H, "cworkload.c"),
            os.path.join(H, "cwlib.c"), "-ldl"], check_rc=0)
srcs["lib"] = os.path.join(d, "lib.so")
pptest.run(["cc", "-O1", "-shared", "-fPIC", "-o", srcs["lib"], os.path.join(H, "cwlib.c")],
           check_rc=0)
srcs["go"] = pptest.go_build(os.path.join(H, "goworkload.go"), os.path.join(d, "go"))
srcs["go-pie-s"] = pptest.go_build(os.path.join(H, "goworkload.go"), os.path.join(d, "go-pie-s"),
                                   ["-buildmode=pie", "-ldflags=-s -w"])
# cgo + PIE: externally linked, the pclntab found by its header inside .data.rel.ro
cgo_src = os.path.join(d, "gw_cgo.go")
with open(os.path.join(H, "goworkload.go")) as f:
    open(cgo_src, "w").write(f.read().replace("\nimport (", '\nimport "C"\nimport (', 1))
srcs["go-cgo-pie-s"] = os.path.join(d, "go-cgo-pie-s")
pptest.run(["go", "build", "-buildmode=pie", "-ldflags=-s -w", "-o", srcs["go-cgo-pie-s"],
            cgo_src], env=dict(pptest.go_env(), CGO_ENABLED="1"), timeout=300, check_rc=0)


def sections(path):
    """name -> (offset, size) from readelf."""
    out = subprocess.run(["readelf", "-SW", path], capture_output=True, text=True).stdout
    r = {}
    for line in out.splitlines():
        line = line.replace("[ ", "[")
        f = line.split()
        if len(f) > 6 and f[0].startswith("[") and f[0].endswith("]") and f[1].startswith("."):
            r[f[1]] = (int(f[4], 16), int(f[5], 16))
    return r


files = []


def emit(name, data):
    p = os.path.join(d, name)
    with open(p, "wb") as f:
        f.write(data)
    files.append(p)


def scramble(data, lo, hi, n):
    b = bytearray(data)
    hi = min(hi, len(b))
    if hi <= lo:
        return bytes(b)
    for _ in range(n):
        b[rnd.randrange(lo, hi)] = rnd.randrange(256)
    return bytes(b)


for name, path in srcs.items():
    data = open(path, "rb").read()
    size = len(data)
    for cut in sorted({0, 1, 4, 16, 52, 63, 64, 65, 100, 500, 4096, size // 4, size // 2,
                       size - 4096, size - 1}):
        emit(f"{name}.trunc{cut}", data[:cut])
    e_phoff, e_shoff = struct.unpack_from("<QQ", data, 32)
    e_phnum, e_shentsize, e_shnum = struct.unpack_from("<HHH", data, 56)
    for i in range(12):
        emit(f"{name}.ehdr{i}", scramble(data, 16, 64, 1 + i % 4))
        emit(f"{name}.phdr{i}", scramble(data, e_phoff, e_phoff + 56 * e_phnum, 2 + i))
        emit(f"{name}.shdr{i}", scramble(data, e_shoff, e_shoff + 64 * e_shnum, 2 + 3 * i))
    # one section's offset/size fields made huge or pointing past the end
    for i in range(1, min(e_shnum, 30)):
        b = bytearray(data)
        sh = e_shoff + 64 * i
        struct.pack_into("<QQ", b, sh + 24, rnd.choice([size - 8, size + 4096, 2**63, 2**64 - 16]),
                         rnd.choice([2**40, 2**64 - 1, size, 8]))
        emit(f"{name}.shfield{i}", bytes(b))
    secs = sections(path)
    for sec in (".symtab", ".strtab", ".dynsym", ".dynstr", ".gopclntab", ".data.rel.ro.gopclntab",
                ".note.go.buildid", ".note.gnu.build-id", ".go.buildinfo", ".noptrdata", ".rodata",
                ".data.rel.ro"):
        if sec in secs:
            off, sz = secs[sec]
            for i in range(8):
                emit(f"{name}.{sec.strip('.')}{i}", scramble(data, off, off + sz, 1 + i * 50))
            if sec.endswith("gopclntab"):
                # the header words (offsets, counts) specifically
                for i in range(16):
                    emit(f"{name}.pclnhdr{i}", scramble(data, off + 8, off + 72, 1 + i % 3))
                raw = data[off:off + sz]
                emit(f"{name}.raw.pcln", raw)
                for i in range(40):
                    emit(f"{name}.raw{i}.pcln", scramble(raw, 0 if i < 20 else 8, len(raw),
                                                         1 + i * 20))
                for cut in (8, 40, 72, 100, len(raw) // 3, len(raw) - 1):
                    emit(f"{name}.rawcut{cut}.pcln", raw[:cut])
    for i in range(10):
        emit(f"{name}.anywhere{i}", scramble(data, 0, size, 200 * (i + 1)))

emit("random.bin", bytes(rnd.randrange(256) for _ in range(100000)))
emit("elfmagic.bin", b"\x7fELF\x02\x01\x01" + bytes(rnd.randrange(256) for _ in range(5000)))

# Batches keep process count low; a crash names its batch.
crashes, lines = [], []
B = 60
for i in range(0, len(files), B):
    batch = files[i:i + B]
    p = pptest.run([symlib.SYMTOOL, "torture", *batch], timeout=300)
    if p.returncode != 0 or "runtime error" in p.stderr or "Sanitizer" in p.stderr:
        crashes.append((batch[0], p.returncode, p.stderr[-2000:]))
    lines += p.stdout.splitlines()
check(not crashes, f"{len(files)} corrupt files: no crash, no sanitizer report",
      str(crashes[:2]))
st = {}
for l in lines:
    st[l.split()[0]] = st.get(l.split()[0], 0) + 1
check(len(lines) == len(files) and set(st) <= {"ok", "error"},
      f"one verdict per file: {st}", f"{len(lines)} lines for {len(files)} files")
errs = [l for l in lines if l.startswith("error") and ".trunc0 " in l]
check(errs, "empty file is an error with a message", str(errs))
good = [l for l in lines if l.startswith("ok") and l.split()[1].endswith(".raw.pcln")]
check(len(good) == 2 and all(int(l.split("frames=")[1]) > 1000 for l in good),
      "unmodified raw pclntabs decode (control)", str(good))
# There symtool hands the table itself as gofunc: a wrong base must be
# detected and give no inlined frames rather than made-up ones.
check(good and all("inline=0" in l for l in good), "implausible gofunc rejected", str(good))
done()
