"""README's first command, ./scripts/demo.sh, as a newcomer runs it:
it builds its own workloads, profiles the host with the agent under test, and
must show what the workloads were built to do:
- shop's CPU split between main.priceOrders and main.renderReport near 70/30;
- shop's top heap allocator main.loadCatalog (a snapshot through the agent's
  snapshot API);
- the OOM capture of leak, killed in the demo's memory cgroup, with
  main.cacheForever on top;
- an SVG per profile shown, local file names <time>-<type>-<comm>-<pid>-<seq>,
  the demo's cgroup removed, and (under sudo) the files given to the user.
Not as root, it refuses with a message instead of failing half-way.
"""
import glob
import os
import re
import subprocess
import xml.etree.ElementTree as ET

import pptest
import rellib as rl
from pptest import PUSHPROF, SOURCE_DIR, check, done, local_name, tmpdir

d = tmpdir()
out = os.path.join(d, "demo")
env = dict(os.environ, PUSHPROF=os.path.abspath(PUSHPROF), PUSHPROF_DEMO_DIR=out,
           PUSHPROF_DEMO_PORT=str(rl.free_port()), SUDO_UID="65534", SUDO_GID="65534",
           GOCACHE=pptest.go_env()["GOCACHE"])
demo = os.path.join(SOURCE_DIR, "scripts", "demo.sh")
p = subprocess.run(["bash", demo, "15"], env=env, capture_output=True, text=True, timeout=240)
text = re.sub(r"\x1b\[[0-9;]*m", "", p.stdout)
print(text[-6000:])
print(p.stderr[-2000:])
check(p.returncode == 0, "demo exits 0", f"rc={p.returncode}")
check("[" in text and "CPU profiles:" in text and "leak OOM:" in text, "a progress line while it waits")


def section(title):
    m = re.search(r"== " + re.escape(title) + r".*?\n(.*?)(?=\n== |\Z)", text, re.S)
    return m.group(1) if m else ""


def top_rows(sec):
    """(flat, cum%, name) rows of a `go tool pprof -top` table."""
    rows = []
    for line in sec.splitlines():
        f = line.split()
        if len(f) >= 6 and f[4].endswith("%") and f[1].endswith("%"):
            rows.append((f[0], float(f[4].rstrip("%")), " ".join(f[5:])))
    return rows


cpu = {name: cum for _, cum, name in top_rows(section("shop's top CPU functions"))}
price, render = cpu.get("main.priceOrders", 0), cpu.get("main.renderReport", 0)
share = price / (price + render) if price + render else 0
check(0.6 <= share <= 0.8, "CPU: priceOrders : renderReport near 70 : 30", f"{share:.2f} {cpu}")
check("crypto/sha256.block" in cpu, "CPU: the standard library's sha256 kernel shows under priceOrders")

heap = top_rows(section("shop's top heap allocators"))
check(heap and heap[0][2] == "main.loadCatalog", "heap: main.loadCatalog allocates most",
      str(heap[:3]))
check(any(r[2] == "main.openSessions" for r in heap), "heap: main.openSessions is there too")

oom = top_rows(section("the OOM kill"))
check(oom and oom[0][2] == "main.cacheForever" and oom[0][1] >= 90,
      "OOM capture: main.cacheForever on top, >= 90 % of the heap", str(oom[:3]))

svgs = re.findall(r"picture: (\S+\.svg)", text)
check(len(svgs) == 3, "one SVG per profile shown", str(svgs))
for s in svgs:
    try:
        ok = ET.parse(s).getroot().tag.endswith("svg")
    except (OSError, ET.ParseError) as e:
        ok = False
        print(e)
    check(ok, f"{os.path.basename(s)} is an SVG document")

files = glob.glob(os.path.join(out, "profiles", "*.pb.gz"))
bad = []
for f in files:
    try:
        local_name(f)
    except ValueError:
        bad.append(f)
check(files and not bad, "every local file is named <time>-<type>-<comm>-<pid>-<seq>.pb.gz",
      f"{len(files)} files; bad: {bad[:3]}")
kinds = {local_name(f).type for f in files if f not in bad}
check({"cpu", "heap-on_demand", "heap-oom"} <= kinds, "CPU, on-demand and OOM files", str(kinds))
left = glob.glob("/sys/fs/cgroup/pushprof-demo-*") + glob.glob("/sys/fs/cgroup/memory/pushprof-demo-*")
check(not left, "the demo's memory cgroup is removed", str(left))
st = os.stat(out)
check(st.st_uid == 65534, "under sudo the files belong to the user who ran it", f"uid {st.st_uid}")
check("go tool pprof -http=:8080" in text, "it says how to open the profiles in a browser")

# Not root: a clear refusal, before any work.
p = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "bash", demo],
                   env=env, capture_output=True, text=True, timeout=60)
check(p.returncode == 1 and "run as root" in p.stderr, "as a normal user: refuses, says to use sudo",
      f"rc={p.returncode} {p.stderr[-300:]}")
done()
