#!/usr/bin/env python3
"""Generate tests/fixtures/ggml_quant/ with ggml's own Python port (gguf-py).

The fixture is an independent oracle for reference/quant.ts and formats/ggml/quantize_row.ts: the
f32 input blocks and the Q8_0 / Q4_0 / Q4_1 / Q5_0 / Q5_1 bytes that `gguf.quants.quantize`
produces for them.

Usage (Python is only needed to regenerate; nothing at run time depends on it):

    pip install --target /tmp/pyref gguf==0.19.0 numpy==2.4.6
    PYTHONPATH=/tmp/pyref python3 tests/reference/gen_ggml_quant_fixture.py

Outputs (deterministic; re-running with the same versions gives identical files):
    input_f32.bin  little-endian f32, N_BLOCKS * 32 values
    q8_0.bin       gguf-py Q8_0 bytes (34 per block)
    q4_0.bin       gguf-py Q4_0 bytes (18 per block)
    q4_1.bin       gguf-py Q4_1 bytes (20 per block)
    q5_0.bin       gguf-py Q5_0 bytes (22 per block)
    q5_1.bin       gguf-py Q5_1 bytes (24 per block)
    fixture.json   the same six files in base64 plus block names, sizes and sha256, so that
                   Deno tests can import it without --allow-read; also `divergences` (Q4_0) and
                   `divergences_q4_1_q5` (Q4_1, Q5_0, Q5_1), inputs on which ggml's C rule (and
                   cflow) deliberately differs from gguf-py, with the bytes of both
    README.md      how it was generated
"""

from __future__ import annotations

import base64
import hashlib
import json
import platform
import sys
import textwrap
from importlib.metadata import version
from pathlib import Path

import numpy as np
from gguf.constants import GGMLQuantizationType
from gguf.quants import quantize

QK = 32
# The types beyond Q8_0 / Q4_0 that the fixture covers (for formats/ggml/quantize_row.ts).
AFFINE_TYPES = {
    "q4_1": GGMLQuantizationType.Q4_1,
    "q5_0": GGMLQuantizationType.Q5_0,
    "q5_1": GGMLQuantizationType.Q5_1,
}
BLOCK_BYTES = {"q4_1": 20, "q5_0": 22, "q5_1": 24}
AFFINE_LAYOUT = {
    "q4_1": "f16 d, f16 min, 16 × packed nibbles",
    "q5_0": "f16 d, u32 fifth bits, 16 × packed nibbles",
    "q5_1": "f16 d, f16 min, u32 fifth bits, 16 × packed nibbles",
}
ROOT = Path(__file__).resolve().parents[2]
OUT_DIR = ROOT / "tests" / "fixtures" / "ggml_quant"


def f32(values) -> np.ndarray:
    a = np.asarray(values, dtype=np.float32)
    assert a.shape == (QK,), a.shape
    return a


