#!/usr/bin/env bash
# Builds the shipped kernel library (ReleaseFast, per-ISA variants chosen at
# run time) into kernels-zig/zig-out/lib/libcflow_kernels.so.
#   --if-stale   only when the library is missing or older than its sources
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LIB="$ROOT/kernels-zig/zig-out/lib/libcflow_kernels.so"
if [ "${1:-}" = "--if-stale" ] && [ -f "$LIB" ] &&
  [ -z "$(find "$ROOT/kernels-zig/src" "$ROOT/kernels-zig/build.zig" "$ROOT/kernels-zig/build.zig.zon" -newer "$LIB" -print -quit)" ]; then
  exit 0
fi
ZIG="$(bash "$ROOT/scripts/bootstrap.sh" | tail -n1)"
echo "cflow: building the kernel library (zig build -Doptimize=ReleaseFast)" >&2
cd "$ROOT/kernels-zig"
"$ZIG" build -Doptimize=ReleaseFast
test -f "$LIB" || { echo "cflow: the build did not produce $LIB" >&2; exit 1; }
touch "$LIB"
