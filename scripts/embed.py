#!/usr/bin/python3
"""embed.py IN OUT NAME: write OUT, a C file defining `const char NAME[]`
holding IN's bytes (the build compiles config/pushprof.yaml in this way)."""
import sys

src, out, name = sys.argv[1:4]
data = open(src, "rb").read()
with open(out, "w") as f:
    f.write(f"/* Generated from {src.split('/')[-1]} by scripts/embed.py; do not edit. */\n")
    f.write(f"const char {name}[] =\n")
    for line in data.splitlines(keepends=True):
        esc = "".join(c if 0x20 <= b < 0x7f and c not in '"\\?' else f"\\{b:03o}"
                      for b, c in ((b, chr(b)) for b in line))
        f.write(f'\t"{esc}"\n')
    f.write("\t;\n")
