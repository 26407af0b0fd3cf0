#!/usr/bin/env bash
# Installs the pinned toolchain into the git-ignored, project-local .tools/
# folder when missing and reuses it when present. Nothing else is touched.
#
#   Deno  from the npm registry (package `@deno/linux-x64-glibc`, the
#         platform package behind npm's `deno`, which holds the real binary)
#   Zig   from PyPI (package `ziglang`)
#
# Prints the two binaries' paths on success. Exits non-zero with a clear
# message when a registry cannot be reached or a download does not match.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TOOLS="$ROOT/.tools"

DENO_VERSION="2.9.6"
DENO_PACKAGE="@deno/linux-x64-glibc"
# The registry's integrity field for that tarball; npm checks the download
# against it and we check that npm recorded this exact value.
DENO_INTEGRITY="sha512-3md4TKLCuzsLDmfOoC5KN7NAZaxSVkMgm64vg6foD00JBADCpYS2/5QqXfzgnP5ZQz3iLP9vBQJtEgc116OAoQ=="
ZIG_VERSION="0.14.1"

DENO_BIN="$TOOLS/deno/node_modules/$DENO_PACKAGE/deno"
ZIG_BIN="$TOOLS/zig/ziglang/zig"

say() { printf 'bootstrap: %s\n' "$*" >&2; }
die() { printf 'bootstrap: error: %s\n' "$*" >&2; exit 1; }

need() { command -v "$1" >/dev/null 2>&1 || die "'$1' is required to install the toolchain but was not found on PATH"; }

install_deno() {
  need npm
  say "installing deno $DENO_VERSION from the npm registry into $TOOLS/deno"
  local stage="$TOOLS/.deno.tmp.$$"
  rm -rf "$stage"; mkdir -p "$stage"
  printf '{"name":"cflow-tools-deno","private":true}\n' >"$stage/package.json"
  if ! npm install --prefix "$stage" --no-save --no-audit --no-fund --ignore-scripts \
      "$DENO_PACKAGE@$DENO_VERSION" >"$stage/npm.log" 2>&1; then
    cat "$stage/npm.log" >&2
    rm -rf "$stage"
    die "could not install $DENO_PACKAGE@$DENO_VERSION from the npm registry (is it reachable? see npm's output above)"
  fi
  local got
  got="$(node -e 'process.stdout.write(require(process.argv[1]).version)' "$stage/node_modules/$DENO_PACKAGE/package.json")"
  [ "$got" = "$DENO_VERSION" ] || { rm -rf "$stage"; die "npm installed deno $got, expected $DENO_VERSION"; }
  local lock_integrity
  lock_integrity="$(node -e 'const l=require(process.argv[1]);process.stdout.write((l.packages["node_modules/"+process.argv[2]]||{}).integrity||"")' "$stage/node_modules/.package-lock.json" "$DENO_PACKAGE" 2>/dev/null || true)"
  if [ "$lock_integrity" != "$DENO_INTEGRITY" ]; then
    rm -rf "$stage"; die "$DENO_PACKAGE@$DENO_VERSION integrity '$lock_integrity' does not match the pinned $DENO_INTEGRITY"
  fi
  [ -x "$stage/node_modules/$DENO_PACKAGE/deno" ] || { rm -rf "$stage"; die "$DENO_PACKAGE did not contain a deno binary"; }
  "$stage/node_modules/$DENO_PACKAGE/deno" --version >/dev/null 2>&1 || { rm -rf "$stage"; die "the installed deno binary does not run on this machine"; }
  rm -rf "$TOOLS/deno"; mv "$stage" "$TOOLS/deno"
}

install_zig() {
  local py=""
  for c in python3 python; do command -v "$c" >/dev/null 2>&1 && { py="$c"; break; }; done
  [ -n "$py" ] || die "python3 (with pip) is required to install zig from PyPI"
  say "installing zig $ZIG_VERSION from PyPI into $TOOLS/zig"
  local stage="$TOOLS/.zig.tmp.$$"
  rm -rf "$stage"; mkdir -p "$stage"
  if ! "$py" -m pip install --disable-pip-version-check --no-input --no-deps --only-binary=:all: \
      --target "$stage" "ziglang==$ZIG_VERSION" >"$stage.log" 2>&1; then
    cat "$stage.log" >&2
    rm -rf "$stage" "$stage.log"
    die "could not install ziglang==$ZIG_VERSION from PyPI (is it reachable? see pip's output above)"
  fi
  rm -f "$stage.log"
  local got
  got="$("$stage/ziglang/zig" version 2>/dev/null || true)"
  [ "$got" = "$ZIG_VERSION" ] || { rm -rf "$stage"; die "PyPI's ziglang gave zig '$got', expected $ZIG_VERSION"; }
  rm -rf "$TOOLS/zig"; mv "$stage" "$TOOLS/zig"
}

STAMP="$TOOLS/versions"
WANT="deno $DENO_VERSION $DENO_INTEGRITY; zig $ZIG_VERSION"

# Fast path: both tools present at the pinned versions (checked when installed).
if [ -x "$DENO_BIN" ] && [ -x "$ZIG_BIN" ] && [ "$(cat "$STAMP" 2>/dev/null)" = "$WANT" ]; then
  printf '%s\n%s\n' "$DENO_BIN" "$ZIG_BIN"
  exit 0
fi

mkdir -p "$TOOLS"
rm -f "$STAMP"
if [ ! -x "$DENO_BIN" ] || [ "$("$DENO_BIN" --version 2>/dev/null | awk 'NR == 1 {print $2}')" != "$DENO_VERSION" ]; then
  install_deno
fi
if [ ! -x "$ZIG_BIN" ] || [ "$("$ZIG_BIN" version 2>/dev/null)" != "$ZIG_VERSION" ]; then
  install_zig
fi
printf '%s\n' "$WANT" >"$STAMP.tmp.$$" && mv "$STAMP.tmp.$$" "$STAMP"
printf '%s\n%s\n' "$DENO_BIN" "$ZIG_BIN"
