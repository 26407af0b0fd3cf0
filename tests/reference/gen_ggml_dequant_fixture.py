#!/usr/bin/env python3
"""Generate tests/fixtures/ggml_dequant/ with ggml's own Python port (gguf-py).

The fixture is an independent oracle for formats/ggml/dequantize_row.ts: for every ggml type cflow
dequantizes, deterministic raw bytes and the f32 values `gguf.quants.dequantize` gives for them.

Usage (Python is only needed to regenerate; nothing at run time depends on it):

    pip install --target /tmp/pydq gguf==0.19.0 numpy==2.4.6
    PYTHONPATH=/tmp/pydq python3 tests/reference/gen_ggml_dequant_fixture.py

Outputs (deterministic; re-running with the same versions gives identical files), per type T:
    t.bin          the raw ggml bytes (whole blocks)
    t.f32          gguf-py's dequantized values, little-endian f32
and
    index.json     per type: id, block/type size, element count, file names, sha256, the named
                   groups of blocks; plus `divergences` (elements where ggml's C code, emulated
                   here with numpy f32 arithmetic, gives other bits than gguf-py)
    README.md      how it was generated

Block groups (see `groups` in index.json):
  - quantized from f32 by gguf-py (non-K types, which gguf-py can quantize): realistic blocks;
  - random bytes whose f16 scale fields (d, m, dmin) are replaced by random finite f16 values
    spread over many binades, so every result is finite and the f32 rounding of `a*b - c` is
    exercised;
  - extreme bytes (all 0x00 / 0xff / 0x55 / 0xaa / 0x80 quants with the largest, smallest
    subnormal, negative and zero scales);
  - non-finite scales (Inf, NaN), which give Inf / NaN values; the Deno test compares NaN as NaN
    there, not bit for bit.
F32 / F16 / BF16 get random values plus every special class (signed zeros, subnormals, Inf,
quiet and signalling NaNs with payloads).
"""

from __future__ import annotations

import hashlib
import json
import platform
import sys
import textwrap
from importlib.metadata import version
from pathlib import Path

import numpy as np
from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType as T
from gguf.quants import dequantize, quantize

ROOT = Path(__file__).resolve().parents[2]
OUT_DIR = ROOT / "tests" / "fixtures" / "ggml_dequant"

# Offsets (bytes) of the f16 scale fields in each block, per ggml-common.h.
SCALE_FIELDS: dict[str, list[int]] = {
    "Q4_0": [0],
    "Q4_1": [0, 2],
    "Q5_0": [0],
    "Q5_1": [0, 2],
    "Q8_0": [0],
    "Q2_K": [80, 82],  # scales[16], qs[64], d, dmin
    "Q3_K": [108],  # hmask[32], qs[64], scales[12], d
    "Q4_K": [0, 2],  # d, dmin, scales[12], qs[128]
    "Q5_K": [0, 2],  # d, dmin, scales[12], qh[32], qs[128]
    "Q6_K": [208],  # ql[128], qh[64], scales[16], d
}
LEGACY = ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0"]
KQUANTS = ["Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"]


def sane_f16(rng: np.random.Generator, n: int, lo: int = -18, hi: int = 3) -> np.ndarray:
    """n random finite f16 bit patterns: |v| = 2^e * (1 + u), e uniform in [lo, hi), 1/4 negative."""
    e = rng.integers(lo, hi, n)
    u = rng.random(n)
    sign = np.where(rng.random(n) < 0.25, -1.0, 1.0)
    v = (sign * np.ldexp(1.0 + u, e)).astype(np.float16)
    assert np.all(np.isfinite(v))
    return v.view(np.uint16)


def set_f16(block: np.ndarray, offset: int, bits: int) -> None:
    block[offset] = bits & 0xFF
    block[offset + 1] = bits >> 8


def random_blocks(rng: np.random.Generator, name: str, n: int) -> np.ndarray:
    size = GGML_QUANT_SIZES[T[name]][1]
    blocks = rng.integers(0, 256, (n, size), dtype=np.uint8)
    for off in SCALE_FIELDS[name]:
        bits = sane_f16(rng, n)
        for b in range(n):
            set_f16(blocks[b], off, int(bits[b]))
    return blocks


