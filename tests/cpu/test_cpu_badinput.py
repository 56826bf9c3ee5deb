"""`pushprof run` refuses configs it cannot honour, before touching BPF:
exit 2 with FILE:LINE:COL for frequency 0 or 5000, a stack depth above the
kernel's perf_event_max_stack, an invalid regex; bad flags exit 2 too.
"""
import os
import re

import cputest as ct
from pptest import check, done, pushprof, tmpdir

d = tmpdir()
kmax = int(open("/proc/sys/kernel/perf_event_max_stack").read())
cases = [
    ("frequency 0", "cpu: {frequency_hz: 0}\n", 1, "frequency_hz"),
    ("frequency 5000", "cpu:\n  frequency_hz: 5000\n", 2, "frequency_hz"),
    ("depth above the kernel limit", f"cpu:\n  interval: 1s\n  max_stack_depth: {kmax + 1}\n",
     3, "max_stack_depth"),
    ("invalid comm_regex", "targets:\n  - comm_regex: \"([\"\n", 2, "comm_regex"),
    ("invalid cgroup_regex", "targets:\n  - pids: [1]\n    cgroup_regex: \"a{2,1}\"\n", 3,
     "cgroup_regex"),
]
for what, body, line, key in cases:
    path = os.path.join(d, "bad.yaml")
    with open(path, "w") as f:
        f.write(body)
    p = pushprof("run", "--config", path, "--duration", "1s", timeout=30)
    check(p.returncode == 2, f"{what}: exit 2", f"rc={p.returncode} {p.stderr}")
    m = re.search(re.escape(path) + r":(\d+):(\d+): ", p.stderr)
    check(m is not None and int(m.group(1)) == line, f"{what}: error names {path}:{line}:COL",
          p.stderr.strip())
    check(key in p.stderr, f"{what}: error names the key", p.stderr.strip())
    check("agent started" not in p.stderr, f"{what}: the agent did not start")

good, _ = ct.write_config(d, "")
for args, what in ((["--duration", "soon"], "bad --duration"),
                   (["--bogus"], "unknown flag"),
                   (["--config"], "--config without a value")):
    p = pushprof("run", *(["--config", good] if args[0] != "--config" else []), *args,
                 timeout=30)
    check(p.returncode == 2, f"{what}: exit 2", f"rc={p.returncode} {p.stderr}")
p = pushprof("run", "--config", os.path.join(d, "missing.yaml"), timeout=30)
check(p.returncode == 2, "missing config file: exit 2", p.stderr)
done()
