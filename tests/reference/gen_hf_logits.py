#!/usr/bin/env python3
"""Generate tests/fixtures/hf_logits/: tiny random-init float32 models and their reference logits.

Five models, each built by transformers itself, saved with `save_pretrained(dir,
safe_serialization=True)` (config.json + model.safetensors, float32) and run once in eval mode with
eager attention on one fixed token sequence. logits.json holds the input ids and the float32 logits
of every position, little-endian, row-major [seq, vocab], base64-encoded.

- llama_gqa_untied  LlamaForCausalLM, GQA 4/2, untied lm_head, default RoPE
- llama_gqa_tied    LlamaForCausalLM, GQA 4/2, tied embeddings, Llama 3 RoPE scaling
- qwen2             Qwen2ForCausalLM, q/k/v biases, GQA 4/2, tied embeddings
- qwen3             Qwen3ForCausalLM, QK-norm, head_dim 16 with hidden 32 (4 heads: 64 != 32), tied
- gemma3            Gemma3ForCausalLM (Gemma3TextConfig), 6 layers (5 sliding, window 4, then 1
                    global), MQA 4/1, QK-norm, query_pre_attn_scalar 24 != head_dim 16, linear RoPE
                    scaling on the global layer, final logit softcapping 30, tied embeddings

Random init leaves norm weights at 1 (Gemma: 0, used as 1 + w) and biases at 0, so every parameter
is overwritten here from a seeded generator: matrices and embeddings N(0, 0.2^2) (0.2 is the
config's initializer_range), biases 0.1 N(0,1), norm weights 1 + 0.1 N(0,1) (Gemma: 0.1 N(0,1)),
except Gemma's final norm, 3 + 0.1 N(0,1) (a 4x gain), which makes the logits large enough for the
softcap 30 tanh to bend them measurably.

Usage (Python is only needed to regenerate; nothing at run time or in CI depends on it):

    pip install --target /tmp/pyhf torch==2.15.0 transformers==5.24.0 safetensors==0.8.0 numpy==2.4.6
    PYTHONPATH=/tmp/pyhf python3 tests/reference/gen_hf_logits.py

Deterministic: CPU only, one thread, seeded generators; re-running with the same versions gives
byte-identical files. The JSON files are laid out by the repository's formatter (`./dev fmt`), which
CI checks. The folder is committed and must stay under 2 MB; the script fails if it grows past that.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import sys
from pathlib import Path

import torch
from transformers import (
    Gemma3ForCausalLM,
    Gemma3TextConfig,
    LlamaConfig,
    LlamaForCausalLM,
    Qwen2Config,
    Qwen2ForCausalLM,
    Qwen3Config,
    Qwen3ForCausalLM,
)

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "fixtures" / "hf_logits"
LIMIT_BYTES = 2 * 1000 * 1000

# 16 tokens: longer than the Gemma sliding window (4); includes 0 and vocab-1 (299) and a repeat.
INPUT_IDS = [2, 17, 299, 0, 150, 42, 42, 7, 255, 128, 1, 64, 200, 99, 3, 271]
VOCAB = 300
STD = 0.2


def randomize(model: torch.nn.Module, seed: int, gemma: bool) -> None:
    """Overwrite every parameter (tied ones once) from a seeded generator, in registration order."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=g, dtype=torch.float32)
            if "norm" in name:
                if gemma and name == "model.norm.weight":
                    p.copy_(3.0 + 0.1 * noise)
                elif gemma:
                    p.copy_(0.1 * noise)
                else:
                    p.copy_(1.0 + 0.1 * noise)
            elif name.endswith(".bias"):
                p.copy_(0.1 * noise)
            else:
                p.copy_(STD * noise)


def llama_untied() -> torch.nn.Module:
    return LlamaForCausalLM(
        LlamaConfig(
            vocab_size=VOCAB,
            hidden_size=64,
            intermediate_size=160,
            num_hidden_layers=3,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=128,
            initializer_range=STD,
            rms_norm_eps=1e-5,
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
            tie_word_embeddings=False,
            attn_implementation="eager",
        )
    )


