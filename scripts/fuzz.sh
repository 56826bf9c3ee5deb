#!/usr/bin/env bash
# Build the libFuzzer targets (clang, ASan + UBSan) and run each for a
# bounded time. Crashes and their inputs are kept in build-fuzz/findings/.
#
#   ./scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]     default 60 s, all targets
#
# Run longer by passing more seconds, e.g. ./scripts/fuzz.sh 3600 fuzz_config.
# Corpora persist in build-fuzz/corpus/<target> between runs.
set -uo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
shift || true

if [ ! -d build-fuzz ]; then
  CC=clang meson setup build-fuzz -Dfuzz=true -Db_sanitize=address,undefined -Db_lundef=false \
    >/dev/null || { echo "FAIL fuzz setup"; exit 1; }
fi
ninja -C build-fuzz || { echo "FAIL fuzz build"; exit 1; }

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  mapfile -t targets < <(find build-fuzz -maxdepth 3 -type f -name 'fuzz_*' -perm -u+x -printf '%f\n' | sort)
fi
[ ${#targets[@]} -gt 0 ] || { echo "fuzz.sh: no fuzz targets built"; exit 1; }

status=0
for t in "${targets[@]}"; do
  bin=$(find build-fuzz -maxdepth 3 -type f -name "$t" | head -1)
  corpus=build-fuzz/corpus/$t
  findings=build-fuzz/findings/$t
  mkdir -p "$corpus" "$findings"
  # seed corpora kept in the repo, when a target has one
  for seed in tests/*/fuzz-seeds/"$t"; do [ -d "$seed" ] && cp -n "$seed"/* "$corpus"/ 2>/dev/null; done
  # a libFuzzer dictionary kept next to the target's source, when it has one
  dict=()
  for d in tests/*/"$t".dict; do [ -f "$d" ] && dict=(-dict="$d"); done
  echo "== $t for ${secs}s"
  if "$bin" -max_total_time="$secs" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
      "${dict[@]}" -artifact_prefix="$findings/" "$corpus" >"$findings/log.txt" 2>&1; then
    grep -E '^stat::number_of_executed_units|^Done' "$findings/log.txt" | tail -2 | sed 's/^/   /'
    echo "ok   fuzz $t"
  else
    tail -40 "$findings/log.txt"
    echo "FAIL fuzz $t (inputs in $findings/)"
    status=1
  fi
done
exit $status