def extreme_blocks(name: str) -> list[tuple[str, np.ndarray]]:
    size = GGML_QUANT_SIZES[T[name]][1]
    fields = SCALE_FIELDS[name]
    out = []
    # (label, fill byte, scale bits per field)
    cases = [
        ("zeros, d = 0", 0x00, [0x0000, 0x0000]),
        ("0xff quants, d = dmin = 65504", 0xFF, [0x7BFF, 0x7BFF]),
        ("0xff quants, d = -65504, dmin = 65504", 0xFF, [0xFBFF, 0x7BFF]),
        ("0x55 quants, d = 2^-24, dmin = -2^-24", 0x55, [0x0001, 0x8001]),
        ("0xaa quants, d = 2^-14, dmin = 0x03ff", 0xAA, [0x0400, 0x03FF]),
        ("0x80 quants, d = -0, dmin = 1", 0x80, [0x8000, 0x3C00]),
        ("0x0f quants, d = 1, dmin = 65504", 0x0F, [0x3C00, 0x7BFF]),
    ]
    for label, fill, scales in cases:
        b = np.full(size, fill, dtype=np.uint8)
        for off, bits in zip(fields, scales):
            set_f16(b, off, bits)
        out.append((label, b))
    return out


def nonfinite_blocks(rng: np.random.Generator, name: str) -> list[tuple[str, np.ndarray]]:
    fields = SCALE_FIELDS[name]
    out = []
    for label, d, m in [
        ("d = +Inf", 0x7C00, 0x3C00),
        ("d = -Inf, dmin = NaN", 0xFC00, 0x7E00),
        ("d = NaN", 0x7E00, 0x3800),
    ]:
        b = random_blocks(rng, name, 1)[0]
        set_f16(b, fields[0], d)
        if len(fields) > 1:
            set_f16(b, fields[1], m)
        out.append((label, b))
    return out


def quantized_blocks(rng: np.random.Generator, name: str, n: int) -> np.ndarray:
    scales = [1.0, 0.02, 3e-4, 40.0]
    rows = [rng.standard_normal(32) * scales[i % len(scales)] for i in range(n)]
    rows[1] = rows[1] + 5.0  # offset block for the min-based types
    x = np.stack(rows).astype(np.float32)
    q = quantize(x, T[name])
    assert q.dtype == np.uint8 and q.shape == (n, GGML_QUANT_SIZES[T[name]][1])
    return q


def build_quant(rng: np.random.Generator, name: str) -> tuple[np.ndarray, list[dict]]:
    groups: list[tuple[str, list[np.ndarray], bool]] = []
    if name in LEGACY:
        groups.append(("gguf-py quantize of f32 normals", list(quantized_blocks(rng, name, 12)), False))
        groups.append(("random bytes, sane f16 scales", list(random_blocks(rng, name, 24)), False))
    else:
        groups.append(("random bytes, sane f16 scales", list(random_blocks(rng, name, 10)), False))
    for label, b in extreme_blocks(name):
        groups.append((f"extreme: {label}", [b], False))
    nf = nonfinite_blocks(rng, name)
    groups.append(("non-finite scales: " + "; ".join(l for l, _ in nf), [b for _, b in nf], True))
    blocks, index, first = [], [], 0
    for label, bs, nonfinite in groups:
        index.append({"name": label, "first_block": first, "n_blocks": len(bs), "nonfinite": nonfinite})
        blocks.extend(bs)
        first += len(bs)
    return np.stack(blocks).astype(np.uint8), index


def special_f16() -> list[int]:
    return [
        0x0000, 0x8000, 0x0001, 0x8001, 0x0002, 0x01FF, 0x0200, 0x03FF, 0x83FF, 0x0400, 0x8400,
        0x3BFF, 0x3C00, 0x3C01, 0xBC00, 0x7BFF, 0xFBFF, 0x7C00, 0xFC00,
        0x7C01, 0x7C02, 0x7D00, 0x7DFF, 0xFC01, 0xFDFF,  # signalling NaNs
        0x7E00, 0x7E01, 0x7FFF, 0xFE00, 0xFFFF,  # quiet NaNs
    ]  # fmt: skip


