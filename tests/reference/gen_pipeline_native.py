#!/usr/bin/env python3
"""Generate tests/fixtures/pipeline_native/: the PyTorch reference of the pipeline-native family.

A small, self-contained torch implementation of every building block and every `combine_style` of
docs/ARCHITECTURES.md ("The pipeline-native family"), run on tiny random float32 checkpoints in
the format of "Checkpoints (safetensors)". Eight fixtures, one per name of the doc's Table 4.1 plus
one without experts:

- gemma4_parallel           style 0 ParallelSqrt2, GeGLU, embedding scale, tied, softcap 30
- arch1_decoupled_streams   style 3 DecoupledStreams (merge every 3), GeGLU, V-norm
- arch2_4_combined          style 1 DelayedSum, dense_delay 1, expert_delay 2, GeGLU
- arch2_4_sync              style 1 DelayedSum, dense_delay 1, expert_delay 0, SiLU, V-norm, tied
- arch3_pipeline_registers  style 4 PipelineRegisters, GeGLU, embedding scale
- arch4_async_experts       style 2 AsyncExperts, expert_delay 2, SiLU
- arch5_fixed_point         style 5 FixedPoint, 2 unique blocks x 3 passes, GeGLU, V-norm, tied
- arch2_4_combined_dense    arch2_4_combined with num_experts 0 (the no-MoE DelayedSum path),
                            GeGLU, embedding scale

Geometry: hidden 32, 4 heads / 2 KV heads of head_dim 8, intermediate 64, 4 experts top-2 of width
32, vocab 128, 6 layers (arch5: 2 blocks), eps 1e-6, RoPE theta 10000.

Each fixture folder holds config.json (exactly the doc's fields), model.safetensors (float32, the
doc's tensor names), trace.json, trace_q4_0.json and trace_q4_0_q8_0.json (below):

    {"architecture": config name, "fixture": folder name, "tokens": [8 ids],
     "seed": the weight seed used, "shape": [seq, vocab],
     "positions": [{"layers": [record per effective layer], "final_norm": ..., "argmax": ...}],
     "logits_f32_b64": base64 of float32 little-endian [seq, vocab] row-major}

A layer record holds the L2 norms of that position's stream vectors after the effective layer
(after that layer's merge, before the final flush): styles 0-2 {"x"}, style 3 {"s_a", "s_f"},
style 4 {"A", "X"}, style 5 {"x"} per pass (blocks x passes records). `final_norm` is the L2 norm
of the vector fed to the final RMSNorm (after the flush of pending expert outputs / the last
merge). Norms are computed in float64 from the float32 vector and rounded to float32; JSON holds
the repr of that value.

Weights (one seeded generator, tensors drawn in the order they are listed in `param_specs`):
embedding and matrices N(0, 0.2^2), except the residual-writing projections (attn.o, ffn.down,
expert down) N(0, 0.1^2) so that residual norms stay within a small factor of the embedding norm
over 6 (18) layers; norm weights 1 + 0.1 N(0,1); the final norm of the softcapped fixture
4 + 0.1 N(0,1) (a 4x gain) so that the softcap 30 bends its logits measurably; routers
N(0, 0.25^2). The script asserts, for every position: an argmax margin > 1e-3 over the runner-up
(> 1e-2 for the Q4_0-weight model), and at every MoE evaluation of both the f32 and the Q4_0-weight
model a probability margin > 5e-3 between the k-th and (k+1)-th expert (so that the Q8_0 noise of
a quantized runtime cannot flip a selection); if any fails it draws the whole model again with the
next seed (the seed used is in trace.json).

Two more traces, same layout, for Q4_0 files: trace_q4_0.json, the same forward over the Q4_0
round trip (ggml's rule) of every tiled matrix, i.e. the weights a Q4_0 `.cflow` holds; and
trace_q4_0_q8_0.json, that forward with ggml's Q8_0 round trip of every projection's input as well
(not the router's), the arithmetic of a runtime that multiplies in integers.

Self-check: arch2_4_combined, arch4_async_experts, arch2_4_sync (V-norm, tied, SiLU) and
arch2_4_combined_dense (no MoE, embedding scale) are also computed token by token with an explicit
per-layer KV cache, a ring of past residuals (dense_delay) and a ring of pending expert outputs
(expert_delay), as in the report's driver (4.4); the two must agree within 1e-5 relative.

Usage (Python is only needed to regenerate; nothing at run time or in CI depends on it):

    pip install --target /tmp/pyhf torch==2.15.0 safetensors==0.8.0 numpy==2.4.6
    PYTHONPATH=/tmp/pyhf python3 tests/reference/gen_pipeline_native.py

Deterministic: CPU only, one thread, seeded generators; re-running with the same versions gives
byte-identical files. The JSON files are laid out by the repository's formatter (`./dev fmt`), which
CI checks. The folder is committed and must stay under 4 MB; the script fails if it grows past that.
"""