def build_blocks() -> list[tuple[str, np.ndarray]]:
    rng = np.random.default_rng(1234)
    blocks: list[tuple[str, np.ndarray]] = []

    # Typical weights / activations at many magnitudes.
    scales = [1.0, 0.02, 0.5, 7.0, 1e-3, 250.0, 3e4, 1e-5]
    for i in range(64):
        s = scales[i % len(scales)]
        blocks.append((f"normal*{s:g} #{i}", f32(rng.standard_normal(QK) * s)))
    for i in range(16):
        blocks.append((f"student_t(2)*0.1 #{i}", f32(rng.standard_t(2, QK) * 0.1)))
    for i in range(16):
        b = rng.standard_normal(QK) * 0.01
        b[rng.integers(QK)] = rng.choice([-5.0, 5.0])
        blocks.append((f"outlier #{i}", f32(b)))
    for i in range(16):
        blocks.append((f"uniform(-1,1) #{i}", f32(rng.uniform(-1.0, 1.0, QK))))

    # Edges.
    blocks.append(("all +0", f32(np.zeros(QK))))
    mixed_zero = np.zeros(QK, dtype=np.float32)
    mixed_zero[1::2] = -0.0  # first element +0: gguf-py and ggml C agree (d = -0)
    blocks.append(("zeros, +0 first, -0 at odd indices", mixed_zero))
    blocks.append(("constant 1", f32(np.ones(QK))))
    blocks.append(("constant -3.25", f32(np.full(QK, -3.25))))
    single = np.zeros(QK)
    single[17] = -0.75
    blocks.append(("single nonzero -0.75 at 17", f32(single)))

    # Q8_0 half-way rounding: amax 127 => d = 1, id = 1, so x * id = k + 0.5 exactly.
    halves = np.array([127.0] + [k + 0.5 for k in range(-16, 15)])
    blocks.append(("q8 halves (d=1)", f32(halves)))
    blocks.append(("q8 halves negated (d=1)", f32(-halves)))

    # Q4_0: ties for the largest |x| with opposite signs (the first one wins).
    t = rng.standard_normal(QK) * 0.3
    t[5], t[9] = -2.0, 2.0
    blocks.append(("q4 tie -2 first", f32(t)))
    t = t.copy()
    t[5], t[9] = 2.0, -2.0
    blocks.append(("q4 tie +2 first", f32(t)))

    # Q4_0 nibble boundaries: max = -8 => d = 1, id = 1, x + 8.5 hits integers and .5s.
    grid = np.arange(-8.0, 8.0, 0.5)  # 32 values, -8 first
    grid_with_8 = grid.copy()
    grid_with_8[31] = 8.0  # |8| ties with the max, clamps to 15
    blocks.append(("q4 grid max=-8", f32(grid_with_8)))
    blocks.append(("q4 grid max=+8", f32(-grid_with_8)))
    blocks.append(("q4 quarter steps max=-8", f32(np.concatenate([[-8.0], np.arange(-7.75, 0.0, 0.25)]))))

    # Q4_0: x * id + 8.5 is itself rounded to f32 before truncation, so x one f32 ulp below
    # m - 8.5 can still give nibble m (x = 0.5 - 2^-25: 8.99999997 rounds to 9.0).
    near = [-8.0, 0.0]
    for m in range(1, 16):
        c = np.float32(m - 8.5)
        near += [np.nextafter(c, np.float32(-np.inf)), np.nextafter(c, np.float32(np.inf))]
    blocks.append(("q4 one ulp around nibble boundaries max=-8", f32(near)))

    # f16 round-to-nearest-even ties for the stored scale d.
    for k in (1, 3):
        v = np.float32(127.0 * (1.0 + k * 2.0**-11))
        b = np.linspace(-1.0, 1.0, QK) * v
        b[0] = v
        blocks.append((f"q8 d = 1+{k}*2^-11 (f16 tie)", f32(b)))
        w = np.float32(-8.0 * (1.0 + k * 2.0**-11))
        b = np.linspace(-1.0, 1.0, QK) * abs(w)
        b[0] = w
        blocks.append((f"q4 d = 1+{k}*2^-11 (f16 tie)", f32(b)))

    # Tiny magnitudes: f16-subnormal d, tiny-but-normal f32, 1/d overflow in Q8_0 (amax < ~3.7e-37)
    # and Q4_0 (|max| < ~2.35e-38), and f32 subnormal inputs.
    for s in (1e-6, 1e-30, 1e-37, 5e-39, 1e-42):
        b = rng.standard_normal(QK) * s
        b[3] = 0.0
        blocks.append((f"tiny normal*{s:g}", f32(b)))
    # Huge: d overflows f16 to +Inf.
    blocks.append(("huge normal*1e7 (f16 d = Inf)", f32(rng.standard_normal(QK) * 1e7)))
    blocks += build_affine_blocks(rng)
    return blocks


