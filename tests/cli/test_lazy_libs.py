"""gRPC, libcurl and libmicrohttpd are not linked: the agent opens each the
first time it needs it (agent/base/dynlib.h), so the commands that need none
of them (check-config, a snapshot to a file, a local-store agent without an
HTTP endpoint) do not pay the ~80 shared libraries they pull in.

Checked with the dynamic loader's own account (LD_DEBUG=files: every object
it maps) and the kernel's (/proc/PID/maps of a running agent), for each
library both ways: not loaded when unused, loaded when used. A library that
cannot be loaded (an empty file of its SONAME first on LD_LIBRARY_PATH) is an
error of the command that needs it: a sentence naming the library, a
non-zero exit, no crash; the others run as before."""
import os
import re
import subprocess
import time

import pptest
import rellib as rl
from pptest import PUSHPROF, SOURCE_DIR, check, done, tmpdir

LIBS = ("libgrpc", "libcurl", "libmicrohttpd")
d = tmpdir("pushprof-cli-lazy-")


def ld_files(*args, env=None):
    """(CompletedProcess, {lib: SONAME} of LIBS the loader mapped) for a command."""
    e = {"LD_DEBUG": "files"}
    e.update(env or {})
    r = pptest.pushprof(*args, env=e, timeout=60)
    got = {}
    for m in re.finditer(r"file=((lib[a-z]+)\.so\.[0-9]+) \[", r.stderr):
        if m.group(2) in LIBS:
            got[m.group(2)] = m.group(1)
    return r, got


def mapped(pid):
    """LIBS mapped into a running process, by /proc/PID/maps."""
    with open(f"/proc/{pid}/maps") as f:
        text = f.read()
    return {lib for lib in LIBS if f"/{lib}.so" in text}


def config(name, http="", remote=""):
    return rl.write_config(os.path.join(d, name + ".yaml"), cpu=False, http=http,
                           store=os.path.join(d, "store-" + name), extra=remote)


def agent_libs(name, cfg, env=None):
    """The LIBS a started agent has mapped (None: it did not start)."""
    a = pptest.Agent(cfg, os.path.join(d, name + ".log"), env=env)
    try:
        if not a.started:
            return None, a
        time.sleep(1)  # a lazily made channel or client: let the first window pass
        return mapped(a.pid), a
    finally:
        a.stop()


# 1. commands that need none of them load none of them
r, got = ld_files("check-config", "--no-file-checks",
                  os.path.join(SOURCE_DIR, "config", "pushprof.yaml"))
check(r.returncode == 0 and not got, "check-config of the shipped config: none loaded",
      f"rc={r.returncode} {got} {r.stderr[-300:] if r.returncode else ''}")
# a config that names a gRPC store with headers and a Connect one: checking
# it (grpc's header rules included) still needs neither library
full = rl.write_config(os.path.join(d, "full.yaml"), cpu=False, http=f"127.0.0.1:{rl.free_port()}",
                       store=os.path.join(d, "s"),
                       extra="remote_store:\n  - address: \"127.0.0.1:1\"\n    insecure: true\n"
                             "    headers: {x-scope-orgid: team-a}\n"
                             "  - address: \"127.0.0.1:2\"\n    protocol: pyroscope\n"
                             "    transport: http\n    insecure: true\n")
r, got = ld_files("check-config", "--no-file-checks", full)
check(r.returncode == 0 and not got,
      "check-config naming gRPC, Connect stores and the HTTP endpoint: none loaded",
      f"rc={r.returncode} {got} {r.stderr[-500:] if r.returncode else ''}")
sleeper = subprocess.Popen(["sleep", "60"])
try:
    r, got = ld_files("snapshot", "--pid", str(sleeper.pid), "--output", os.path.join(d, "s.pb.gz"))
    check(not got, "snapshot --pid (a non-Go process: refused): none loaded",
          f"rc={r.returncode} {got}")
finally:
    sleeper.kill()
    sleeper.wait()