from __future__ import annotations

import base64
import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import save_file

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "fixtures" / "pipeline_native"
LIMIT_BYTES = 4_500_000

TOKENS = [1, 17, 42, 99, 5, 63, 127, 8]
MARGIN = 1e-3
# Routing margin (k-th minus (k+1)-th probability) both the f32 and the Q4_0-weight model must
# clear at every layer and position, so that a runtime whose activations are quantized (Q8_0)
# selects the same experts: a near-tie would flip under that noise and dominate any comparison.
ROUTE_MARGIN = 5e-3

FLAG_EMBED_SCALE = 1
FLAG_VNORM = 2
FLAG_TIED = 4
FLAG_GEGLU = 8

# name: (combine_style, dense_delay, expert_delay, style_param) -- the doc's Table 4.1.
TABLE = {
    "gemma4_parallel": (0, 0, 0, 0),
    "arch1_decoupled_streams": (3, 0, 0, 3),
    "arch2_4_combined": (1, 1, 2, 0),
    "arch2_4_sync": (1, 1, 0, 0),
    "arch3_pipeline_registers": (4, 0, 0, 0),
    "arch4_async_experts": (2, 0, 2, 0),
    "arch5_fixed_point": (5, 0, 0, 3),
}

# fixture folder: (architecture, feature_flags, final_logit_softcap, n_layers, n_experts, base seed)
FIXTURES = [
    ("gemma4_parallel", "gemma4_parallel", FLAG_GEGLU | FLAG_EMBED_SCALE | FLAG_TIED, 30.0, 6, 4, 1000),
    ("arch1_decoupled_streams", "arch1_decoupled_streams", FLAG_GEGLU | FLAG_VNORM, 0.0, 6, 4, 2000),
    ("arch2_4_combined", "arch2_4_combined", FLAG_GEGLU, 0.0, 6, 4, 3000),
    ("arch2_4_sync", "arch2_4_sync", FLAG_VNORM | FLAG_TIED, 0.0, 6, 4, 4000),
    ("arch3_pipeline_registers", "arch3_pipeline_registers", FLAG_GEGLU | FLAG_EMBED_SCALE, 0.0, 6, 4, 5000),
    ("arch4_async_experts", "arch4_async_experts", 0, 0.0, 6, 4, 6000),
    ("arch5_fixed_point", "arch5_fixed_point", FLAG_GEGLU | FLAG_VNORM | FLAG_TIED, 0.0, 2, 4, 7000),
    ("arch2_4_combined_dense", "arch2_4_combined", FLAG_GEGLU | FLAG_EMBED_SCALE, 0.0, 6, 0, 8000),
]

HIDDEN = 32
HEADS = 4
KV_HEADS = 2
HEAD_DIM = 8
INTER = 64
TOP_K = 2
EXPERT_INTER = 32
VOCAB = 128
EPS = 1e-6
THETA = 10000.0
MAX_POS = 256

STD = 0.2
STD_OUT = 0.1
STD_ROUTER = 0.25


def make_config(arch: str, flags: int, softcap: float, n_layers: int, n_experts: int) -> dict:
    style, dd, ed, sp = TABLE[arch]
    return {
        "model_type": "pipeline_native",
        "architecture": arch,
        "hidden_size": HIDDEN,
        "num_hidden_layers": n_layers,
        "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS,
        "head_dim": HEAD_DIM,
        "intermediate_size": INTER,
        "num_experts": n_experts,
        "num_experts_per_tok": TOP_K if n_experts > 0 else 0,
        "expert_intermediate_size": EXPERT_INTER if n_experts > 0 else 0,
        "vocab_size": VOCAB,
        "rms_norm_eps": EPS,
        "rope_theta": THETA,
        "max_position_embeddings": MAX_POS,
        "combine_style": style,
        "dense_delay": dd,
        "expert_delay": ed,
        "style_param": sp,
        "feature_flags": flags,
        "final_logit_softcap": softcap,
        "tie_word_embeddings": bool(flags & FLAG_TIED),
    }


