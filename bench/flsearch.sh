#!/bin/bash
# Per-CPU cache misses of the leaf tables (docs/performance.md, "Issue 16:
# second steps, and issue 11's cache"): runs a Go workload of
# tests/cpu/workloads (gcstack or leaves), profiles only it with BINARY at
# 99 Hz in 5 s windows for SECS seconds, and prints the window lines'
# counters per sample after the first window (fl_search: table searches
# the per-CPU cache could not answer). Root (BPF), Go on PATH.
#
#   bench/flsearch.sh BINARY [SECS] [gcstack|leaves]
set -euo pipefail
BIN=$(realpath "$1"); SECS=${2:-25}; WL=${3:-gcstack}
SRC=$(cd "$(dirname "$0")/.." && pwd)
D=$(mktemp -d /tmp/pushprof-flsearch-XXXXXX)
trap 'kill $W 2>/dev/null || true; rm -rf "$D"' EXIT
GO111MODULE=off go build -o "$D/$WL" "$SRC/tests/cpu/workloads/$WL.go"
GOMAXPROCS=2 "$D/$WL" "$D/go.pprof" 100000 2 & W=$!
sleep 1
cat > "$D/cfg.yaml" <<CFG
node: bench
log: {level: info}
http_address: ""
spool: {directory: ""}
cpu: {frequency_hz: 99, interval: 5s}
go_heap: {enabled: false}
local_store: {directory: $D/store}
targets:
  - pids: [$W]
CFG
"$BIN" run --config "$D/cfg.yaml" --duration "${SECS}s" 2> "$D/log.txt" >/dev/null
grep "cpu window" "$D/log.txt" | tail -n +2 | /usr/bin/python3 -c '
import re, sys
t = {}
for line in sys.stdin:
    for k in ("samples", "fl_search", "frameless_leaf", "frameless_mid", "go_edge", "g0_switch",
              "user_frames"):
        m = re.search(r"\b" + k + r"=(\d+)", line)
        if m:
            t[k] = t.get(k, 0) + int(m.group(1))
n = t.pop("samples", 0)
if not n:
    sys.exit("no samples in the window lines")
print(f"samples={n} " + " ".join(f"{k}={v / n:.3f}" for k, v in t.items()) + " (per sample)")'