def build_affine_blocks(rng: np.random.Generator) -> list[tuple[str, np.ndarray]]:
    """Blocks aimed at Q4_1 / Q5_1 (d = (max - min) / 15 or 31, min stored) and Q5_0
    (d = max / -16). Appended after the Q8_0 / Q4_0 blocks so that those stay as they were."""
    blocks: list[tuple[str, np.ndarray]] = []
    # Realistic, but not centred: one-signed and offset blocks, where the stored min matters.
    for i in range(4):
        blocks.append((f"uniform(0,1) #{i}", f32(rng.uniform(0.0, 1.0, QK))))
        blocks.append((f"-uniform(0,2) #{i}", f32(-rng.uniform(0.0, 2.0, QK))))
        blocks.append((f"3 + normal*0.01 #{i}", f32(3.0 + rng.standard_normal(QK) * 0.01)))
        blocks.append((f"abs(normal)*0.05 #{i}", f32(np.abs(rng.standard_normal(QK)) * 0.05)))
    # One outlier on each side of an offset block.
    b = rng.standard_normal(QK) * 0.01 + 0.5
    b[7] = 40.0
    blocks.append(("0.5 + normal*0.01, +40 at 7", f32(b)))
    b = rng.standard_normal(QK) * 0.01 + 0.5
    b[30] = -40.0
    blocks.append(("0.5 + normal*0.01, -40 at 30", f32(b)))

    # Ties at the rounding boundaries with d = 1 exactly, and one f32 ulp either side:
    # Q4_1 min 0, max 15 (x - min + 0.5 hits integers); Q5_1 min 0, max 31; Q5_0 max -16.
    grid = [0.0, 15.0] + [k + 0.5 for k in range(15)] + [k + 0.25 for k in range(15)]
    blocks.append(("q4_1 half-step grid min=0 max=15 (d=1)", f32(grid)))
    grid = [0.0, 31.0] + [k + 0.5 for k in range(30)]
    blocks.append(("q5_1 half-step grid min=0 max=31 (d=1)", f32(grid)))
    for top, step in ((15.0, 1), (31.0, 2)):  # Q5_1: every other boundary
        near = [0.0, top]
        for m in range(1, 16):
            c = np.float32(step * m - 0.5)
            near += [np.nextafter(c, np.float32(-np.inf)), np.nextafter(c, np.float32(np.inf))]
        blocks.append((f"q{4 if top == 15 else 5}_1 one ulp around boundaries min=0 max={top:g}",
                       f32(near)))
    grid = np.arange(-16.0, 16.0) + np.array([0.0] + [0.5] * 31)  # -16, -14.5, ..., 15.5
    blocks.append(("q5_0 grid max=-16 (d=1)", f32(grid)))
    blocks.append(("q5_0 grid max=+16 (d=-1)", f32(-grid)))
    near = [-16.0, 16.0]  # |16| ties with the max: the first one wins; +16 clamps to 31
    for m in range(1, 16):
        c = np.float32(2 * m - 16.5)
        near += [np.nextafter(c, np.float32(-np.inf)), np.nextafter(c, np.float32(np.inf))]
    blocks.append(("q5_0 one ulp around boundaries max=-16", f32(near)))
    t = rng.standard_normal(QK) * 0.3
    t[4], t[20] = 2.0, -2.0
    blocks.append(("q5_0 tie +2 first", f32(t)))
    t = t.copy()
    t[4], t[20] = -2.0, 2.0
    blocks.append(("q5_0 tie -2 first", f32(t)))

    # f16 round-to-nearest-even ties for d (min 0) and for the stored min.
    for k in (1, 3):
        v = np.float32(1.0 + k * 2.0**-11)
        blocks.append((f"q4_1 d = 1+{k}*2^-11 (f16 tie)", f32(np.linspace(0.0, 15.0 * v, QK))))
        blocks.append((f"q5_1 d = 1+{k}*2^-11 (f16 tie)", f32(np.linspace(0.0, 31.0 * v, QK))))
        blocks.append((f"q5_0 d = 1+{k}*2^-11 (f16 tie)", f32(np.linspace(-16.0 * v, 15.0, QK))))
        m = np.float32(-(1.0 + k * 2.0**-11))
        blocks.append((f"min = {m} (f16 tie)", f32(np.linspace(m, 1.0, QK))))

    # Equal values: all-negative constant, two-valued blocks, and signed zeros as min / max.
    blocks.append(("constant -1e-3", f32(np.full(QK, -1e-3))))
    two = np.full(QK, 0.25)
    two[::3] = -0.25
    blocks.append(("two values +-0.25", f32(two)))
    z = np.linspace(0.0, 1.0, QK)
    z[0], z[5], z[9] = 0.5, -0.0, 0.0
    blocks.append(("min is zero: -0 before +0", f32(z)))
    z = z.copy()
    z[5], z[9] = 0.0, -0.0
    blocks.append(("min is zero: +0 before -0", f32(z)))
    z = -np.linspace(0.0, 1.0, QK)
    z[0], z[5], z[9] = -0.5, 0.0, -0.0
    blocks.append(("max is zero: +0 before -0", f32(z)))

    # Range edges: min beyond f16 (m = -Inf), max - min overflowing f32 (d = Inf, id = 0),
    # and a large offset with a tiny range (x - min loses bits).
    blocks.append(("min -1e5 (f16 m = -Inf)", f32(np.linspace(-1e5, 10.0, QK))))
    wide = np.linspace(-3e38, 3e38, QK)
    blocks.append(("range 6e38 (max - min = Inf)", f32(wide)))
    blocks.append(("1000 + normal*1e-3", f32(1000.0 + rng.standard_normal(QK) * 1e-3)))
    # Tiny range on a normal offset (f16-subnormal or zero d), and tiny values where d is nonzero
    # but 1 / d = Inf.
    for s in (1e-6, 3e-8):
        b = np.float32(0.125) + np.float32(s) * np.arange(QK, dtype=np.float32)
        blocks.append((f"tiny range 0.125 + k*{s:g}", f32(b)))
    for s in (1e-37, 5e-39):
        blocks.append((f"tiny uniform(0,1)*{s:g}", f32(rng.uniform(0.0, 1.0, QK) * s)))
    return blocks


