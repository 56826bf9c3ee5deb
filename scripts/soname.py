#!/usr/bin/python3
"""Print the SONAME of the shared library the build would link for -lNAME.

meson.build passes it to the agent as PP_SONAME_<X> (agent/base/dynlib.h):
the agent dlopen()s gRPC, libcurl and libmicrohttpd on first use, and must
open the ABI it was compiled against, not a hard-coded guess.

usage: soname.py NAME LIBDIR CC [CC_ARGS...]
Looks for LIBDIR/libNAME.so (pkg-config's libdir), then asks the compiler
(cc -print-file-name=libNAME.so); reads DT_SONAME with readelf."""
import os
import re
import subprocess
import sys


def main():
    name, libdir, cc = sys.argv[1], sys.argv[2], sys.argv[3:]
    base = f"lib{name}.so"
    cands = [os.path.join(libdir, base)] if libdir else []
    out = subprocess.run(cc + [f"-print-file-name={base}"], capture_output=True, text=True)
    if out.returncode == 0 and os.path.isabs(out.stdout.strip()):
        cands.append(out.stdout.strip())
    for path in cands:
        if not os.path.exists(path):
            continue
        r = subprocess.run(["readelf", "-d", os.path.realpath(path)], capture_output=True,
                           text=True)
        m = re.search(r"\(SONAME\)\s+Library soname: \[([^\]]+)\]", r.stdout)
        if m:
            print(m.group(1))
            return 0
    sys.stderr.write(f"soname.py: no SONAME found for {base} in {cands}\n")
    return 1


sys.exit(main())