def param_specs(cfg: dict) -> list[tuple[str, tuple[int, ...], str]]:
    """(name, shape, init kind) in draw order; kinds: mat, out, norm, final_norm, router."""
    h, hd = cfg["hidden_size"], cfg["head_dim"]
    q, kv = cfg["num_attention_heads"] * hd, cfg["num_key_value_heads"] * hd
    specs = [("embed.weight", (cfg["vocab_size"], h), "mat")]
    if not cfg["tie_word_embeddings"]:
        specs.append(("lm_head.weight", (cfg["vocab_size"], h), "mat"))
    specs.append(("norm.weight", (h,), "final_norm"))
    for l in range(cfg["num_hidden_layers"]):
        p = f"layers.{l}."
        specs += [
            (p + "attn_norm.weight", (h,), "norm"),
            (p + "attn.q.weight", (q, h), "mat"),
            (p + "attn.k.weight", (kv, h), "mat"),
            (p + "attn.v.weight", (kv, h), "mat"),
            (p + "attn.o.weight", (h, q), "out"),
            (p + "ffn_norm.weight", (h,), "norm"),
            (p + "ffn.gate.weight", (cfg["intermediate_size"], h), "mat"),
            (p + "ffn.up.weight", (cfg["intermediate_size"], h), "mat"),
            (p + "ffn.down.weight", (h, cfg["intermediate_size"]), "out"),
        ]
        if cfg["num_experts"] > 0:
            ei = cfg["expert_intermediate_size"]
            specs += [
                (p + "moe_norm.weight", (h,), "norm"),
                (p + "moe.router.weight", (cfg["num_experts"], h), "router"),
            ]
            for e in range(cfg["num_experts"]):
                specs += [
                    (p + f"moe.experts.{e}.gate.weight", (ei, h), "mat"),
                    (p + f"moe.experts.{e}.up.weight", (ei, h), "mat"),
                    (p + f"moe.experts.{e}.down.weight", (h, ei), "out"),
                ]
    return specs


