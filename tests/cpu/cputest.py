"""Helpers shared by the CPU profiling tests: build the workloads, write the
agent's config (the agent runs through pptest.Agent), and read the profiles
it produced (decoded with
protoc-generated Python classes, and parsed by `go tool pprof`)."""
import glob
import gzip
import os
import signal
import socket
import subprocess
import sys
import time

import pptest
from pptest import SOURCE_DIR

HERE = os.path.dirname(os.path.abspath(__file__))
WORK = os.path.join(HERE, "workloads")
FREQ = 199


def build_c(name, out_dir, flags=()):
    out = os.path.join(out_dir, name)
    # -O0: GCC 12 leaves frameless leaf functions without a frame even with
    # -fno-omit-frame-pointer, and a frame-pointer walk then skips the
    # leaf's caller (a limit of frame-pointer unwinding, not of the agent).
    pptest.run(["cc", "-O0", "-g", "-fno-omit-frame-pointer", *flags,
                "-o", out, os.path.join(WORK, name + ".c")], check_rc=0)
    return out


def build_go(name, out_dir):
    return pptest.go_build(os.path.join(WORK, name + ".go"), os.path.join(out_dir, name))


GO123 = "/usr/lib/go-1.23/bin/go"


def build_go_versions(name, out_dir):
    """workloads/NAME.go built with the default Go (1.19) and, when it is
    installed, Go 1.23 (Go 1.21 changed frame set-up and stack switches):
    [(tag, path)]."""
    src = os.path.join(WORK, name + ".go")
    builds = [("go1.19", pptest.go_build(src, os.path.join(out_dir, name + "119")))]
    if os.access(GO123, os.X_OK):
        out = os.path.join(out_dir, name + "123")
        pptest.run([GO123, "build", "-o", out, src], timeout=300, env=pptest.go_env(),
                   check_rc=0)
        builds.append(("go1.23", out))
    else:
        print("note: Go 1.23 not installed (scripts/setup.sh --tests), its run is skipped")
    return builds


def write_config(d, body, interval="1s", freq=FREQ, store=True, http="", spool=""):
    """spool: the spool directory ("" none: what a remote store does not
    take is dropped)."""
    path = os.path.join(d, "pushprof.yaml")
    store_dir = os.path.join(d, "store")
    text = (f"node: cpu-test-node\n"
            f"log: {{level: debug}}\n"
            f"http_address: \"{http}\"\n"
            f"spool: {{directory: \"{spool}\"}}\n"
            f"cpu: {{frequency_hz: {freq}, interval: {interval}}}\n"
            f"go_heap: {{enabled: false}}\n")
    if store:
        text += f"local_store: {{directory: {store_dir}}}\n"
    text += body
    with open(path, "w") as f:
        f.write(text)
    return path, store_dir


def free_port():
    """A TCP port free on 127.0.0.1 right now (never the default 7071)."""
    with socket.socket() as sk:
        sk.bind(("127.0.0.1", 0))
        return sk.getsockname()[1]


def metrics(port, timeout=10):
    """The agent's /metrics as {'name{labels}': value}."""
    import urllib.request
    return pptest.parse_metrics(urllib.request.urlopen(
        f"http://127.0.0.1:{port}/metrics", timeout=timeout).read().decode())


def stop_checked(agent, store, workloads=(), tail=2500):
    """SIGINT the agent, then kill the workloads (Popen objects); check that
    it exited 0 and that every profile it wrote parses with `go tool
    pprof`. Returns (log, profile paths)."""
    rc, _ = agent.stop(signal.SIGINT, 60)
    log = agent.log()
    for w in workloads:
        w.kill()
        w.wait()
    print(log[-tail:])
    pptest.check(rc == 0, "agent exits 0 on SIGINT", f"rc={rc}")
    files = profiles(store)
    pptest.check(files and all(pprof_parses(p) for p in files),
                 "every profile parses with go tool pprof", f"{len(files)} files")
    return log, files


def window_lines(log):
    return [l for l in log.splitlines() if 'msg="cpu window"' in l]


def logfields(line):
    """Parse the key=value fields of a logfmt line (values without quotes)."""
    out = {}
    for part in line.split():
        if "=" in part:
            k, v = part.split("=", 1)
            out[k] = v.strip('"')
    return out


_pb = None


def pb():
    global _pb
    if _pb is None:
        sys.path.insert(0, os.path.join(SOURCE_DIR, "tests", "lib"))
        import receiver
        _pb = receiver.load_protos()
    return _pb


def decode(path_or_bytes):
    raw = path_or_bytes
    if isinstance(raw, str):
        with open(raw, "rb") as f:
            raw = f.read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    p = pb()[0].Profile()
    p.ParseFromString(raw)
    return p


