#!/usr/bin/env bash
# The first five minutes: set up, build, and show what pushprof sees, on
# workloads whose profiles are known in advance (scripts/demo/):
#   shop  a Go service: ~70 % of its CPU in main.priceOrders (sha256), ~30 %
#         in main.renderReport; 48 MiB of heap held by main.loadCatalog.
#   leak  a Go program that leaks 1 MiB blocks in main.cacheForever inside a
#         64 MiB memory cgroup the demo creates (and removes), until the
#         kernel OOM-kills it.
# The agent profiles the whole host for SECONDS (default 30) with a config
# written next to the profiles; then the demo prints shop's top CPU
# functions, its top heap allocators (a snapshot taken through the agent's
# snapshot API), the OOM capture with the leaking function on top, an SVG
# per profile, and the `go tool pprof` commands to explore them.
#
#   ./scripts/demo.sh [SECONDS]          as root
#   sudo ./scripts/demo.sh [SECONDS]     as a normal user (files are given back to you)
#
# Environment: PUSHPROF_DEMO_DIR (default /tmp/pushprof-demo),
# PUSHPROF_DEMO_PORT (agent's HTTP port, default 7079), PUSHPROF (an agent
# binary to use as is: skips setup and build).
set -euo pipefail
cd "$(dirname "$0")/.."
src=$PWD
secs=${1:-${PUSHPROF_DEMO_SECONDS:-30}}
out=${PUSHPROF_DEMO_DIR:-/tmp/pushprof-demo}
port=${PUSHPROF_DEMO_PORT:-7079}

if [ "$(id -u)" -ne 0 ]; then
  echo "demo.sh: run as root (or: sudo ./scripts/demo.sh): the agent loads BPF programs" >&2
  exit 1
fi
case $secs in '' | *[!0-9]*) echo "demo.sh: SECONDS must be a number, not '$secs'" >&2; exit 2 ;; esac
[ "$secs" -ge 12 ] || { echo "demo.sh: SECONDS must be at least 12 (one CPU window is 5 s)" >&2; exit 2; }

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

if [ -n "${PUSHPROF:-}" ]; then
  agent=$PUSHPROF
else
  step "setting up (Debian packages, build)"
  ./scripts/setup.sh
  [ -d build ] || meson setup build >/dev/null
  ninja -C build >/dev/null
  agent=$src/build/pushprof
fi

rm -rf "$out"
for d in /sys/fs/cgroup/pushprof-demo-* /sys/fs/cgroup/memory/pushprof-demo-*; do
  [ -d "$d" ] && rmdir "$d" 2>/dev/null || true    # left by a demo that was killed
done
mkdir -p "$out/bin" "$out/profiles"
chmod 0700 "$out"
export GOCACHE=${GOCACHE:-$out-gocache}
for w in shop leak; do
  go build -o "$out/bin/$w" "$src/scripts/demo/$w.go"
done

# The snapshot API wants a bearer token; the header comes from a file so the
# token is never in a command line.
tok=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
( umask 077; printf '%s\n' "$tok" > "$out/token"
  printf 'Authorization: Bearer %s\n' "$tok" > "$out/auth-header" )

# The shipped defaults (config/pushprof.yaml) with what a demo needs: more
# samples and shorter windows, profiles in the demo directory, the snapshot
# API on, no remote store.
cat > "$out/pushprof.yaml" <<EOF
node: demo
http_address: 127.0.0.1:$port
local_store:
  directory: $out/profiles
spool:
  directory: $out/spool
cpu:
  frequency_hz: 99
  interval: 5s
go_heap:
  interval: 0          # snapshots on demand and at OOM only
  on_oom: true
snapshot_api:
  enabled: true
  bearer_token_file: $out/token
EOF
"$agent" check-config "$out/pushprof.yaml" >/dev/null

