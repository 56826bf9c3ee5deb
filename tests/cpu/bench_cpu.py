"""Benchmark (not a test): BPF run time per sample, agent CPU time per 1,000
samples (drain + symbolization + pprof encoding + push to a local receiver),
agent RSS with ~500 processes on the host.

  sudo /usr/bin/python3 tests/cpu/bench_cpu.py [--procs 500] [--secs 12] [--freq 99]
       [--targeted]

Needs a built tree (PUSHPROF=build/pushprof, PUSHPROF_SOURCE_DIR=.).
"""
import argparse
import json
import os
import subprocess
import sys
import time

sys.path[:0] = [os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"),
                os.path.dirname(os.path.abspath(__file__))]
os.environ.setdefault("PUSHPROF_SOURCE_DIR",
                      os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
import cputest as ct  # noqa: E402
import pptest  # noqa: E402
from pptest import tmpdir  # noqa: E402
from receiver import Receiver  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--procs", type=int, default=500)
ap.add_argument("--secs", type=float, default=12)
ap.add_argument("--freq", type=int, default=99)
ap.add_argument("--interval", default="2s")
ap.add_argument("--targeted", action="store_true",
                help="target only the CPU workloads (kernel filter on)")
ap.add_argument("--no-kernel", action="store_true", help="cpu.kernel_stacks: false")
a = ap.parse_args()

d = tmpdir("pushprof-bench-")
chain = ct.build_c("chain", d)
sysw = ct.build_c("sys", d)
split = ct.build_go("split", d)
idle = [subprocess.Popen(["sleep", "600"]) for _ in range(a.procs)]
work = [subprocess.Popen([chain, "600"]), subprocess.Popen([sysw, "600"]),
        subprocess.Popen([split, "600", "2"])]

old_stats = open("/proc/sys/kernel/bpf_stats_enabled").read().strip()
open("/proc/sys/kernel/bpf_stats_enabled", "w").write("1")
rcv = Receiver(os.path.join(d, "rcv")).start()
try:
    body = f"remote_store: {{address: \"{rcv.address}\", insecure: true}}\n"
    if a.targeted:
        body += "targets:\n  - pids: [%s]\n" % ", ".join(str(p.pid) for p in work)
    cfg, _ = ct.write_config(d, body, interval=a.interval, freq=a.freq, store=False)
    with open(cfg) as f:
        text = f.read().replace("log: {level: debug}", "log: {level: info}")
    if a.no_kernel:
        text = text.replace(f"interval: {a.interval}}}", f"interval: {a.interval}, kernel_stacks: false}}")
    with open(cfg, "w") as f:
        f.write(text)
    agent = pptest.Agent(cfg, args=["--duration", f"{int(a.secs * 1000)}ms"])
    prog_id = ct.logfields(agent.started or "").get("bpf_prog_id")
    t0 = time.time()
    peak_rss = 0
    prog = {}
    clk = os.sysconf("SC_CLK_TCK")
    cpu_s = 0.0
    while agent.poll() is None and time.time() - t0 < a.secs - 0.5:
        time.sleep(0.5)
        try:
            st = open(f"/proc/{agent.pid}/stat").read().rsplit(")", 1)[1].split()
            cpu_s = (int(st[11]) + int(st[12])) / clk
            for line in open(f"/proc/{agent.pid}/status"):
                if line.startswith("VmHWM:"):
                    peak_rss = int(line.split()[1])
        except OSError:
            break
        out = subprocess.run(["bpftool", "-j", "prog", "show", "id", prog_id],
                             capture_output=True, text=True).stdout
        if out.strip():
            prog = json.loads(out)
    rc, _ = agent.wait(60)
    log = agent.log()
    wins = [ct.logfields(l) for l in ct.window_lines(log)]
    samples = sum(int(w["samples"]) for w in wins)
    print(f"windows={len(wins)} samples={samples} profiles={sum(int(w['processes']) for w in wins)}"
          f" bytes={sum(int(w['bytes']) for w in wins)} procs_on_host~{a.procs + 100}"
          f" mode={'targeted' if a.targeted else 'whole-host'} freq={a.freq}")
    rt, rc_ = prog.get("run_time_ns", 0), prog.get("run_cnt", 0)
    if rc_:
        print(f"bpf: run_cnt={rc_} run_time_ns={rt} per_run_ns={rt / rc_:.0f}")
    print(f"agent: cpu_s={cpu_s:.2f} (sampled while running) per_1000_samples_ms="
          f"{cpu_s * 1e3 / max(samples, 1) * 1000:.1f} peak_rss_kib={peak_rss}")
    print(f"window agent_cpu_ms (drain+symbolize+encode+push): "
          f"{[w['agent_cpu_ms'] for w in wins]}")
    print(f"receiver calls: {len(rcv.calls())}")
finally:
    rcv.stop()
    open("/proc/sys/kernel/bpf_stats_enabled", "w").write(old_stats)
    for p in idle + work:
        p.kill()
        p.wait()
