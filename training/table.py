#!/usr/bin/env python3
"""The results table of docs/ARCHITECTURES.md, from training/out/results.json and the analyze JSONs
training/export.sh writes. Prints markdown."""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "training/out"
ROWS = [
    ("gemma4_parallel", "ParallelSqrt2", 0, 0),
    ("arch1_decoupled_streams", "DecoupledStreams", 0, 0),
    ("arch2_4_combined", "DelayedSum", 1, 2),
    ("arch2_4_sync", "DelayedSum", 1, 0),
    ("arch3_pipeline_registers", "PipelineRegisters", 0, 0),
    ("arch4_async_experts", "AsyncExperts", 0, 2),
    ("arch5_fixed_point", "FixedPoint", 0, 0),
]
MIB = 2**20


def main() -> None:
    results = json.loads((OUT / "results.json").read_text())
    ppl = {(r["arch"], r["seed"]): r for r in results}
    print(
        "| architecture | style | dense_delay | expert_delay | test ppl (seed 1) | test ppl (seed 2) "
        "| params | .cflow Q4_0 bytes | naive / critical MiB per token (paper Q4) "
        "| naive / critical MiB per token (the file's Q4_0 tiles) | reduction |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, style, dd, de in ROWS:
        a = json.loads((OUT / f"analyze-paper-{name}.json").read_text())
        f = json.loads((OUT / f"analyze-{name}.json").read_text())
        r1 = ppl[(name, 1)]
        r2 = ppl.get((name, 2))
        size = (ROOT / f"models/builtin/{name}.cflow").stat().st_size
        s2 = "" if r2 is None else "%.2f" % r2["test_ppl"]
        print(
            f"| `{name}` | {style} | {dd} | {de} | {r1['test_ppl']:.2f} | "
            f"{s2} | {r1['params']:,} | {size:,} | "
            f"{a['naive_bytes'] / MIB:.3f} / {a['critical_bytes'] / MIB:.3f} | "
            f"{f['naive_bytes'] / MIB:.3f} / {f['critical_bytes'] / MIB:.3f} | {a['reduction']:.2f}x |"
        )


if __name__ == "__main__":
    main()
