#!/usr/bin/env python3
"""Generate tests/fixtures/hf/: two tiny random-init Hugging Face checkpoints saved by transformers.

- llama/  LlamaForCausalLM, bfloat16, one model.safetensors, untied lm_head
- qwen2/  Qwen2ForCausalLM, float16, sharded (model-0000N-of-0000M.safetensors plus
          model.safetensors.index.json), tied embeddings (no lm_head.weight is saved)

and expected.json: for every tensor its shard, dtype, shape, the first 4 values and the sum of
all values (as f32 widened to f64, summed in float64 by numpy), and the sha256 of the tensor's
values as little-endian f32, read back from the saved files with `safetensors.safe_open`.
The Deno tests (formats/hf/hf_fixture_test.ts) parse both checkpoints and compare.

Usage (Python is only needed to regenerate; nothing at run time depends on it):

    pip install --target /tmp/pyhf torch==2.15.0 transformers==5.24.0 safetensors==0.8.0 numpy==2.4.6
    PYTHONPATH=/tmp/pyhf python3 tests/reference/gen_hf_tiny_checkpoint.py

Deterministic: re-running with the same versions gives identical files (torch.manual_seed,
CPU only). expected.json is laid out by the repository's formatter (`./dev fmt`). Keep the output small: tests/fixtures/hf/ is committed and must stay under 300 KB.
"""

from __future__ import annotations

import hashlib
import json
import platform
import shutil
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import numpy as np
import torch
from safetensors import safe_open
from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "fixtures" / "hf"
LIMIT_BYTES = 300 * 1024


def perturb(model: torch.nn.Module, seed: int) -> None:
    """Random-init leaves norm weights at 1 and biases at 0; make them distinguishable."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(1 + 0.1 * torch.randn(p.shape, generator=g))
            elif name.endswith(".bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=g))


def build_llama(out: Path) -> None:
    torch.manual_seed(1234)
    config = LlamaConfig(
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=320,
        max_position_embeddings=256,
        initializer_range=0.2,
        rms_norm_eps=1e-5,
        tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(config)
    perturb(model, 1)
    model = model.to(torch.bfloat16)
    model.save_pretrained(out, safe_serialization=True)


def build_qwen2(out: Path) -> None:
    torch.manual_seed(5678)
    config = Qwen2Config(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=1,
        vocab_size=320,
        max_position_embeddings=512,
        initializer_range=0.2,
        rms_norm_eps=1e-6,
        tie_word_embeddings=True,
    )
    model = Qwen2ForCausalLM(config)
    perturb(model, 2)
    model = model.to(torch.float16)
    model.save_pretrained(out, safe_serialization=True, max_shard_size="24KB")


def describe(model_dir: Path) -> dict:
    index_path = model_dir / "model.safetensors.index.json"
    if index_path.exists():
        weight_map = json.loads(index_path.read_text())["weight_map"]
    else:
        with safe_open(model_dir / "model.safetensors", framework="pt") as f:
            weight_map = {name: "model.safetensors" for name in f.keys()}
    tensors = {}
    for name in sorted(weight_map):
        shard = weight_map[name]
        with safe_open(model_dir / shard, framework="pt") as f:
            t = f.get_tensor(name)
        values = t.to(torch.float32).numpy().astype("<f4")
        tensors[name] = {
            "shard": shard,
            "dtype": {torch.bfloat16: "BF16", torch.float16: "F16", torch.float32: "F32"}[t.dtype],
            "shape": list(t.shape),
            "first4": [float(v) for v in values.reshape(-1)[:4]],
            "sum": float(values.astype(np.float64).sum()),
            "f32_sha256": hashlib.sha256(values.tobytes()).hexdigest(),
        }
    files = {
        p.name: {"bytes": p.stat().st_size, "sha256": hashlib.sha256(p.read_bytes()).hexdigest()}
        for p in sorted(model_dir.iterdir())
    }
    return {"files": files, "tensors": tensors}


def pretty(value, indent: str = "") -> str:
    """Objects one key per line, arrays of numbers on one line (as `deno fmt` leaves them)."""
    if isinstance(value, dict):
        inner = indent + "  "
        items = [f"{inner}{json.dumps(k)}: {pretty(v, inner)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + indent + "}"
    return json.dumps(value, separators=(", ", ": "))


def main() -> None:
    torch.use_deterministic_algorithms(True)
    for sub in ("llama", "qwen2"):
        shutil.rmtree(OUT / sub, ignore_errors=True)
    OUT.mkdir(parents=True, exist_ok=True)
    build_llama(OUT / "llama")
    build_qwen2(OUT / "qwen2")
    expected = {
        "generator": "tests/reference/gen_hf_tiny_checkpoint.py",
        "versions": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "transformers": version("transformers"),
            "safetensors": version("safetensors"),
            "numpy": np.__version__,
        },
        "models": {sub: describe(OUT / sub) for sub in ("llama", "qwen2")},
    }
    (OUT / "expected.json").write_text(pretty(expected) + "\n")
    # The repository's formatter owns the layout of committed JSON (`deno fmt --check` runs in CI).
    subprocess.run([str(ROOT / "dev"), "fmt", str(OUT)], check=True, capture_output=True)
    total = sum(p.stat().st_size for p in OUT.rglob("*") if p.is_file())
    print(f"wrote {OUT} ({total} bytes)", file=sys.stderr)
    if total > LIMIT_BYTES:
        sys.exit(f"fixture is {total} bytes, over the {LIMIT_BYTES}-byte budget")


if __name__ == "__main__":
    main()
