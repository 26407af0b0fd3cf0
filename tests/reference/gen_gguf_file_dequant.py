#!/usr/bin/env python3
"""Generate tests/fixtures/ggml_dequant/files.json: for every tensor of the real GGUF files the
suite runs, the SHA-256 of gguf-py's dequantization of it (f32, little-endian, row-major).

The oracle for "conversion is lossless": convert/lossless_files_test.ts converts each file with
the default (`--quant auto`), dequantizes every tensor from the tiles and compares hashes.

Usage (Python is only needed to regenerate; nothing at run time depends on it):

    pip install --target /tmp/pydq gguf==0.19.0 numpy==2.4.6
    bash scripts/fetch-models.sh smollm2 gemma3 qwen05b qwen15b
    PYTHONPATH=/tmp/pydq python3 tests/reference/gen_gguf_file_dequant.py

Re-running with the same versions gives an identical file.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
MODELS = os.environ.get("CFLOW_MODELS", os.path.join(ROOT, "cache", "models"))
FILES = [
    "smollm2-135m-instruct.Q4_1.gguf",
    "gemma-3-270m-q4_k_m.gguf",
    "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
]


def file_sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def main() -> None:
    out: dict[str, object] = {
        "generator": "tests/reference/gen_gguf_file_dequant.py",
        "gguf_py": "0.19.0",
        "numpy": np.__version__,
        "files": {},
    }
    for name in FILES:
        path = os.path.join(MODELS, name)
        reader = GGUFReader(path)
        tensors = {}
        for t in reader.tensors:
            values = dequantize(t.data, t.tensor_type).astype("<f4", copy=False)
            tensors[t.name] = {
                "type": t.tensor_type.name,
                "shape": [int(x) for x in t.shape],
                "sha256": hashlib.sha256(np.ascontiguousarray(values).tobytes()).hexdigest(),
            }
        out["files"][name] = {
            "size": os.path.getsize(path),
            "sha256": file_sha256(path),
            "tensors": tensors,
        }
        print(f"{name}: {len(tensors)} tensors", file=sys.stderr)
    dst = os.path.join(ROOT, "tests", "fixtures", "ggml_dequant", "files.json")
    with open(dst + ".tmp", "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
        f.write("\n")
    os.replace(dst + ".tmp", dst)


if __name__ == "__main__":
    main()
