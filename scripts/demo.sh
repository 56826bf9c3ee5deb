#!/usr/bin/env bash
# Set up, build, and run pushprof on this host with the default config
# (config/pushprof.yaml): the whole host is profiled for a bounded time
# (default 30 s; Ctrl-C ends it early and still writes what it has). No
# server is needed: profiles land as pprof files in a local directory.
#
#   sudo ./scripts/demo.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-${PUSHPROF_DEMO_SECONDS:-30}}
out=${PUSHPROF_DEMO_DIR:-/tmp/pushprof-demo}

./scripts/setup.sh
[ -d build ] || meson setup build >/dev/null
ninja -C build >/dev/null

rm -rf "$out"
mkdir -p "$out"
# The default config as shipped; its local store directory comes from
# ${PUSHPROF_LOCAL_STORE:-/var/lib/pushprof/profiles}, pointed here at the demo directory.
cfg=config/pushprof.yaml
export PUSHPROF_LOCAL_STORE="$out/profiles"
./build/pushprof check-config "$cfg" >/dev/null

echo "pushprof: profiling this host for ${secs}s (Ctrl-C to stop early)"
./build/pushprof run --config "$cfg" --duration "${secs}s" || true

echo
echo "Profiles written to $out/profiles:"
ls -1 "$out/profiles" | sed 's/^/  /' | tail -20
n=$(ls -1 "$out/profiles" | wc -l)
echo "  ($n files)"
[ "$n" -gt 0 ] || exit 1

# The busiest process: the CPU profile with the most samples.
busiest=""
best=0
export GOCACHE=/tmp/pushprof-demo-gocache
for f in "$out"/profiles/*parca_agent*.pb.gz; do
  [ -e "$f" ] || continue
  s=$(go tool pprof -raw "$f" 2>/dev/null | awk '/^Samples:/{f=1;next} /^Locations/{f=0} f && $1 ~ /^[0-9]+:$/ {s+=$1} END{print s+0}')
  if [ "$s" -gt "$best" ]; then best=$s; busiest=$f; fi
done
if [ -n "$busiest" ]; then
  echo
  echo "Top functions of the busiest process ($busiest, $best samples):"
  go tool pprof -top -nodecount=15 "$busiest" 2>/dev/null | sed 's/^/  /'
  echo
  echo "Open it in a browser:   go tool pprof -http=:8080 $busiest"
  echo "All CPU profiles, merged: go tool pprof -top $out/profiles/*parca_agent*.pb.gz"
fi
