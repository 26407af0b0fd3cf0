#!/usr/bin/env bash
# Installs llama.cpp for the side-by-side benchmark (bench/vs_llama.ts): the npm packages
# node-llama-cpp@3.21.1 (JavaScript bindings) and @node-llama-cpp/linux-x64@3.21.1 (its
# prebuilt llama.cpp CPU binaries for x86-64 Linux, with AVX-512/VNNI kernels) into the
# git-ignored .tools/llamacpp/. `--omit=optional` keeps npm from pulling the CUDA and Vulkan
# builds (83 MB instead of 732 MB); `--ignore-scripts` skips node-llama-cpp's postinstall,
# which would try to build llama.cpp from source when it dislikes the prebuilt binaries (the
# benchmark only ever uses the prebuilt ones: getLlama({ gpu: false, build: "never" })).
# npm checks each download against the registry's integrity field; this script then checks
# that npm recorded the integrity pinned below, and that the binaries load.
#
# Reuses an install that has both packages at the pinned versions. Prints the folder to pass
# as NLC_DIR (it holds node_modules/) on success; needs node and npm.
#
# `--cpu NAME` (e.g. haswell) prints instead a sibling tree, .tools/llamacpp-cpu-NAME/, made of
# hard links to the install with one change: of llama.cpp's per-CPU backends
# (libggml-cpu-*.so, of which it loads the best one the CPU runs) only libggml-cpu-NAME.so is
# left. `bench:vs-llama --llama-cpu haswell` uses it to run llama.cpp's AVX2 build on a CPU
# that also has AVX-512, beside cflow's avx2 variant.
set -euo pipefail

CPU=""
case "${1:-}" in
  --cpu)
    CPU="${2:-}"
    [[ "$CPU" =~ ^[a-z0-9_]+$ ]] || { echo "install-llamacpp: error: --cpu needs a variant name like haswell" >&2; exit 2; }
    ;;
  "") ;;
  *) echo "install-llamacpp: error: unknown argument '$1' (only --cpu NAME)" >&2; exit 2 ;;
esac

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="$ROOT/.tools/llamacpp"
VERSION="3.21.1"
declare -A INTEGRITY=(
  ["node-llama-cpp"]="sha512-E3N0Ev2Va0wzydvXYFwM9Hvyo07PoWjt8T/9GMc43Cvt8YkV/NU/tYUgEMC1grTPv2o9PRjQi0G3Wb5P/awiMg=="
  ["@node-llama-cpp/linux-x64"]="sha512-Totj6RTDMGo3FoK2yNUaz/oGmZD0olAqTrRluFUWmu0kW2i9TOzHSW0OWCAiGkzRCVX0WsU2CyUQo/W2NYtdPA=="
)

say() { printf 'install-llamacpp: %s\n' "$*" >&2; }
die() { printf 'install-llamacpp: error: %s\n' "$*" >&2; exit 1; }
for tool in node npm; do
  command -v "$tool" >/dev/null 2>&1 || die "'$tool' is required but was not found on PATH"
done
[ "$(uname -s)-$(uname -m)" = "Linux-x86_64" ] || die "only x86-64 Linux is supported (prebuilt linux-x64 binaries)"

# Prints the folder to use: the install, or with --cpu its one-variant sibling (made once).
finish() {
  if [ -z "$CPU" ]; then
    printf '%s\n' "$DIR"
    return
  fi
  local bins="node_modules/@node-llama-cpp/linux-x64/bins/linux-x64"
  local out="$DIR-cpu-$CPU"
  if [ ! -f "$DIR/$bins/libggml-cpu-$CPU.so" ]; then
    local have
    have="$(find "$DIR/$bins" -maxdepth 1 -name 'libggml-cpu-*.so' -printf '%f\n' | sed 's/^libggml-cpu-//; s/\.so$//' | sort | tr '\n' ' ')"
    die "llama.cpp has no CPU variant '$CPU' (it has: $have)"
  fi
  if [ ! -f "$out/.complete" ]; then
    local stage="$out.tmp.$$"
    rm -rf "$stage"
    cp -al "$DIR" "$stage"
    find "$stage/$bins" -maxdepth 1 -name 'libggml-cpu-*.so' ! -name "libggml-cpu-$CPU.so" -delete
    cat >"$stage/load-check.mjs" <<'JS'
const index = new URL("./node_modules/node-llama-cpp/dist/index.js", import.meta.url);
const { getLlama } = await import(index.href);
const llama = await getLlama({ gpu: false, build: "never", logLevel: "error" });
console.error(`install-llamacpp: ${llama.systemInfo.trim()}`);
await llama.dispose();
JS
    node "$stage/load-check.mjs" >&2 || { rm -rf "$stage"; die "llama.cpp's '$CPU' variant does not load on this machine"; }
    rm -f "$stage/load-check.mjs"
    touch "$stage/.complete"
    rm -rf "$out"
    mv "$stage" "$out"
  fi
  printf '%s\n' "$out"
}

