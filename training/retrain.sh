#!/usr/bin/env bash
# The one command from the Debian package to the committed files: train everything
# (run_all.sh: corpus, tokenizer, checks, nine runs, about 75 minutes on 2 cores), then export the
# seed-1 runs (export.sh: models/builtin/*.cflow, tests/fixtures/builtin/*/trace.json, the table).
#   bash training/retrain.sh
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/training/run_all.sh"
bash "$ROOT/training/export.sh"
