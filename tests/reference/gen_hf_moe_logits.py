#!/usr/bin/env python3
"""Generate the mixture-of-experts part of tests/fixtures/hf_logits/: tiny random-init float32 MoE
models, their reference logits and the expert routing transformers computes.

Same conventions as gen_hf_logits.py (the dense fixtures): each model is built by transformers
itself, saved with `save_pretrained(dir, safe_serialization=True)` (config.json +
model.safetensors, float32) and run once in eval mode with eager attention, on CPU with one thread,
on one fixed token sequence. logits.json holds the input ids and the float32 logits of every
position, little-endian, row-major [seq, vocab], base64-encoded. routing.json holds, per layer and
position, the experts the router selected (by descending weight) and the weights transformers
multiplies their outputs with.

- mixtral   MixtralForCausalLM, 4 experts top-2, softmax -> top-k -> renormalize, untied
- olmoe     OlmoeForCausalLM, 4 experts top-2, softmax -> top-k (no renormalization), full-width
            QK-norm, GQA 4/2, untied
- qwen2moe  Qwen2MoeForCausalLM, 4 experts top-2 (no renormalization) + sigmoid-gated shared
            expert (width 48), q/k/v biases, untied
- qwen3moe  Qwen3MoeForCausalLM, 4 experts top-2, renormalized, per-head QK-norm, head_dim 16 with
            hidden 32, tied

Every parameter is overwritten from a seeded generator as in the dense script (matrices
N(0, 0.2^2), biases 0.1 N(0,1), norm weights 1 + 0.1 N(0,1)), except the routers
(`mlp.gate.weight`), N(0, 0.35^2): router logits of standard deviation about 2, so routing is
decisive without the softmax saturating (at N(0,1) the 2nd..4th probabilities are often all below
1e-4 and nearly tied). For every layer and position the gaps between consecutive routing
probabilities down to the (k+1)-th must exceed 1e-3, and so must the logits' argmax margin; if a
seed fails, the next one (seed + 1000) is tried, so the fixtures do not sit on a routing or argmax
tie. The script also checks the per-expert tensors save_pretrained writes against the fused
parameters, and that loading the saved folder back reproduces the logits exactly.

Usage (Python is only needed to regenerate; nothing at run time or in CI depends on it):

    pip install --target /tmp/pyhf torch==2.15.0 transformers==5.24.0 safetensors==0.8.0 numpy==2.4.6
    PYTHONPATH=/tmp/pyhf python3 tests/reference/gen_hf_moe_logits.py

Deterministic: re-running with the same versions gives byte-identical files. The JSON files are laid
out by `./dev fmt`. The four MoE folders must stay under 1 MB together; the script fails otherwise.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import sys
from pathlib import Path

import torch
from safetensors import safe_open
from transformers import (
    MixtralConfig,
    MixtralForCausalLM,
    OlmoeConfig,
    OlmoeForCausalLM,
    Qwen2MoeConfig,
    Qwen2MoeForCausalLM,
    Qwen3MoeConfig,
    Qwen3MoeForCausalLM,
)

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "fixtures" / "hf_logits"
LIMIT_BYTES = 1000 * 1000

# 16 tokens < VOCAB: includes 0 and vocab-1 (127) and a repeat (42, 42).
INPUT_IDS = [2, 17, 127, 0, 100, 42, 42, 7, 88, 64, 1, 31, 120, 99, 3, 71]
VOCAB = 128
STD = 0.2
ROUTER_STD = 0.35
MIN_GAP = 1e-3
MAX_TRIES = 50


def randomize(model: torch.nn.Module, seed: int) -> None:
    """Overwrite every parameter (tied ones once) from a seeded generator, in registration order."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=g, dtype=torch.float32)
            if "norm" in name:
                p.copy_(1.0 + 0.1 * noise)
            elif name.endswith(".bias"):
                p.copy_(0.1 * noise)
            elif name.endswith(".mlp.gate.weight"):
                p.copy_(ROUTER_STD * noise)
            else:
                p.copy_(STD * noise)


def mixtral() -> torch.nn.Module:
    return MixtralForCausalLM(
        MixtralConfig(
            vocab_size=VOCAB,
            hidden_size=32,
            intermediate_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            num_local_experts=4,
            num_experts_per_tok=2,
            max_position_embeddings=128,
            initializer_range=STD,
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
            tie_word_embeddings=False,
            attn_implementation="eager",
        )
    )


