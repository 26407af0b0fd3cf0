#!/usr/bin/env bash
# deno task bench:mac-ceiling [--threads 1,2] [--reps 3] [--iters N]
# Builds bench/mac_ceiling.zig twice for this CPU, never with -mcpu=native:
# the AVX2 sequences for x86-64-v3 (as the `avx2` variant is compiled), and,
# where the CPU has AVX-512 (and VNNI), the AVX-512 ones for x86-64-v4
# (+avx512vnni); runs each with the project's Zig.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
ZIG="$ROOT/.tools/zig/ziglang/zig"
[ -x "$ZIG" ] || bash "$ROOT/scripts/bootstrap.sh" >/dev/null
flags="$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null || true)"
has() { case " $flags " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
if [ "$(uname -m)" != x86_64 ] || ! { has avx2 && has fma && has bmi2; }; then
  echo "mac-ceiling: needs an x86-64 CPU with AVX2 (every sequence is x86)" >&2
  exit 1
fi
echo "cpu: $(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
echo "AVX2 sequences, built for -mcpu=x86_64_v3:"
"$ZIG" run -OReleaseFast -mcpu=x86_64_v3 "$ROOT/bench/mac_ceiling.zig" -- --isa avx2 "$@"
if has avx512f && has avx512bw && has avx512vl && has avx512dq; then
  mcpu=x86_64_v4
  has avx512_vnni && mcpu=x86_64_v4+avx512vnni
  echo "AVX-512 sequences, built for -mcpu=$mcpu:"
  "$ZIG" run -OReleaseFast -mcpu="$mcpu" "$ROOT/bench/mac_ceiling.zig" -- --isa avx512 "$@"
fi