# 2. `version` asks libgrpc its version: it loads libgrpc, and only it
r, got = ld_files("version")
check(r.returncode == 0 and set(got) == {"libgrpc"}
      and re.search(r"^grpc core: \d+\.\d+", r.stdout, re.M) is not None,
      "version loads libgrpc only and prints its version", f"{got} {r.stdout}")
sonames = dict(got)

# 3. a running agent: only what its config uses
libs, a = agent_libs("local", config("local"))
check(libs == set(), "run, local store, no HTTP endpoint: none mapped", f"{libs} {a.log()[-500:]}")
libs, a = agent_libs("http", config("http", http=f"127.0.0.1:{rl.free_port()}"))
check(libs == {"libmicrohttpd"}, "run with http_address: libmicrohttpd only",
      f"{libs} {a.log()[-500:]}")
port = rl.free_port()  # nobody listens: the agent starts anyway, and keeps its spool
libs, a = agent_libs("grpc", config("grpc", remote=f"remote_store: {{address: \"127.0.0.1:{port}\", "
                                                   "insecure: true}\n"))
check(libs == {"libgrpc"}, "run with a gRPC remote store: libgrpc only",
      f"{libs} {a.log()[-500:]}")
libs, a = agent_libs("connect",
                     config("connect", remote=f"remote_store: {{address: \"127.0.0.1:{port}\", "
                                              "protocol: pyroscope, transport: http, "
                                              "insecure: true}\n"))
check(libs == {"libcurl"}, "run with a Connect (HTTP) remote store: libcurl only",
      f"{libs} {a.log()[-500:]}")

# the loader names what it opened: the SONAMEs the build compiled in
r, got = ld_files("run", "--config",
                  config("all", http=f"127.0.0.1:{rl.free_port()}",
                         remote=f"remote_store: {{address: \"127.0.0.1:{port}\", "
                                "protocol: pyroscope, transport: http, insecure: true}\n"),
                  "--duration", "2s")
sonames.update(got)
check(r.returncode == 0 and set(sonames) == set(LIBS), "each library's SONAME seen",
      f"rc={r.returncode} {sonames}")

# 4. a library that cannot be loaded: the command that needs it says so
broken = os.path.join(d, "broken")
os.makedirs(broken)
for so in sonames.values():
    open(os.path.join(broken, so), "w").close()  # dlopen: "file too short"
env = {"LD_LIBRARY_PATH": broken}
r = pptest.pushprof("version", env=env)
check(r.returncode == 0 and re.search(
    r"^grpc core: unavailable \(gRPC needs libgrpc\.so\.\d+: .*\)$", r.stdout, re.M),
      "version without a loadable libgrpc: 'unavailable (gRPC needs libgrpc.so.N: ...)'",
      f"rc={r.returncode} {r.stdout} {r.stderr}")
r = pptest.pushprof("check-config", "--no-file-checks", full, env=env)
check(r.returncode == 0, "check-config without the libraries: as before", r.stderr[-300:])
for name, cfg, want in (
        ("nogrpc", config("nogrpc", remote=f"remote_store: {{address: \"127.0.0.1:{port}\", "
                                           "insecure: true}\n"), "gRPC needs libgrpc.so."),
        ("nocurl", config("nocurl", remote=f"remote_store: {{address: \"127.0.0.1:{port}\", "
                                           "protocol: pyroscope, transport: http, "
                                           "insecure: true}\n"), "needs libcurl.so."),
        ("nomhd", config("nomhd", http=f"127.0.0.1:{rl.free_port()}"), "needs libmicrohttpd.so.")):
    a = pptest.Agent(cfg, os.path.join(d, name + ".log"), env=env, timeout=20)
    rc, _ = a.wait(30) if not a.started else a.stop()
    log = a.log()
    check(not a.started and 0 < rc < 99 and want in log and not pptest.sanitizer_report(log),
          f"run needing a library it cannot load ({name}): exit {rc}, '{want}...' logged, "
          "no crash", f"rc={rc} {log[-600:]}")
r = pptest.pushprof("run", "--config", config("localok"), "--duration", "1s", env=env,
                    timeout=60)
check(r.returncode == 0, "run that needs none of them: runs without them",
      f"rc={r.returncode} {r.stderr[-300:]}")

done()
