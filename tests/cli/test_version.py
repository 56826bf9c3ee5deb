"""`pushprof version` names the build and the libraries it runs with, and
the agent's /metrics says the same in pushprof_build_info; /metrics has the
standard process_* metrics, equal to the agent's own /proc entries, and
WriteRaw latency as a histogram; the whole of /metrics passes `promtool check metrics` (Prometheus' own linter).

Checked against sources that are not the binary: the version in
meson.build, `git describe` of the source tree, uname, and the libraries'
versions as dpkg knows them (libbpf1, libyaml-0-2, libzstd1)."""
import datetime
import os
import platform
import re
import shutil
import subprocess
import time

import pptest
import rellib as rl
from pptest import PUSHPROF, SOURCE_DIR, check, done, tmpdir


def run(*argv):
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=60)


def dpkg_version(pkg):
    """The upstream part of an installed Debian package's version, or None."""
    r = run("dpkg-query", "-W", "-f", "${Version}", pkg)
    if r.returncode != 0 or not r.stdout:
        return None
    v = r.stdout.split(":")[-1]
    return v.split("-")[0].split("+")[0]


v = run(PUSHPROF, "version")
lines = v.stdout.splitlines()
check(v.returncode == 0 and v.stderr == "", "`pushprof version` exits 0, nothing on stderr",
      v.stderr)
meson_version = re.search(r"version\s*:\s*'([^']+)'",
                          open(os.path.join(SOURCE_DIR, "meson.build")).read()).group(1)
check(lines and lines[0] == f"pushprof {meson_version}", "first line: pushprof VERSION",
      lines[:1])
info = dict(ln.split(": ", 1) for ln in lines[1:] if ": " in ln)
for key in ("commit", "build date", "libbpf", "grpc core", "libyaml", "zstd", "protobuf-c",
            "kernel"):
    check(info.get(key), f"`{key}:` line", v.stdout)

# the commit: git's own answer for the tree the build came from (a clean
# clone in CI), when the build is from a git tree
g = run("git", "-C", SOURCE_DIR, "rev-parse", "HEAD")
if g.returncode == 0 and g.stdout.strip():
    c = info.get("commit", "")
    check(re.fullmatch(r"[0-9a-f]{12}(-dirty)?|.*-g[0-9a-f]{12}(-dirty)?", c) is not None
          and g.stdout.strip().startswith(re.sub(r"^.*-g|-dirty$", "", c)),
          "commit is the source tree's HEAD", f"{c} vs {g.stdout.strip()}")
else:
    check(info.get("commit") == "unknown", "commit outside git: unknown", info.get("commit"))

try:
    built = datetime.datetime.strptime(info.get("build date", ""), "%Y-%m-%dT%H:%M:%SZ")
    now = datetime.datetime.utcnow()
    check(now - datetime.timedelta(days=365) < built <= now + datetime.timedelta(minutes=1),
          "build date is a UTC time, not in the future", info.get("build date"))
except ValueError:
    check(False, "build date is YYYY-MM-DDTHH:MM:SSZ", info.get("build date"))

u = platform.uname()
check(info.get("kernel") == f"{u.release} {u.machine}", "kernel is uname's", info.get("kernel"))
for key, pkg in (("libbpf", "libbpf1"), ("libyaml", "libyaml-0-2"), ("zstd", "libzstd1")):
    want = dpkg_version(pkg)
    if want:
        got = info.get(key, "").lstrip("v")
        check(want.startswith(got) or got.startswith(want),
              f"{key} version is the installed {pkg}'s", f"{got} vs {want}")

# /metrics: the same build, and Prometheus' linter is content
d = tmpdir("pushprof-cli-version-")
rport = rl.free_port()
rcv = rl.Rcv(os.path.join(d, "rcv"), rport)
# pushing a busy process's profiles to a real receiver: the WriteRaw
# latency histogram has observations
busy = subprocess.Popen(["/bin/sh", "-c", "while :; do :; done"])
cfg = rl.write_config(os.path.join(d, "a.yaml"), cpu=True, interval="1s",
                      targets=f"targets:\n  - pids: [{busy.pid}]\n",
                      store=os.path.join(d, "store"),
                      remote=f"127.0.0.1:{rport}")