def draw_weights(cfg: dict, seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    final_gain = 4.0 if cfg["final_logit_softcap"] > 0 else 1.0
    w = {}
    for name, shape, kind in param_specs(cfg):
        noise = torch.randn(shape, generator=g, dtype=torch.float32)
        if kind == "mat":
            w[name] = STD * noise
        elif kind == "out":
            w[name] = STD_OUT * noise
        elif kind == "norm":
            w[name] = 1.0 + 0.1 * noise
        elif kind == "final_norm":
            w[name] = final_gain + 0.1 * noise
        elif kind == "router":
            w[name] = STD_ROUTER * noise
        else:
            raise AssertionError(kind)
        w[name] = w[name].contiguous()
    return w


# ---------------------------------------------------------------- building blocks (full sequence)


def rms_norm(x: torch.Tensor, w: torch.Tensor | None, eps: float) -> torch.Tensor:
    assert x.dtype == torch.float32
    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return y * w if w is not None else y


def rope_cos_sin(positions: torch.Tensor, hd: int, theta: float) -> tuple[torch.Tensor, torch.Tensor]:
    inv_freq = 1.0 / (theta ** (torch.arange(0, hd, 2, dtype=torch.float32) / hd))
    ang = positions.to(torch.float32)[:, None] * inv_freq[None, :]  # [T, hd/2]
    ang = torch.cat([ang, ang], dim=-1)  # NeoX halves
    return ang.cos(), ang.sin()


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    # x [T, H, hd]; cos/sin [T, hd]
    return x * cos[:, None, :] + rotate_half(x) * sin[:, None, :]


def act(x: torch.Tensor, geglu: bool) -> torch.Tensor:
    return F.gelu(x, approximate="tanh") if geglu else F.silu(x)


def q8_0_roundtrip(x: torch.Tensor) -> torch.Tensor:
    """ggml's quantize_row_q8_0_reference then dequantize, along the last dimension in blocks of 32.

    d = amax / 127, q = round(x / d) (half away from zero), stored scale f16(d): what llama.cpp and
    cflow do to the input of every quantized projection before the integer dot products.
    """
    shape = x.shape
    assert shape[-1] % 32 == 0, shape
    a = x.detach().numpy().astype(np.float32).reshape(-1, shape[-1] // 32, 32)
    d = (np.abs(a).max(-1) / np.float32(127)).astype(np.float32)
    inv = np.where(d != 0, np.float32(1) / np.where(d != 0, d, np.float32(1)), np.float32(0)).astype(np.float32)
    v = (a * inv[..., None]).astype(np.float32)
    q = np.sign(v) * np.floor(np.abs(v) + np.float32(0.5))
    deq = q * d.astype(np.float16).astype(np.float32)[..., None]
    return torch.from_numpy(deq.reshape(shape).astype(np.float32))


class Model:
    def __init__(self, cfg: dict, w: dict[str, torch.Tensor], quantize_activations: bool = False):
        self.cfg = cfg
        self.w = w
        # The input of every tiled projection through Q8_0 (never the f32 router's).
        self.aq = quantize_activations
        self.flags = cfg["feature_flags"]
        self.geglu = bool(self.flags & FLAG_GEGLU)
        self.vnorm = bool(self.flags & FLAG_VNORM)
        self.eps = cfg["rms_norm_eps"]
        self.hd = cfg["head_dim"]
        self.nh = cfg["num_attention_heads"]
        self.nkv = cfg["num_key_value_heads"]
        # Routing statistics: smallest p_k - p_{k+1} and smallest logit gap seen.
        self.min_route_margin = math.inf
        self.min_route_logit_gap = math.inf

    def W(self, name: str) -> torch.Tensor:
        return self.w[name]

    def lin(self, x: torch.Tensor, name: str) -> torch.Tensor:
        """x W^T for a tiled matrix."""
        return (q8_0_roundtrip(x) if self.aq else x) @ self.W(name).T

    # attention over a full causal sequence
    def attn(self, l: int, h: torch.Tensor) -> torch.Tensor:
        T = h.shape[0]
        p = f"layers.{l}.attn."
        q = self.lin(h, p + "q.weight").view(T, self.nh, self.hd)
        k = self.lin(h, p + "k.weight").view(T, self.nkv, self.hd)
        v = self.lin(h, p + "v.weight").view(T, self.nkv, self.hd)
        if self.vnorm:
            v = rms_norm(v, None, self.eps)
        cos, sin = rope_cos_sin(torch.arange(T), self.hd, self.cfg["rope_theta"])
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        rep = self.nh // self.nkv
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
        scores = torch.einsum("thd,shd->hts", q, k) / math.sqrt(self.hd)
        mask = torch.ones(T, T, dtype=torch.bool).tril()
        scores = scores.masked_fill(~mask, float("-inf"))
        probs = torch.softmax(scores, dim=-1)
        o = torch.einsum("hts,shd->thd", probs, v).reshape(T, self.nh * self.hd)
        return self.lin(o, p + "o.weight")

    def ffn_core(self, prefix: str, h: torch.Tensor) -> torch.Tensor:
        g = self.lin(h, prefix + "gate.weight")
        u = self.lin(h, prefix + "up.weight")
        return self.lin(act(g, self.geglu) * u, prefix + "down.weight")

    def ffn(self, l: int, h: torch.Tensor) -> torch.Tensor:
        return self.ffn_core(f"layers.{l}.ffn.", h)

    def moe(self, l: int, x: torch.Tensor) -> torch.Tensor | None:
        """MoE(N_moe(x)); None (the term is absent) without experts."""
        if self.cfg["num_experts"] == 0:
            return None
        h = self.N(l, "moe", x)
        k = self.cfg["num_experts_per_tok"]
        z = h @ self.W(f"layers.{l}.moe.router.weight").T  # [T, E]
        p = torch.softmax(z, dim=-1)
        srt, _ = torch.sort(p, dim=-1, descending=True)
        self.min_route_margin = min(self.min_route_margin, float((srt[:, k - 1] - srt[:, k]).min()))
        zs, _ = torch.sort(z, dim=-1, descending=True)
        self.min_route_logit_gap = min(self.min_route_logit_gap, float((zs[:, k - 1] - zs[:, k]).min()))
        top_p, top_i = torch.topk(p, k, dim=-1)
        wts = top_p / top_p.sum(-1, keepdim=True)
        out = torch.zeros_like(h)
        for t in range(h.shape[0]):
            acc = torch.zeros(h.shape[1], dtype=torch.float32)
            for j in range(k):
                e = int(top_i[t, j])
                acc = acc + wts[t, j] * self.ffn_core(f"layers.{l}.moe.experts.{e}.", h[t : t + 1])[0]
            out[t] = acc
        return out

    def N(self, l: int, which: str, x: torch.Tensor) -> torch.Tensor:
        return rms_norm(x, self.W(f"layers.{l}.{which}_norm.weight"), self.eps)

    def embed(self, tokens: list[int]) -> torch.Tensor:
        h0 = self.W("embed.weight")[torch.tensor(tokens)]
        if self.flags & FLAG_EMBED_SCALE:
            h0 = h0 * torch.tensor(math.sqrt(self.cfg["hidden_size"]), dtype=torch.float32)
        return h0

    def head(self, x: torch.Tensor) -> torch.Tensor:
        y = rms_norm(x, self.W("norm.weight"), self.eps)
        wout = self.W("embed.weight") if self.cfg["tie_word_embeddings"] else self.W("lm_head.weight")
        logits = (q8_0_roundtrip(y) if self.aq else y) @ wout.T
        c = self.cfg["final_logit_softcap"]
        if c > 0:
            logits = c * torch.tanh(logits / c)
        return logits

    def forward(self, tokens: list[int]) -> tuple[torch.Tensor, torch.Tensor, list[dict], torch.Tensor]:
        """Logits [T, V], the final-norm input [T, H], per effective layer a dict of stream name to
        [T, H] stream value, and the embedding output h0 [T, H]."""
        cfg = self.cfg
        style, dd, ed, sp = cfg["combine_style"], cfg["dense_delay"], cfg["expert_delay"], cfg["style_param"]
        L = cfg["num_hidden_layers"]
        h0 = self.embed(tokens)
        records: list[dict[str, torch.Tensor]] = []
        if style == 0:
            assert dd == 0 and ed == 0 and cfg["num_experts"] > 0
            x = h0
            inv = torch.tensor(math.sqrt(2.0), dtype=torch.float32)
            for l in range(L):
                x_mid = x + self.attn(l, self.N(l, "attn", x))
                x = x_mid + (self.ffn(l, self.N(l, "ffn", x_mid)) + self.moe(l, x_mid)) / inv
                records.append({"x": x})
            final = x
        elif style in (1, 2):
            outs = {-1: h0}
            queue: dict[int, torch.Tensor] = {}
            x = h0
            for l in range(L):
                x_in = x
                x_mid = x_in + self.attn(l, self.N(l, "attn", x_in))
                dense_src = x_mid if dd == 0 else outs[max(l - dd, -1)]
                dense = self.ffn(l, self.N(l, "ffn", dense_src))
                e = self.moe(l, x_mid if style == 1 else x_in)
                if e is not None:
                    queue[l + ed] = e
                x = x_mid + dense
                if l in queue:
                    x = x + queue.pop(l)
                outs[l] = x
                records.append({"x": x})
            for j in sorted(queue):  # flush, in layer order
                assert j >= L
                x = x + queue[j]
            final = x
        elif style == 3:
            assert dd == 0 and ed == 0 and sp > 0
            sa = sf = h0
            for l in range(L):
                sa = sa + self.attn(l, self.N(l, "attn", sa))
                e = self.moe(l, sf)
                f = self.ffn(l, self.N(l, "ffn", sf))
                sf = sf + (f + e if e is not None else f)
                if (l + 1) % sp == 0 or l == L - 1:
                    sa = sf = (sa + sf) / 2
                records.append({"s_a": sa, "s_f": sf})
            final = sa
        elif style == 4:
            assert dd == 0 and ed == 0
            A = X = h0
            for l in range(L):
                f = self.ffn(l, self.N(l, "ffn", X))
                e = self.moe(l, X)
                if e is not None:
                    f = f + e
                A = A + self.attn(l, self.N(l, "attn", A))
                X = A + f
                records.append({"A": A, "X": X})
            final = X
        elif style == 5:
            assert dd == 0 and ed == 0 and sp > 0
            x = h0
            for b in range(L):
                for _ in range(sp):
                    # each pass has its own KV cache: a full causal attention over this pass's input
                    x_mid = x + self.attn(b, self.N(b, "attn", x))
                    f = self.ffn(b, self.N(b, "ffn", x_mid))
                    e = self.moe(b, x_mid)
                    x = x_mid + f
                    if e is not None:
                        x = x + e
                    records.append({"x": x})
            final = x
        else:
            raise AssertionError(style)
        return self.head(final), final, records, h0


# ---------------------------------------------------------------- independent incremental decode


def decode_incremental(cfg: dict, w: dict[str, torch.Tensor], tokens: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """DelayedSum / AsyncExperts token by token: explicit KV cache, residual ring, expert ring.

    Written without the Model class's helpers (own RoPE per position, own attention over the cache,
    own MoE with an explicit sort) so that a mistake in either implementation shows up.
    """
    style, dd, ed = cfg["combine_style"], cfg["dense_delay"], cfg["expert_delay"]
    assert style in (1, 2)
    L, hd, nh, nkv = cfg["num_hidden_layers"], cfg["head_dim"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    eps, flags = cfg["rms_norm_eps"], cfg["feature_flags"]
    geglu = bool(flags & FLAG_GEGLU)

    def norm(x, wname=None):
        r = 1.0 / torch.sqrt((x * x).sum(-1, keepdim=True) / x.shape[-1] + eps)
        return x * r * (w[wname] if wname else 1.0)

    def gated(prefix, h):
        g = w[prefix + "gate.weight"] @ h
        a = F.gelu(g, approximate="tanh") if geglu else g * torch.sigmoid(g)
        return w[prefix + "down.weight"] @ (a * (w[prefix + "up.weight"] @ h))

    def rope(vec, pos):  # vec [hd]
        half = hd // 2
        out = torch.empty_like(vec)
        for i in range(half):
            f = torch.tensor(1.0, dtype=torch.float32) / torch.tensor(THETA, dtype=torch.float32) ** (
                torch.tensor(2 * i, dtype=torch.float32) / hd
            )
            a = torch.tensor(float(pos), dtype=torch.float32) * f
            c, s = torch.cos(a), torch.sin(a)
            out[i] = vec[i] * c - vec[i + half] * s
            out[i + half] = vec[i + half] * c + vec[i] * s
        return out

    kcache = [[] for _ in range(L)]  # per layer: list of [nkv, hd]
    vcache = [[] for _ in range(L)]
    all_logits, all_final = [], []
    for pos, tok in enumerate(tokens):
        x = w["embed.weight"][tok].clone()
        if flags & FLAG_EMBED_SCALE:
            x = x * torch.tensor(math.sqrt(cfg["hidden_size"]), dtype=torch.float32)
        h0 = x.clone()
        # ring of the last dd+1 residuals: slot l % (dd+1) holds out[l] (read before overwritten)
        hist: list[torch.Tensor | None] = [None] * (dd + 1)
        ring: list[torch.Tensor | None] = [None] * (ed + 1)  # pending expert outputs
        for l in range(L):
            p = f"layers.{l}."
            x_in = x
            a_in = norm(x_in, p + "attn_norm.weight")
            q = (w[p + "attn.q.weight"] @ a_in).view(nh, hd)
            k = (w[p + "attn.k.weight"] @ a_in).view(nkv, hd)
            v = (w[p + "attn.v.weight"] @ a_in).view(nkv, hd)
            if flags & FLAG_VNORM:
                v = torch.stack([norm(v[j]) for j in range(nkv)])
            q = torch.stack([rope(q[j], pos) for j in range(nh)])
            k = torch.stack([rope(k[j], pos) for j in range(nkv)])
            kcache[l].append(k)
            vcache[l].append(v)
            K = torch.stack(kcache[l])  # [S, nkv, hd]
            V = torch.stack(vcache[l])
            heads = []
            for j in range(nh):
                kv = j // (nh // nkv)
                s = (K[:, kv, :] @ q[j]) / math.sqrt(hd)
                pr = torch.exp(s - s.max())
                pr = pr / pr.sum()
                heads.append(pr @ V[:, kv, :])
            x_mid = x_in + w[p + "attn.o.weight"] @ torch.cat(heads)
            if dd == 0:
                dense_src = x_mid
            elif l - dd < 0:
                dense_src = h0  # the clamp: out[-1]
            else:
                dense_src = hist[(l - dd) % (dd + 1)]
            dense = gated(p + "ffn.", norm(dense_src, p + "ffn_norm.weight"))
            if cfg["num_experts"] > 0:
                hm = norm(x_mid if style == 1 else x_in, p + "moe_norm.weight")
                z = w[p + "moe.router.weight"] @ hm
                pz = torch.exp(z - z.max())
                pz = pz / pz.sum()
                order = sorted(range(len(pz)), key=lambda i: (-float(pz[i]), i))[: cfg["num_experts_per_tok"]]
                tot = sum(pz[i] for i in order)
                e = torch.zeros_like(x)
                for i in order:
                    e = e + (pz[i] / tot) * gated(p + f"moe.experts.{i}.", hm)
                ring[(l + ed) % (ed + 1)] = e
            x = x_mid + dense
            slot = l % (ed + 1)
            if ring[slot] is not None:
                x = x + ring[slot]
                ring[slot] = None
            hist[l % (dd + 1)] = x
        for j in range(L, L + ed):  # flush pending expert outputs in layer order
            slot = j % (ed + 1)
            if ring[slot] is not None:
                x = x + ring[slot]
                ring[slot] = None
        assert all(r is None for r in ring)
        all_final.append(x)
        y = norm(x, "norm.weight")
        wout = w["embed.weight"] if cfg["tie_word_embeddings"] else w["lm_head.weight"]
        z = wout @ y
        c = cfg["final_logit_softcap"]
        all_logits.append(c * torch.tanh(z / c) if c > 0 else z)
    return torch.stack(all_logits), torch.stack(all_final)


# ---------------------------------------------------------------- driver


def f32(v: float) -> float:
    return float(np.float32(v))


def l2(x: torch.Tensor) -> list[float]:
    return [f32(float(np.linalg.norm(r.astype(np.float64)))) for r in x.detach().numpy()]


def trace_text(doc: dict) -> str:
    """JSON with one line per layer record and the short arrays inline (`./dev fmt` keeps that)."""
    d = json.dumps
    lines = ["{"]
    for key in ("architecture", "fixture", "seed", "tokens", "shape"):
        lines.append(f"  {d(key)}: {d(doc[key])},")
    lines.append('  "positions": [')
    for i, pos in enumerate(doc["positions"]):
        lines.append("    {")
        lines.append('      "layers": [')
        recs = pos["layers"]
        lines += [f"        {d(r)}" + ("," if j + 1 < len(recs) else "") for j, r in enumerate(recs)]
        lines.append("      ],")
        lines.append(f'      "final_norm": {d(pos["final_norm"])},')
        lines.append(f'      "argmax": {d(pos["argmax"])}')
        lines.append("    }" + ("," if i + 1 < len(doc["positions"]) else ""))
    lines.append("  ],")
    lines.append(f'  "logits_f32_b64": {d(doc["logits_f32_b64"])}')
    lines.append("}")
    text = "\n".join(lines) + "\n"
    assert json.loads(text) == doc
    return text


def q4_0_roundtrip(t: torch.Tensor) -> torch.Tensor:
    """ggml's quantize_row_q4_0_reference then dequantize, row by row in blocks of 32 columns.

    The block's scale is d = v / -8 for the value v of largest magnitude (the first one on a tie),
    q = min(15, trunc(x / d + 8.5)), and the stored scale is f16(d): the weights a Q4_0 `.cflow`
    converted with `--q4-rule ggml` holds.
    """
    rows, cols = t.shape
    assert cols % 32 == 0, t.shape
    x = t.detach().numpy().astype(np.float32).reshape(rows, cols // 32, 32)
    idx = np.argmax(np.abs(x), axis=-1)
    mx = np.take_along_axis(x, idx[..., None], -1)[..., 0]
    d = (mx / np.float32(-8)).astype(np.float32)
    inv = np.where(d != 0, np.float32(1) / np.where(d != 0, d, np.float32(1)), np.float32(0)).astype(np.float32)
    q = np.minimum(15, np.trunc((x * inv[..., None]).astype(np.float32) + np.float32(8.5))).astype(np.float32)
    deq = (q - np.float32(8)) * d.astype(np.float16).astype(np.float32)[..., None]
    return torch.from_numpy(deq.reshape(rows, cols).astype(np.float32))


def quantized_weights(w: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Every tiled matrix through Q4_0; norms (1-D) and the f32 router stay as they are."""
    return {k: q4_0_roundtrip(v) if v.dim() == 2 and "router" not in k else v for k, v in w.items()}


def build(folder: str, arch: str, flags: int, softcap: float, n_layers: int, n_experts: int, base_seed: int) -> dict:
    cfg = make_config(arch, flags, softcap, n_layers, n_experts)
    for attempt in range(2000):
        seed = base_seed + attempt
        w = draw_weights(cfg, seed)
        m = Model(cfg, w)
        with torch.no_grad():
            logits, final, records, h0 = m.forward(TOKENS)
        top2 = torch.topk(logits, 2, dim=-1).values
        arg_margin = float((top2[:, 0] - top2[:, 1]).min())
        route_ok = n_experts == 0 or m.min_route_margin > ROUTE_MARGIN
        if arg_margin > MARGIN and route_ok:
            m4 = Model(cfg, quantized_weights(w))
            with torch.no_grad():
                logits4, _, _, _ = m4.forward(TOKENS)
            top2 = torch.topk(logits4, 2, dim=-1).values
            q4_ok = float((top2[:, 0] - top2[:, 1]).min()) > 10 * MARGIN
            if q4_ok and (n_experts == 0 or m4.min_route_margin > ROUTE_MARGIN):
                break
        print(f"  {folder}: seed {seed} rejected (argmax margin {arg_margin:.3g}, route {m.min_route_margin:.3g})")
    else:
        raise SystemExit(f"{folder}: no seed passed the margins")

    # Residual growth sanity: every stream norm within 0.1x..100x of the embedding norm.
    e_norm = torch.linalg.vector_norm(h0, dim=-1)
    ratios = []
    for rec in records:
        for v in rec.values():
            ratios.append(torch.linalg.vector_norm(v, dim=-1) / e_norm)
    ratios = torch.stack(ratios)
    lo, hi = float(ratios.min()), float(ratios.max())
    assert 0.1 < lo and hi < 100.0, (folder, lo, hi)

    bend = 0.0
    if softcap > 0:
        y = rms_norm(final, w["norm.weight"], EPS)
        raw = y @ w["embed.weight"].T
        bend = float((raw - logits).abs().max())
        assert bend > 0.1, (folder, bend)

    if folder in ("arch2_4_combined", "arch4_async_experts", "arch2_4_sync", "arch2_4_combined_dense"):
        with torch.no_grad():
            inc_logits, inc_final = decode_incremental(cfg, w, TOKENS)
        rel = float((inc_logits - logits).abs().max() / logits.abs().max())
        relf = float((inc_final - final).abs().max() / final.abs().max())
        assert rel < 1e-5 and relf < 1e-5, (folder, rel, relf)
        print(f"  {folder}: incremental decode matches (rel {rel:.2e}, final {relf:.2e})")

    out = OUT / folder
    out.mkdir(parents=True)
    (out / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    save_file({k: v.contiguous() for k, v in w.items()}, str(out / "model.safetensors"), metadata={"format": "pt"})
    T = len(TOKENS)
    rec_norms = [{k: l2(v) for k, v in rec.items()} for rec in records]
    fin = l2(final)
    argmax = logits.argmax(-1).tolist()
    positions = []
    for t in range(T):
        positions.append(
            {
                "layers": [{k: v[t] for k, v in rec.items()} for rec in rec_norms],
                "final_norm": fin[t],
                "argmax": argmax[t],
            }
        )
    raw = logits.contiguous().numpy().astype("<f4").tobytes()
    doc = {
        "architecture": arch,
        "fixture": folder,
        "seed": seed,
        "tokens": TOKENS,
        "shape": [T, VOCAB],
        "positions": positions,
        "logits_f32_b64": base64.b64encode(raw).decode("ascii"),
    }
    (out / "trace.json").write_text(trace_text(doc))

    # The same forward over the Q4_0 round trip of every tiled matrix: what a Q4_0 file holds, so
    # that comparing a Q4_0 runtime against it measures the runtime, not the weights' rounding.
    m4 = Model(cfg, quantized_weights(w))
    with torch.no_grad():
        logits4, final4, records4, _ = m4.forward(TOKENS)
    rec4 = [{k: l2(v) for k, v in rec.items()} for rec in records4]
    fin4 = l2(final4)
    top2 = torch.topk(logits4, 2, dim=-1).values
    q4_margin = float((top2[:, 0] - top2[:, 1]).min())
    doc4 = {
        "architecture": arch,
        "fixture": folder + " (weights through Q4_0)",
        "seed": seed,
        "tokens": TOKENS,
        "shape": [T, VOCAB],
        "positions": [
            {
                "layers": [{k: v[t] for k, v in rec.items()} for rec in rec4],
                "final_norm": fin4[t],
                "argmax": logits4.argmax(-1).tolist()[t],
            }
            for t in range(T)
        ],
        "logits_f32_b64": base64.b64encode(logits4.contiguous().numpy().astype("<f4").tobytes()).decode("ascii"),
    }
    (out / "trace_q4_0.json").write_text(trace_text(doc4))

    # And with ggml's Q8_0 quantization of every projection's input as well: the arithmetic of a
    # Q4_0 runtime that multiplies in integers (llama.cpp's, cflow's), up to float summation order.
    m8 = Model(cfg, quantized_weights(w), quantize_activations=True)
    with torch.no_grad():
        logits8, final8, records8, _ = m8.forward(TOKENS)
    rec8 = [{k: l2(v) for k, v in rec.items()} for rec in records8]
    fin8 = l2(final8)
    doc8 = {
        **doc4,
        "fixture": folder + " (weights through Q4_0, projection inputs through Q8_0)",
        "positions": [
            {
                "layers": [{k: v[t] for k, v in rec.items()} for rec in rec8],
                "final_norm": fin8[t],
                "argmax": logits8.argmax(-1).tolist()[t],
            }
            for t in range(T)
        ],
        "logits_f32_b64": base64.b64encode(logits8.contiguous().numpy().astype("<f4").tobytes()).decode("ascii"),
    }
    (out / "trace_q4_0_q8_0.json").write_text(trace_text(doc8))
    return {
        "q4_margin": q4_margin,
        "q4_route_margin": m4.min_route_margin if n_experts else None,
        "folder": folder,
        "seed": seed,
        "argmax_margin": arg_margin,
        "route_margin": m.min_route_margin if n_experts else None,
        "route_logit_gap": m.min_route_logit_gap if n_experts else None,
        "ratio": (lo, hi),
        "bend": bend,
    }


def main() -> None:
    torch.set_default_dtype(torch.float32)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    if OUT.exists():
        for spec in FIXTURES:
            shutil.rmtree(OUT / spec[0], ignore_errors=True)
    OUT.mkdir(parents=True, exist_ok=True)
    stats = [build(*spec) for spec in FIXTURES]
    subprocess.run([str(ROOT / "dev"), "fmt", str(OUT)], check=True, capture_output=True)
    for s in stats:
        size = sum(p.stat().st_size for p in (OUT / s["folder"]).rglob("*") if p.is_file())
        rm = "-" if s["route_margin"] is None else f"{s['route_margin']:.4g}"
        rg = "-" if s["route_logit_gap"] is None else f"{s['route_logit_gap']:.4g}"
        print(
            f"{s['folder']:26s} seed {s['seed']}  {size:7d} B  argmax margin {s['argmax_margin']:.4g}"
            f"  route margin {rm} (logit gap {rg})  norm ratio {s['ratio'][0]:.3g}..{s['ratio'][1]:.3g}"
            + (f"  softcap bend {s['bend']:.3g}" if s["bend"] else "")
            + f"  q4: argmax margin {s['q4_margin']:.3g} route margin {s['q4_route_margin']}"
        )
    total = sum(p.stat().st_size for p in OUT.rglob("*") if p.is_file())
    print(f"{OUT.relative_to(ROOT)}: {total} bytes")
    if total > LIMIT_BYTES:
        sys.exit(f"fixture folder is {total} bytes, over the {LIMIT_BYTES} limit")


if __name__ == "__main__":
    main()
