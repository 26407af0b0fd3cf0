#!/usr/bin/env python3
"""Reference traces of the trained built-in models, for the runtime's parity test.

For each architecture's seed-1 run (training/out/runs/<arch>-s1/: model.safetensors + config.json),
the PyTorch reference of tests/reference/gen_pipeline_native.py (the normative model, not the
training implementation) runs a fixed prompt twice over the Q4_0 round trip of every tiled
matrix (the weights of the committed Q4_0 `.cflow`): with float activations, and with ggml's Q8_0
round trip of every projection's input (the runtime's integer-dot arithmetic). It writes
tests/fixtures/builtin/<arch>/trace.json:

    {"architecture", "tokens": [16 ids of the test split], "traces": {"q4_0": ..., "q4_0_q8_0": ...}}

each trace {"positions": [{"layers": [per-pass stream norms], "final_norm", "argmax"}],
"last_logits_f32_b64"} (the last position's logits only, to keep the fixtures small).

    PYTHONPATH=/tmp/pyhf python3 training/export_builtin.py
"""

from __future__ import annotations

import base64
import importlib.util
import json
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("ref", ROOT / "tests/reference/gen_pipeline_native.py")
ref = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ref)

NAMES = [
    "gemma4_parallel",
    "arch1_decoupled_streams",
    "arch2_4_combined",
    "arch2_4_sync",
    "arch3_pipeline_registers",
    "arch4_async_experts",
    "arch5_fixed_point",
]


def prompt_tokens() -> list[int]:
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(ROOT / "training/out/tokenizer.json"))
    text = (ROOT / "training/out/corpus/test.txt").read_text(encoding="utf-8")
    return tok.encode(text[:400]).ids[:16]


def trace(cfg: dict, w: dict, tokens: list[int], q8: bool) -> dict:
    m = ref.Model(cfg, ref.quantized_weights(w), quantize_activations=q8)
    with torch.no_grad():
        logits, final, records, _ = m.forward(tokens)
    norms = [{k: ref.l2(v) for k, v in rec.items()} for rec in records]
    fin = ref.l2(final)
    return {
        "positions": [
            {
                "layers": [{k: v[t] for k, v in rec.items()} for rec in norms],
                "final_norm": fin[t],
                "argmax": int(logits[t].argmax()),
            }
            for t in range(len(tokens))
        ],
        "last_logits_f32_b64": base64.b64encode(logits[-1].contiguous().numpy().astype("<f4").tobytes()).decode(),
    }


def main() -> None:
    torch.set_num_threads(2)
    tokens = prompt_tokens()
    for name in NAMES:
        run = ROOT / f"training/out/runs/{name}-s1"
        cfg = json.loads((run / "config.json").read_text())
        w = load_file(str(run / "model.safetensors"))
        doc = {
            "architecture": name,
            "tokens": tokens,
            "traces": {"q4_0": trace(cfg, w, tokens, False), "q4_0_q8_0": trace(cfg, w, tokens, True)},
        }
        out = ROOT / f"tests/fixtures/builtin/{name}"
        out.mkdir(parents=True, exist_ok=True)
        (out / "trace.json").write_text(json.dumps(doc, indent=1) + "\n")
        print(name, "argmax", [p["argmax"] for p in doc["traces"]["q4_0_q8_0"]["positions"]][:8])


if __name__ == "__main__":
    main()
