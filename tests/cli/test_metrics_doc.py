"""docs/operations.md's metrics reference has a row for every metric the
agent exports, and no row for one it does not (names taken from the
sources, where metric_get/metric_inc name them)."""
import glob
import os
import re

from pptest import SOURCE_DIR, check, done

src = set()
# agent/<stage>/*.c since the tree has one folder per pipeline stage
for path in glob.glob(os.path.join(SOURCE_DIR, "agent", "*", "*.c")):
    src |= set(re.findall(r'"((?:pushprof|process)_[a-z0-9_]+)"', open(path).read()))
# strings of that shape that are not metrics: Pyroscope's CPU series name
# (__name__ in cpu_profile.c)
src -= {"process_cpu"}
doc = open(os.path.join(SOURCE_DIR, "docs", "operations.md")).read()
ref = doc.split("## Metrics reference", 1)[-1]
# the reference table's rows: | `name`, `name` | type | labels | meaning |
rows = [ln.split("|")[1] for ln in ref.splitlines() if ln.startswith("| `")]
documented = set(re.findall(r"`((?:pushprof|process)_[a-z0-9_]+)`", "".join(rows)))
check(len(src) > 30, "metric names found in agent/*/*.c", len(src))
check(not src - documented, "every exported metric is in docs/operations.md",
      sorted(src - documented))
check(not documented - src, "docs/operations.md names no metric the agent lacks",
      sorted(documented - src))
done()
