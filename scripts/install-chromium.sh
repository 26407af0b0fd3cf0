#!/usr/bin/env bash
# Finds Chromium for the chat page test (server/page_test.ts), or installs
# Debian's `chromium` package and the libraries it needs that this system
# lacks into the git-ignored .tools/chromium/, with `apt-get download` and
# `dpkg-deb -x` (no root needed; apt checks every package against the
# archive's signed index). Prints a command that runs Chromium; on failure
# prints why on stderr and exits 1.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="$ROOT/.tools/chromium"
say() { printf 'install-chromium: %s\n' "$*" >&2; }
die() { printf 'install-chromium: error: %s\n' "$*" >&2; exit 1; }
works() { "$1" --headless --no-sandbox --version >/dev/null 2>&1; }
for candidate in "$(command -v chromium 2>/dev/null || true)" "$DIR/chromium"; do
  if [ -n "$candidate" ] && [ -x "$candidate" ] && works "$candidate"; then
    printf '%s\n' "$candidate"
    exit 0
  fi
done
[ "$(uname -s)-$(uname -m)" = "Linux-x86_64" ] || die "only x86-64 Linux hosts are supported"
for tool in apt-get dpkg-deb; do
  command -v "$tool" >/dev/null 2>&1 || die "'$tool' is required (a Debian-based system) but was not found"
done
work="$(mktemp -d)"
trap 'rm -rf "$work" "$DIR.tmp"' EXIT
# What installing it would add here: chromium and the libraries missing on this system.
packages="$(apt-get -s install --no-install-recommends chromium 2>"$work/sim.log" | awk '/^Inst /{print $2}')" ||
  die "apt-get cannot resolve chromium: $(tail -n2 "$work/sim.log" | tr '\n' ' ')"
[ -n "$packages" ] || die "apt-get lists nothing to install for chromium"
say "downloading Debian's chromium and $(($(echo "$packages" | wc -l) - 1)) libraries with apt-get download"
# shellcheck disable=SC2086
(cd "$work" && apt-get download -q $packages >"$work/apt.log" 2>&1) ||
  die "apt-get download failed: $(tail -n2 "$work/apt.log" | tr '\n' ' ')"
rm -rf "$DIR.tmp" && mkdir -p "$DIR.tmp/root"
for deb in "$work"/*.deb; do dpkg-deb -x "$deb" "$DIR.tmp/root" || die "dpkg-deb -x $deb failed"; done
[ -x "$DIR.tmp/root/usr/lib/chromium/chromium" ] || die "the chromium package holds no usr/lib/chromium/chromium"
cat >"$DIR.tmp/chromium" <<'WRAP'
#!/usr/bin/env bash
# Runs the Chromium unpacked beside this script, with its libraries.
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
lib="$here/root/usr/lib/x86_64-linux-gnu"
export LD_LIBRARY_PATH="$lib:$lib/pulseaudio:$here/root/usr/lib/chromium${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
exec "$here/root/usr/lib/chromium/chromium" "$@"
WRAP
chmod +x "$DIR.tmp/chromium"
works "$DIR.tmp/chromium" ||
  die "the unpacked chromium does not run here: $("$DIR.tmp/chromium" --headless --no-sandbox --version 2>&1 | tail -n1)"
rm -rf "$DIR" && mv "$DIR.tmp" "$DIR"
printf '%s\n' "$DIR/chromium"