def olmoe() -> torch.nn.Module:
    return OlmoeForCausalLM(
        OlmoeConfig(
            vocab_size=VOCAB,
            hidden_size=32,
            intermediate_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            num_experts=4,
            num_experts_per_tok=2,
            norm_topk_prob=False,
            max_position_embeddings=128,
            initializer_range=STD,
            # The default eos_token_id (50279) is outside the 128-token vocabulary.
            eos_token_id=None,
            tie_word_embeddings=False,
            attn_implementation="eager",
        )
    )


def qwen2moe() -> torch.nn.Module:
    return Qwen2MoeForCausalLM(
        Qwen2MoeConfig(
            vocab_size=VOCAB,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            moe_intermediate_size=32,
            shared_expert_intermediate_size=48,
            num_experts=4,
            num_experts_per_tok=2,
            norm_topk_prob=False,
            decoder_sparse_step=1,
            mlp_only_layers=[],
            qkv_bias=True,
            max_position_embeddings=128,
            initializer_range=STD,
            use_sliding_window=False,
            tie_word_embeddings=False,
            attn_implementation="eager",
        )
    )


def qwen3moe() -> torch.nn.Module:
    return Qwen3MoeForCausalLM(
        Qwen3MoeConfig(
            vocab_size=VOCAB,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=16,
            moe_intermediate_size=32,
            num_experts=4,
            num_experts_per_tok=2,
            norm_topk_prob=True,
            decoder_sparse_step=1,
            mlp_only_layers=[],
            max_position_embeddings=128,
            initializer_range=STD,
            use_sliding_window=False,
            tie_word_embeddings=True,
            attn_implementation="eager",
        )
    )


MODELS = [
    ("mixtral", mixtral, 201),
    ("olmoe", olmoe, 202),
    ("qwen2moe", qwen2moe, 203),
    ("qwen3moe", qwen3moe, 204),
]


def run(model: torch.nn.Module):
    """One forward pass; returns the logits [seq, vocab] and, per layer, the router's outputs."""
    captured: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []
    hooks = [
        layer.mlp.gate.register_forward_hook(
            lambda _m, _i, out: captured.append(tuple(t.detach().clone() for t in out))
        )
        for layer in model.model.layers
    ]
    try:
        with torch.no_grad():
            logits = model(torch.tensor([INPUT_IDS], dtype=torch.long)).logits[0]
    finally:
        for h in hooks:
            h.remove()
    assert len(captured) == len(model.model.layers)
    return logits, captured


def margins(logits: torch.Tensor, routers, top_k: int) -> tuple[float, float, float]:
    """(min argmax margin of the logits, min gap between the k-th and (k+1)-th routing probability,
    min gap between consecutive selected probabilities), over all positions and layers."""
    top2 = torch.topk(logits.double(), 2, dim=-1).values
    logit_margin = float((top2[:, 0] - top2[:, 1]).min())
    kgap, order_gap = float("inf"), float("inf")
    for router_logits, _scores, _indices in routers:
        probs = torch.softmax(router_logits.double(), dim=-1)
        sorted_probs = torch.sort(probs, dim=-1, descending=True).values
        kgap = min(kgap, float((sorted_probs[:, top_k - 1] - sorted_probs[:, top_k]).min()))
        for j in range(top_k - 1):
            order_gap = min(order_gap, float((sorted_probs[:, j] - sorted_probs[:, j + 1]).min()))
    return logit_margin, kgap, order_gap


def check_saved(model: torch.nn.Module, out: Path, logits: torch.Tensor) -> None:
    """save_pretrained in transformers 5 writes the experts in the per-expert checkpoint layout, not
    the fused 3-D parameters the module holds. Check the split the converter must undo: the fused
    gate_up_proj[e] is [gate; up] along dim 0 (forward: linear(x, gate_up_proj[e]).chunk(2)), and
    check that loading the folder back reproduces the logits exactly."""
    mixtral_layout = model.config.model_type == "mixtral"
    with safe_open(out / "model.safetensors", "pt") as f:
        saved = {k: f.get_tensor(k) for k in f.keys()}
    for i, layer in enumerate(model.model.layers):
        experts = layer.mlp.experts
        inter = experts.down_proj.shape[-1]
        for e in range(experts.gate_up_proj.shape[0]):
            if mixtral_layout:
                pre = f"model.layers.{i}.block_sparse_moe.experts.{e}"
                gate, up, down = (saved[f"{pre}.{w}.weight"] for w in ("w1", "w3", "w2"))
            else:
                pre = f"model.layers.{i}.mlp.experts.{e}"
                gate, up, down = (
                    saved[f"{pre}.{w}_proj.weight"] for w in ("gate", "up", "down")
                )
            assert torch.equal(gate, experts.gate_up_proj[e, :inter]), (pre, "gate")
            assert torch.equal(up, experts.gate_up_proj[e, inter:]), (pre, "up")
            assert torch.equal(down, experts.down_proj[e]), (pre, "down")
        router = "block_sparse_moe" if mixtral_layout else "mlp"
        assert torch.equal(saved[f"model.layers.{i}.{router}.gate.weight"], layer.mlp.gate.weight)
    assert not any(".gate_up_proj" in k for k in saved), "fused expert tensors were saved"
    reloaded = type(model).from_pretrained(out, attn_implementation="eager").eval()
    with torch.no_grad():
        again = reloaded(torch.tensor([INPUT_IDS], dtype=torch.long)).logits[0]
    assert torch.equal(again, logits), f"{out.name}: reloaded model gives different logits"


