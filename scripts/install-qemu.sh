#!/usr/bin/env bash
# Installs qemu-user for aarch64 into the git-ignored .tools/qemu/, so that the
# Zig suite can run the aarch64 library's tests (the NEON and dotprod kernel
# variants) on an x86-64 machine (scripts/test-zig.sh). It comes from Debian's
# qemu-user-static package, fetched with `apt-get download` (no root needed:
# apt checks the package against the archive's signed index) and unpacked with
# `dpkg-deb -x`; only its statically linked qemu-aarch64 is kept.
#
# Reuses an install whose version is in the accepted series. Prints the folder
# that holds `qemu-aarch64` (for PATH) on success; on failure prints why on
# stderr and exits 1, leaving nothing half-written.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="$ROOT/.tools/qemu"
BIN="$DIR/qemu-aarch64"
# Debian 12's QEMU 7.2 (the first with every instruction the variants use:
# FEAT_DotProd and FEAT_I8MM under -cpu max).
SERIES="qemu-aarch64 version 7.2."

say() { printf 'install-qemu: %s\n' "$*" >&2; }
die() { printf 'install-qemu: error: %s\n' "$*" >&2; exit 1; }

installed() {
  [ -x "$BIN" ] && "$BIN" --version 2>/dev/null | head -n1 | grep -qF "$SERIES"
}
if installed; then
  printf '%s\n' "$DIR"
  exit 0
fi
[ "$(uname -s)-$(uname -m)" = "Linux-x86_64" ] || die "only x86-64 Linux hosts are supported"
for tool in apt-get dpkg-deb; do
  command -v "$tool" >/dev/null 2>&1 || die "'$tool' is required (a Debian-based system) but was not found"
done

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
say "downloading Debian's qemu-user-static (about 63 MB) with apt-get download"
(cd "$work" && apt-get download -q qemu-user-static >"$work/apt.log" 2>&1) ||
  die "apt-get download qemu-user-static failed: $(tail -n2 "$work/apt.log" | tr '\n' ' ')"
deb="$(find "$work" -maxdepth 1 -name 'qemu-user-static_*.deb' -print -quit)"
[ -n "$deb" ] || die "apt-get download produced no qemu-user-static .deb"
dpkg-deb -x "$deb" "$work/x"
src="$work/x/usr/bin/qemu-aarch64-static"
[ -x "$src" ] || die "$(basename "$deb") holds no usr/bin/qemu-aarch64-static"
version="$("$src" --version | head -n1)"
case "$version" in
  "$SERIES"*) ;;
  *) die "$(basename "$deb") is '$version', not the accepted series '$SERIES'" ;;
esac
mkdir -p "$DIR"
cp "$src" "$work/qemu-aarch64"
sync "$work/qemu-aarch64"
mv -f "$work/qemu-aarch64" "$BIN"
say "installed $version from $(basename "$deb") into $DIR"
printf '%s\n' "$DIR"
