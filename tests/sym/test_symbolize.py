"""The symbolizer (agent/sym/symbolize.c) against live processes.

Expected names come from binutils (nm, readelf) and the Go runtime, runtime
addresses from the live process's /proc/PID/maps; the symbolizer runs as
`symtool serve` (one long-lived symbolizer, like the agent's).
"""
import os
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pptest  # noqa: E402
from pptest import check, done  # noqa: E402
import symlib  # noqa: E402
from symlib import Serve  # noqa: E402

d = pptest.tmpdir()
H = symlib.HERE
CFLAGS = ["-O1", "-fno-omit-frame-pointer", "-Wall"]
SRC_DWARF = []
procs = []


def cc(args):
    pptest.run(["cc", *CFLAGS, *args], timeout=120, check_rc=0)


def build_lib(dirname, variant=1, strip=False, name="libppsym.so"):
    os.makedirs(os.path.join(d, dirname), exist_ok=True)
    out = os.path.normpath(os.path.join(d, dirname, name))
    cc(["-shared", "-fPIC", f"-DVARIANT={variant}", "-o", out, os.path.join(H, "cwlib.c")])
    if strip:
        pptest.run(["strip", "--strip-all", out], check_rc=0)
    return out


def build_exe(name, pie, variant=1, libdir="lib1"):
    out = os.path.join(d, name)
    flags = ["-fPIE", "-pie"] if pie else ["-fno-pie", "-no-pie"]
    cc([*flags, f"-DVARIANT={variant}", "-o", out, os.path.join(H, "cworkload.c"),
        "-L" + os.path.join(d, libdir), "-lppsym", "-Wl,-rpath," + os.path.join(d, libdir), "-ldl"])
    return out


def start(argv, env=None):
    e = dict(os.environ)
    e.update(env or {})
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=e)
    procs.append(p)
    addrs = {}
    for line in p.stdout:
        if line.startswith("ADDR "):
            _, n, a = line.split()
            addrs[n] = int(a, 16)
        if line.startswith("READY"):
            break
    return p, addrs


def stop(p):
    if p.poll() is None:
        p.stdin.close()
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def real_path(pid, basename):
    for s, e, off, perms, path in symlib.read_maps(pid):
        if os.path.basename(path) == basename:
            return path
    return None