def build(name: str, make, seed: int) -> None:
    torch.manual_seed(seed)
    model = make()
    cfg = model.config
    tied = cfg.tie_word_embeddings
    assert (model.lm_head.weight is model.model.embed_tokens.weight) == tied, name
    model.eval()
    assert cfg._attn_implementation == "eager", cfg._attn_implementation
    top_k = cfg.num_experts_per_tok
    for attempt in range(MAX_TRIES):
        used = seed + 1000 * attempt
        randomize(model, used)
        logits, routers = run(model)
        logit_margin, kgap, order_gap = margins(logits, routers, top_k)
        if logit_margin > MIN_GAP and kgap > MIN_GAP and order_gap > MIN_GAP:
            break
    else:
        sys.exit(f"{name}: no seed in {MAX_TRIES} tries gives decisive routing and logits")
    print(
        f"{name}: seed {used}, min argmax margin {logit_margin:.4g}, "
        f"min k/k+1 routing gap {kgap:.4g}, min selected-order gap {order_gap:.4g}"
    )
    assert logits.dtype == torch.float32 and tuple(logits.shape) == (len(INPUT_IDS), VOCAB)

    out = OUT / name
    model.save_pretrained(out, safe_serialization=True)
    check_saved(model, out, logits)
    raw = logits.contiguous().numpy().astype("<f4").tobytes()
    doc = {
        "input_ids": INPUT_IDS,
        "shape": [len(INPUT_IDS), VOCAB],
        "logits_f32_b64": base64.b64encode(raw).decode("ascii"),
    }
    (out / "logits.json").write_text(json.dumps(doc, indent=2) + "\n")

    layers = []
    for i, (_router_logits, scores, indices) in enumerate(routers):
        assert scores.dtype == torch.float32 and tuple(scores.shape) == (len(INPUT_IDS), top_k)
        # torch.topk returns the selection sorted by descending probability; keep that order.
        assert bool((scores[:, :-1] >= scores[:, 1:]).all()), (name, i)
        layers.append(
            {
                "layer": i,
                "experts": [[int(e) for e in row] for row in indices.tolist()],
                # float32 values written as the shortest decimal that round-trips through float64.
                "weights": [[float(w) for w in row] for row in scores.tolist()],
            }
        )
    routing = {
        "input_ids": INPUT_IDS,
        # Mixtral's config maps num_experts to num_local_experts.
        "num_experts": int(cfg.num_experts),
        "num_experts_per_tok": top_k,
        # Mixtral has no norm_topk_prob setting; its router always renormalizes.
        "norm_topk_prob": bool(getattr(cfg, "norm_topk_prob", True)),
        "seed": used,
        "layers": layers,
    }
    (out / "routing.json").write_text(json.dumps(routing, indent=2) + "\n")


def main() -> None:
    torch.set_default_dtype(torch.float32)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    for name, *_ in MODELS:
        shutil.rmtree(OUT / name, ignore_errors=True)
    OUT.mkdir(parents=True, exist_ok=True)
    for spec in MODELS:
        build(*spec)
    dirs = [OUT / name for name, *_ in MODELS]
    # The repository's formatter owns the layout of committed JSON (`deno fmt --check` runs in CI).
    subprocess.run([str(ROOT / "dev"), "fmt", *map(str, dirs)], check=True, capture_output=True)
    total = sum(p.stat().st_size for d in dirs for p in d.rglob("*") if p.is_file())
    print(f"{OUT.relative_to(ROOT)}/{{{','.join(d.name for d in dirs)}}}: {total} bytes")
    if total > LIMIT_BYTES:
        sys.exit(f"MoE fixture folders are {total} bytes, over the {LIMIT_BYTES} limit")


if __name__ == "__main__":
    main()
