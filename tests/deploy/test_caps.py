"""The DaemonSet's capability set is enough, and needed.

Runs the real agent as root restricted (setpriv --bounding-set) to exactly
the capabilities deploy/kubernetes/daemonset.yaml adds — no CAP_SYS_ADMIN —
and checks that it loads the BPF sampler, samples a busy process, names
frames and writes profiles. Then drops CAP_BPF from that set and checks the
agent refuses to start, so the test can tell a working set from a broken one.
"""
import os
import re
import signal
import subprocess
import sys
import time

import pptest
from pptest import check, done

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import deploylib as dl  # noqa: E402

# capability numbers (linux/capability.h) for decoding CapEff
CAP_NUM = {"CHOWN": 0, "DAC_OVERRIDE": 1, "DAC_READ_SEARCH": 2, "FOWNER": 3, "KILL": 5,
           "SETUID": 7, "NET_ADMIN": 12, "SYS_MODULE": 16, "SYS_PTRACE": 19,
           "SYS_ADMIN": 21, "SYS_RESOURCE": 24, "SYSLOG": 34, "PERFMON": 38, "BPF": 39,
           "CHECKPOINT_RESTORE": 40}


def run_agent(d, caps, duration="4s", env=None):
    cfg = os.path.join(d, "agent.yaml")
    store = os.path.join(d, "profiles-" + "-".join(sorted(caps)).lower()[:60])
    with open(cfg, "w") as f:
        f.write(f"node: capstest\nhttp_address: ''\n"
                f"local_store: {{directory: {store}}}\n"
                f"spool: {{directory: {d}/spool}}\n"
                "cpu: {enabled: true, frequency_hz: 97, interval: 1s}\n"
                "go_heap: {enabled: false}\n")
    bounding = "-all," + ",".join("+" + c.lower() for c in caps)
    p = pptest.Agent(cfg, args=["--duration", duration], env=env, ready=False,
                     wrap=["setpriv", "--bounding-set", bounding, "--"],
                     binary=os.path.abspath(pptest.PUSHPROF))
    eff = None
    end = time.time() + 3
    while time.time() < end and p.alive() and eff is None:
        try:
            # one read gives the name and the capabilities together: with
            # the name from a second read, a status read just before
            # setpriv's exec (root's full set) passed for the agent's
            with open(f"/proc/{p.pid}/status") as f:
                st = f.read()
            if re.search(r"^Name:\s*pushprof$", st, re.M):
                eff = int(re.search(r"CapEff:\s*([0-9a-f]+)", st).group(1), 16)
        except (OSError, AttributeError):
            pass
        time.sleep(0.05)
    rc, _ = p.wait(60)
    files = os.listdir(store) if os.path.isdir(store) else []
    return rc, p.log(), eff, files


def main():
    if not pptest.have("setpriv"):
        dl.skip("setpriv (util-linux) is not installed")
    docs = dl.load_manifests()
    ds = [o for objs in docs.values() for o in objs if o["kind"] == "DaemonSet"][0]
    caps = dl.container(ds)["securityContext"]["capabilities"]["add"]
    check("SYS_ADMIN" not in caps, "DaemonSet does not add SYS_ADMIN", str(caps))

    d = pptest.tmpdir("pushprof-caps-")
    busy = subprocess.Popen(["sh", "-c", "while :; do :; done"])
    try:
        rc, out, eff, files = run_agent(d, caps)
        check(rc == 0, f"agent runs with only {caps}", out[-1500:])
        if eff is not None:
            have = {n for n, b in CAP_NUM.items() if eff >> b & 1}
            # this machine's own bounding set may lack some (it has no SYS_RESOURCE)
            with open("/proc/self/status") as f:
                bnd = int(re.search(r"CapBnd:\s*([0-9a-f]+)", f.read()).group(1), 16)
            host = {n for n, b in CAP_NUM.items() if bnd >> b & 1}
            missing = set(caps) - host
            if missing:
                print(f"NOTE: this machine's bounding set lacks {sorted(missing)}")
            check(have == set(caps) & host,
                  "agent's effective capabilities are exactly the DaemonSet's (those the "
                  "machine has)", f"{sorted(have)}")
            check(not eff >> CAP_NUM["SYS_ADMIN"] & 1, "no CAP_SYS_ADMIN in effect")
        else:
            check(False, "read the agent's CapEff")
        check("agent started" in out and "bpf_prog_id=" in out, "BPF sampler loaded", out[-800:])
        # the connector only exists in the host network namespace (a pod
        # without hostNetwork has none): with these capabilities the BPF
        # tracepoints must work too (cpu_targets_events_bpf covers them)
        check("proc_events=netlink" in out or "proc_events=bpf" in out,
              "process events heard (netlink connector or BPF tracepoints)",
              (re.findall(r'msg="agent started".*', out) or [out[-400:]])[0])
        windows = re.findall(r'msg="cpu window".*?samples=(\d+).*?named=(\d+)', out)
        check(windows and sum(int(s) for s, _ in windows) > 0,
              "samples taken without CAP_SYS_ADMIN", str(windows))
        check(windows and sum(int(n) for _, n in windows) > 0, "frames named", str(windows))
        check(any(f.endswith(".pb.gz") for f in files), "profiles written", str(files[:5]))
        denied = [ln for ln in out.splitlines()
                  if re.search(r"Permission denied|Operation not permitted", ln)
                  and "oom_score_adj" not in ln]
        check(not denied, "no permission errors (oom_score_adj aside: this machine forbids "
              "lowering it even for full root)", "\n".join(denied[:5]))

        rc, out, _, _ = run_agent(d, caps, duration="2s",
                                  env={"PUSHPROF_PROC_EVENTS": "bpf"})
        check(rc == 0 and "proc_events=bpf" in out,
              "with these capabilities BPF process events load (what a pod gets)",
              (re.findall(r'msg="agent started".*', out) or [out[-600:]])[0])

        # The same without CAP_BPF must fail: the set above is not just decoration.
        rc, out, _, files = run_agent(d, [c for c in caps if c != "BPF"], duration="2s")
        check(rc != 0 and "BPF" in out and not files,
              "without CAP_BPF the agent refuses to start with a BPF error", out[-600:])
    finally:
        busy.send_signal(signal.SIGKILL)
        busy.wait()
        subprocess.run(["rm", "-rf", d])
    done()


if __name__ == "__main__":
    main()
