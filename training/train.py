#!/usr/bin/env python3
"""Train one pipeline-native architecture on the Austen corpus and export a cflow checkpoint.

    PYTHONPATH=/tmp/pyhf python3 training/train.py --arch NAME --seed S --out DIR [--steps N]

One recipe for every architecture (training/README.md): d 128, 6 layers (arch5_fixed_point: 2
blocks x 3 passes), 4 heads / 4 KV heads of 32, intermediate 512, 8 experts top-2 of width 128,
vocab 4096, context 128, GeGLU, no V-norm, no embedding scale, untied, no softcap, eps 1e-6, RoPE
theta 10000; AdamW lr 3e-3 peak, betas (0.9, 0.95), weight decay 0.1 on matrices only, 100 warmup
steps, cosine decay to 10% of the peak, grad-norm clip 1.0, batch 16 x 128 tokens, cross-entropy
+ 0.01 x the Switch load-balancing loss (training/model.py), torch.set_num_threads(2), everything
seeded by --seed (init, batch sampling).

Writes into DIR: log.csv (step, kind train|valid, loss, lr, seconds; train loss every 25 steps as
the mean over those 25 steps, validation loss every 200 steps and at the end), result.json
{arch, seed, steps, train_loss, valid_ppl, test_ppl, params, seconds, step_time_s, ...},
model.safetensors (float32, the doc's tensor names), config.json (the doc's schema) and
tokenizer.json (a copy of the trained tokenizer). Validation and test: every token of the split
once, in non-overlapping windows of 128 predicted tokens (the first window's first token is not
predicted), perplexity = exp(mean token NLL).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import shutil
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from tokenizers import Tokenizer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from model import FLAG_GEGLU, TABLE, PipelineNative  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
# Chosen so that one run takes about 8 minutes on the 2-core reference machine (README.md):
# measured 0.41-0.50 s per step uncontended (torch 2.15.0, 2 threads), plus about 25 s of evaluation.
STEPS = 1000
BATCH = 16
CTX = 128
LR = 3e-3
BETAS = (0.9, 0.95)
WD = 0.1
WARMUP = 100
MIN_LR_FRAC = 0.1
CLIP = 1.0
AUX_COEF = 0.01
TRAIN_LOG_EVERY = 25
VALID_EVERY = 200
INIT_STD = 0.02


def make_config(arch: str) -> dict:
    style, dd, ed, sp = TABLE[arch]
    return {
        "model_type": "pipeline_native",
        "architecture": arch,
        "hidden_size": 128,
        "num_hidden_layers": 2 if arch == "arch5_fixed_point" else 6,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "head_dim": 32,
        "intermediate_size": 512,
        "num_experts": 8,
        "num_experts_per_tok": 2,
        "expert_intermediate_size": 128,
        "vocab_size": 4096,
        "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0,
        "max_position_embeddings": 2048,
        "combine_style": style,
        "dense_delay": dd,
        "expert_delay": ed,
        "style_param": sp,
        "feature_flags": FLAG_GEGLU,
        "final_logit_softcap": 0.0,
        "tie_word_embeddings": False,
    }


def init_weights(m: PipelineNative, cfg: dict, g: torch.Generator) -> None:
    """N(0, 0.02^2) for the embedding, the head, every projection and the routers; the residual
    writers (attn.o, ffn.down, experts' down) 0.02 / sqrt(2 x passes) (GPT-2's rule); norms 1."""
    passes = cfg["num_hidden_layers"] * (cfg["style_param"] if cfg["combine_style"] == 5 else 1)
    out_std = INIT_STD / math.sqrt(2 * passes)
    with torch.no_grad():
        for name, p in m.named_parameters():
            if p.dim() == 1:
                p.fill_(1.0)
            elif name.endswith(("attn.o.weight", "down.weight")):
                p.copy_(torch.randn(p.shape, generator=g) * out_std)
            else:
                p.copy_(torch.randn(p.shape, generator=g) * INIT_STD)


def encode(tok: Tokenizer, path: Path) -> torch.Tensor:
    return torch.tensor(tok.encode(path.read_text(encoding="utf-8")).ids, dtype=torch.long)


@torch.no_grad()
def eval_nll(m: PipelineNative, ids: torch.Tensor, limit: int = 0) -> float:
    """Mean token NLL over non-overlapping windows: window i predicts ids[1+128i .. 128(i+1)]
    from ids[128i .. 128(i+1)-1]."""
    m.eval()
    n = ids.numel() - 1
    starts = list(range(0, n, CTX))
    if limit > 0:  # smoke tests only: the first `limit` windows
        starts = starts[:limit]
        n = min(n, starts[-1] + CTX)
    total, count = 0.0, 0
    full = [s for s in starts if s + CTX <= n]
    for i in range(0, len(full), BATCH):
        b = full[i : i + BATCH]
        x = torch.stack([ids[s : s + CTX] for s in b])
        y = torch.stack([ids[s + 1 : s + CTX + 1] for s in b])
        logits, _ = m(x)
        total += float(F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1), reduction="sum"))
        count += y.numel()
    for s in starts[len(full) :]:  # the tail window, shorter
        x, y = ids[s:n][None], ids[s + 1 : n + 1][None]
        logits, _ = m(x)
        total += float(F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1), reduction="sum"))
        count += y.numel()
    m.train()
    return total / count


def lr_at(step: int, steps: int) -> float:
    if step < WARMUP:
        return LR * (step + 1) / WARMUP
    t = (step - WARMUP) / max(1, steps - WARMUP)
    return LR * (MIN_LR_FRAC + (1 - MIN_LR_FRAC) * 0.5 * (1 + math.cos(math.pi * min(1.0, t))))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--arch", required=True, choices=sorted(TABLE))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=STEPS)
    ap.add_argument("--eval-windows", type=int, default=0, help="smoke tests: evaluate only this many windows (0: all)")
    ap.add_argument("--corpus", default=str(ROOT / "training/out/corpus"))
    ap.add_argument("--tokenizer", default=str(ROOT / "training/out/tokenizer.json"))
    args = ap.parse_args()
    torch.set_num_threads(2)
    torch.manual_seed(args.seed)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t_start = time.time()

    tok = Tokenizer.from_file(args.tokenizer)
    corpus = Path(args.corpus)
    train_ids = encode(tok, corpus / "train.txt")
    valid_ids = encode(tok, corpus / "valid.txt")
    test_ids = encode(tok, corpus / "test.txt")

    cfg = make_config(args.arch)
    m = PipelineNative(cfg)
    g = torch.Generator().manual_seed(args.seed)
    init_weights(m, cfg, g)
    params = sum(p.numel() for p in m.parameters())
    decay = [p for p in m.parameters() if p.dim() >= 2]
    no_decay = [p for p in m.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": WD}, {"params": no_decay, "weight_decay": 0.0}],
        lr=LR, betas=BETAS, eps=1e-8,
    )
    data_g = torch.Generator().manual_seed(1_000_003 * args.seed + 17)
    hi = train_ids.numel() - CTX - 1
    print(f"{args.arch} seed {args.seed}: {params} parameters, {args.steps} steps, train {train_ids.numel()} tokens", flush=True)

    log = open(out / "log.csv", "w", newline="")
    w = csv.writer(log)
    w.writerow(["step", "kind", "loss", "lr", "seconds"])
    run_loss, run_n, train_loss = 0.0, 0, float("nan")
    t_train = time.time()
    step_times = []
    for step in range(args.steps):
        t0 = time.time()
        lr = lr_at(step, args.steps)
        for group in opt.param_groups:
            group["lr"] = lr
        starts = torch.randint(0, hi + 1, (BATCH,), generator=data_g)
        x = torch.stack([train_ids[s : s + CTX] for s in starts.tolist()])
        y = torch.stack([train_ids[s + 1 : s + CTX + 1] for s in starts.tolist()])
        logits, aux = m(x)
        ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        loss = ce + AUX_COEF * aux
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), CLIP)
        opt.step()
        step_times.append(time.time() - t0)
        run_loss += ce.item()
        run_n += 1
        if (step + 1) % TRAIN_LOG_EVERY == 0 or step + 1 == args.steps:
            train_loss = run_loss / run_n
            w.writerow([step + 1, "train", f"{train_loss:.5f}", f"{lr:.6g}", f"{time.time() - t_start:.1f}"])
            log.flush()
            run_loss, run_n = 0.0, 0
            if (step + 1) % 100 == 0 or step + 1 == args.steps:
                st = sum(step_times[-25:]) / len(step_times[-25:])
                print(f"  step {step + 1:5d}  train {train_loss:.4f}  aux {aux.item():.3f}  lr {lr:.2e}  {st * 1000:.0f} ms/step", flush=True)
        if (step + 1) % VALID_EVERY == 0 or step + 1 == args.steps:
            v = eval_nll(m, valid_ids, args.eval_windows)
            w.writerow([step + 1, "valid", f"{v:.5f}", f"{lr:.6g}", f"{time.time() - t_start:.1f}"])
            log.flush()
            print(f"  step {step + 1:5d}  valid {v:.4f} (ppl {math.exp(v):.2f})", flush=True)
    train_seconds = time.time() - t_train
    valid_nll = eval_nll(m, valid_ids, args.eval_windows)
    test_nll = eval_nll(m, test_ids, args.eval_windows)
    log.close()

    save_file(m.export_state(), str(out / "model.safetensors"), metadata={"format": "pt"})
    (out / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    shutil.copyfile(args.tokenizer, out / "tokenizer.json")
    step_time = sum(step_times) / max(1, len(step_times))
    result = {
        "arch": args.arch,
        "seed": args.seed,
        "steps": args.steps,
        "train_loss": round(train_loss, 5),
        "valid_ppl": round(math.exp(valid_nll), 4),
        "test_ppl": round(math.exp(test_nll), 4),
        "params": params,
        "seconds": round(time.time() - t_start, 1),
        "train_seconds": round(train_seconds, 1),
        "step_time_s": round(step_time, 4),
        "tokens_seen": args.steps * BATCH * CTX,
        "eval_windows": args.eval_windows or "all",
        "torch": torch.__version__,
    }
    (out / "result.json").write_text(json.dumps(result, indent=2) + "\n")
    print(f"measured step time {step_time * 1000:.1f} ms; result {json.dumps(result)}", flush=True)


if __name__ == "__main__":
    main()