agent = pptest.Agent(cfg, os.path.join(d, "agent.log"))
try:
    check(agent.wait_log("cpu window", 30), "agent built a window", agent.log()[-2000:])
    t_end = time.time() + 30
    while time.time() < t_end and "pushprof_write_latency_seconds_count" not in agent.get(
            "/metrics")[1]:
        time.sleep(0.5)
    code, body = agent.get("/metrics")
    text = body.decode() if isinstance(body, bytes) else body
    m = re.search(r'^pushprof_build_info\{([^}]*)\} 1$', text, re.M)
    check(code == 200 and m is not None, "/metrics has pushprof_build_info 1", text[:500])
    if m:
        labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
        check(labels.get("version") == meson_version and labels.get("commit") == info.get("commit")
              and labels.get("build_date") == info.get("build date")
              and labels.get("libbpf") == info.get("libbpf")
              and labels.get("grpc_core") == info.get("grpc core"),
              "build_info labels equal `pushprof version`", m.group(0))
    started = [ln for ln in agent.log().splitlines() if "agent started" in ln]
    check(started and f"commit={info.get('commit')}" in started[0]
          and f"version={meson_version}" in started[0],
          "the start line names version and commit", started[:1])
    # process_*: the agent's own /proc, read here at the same moment
    vals = {}
    for ln in text.splitlines():
        mm = re.match(r"^(process_\w+) (\S+)$", ln)
        if mm:
            vals[mm.group(1)] = float(mm.group(2))
    stat = open(f"/proc/{agent.pid}/stat").read().rsplit(")", 1)[1].split()
    tck, page = os.sysconf("SC_CLK_TCK"), os.sysconf("SC_PAGESIZE")
    btime = next(int(ln.split()[1]) for ln in open("/proc/stat") if ln.startswith("btime "))
    cpu = (int(stat[11]) + int(stat[12])) / tck
    start = btime + int(stat[19]) / tck
    rss = int(stat[21]) * page
    nfd = len(os.listdir(f"/proc/{agent.pid}/fd"))
    soft = int(open(f"/proc/{agent.pid}/limits").read().split("Max open files")[1].split()[0])
    check(set(vals) >= {"process_cpu_seconds_total", "process_resident_memory_bytes",
                        "process_virtual_memory_bytes", "process_start_time_seconds",
                        "process_open_fds", "process_max_fds"},
          "the standard process_* metrics", sorted(vals))
    check(0 < vals.get("process_cpu_seconds_total", -1) <= cpu + 0.01,
          "process_cpu_seconds_total: the agent's utime + stime", f"{vals} vs {cpu}")
    check(abs(vals.get("process_start_time_seconds", 0) - start) < 0.02,
          "process_start_time_seconds: its start time", f"{vals} vs {start}")
    check(0.5 * rss < vals.get("process_resident_memory_bytes", 0) < 2 * rss,
          "process_resident_memory_bytes: its RSS", f"{vals} vs {rss}")
    check(abs(vals.get("process_open_fds", -100) - nfd) <= 3,
          "process_open_fds: its /proc/PID/fd", f"{vals} vs {nfd}")
    check(vals.get("process_max_fds") == soft, "process_max_fds: its soft RLIMIT_NOFILE",
          f"{vals} vs {soft}")
    # WriteRaw latency: a histogram (buckets, _sum, _count), one observation
    # per attempt (a push between the two families being read may make them
    # differ by one)
    mv = {}
    for ln in text.splitlines():
        if ln and not ln.startswith("#"):
            k, _, x = ln.rpartition(" ")
            mv[k] = float(x)
    attempts = sum(x for k, x in mv.items() if k.startswith("pushprof_write_requests_total{"))
    n = mv.get("pushprof_write_latency_seconds_count", 0)
    les = [(float(k.split('le="')[1].split('"')[0]), x) for k, x in mv.items()
           if k.startswith("pushprof_write_latency_seconds_bucket{")]
    check("# TYPE pushprof_write_latency_seconds histogram" in text and n >= 1
          and abs(n - attempts) <= 1 and les and max(les)[0] == float("inf") and max(les)[1] == n
          and all(a[1] <= b[1] for a, b in zip(sorted(les), sorted(les)[1:]))
          and 0 < mv.get("pushprof_write_latency_seconds_sum", 0),
          "write latency is a histogram with one observation per attempt",
          [ln for ln in text.splitlines() if "write_" in ln])
    promtool = shutil.which("promtool")
    check(promtool is not None, "promtool installed (scripts/setup.sh installs prometheus)")
    if promtool:
        p = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True,
                           text=True, timeout=60)
        check(p.returncode == 0 and not p.stdout.strip() and not p.stderr.strip(),
              "promtool check metrics: no problems", p.stdout[-2000:] + p.stderr[-2000:])
finally:
    agent.stop()
    rcv.stop()
    busy.kill()
    busy.wait()
done()
