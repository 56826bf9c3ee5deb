"""The agent's folders are its pipeline's stages (docs/development.md), in
layers: a folder includes headers of its own folder and of folders below it,
never above. Reads every #include "x.h" under agent/ and fails on a header
that no folder holds, one held twice, or an include that goes up a layer
(which is how a cycle between stages would start)."""
import os
import re

from pptest import check, done

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
AGENT = os.path.join(ROOT, "agent")
# bottom first: each may include itself and those before it
LAYERS = ["base", "meta", "config", "targets", "sym", "ship", "cpu", "goheap", "cmd"]

found = sorted(d for d in os.listdir(AGENT) if os.path.isdir(os.path.join(AGENT, d)))
check(found == sorted(LAYERS), "agent/ holds exactly the stage folders", f"{found}")
check(not [f for f in os.listdir(AGENT) if os.path.isfile(os.path.join(AGENT, f))],
      "no source file outside a stage folder")

home = {}
for d in found:
    for f in os.listdir(os.path.join(AGENT, d)):
        if f.endswith(".h"):
            check(f not in home, f"{f} held by one folder", f"{home.get(f)} and {d}")
            home[f] = d

ups = []
n = 0
for d in found:
    for f in sorted(os.listdir(os.path.join(AGENT, d))):
        with open(os.path.join(AGENT, d, f), errors="replace") as fh:
            for line in fh:
                m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
                if not m or "/" in m.group(1) or m.group(1) not in home:
                    continue	# bpf/, proto/, generated headers
                n += 1
                to = home[m.group(1)]
                if LAYERS.index(to) > LAYERS.index(d):
                    ups.append(f"agent/{d}/{f} includes {m.group(1)} (agent/{to}/)")
check(n > 200, f"includes read ({n})")
check(not ups, "no folder includes a header of a folder above it", "\n".join(ups))
done()
