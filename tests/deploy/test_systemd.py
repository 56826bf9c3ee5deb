"""deploy/systemd/pushprof.service: `systemd-analyze verify` is clean, the
offline security analysis rates it OK or better, the hardening asked for is
there, and `meson install` puts binary, config, unit and docs in place."""
import os
import re
import subprocess
import sys

import pptest
from pptest import check, done

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import deploylib as dl  # noqa: E402

UNIT = os.path.join(dl.SRC, "deploy", "systemd", "pushprof.service")


def directives(path):
    out = {}
    with open(path) as f:
        for ln in f:
            ln = ln.strip()
            if not ln or ln.startswith(("#", ";", "[")) or "=" not in ln:
                continue
            k, _, v = ln.partition("=")
            out.setdefault(k.strip(), []).append(v.strip())
    return out


def main():
    if not pptest.have("systemd-analyze"):
        dl.skip("systemd-analyze is not installed")
    d = pptest.tmpdir("pushprof-unit-")
    # verify needs ExecStart to exist: point it at the binary under test
    unit = os.path.join(d, "pushprof.service")
    with open(UNIT) as f:
        text = f.read()
    with open(unit, "w") as f:
        f.write(text.replace("/usr/bin/pushprof", os.path.abspath(pptest.PUSHPROF)))
    p = subprocess.run(["systemd-analyze", "verify", unit], capture_output=True, text=True,
                       timeout=60)
    check(p.returncode == 0 and not p.stdout.strip() and not p.stderr.strip(),
          "systemd-analyze verify: no errors or warnings", p.stdout + p.stderr)

    p = subprocess.run(["systemd-analyze", "security", "--offline=yes", unit],
                       capture_output=True, text=True, timeout=60)
    m = re.search(r"Overall exposure level for \S+: ([0-9.]+) (\w+)", p.stdout)
    check(m and float(m.group(1)) < 5.0,
          "systemd-analyze security rates the unit OK or better (< 5.0)",
          m.group(0) if m else p.stdout[-500:] + p.stderr[-500:])

    u = directives(UNIT)
    want = {
        "Type": "simple", "Restart": "on-failure", "RestartSec": "10",
        "ProtectSystem": "strict", "ReadWritePaths": "/var/lib/pushprof",
        "StateDirectory": "pushprof", "ProtectHome": "yes", "PrivateTmp": "yes",
        "NoNewPrivileges": "yes", "User": "root",
    }
    for k, v in want.items():
        check(u.get(k) == [v], f"unit: {k}={v}", str(u.get(k)))
    # `systemctl reload` sends the SIGHUP the agent reloads on
    check(u.get("ExecReload") == ["/bin/kill -HUP $MAINPID"], "unit: ExecReload sends SIGHUP",
          str(u.get("ExecReload")))
    check(u.get("ExecStart") == ["/usr/bin/pushprof run --config=/etc/pushprof/pushprof.yaml"],
          "unit runs /usr/bin/pushprof with /etc/pushprof/pushprof.yaml", str(u.get("ExecStart")))
    caps = set(u.get("CapabilityBoundingSet", [""])[0].split())
    docs = dl.load_manifests()
    ds = [o for objs in docs.values() for o in objs if o["kind"] == "DaemonSet"][0]
    k8s = {"CAP_" + c for c in dl.container(ds)["securityContext"]["capabilities"]["add"]}
    # + NET_ADMIN: the proc connector exists only in the host's network
    # namespace, which the unit has and the (non-hostNetwork) pod has not
    check(caps == k8s | {"CAP_NET_ADMIN"} and "CAP_SYS_ADMIN" not in caps,
          "CapabilityBoundingSet is the DaemonSet's set plus NET_ADMIN (no SYS_ADMIN)",
          f"unit {sorted(caps)} vs DaemonSet {sorted(k8s)}")

    # meson install: binary, default config, unit and docs in the usual places
    dest = os.path.join(d, "destdir")
    p = subprocess.run(["meson", "install", "-C", dl.BUILD, "--no-rebuild", "--destdir", dest],
                       capture_output=True, text=True, timeout=300)
    if check(p.returncode == 0, "meson install --destdir works", p.stdout[-500:] + p.stderr[-500:]):
        intro = subprocess.run(["meson", "introspect", dl.BUILD, "--buildoptions"],
                               capture_output=True, text=True).stdout
        import json
        opts = {o["name"]: o["value"] for o in json.loads(intro)}
        prefix = opts["prefix"]
        sysconf = opts["sysconfdir"]
        sysconf = sysconf if sysconf.startswith("/") else os.path.join(prefix, sysconf)
        expect = [os.path.join(prefix, opts["bindir"], "pushprof"),
                  os.path.join(sysconf, "pushprof", "pushprof.yaml"),
                  os.path.join(prefix, "lib/systemd/system/pushprof.service"),
                  os.path.join(prefix, opts["datadir"], "doc/pushprof/deploy.md"),
                  os.path.join(prefix, opts["datadir"], "doc/pushprof/labels.md")]
        for path in expect:
            check(os.path.exists(dest + path), f"meson install puts {path}")
    subprocess.run(["rm", "-rf", d])
    done()


if __name__ == "__main__":
    main()
