"""The `cpu` sample label (Parca Agent's: the CPU a sample was taken on),
recorded by the real BPF program:
- one spinning process pinned to each CPU (taskset): every one of its
  samples says that CPU;
- one process moved from CPU to CPU in turn (taskset -p): its samples say
  exactly the CPUs it was allowed on, each of them;
- `go tool pprof -tags` lists the label and `-tagfocus cpu=N` keeps only
  that CPU's samples;
- `cpu.cpu_label: false`: no sample has a cpu label (thread labels stay).
"""
import os
import subprocess
import time

import cputest as ct
import pptest
from pptest import check, done, tmpdir

d = tmpdir()
chain = ct.build_c("chain", d)
cpus = sorted(os.sched_getaffinity(0))
check(len(cpus) >= 1, "CPUs to pin to", str(cpus))


def run_agent(cpu_label):
    """Pinned spinners, one roaming spinner; sample until every pinned one
    has 100 samples (at least 3 s, at most 30 s). Returns (profiles by pid,
    pinned {pid: cpu}, roaming pid, CPUs the roaming one was given)."""
    pinned = {}
    procs = []
    for c in cpus:
        p = subprocess.Popen(["taskset", "-c", str(c), chain, "60"])
        procs.append(p)
        pinned[p.pid] = c
    roam = subprocess.Popen(["taskset", "-c", str(cpus[0]), chain, "60"])
    procs.append(roam)
    pids = list(pinned) + [roam.pid]
    extra = "" if cpu_label is None else f"  cpu_label: {cpu_label}\n"
    cfg, store = ct.write_config(
        os.path.join(d), "targets:\n  - pids: [%s]\n" % ", ".join(map(str, pids)))
    if extra:
        # cpu: {...} is a flow map in the generated config: add the key to it
        with open(cfg) as f:
            text = f.read()
        with open(cfg, "w") as f:
            f.write(text.replace("interval: 1s}", f"interval: 1s, cpu_label: {cpu_label}}}", 1))
    for old in ct.profiles(store):
        os.unlink(old)
    agent = pptest.Agent(cfg, args=["--duration", "40s"])
    t0 = time.time()
    given = [cpus[0]]
    step = 0
    counts = {}
    seen = set()
    while time.time() - t0 < 30:
        time.sleep(0.5)
        # the roaming one moves to the next CPU every 1.5 s
        if int((time.time() - t0) / 1.5) > step and len(given) < 2 * len(cpus):
            step += 1
            c = cpus[step % len(cpus)]
            subprocess.run(["taskset", "-p", "-c", str(c), str(roam.pid)],
                           capture_output=True, check=True)
            given.append(c)
        for path in ct.profiles(store):
            if path in seen:
                continue
            seen.add(path)
            pid = pptest.local_name(path).pid
            counts[pid] = counts.get(pid, 0) + ct.Prof(path).total()
        if (time.time() - t0 >= 3 and len(given) >= 2 * len(cpus)
                and all(counts.get(p, 0) >= 100 for p in pids)):
            break
    log, files = ct.stop_checked(agent, store, procs)
    by_pid = {}
    for path in files:
        by_pid.setdefault(pptest.local_name(path).pid, []).append(path)
    return by_pid, pinned, roam.pid, set(given)


def labels_of(paths):
    """[(cpu label or None, count, thread_id)] over all samples."""
    out = []
    for path in paths:
        for _, _, v, lab in ct.Prof(path).samples:
            out.append((lab.get("cpu"), v, lab.get("thread_id")))
    return out


# default (protocol parca): auto = on
by_pid, pinned, roam, given = run_agent(None)
for pid, c in pinned.items():
    labs = labels_of(by_pid.get(pid, []))
    n = sum(v for _, v, _ in labs)
    wrong = {l for l, _, _ in labs if l != str(c)}
    check(n >= 50 and not wrong, f"pinned to CPU {c}: every sample has cpu={c}",
          f"{n} samples, other values {wrong}")
labs = labels_of(by_pid.get(roam, []))
per_cpu = {}
for l, v, _ in labs:
    per_cpu[l] = per_cpu.get(l, 0) + v
check(set(per_cpu) == {str(c) for c in given},
      "moved from CPU to CPU: its samples name exactly the CPUs it ran on",
      f"labels {per_cpu}, given {sorted(given)}")
check(all(t for _, _, t in labs), "thread labels still there beside cpu")

# go tool pprof reads the label: -tags lists it, -tagfocus filters on it
c0 = cpus[0]
merged = by_pid[roam]
tags = pptest.pprof("-tags", *merged)
check("cpu:" in tags and all(f" {c}" in tags for c in given),
      "go tool pprof -tags lists the cpu label and its values", tags[:600])
want0 = per_cpu.get(str(c0), 0)
# a plain number would be a numeric tag range to pprof: a string label
# value is matched as a regexp
focused = os.path.join(d, "focused.pb.gz")
pptest.pprof("-proto", "-symbolize=none", f"-tagfocus=cpu=^{c0}$", "-output", focused, *merged)
fl = labels_of([focused])
check(want0 > 0 and {l for l, _, _ in fl} == {str(c0)} and sum(v for _, v, _ in fl) == want0,
      f"go tool pprof -tagfocus=cpu=^{c0}$ keeps exactly CPU {c0}'s samples",
      f"{sum(v for _, v, _ in fl)} samples with cpu {({l for l, _, _ in fl})}, want {want0}")

# switched off
by_pid, pinned, roam, given = run_agent("false")
labs = [x for paths in by_pid.values() for x in labels_of(paths)]
check(labs and all(l is None for l, _, _ in labs) and all(t for _, _, t in labs),
      "cpu_label: false: no sample has a cpu label; thread labels stay",
      f"{len(labs)} samples, {sum(1 for l, _, _ in labs if l is not None)} with cpu")
done()
