"""OOM profiles of Go binaries the prior art cannot handle: a PIE build
(runtime addresses = link-time + load bias) and a stripped one (no .symtab:
the profile variables are found from code, names from .gopclntab)."""
import os

import pptest
from pptest import check, tmpdir
import oomlib


def main():
    oomlib.cleanup_stale()
    d = tmpdir()
    src = os.path.join(oomlib.HERE, "leak.go")
    pie = pptest.go_build(src, os.path.join(d, "leak_pie"), ["-buildmode=pie"])
    stripped = pptest.go_build(src, os.path.join(d, "leak_stripped"), ["-ldflags=-s -w"])
    out = os.path.join(d, "out")
    os.makedirs(out)
    w = oomlib.Watcher(out)
    try:
        for name, exe in (("pie", pie), ("stripped", stripped)):
            with oomlib.Cgroup(name, 100) as cg:
                rc, r, tr = oomlib.oom_one(w, cg, [exe, "-depth", "2"])
                check(tr is not None, f"{name}: tracked")
                check(rc == -9, f"{name}: SIGKILLed ({rc})")
                if check(r is not None and r["event"] == "profile", f"{name}: profile", str(r)):
                    check(r["complete"], f"{name}: complete", r["reason"])
                    check(oomlib.top_inuse(r["file"]) == "main.leakyAllocator",
                          f"{name}: top inuse_space is main.leakyAllocator")
                    tree = pptest.pprof("-traces", "-sample_index=inuse_space", r["file"])
                    check("main.deep" in tree, f"{name}: callers symbolized too")
        check(w.alive(), "watcher alive")
    finally:
        w.stop()
    oomlib.finish(d)


if __name__ == "__main__":
    main()
