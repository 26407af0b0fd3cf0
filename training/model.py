"""Training implementation of the pipeline-native family (docs/ARCHITECTURES.md).

The same math as the PyTorch reference `tests/reference/gen_pipeline_native.py` (class `Model`),
batched over [B, T]: causal attention through `F.scaled_dot_product_attention`, the MoE computed
by gathering each expert's tokens (a loop over experts, never over tokens), every combine style
with its delays, expert queue and flush, stream merges, pipeline registers and fixed-point passes.
training/check_model.py proves the equality on every fixture of tests/fixtures/pipeline_native/.

Module names are the checkpoint's tensor names, so `model.state_dict()` is the safetensors file:
`embed.weight`, `lm_head.weight` (untied only), `norm.weight`, `layers.{l}.attn_norm.weight`,
`layers.{l}.attn.{q,k,v,o}.weight`, `layers.{l}.ffn_norm.weight`, `layers.{l}.ffn.{gate,up,down}.weight`,
`layers.{l}.moe_norm.weight`, `layers.{l}.moe.router.weight`,
`layers.{l}.moe.experts.{e}.{gate,up,down}.weight`.

Training only: `forward` also returns the Switch-Transformer load-balancing loss
`E * sum_i f_i P_i` (f_i the fraction of the top-k assignments that go to expert i, P_i the mean
router probability of expert i), averaged over every MoE evaluation (FixedPoint: every pass). It is
computed beside the forward and changes nothing in it; train.py adds it with coefficient 0.01.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

FLAG_EMBED_SCALE = 1
FLAG_VNORM = 2
FLAG_TIED = 4
FLAG_GEGLU = 8

# name: (combine_style, dense_delay, expert_delay, style_param): the doc's Table 4.1.
TABLE = {
    "gemma4_parallel": (0, 0, 0, 0),
    "arch1_decoupled_streams": (3, 0, 0, 3),
    "arch2_4_combined": (1, 1, 2, 0),
    "arch2_4_sync": (1, 1, 0, 0),
    "arch3_pipeline_registers": (4, 0, 0, 0),
    "arch4_async_experts": (2, 0, 2, 0),
    "arch5_fixed_point": (5, 0, 0, 3),
}


def rms_norm(x: torch.Tensor, w: torch.Tensor | None, eps: float) -> torch.Tensor:
    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return y * w if w is not None else y


class RMSNorm(nn.Module):
    def __init__(self, d: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return rms_norm(x, self.weight, self.eps)


def lin(i: int, o: int) -> nn.Linear:
    return nn.Linear(i, o, bias=False)


class Attn(nn.Module):
    def __init__(self, cfg: dict):
        super().__init__()
        h, hd = cfg["hidden_size"], cfg["head_dim"]
        self.nh, self.nkv, self.hd = cfg["num_attention_heads"], cfg["num_key_value_heads"], hd
        self.q = lin(h, self.nh * hd)
        self.k = lin(h, self.nkv * hd)
        self.v = lin(h, self.nkv * hd)
        self.o = lin(self.nh * hd, h)
        self.vnorm = bool(cfg["feature_flags"] & FLAG_VNORM)
        self.eps = cfg["rms_norm_eps"]

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        B, T, _ = x.shape
        q = self.q(x).view(B, T, self.nh, self.hd).transpose(1, 2)  # [B, H, T, hd]
        k = self.k(x).view(B, T, self.nkv, self.hd).transpose(1, 2)
        v = self.v(x).view(B, T, self.nkv, self.hd).transpose(1, 2)
        if self.vnorm:
            v = rms_norm(v, None, self.eps)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        if self.nkv != self.nh:
            rep = self.nh // self.nkv
            k = k.repeat_interleave(rep, dim=1)
            v = v.repeat_interleave(rep, dim=1)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=1.0 / math.sqrt(self.hd))
        return self.o(o.transpose(1, 2).reshape(B, T, self.nh * self.hd))


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


def rope_cos_sin(T: int, hd: int, theta: float) -> tuple[torch.Tensor, torch.Tensor]:
    inv_freq = 1.0 / (theta ** (torch.arange(0, hd, 2, dtype=torch.float32) / hd))
    ang = torch.arange(T, dtype=torch.float32)[:, None] * inv_freq[None, :]
    ang = torch.cat([ang, ang], dim=-1)  # NeoX halves
    return ang.cos(), ang.sin()


class GatedFFN(nn.Module):
    def __init__(self, h: int, inter: int, geglu: bool):
        super().__init__()
        self.gate = lin(h, inter)
        self.up = lin(h, inter)
        self.down = lin(inter, h)
        self.geglu = geglu

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        g = self.gate(x)
        a = F.gelu(g, approximate="tanh") if self.geglu else F.silu(g)
        return self.down(a * self.up(x))


class MoE(nn.Module):
    def __init__(self, cfg: dict, geglu: bool):
        super().__init__()
        h = cfg["hidden_size"]
        self.E, self.k = cfg["num_experts"], cfg["num_experts_per_tok"]
        self.router = lin(h, self.E)
        self.experts = nn.ModuleList(
            GatedFFN(h, cfg["expert_intermediate_size"], geglu) for _ in range(self.E)
        )

    def forward(self, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """MoE of the normed input h [..., d]; (output, Switch load-balancing loss)."""
        shape = h.shape
        x = h.reshape(-1, shape[-1])
        p = torch.softmax(self.router(x), dim=-1)  # [N, E]
        top_p, top_i = torch.topk(p, self.k, dim=-1)
        wts = top_p / top_p.sum(-1, keepdim=True)
        out = torch.zeros_like(x)
        flat_i = top_i.reshape(-1)
        flat_w = wts.reshape(-1)
        tok = torch.arange(x.shape[0], device=x.device).repeat_interleave(self.k)
        counts = torch.bincount(flat_i, minlength=self.E)
        order = torch.argsort(flat_i, stable=True)
        starts = [0] + torch.cumsum(counts, 0).tolist()
        for e in range(self.E):
            s, t = starts[e], starts[e + 1]
            if s == t:
                continue
            sel = order[s:t]
            rows = tok[sel]
            y = self.experts[e](x.index_select(0, rows)) * flat_w[sel, None]
            out.index_add_(0, rows, y)
        frac = counts.to(p.dtype) / flat_i.numel()
        aux = self.E * (frac * p.mean(0)).sum()
        return out.view(shape), aux


class Layer(nn.Module):
    def __init__(self, cfg: dict):
        super().__init__()
        h, eps = cfg["hidden_size"], cfg["rms_norm_eps"]
        geglu = bool(cfg["feature_flags"] & FLAG_GEGLU)
        self.attn_norm = RMSNorm(h, eps)
        self.attn = Attn(cfg)
        self.ffn_norm = RMSNorm(h, eps)
        self.ffn = GatedFFN(h, cfg["intermediate_size"], geglu)
        if cfg["num_experts"] > 0:
            self.moe_norm = RMSNorm(h, eps)
            self.moe = MoE(cfg, geglu)


class PipelineNative(nn.Module):
    def __init__(self, cfg: dict):
        super().__init__()
        self.cfg = cfg
        h, V = cfg["hidden_size"], cfg["vocab_size"]
        self.flags = cfg["feature_flags"]
        self.tied = bool(cfg["tie_word_embeddings"])
        assert self.tied == bool(self.flags & FLAG_TIED)
        arch = cfg["architecture"]
        assert TABLE[arch] == (cfg["combine_style"], cfg["dense_delay"], cfg["expert_delay"], cfg["style_param"])
        self.embed = nn.Embedding(V, h)
        if not self.tied:
            self.lm_head = lin(h, V)
        self.norm = RMSNorm(h, cfg["rms_norm_eps"])
        self.layers = nn.ModuleList(Layer(cfg) for _ in range(cfg["num_hidden_layers"]))
        self._rope: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}

    def rope(self, T: int) -> tuple[torch.Tensor, torch.Tensor]:
        if T not in self._rope:
            self._rope[T] = rope_cos_sin(T, self.cfg["head_dim"], self.cfg["rope_theta"])
        return self._rope[T]

    def forward(self, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """tokens [B, T] -> (logits [B, T, V], mean load-balancing loss over MoE evaluations)."""
        cfg = self.cfg
        style, dd, ed, sp = cfg["combine_style"], cfg["dense_delay"], cfg["expert_delay"], cfg["style_param"]
        L = cfg["num_hidden_layers"]
        cos, sin = self.rope(tokens.shape[1])
        auxes: list[torch.Tensor] = []

        def attn(l: int, x: torch.Tensor) -> torch.Tensor:
            ly = self.layers[l]
            return ly.attn(ly.attn_norm(x), cos, sin)

        def ffn(l: int, x: torch.Tensor) -> torch.Tensor:
            ly = self.layers[l]
            return ly.ffn(ly.ffn_norm(x))

        def moe(l: int, x: torch.Tensor) -> torch.Tensor | None:
            ly = self.layers[l]
            if cfg["num_experts"] == 0:
                return None
            y, aux = ly.moe(ly.moe_norm(x))
            auxes.append(aux)
            return y

        h0 = self.embed(tokens)
        if self.flags & FLAG_EMBED_SCALE:
            h0 = h0 * torch.tensor(math.sqrt(cfg["hidden_size"]), dtype=torch.float32)
        if style == 0:
            assert dd == 0 and ed == 0 and cfg["num_experts"] > 0
            x = h0
            inv = torch.tensor(math.sqrt(2.0), dtype=torch.float32)
            for l in range(L):
                x_mid = x + attn(l, x)
                x = x_mid + (ffn(l, x_mid) + moe(l, x_mid)) / inv
            final = x
        elif style in (1, 2):
            outs = {-1: h0}
            queue: dict[int, torch.Tensor] = {}
            x = h0
            for l in range(L):
                x_in = x
                x_mid = x_in + attn(l, x_in)
                dense = ffn(l, x_mid if dd == 0 else outs[max(l - dd, -1)])
                e = moe(l, x_mid if style == 1 else x_in)
                if e is not None:
                    queue[l + ed] = e
                x = x_mid + dense
                if l in queue:
                    x = x + queue.pop(l)
                outs[l] = x
                outs.pop(l - dd - 1, None)  # only the last dd+1 residuals are ever read
            for j in sorted(queue):  # flush pending expert outputs, in layer order
                x = x + queue[j]
            final = x
        elif style == 3:
            assert dd == 0 and ed == 0 and sp > 0
            sa = sf = h0
            for l in range(L):
                sa = sa + attn(l, sa)
                e = moe(l, sf)
                f = ffn(l, sf)
                sf = sf + (f + e if e is not None else f)
                if (l + 1) % sp == 0 or l == L - 1:
                    sa = sf = (sa + sf) / 2
            final = sa
        elif style == 4:
            assert dd == 0 and ed == 0
            A = X = h0
            for l in range(L):
                f = ffn(l, X)
                e = moe(l, X)
                if e is not None:
                    f = f + e
                A = A + attn(l, A)
                X = A + f
            final = X
        elif style == 5:
            assert dd == 0 and ed == 0 and sp > 0
            x = h0
            for b in range(L):
                for _ in range(sp):
                    x_mid = x + attn(b, x)
                    f = ffn(b, x_mid)
                    e = moe(b, x_mid)
                    x = x_mid + f
                    if e is not None:
                        x = x + e
            final = x
        else:
            raise AssertionError(style)
        y = self.norm(final)
        wout = self.embed.weight if self.tied else self.lm_head.weight
        logits = y @ wout.T
        c = cfg["final_logit_softcap"]
        if c > 0:
            logits = c * torch.tanh(logits / c)
        aux = torch.stack(auxes).mean() if auxes else torch.zeros((), dtype=logits.dtype)
        return logits, aux

    def export_state(self) -> dict[str, torch.Tensor]:
        """The checkpoint's tensors: float32, contiguous, the doc's names."""
        return {k: v.detach().to(torch.float32).contiguous().clone() for k, v in self.state_dict().items()}
