"""scripts/build-deb.sh makes a .deb that installs with `apt install ./x.deb`,
runs, and is removed cleanly.

Takes ~35 s from a cold build (own build directory, release build) plus a few
seconds for apt. PUSHPROF_TEST_DEB=0 skips it. Skipped too when a `pushprof`
package is already installed on the machine (the test would replace it).
"""
import os
import subprocess
import sys
import time

import pptest
from pptest import check, done

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import deploylib as dl  # noqa: E402

RUNTIME_LIBS = ["libbpf1", "libelf1", "libprotobuf-c1", "libgrpc29", "libyaml-0-2",
                "libzstd1", "zlib1g", "libmicrohttpd12", "libcurl4", "libpcre2-8-0"]


def sh(args, timeout=300):
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=env)


def installed():
    p = sh(["dpkg-query", "-W", "-f=${Status}", "pushprof"])
    return p.returncode == 0 and "install ok installed" in p.stdout


def main():
    if os.environ.get("PUSHPROF_TEST_DEB", "1") == "0":
        dl.skip("PUSHPROF_TEST_DEB=0")
    for prog in ("dpkg-deb", "apt", "dpkg-query"):
        if not pptest.have(prog):
            dl.skip(f"{prog} is not available")
    if installed():
        dl.skip("a pushprof package is already installed here; not replacing it")

    out = pptest.tmpdir("pushprof-deb-")
    t0 = time.time()
    env = dict(os.environ, PUSHPROF_DEB_BUILD_DIR=os.path.join(dl.BUILD, "deb-build"))
    p = subprocess.run([os.path.join(dl.SRC, "scripts", "build-deb.sh"), out],
                       capture_output=True, text=True, timeout=900, env=env)
    t_build = time.time() - t0
    deb = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else ""
    if not check(p.returncode == 0 and deb.endswith(".deb") and os.path.exists(deb),
                 f"build-deb.sh builds a package ({t_build:.0f} s)", p.stderr[-1500:]):
        return done()
    info = sh(["dpkg-deb", "-I", deb]).stdout
    deps = next((ln for ln in info.splitlines() if ln.strip().startswith("Depends:")), "")
    for lib in RUNTIME_LIBS:
        check(lib in deps, f"Depends names {lib}", deps)
    files = sh(["dpkg-deb", "-c", deb]).stdout
    for path in ("./usr/bin/pushprof", "./etc/pushprof/pushprof.yaml",
                 "./usr/lib/systemd/system/pushprof.service",
                 "./usr/share/doc/pushprof/deploy.md"):
        check(path in files, f"package holds {path}")
    conff = sh(["dpkg-deb", "-f", deb, "Package"]).stdout.strip()
    check(conff == "pushprof", "package name pushprof")

    t1 = time.time()
    try:
        p = sh(["apt-get", "install", "-y", "--no-install-recommends", deb], timeout=300)
        if not check(p.returncode == 0 and installed(),
                     f"apt install ./{os.path.basename(deb)}", p.stdout[-800:] + p.stderr[-800:]):
            return done()
        listed = [ln for ln in sh(["dpkg", "-L", "pushprof"]).stdout.splitlines()
                  if os.path.isfile(ln)]
        v = sh(["/usr/bin/pushprof", "version"])
        version = os.path.basename(deb).split("_")[1]
        check(v.returncode == 0 and v.stdout.splitlines()[:1] == [f"pushprof {version}"],
              "installed `pushprof version` runs", v.stdout + v.stderr)
        c = sh(["/usr/bin/pushprof", "check-config", "/etc/pushprof/pushprof.yaml"])
        check(c.returncode == 0, "installed default config passes check-config", c.stderr[-500:])
        conf = open("/var/lib/dpkg/info/pushprof.conffiles").read()
        check("/etc/pushprof/pushprof.yaml" in conf, "config is a conffile")
        if pptest.have("systemd-analyze"):
            a = sh(["systemd-analyze", "verify", "/usr/lib/systemd/system/pushprof.service"])
            check(a.returncode == 0 and not (a.stdout + a.stderr).strip(),
                  "installed unit passes systemd-analyze verify", a.stdout + a.stderr)
        r = sh(["apt-get", "remove", "--purge", "-y", "pushprof"], timeout=300)
        check(r.returncode == 0 and not installed(), "apt remove --purge removes it",
              r.stdout[-500:] + r.stderr[-500:])
        left = [f for f in listed if os.path.exists(f)]
        check(not left and not os.path.exists("/etc/pushprof/pushprof.yaml"),
              "no file of the package is left behind", str(left))
    finally:
        if installed():
            sh(["apt-get", "remove", "--purge", "-y", "pushprof"])
        subprocess.run(["rm", "-rf", out])
    print(f"timing: build {t_build:.1f} s, install+remove {time.time() - t1:.1f} s")
    done()


if __name__ == "__main__":
    main()
