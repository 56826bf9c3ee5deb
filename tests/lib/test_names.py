"""Every meson test follows the naming rule of tests/meson.build: its name is
<area>_<thing>, where the area is the directory under tests/ that holds it,
it is in the suite of that area and in no other area's, and beside it at most
in the suite 'unit'. Reads meson's own list of the tests in this build
(meson-info/intro-tests.json), so a test added without the rule fails here."""
import json
import os
import re

from pptest import BUILD_DIR, check, done

AREAS = sorted(d for d in os.listdir(os.path.join(os.path.dirname(__file__), ".."))
               if os.path.isdir(os.path.join(os.path.dirname(__file__), "..", d)))
# bpf/meson.build's tests check the BPF build itself (the other
# architectures' objects compile): their area is bpf/, not a tests/ folder
AREAS.append("bpf")

with open(os.path.join(BUILD_DIR, "meson-info", "intro-tests.json")) as f:
    tests = json.load(f)
check(len(tests) > 20, f"meson lists this build's tests ({len(tests)})")
for t in tests:
    name = t["name"]
    suites = sorted(s.split(":", 1)[-1] for s in t["suite"])
    area = name.split("_", 1)[0]
    where = [a for c in t["cmd"] for a in AREAS
             if f"/tests/{a}/" in c or (a == "bpf" and "/bpf/" in c and "/tests/" not in c)]
    check(re.fullmatch(r"[a-z0-9]+_[a-z0-9_]+", name) is not None and area in AREAS,
          f"{name}: <area>_<thing> with an area of tests/", f"areas: {AREAS}")
    check(where and where[0] == area, f"{name}: lives in tests/{area}/", str(t["cmd"][:3]))
    check(suites in ([area], sorted([area, "unit"])),
          f"{name}: in suite '{area}' (and at most 'unit')", str(suites))
done()