# Prints "ok" when $1/node_modules holds both packages at the pinned version and integrity.
check() {
  node -e '
    const fs = require("fs"), path = require("path");
    const [dir, version, ...pairs] = process.argv.slice(1);
    let lock;
    try { lock = JSON.parse(fs.readFileSync(path.join(dir, "node_modules/.package-lock.json"), "utf8")); }
    catch { process.stdout.write("no lock"); process.exit(0); }
    for (let i = 0; i < pairs.length; i += 2) {
      const entry = lock.packages["node_modules/" + pairs[i]];
      if (!entry) { process.stdout.write(pairs[i] + " missing"); process.exit(0); }
      if (entry.version !== version) { process.stdout.write(`${pairs[i]} is ${entry.version}`); process.exit(0); }
      if (entry.integrity !== pairs[i + 1]) {
        process.stdout.write(`${pairs[i]} integrity ${entry.integrity} is not the pinned ${pairs[i + 1]}`);
        process.exit(0);
      }
    }
    process.stdout.write("ok");
  ' "$1" "$VERSION" \
    node-llama-cpp "${INTEGRITY[node-llama-cpp]}" \
    @node-llama-cpp/linux-x64 "${INTEGRITY[@node-llama-cpp/linux-x64]}"
}

if [ "$(check "$DIR")" = "ok" ]; then
  finish
  exit 0
fi

say "installing node-llama-cpp $VERSION and @node-llama-cpp/linux-x64 $VERSION from the npm registry into $DIR"
mkdir -p "$ROOT/.tools"
STAGE="$ROOT/.tools/.llamacpp.tmp.$$"
trap 'rm -rf "$STAGE"' EXIT
rm -rf "$STAGE"; mkdir -p "$STAGE"
printf '{"name":"cflow-tools-llamacpp","private":true,"type":"module"}\n' >"$STAGE/package.json"
if ! npm install --prefix "$STAGE" --no-save --no-audit --no-fund --ignore-scripts --omit=optional \
    "node-llama-cpp@$VERSION" "@node-llama-cpp/linux-x64@$VERSION" >"$STAGE/npm.log" 2>&1; then
  cat "$STAGE/npm.log" >&2
  die "npm could not install node-llama-cpp@$VERSION (is the registry reachable? see npm's output above)"
fi
got="$(check "$STAGE")"
[ "$got" = "ok" ] || die "$got"
# The prebuilt CPU binaries must load on this machine. (From a file, not `node -e`:
# node-llama-cpp tests its binary in a forked node that inherits the parent's execArgv, so a
# forked `-e` would run the check again instead of the test.)
cat >"$STAGE/load-check.mjs" <<'JS'
const index = new URL("./node_modules/node-llama-cpp/dist/index.js", import.meta.url);
const { getLlama } = await import(index.href);
const llama = await getLlama({ gpu: false, build: "never", logLevel: "error" });
const release = JSON.stringify(llama.llamaCppRelease);
console.error(`install-llamacpp: llama.cpp ${release}, ${llama.buildType} build loads`);
await llama.dispose();
JS
if ! node "$STAGE/load-check.mjs" >>"$STAGE/npm.log" 2>&1; then
  cat "$STAGE/npm.log" >&2
  die "the prebuilt llama.cpp binaries of @node-llama-cpp/linux-x64 do not load on this machine"
fi
grep '^install-llamacpp:' "$STAGE/npm.log" >&2 || true
rm -f "$STAGE/npm.log" "$STAGE/load-check.mjs"
rm -rf "$DIR"
mv "$STAGE" "$DIR"
trap - EXIT
finish
