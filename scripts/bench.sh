#!/bin/sh
# Benchmark suite: workload slowdown against perf record, agent CPU
# and BPF time per sample, memory, Go heap snapshot / OOM capture time, wire
# bytes. Needs root (BPF, perf -a, kernel.bpf_stats_enabled).
#
#   scripts/bench.sh [--quick] [--build DIR] [--sections 1,2,3,4,5]
#                    [--rounds N] [--work-rounds N]
#
# Builds DIR (default build/) first, then runs bench/bench.py with Debian's
# python3. Results: DIR/bench/results.md (also printed) and results.json.
# A full run takes about 15-25 minutes on a 2-CPU VM; --quick about a minute
# (it only shows that every section works).
set -eu
cd "$(dirname "$0")/.."
build=build
prev=
for a in "$@"; do
	[ "$prev" = "--build" ] && build=$a
	prev=$a
done
if [ "$(id -u)" != 0 ]; then
	echo "bench.sh: run as root" >&2
	exit 1
fi
[ -f "$build/build.ninja" ] || meson setup "$build" >/dev/null
ninja -C "$build" >/dev/null
exec /usr/bin/python3 bench/bench.py --build "$build" --out "$build/bench" "$@"
