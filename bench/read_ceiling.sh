#!/usr/bin/env bash
# deno task bench:read-ceiling [--threads 1,2] [--mib 1024] [--reps 3]
# Builds bench/read_ceiling.zig for this CPU's x86-64 level (v4 with
# AVX-512, v3 with AVX2 and FMA, the baseline otherwise; the named level, not
# -mcpu=native) with the project's Zig, and runs it.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
ZIG="$ROOT/.tools/zig/ziglang/zig"
[ -x "$ZIG" ] || bash "$ROOT/scripts/bootstrap.sh" >/dev/null
flags="$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null || true)"
has() { case " $flags " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
mcpu=baseline
if [ "$(uname -m)" = x86_64 ]; then
  if has avx512f && has avx512bw && has avx512vl && has avx512dq; then
    mcpu=x86_64_v4
  elif has avx2 && has fma && has bmi2; then
    mcpu=x86_64_v3
  fi
fi
echo "cpu: $(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'); built for -mcpu=$mcpu"
exec "$ZIG" run -OReleaseFast -mcpu="$mcpu" "$ROOT/bench/read_ceiling.zig" -- "$@"