def quant_bytes(x: np.ndarray, qtype: GGMLQuantizationType) -> bytes:
    with np.errstate(all="ignore"):  # the tiny/huge edge blocks overflow on purpose
        q = quantize(x.reshape(1, -1), qtype)
    assert q.dtype == np.uint8
    return q.tobytes()


def c_header(name: str, x: np.ndarray) -> bytes:
    """The f16 header (d, and min for Q4_1 / Q5_1) that ggml's C quantize_row_*_ref writes.

    C picks max / min with strict comparisons in element order, so among equal values (+0 and
    -0 included) the first one wins; gguf-py's `blocks.min()` / `blocks.max()` and
    `abs(blocks).argmax()` can pick another zero, and then its header differs from C's in the
    sign of a zero (the quants never do: every other step is the same f32 arithmetic). The
    generator derives C's header here, with numpy f32 scalar arithmetic; the result was checked
    against ggml-quants.c (llama_cpp_python 0.3.36 sdist) built with gcc on every fixture block.
    """
    with np.errstate(over="ignore"):  # huge blocks: d or min is ±Inf in f16, as in C
        return _c_header(name, x.astype(np.float32))


def _c_header(name: str, x: np.ndarray) -> bytes:
    if name == "q5_0":
        amax, vmax = np.float32(0.0), np.float32(0.0)
        for v in x:
            if amax < abs(v):
                amax, vmax = abs(v), v
        return np.array([vmax / np.float32(-16)], dtype=np.float32).astype("<f2").tobytes()
    vmin, vmax = np.float32(np.finfo(np.float32).max), np.float32(-np.finfo(np.float32).max)
    for v in x:
        if v < vmin:
            vmin = v
        if v > vmax:
            vmax = v
    d = np.float32(vmax - vmin) / np.float32(15 if name == "q4_1" else 31)
    return np.array([d, vmin], dtype=np.float32).astype("<f2").tobytes()