def special_bf16() -> list[int]:
    return [
        0x0000, 0x8000, 0x0001, 0x8001, 0x007F, 0x0080, 0x8080, 0x3F80, 0xBF80, 0x7F7F, 0xFF7F,
        0x7F80, 0xFF80, 0x7F81, 0x7FBF, 0xFF81,  # signalling NaNs
        0x7FC0, 0x7FC1, 0x7FFF, 0xFFC0, 0xFFFF,  # quiet NaNs
    ]  # fmt: skip


def special_f32() -> list[int]:
    return [
        0x00000000, 0x80000000, 0x00000001, 0x80000001, 0x007FFFFF, 0x00800000, 0x3F800000,
        0xBF800000, 0x7F7FFFFF, 0xFF7FFFFF, 0x7F800000, 0xFF800000,
        0x7F800001, 0x7FBFFFFF, 0xFF800001, 0x7FA00000,  # signalling NaNs
        0x7FC00000, 0x7FC00001, 0x7FFFFFFF, 0xFFC00000, 0xFFFFFFFF,  # quiet NaNs
    ]  # fmt: skip


def build_float(rng: np.random.Generator, name: str) -> tuple[np.ndarray, list[dict]]:
    if name == "F32":
        special = np.array(special_f32(), dtype="<u4")
        rand = (rng.standard_normal(235) * np.exp(rng.uniform(-30, 30, 235))).astype("<f4").view("<u4")
    elif name == "F16":
        special = np.array(special_f16(), dtype="<u2")
        rand = rng.integers(0, 65536, 994, dtype=np.uint32).astype("<u2")
    else:
        special = np.array(special_bf16(), dtype="<u2")
        rand = rng.integers(0, 65536, 1003, dtype=np.uint32).astype("<u2")
    values = np.concatenate([special, rand])
    rand_name = "random values: normal * e^U(-30, 30)" if name == "F32" else "random bit patterns"
    index = [
        {"name": "special values", "first_block": 0, "n_blocks": len(special), "nonfinite": False},
        {"name": rand_name, "first_block": len(special), "n_blocks": len(rand), "nonfinite": False},
    ]
    return values.view(np.uint8), index


def ggml_c_fp16_to_fp32(h: np.ndarray) -> np.ndarray:
    """ggml's portable `ggml_compute_fp16_to_fp32` (ggml-impl.h), line by line, in numpy f32.

    This is what ggml-base's `ggml_fp16_to_fp32_row` runs. Its f32 multiply by 2^-112 quiets a
    signalling NaN (sets bit 22), which numpy's `astype(float32)` does not do.
    """
    w = h.astype(np.uint32) << np.uint32(16)
    sign = w & np.uint32(0x80000000)
    two_w = w + w
    exp_offset = np.uint32(0xE0 << 23)
    exp_scale = np.float32(2.0**-112)
    with np.errstate(all="ignore"):
        normalized = ((two_w >> np.uint32(4)) + exp_offset).view(np.float32) * exp_scale
        denormalized = ((two_w >> np.uint32(17)) | np.uint32(126 << 23)).view(np.float32) - np.float32(0.5)
    result = sign | np.where(two_w < np.uint32(1 << 27), denormalized.view(np.uint32), normalized.view(np.uint32))
    return result.astype(np.uint32)


def ggml_c_fp32_to_fp16(x: np.ndarray) -> np.ndarray:
    """ggml's portable `ggml_compute_fp32_to_fp16` (ggml-impl.h), line by line, in numpy f32.

    Round to nearest even through f32 additions; every NaN becomes 0x7e00 with the input's sign.
    """
    f = x.astype(np.float32)
    with np.errstate(all="ignore"):
        base = (np.abs(f) * np.float32(2.0**112)) * np.float32(2.0**-110)
    w = f.view(np.uint32)
    shl1_w = w + w
    sign = w & np.uint32(0x80000000)
    bias = np.maximum(shl1_w & np.uint32(0xFF000000), np.uint32(0x71000000))
    with np.errstate(all="ignore"):
        base = ((bias >> np.uint32(1)) + np.uint32(0x07800000)).view(np.float32) + base
    bits = base.view(np.uint32)
    nonsign = ((bits >> np.uint32(13)) & np.uint32(0x7C00)) + (bits & np.uint32(0x0FFF))
    out = (sign >> np.uint32(16)) | np.where(shl1_w > np.uint32(0xFF000000), np.uint32(0x7E00), nonsign)
    return out.astype(np.uint16)


