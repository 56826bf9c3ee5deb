"""Parca Agent's relabel inputs: a relabel file written for Parca
Agent reads __meta_process_executable_{name,build_id,compiler,static,
stripped} and __meta_system_kernel_{release,machine}; each one, put back as a
label by the rules Parca Agent's own kubernetes config uses, must equal what
the system and the ELF file say (uname, `go version -m`, readelf), for a C
and a Go program. The __meta_* labels themselves never reach the store.
"""
import os
import platform
import re
import signal
import subprocess
import time

import cputest as ct
import pptest
from pptest import check, done, run, tmpdir
from receiver import Receiver

d = tmpdir()
chain = ct.build_c("chain", d)
split = ct.build_go("split", d)
procs = [subprocess.Popen([chain, "30"]), subprocess.Popen([split, "30", "2"])]
META = ["name", "build_id", "compiler", "static", "stripped"]


def readelf(path, *args):
    return run(["readelf", *args, path], timeout=30).stdout


def truth(path):
    notes = readelf(path, "-n")
    m = re.search(r"Build ID: ([0-9a-f]+)", notes)
    gnu = m.group(1) if m else ""
    go = re.search(r"^(go1\.[0-9.]+)", run(["go", "version", path], timeout=30).stdout.split(": ", 1)[-1])
    if go:
        compiler = go.group(1)
    else:
        comment = readelf(path, "-p", ".comment")
        compiler = re.search(r"\]\s+(.*)", comment).group(1).strip()
    if not gnu:
        # Go's own build id note, as `go tool buildid` prints it
        gnu = run(["go", "tool", "buildid", path], timeout=30).stdout.strip()
    return {"name": os.path.basename(path), "build_id": gnu, "compiler": compiler,
            "static": "false" if "Requesting program interpreter" in readelf(path, "-l") else "true",
            "stripped": "false" if ".symtab" in readelf(path, "-S") else "true"}


rcv = Receiver(os.path.join(d, "rcv")).start()
try:
    rules = "".join(f"  - source_labels: [__meta_process_executable_{k}]\n    target_label: exe_{k}\n"
                    for k in META)
    rules += ("  - source_labels: [__meta_process_pid]\n    target_label: pid\n"
              "  - source_labels: [__meta_system_kernel_release]\n    target_label: kernel_version\n"
              "  - source_labels: [__meta_system_kernel_machine]\n    target_label: arch\n")
    body = (f"remote_store: {{address: \"{rcv.address}\", insecure: true, debuginfo_upload: false}}\n"
            f"targets:\n  - pids: [{procs[0].pid}, {procs[1].pid}]\n"
            f"relabel_configs:\n{rules}")
    cfg, _ = ct.write_config(d, body)
    # run until both programs' series arrived (at most 60 s): a fixed short
    # run lost them on a loaded host, where the receiver (Python, checking
    # every profile) answered too slowly for pushes made without a spool
    agent = pptest.Agent(cfg, args=["--duration", "120s"])
    want = {str(procs[0].pid): truth(chain), str(procs[1].pid): truth(split)}
    deadline = time.time() + 60
    while time.time() < deadline and agent.p.poll() is None:
        if set(want) <= {s["labels"].get("pid") for s in rcv.series()}:
            break
        time.sleep(0.5)
    rc, _ = agent.stop(signal.SIGINT, 60)
    log = agent.log()
    check(rc == 0, "agent exits 0", log[-800:])
    series = rcv.series()
    seen = set()
    for s in series:
        lab = s["labels"]
        w = want.get(lab.get("pid"))
        if not w or lab["pid"] in seen:
            continue
        seen.add(lab["pid"])
        got = {k: lab.get("exe_" + k) for k in META}
        check(got == w, f"{w['name']}: executable labels equal readelf/go version", f"{got} vs {w}")
        check(lab.get("kernel_version") == platform.release() and
              lab.get("arch") == platform.machine(), f"{w['name']}: kernel release and machine",
              f"{lab.get('kernel_version')} {lab.get('arch')}")
        check(not any(k.startswith("__meta") for k in lab), f"{w['name']}: no __meta_* label stored")
    check(seen == set(want), "both programs' series were received", f"{seen}")
finally:
    rcv.stop()
    for p in procs:
        p.kill()
        p.wait()
done()
