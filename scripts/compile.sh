#!/usr/bin/env bash
# Builds the single executable: `deno compile` of cli/main.ts with the kernel
# library embedded (--include) and the permissions baked in, from a clean
# staging folder that holds only the modules cli/main.ts imports (a
# node_modules or cache/ in the checkout would otherwise be embedded).
#
#   DENORT_BIN=/path/to/denort bash scripts/compile.sh [OUT]   (default OUT: ./cflow-bin)
#
# deno compile appends the program to a `denort` runtime, which it downloads
# from dl.deno.land; that host is not reachable from every machine and no
# package registry carries denort, so this script needs DENORT_BIN to name a
# denort of the pinned Deno version (2.9.6) and exits 3 without one.
#
# Baked-in permissions, broader than the launcher's per-command grants (an
# executable cannot scope them to the paths on each command line):
#   --allow-ffi    unscoped: the embedded library is extracted at run time
#                  to a temporary path that is not known when compiling
#   --allow-read   models and inputs anywhere
#   --allow-write  the user-level model cache (CFLOW_CACHE, else
#                  $XDG_CACHE_HOME/cflow, else ~/.cache/cflow: known only at
#                  run time, so not scoped) and convert's outputs anywhere
#   --allow-env    the variables cflow reads, nothing else
#   --allow-net    serve's address and pull's hosts
# Not granted: --allow-run, --allow-sys (beyond OS release, CPU count and available memory), --allow-import.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${1:-$ROOT/cflow-bin}"
case "$OUT" in /*) ;; *) OUT="$PWD/$OUT" ;; esac

if [ -z "${DENORT_BIN:-}" ]; then
  echo "compile: set DENORT_BIN to a denort 2.9.6 binary: deno compile cannot download its runtime here" >&2
  exit 3
fi
if [ ! -x "$DENORT_BIN" ]; then
  echo "compile: DENORT_BIN=$DENORT_BIN is not an executable file" >&2
  exit 3
fi

DENO="$(bash "$ROOT/scripts/bootstrap.sh" | sed -n 1p)"
bash "$ROOT/scripts/build-kernels.sh" --if-stale
LIB_REL="kernels-zig/zig-out/lib/libcflow_kernels.so"

STAGE="$(mktemp -d)"
trap 'rm -rf "$STAGE"' EXIT
# The local modules of the program, as Deno resolves them.
cd "$ROOT"
"$DENO" info --json cli/main.ts >"$STAGE/graph.json"
"$DENO" eval --quiet '
  const graph = JSON.parse(Deno.readTextFileSync(Deno.args[0]));
  const root = new URL(`file://${Deno.args[1]}/`).href;
  for (const m of graph.modules) {
    if (typeof m.specifier === "string" && m.specifier.startsWith(root)) {
      console.log(m.specifier.slice(root.length));
    }
  }' "$STAGE/graph.json" "$ROOT" >"$STAGE/files.txt"
mkdir -p "$STAGE/src"
while IFS= read -r f; do
  mkdir -p "$STAGE/src/$(dirname "$f")"
  cp "$ROOT/$f" "$STAGE/src/$f"
done <"$STAGE/files.txt"
cp "$ROOT/deno.json" "$ROOT/deno.lock" "$STAGE/src/"
mkdir -p "$STAGE/src/$(dirname "$LIB_REL")"
cp "$ROOT/$LIB_REL" "$STAGE/src/$LIB_REL"
mkdir -p "$STAGE/src/models"
cp -r "$ROOT/models/builtin" "$STAGE/src/models/builtin"

cd "$STAGE/src"
ENVS="CFLOW_KERNELS,CFLOW_THREADS,CFLOW_KERNEL_VARIANT,CFLOW_CPU_DISABLE,CFLOW_PANEL_PREFETCH,CFLOW_CACHE,CFLOW_OFFLINE"
ENVS="$ENVS,XDG_CACHE_HOME,HOME,NO_COLOR,HF_TOKEN,HUGGING_FACE_HUB_TOKEN,HF_ENDPOINT,HF_HUB_OFFLINE"
DENORT_BIN="$DENORT_BIN" "$DENO" compile --quiet --no-prompt \
  --include "$LIB_REL" \
  --include models/builtin \
  --allow-ffi --allow-read --allow-write --allow-net \
  --allow-env="$ENVS" --allow-sys=osRelease,cpus,systemMemoryInfo \
  --unstable-no-legacy-abort \
  --no-code-cache --v8-flags=--max-semi-space-size=1,--expose-gc \
  --output "$OUT.tmp.$$" cli/main.ts
mv "$OUT.tmp.$$" "$OUT"
echo "$OUT"
