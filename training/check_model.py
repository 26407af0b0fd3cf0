#!/usr/bin/env python3
"""Prove that training/model.py computes the reference's math: for every fixture folder of
tests/fixtures/pipeline_native/ (config.json + model.safetensors, written by
tests/reference/gen_pipeline_native.py), run PipelineNative on the fixture's tokens and compare
with trace.json's logits (`logits_f32_b64`, float32 [seq, vocab]): the largest difference must be
within 1e-4 of the largest |logit|, and the argmax identical. Also checks that the module's
parameter names are exactly the file's tensor names (strict load).

    PYTHONPATH=/tmp/pyhf python3 training/check_model.py
"""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file

sys.path.insert(0, str(Path(__file__).resolve().parent))
from model import PipelineNative  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "tests/fixtures/pipeline_native"
TOL = 1e-4


def main() -> None:
    torch.manual_seed(0)
    folders = sorted(p for p in FIX.iterdir() if (p / "trace.json").exists())
    assert len(folders) >= 8, folders
    worst = 0.0
    for f in folders:
        cfg = json.loads((f / "config.json").read_text())
        w = load_file(str(f / "model.safetensors"))
        m = PipelineNative(cfg)
        m.load_state_dict(w, strict=True)
        assert set(m.state_dict()) == set(w), (f.name, set(m.state_dict()) ^ set(w))
        trace = json.loads((f / "trace.json").read_text())
        T, V = trace["shape"]
        want = np.frombuffer(base64.b64decode(trace["logits_f32_b64"]), dtype="<f4").reshape(T, V)
        m.eval()
        with torch.no_grad():
            got, _ = m(torch.tensor([trace["tokens"]]))
            # batched: the same sequence next to another one must give the same rows
            other = torch.tensor([list(reversed(trace["tokens"]))])
            both, _ = m(torch.cat([other, torch.tensor([trace["tokens"]])]))
        batch_rel = float((both[1] - got[0]).abs().max() / got[0].abs().max())
        assert batch_rel < 1e-5, (f.name, batch_rel)
        got = got[0].numpy()
        rel = float(np.abs(got - want).max() / np.abs(want).max())
        same_argmax = bool((got.argmax(-1) == want.argmax(-1)).all())
        worst = max(worst, rel)
        ok = rel <= TOL and same_argmax
        print(f"{f.name:26s} {cfg['architecture']:26s} max |diff| / max |logit| = {rel:.2e}  argmax {'same' if same_argmax else 'DIFFERENT'}  {'ok' if ok else 'FAIL'}")
        assert ok, f.name
    print(f"all {len(folders)} fixtures match the reference (worst {worst:.2e} <= {TOL})")


if __name__ == "__main__":
    main()