def c_divergences(names: list[str], x: np.ndarray, affine: dict[str, bytes]) -> list[dict]:
    """Blocks of the fixture, and one extra input, on which C's header differs from gguf-py's."""
    out = []
    for name in AFFINE_TYPES:
        size = BLOCK_BYTES[name]
        for i, block_name in enumerate(names):
            py = affine[name][i * size:(i + 1) * size]
            head = c_header(name, x[i * QK:(i + 1) * QK])
            if py[:len(head)] != head:
                out.append({"name": f"{name} block {i}: {block_name}", "format": name, "block": i,
                            "gguf_py": b64(py), "ggml_c": b64(head + py[len(head):])})
    negzero = np.zeros(QK, dtype="<f4")
    negzero[0] = -0.0
    for name, qtype in AFFINE_TYPES.items():
        py = quant_bytes(negzero, qtype)
        head = c_header(name, negzero)
        assert py[:len(head)] != head, name
        out.append({"name": f"{name} all-zero block with -0.0 first", "format": name,
                    "input_f32": b64(negzero.tobytes()), "gguf_py": b64(py),
                    "ggml_c": b64(head + py[len(head):])})
    return out


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def markdown(*blocks: str) -> str:
    """Join blocks with blank lines, wrapping prose at 100 columns like `deno fmt`."""
    out = []
    for block in blocks:
        if block.startswith(("#", "```", "|")):
            out.append(block)
        else:
            out.append(
                textwrap.fill(block, width=100, break_long_words=False, break_on_hyphens=False)
            )
    return "\n\n".join(out) + "\n"