def ggml_c_fp32_to_bf16(x: np.ndarray) -> np.ndarray:
    """ggml's `ggml_compute_fp32_to_bf16`: quiet NaNs, otherwise round to nearest even."""
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    out = np.where(nan, (u >> 16) | 64, (u + (0x7FFF + ((u >> 16) & 1))) >> 16)
    return out.astype(np.uint16)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def markdown(*blocks: str) -> str:
    """Join blocks with blank lines, wrapping prose at 100 columns like `deno fmt`."""
    out = []
    for block in blocks:
        if block.startswith(("#", "```", "|", "- ")):
            out.append(block)
        else:
            out.append(textwrap.fill(block, width=100, break_long_words=False, break_on_hyphens=False))
    return "\n\n".join(out) + "\n"


def table(rows: list[tuple[str, ...]]) -> str:
    """A Markdown table padded the way `deno fmt` pads it."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |" for r in rows]
    lines.insert(1, "| " + " | ".join("-" * w for w in widths) + " |")
    return "\n".join(lines)


def main() -> None:
    rng = np.random.default_rng(20250611)
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    types: dict[str, dict] = {}
    divergences: list[dict] = []
    files: dict[str, bytes] = {}
    for name in ["F32", "F16", "BF16", *LEGACY, *KQUANTS]:
        qtype = T[name]
        block_size, type_size = GGML_QUANT_SIZES[qtype]
        if name in ("F32", "F16", "BF16"):
            raw, groups = build_float(rng, name)
        else:
            blocks, groups = build_quant(rng, name)
            raw = blocks.reshape(-1)
        n_blocks = raw.size // type_size
        assert raw.size == n_blocks * type_size
        with np.errstate(all="ignore"):  # Inf * 0 and NaN scales on purpose
            y = dequantize(raw.copy(), qtype)
        y = np.asarray(y, dtype=np.float32).reshape(-1)
        assert y.dtype == np.float32 and y.size == n_blocks * block_size, (name, y.shape)
        for g in groups:
            if not g["nonfinite"] and name not in ("F32", "F16", "BF16"):
                s = g["first_block"] * block_size
                assert np.all(np.isfinite(y[s : s + g["n_blocks"] * block_size])), (name, g["name"])
        if name == "F16":
            c = ggml_c_fp16_to_fp32(raw.view("<u2"))
            py = y.view(np.uint32)
            elements = [
                {"index": int(i), "input_bits": int(raw.view("<u2")[i]), "gguf_py_bits": int(py[i]), "ggml_c_bits": int(c[i])}
                for i in np.nonzero(c != py)[0]
            ]
            divergences.append(
                {
                    "what": "dequantize F16: signalling NaN inputs",
                    "why": "ggml's ggml_compute_fp16_to_fp32 multiplies by 2^-112 in f32, which quiets a"
                    " signalling NaN (sets f32 bit 22); numpy's float16->float32 cast keeps it signalling",
                    "type": "F16",
                    "elements": elements,
                }
            )
        lower = name.lower()
        bin_name, f32_name = f"{lower}.bin", f"{lower}.f32"
        files[bin_name] = raw.tobytes()
        files[f32_name] = y.astype("<f4").tobytes()
        types[name] = {
            "id": int(qtype),
            "block_size": block_size,
            "type_size": type_size,
            "n_blocks": n_blocks,
            "n_elements": n_blocks * block_size,
            "bytes": bin_name,
            "expected": f32_name,
            "sha256": {bin_name: sha256(files[bin_name]), f32_name: sha256(files[f32_name])},
            "groups": groups,
        }
    # quantize F32 -> F16 / BF16 (the inputs are f32.bin's values, specials included).
    x = np.frombuffer(files["f32.bin"], dtype="<f4")
    quantized: dict[str, dict] = {}
    for name, emulate in [("F16", ggml_c_fp32_to_fp16), ("BF16", ggml_c_fp32_to_bf16)]:
        with np.errstate(all="ignore"):  # overflow to Inf on purpose
            q = np.asarray(quantize(x.copy(), T[name])).reshape(-1)
        q = q.view("<u2") if q.dtype == np.uint8 else q.view("<u2")
        assert q.size == x.size, (name, q.shape)
        fname = f"f32_to_{name.lower()}.bin"
        files[fname] = q.astype("<u2").tobytes()
        quantized[name] = {"input": "f32.bin", "output": fname, "sha256": sha256(files[fname])}
        c = emulate(x)
        elements = [
            {"index": int(i), "input_bits": int(x.view("<u4")[i]), "gguf_py_bits": int(q[i]), "ggml_c_bits": int(c[i])}
            for i in np.nonzero(c != q)[0]
        ]
        if elements:
            divergences.append(
                {
                    "what": f"quantize F32 -> {name}: NaN inputs",
                    "why": "ggml's ggml_compute_fp32_to_fp16 turns every NaN into 0x7e00 with the input's"
                    " sign; numpy's float32->float16 cast keeps the top payload bits (and a signalling"
                    " NaN's quiet bit clear)",
                    "type": name,
                    "elements": elements,
                }
            )

    for fname, data in files.items():
        (OUT_DIR / fname).write_bytes(data)

    versions = {
        "gguf": version("gguf"),
        "numpy": np.__version__,
        "python": platform.python_version(),
        "machine": platform.machine(),
    }
    index = {
        "generator": "tests/reference/gen_ggml_dequant_fixture.py",
        "versions": versions,
        "types": types,
        "quantize": quantized,
        "divergences": divergences,
    }
    (OUT_DIR / "index.json").write_text(json.dumps(index, indent=2) + "\n")

    rows = [("type", "blocks", "elements", "`.bin` bytes", "`.f32` bytes")]
    for name, t in types.items():
        rows.append(
            (name, str(t["n_blocks"]), str(t["n_elements"]), str(len(files[t["bytes"]])), str(len(files[t["expected"]])))
        )
    readme = markdown(
        "# ggml_dequant fixture",
        "Independent oracle for `formats/ggml/dequantize_row.ts`: raw ggml bytes for every type cflow"
        " dequantizes, and the f32 values ggml's own Python port, gguf-py, gives for them"
        " (`gguf.quants.dequantize(bytes, GGMLQuantizationType.X)`). Checked bit for bit by"
        " `formats/ggml/dequantize_row_test.ts`.",
        "Generated with:",
        "```sh\n"
        f"pip install --target /tmp/pydq gguf=={versions['gguf']} numpy=={versions['numpy']}\n"
        "PYTHONPATH=/tmp/pydq python3 tests/reference/gen_ggml_dequant_fixture.py\n"
        "```",
        f"gguf {versions['gguf']}, numpy {versions['numpy']}, Python {versions['python']} on"
        f" {versions['machine']}. Everything is deterministic (`numpy.random.default_rng(20250611)`)."
        " Python is not needed to run the tests.",
        "For each type `t`: `t.bin` holds whole blocks of raw bytes and `t.f32` the expected values"
        " (little-endian f32). `index.json` lists, per type, the id, block and type sizes, the"
        " sha256 of both files and the named groups of blocks: blocks quantized by gguf-py (legacy"
        " types), random bytes whose f16 scale fields are set to random finite values, extreme"
        " blocks (largest, subnormal, negative and zero scales with all-0x00 / 0xff / 0x55 / 0xaa /"
        " 0x80 quants) and blocks with Inf / NaN scales (`nonfinite`: compared as NaN, not bit for"
        " bit). For F32, F16 and BF16 an element is a block; their `special values` group covers"
        " signed zeros, subnormals, infinities and quiet and signalling NaNs with payloads.",
        table(rows),
        "`divergences` lists elements where ggml's C code gives other bits than gguf-py; the"
        " generator finds them by running ggml's portable `ggml_compute_fp16_to_fp32` line by line"
        " in numpy f32 arithmetic. The only ones are F16 signalling NaNs (exponent 31, mantissa bit"
        " 9 clear): ggml's multiply by 2^-112 quiets them (sets f32 bit 22), numpy's cast keeps them"
        " signalling. cflow follows ggml.",
    )
    (OUT_DIR / "README.md").write_text(readme)
    total = sum(p.stat().st_size for p in OUT_DIR.iterdir())
    print(f"wrote {len(types)} types, {len(divergences)} divergences to {OUT_DIR} ({total} bytes)", file=sys.stderr)


if __name__ == "__main__":
    main()
