#!/usr/bin/env bash
# Finds nginx for deploy/run.sh and the front test, or installs Debian's
# `nginx` package into the git-ignored .tools/nginx/ with `apt-get download`
# and `dpkg-deb -x` (no root needed; apt checks the package against the
# archive's signed index). Prints the nginx binary's path; on failure prints
# why on stderr and exits 1.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="$ROOT/.tools/nginx"
say() { printf 'install-nginx: %s\n' "$*" >&2; }
die() { printf 'install-nginx: error: %s\n' "$*" >&2; exit 1; }
for candidate in "$(command -v nginx 2>/dev/null || true)" /usr/sbin/nginx "$DIR/usr/sbin/nginx"; do
  if [ -n "$candidate" ] && [ -x "$candidate" ] && "$candidate" -v >/dev/null 2>&1; then
    printf '%s\n' "$candidate"
    exit 0
  fi
done
for tool in apt-get dpkg-deb; do
  command -v "$tool" >/dev/null 2>&1 || die "'$tool' is required (a Debian-based system) but was not found"
done
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
say "downloading Debian's nginx package with apt-get download"
(cd "$work" && apt-get download -q nginx >"$work/apt.log" 2>&1) ||
  die "apt-get download nginx failed: $(tail -n2 "$work/apt.log" | tr '\n' ' ')"
deb="$(ls "$work"/nginx_*.deb 2>/dev/null | head -n1)"
[ -n "$deb" ] || die "apt-get download left no nginx_*.deb"
rm -rf "$DIR.tmp" && mkdir -p "$DIR.tmp"
dpkg-deb -x "$deb" "$DIR.tmp" || die "dpkg-deb -x $deb failed"
"$DIR.tmp/usr/sbin/nginx" -v >/dev/null 2>&1 ||
  die "the unpacked nginx does not run here (a missing shared library?): $("$DIR.tmp/usr/sbin/nginx" -v 2>&1 | tail -n1)"
rm -rf "$DIR" && mv "$DIR.tmp" "$DIR"
printf '%s\n' "$DIR/usr/sbin/nginx"