cg=""
cleanup() {
  if [ -n "${shop_pid:-}" ]; then kill "$shop_pid" 2>/dev/null || true; fi
  if [ -n "${agent_pid:-}" ]; then kill "$agent_pid" 2>/dev/null || true; wait "$agent_pid" 2>/dev/null || true; fi
  if [ -n "$cg" ] && [ -d "$cg" ]; then
    for p in $(cat "$cg/cgroup.procs" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
    for _ in 1 2 3 4 5 6 7 8 9 10; do rmdir "$cg" 2>/dev/null && break; sleep 0.2; done
  fi
  return 0
}
trap cleanup EXIT
trap 'exit 130' INT TERM

step "profiling this host for ${secs}s (agent config: $out/pushprof.yaml)"
"$agent" run --config "$out/pushprof.yaml" --duration "${secs}s" > "$out/agent.log" 2>&1 &
agent_pid=$!
"$out/bin/shop" "$secs" > /dev/null &
shop_pid=$!
for _ in $(seq 100); do
  curl -fs "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break
  kill -0 "$agent_pid" 2>/dev/null || { echo "the agent stopped:"; cat "$out/agent.log"; exit 1; }
  sleep 0.1
done

# The leak, alone in a memory cgroup with a 64 MiB limit (v1 or v2).
if [ -f /sys/fs/cgroup/cgroup.controllers ] && grep -qw memory /sys/fs/cgroup/cgroup.controllers; then
  cg=/sys/fs/cgroup/pushprof-demo-$$
  mkdir "$cg"
  echo 64M > "$cg/memory.max"
  echo 0 > "$cg/memory.swap.max" 2>/dev/null || true
else
  cg=/sys/fs/cgroup/memory/pushprof-demo-$$
  mkdir "$cg"
  echo 64M > "$cg/memory.limit_in_bytes"
  echo 64M > "$cg/memory.memsw.limit_in_bytes" 2>/dev/null || true
fi
sh -c 'echo $$ > "$1/cgroup.procs" && exec "$2"' sh "$cg" "$out/bin/leak" 2>/dev/null &
leak_pid=$!
disown "$leak_pid"   # its OOM kill is the point: no "Killed" notice from bash

count() { local n=0 f; for f in "$out"/profiles/*-"$1"-*.pb.gz; do [ -e "$f" ] && n=$((n + 1)); done; echo $n; }
t0=$SECONDS
snap=waiting
tty=false; [ -t 1 ] && tty=true
last=-5
while kill -0 "$agent_pid" 2>/dev/null; do
  el=$((SECONDS - t0))
  # a heap snapshot of shop through the agent, once its heap is built
  if [ "$snap" = waiting ] && [ "$el" -ge 4 ]; then
    code=$(curl -s -o /dev/null -w '%{http_code}' -X POST -H "@$out/auth-header" \
      "http://127.0.0.1:$port/api/v1/snapshot?pid=$shop_pid&view=runtime" || true)
    if [ "$code" = 200 ]; then snap=taken; else snap="failed (HTTP $code)"; fi
  fi
  oom=waiting; kill -0 "$leak_pid" 2>/dev/null || oom="killed"
  [ "$(count heap-oom)" -gt 0 ] && oom=captured
  line=$(printf '[%3ds/%ds] CPU profiles: %d · heap snapshot of shop: %s · leak OOM: %s' \
    "$el" "$secs" "$(count cpu)" "$snap" "$oom")
  if $tty; then printf '\r%s\033[K' "$line"; elif [ $((el - last)) -ge 5 ]; then echo "$line"; last=$el; fi
  sleep 1
done
if $tty; then echo; fi
wait "$agent_pid" || { echo "the agent exited with an error:"; tail -20 "$out/agent.log"; exit 1; }
agent_pid=""
cleanup

p=$out/profiles
shop_pid_s=$shop_pid
cpu=( "$p"/*-cpu-shop-"$shop_pid_s"-*.pb.gz )
heap=( "$p"/*-heap-on_demand-shop-"$shop_pid_s"-*.pb.gz )
oomf=( "$p"/*-heap-oom-leak-*.pb.gz )
status=0
svg() { # output, profile files...
  local o=$1; shift
  go tool pprof -svg -output "$o" "$@" >/dev/null 2>&1 && echo "  picture: $o" || echo "  (no SVG: graphviz missing?)"
}

# show TITLE WHAT-IF-MISSING SVG-NAME PPROF-OPTIONS... -- FILES...:
# the top table of the profiles and a picture of them next to them
show() {
  local title=$1 missing=$2 name=$3 opts=()
  shift 3
  while [ "$1" != -- ]; do opts+=("$1"); shift; done
  shift
  step "$title"
  if [ -e "$1" ]; then
    go tool pprof -top "${opts[@]}" "$@" 2>/dev/null | sed -n '/flat%/,$p' | sed 's/^/  /'
    svg "$p/$name" "${opts[@]}" "$@"
  else
    echo "  $missing: see $out/agent.log"
    status=1
  fi
}

show "shop's top CPU functions (${#cpu[@]} profiles of 5 s; by design, of main.main: ~70 % main.priceOrders, ~30 % main.renderReport)" \
  "no CPU profile of shop (pid $shop_pid_s)" cpu-shop.svg -cum -nodecount=12 -- "${cpu[@]}"
show "shop's top heap allocators (in use; sampled like Go's own; by design main.loadCatalog ~50 MB, main.openSessions ~12 MB)" \
  "no heap snapshot of shop ($snap)" heap-shop.svg -sample_index=inuse_space -nodecount=6 -- "${heap[@]}"
show "the OOM kill: what filled leak's heap when the kernel killed it" \
  "no OOM capture of leak" oom-leak.svg -sample_index=inuse_space -nodecount=5 -- "${oomf[@]}"

step "files"
n=$(ls "$p"/*.pb.gz 2>/dev/null | wc -l)
echo "  $n profiles of this host in $p, named <time>-<type>-<comm>-<pid>-<seq>.pb.gz;"
echo "  the agent's log: $out/agent.log; its config: $out/pushprof.yaml"
echo
echo "Explore them in a browser:"
[ -e "${cpu[0]}" ] && echo "  go tool pprof -http=:8080 $p/*-cpu-shop-$shop_pid_s-*.pb.gz"
[ -e "${oomf[0]}" ] && echo "  go tool pprof -http=:8080 -sample_index=inuse_space ${oomf[0]}"
echo "  go tool pprof -top $p/*-cpu-*.pb.gz        # every process on this host, merged"

# with sudo, the files belong to the user who asked for them
if [ -n "${SUDO_UID:-}" ] && [ "${SUDO_UID}" != 0 ]; then
  chown -R "$SUDO_UID:${SUDO_GID:-$SUDO_UID}" "$out"
fi
exit $status
