#!/usr/bin/env python3
"""Add quant_logits.json to the five dense tests/fixtures/hf_logits/ models: what transformers
computes on Q8_0- and Q4_0-rounded weights, with and without Q8_0-rounded projection inputs.

The f32 fixtures (gen_hf_logits.py) say how far a quantized model's logits are from the float
model's. That distance belongs to the weights, not to the engine: any engine running the rounded
weights lands there. This script separates the two, using transformers' own model classes on the
committed checkpoints (`from_pretrained`, eager attention, eval, CPU, one thread):

- Computed in float64 (see below), every 2-D weight a `.cflow` stores as tiles (the q/k/v/o and gate/up/down projections, the token
  embedding table, an untied `lm_head`) is replaced by its ggml Q8_0 or Q4_0 round trip, exactly the
  values cflow's converter stores (`quant q8_0|q4_0`, `rule ggml`); norms and biases stay f32.
  Forward -> `weights_only`: the rounded model with float activations, as an engine that
  dequantizes weights to f32 would run it.
- Then a forward pre-hook on every `nn.Linear` passes its input through ggml's Q8_0 round trip
  (blocks of 32, scale f16(amax / 127), round half away from zero), which is what cflow and
  llama.cpp do before every integer dot product. Forward -> `engine`: the full logits, the
  arithmetic cflow performs with an f32 KV cache, computed by transformers.

Both quantized runs use float64: a Q8_0 rounding boundary amplifies any difference in summation
order into a whole quantum, and torch's float32 matmul crossed one where cflow's exact integer
block dots did not (qwen3 and gemma3 at Q4_0 moved by up to 2% of a logit). The float64 run is the
arithmetic done exactly; the logits are stored as float32.

quant_logits.json per model:

    {"input_ids": [...], "shape": [16, 300],
     "q8_0": {"weights_only_top1": [...], "weights_only_agree_f32": n,
              "engine_top1": [...], "engine_agree_f32": n, "engine_logits_f32_b64": "..."},
     "q4_0": {...},
     "q4_0_out_q8_0": {...}}   Q4_0 with the output matrix (tied: the embedding table) in Q8_0

`*_agree_f32` counts the positions whose top-1 equals the top-1 of the committed f32 logits.

Usage (Python only to regenerate; CI and the tests never run it):

    pip install --target /tmp/pyhf torch==2.15.0 transformers==5.24.0 safetensors==0.8.0 numpy==2.4.6
    PYTHONPATH=/tmp/pyhf python3 tests/reference/gen_hf_quant_logits.py

Deterministic: CPU, one thread; re-running with the same versions gives byte-identical files. The
quantizers are gen_pipeline_native.py's, which match gguf-py byte for byte.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gen_pipeline_native import q4_0_roundtrip, q8_0_roundtrip  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "hf_logits"
MODELS = ["llama_gqa_untied", "llama_gqa_tied", "qwen2", "qwen3", "gemma3"]
LIMIT_BYTES = 600 * 1000


def q8_0_weights(t: torch.Tensor) -> torch.Tensor:
    return q8_0_roundtrip(t)


def reference(folder: Path) -> tuple[list[int], torch.Tensor]:
    doc = json.loads((folder / "logits.json").read_text())
    raw = base64.b64decode(doc["logits_f32_b64"])
    logits = torch.frombuffer(bytearray(raw), dtype=torch.float32).view(*doc["shape"])
    return doc["input_ids"], logits


def load(folder: Path) -> torch.nn.Module:
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager")
    model.eval()
    return model


def run(model: torch.nn.Module, ids: list[int]) -> torch.Tensor:
    with torch.no_grad():
        return model(torch.tensor([ids], dtype=torch.long)).logits[0].contiguous()


def quantize(folder: Path, quant: str, ids: list[int], f32_top1: torch.Tensor) -> dict:
    model = load(folder)
    # "q4_0_out_q8_0": Q4_0, except the output matrix (the embedding table when tied) in Q8_0,
    # what `--output-quant auto` writes for an f32 source.
    rounding = q8_0_weights if quant == "q8_0" else q4_0_roundtrip
    output = model.get_output_embeddings().weight
    with torch.no_grad():
        seen = set()
        for name, p in model.named_parameters():  # tied weights are listed once
            if p.dim() != 2 or id(p) in seen:
                continue
            seen.add(id(p))
            assert "norm" not in name, name
            if quant == "q4_0_out_q8_0" and p is output:
                p.copy_(q8_0_weights(p))
            else:
                p.copy_(rounding(p))
    # In float64 from here: the rounded weights and Q8_0 inputs are exact in either precision, and
    # float64 sums keep the reference itself from moving an activation across a Q8_0 rounding
    # boundary (torch's float32 sums do, on qwen3 and gemma3 at Q4_0, by up to 2% of a logit).
    model = model.double()
    weights_only = run(model, ids).float()

    def hook(_module: torch.nn.Module, args: tuple) -> tuple:
        # cflow quantizes float32 activations.
        return (q8_0_roundtrip(args[0].float()).double(),) + tuple(args[1:])

    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    assert linears, folder
    for m in linears:
        m.register_forward_pre_hook(hook)
    engine = run(model, ids).float()
    w_top1 = weights_only.argmax(-1)
    e_top1 = engine.argmax(-1)
    return {
        "weights_only_top1": w_top1.tolist(),
        "weights_only_agree_f32": int((w_top1 == f32_top1).sum()),
        "engine_top1": e_top1.tolist(),
        "engine_agree_f32": int((e_top1 == f32_top1).sum()),
        "engine_logits_f32_b64": base64.b64encode(engine.numpy().astype("<f4").tobytes()).decode("ascii"),
    }


def main() -> None:
    torch.set_default_dtype(torch.float32)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    total = 0
    for name in MODELS:
        folder = FIXTURES / name
        ids, f32 = reference(folder)
        # The committed checkpoint reproduces the committed logits bit for bit.
        assert torch.equal(run(load(folder), ids), f32), name
        f32_top1 = f32.argmax(-1)
        doc = {"input_ids": ids, "shape": list(f32.shape)}
        for quant in ("q8_0", "q4_0", "q4_0_out_q8_0"):
            doc[quant] = quantize(folder, quant, ids, f32_top1)
            q = doc[quant]
            print(
                f"{name} {quant}: top-1 vs f32, weights only {q['weights_only_agree_f32']}/{len(ids)}, "
                f"with Q8_0 inputs {q['engine_agree_f32']}/{len(ids)}"
            )
        path = folder / "quant_logits.json"
        path.write_text(json.dumps(doc, indent=2) + "\n")
    subprocess.run([str(ROOT / "dev"), "fmt", *(str(FIXTURES / n / "quant_logits.json") for n in MODELS)], check=True, capture_output=True)
    total = sum((FIXTURES / n / "quant_logits.json").stat().st_size for n in MODELS)
    print(f"quant_logits.json: {total} bytes in all")
    if total > LIMIT_BYTES:
        sys.exit(f"quant_logits.json files are {total} bytes, over the {LIMIT_BYTES} limit")


if __name__ == "__main__":
    main()
