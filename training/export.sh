#!/usr/bin/env bash
# After run_all.sh: the seed-1 run of every architecture converted to Q4_0 `.cflow` into
# models/builtin/ (committed; `./cflow generate --model builtin:NAME`), their reference traces into
# tests/fixtures/builtin/ (the parity test), and the results table for docs/ARCHITECTURES.md into
# training/out/table.md (perplexities from results.json, bytes per token from `./cflow analyze`).
#   bash training/export.sh
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
export PYTHONPATH="${PYTHONPATH:-/tmp/pyhf}"
PY="${PYTHON:-python3}"
NAMES=(gemma4_parallel arch1_decoupled_streams arch2_4_combined arch2_4_sync arch3_pipeline_registers arch4_async_experts arch5_fixed_point)
mkdir -p models/builtin
for n in "${NAMES[@]}"; do
  ./cflow convert "training/out/runs/$n-s1" "models/builtin/$n.cflow" --quant q4_0 --force
done
"$PY" training/export_builtin.py
./dev fmt tests/fixtures/builtin >/dev/null
for n in "${NAMES[@]}"; do
  ./cflow analyze "models/builtin/$n.cflow" --json >"training/out/analyze-$n.json"
  ./cflow analyze --arch "$n" --hidden 128 --layers "$([ "$n" = arch5_fixed_point ] && echo 2 || echo 6)" \
    --heads 4 --kv-heads 4 --ffn 512 --experts 8 --top-k 2 --expert-ffn 128 --json \
    >"training/out/analyze-paper-$n.json"
done
"$PY" training/table.py >training/out/table.md
cat training/out/table.md
