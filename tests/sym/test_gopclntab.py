"""pushprof's .gopclntab reader against the Go toolchain's own readers.

Go workloads built normal, stripped (-s -w), PIE and PIE+stripped:
- every PC of stacks the Go runtime recorded itself (runtime.Callers) resolves
  to exactly the frames runtime.CallersFrames reports, inlined calls included;
- the function list equals `go tool nm` (text symbols) of the unstripped build;
- sampled PCs agree with `go tool addr2line` (function, file:line);
- Go version and Go build id agree with `go version -m` / `go tool buildid`.
"""
import os
import glob
import random
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pptest  # noqa: E402
from pptest import check, done  # noqa: E402
import symlib  # noqa: E402

src = os.path.join(symlib.HERE, "goworkload.go")
variants = {
    "normal": [],
    "stripped": ["-ldflags=-s -w"],
    "pie": ["-buildmode=pie"],
    "pie-stripped": ["-buildmode=pie", "-ldflags=-s -w"],
}


def suite(gobin):
    d = pptest.tmpdir()
    goenv = dict(pptest.go_env(), GOTOOLCHAIN="local")
    gover = pptest.run([gobin, "env", "GOVERSION"], env=goenv).stdout.strip()
    print(f"--- toolchain {gobin}: {gover}")

    def gotool(*args, input=None):
        p = pptest.run([gobin, "tool", *args], env=goenv, input=input, timeout=120)
        if p.returncode != 0:
            raise RuntimeError(f"go tool {args}: {p.stderr}")
        return p.stdout

    # cgo + PIE forces the system linker: no .gopclntab section, the table
    # sits inside .data.rel.ro and is found by its header.
    cgo_src = os.path.join(d, "goworkload_cgo.go")
    with open(src) as f:
        text = f.read()
    with open(cgo_src, "w") as f:
        f.write(text.replace("\nimport (", '\nimport "C"\nimport (', 1))
    bins = {}
    for v, flags in list(variants.items()) + [("cgo-pie", ["-buildmode=pie"]),
                                              ("cgo-pie-stripped", ["-buildmode=pie",
                                                                    "-ldflags=-s -w"])]:
        out = os.path.join(d, "gw-" + v)
        env = dict(goenv, CGO_ENABLED="1") if v.startswith("cgo") else goenv
        pptest.run([gobin, "build", *flags, "-o", out, cgo_src if v.startswith("cgo") else src],
                   timeout=300, env=env, check_rc=0)
        bins[v] = out
    secs = pptest.run(["readelf", "-SW", bins["cgo-pie-stripped"]]).stdout
    check(".gopclntab" not in secs, f"{gover} cgo-pie-stripped: no .gopclntab section (external link)")

    # --- 1. runtime-recorded stacks, all variants --------------------------------
    for v, path in bins.items():
        out = pptest.run([path], timeout=30, check_rc=0).stdout
        maps_lines, stacks = symlib.parse_goworkload(out)
        maps = symlib.parse_maps_lines(maps_lines)
        segs = symlib.load_segments(path)
        check(len(stacks) == 5 and maps, f"{gover} {v}: workload recorded 5 stacks and its maps")
        allpcs = sorted({pc for _, pcs, _ in stacks for pc in pcs})
        link = {pc: symlib.runtime_to_link(pc - 1, maps, segs) for pc in allpcs}
        check(all(x is not None for x in link.values()), f"{gover} {v}: all PCs inside the executable")
        res = symlib.parse_frames(symlib.symtool("pclntab", path,
                                                 *[f"{x:x}" for x in link.values()]).stdout)
        errs, n_inl = [], 0
        for name, pcs, frames in stacks:
            errs += symlib.compare_stack(f"{v}/{name}", pcs, frames,
                                         lambda pc: res.get(link[pc], []))
        for name, pcs, frames in stacks:
            if name == "inline3":
                chain = res.get(link[pcs[1]], [])
                n_inl = sum(1 for f in chain if f[3])
                # deep2 and deep3 fit the inliner's budget; deep1 may or may not.
                check([f[0] for f in chain][:3] == ["main.deep3", "main.deep2", "main.deep1"]
                      and chain[-1][0] in ("main.deep1", "main.shallow")
                      and [f[3] for f in chain] == [True] * (len(chain) - 1) + [False],
                      f"{gover} {v}: inline chain deep3<-deep2<-deep1[<-shallow]", str(chain))
        check(not errs, f"{gover} {v}: every frame equals runtime.CallersFrames "
              f"({sum(len(s[1]) for s in stacks)} PCs)", "\n".join(errs[:10]))
        check(n_inl >= 2, f"{gover} {v}: {n_inl} inlined frames at one PC", str(n_inl))

    # --- 2. function list vs go tool nm ------------------------------------------
    def funcs(path):
        out = symlib.symtool("funcs", path).stdout
        r = []
        for line in out.splitlines():
            e, end, name = line.split(" ", 2)
            r.append((int(e, 16), int(end, 16), name))
        return r


    for v in ("normal", "pie"):
        fl = funcs(bins[v])
        nm = {}
        for line in gotool("nm", bins[v]).splitlines():
            f = line.split(None, 2)
            if len(f) >= 3 and f[1] in ("T", "t"):
                # PIE symtabs name assembly (ABI0) functions "x.abi0"; pclntab "x".
                name = f[2][:-5] if f[2].endswith(".abi0") else f[2]
                # and the pclntab writes array lengths in type..eq names as [...].
                # (Go 1.19 only; 1.23 keeps the length).
                names = nm.setdefault(int(f[0], 16), set())
                names.add(name)
                names.add(re.sub(r"\[\d+\]", "[...]", name))
        # pclntab spells the linker's "." in some generated names as "·"
        bad = [(hex(e), n) for e, _, n in fl if n.replace("·", ".") not in nm.get(e, ())
               and n not in nm.get(e, ())]
        check(len(fl) > 1000 and not bad, f"{gover} {v}: {len(fl)} pclntab functions match go tool nm",
              str(bad[:5]))
        ordered = all(fl[i][0] < fl[i][1] <= fl[i + 1][0] for i in range(len(fl) - 1))
        check(ordered, f"{gover} {v}: functions sorted and non-overlapping")
        vs = v.replace("normal", "") + ("-" if v == "pie" else "") + "stripped"
        fs = funcs(bins[vs])
        check([n for _, _, n in fs] == [n for _, _, n in fl] and
              [(e, x) for e, x, _ in fs] == [(e, x) for e, x, _ in fl],
              f"{vs}: same function list as the unstripped build")

    # --- 3. sampled PCs vs go tool addr2line (non-PIE: addr2line 1.19 has no PIE) --
    rnd = random.Random(1)
    for v in ("normal", "stripped"):
        fl = funcs(bins[v])
        sample = []
        for e, end, name in rnd.sample(fl, min(400, len(fl))):
            sample += [e, e + (end - e) // 2, end - 1]
        want = gotool("addr2line", bins[v], input="".join(f"0x{x:x}\n" for x in sample)).splitlines()
        res = symlib.parse_frames(symlib.symtool("pclntab", bins[v],
                                                 *[f"{x:x}" for x in sample]).stdout)
        bad, inl = [], 0
        for i, pc in enumerate(sample):
            wf, wl = want[2 * i], want[2 * i + 1]
            fr = res.get(pc, [])
            if not fr:
                bad.append((hex(pc), "unresolved"))
                continue
            inl += len(fr) > 1
            # No line (padding after a function): addr2line says ":-1", we "?:0".
            got_fl = f"{fr[0][1]}:{fr[0][2]}" if fr[0][2] else ":-1"
            if fr[-1][0] != wf or got_fl != wl:
                bad.append((hex(pc), fr[-1][0], got_fl, wf, wl))
        check(len(sample) > 1000 and not bad,
              f"{gover} {v}: {len(sample)} PCs agree with go tool addr2line ({inl} with inlined frames)",
              str(bad[:5]))
        check(inl > 0, f"{gover} {v}: the sample includes inlined call sites")

    # --- 4. version, build id, data symbols ---------------------------------------
    for v, path in bins.items():
        info = dict(l.split(" ", 1) if " " in l else (l, "")
                    for l in symlib.symtool("info", path).stdout.splitlines())
        bid = gotool("buildid", path).strip()
        check(info.get("go_version") == gover, f"{gover} {v}: Go version {info.get('go_version')}", gover)
        check(info.get("go_build_id") == bid, f"{gover} {v}: Go build id matches go tool buildid",
              f"{info.get('go_build_id')} != {bid}")
        check(info.get("inline") == "1", f"{gover} {v}: inline tree found (moduledata.gofunc)")
    nm = {l.split()[2]: int(l.split()[0], 16) for l in gotool("nm", bins["normal"]).splitlines()
          if len(l.split()) >= 3}
    for sym in ("runtime.mbuckets", "runtime.MemProfileRate", "main.shallow"):
        out = symlib.symtool("findsym", bins["normal"], sym).stdout.split()
        check(out and int(out[0], 16) == nm[sym], f"findsym {sym} = go tool nm", str(out))
    for sym in ("runtime.mProf_Malloc", "main.shallow"):
        out = symlib.symtool("gofunc", bins["stripped"], sym).stdout.split()
        check(out and int(out[0], 16) == nm[sym], f"{gover} stripped: pclntab function {sym} "
              "by name = go tool nm of the unstripped build", str(out))
    p = symlib.symtool("findsym", bins["stripped"], "runtime.mbuckets", check=False)
    check(p.returncode == 1 and "not found" in p.stdout, "findsym on a stripped binary: not found")

    # --- 5. frameless functions (pcsp 0 at every PC) against the disassembly --------
    # A function called frameless must contain no instruction that moves SP
    # (push/pop, or %rsp as destination): the CPU sampler reads its caller
    # at [SP]. GNU objdump is the reference (Go's own disassembler misreads
    # some AVX2 code, e.g. in indexbytebody, as writes to SP).
    if pptest.have("objdump"):
        start = re.compile(r"^([0-9a-f]+) <(.*)>:$")
        insn = re.compile(r"^\s+[0-9a-f]+:\s+(.*?)\s*$")
        for v in ("normal", "pie"):
            moves, cur = {}, None
            out = pptest.run(["objdump", "-d", "--no-show-raw-insn", bins[v]], timeout=300).stdout
            for line in out.splitlines():
                m = start.match(line)
                if m:
                    cur = int(m.group(1), 16)
                    continue
                m = insn.match(line)
                if not m or cur is None:
                    continue
                op = m.group(1)
                if re.match(r"(push|pop)[a-z]?\s", op) or (
                        re.search(r",%rsp$", op) and not re.match(r"(cmp|test|bt)", op)):
                    moves.setdefault(cur, op)
            fl = {}
            for l in symlib.symtool("frameless", bins[v]).stdout.splitlines():
                a, _, name = l.split(" ", 2)
                fl[int(a, 16)] = name
            bad = [(name, moves[a]) for a, name in fl.items() if a in moves]
            print(f"{gover} {v}: {len(fl)} functions frameless by pcsp")
            check(len(fl) > 20 and not bad, f"{gover} {v}: no frameless function moves SP "
                  "(GNU objdump)", str(bad[:5]))
            names = set(fl.values())
            check({"runtime.memmove", "runtime.memclrNoHeapPointers"} <= names and
                  not names & {"runtime.systemstack", "runtime.mallocgc", "main.main"},
                  f"{gover} {v}: memmove and memclr frameless; systemstack, mallocgc, "
                  "main.main not")


toolchains = ["go"] + sorted(glob.glob("/usr/lib/go-1.2[0-9]*/bin/go"))
for gobin in toolchains:
    suite(gobin)
done()
