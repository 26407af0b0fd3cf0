#!/usr/bin/env python3
"""Generate tests/fixtures/hf_smollm2/: what Hugging Face transformers predicts on SmolLM2-135M.

The model is the Q8_0 GGUF that scripts/derive-models.ts derives and llama.cpp and cflow both run
(tests/fixtures/llamacpp/), loaded by transformers itself (`from_pretrained(dir, gguf_file=...)`,
which dequantizes every tensor with gguf-py: d * q, exact in float32) and run in float32 with eager
attention, in eval mode under no_grad, on the 1,067 teacher-forced tokens of
tests/fixtures/llamacpp/teacher_forced.json (llama.cpp's tokenizer, no BOS) in one causal forward
pass (positions 0..1066). teacher_forced.json holds, at every position, transformers' top-1 next
token, the runner-up (`top2`), the logit margin top-1 minus runner-up, the top-1 logit (`logit1`)
and the log-sum-exp of the whole row (`logsumexp`), so a test can compare logits and
log-probabilities without full rows; and how llama.cpp's top-1 (from the llamacpp fixture) agrees
with transformers' at the same positions.

Usage (Python is only needed to regenerate; nothing at run time or in CI depends on it):

    bash scripts/fetch-models.sh smollm2
    ./dev run --allow-read --allow-write --allow-ffi --allow-env scripts/derive-models.ts smollm2-q8_0
    pip install --target /tmp/pyhf torch==2.15.0 transformers==5.24.0 safetensors==0.8.0 numpy==2.4.6
    pip install --target /tmp/pyhf --no-deps gguf==0.19.0 accelerate==1.15.0 psutil==7.2.2
    PYTHONPATH=/tmp/pyhf python3 tests/reference/gen_hf_smollm2.py

(transformers refuses to load a GGUF file without accelerate installed, and needs gguf >= 0.10.)
The script checks those versions and the GGUF's sha256 before it runs.

Deterministic: CPU only, one thread, `torch.use_deterministic_algorithms(True)`, no sampling;
re-running with the same versions on the same machine gives a byte-identical file (about 30 s on
2 cores, half of it loading and dequantizing the GGUF). The JSON is
laid out by the repository's formatter (`./dev fmt`), which CI checks. The folder is committed and
must stay under 300 KB; the script fails if it grows past that.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import subprocess
import sys
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "fixtures" / "hf_smollm2"
LLAMACPP = ROOT / "tests" / "fixtures" / "llamacpp" / "teacher_forced.json"
GGUF_DIR = ROOT / "cache" / "models"
GGUF_NAME = "smollm2-135m-instruct.Q8_0.gguf"
LIMIT_BYTES = 300 * 1000
VERSIONS = {
    "torch": "2.15.0",
    "transformers": "5.24.0",
    "gguf": "0.19.0",
    "accelerate": "1.15.0",
    "numpy": "2.4.6",
}
# Positions where transformers' own margin is at least this count as "decided" (the threshold of
# tests/llamacpp_agreement_test.ts: larger than any margin change llama.cpp shows against itself).
DECIDED_LOGITS = 0.6


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def r5(x: float) -> float:
    return round(float(x), 5)


def main() -> None:
    for name, want in VERSIONS.items():
        got = importlib.metadata.version(name)
        if got != want:
            sys.exit(f"{name} {got} is installed; this generator pins {want}")
    ref = json.loads(LLAMACPP.read_text())
    gguf = GGUF_DIR / GGUF_NAME
    digest = sha256(gguf)
    if digest != ref["gguf_sha256"]:
        sys.exit(f"{gguf} has sha256 {digest}, not the {ref['gguf_sha256']} llama.cpp ran")
    tokens: list[int] = ref["tokens"]

    torch.set_default_dtype(torch.float32)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    model = AutoModelForCausalLM.from_pretrained(
        str(GGUF_DIR),
        gguf_file=GGUF_NAME,
        dtype=torch.float32,
        attn_implementation="eager",
    )
    model.eval()
    assert model.config._attn_implementation == "eager", model.config._attn_implementation
    assert all(p.dtype == torch.float32 for p in model.parameters())
    with torch.no_grad():
        logits = model(torch.tensor([tokens], dtype=torch.long), use_cache=False).logits[0]
    assert logits.dtype == torch.float32 and tuple(logits.shape) == (
        len(tokens),
        model.config.vocab_size,
    )
    top = torch.topk(logits, 2, dim=-1)
    lse = torch.logsumexp(logits, dim=-1)
    top1 = top.indices[:, 0].tolist()
    top2 = top.indices[:, 1].tolist()
    margin = [r5(a - b) for a, b in zip(top.values[:, 0].tolist(), top.values[:, 1].tolist())]

    # llama.cpp (Q8_0 weights and activations, f16 KV cache) against transformers (f32).
    n = len(tokens)
    agree = sum(a == b for a, b in zip(ref["top1"], top1))
    decided = [i for i in range(n) if margin[i] >= DECIDED_LOGITS]
    agree_decided = sum(ref["top1"][i] == top1[i] for i in decided)

    doc = {
        "generator": "tests/reference/gen_hf_smollm2.py",
        "versions": VERSIONS,
        "gguf": f"cache/models/{GGUF_NAME}",
        "gguf_sha256": digest,
        "dtype": "float32",
        "attn_implementation": "eager",
        "tokens_from": "tests/fixtures/llamacpp/teacher_forced.json",
        "llama_cpp_agreement": {
            "agree": agree,
            "positions": n,
            "rate": r5(agree / n),
            "decided_logits": DECIDED_LOGITS,
            "decided_agree": agree_decided,
            "decided_positions": len(decided),
        },
        "tokens": tokens,
        "top1": top1,
        "top2": top2,
        "margin": margin,
        "logit1": [r5(x) for x in top.values[:, 0].tolist()],
        "logsumexp": [r5(x) for x in lse.tolist()],
    }
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / "teacher_forced.json"
    path.write_text(json.dumps(doc) + "\n")
    # The repository's formatter owns the layout of committed JSON (`deno fmt --check` runs in CI).
    subprocess.run([str(ROOT / "dev"), "fmt", str(OUT)], check=True, capture_output=True)
    size = path.stat().st_size
    print(
        f"{path.relative_to(ROOT)}: {size} bytes; llama.cpp top-1 agrees with transformers at "
        f"{agree}/{n} ({100 * agree / n:.2f}%), at {agree_decided}/{len(decided)} where "
        f"transformers' margin >= {DECIDED_LOGITS}"
    )
    if size > LIMIT_BYTES:
        sys.exit(f"{path} is {size} bytes, over the {LIMIT_BYTES} limit")


if __name__ == "__main__":
    main()