def expect_funcs(sv, pid, path, names, what, source=None, dynamic=False):
    """Resolve entry, middle and last byte of each named function of `path`
    (nm) in process pid; every one must name that function."""
    nmf = symlib.nm_funcs(path, dynamic)
    aliases = {}
    for n, (va, size) in nmf.items():
        aliases.setdefault(va, set()).add(n)
    maps = symlib.read_maps(pid)
    segs = symlib.load_segments(path)
    q = {}
    for n in names:
        if n not in nmf:
            check(False, f"{what}: nm lists {n}")
            continue
        va, size = nmf[n]
        for k in sorted({0, size // 2, max(size - 1, 0)}):
            q[symlib.link_to_runtime(va + k, path, maps, segs)] = (n, aliases[va])
    res = sv.resolve(pid, [a for a in q if a])
    bad = []
    bid = symlib.gnu_build_id(path)
    for a, (n, al) in q.items():
        r = res.get(a)
        if not r or not r["frames"] or r["frames"][0][0] not in al or not r["map"] \
                or r["map"]["path"] != path or r["map"]["build_id"] != bid \
                or (source and r["source"] != source):
            bad.append((hex(a) if a else a, n, r))
    check(q and not bad, f"{what}: {len(q)} addresses name their function "
          f"(mapping path, GNU build id {bid[:12]}...)", str(bad[:3]))
    return res


try:
    lib1 = build_lib("lib1")
    lib_s = build_lib("lib_s", strip=True)
    libdl = build_lib(".", variant=3, name="libppdl.so")
    exes = {"nopie": build_exe("cw-nopie", False), "pie": build_exe("cw-pie", True)}
    exes["pie-stripped"] = os.path.join(d, "cw-pie-stripped")
    shutil.copy(exes["pie"], exes["pie-stripped"])
    pptest.run(["strip", "--strip-all", exes["pie-stripped"]], check_rc=0)

    sv = Serve()
    # --- C executables and a shared library --------------------------------
    for v in ("nopie", "pie"):
        p, printed = start([exes[v]])
        exe = exes[v]
        nmf = symlib.nm_funcs(exe)
        segs = symlib.load_segments(exe)
        calc = symlib.link_to_runtime(nmf["pp_func_alpha_v1"][0], exe, symlib.read_maps(p.pid), segs)
        check(calc == printed["alpha"], f"{v}: nm + maps give the address the process prints",
              f"{calc} vs {printed['alpha']}")
        expect_funcs(sv, p.pid, exe, ["pp_func_alpha_v1", "pp_func_beta_v1", "pp_static_delta",
                                      "main"], f"{v} exe", source=2)
        lib = real_path(p.pid, "libppsym.so")
        expect_funcs(sv, p.pid, lib, ["pp_lib_gamma", "pp_lib_static", "pp_lib_zeta_v1",
                                      "pp_dl_epsilon"], f"{v} shared library", source=2)
        libc = real_path(p.pid, "libc.so.6")
        if libc:
            expect_funcs(sv, p.pid, libc, ["malloc", "fgets", "read"], f"{v} libc (.dynsym)",
                         dynamic=True)
        # dlopen after the first resolve: the maps are read again on a miss
        p.stdin.write(f"dlopen {libdl}\n")
        p.stdin.flush()
        eps = None
        for line in p.stdout:
            if line.startswith("ADDR epsilon"):
                eps = int(line.split()[2], 16)
            if line.startswith("DONE"):
                break
        r = sv.resolve(p.pid, [eps]).get(eps, {})
        check(r.get("frames") and r["frames"][0][0] == "pp_dl_epsilon"
              and r["map"]["path"] == libdl, f"{v}: function of a library dlopen()ed later", str(r))
        # vdso: the image from the process's memory, symbols from binutils
        vd = [m for m in symlib.read_maps(p.pid) if m[4] == "[vdso]"]
        if vd:
            s, e = vd[0][0], vd[0][1]
            with open(f"/proc/{p.pid}/mem", "rb") as f:
                f.seek(s)
                img = f.read(e - s)
            vpath = os.path.join(d, "vdso.so")
            with open(vpath, "wb") as f:
                f.write(img)
            vf = symlib.nm_funcs(vpath, dynamic=True)
            byaddr = {}
            for n, (a, sz) in vf.items():
                byaddr.setdefault(a, set()).add(n.split("@")[0])
            q = {s + a: names for a, names in byaddr.items()}
            res = sv.resolve(p.pid, list(q))
            bad = [(hex(a), n, res.get(a)) for a, n in q.items()
                   if not res.get(a, {}).get("frames") or res[a]["frames"][0][0] not in n]
            check(q and not bad, f"{v}: {len(q)} vdso functions resolve", str(bad[:3]))
        stop(p)

    # stripped executable: no names, but the address and mapping stay
    p, printed = start([exes["pie-stripped"]])
    a = printed["alpha"]
    r = sv.resolve(p.pid, [a]).get(a, {})
    check(r and not r["frames"] and r["map"] and r["map"]["path"] == exes["pie-stripped"]
          and r["map"]["build_id"] == symlib.gnu_build_id(exes["pie-stripped"]),
          "stripped exe: address kept with mapping and build id, no frames", str(r))
    stop(p)
    # stripped shared library: exported functions from .dynsym, locals unnamed
    p, printed = start([exes["pie"]], env={"LD_LIBRARY_PATH": os.path.join(d, "lib_s")})
    lib = real_path(p.pid, "libppsym.so")
    check(lib == lib_s, "stripped library is the one mapped", str(lib))
    expect_funcs(sv, p.pid, lib, ["pp_lib_gamma", "pp_dl_epsilon"], "stripped library", source=3,
                 dynamic=True)
    st_va, st_size = symlib.nm_funcs(lib1)["pp_lib_static"]  # same code, unstripped copy
    ra = symlib.link_to_runtime(st_va + 1, lib, symlib.read_maps(p.pid), symlib.load_segments(lib))
    r = sv.resolve(p.pid, [ra]).get(ra, {})
    check(r and not r["frames"] and r["map"], "stripped library: local function not misnamed",
          str(r))
    stop(p)

    # --- Go: stripped and stripped PIE, live ---------------------------------
    for v, flags in (("stripped", ["-ldflags=-s -w"]),
                     ("pie-stripped", ["-buildmode=pie", "-ldflags=-s -w"])):
        gb = pptest.go_build(os.path.join(H, "goworkload.go"), os.path.join(d, "gw-" + v), flags)
        gp = subprocess.Popen([gb, "wait"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
        procs.append(gp)
        out = []
        for line in gp.stdout:
            out.append(line)
            if line.startswith("READY"):
                break
        _, stacks = symlib.parse_goworkload("".join(out))
        allpcs = sorted({pc - 1 for _, pcs, _ in stacks for pc in pcs})
        res = sv.resolve(gp.pid, allpcs)
        errs = []
        for name, pcs, frames in stacks:
            errs += symlib.compare_stack(name, pcs, frames,
                                         lambda pc: res.get(pc - 1, {}).get("frames", []))
        check(stacks and not errs, f"Go {v} (live): {len(allpcs)} PCs give the runtime's own "
              "frames incl. inlined", "\n".join(errs[:5]))
        m = res[allpcs[0]]["map"]
        check(m and m["kind"] == 3 and m["build_id"] and m["go_version"].startswith("go1."),
              f"Go {v}: mapping carries the Go build id and version", str(m))
        gp.stdin.close()
        gp.wait(timeout=10)

    # --- kernel -----------------------------------------------------------------
    ks = {}
    mod = None
    with open("/proc/kallsyms") as f:
        for line in f:
            a, t, n = line.split()[:3]
            if t in "tT" and n in ("do_sys_openat2", "__x64_sys_getpid", "schedule"):
                ks[n] = int(a, 16)
            if (mod is None or mod[2].startswith("__builtin")) and "\t[" in line and t in "tT" \
                    and not (mod and line.split("[")[1].startswith("__builtin")):
                mod = (int(a, 16), n, line.split("[")[1].split("]")[0])
    q = {a + off: n for n, a in ks.items() for off in (0, 4)}
    if mod:
        q[mod[0]] = mod[1]
    res = symlib.parse_results(sv.cmd("kernel " + " ".join(f"{a:x}" for a in q)))
    bad = [(hex(a), n, res.get(a)) for a, n in q.items()
           if not res.get(a, {}).get("frames") or res[a]["frames"][0][0] != n]
    check(len(ks) == 3 and not bad, f"kernel: {len(q)} addresses resolve via kallsyms",
          str(bad[:3]))
    km = res.get(ks.get("schedule"), {}).get("map") or {}
    check(km.get("path") == "[kernel.kallsyms]" and len(km.get("build_id", "")) == 40,
          "kernel mapping [kernel.kallsyms] with the kernel's GNU build id", str(km))
    if mod:
        check((res.get(mod[0], {}).get("map") or {}).get("path") == f"[{mod[2]}]",
              f"kernel module symbol mapped to [{mod[2]}]")
    r = symlib.parse_results(sv.cmd("kernel 1000"))
    check(r.get(0x1000) and not r[0x1000]["frames"], "non-kernel address stays unresolved")

    # --- process exits after sym_prepare: still resolves --------------------------
    p, printed = start([exes["pie"]])
    sv.cmd(f"prepare {p.pid}")
    pid = p.pid
    stop(p)
    time.sleep(0.1)
    r = sv.resolve(pid, [printed["alpha"]]).get(printed["alpha"], {})
    check(r and r["frames"] and r["frames"][0][0] == "pp_func_alpha_v1",
          "exited process resolves from maps and files kept by sym_prepare", str(r))
    r = symlib.parse_results(Serve().cmd(f"resolve {pid} {printed['alpha']:x}"))
    check("error" in r and "gone" in r["error"], "unknown exited process: -ESRCH", str(r))
    sv.close()

    # --- file replaced under the same path (new inode) ---------------------------
    sv = Serve()
    os.makedirs(os.path.join(d, "swap"))
    x = os.path.join(d, "swap", "cw")
    shutil.copy(exes["pie"], x)
    p1, a1 = start([x])
    r1 = sv.resolve(p1.pid, [a1["alpha"]])[a1["alpha"]]
    v2 = build_exe("cw-v2", True, variant=2)
    shutil.copy(v2, x + ".tmp")
    os.rename(x + ".tmp", x)
    p2, a2 = start([x])
    r2 = sv.resolve(p2.pid, [a2["alpha"]])[a2["alpha"]]
    r1b = sv.resolve(p1.pid, [a1["alpha"]])[a1["alpha"]]
    check(r1["frames"][0][0] == "pp_func_alpha_v1" and r2["frames"][0][0] == "pp_func_alpha_v2"
          and r1b["frames"][0][0] == "pp_func_alpha_v1",
          "replaced binary (same path, new inode): each process gets its own file's names",
          f"{r1['frames']} {r2['frames']} {r1b['frames']}")
    stop(p1)
    stop(p2)
    sv.close()

    # --- library rewritten in place (same inode) ----------------------------------
    ip = build_lib("lib_ip", variant=1)
    ip2 = build_lib("lib_ip2", variant=2)
    z1 = symlib.nm_funcs(ip)["pp_lib_zeta_v1"][0]
    z2 = symlib.nm_funcs(ip2)["pp_lib_zeta_v2"][0]
    sv = Serve({"SYMTOOL_REVALIDATE_MS": "1"})
    p, _ = start([exes["pie"]], env={"LD_LIBRARY_PATH": os.path.join(d, "lib_ip")})
    za = symlib.link_to_runtime(z1, ip, symlib.read_maps(p.pid), symlib.load_segments(ip))
    ra = sv.resolve(p.pid, [za])[za]
    ino = os.stat(ip).st_ino
    time.sleep(0.02)
    with open(ip2, "rb") as f:
        data = f.read()
    with open(ip, "r+b") as f:
        f.truncate(0)
        f.write(data)
    time.sleep(0.02)
    rb = sv.resolve(p.pid, [za])[za]
    stt = sv.stats()
    check(z1 == z2 and os.stat(ip).st_ino == ino and ra["frames"][0][0] == "pp_lib_zeta_v1"
          and rb["frames"][0][0] == "pp_lib_zeta_v2" and stt["file_reloads"] >= 1,
          "library rewritten in place (same inode): reloaded after revalidation",
          f"{ra['frames']} {rb['frames']} {stt}")
    p.kill()
    p.wait()
    sv.close()

    # --- deleted binary, and a binary only visible in another mount namespace ----
    sv = Serve()
    os.makedirs(os.path.join(d, "del"))
    x = os.path.join(d, "del", "cw")
    shutil.copy(exes["pie"], x)
    p, printed = start([x])
    os.unlink(x)
    r = sv.resolve(p.pid, [printed["alpha"]])[printed["alpha"]]
    check(r["frames"] and r["frames"][0][0] == "pp_func_alpha_v1"
          and r["map"]["path"] == x + " (deleted)",
          "deleted binary resolves through /proc/PID/map_files", str(r))
    stop(p)
    mnt = os.path.join(d, "nsmnt")
    os.makedirs(mnt)
    p, printed = start(["unshare", "--mount", "--propagation", "private", "--fork", "sh", "-c",
                        f"mount -t tmpfs none {mnt} && cp {exes['pie']} {mnt}/cw-ns && "
                        f"exec {mnt}/cw-ns"])
    pid = printed.get("pid")
    r = sv.resolve(pid, [printed["alpha"]]).get(printed["alpha"], {}) if pid else {}
    check(pid and not os.path.exists(f"{mnt}/cw-ns") and r.get("frames")
          and r["frames"][0][0] == "pp_func_alpha_v1" and r["map"]["path"] == f"{mnt}/cw-ns",
          "binary in another mount namespace (container) resolves", str(r))
    stop(p)
    sv.close()

    # --- bounds: max files and max bytes --------------------------------------------
    p, printed = start([exes["pie"]])
    libc = real_path(p.pid, "libc.so.6")
    lf = symlib.nm_funcs(libc, dynamic=True)
    addrs_all = {
        printed["alpha"]: "pp_func_alpha_v1",
        symlib.link_to_runtime(symlib.nm_funcs(lib1)["pp_lib_gamma"][0], lib1,
                               symlib.read_maps(p.pid), symlib.load_segments(lib1)): "pp_lib_gamma",
        symlib.link_to_runtime(lf["malloc"][0], libc, symlib.read_maps(p.pid),
                               symlib.load_segments(libc)): "malloc",
    }
    sv = Serve({"SYMTOOL_MAX_FILES": "2"})
    r = sv.resolve(p.pid, list(addrs_all))
    ok1 = all(r[a]["frames"] and r[a]["frames"][0][0] in (n, "__libc_malloc")
              for a, n in addrs_all.items())
    r = sv.resolve(p.pid, [printed["alpha"]])
    st = sv.stats()
    check(ok1 and r[printed["alpha"]]["frames"] and st["files"] <= 2 and st["file_evictions"] >= 1,
          "max_files=2: three files resolve, cache trimmed to 2 afterwards", str(st))
    r = sv.resolve(p.pid, list(addrs_all))
    check(all(r[a]["frames"] for a in addrs_all), "evicted files reload on demand")
    sv.close()
    sv = Serve({"SYMTOOL_MAX_BYTES": "4096"})
    r = sv.resolve(p.pid, [printed["alpha"]])[printed["alpha"]]
    check(not r["frames"] and r["map"] and "budget" in r["map"]["error"],
          "max_bytes below one file: address kept unresolved with a reason", str(r))
    sv.close()

    # --- figures: resolve time and cache memory for typical processes -----------
    qs = [a for a in (symlib.link_to_runtime(va + 1, libc, symlib.read_maps(p.pid),
                                             symlib.load_segments(libc))
                      for va, _ in lf.values()) if a]
    qs += list(printed.values())
    out = symlib.symtool("bench", p.pid, 20, *[f"{a:x}" for a in qs]).stdout
    print("figures C process (exe + libppsym + libc, .dynsym of libc):\n" + out)
    fig = dict(l.split() for l in out.splitlines())
    check(int(fig["resolved"]) >= 0.95 * len(qs), f"bench: {fig['resolved']}/{len(qs)} resolved")
    stop(p)
    gb = pptest.go_build(os.path.join(H, "goworkload.go"), os.path.join(d, "gw-normal"))
    gp = subprocess.Popen([gb, "wait"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    procs.append(gp)
    for line in gp.stdout:
        if line.startswith("READY"):
            break
    fl = symlib.symtool("funcs", gb).stdout.splitlines()
    qs = [int(l.split()[0], 16) + 1 for l in fl]
    out = symlib.symtool("bench", gp.pid, 20, *[f"{a:x}" for a in qs]).stdout
    print("figures Go process (pclntab, every function once):\n" + out)
    fig = dict(l.split() for l in out.splitlines())
    check(int(fig["resolved"]) == len(qs), f"bench Go: {fig['resolved']}/{len(qs)} resolved")
    check(float(fig["warm_us_per_addr"]) < 100, f"warm resolve {fig['warm_us_per_addr']} us/addr")
    gp.stdin.close()
    gp.wait(timeout=10)
finally:
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()
done()
