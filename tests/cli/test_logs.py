"""The agent's log lines as log collectors read them: JSON lines
that Python's json module parses, numbers as JSON numbers and strings as
strings (a comm of "1234" stays a string), logfmt lines that split by the
logfmt grammar, and no value cut silently: a line longer than the 4 KiB
stack buffer comes out whole, a value longer than pp_q's buffer is cut with
a "...[+N bytes]" marker that says by how much."""
import json
import re
import subprocess
import sys

from pptest import check, done

probe = sys.argv[1]


def lines(fmt):
    r = subprocess.run([probe, fmt], capture_output=True, text=True, timeout=30)
    check(r.returncode == 0 and r.stdout == "", f"log_probe {fmt} runs", r.stderr[-500:])
    return r.stderr.splitlines()


# JSON
recs = []
for ln in lines("json"):
    try:
        recs.append(json.loads(ln))
    except ValueError as e:
        check(False, "every JSON line parses", f"{e}: {ln[:300]}")
by = {r.get("msg"): r for r in recs}
check(len(recs) == 4 and set(by) == {"types", "quoting", "long line", "long value"},
      "four JSON lines", [r.get("msg") for r in recs])
t = by.get("types", {})
check(t.get("pid") == 1234 and t.get("samples") == 18446744073709551615
      and t.get("ratio") == 0.25 and t.get("neg") == -7,
      "printf numbers are JSON numbers", t)
check(t.get("comm") == "1234" and t.get("cpu") == "on" and t.get("hex") == "0x1f",
      "pp_q values and non-numbers stay strings", t)
check(t.get("level") == "info" and re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z",
                                                 t.get("ts", "")) is not None,
      "ts and level", t)
q = by.get("quoting", {})
check(q.get("path") == '/tmp/a b/"c"\\d' and q.get("error") == "line1\nline2"
      and q.get("empty") == "", "quotes, backslashes, newlines and empty values survive", q)
lg = by.get("long line", {})
check(lg.get("value") == "x" * 19999 and lg.get("n") == 19999 and lg.get("end") == 1,
      "a 20 KB line is not cut", {k: str(v)[:40] for k, v in lg.items()})
lv = by.get("long value", {})
m = re.fullmatch(r"(/p{9} p+)\.\.\.\[\+(\d+) bytes\]", lv.get("path", ""))
check(m is not None and len(m.group(1)) + int(m.group(2)) == lv.get("n") == 2999
      and lv.get("end") == 1, "a cut value says how much was cut",
      str(lv.get("path"))[-60:])

# logfmt: key=value or key="..." with \" \\ \n escapes
LOGFMT = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|[^ "]*)(?: |$)')


def logfmt(ln):
    out, pos = {}, 0
    for m in LOGFMT.finditer(ln):
        if m.start() != pos:
            return None
        v = m.group(2)
        if v.startswith('"'):
            v = re.sub(r'\\(.)', lambda e: "\n" if e.group(1) == "n" else e.group(1), v[1:-1])
        out[m.group(1)] = v
        pos = m.end()
    return out if pos == len(ln) else None


recs = [logfmt(ln) for ln in lines("logfmt")]
check(len(recs) == 4 and all(recs), "every logfmt line splits by the grammar", recs[:1])
by = {r.get("msg"): r for r in recs if r}
t = by.get("types", {})
check(t.get("pid") == "1234" and t.get("comm") == "1234" and t.get("ratio") == "0.25",
      "logfmt fields", t)
q = by.get("quoting", {})
check(q.get("path") == '/tmp/a b/"c"\\d' and q.get("error") == "line1\nline2"
      and q.get("empty") == "", "logfmt quoting round-trips", q)
check(by.get("long line", {}).get("value") == "x" * 19999, "logfmt: a 20 KB line is not cut")
check(re.search(r"\.\.\.\[\+\d+ bytes\]$", by.get("long value", {}).get("path", "")) is not None,
      "logfmt: a cut value is marked")
done()