def table(rows: list[tuple[str, ...]]) -> str:
    """A Markdown table padded the way `deno fmt` pads it."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |" for r in rows]
    lines.insert(1, "| " + " | ".join("-" * w for w in widths) + " |")
    return "\n".join(lines)


def main() -> None:
    blocks = build_blocks()
    x = np.concatenate([b for _, b in blocks]).astype("<f4")
    assert np.all(np.isfinite(x))
    inp = x.tobytes()
    q8 = quant_bytes(x, GGMLQuantizationType.Q8_0)
    q4 = quant_bytes(x, GGMLQuantizationType.Q4_0)
    affine = {name: quant_bytes(x, qtype) for name, qtype in AFFINE_TYPES.items()}
    n_blocks = len(blocks)
    assert len(q8) == n_blocks * 34 and len(q4) == n_blocks * 18
    for name, data in affine.items():
        assert len(data) == n_blocks * BLOCK_BYTES[name], name

    # Inputs on which ggml's C quantize_row_q4_0_ref differs from gguf-py: an all-zero block
    # whose first element is -0.0. C keeps max = +0.0 (d = -0.0, f16 0x8000); gguf-py takes
    # max = x[argmax |x|] = x[0] = -0.0 (d = +0.0, f16 0x0000).
    negzero = np.zeros(QK, dtype="<f4")
    negzero[0] = -0.0
    divergences = [
        {
            "name": "q4_0 all-zero block with -0.0 first",
            "format": "q4_0",
            "input_f32": b64(negzero.tobytes()),
            "gguf_py": b64(quant_bytes(negzero, GGMLQuantizationType.Q4_0)),
            "gguf_py_q8_0": b64(quant_bytes(negzero, GGMLQuantizationType.Q8_0)),
        },
    ]

    divergences_q4_1_q5 = c_divergences([n for n, _ in blocks], x, affine)

    versions = {
        "gguf": version("gguf"),
        "numpy": np.__version__,
        "python": platform.python_version(),
        "machine": platform.machine(),
    }
    files = {"input_f32.bin": inp, "q8_0.bin": q8, "q4_0.bin": q4,
             **{f"{name}.bin": data for name, data in affine.items()}}
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (OUT_DIR / name).write_bytes(data)
    fixture = {
        "generator": "tests/reference/gen_ggml_quant_fixture.py",
        "versions": versions,
        "qk": QK,
        "n_blocks": n_blocks,
        "block_names": [name for name, _ in blocks],
        "sha256": {name: sha256(data) for name, data in files.items()},
        "input_f32": b64(inp),
        "q8_0": b64(q8),
        "q4_0": b64(q4),
        **{name: b64(data) for name, data in affine.items()},
        "divergences": divergences,
        "divergences_q4_1_q5": divergences_q4_1_q5,
    }
    (OUT_DIR / "fixture.json").write_text(json.dumps(fixture, indent=2) + "\n")
    rows = [
        ("file", "contents", "sha256"),
        ("`input_f32.bin`", f"{n_blocks} × 32 little-endian f32", f"`{sha256(inp)}`"),
        ("`q8_0.bin`", f"{n_blocks} × 34 bytes (f16 d, 32 × int8)", f"`{sha256(q8)}`"),
        ("`q4_0.bin`", f"{n_blocks} × 18 bytes (f16 d, 16 × packed nibbles)", f"`{sha256(q4)}`"),
        *[(f"`{name}.bin`", f"{n_blocks} × {BLOCK_BYTES[name]} bytes ({AFFINE_LAYOUT[name]})",
           f"`{sha256(data)}`") for name, data in affine.items()],
        ("`fixture.json`", "the six files in base64, block names, versions, divergences", ""),
    ]
    readme = markdown(
        "# ggml_quant fixture",
        "Independent oracle for `reference/quant.ts` and `formats/ggml/quantize_row.ts`: f32 inputs"
        " and the Q8_0 / Q4_0 / Q4_1 / Q5_0 / Q5_1 bytes produced by ggml's own Python port,"
        " gguf-py (`gguf.quants.quantize(arr, GGMLQuantizationType.Q8_0 / ...)`). Checked by"
        " `reference/quant_test.ts` (Q8_0, Q4_0) and `formats/ggml/quantize_row_test.ts` (all"
        " five).",
        "Generated with:",
        "```sh\n"
        f"pip install --target /tmp/pyref gguf=={versions['gguf']} numpy=={versions['numpy']}\n"
        "PYTHONPATH=/tmp/pyref python3 tests/reference/gen_ggml_quant_fixture.py\n"
        "```",
        f"gguf {versions['gguf']}, numpy {versions['numpy']}, Python {versions['python']} on"
        f" {versions['machine']}. Inputs are deterministic (`numpy.random.default_rng(1234)` plus"
        " hand-made edge blocks); see `block_names` in `fixture.json` for what each of the"
        f" {n_blocks} blocks is.",
        table(rows),
        "`fixture.json` duplicates the binaries so tests can `import` it without `--allow-read`.",
        "`divergences` lists inputs where ggml's C `quantize_row_q4_0_ref` (which"
        " `reference/quant.ts` follows) and gguf-py differ: an all-zero block whose first element"
        " is `-0.0` gets f16 scale `0x8000` in C and `0x0000` in gguf-py (the quants agree). The"
        " degenerate blocks whose `1 / d` overflows (tiny magnitudes) are stored with quants 0 by"
        " gguf-py, as by ggml's scalar C code on x86; that is C undefined behaviour, so the"
        " fixture pins down the x86 result (a clang build of ggml-quants.c vectorizes the cast and"
        " writes other quants there for Q4_0 and Q4_1).",
        "`divergences_q4_1_q5` does the same for Q4_1, Q5_0 and Q5_1, giving for each block both"
        " gguf-py's bytes and ggml C's (`ggml_c`). C picks the min and max with strict comparisons"
        " in element order, so among equal values the first wins; gguf-py's `min()` / `max()` /"
        " `argmax` may pick the other zero of a block holding both `+0` and `-0`, and then stores"
        " the f16 min (Q4_1, Q5_1) or scale (Q5_0) with the other sign. The quants always agree."
        " Entries with a `block` are blocks of the fixture (whose `q4_1` / `q5_1` data is"
        " gguf-py's), those with `input_f32` extra inputs. The generator derives C's header"
        " (`c_header`); that was checked against ggml-quants.c of the llama_cpp_python 0.3.36"
        " sdist built with gcc, which gave exactly the `ggml_c` bytes for every block.",
    )
    (OUT_DIR / "README.md").write_text(readme)
    total = sum((OUT_DIR / n).stat().st_size for n in [*files, "fixture.json", "README.md"])
    print(f"wrote {n_blocks} blocks to {OUT_DIR} ({total} bytes)", file=sys.stderr)


if __name__ == "__main__":
    main()
