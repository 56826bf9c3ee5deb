#!/usr/bin/env bash
# Install everything pushprof needs to build, run and test, from Debian 12's
# packages. Idempotent: safe to run again; skips apt when all is present.
set -euo pipefail

PKGS=(
  # build
  meson ninja-build pkg-config gcc clang llvm
  libbpf-dev bpftool libelf-dev zlib1g-dev libzstd-dev libyaml-dev
  libprotobuf-c-dev protobuf-c-compiler libgrpc-dev libmicrohttpd-dev libssl-dev
  libcurl4-openssl-dev libpcre2-dev
  # tests: Go workloads and `go tool pprof`, the gRPC test receiver, TLS certs
  golang-go python3 python3-grpcio python3-protobuf protobuf-compiler openssl
  libclang-rt-14-dev procps util-linux
  # deploy tests: a real containerd for the CRI client, the chart rendered with
  # Helm's template libraries, systemd-analyze for the unit, dpkg-dev for the .deb
  containerd runc golang-github-masterminds-sprig-dev golang-gopkg-yaml.v3-dev
  python3-yaml dpkg-dev systemd
  # the demo: its pictures (go tool pprof -svg) and its call to the snapshot API
  graphviz curl
  # a real Go program nobody here wrote, profiled against its own profiler
  # (tests/cpu/test_cpu_realgo.py)
  prometheus
)
# Node.js runs the Kubernetes schema validation (npm kubernetes-models) and
# is the JIT runtime of the CPU perf-map test (node --perf-basic-prof); keep
# an existing installation rather than replacing it with Debian's.
if ! command -v npm >/dev/null 2>&1; then
  PKGS+=(nodejs npm)
elif ! command -v node >/dev/null 2>&1; then
  PKGS+=(nodejs)
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "setup.sh: run as root (sudo ./scripts/setup.sh)" >&2
  exit 1
fi

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup.sh: installing ${missing[*]}"
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
else
  echo "setup.sh: all packages present"
fi

# --tests: also a newer Go toolchain from Debian's bookworm-backports, so the
# Go table reader and heap profiles are tested against Go 1.20+ layouts too.
if [ "${1:-}" = "--tests" ] && [ ! -x /usr/lib/go-1.23/bin/go ]; then
  src=/etc/apt/sources.list.d/bookworm-backports.sources
  if [ ! -e "$src" ] && ! grep -rqs bookworm-backports /etc/apt/sources.list /etc/apt/sources.list.d/; then
    printf 'Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm-backports\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' > "$src"
  fi
  apt-get update >/dev/null || true
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends -t bookworm-backports \
    golang-1.23-go || echo "setup.sh: golang-1.23-go unavailable; Go 1.23 variants of the tests are skipped"
fi

# tracepoints (OOM capture) need tracefs; cgroup2 beside v1 for cgroup ids
if [ ! -e /sys/kernel/tracing/events ]; then
  mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null || true
fi