def llama_tied() -> torch.nn.Module:
    # original_max_position_embeddings 32: with head_dim 16 and theta 10000 the wavelengths are
    # 6.28, 19.9, 62.8, ... so the three Llama 3 regimes all occur (6.28 < 32/4 kept, 19.9 in
    # [8, 32] smoothed, >= 62.8 divided by 8).
    return LlamaForCausalLM(
        LlamaConfig(
            vocab_size=VOCAB,
            hidden_size=64,
            intermediate_size=160,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=128,
            initializer_range=STD,
            rms_norm_eps=1e-5,
            rope_parameters={
                "rope_type": "llama3",
                "rope_theta": 10000.0,
                "factor": 8.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 32,
            },
            tie_word_embeddings=True,
            attn_implementation="eager",
        )
    )


def qwen2() -> torch.nn.Module:
    return Qwen2ForCausalLM(
        Qwen2Config(
            vocab_size=VOCAB,
            hidden_size=32,
            intermediate_size=96,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=128,
            initializer_range=STD,
            rms_norm_eps=1e-6,
            rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
            tie_word_embeddings=True,
            use_sliding_window=False,
            attn_implementation="eager",
        )
    )


def qwen3() -> torch.nn.Module:
    return Qwen3ForCausalLM(
        Qwen3Config(
            vocab_size=VOCAB,
            hidden_size=32,
            intermediate_size=96,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=16,
            max_position_embeddings=128,
            initializer_range=STD,
            rms_norm_eps=1e-6,
            rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
            tie_word_embeddings=True,
            use_sliding_window=False,
            attn_implementation="eager",
        )
    )


def gemma3() -> torch.nn.Module:
    return Gemma3ForCausalLM(
        Gemma3TextConfig(
            vocab_size=VOCAB,
            hidden_size=32,
            intermediate_size=96,
            num_hidden_layers=6,
            num_attention_heads=4,
            num_key_value_heads=1,
            head_dim=16,
            query_pre_attn_scalar=24,
            sliding_window=4,
            max_position_embeddings=128,
            initializer_range=STD,
            rms_norm_eps=1e-6,
            hidden_activation="gelu_pytorch_tanh",
            rope_parameters={
                "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1000000.0},
            },
            final_logit_softcapping=30.0,
            attn_logit_softcapping=None,
            tie_word_embeddings=True,
            attn_implementation="eager",
        )
    )


MODELS = [
    ("llama_gqa_untied", llama_untied, 101, False),
    ("llama_gqa_tied", llama_tied, 102, False),
    ("qwen2", qwen2, 103, False),
    ("qwen3", qwen3, 104, False),
    ("gemma3", gemma3, 105, True),
]


def build(name: str, make, seed: int, is_gemma: bool) -> None:
    torch.manual_seed(seed)
    model = make()
    tied = model.config.tie_word_embeddings
    assert (model.lm_head.weight is model.model.embed_tokens.weight) == tied, name
    randomize(model, seed, is_gemma)
    model.eval()
    assert model.config._attn_implementation == "eager", model.config._attn_implementation
    out = OUT / name
    model.save_pretrained(out, safe_serialization=True)
    with torch.no_grad():
        logits = model(torch.tensor([INPUT_IDS], dtype=torch.long)).logits[0]
    assert logits.dtype == torch.float32 and tuple(logits.shape) == (len(INPUT_IDS), VOCAB)
    raw = logits.contiguous().numpy().astype("<f4").tobytes()
    doc = {
        "input_ids": INPUT_IDS,
        "shape": [len(INPUT_IDS), VOCAB],
        "logits_f32_b64": base64.b64encode(raw).decode("ascii"),
    }
    (out / "logits.json").write_text(json.dumps(doc, indent=2) + "\n")


def main() -> None:
    torch.set_default_dtype(torch.float32)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    if OUT.exists():
        for name, *_ in MODELS:
            shutil.rmtree(OUT / name, ignore_errors=True)
    OUT.mkdir(parents=True, exist_ok=True)
    for spec in MODELS:
        build(*spec)
    # The repository's formatter owns the layout of committed JSON (`deno fmt --check` runs in CI).
    subprocess.run([str(ROOT / "dev"), "fmt", str(OUT)], check=True, capture_output=True)
    # This script's own folders only: gen_hf_moe_logits.py writes its own, with its own cap.
    total = sum(p.stat().st_size for name, *_ in MODELS for p in (OUT / name).rglob("*") if p.is_file())
    print(f"{OUT.relative_to(ROOT)} (dense models): {total} bytes")
    if total > LIMIT_BYTES:
        sys.exit(f"the dense fixtures are {total} bytes, over the {LIMIT_BYTES} limit")


if __name__ == "__main__":
    main()
