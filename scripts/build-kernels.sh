#!/usr/bin/env bash
# Builds the shipped kernel library (ReleaseFast, per-ISA variants chosen at
# run time) into kernels-zig/zig-out/lib/libcflow_kernels.so, and the
# WebAssembly fallback (the same kernels for wasm32 + simd128, used where FFI
# is not permitted) into kernels-zig/zig-out/wasm/cflow_kernels.wasm.
#   --if-stale   only when either is missing or older than its sources
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LIB="$ROOT/kernels-zig/zig-out/lib/libcflow_kernels.so"
WASM="$ROOT/kernels-zig/zig-out/wasm/cflow_kernels.wasm"
SOURCES=("$ROOT/kernels-zig/src" "$ROOT/kernels-zig/build.zig" "$ROOT/kernels-zig/build.zig.zon" "$ROOT/kernels-zig/exports.map" "$ROOT/kernels-zig/exports_aarch64.map")
fresh() {
  [ -f "$1" ] && [ -z "$(find "${SOURCES[@]}" -newer "$1" -print -quit)" ]
}
if [ "${1:-}" = "--if-stale" ] && fresh "$LIB" && fresh "$WASM"; then
  exit 0
fi
ZIG="$(bash "$ROOT/scripts/bootstrap.sh" | tail -n1)"
echo "cflow: building the kernel library (zig build -Doptimize=ReleaseFast, zig build wasm)" >&2
cd "$ROOT/kernels-zig"
"$ZIG" build -Doptimize=ReleaseFast
"$ZIG" build wasm
test -f "$LIB" || { echo "cflow: the build did not produce $LIB" >&2; exit 1; }
test -f "$WASM" || { echo "cflow: the build did not produce $WASM" >&2; exit 1; }
touch "$LIB" "$WASM"
