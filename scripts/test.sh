#!/usr/bin/env bash
# Set up, build, and run every test: once with warnings as errors, once more
# under AddressSanitizer + UndefinedBehaviorSanitizer. Needs root: the tests
# load real BPF programs, read other processes' memory and OOM-kill
# workloads inside their own memory cgroups.
#
#   sudo ./scripts/test.sh            everything
#   PUSHPROF_TEST_ASAN=0 ...          skip the sanitizer pass
#   PUSHPROF_FUZZ_SECONDS=N ...       fuzz each parser N s (default 30; 0 = skip)
#   PUSHPROF_TEST_ARGS="--suite cpu"  one area (meson test args: --suite AREA, --suite unit,
#                                     or test names such as "cpu_stacks config_units")
set -uo pipefail
cd "$(dirname "$0")/.."

./scripts/setup.sh --tests || exit 1

total_ok=0
total_fail=0
status=0

run_suite() { # builddir, extra meson setup args...
  local dir=$1; shift
  if [ ! -d "$dir" ]; then
    meson setup "$dir" -Dwerror=true "$@" || return 1
  else
    meson setup --reconfigure "$dir" -Dwerror=true "$@" >/dev/null || return 1
  fi
  ninja -C "$dir" || return 1
  # shellcheck disable=SC2086
  meson test -C "$dir" --print-errorlogs --num-processes 1 ${PUSHPROF_TEST_ARGS:-}
  local rc=$?
  local log="$dir/meson-logs/testlog.txt"
  local ok fail
  ok=$(grep -E '^Ok: ' "$log" | tail -1 | awk '{print $2}')
  fail=$(grep -E '^(Fail|Timeout|Unexpected Pass): ' "$log" | awk '{s+=$NF} END {print s+0}')
  total_ok=$((total_ok + ${ok:-0}))
  total_fail=$((total_fail + ${fail:-0}))
  return $rc
}

echo "== build and test (warnings as errors)"
run_suite build || status=1

if [ "${PUSHPROF_TEST_ASAN:-1}" = 1 ]; then
  echo "== build and test under ASan + UBSan"
  # intercept_tls_get_addr=0: GCC 12's sanitizer runtime (fixed in LLVM 17)
  # takes a dynamic TLS block that starts 16 bytes past a page boundary for a
  # pre-2.25 glibc block with a header, reads the allocator's chunk header as
  # its bounds, and LeakSanitizer's tracer then dies scanning them at exit
  # ("Tracer caught signal 11", exit 1, no leak named). Whether grpc's or
  # libbpf's TLS lands there is chance, so it failed one run in many.
  # Off, nothing is missed: blocks ld.so allocates stay roots for the scan.
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:intercept_tls_get_addr=0 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp:print_suppressions=0" \
    run_suite build-asan -Db_sanitize=address,undefined -Db_lundef=false || status=1
fi

if [ "${PUSHPROF_FUZZ_SECONDS:-30}" != 0 ]; then
  echo "== fuzz each parser for ${PUSHPROF_FUZZ_SECONDS:-30}s (libFuzzer, ASan + UBSan)"
  ./scripts/fuzz.sh "${PUSHPROF_FUZZ_SECONDS:-30}" | tee build-fuzz-run.log || status=1
  total_ok=$((total_ok + $(grep -c '^ok   fuzz' build-fuzz-run.log)))
  total_fail=$((total_fail + $(grep -c '^FAIL fuzz' build-fuzz-run.log)))
  rm -f build-fuzz-run.log
fi

echo
echo "${total_ok} passed, ${total_fail} failed"
exit $status
