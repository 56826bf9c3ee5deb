"""One ELF reader, one set of labels: the Go heap side (gobin, through
goheap_tool vars) and the symbolizer side (elfsym, through symtool info)
must report the same GNU build id, Go build id and Go version for the same
file, and both must match tools this project did not write (readelf -n,
go tool buildid, go version).

Files: Go 1.19 and 1.23 builds, plain, PIE, stripped, stripped PIE (all
-buildvcs=false); a Go build with a GNU build id of non-printable bytes
(-B); a Go binary whose Go build-id note was rewritten with non-printable
bytes; Go binaries without .go.buildinfo (objcopy --remove-section); a C
binary whose GNU build id has non-printable bytes. Rules: elffile.h."""
import os
import re
import struct
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "goheap"))
import ghlib  # noqa: E402
import pptest  # noqa: E402
import symlib  # noqa: E402
from pptest import check, done  # noqa: E402

tmp = ghlib.tmpdir("pushprof-labels-")
GO_SRC = os.path.join(tmp, "hello.go")
with open(GO_SRC, "w") as f:
    f.write('package main\n\nimport "fmt"\n\nfunc main() { fmt.Println("hello") }\n')
VARIANTS = {"plain": (), "pie": ("-buildmode=pie",), "stripped": ("-ldflags=-s -w",),
            "stripped-pie": ("-ldflags=-s -w", "-buildmode=pie")}
# 20 bytes with NUL, 0xff, 0x7f, control bytes: hex is the only faithful text
ODD_ID = "00ff7f0a0d1b80c3a9e2828ce29c93000102fffe"


def gobin(path):
    """{gnu_build_id, go_build_id, go_version} as gobin reports them
    (None when gobin refuses the file, with the message)."""
    r = pptest.run([ghlib.TOOL, "vars", path])
    if r.returncode != 0:
        return None, r.stdout.strip()
    kv = dict(x.split("=", 1) for x in r.stdout.split())
    dash = lambda v: "" if v == "-" else v  # noqa: E731
    return {"gnu_build_id": dash(kv.get("gnu_build_id")), "go_build_id": dash(kv.get("go_build_id")),
            "go_version": kv.get("version", "")}, ""


def elfsym(path):
    out = symlib.symtool("info", path).stdout
    res = {}
    for k in ("gnu_build_id", "go_build_id", "go_version"):
        m = re.search(rf"^{k} ?(.*)$", out, re.M)
        res[k] = m.group(1).strip() if m else None
    return res


def readelf_gnu(path):
    m = re.search(r"Build ID: ([0-9a-f]+)", pptest.run(["readelf", "-n", path]).stdout)
    return m.group(1) if m else ""


def go_version_of(path, go):
    r = pptest.run([go, "version", path], env=pptest.go_env())
    return r.stdout.rsplit(" ", 1)[-1].strip() if r.returncode == 0 else ""


def build(go, tag, flags):
    out = os.path.join(tmp, tag)
    env = pptest.go_env()
    if go != "go":
        env["GOTOOLCHAIN"] = "local"
    pptest.run([go, "build", "-buildvcs=false", *flags, "-o", out, GO_SRC], timeout=300, env=env,
               check_rc=0)
    return out


def agree(tag, path, want):
    """Both readers give exactly `want` (a dict of the three labels)."""
    g, why = gobin(path)
    e = elfsym(path)
    check(g is not None, f"{tag}: gobin reads it", why)
    if g is None:
        return
    check(g == e, f"{tag}: gobin and elfsym report the same labels", f"{g} vs {e}")
    check(e == want, f"{tag}: labels are the expected ones", f"{e} vs {want}")