class Prof:
    """A decoded profile with stacks as lists of function names (leaf
    first); an unnamed location shows as 0x<address>."""

    def __init__(self, path):
        self.path = path
        self.p = decode(path)
        st = self.p.string_table
        self.s = st
        funcs = {f.id: st[f.name] for f in self.p.function}
        maps = {m.id: st[m.filename] for m in self.p.mapping}
        self.locs = {}
        self.loc_map = {}
        for loc in self.p.location:
            names = [funcs.get(l.function_id, "?") for l in loc.line]
            self.locs[loc.id] = names if names else [f"0x{loc.address:x}"]
            self.loc_map[loc.id] = maps.get(loc.mapping_id, "")
        self.samples = []
        for smp in self.p.sample:
            frames = []
            kinds = []
            for lid in smp.location_id:
                frames.extend(self.locs[lid])
                kinds.extend([self.loc_map[lid]] * len(self.locs[lid]))
            labels = {st[l.key]: st[l.str] for l in smp.label if l.str}
            self.samples.append((frames, kinds, smp.value[0], labels))

    def total(self):
        return sum(s[2] for s in self.samples)

    def count_where(self, pred):
        return sum(v for frames, kinds, v, labels in self.samples if pred(frames))


def collect_until(store, count, enough, min_secs, max_secs=30):
    """Poll store every 0.5 s, adding count(path) for each new profile, until
    the sum reaches enough and min_secs have passed (or max_secs): quick on
    an idle machine, still meaningful on a loaded one. Returns the sum."""
    t0, seen, total = time.time(), set(), 0
    while time.time() - t0 < max_secs:
        time.sleep(0.5)
        for path in profiles(store):
            if path not in seen:
                seen.add(path)
                total += count(path)
        if total >= enough and time.time() - t0 >= min_secs:
            break
    return total


def profiles(store_dir):
    return sorted(glob.glob(os.path.join(store_dir, "*.pb.gz")))


def wait_pid_window(store, pid, timeout=20):
    """Wait (at most timeout s) for a profile of pid in store (local_store
    names carry the pid), then one 1 s window more: the one holding a
    process's last samples, when it just exited."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if any(pptest.local_name(p).pid == pid for p in profiles(store)):
            time.sleep(1.2)
            return True
        time.sleep(0.3)
    return False


def pid_samples(files, pids):
    """(pid, frames, kinds, value) of every sample in the profiles among
    files (local_store paths) of the processes pids."""
    for path in files:
        pid = pptest.local_name(path).pid
        if pid in pids:
            for frames, kinds, v, _ in Prof(path).samples:
                yield pid, frames, kinds, v


def user_frames(frames, kinds):
    """(frame, kind) of a sample's frames in the process's own code (kind:
    its mapping's file, or none), not kernel, [vdso] or pseudo frames."""
    return [(f, k) for f, k in zip(frames, kinds)
            if not (k.startswith("[") or f.startswith("["))]


def pprof_parses(path):
    try:
        pptest.pprof("-raw", "-symbolize=none", path)
        return True
    except Exception as e:  # noqa: BLE001
        print(f"  pprof: {e}")
        return False


def has_chain(frames, chain):
    """chain (callee first) appears as consecutive frames."""
    n = len(chain)
    return any(frames[i:i + n] == chain for i in range(len(frames) - n + 1))


def run_with_go_profile(d, tag, argv, frameless, enough, time_limit):
    """Run a Go workload that profiles itself with runtime/pprof (argv: its
    command line, the profile path is appended as {gprof}) while an agent
    targets it; the frameless tables off (PUSHPROF_FRAMELESS=off) or on.
    Samples until enough(pushprof samples) says so (at least 3 s, at most
    time_limit), then SIGINTs the workload (Go writes its profile) and the
    agent. Returns (pushprof samples, Go's samples, profile paths, log)."""
    rd = os.path.join(d, tag)
    os.makedirs(rd)
    gprof = os.path.join(rd, "go.pprof")
    w = subprocess.Popen([a.format(gprof=gprof) for a in argv],
                         env=dict(os.environ, GOMAXPROCS="2"))
    cfg, store = write_config(rd, f"targets:\n  - pids: [{w.pid}]\n")
    agent = pptest.Agent(cfg, args=["--duration", f"{time_limit + 20}s"],
                         env={"PUSHPROF_FRAMELESS": None if frameless else "off"})
    t0 = time.time()
    seen, samples = set(), []
    while time.time() - t0 < time_limit:
        time.sleep(1)
        for path in profiles(store):
            if path not in seen:
                seen.add(path)
                samples += Prof(path).samples
        if enough(samples) and time.time() - t0 >= 3:
            break
    w.send_signal(signal.SIGINT)    # Go writes its profile and exits
    wrc = w.wait(timeout=60)
    time.sleep(1.2)                 # the window holding the last samples
    rc, _ = agent.stop(signal.SIGINT, 60)
    log = agent.log()
    files = profiles(store)
    for path in files:
        if path not in seen:
            samples += Prof(path).samples
    print(f"[{tag}] {time.time() - t0:.0f}s, {len(files)} profiles")
    pptest.check(rc == 0 and wrc == 0, f"{tag}: agent and workload exit 0",
                 f"agent {rc} workload {wrc}")
    return samples, Prof(gprof).samples, files, log
