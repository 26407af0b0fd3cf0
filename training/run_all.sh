#!/usr/bin/env bash
# Retrain everything (training/README.md): corpus -> tokenizer -> tokenizer check (cflow's loader)
# -> check_model (training model == PyTorch reference) -> the seven architectures with seed 1, then
# arch1_decoupled_streams and arch2_4_combined with seed 2, one after another, into
# training/out/runs/<arch>-s<seed>/ -> training/out/results.json.
#   bash training/run_all.sh
# Python: PYTHONPATH (default /tmp/pyhf) must give torch 2.15.0, tokenizers 0.23.3, safetensors 0.8.0.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
export PYTHONPATH="${PYTHONPATH:-/tmp/pyhf}"
PY="${PYTHON:-python3}"
OUT=training/out
mkdir -p "$OUT/runs"
echo "== $(date -u +%FT%TZ) corpus"
"$PY" training/corpus.py --out "$OUT/corpus"
echo "== $(date -u +%FT%TZ) tokenizer"
"$PY" training/tokenizer.py --corpus "$OUT/corpus" --out "$OUT/tokenizer.json"
"$PY" training/check_tokenizer.py "$OUT"
./dev run --allow-read training/check_tokenizer.ts "$OUT"
echo "== $(date -u +%FT%TZ) check_model"
"$PY" training/check_model.py
RUNS=(
  gemma4_parallel:1 arch1_decoupled_streams:1 arch2_4_combined:1 arch2_4_sync:1
  arch3_pipeline_registers:1 arch4_async_experts:1 arch5_fixed_point:1
  arch1_decoupled_streams:2 arch2_4_combined:2
)
for r in "${RUNS[@]}"; do
  arch="${r%%:*}"
  seed="${r##*:}"
  echo "== $(date -u +%FT%TZ) train $arch seed $seed"
  "$PY" training/train.py --arch "$arch" --seed "$seed" --out "$OUT/runs/$arch-s$seed"
done
"$PY" - "$OUT" <<'PYEOF'
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
results = [json.loads(p.read_text()) for p in sorted((out / "runs").glob("*/result.json"))]
(out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
print(f"{'run':34s} {'params':>9s} {'train':>7s} {'valid ppl':>10s} {'test ppl':>9s} {'s':>6s}")
for r in results:
    print(f"{r['arch'] + '-s' + str(r['seed']):34s} {r['params']:9d} {r['train_loss']:7.3f} {r['valid_ppl']:10.2f} {r['test_ppl']:9.2f} {r['seconds']:6.0f}")
PYEOF
echo "== $(date -u +%FT%TZ) done: $OUT/results.json"