def odd_go_note(src, dst):
    """dst: src with its Go build-id note's bytes replaced by non-printable
    ones (same length, so the section keeps its place). Returns their hex."""
    subprocess.run(["objcopy", "--dump-section", ".note.go.buildid=" + dst + ".note", src],
                   check=True)
    with open(dst + ".note", "rb") as f:
        note = f.read()
    namesz, descsz, typ = struct.unpack_from("<III", note)
    check(namesz == 4 and typ == 4 and note[12:16] == b"Go\0\0", "a Go build-id note to rewrite",
          repr(note[:16]))
    desc = bytes((i * 37 + 1) % 256 if i % 3 else 0xff for i in range(descsz))
    with open(dst + ".note", "wb") as f:
        f.write(note[:16] + desc + note[16 + descsz:])
    subprocess.run(["objcopy", "--update-section", ".note.go.buildid=" + dst + ".note", src, dst],
                   check=True)
    return desc.hex()


for tc, go in ghlib.toolchains():
    for variant, flags in VARIANTS.items():
        tag = f"{tc}/{variant}"
        path = build(go, f"hello-{tc}-{variant}", flags)
        bid = pptest.run([go, "tool", "buildid", path], env=pptest.go_env()).stdout.strip()
        ver = go_version_of(path, go)
        check(ver.startswith("go1."), f"{tag}: go version reads it", ver)
        want = {"gnu_build_id": readelf_gnu(path), "go_build_id": bid, "go_version": ver}
        agree(tag, path, want)

        if variant in ("plain", "stripped-pie"):
            # no .go.buildinfo: the version from the blob still in the
            # writable segment, or none, but the same from both readers
            nobi = path + "-nobuildinfo"
            subprocess.run(["objcopy", "--remove-section", ".go.buildinfo", path, nobi],
                           check=True)
            g, why = gobin(nobi)
            e = elfsym(nobi)
            check(g is not None and g == e, f"{tag} without .go.buildinfo: both readers agree",
                  f"{g} {why} vs {e}")
            check(e["go_build_id"] == bid and e["go_version"] in ("", ver),
                  f"{tag} without .go.buildinfo: Go build id kept, version {ver} or none",
                  str(e))

    # a GNU build id of non-printable bytes: lowercase hex of them
    path = build(go, f"hello-{tc}-gnu", (f"-ldflags=-B 0x{ODD_ID}",))
    check(readelf_gnu(path) == ODD_ID, f"{tc}: readelf sees the odd GNU build id")
    agree(f"{tc}/odd-gnu-build-id", path,
          {"gnu_build_id": ODD_ID,
           "go_build_id": pptest.run([go, "tool", "buildid", path], env=pptest.go_env()).stdout.strip(),
           "go_version": go_version_of(path, go)})

    # a Go build-id note of non-printable bytes: lowercase hex of them
    src = os.path.join(tmp, f"hello-{tc}-plain")
    odd = src + "-oddnote"
    hexid = odd_go_note(src, odd)
    agree(f"{tc}/odd-go-build-id", odd,
          {"gnu_build_id": "", "go_build_id": hexid, "go_version": go_version_of(src, go)})

# C: the symbolizer's reader gives readelf's id; gobin says it is not Go
csrc = os.path.join(tmp, "c.c")
with open(csrc, "w") as f:
    f.write("int main(void) { return 0; }\n")
for tag, flag in (("c", "-Wl,--build-id"), ("c-odd", f"-Wl,--build-id=0x{ODD_ID}")):
    cbin = os.path.join(tmp, tag)
    pptest.run(["cc", "-O1", flag, "-o", cbin, csrc], check_rc=0)
    e = elfsym(cbin)
    gnu = readelf_gnu(cbin)
    check(gnu and e == {"gnu_build_id": gnu, "go_build_id": "", "go_version": ""},
          f"{tag}: elfsym gives readelf's GNU build id, no Go labels", f"{e} vs {gnu}")
    g, why = gobin(cbin)
    check(g is None and "not a Go program" in why, f"{tag}: gobin: not a Go program", why)
check(elfsym(os.path.join(tmp, "c-odd"))["gnu_build_id"] == ODD_ID,
      "C binary with a non-printable GNU build id: its bytes in lowercase hex")

done()
