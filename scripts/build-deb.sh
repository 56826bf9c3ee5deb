#!/usr/bin/env bash
# Build a Debian package of pushprof from `meson install`:
#
#   ./scripts/build-deb.sh [OUTDIR]        -> OUTDIR/pushprof_<version>_<arch>.deb
#
# Configures its own build directory (build-deb/, prefix /usr, sysconfdir
# /etc, release build), installs into a staging tree with --destdir and packs
# it with dpkg-deb. Depends: is computed from the binary (and from a stub for
# the libraries it dlopen()s) by dpkg-shlibdeps
# (the runtime libraries: libbpf1 libelf1 libprotobuf-c1 libgrpc29
# libyaml-0-2 libzstd1 zlib1g libmicrohttpd12 ...), falling back to that list
# when dpkg-dev is not installed. /etc/pushprof/pushprof.yaml is a conffile.
# The service is installed but not enabled: `systemctl enable --now pushprof`.
set -euo pipefail
cd "$(dirname "$0")/.."
SRC=$PWD
OUT=$(realpath -m "${1:-$SRC}")
BUILD=${PUSHPROF_DEB_BUILD_DIR:-$SRC/build-deb}
STAGE=$(mktemp -d /tmp/pushprof-deb.XXXXXX)
trap 'rm -rf "$STAGE"' EXIT

if [ -d "$BUILD" ]; then
  meson setup --reconfigure "$BUILD" --prefix=/usr --sysconfdir=/etc --buildtype=release >/dev/null
else
  meson setup "$BUILD" --prefix=/usr --sysconfdir=/etc --buildtype=release >/dev/null
fi
ninja -C "$BUILD" pushprof
meson install -C "$BUILD" --no-rebuild --destdir "$STAGE/root" >/dev/null

VERSION=$(meson introspect "$BUILD" --projectinfo | python3 -c 'import json,sys; print(json.load(sys.stdin)["version"])')
ARCH=$(dpkg --print-architecture)
ROOT=$STAGE/root
BIN=$ROOT/usr/bin/pushprof
[ -x "$BIN" ] || { echo "build-deb: $BIN missing after meson install" >&2; exit 1; }
strip --strip-debug "$BIN"

DEPENDS="libbpf1, libelf1, libprotobuf-c1, libgrpc29, libyaml-0-2, libzstd1, zlib1g, libmicrohttpd12, libcurl4, libpcre2-8-0, libc6"
if command -v dpkg-shlibdeps >/dev/null; then
  mkdir -p "$STAGE/shl/debian"
  printf 'Source: pushprof\n\nPackage: pushprof\nArchitecture: any\n' > "$STAGE/shl/debian/control"
  # gRPC, libcurl and libmicrohttpd are dlopen()ed on first use (meson.build's
  # lazy_libs), so the binary does not name them: a stub linked with them
  # does, and dpkg-shlibdeps gives their packages and versions too
  printf 'int main(void) { return 0; }\n' > "$STAGE/stub.c"
  cc -o "$STAGE/shl/lazy-libs" "$STAGE/stub.c" -Wl,--no-as-needed -lgrpc -lcurl -lmicrohttpd
  DEPENDS=$(cd "$STAGE/shl" && dpkg-shlibdeps -O -e "$BIN" -e lazy-libs 2>/dev/null |
    sed -n 's/^shlibs:Depends=//p')
fi

mkdir -p "$ROOT/DEBIAN"
SIZE=$(du -sk --exclude=DEBIAN "$ROOT" | cut -f1)
cat > "$ROOT/DEBIAN/control" <<CONTROL
Package: pushprof
Version: $VERSION
Architecture: $ARCH
Maintainer: pushprof maintainers <maintainers@pushprof.invalid>
Installed-Size: $SIZE
Depends: $DEPENDS
Section: devel
Priority: optional
Homepage: https://github.com/pushprof/pushprof
Description: continuous profiling agent (eBPF CPU, Go heap, OOM captures)
 pushprof samples on-CPU stacks of every process with eBPF, reads Go heap
 profiles from outside the process (also at OOM-kill time) and pushes pprof
 profiles to a Parca-compatible server over gRPC.
CONTROL
( cd "$ROOT" && find etc -type f | sed 's|^|/|' ) > "$ROOT/DEBIAN/conffiles"

cat > "$ROOT/DEBIAN/postinst" <<'SCRIPT'
#!/bin/sh
set -e
if [ "$1" = configure ] && [ -d /run/systemd/system ]; then
  systemctl daemon-reload || true
  # restart only if the admin already runs it
  if systemctl is-active --quiet pushprof; then systemctl restart pushprof || true; fi
fi
exit 0
SCRIPT
cat > "$ROOT/DEBIAN/prerm" <<'SCRIPT'
#!/bin/sh
set -e
if [ -d /run/systemd/system ] && [ "$1" = remove ]; then
  systemctl stop pushprof 2>/dev/null || true
  systemctl disable pushprof 2>/dev/null || true
fi
exit 0
SCRIPT
cat > "$ROOT/DEBIAN/postrm" <<'SCRIPT'
#!/bin/sh
set -e
if [ -d /run/systemd/system ]; then systemctl daemon-reload || true; fi
if [ "$1" = purge ]; then rm -rf /var/lib/pushprof; fi
exit 0
SCRIPT
chmod 0755 "$ROOT/DEBIAN/postinst" "$ROOT/DEBIAN/prerm" "$ROOT/DEBIAN/postrm"

mkdir -p "$OUT"
DEB=$OUT/pushprof_${VERSION}_${ARCH}.deb
dpkg-deb --root-owner-group --build "$ROOT" "$DEB" >/dev/null
echo "$DEB"
