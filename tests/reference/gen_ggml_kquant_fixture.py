#!/usr/bin/env python3
"""Generate tests/fixtures/ggml_kquant/ with ggml's own C quantizers for Q4_K, Q5_K and Q6_K.

gguf-py cannot quantize K types, so this compiles a tiny C harness against llama.cpp's
ggml/src/ggml-quants.c (as vendored by PyPI's llama_cpp_python sdist) and calls
`quantize_q4_K` / `quantize_q5_K` / `quantize_q6_K` with no importance matrix, the call
llama.cpp's quantizer (`llama_tensor_quantize_impl` -> `ggml_quantize_chunk`) makes; without an
imatrix they run `quantize_row_qN_K_ref`. The fixture is the oracle for
formats/ggml/quantize_row.ts (checked by formats/ggml/quantize_kquant_test.ts).

Usage (Python and a C compiler are only needed to regenerate; nothing at run time needs them):

    python3 tests/reference/gen_ggml_kquant_fixture.py            # pip-downloads the sdist
    python3 tests/reference/gen_ggml_kquant_fixture.py --llama-cpp DIR   # an unpacked llama.cpp

Only the Python standard library is used. The harness is built with every compiler found (gcc,
clang, and the project's `zig cc` in .tools/), each with `-O3 -DNDEBUG -ffp-contract=off` for
baseline x86-64 (no FMA), which is how llama.cpp builds ggml-base (ggml-quants.c): -march=native
only reaches ggml-cpu. The outputs of all compilers must agree byte for byte.

Outputs (deterministic; re-running with the same sdist gives identical files):
    input_f32.bin  the rows, little-endian f32, one after another
    q4_k.bin       ggml's Q4_K blocks of every row (144 bytes per 256 values)
    q5_k.bin       ggml's Q5_K blocks (176 bytes per 256 values)
    q6_k.bin       ggml's Q6_K blocks (210 bytes per 256 values)
    index.json     rows (name, length, element and block offsets), sizes, sha256, provenance
    README.md      how it was generated
"""

from __future__ import annotations

import argparse
import array
import hashlib
import json
import math
import platform
import random
import re
import shutil
import struct
import subprocess
import sys
import tarfile
import tempfile
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT_DIR = ROOT / "tests" / "fixtures" / "ggml_kquant"
SDIST = "llama_cpp_python"
SDIST_VERSION = "0.3.36"
QK_K = 256
TYPES = {"q4_k": ("Q4_K", 144, "quantize_q4_K"), "q5_k": ("Q5_K", 176, "quantize_q5_K"),
         "q6_k": ("Q6_K", 210, "quantize_q6_K")}

HARNESS = r"""
// Calls ggml's quantize_qN_K(src, dst, 1, n_per_row, NULL) once per row, as llama.cpp's
// quantizer does for a tensor without an importance matrix.
//   harness TYPE IN.f32 OUT.bin N0 N1 ...   (TYPE: q4_k | q5_k | q6_k)
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ggml.h"
#include "ggml-quants.h"

// ggml-quants.c needs these four from ggml.c; only ggml_row_size is reached on this path.
void ggml_abort(const char * file, int line, const char * fmt, ...) {
    fprintf(stderr, "ggml_abort at %s:%d: %s\n", file, line, fmt);
    abort();
}
static size_t type_size(enum ggml_type t) {
    switch (t) {
        case GGML_TYPE_Q4_K: return 144;
        case GGML_TYPE_Q5_K: return 176;
        case GGML_TYPE_Q6_K: return 210;
        default: fprintf(stderr, "harness: type %d\n", (int) t); abort();
    }
}
size_t ggml_type_size(enum ggml_type t) { return type_size(t); }
size_t ggml_row_size(enum ggml_type t, int64_t ne) { return type_size(t) * (size_t) (ne / 256); }
const char * ggml_type_name(enum ggml_type t) { (void) t; return "?"; }

int main(int argc, char ** argv) {
    if (argc < 5) { fprintf(stderr, "usage: harness TYPE IN OUT N...\n"); return 2; }
    enum ggml_type t;
    size_t (*q)(const float *, void *, int64_t, int64_t, const float *);
    if (!strcmp(argv[1], "q4_k")) { t = GGML_TYPE_Q4_K; q = quantize_q4_K; }
    else if (!strcmp(argv[1], "q5_k")) { t = GGML_TYPE_Q5_K; q = quantize_q5_K; }
    else if (!strcmp(argv[1], "q6_k")) { t = GGML_TYPE_Q6_K; q = quantize_q6_K; }
    else { fprintf(stderr, "harness: unknown type %s\n", argv[1]); return 2; }
    FILE * in = fopen(argv[2], "rb");
    FILE * out = fopen(argv[3], "wb");
    if (!in || !out) { perror("harness"); return 1; }
    for (int a = 4; a < argc; a++) {
        const int64_t n = atoll(argv[a]);
        float * x = malloc(n * sizeof(float));
        const size_t nb = ggml_row_size(t, n);
        void * y = malloc(nb);
        if (fread(x, sizeof(float), n, in) != (size_t) n) { fprintf(stderr, "harness: short read\n"); return 1; }
        memset(y, 0xee, nb);
        if (q(x, y, 1, n, NULL) != nb) { fprintf(stderr, "harness: size\n"); return 1; }
        fwrite(y, 1, nb, out);
        free(x);
        free(y);
    }
    if (fgetc(in) != EOF) { fprintf(stderr, "harness: input left over\n"); return 1; }
    fclose(in);
    return fclose(out) ? 1 : 0;
}
"""

CFLAGS = ["-std=gnu11", "-O3", "-DNDEBUG", "-ffp-contract=off", "-fno-fast-math", "-w"]


def f32(v: float) -> float:
    """Round a Python float to the nearest f32 (ties to even), keeping ±Infinity."""
    return struct.unpack("<f", struct.pack("<f", v))[0]


def build_rows() -> list[tuple[str, list[float]]]:
    rng = random.Random(20260601)
    rows: list[tuple[str, list[float]]] = []

    def gauss(n: int, s: float) -> list[float]:
        return [rng.gauss(0.0, 1.0) * s for _ in range(n)]

    # Realistic weight rows: Gaussian at the usual magnitudes and the row lengths of real models.
    for n, s in [(4096, 0.02), (2048, 0.05), (1536, 0.03), (1024, 1.0), (512, 0.01), (512, 0.3),
                 (256, 1e-3), (256, 7.0), (256, 250.0)]:
        rows.append((f"gaussian sigma={s:g} n={n}", gauss(n, s)))
    # Outliers: a few large values among small ones (the case K-quant min/scale search is for).
    x = gauss(2048, 0.02)
    for i in rng.sample(range(2048), 20):
        x[i] = rng.choice([-1.0, 1.0]) * rng.uniform(0.3, 4.0)
    rows.append(("gaussian 0.02 with 1% outliers n=2048", x))
    x = gauss(256, 0.01)
    x[rng.randrange(256)] = 100.0
    rows.append(("gaussian 0.01 with one +100 n=256", x))
    x = gauss(256, 0.01)
    x[rng.randrange(256)] = -100.0
    rows.append(("gaussian 0.01 with one -100 n=256", x))
    # Heavy tails: Student's t with 2 degrees of freedom.
    rows.append(("student-t(2) * 0.05 n=1024", [
        rng.gauss(0, 1) / math.sqrt((rng.gauss(0, 1) ** 2 + rng.gauss(0, 1) ** 2) / 2) * 0.05
        for _ in range(1024)
    ]))
    rows.append(("uniform(-1, 1) n=512", [rng.uniform(-1, 1) for _ in range(512)]))
    rows.append(("uniform(0.2, 1), all positive n=256", [rng.uniform(0.2, 1) for _ in range(256)]))
    rows.append(("uniform(-1, -0.5), all negative n=256",
                 [rng.uniform(-1, -0.5) for _ in range(256)]))
    # Magnitudes that differ by sub-block: 32 groups of 8 steps from 1e-4 to 1e2.
    rows.append(("sub-block magnitudes 1e-4 .. 1e2 n=256",
                 [rng.gauss(0, 1) * 10.0 ** (-4 + 6 * ((i // 32) / 7)) for i in range(256)]))
    # Edges.
    rows.append(("all +0 n=256", [0.0] * 256))
    rows.append(("all -0 n=256", [-0.0] * 256))
    rows.append(("constant 0.5 n=256", [0.5] * 256))
    rows.append(("constant -3 n=256", [-3.0] * 256))
    x = [0.0] * 256
    x[77] = -0.75
    rows.append(("single nonzero -0.75 at 77 n=256", x))
    x = gauss(256, 0.1)
    for j in (0, 2, 5):
        x[32 * j:32 * j + 32] = [0.0] * 32
    rows.append(("gaussian 0.1, sub-blocks of 32 at 0, 2, 5 zero n=256", x))
    x = gauss(256, 0.1)
    for j in (1, 6, 7, 12):
        x[16 * j:16 * j + 16] = [0.0] * 16
    rows.append(("gaussian 0.1, sub-blocks of 16 at 1, 6, 7, 12 zero n=256", x))
    # Grids whose products land on .5 (nearest_int ties).
    rows.append(("grid k/64, k = -32..31 repeated n=256", [((i % 64) - 32) / 64 for i in range(256)]))
    rows.append(("grid k/2, k = 0..31 repeated n=256", [(i % 32) / 2 for i in range(256)]))
    # Tiny magnitudes: f16 scales underflow; below GROUP_MAX_EPS (1e-15) Q6_K groups are zero;
    # 1e-40 is an f32 subnormal.
    for s in (1e-6, 1e-10, 1e-14, 1e-16, 1e-30, 1e-40):
        rows.append((f"tiny gaussian sigma={s:g} n=256", gauss(256, s)))
    # Huge magnitudes: f16 scales overflow to Infinity (from ~1e7); x*x overflows f32 (~2e19);
    # sums overflow and give Infinity and NaN inside the search (ggml's code has no guard).
    for s in (1e4, 1e6, 1e7, 1e8, 1e19, 1e30):
        rows.append((f"huge gaussian sigma={s:g} n=256", gauss(256, s)))
    rows.append(("f32 max and -max n=256", [3.4028234663852886e38 * (1 if i % 3 else -1)
                                            for i in range(256)]))

    out = []
    for name, values in rows:
        assert len(values) % QK_K == 0, name
        v = [f32(t) for t in values]
        assert all(math.isfinite(t) for t in v), name
        out.append((name, v))
    return out


def fetch_llama_cpp(work: Path) -> Path:
    """pip-downloads the llama_cpp_python sdist and returns its vendored llama.cpp folder."""
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary=:all:",
                    "--dest", str(work), f"{SDIST}=={SDIST_VERSION}"], check=True,
                   stdout=subprocess.DEVNULL)
    (tgz,) = work.glob(f"{SDIST}-{SDIST_VERSION}.tar.gz")
    with tarfile.open(tgz) as tar:
        tar.extractall(work, filter="data")
    return work / f"{SDIST}-{SDIST_VERSION}" / "vendor" / "llama.cpp"


def llama_cpp_commit(src: Path) -> str:
    try:
        r = subprocess.run(["git", "-C", str(src), "rev-parse", "HEAD"], capture_output=True,
                           text=True, check=True)
        return r.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def compilers() -> list[tuple[str, list[str]]]:
    found = []
    for cc in ("gcc", "clang"):
        if shutil.which(cc):
            found.append((cc, [cc]))
    zig = ROOT / ".tools" / "zig" / "ziglang" / "zig"
    if zig.exists():
        # zig cc targets the host CPU unless told otherwise; baseline is plain x86-64.
        found.append(("zig cc", [str(zig), "cc", "-target", f"{platform.machine()}-linux-gnu",
                                 "-mcpu=baseline"]))
    if not found:
        sys.exit("gen_ggml_kquant_fixture: no C compiler (gcc, clang or .tools zig)")
    return found


def build_harness(cc: list[str], src: Path, work: Path, tag: str) -> Path:
    ggml = src / "ggml"
    c = work / "harness.c"
    c.write_text(HARNESS)
    exe = work / f"harness-{tag}"
    inc = ["-I", str(ggml / "include"), "-I", str(ggml / "src"), "-I", str(ggml / "src" / "ggml-cpu")]
    subprocess.run([*cc, *CFLAGS, *inc, "-o", str(exe), str(c), str(ggml / "src" / "ggml-quants.c"),
                    "-lm"], check=True)
    return exe


def cc_version(cc: list[str]) -> str:
    r = subprocess.run([*cc, "--version"], capture_output=True, text=True)
    line = r.stdout.splitlines()[0].strip() if r.returncode == 0 and r.stdout else "?"
    return re.sub(r"\s*\(https?://[^)]*\)", "", line)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def markdown(*blocks: str) -> str:
    """Join blocks with blank lines, wrapping prose at 100 columns like `deno fmt`."""
    out = []
    for block in blocks:
        if block.startswith(("#", "```", "|")):
            out.append(block)
        else:
            out.append(textwrap.fill(block, width=100, break_long_words=False,
                                     break_on_hyphens=False))
    return "\n\n".join(out) + "\n"


def table(rows: list[tuple[str, ...]]) -> str:
    """A Markdown table padded the way `deno fmt` pads it."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |" for r in rows]
    lines.insert(1, "| " + " | ".join("-" * w for w in widths) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--llama-cpp", type=Path, help="an unpacked llama.cpp source tree")
    args = ap.parse_args()

    rows = build_rows()
    inp = array.array("f", [v for _, r in rows for v in r])
    if sys.byteorder != "little":
        inp.byteswap()
    inp_bytes = inp.tobytes()
    lengths = [str(len(r)) for _, r in rows]

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        src = args.llama_cpp.resolve() if args.llama_cpp else fetch_llama_cpp(work)
        quants_c = (src / "ggml" / "src" / "ggml-quants.c").read_bytes()
        commit = llama_cpp_commit(src)
        (work / "in.f32").write_bytes(inp_bytes)
        outputs: dict[str, bytes] = {}
        used = []
        for i, (label, cc) in enumerate(compilers()):
            exe = build_harness(cc, src, work, str(i))
            used.append(f"{label}: {cc_version(cc)}")
            for key in TYPES:
                out = work / f"{key}-{i}.bin"
                subprocess.run([str(exe), key, str(work / "in.f32"), str(out), *lengths], check=True)
                data = out.read_bytes()
                if key in outputs and outputs[key] != data:
                    sys.exit(f"gen_ggml_kquant_fixture: {label} disagrees with the first compiler"
                             f" on {key}")
                outputs.setdefault(key, data)

    n_elements = len(inp)
    for key, (_, size, _) in TYPES.items():
        assert len(outputs[key]) == n_elements // QK_K * size, key

    files = {"input_f32.bin": inp_bytes, **{f"{k}.bin": outputs[k] for k in TYPES}}
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (OUT_DIR / name).write_bytes(data)

    index_rows = []
    element = 0
    for name, r in rows:
        index_rows.append({"name": name, "n": len(r), "first_element": element,
                           "first_block": element // QK_K})
        element += len(r)
    provenance = {
        "sdist": f"{SDIST}=={SDIST_VERSION}",
        "llama_cpp_commit": commit,
        "ggml_quants_c_sha256": sha256(quants_c),
        "compilers": used,
        "cflags": " ".join(CFLAGS),
        "python": platform.python_version(),
        "machine": platform.machine(),
    }
    index = {
        "generator": "tests/reference/gen_ggml_kquant_fixture.py",
        "provenance": provenance,
        "qk_k": QK_K,
        "n_elements": n_elements,
        "input": "input_f32.bin",
        "types": {name: {"file": f"{key}.bin", "type_size": size, "ggml_function": fn}
                  for key, (name, size, fn) in TYPES.items()},
        "sha256": {name: sha256(data) for name, data in files.items()},
        "rows": index_rows,
    }
    (OUT_DIR / "index.json").write_text(json.dumps(index, indent=2) + "\n")

    n_blocks = n_elements // QK_K
    table_rows = [("file", "contents", "sha256"),
                  ("`input_f32.bin`", f"{len(rows)} rows, {n_elements} little-endian f32",
                   f"`{sha256(inp_bytes)}`")]
    for key, (name, size, _) in TYPES.items():
        table_rows.append((f"`{key}.bin`", f"{n_blocks} × {size} bytes ({name} blocks)",
                           f"`{sha256(outputs[key])}`"))
    table_rows.append(("`index.json`", "rows (name, length, offsets), provenance, sha256", ""))
    readme = markdown(
        "# ggml_kquant fixture",
        "Oracle for the Q4_K, Q5_K and Q6_K encoders of `formats/ggml/quantize_row.ts`: f32 rows"
        " and the blocks ggml's C reference quantizers write for them. Checked byte for byte by"
        " `formats/ggml/quantize_kquant_test.ts`.",
        "gguf-py cannot quantize K types, so `tests/reference/gen_ggml_kquant_fixture.py` compiles"
        " a small C harness against llama.cpp's `ggml/src/ggml-quants.c` and calls"
        " `quantize_q4_K` / `quantize_q5_K` / `quantize_q6_K` once per row with no importance"
        " matrix, the call llama.cpp's quantizer makes; without an imatrix these run"
        " `quantize_row_q4_K_ref` / `quantize_row_q5_K_ref` / `quantize_row_q6_K_ref`.",
        f"Source: llama.cpp as vendored by the PyPI sdist `{SDIST}=={SDIST_VERSION}`"
        f" (llama.cpp commit `{commit}`; `ggml-quants.c` sha256 `{sha256(quants_c)}`).",
        "Regenerate (Python standard library only, plus a C compiler; without `--llama-cpp` the"
        " script pip-downloads the sdist):",
        "```sh\n"
        "python3 tests/reference/gen_ggml_kquant_fixture.py\n"
        f"# or: pip download --no-deps --no-binary=:all: {SDIST}=={SDIST_VERSION}, unpack, then\n"
        "python3 tests/reference/gen_ggml_kquant_fixture.py --llama-cpp DIR/vendor/llama.cpp\n"
        "```",
        f"Built with `{' '.join(CFLAGS)}` for baseline {provenance['machine']} (no FMA), as"
        " llama.cpp builds ggml-base, by every compiler found, all of which agreed byte for byte: "
        + "; ".join(used) + f". Python {provenance['python']}. A build that fuses multiplies and"
        " adds (FMA contraction: gcc's default `-ffp-contract=fast` with `-march=native`, or any"
        " aarch64 build) rounds differently and writes different bytes for some blocks (for"
        " Gaussian data, a few percent of Q4_K and Q6_K blocks and more of Q5_K); x86-64 builds"
        " of llama.cpp's quantizer do not fuse in ggml-base.",
        f"Inputs are deterministic (`random.Random(20260601)`); `rows` in `index.json` names each"
        f" of the {len(rows)} rows: Gaussian rows of 256 to 4096 values at typical weight scales,"
        " rows with outliers, heavy tails, all-positive and all-negative rows, zero, constant and"
        " single-value rows, rows with zero sub-blocks, grids that make `nearest_int` ties, tiny"
        " magnitudes (f16 scales underflow, groups under `GROUP_MAX_EPS`, f32 subnormals) and huge"
        " ones (f16 scales overflow to Infinity, `x * x` and the sums overflow f32 and give"
        " Infinity and NaN inside ggml's search; the fixture pins down what ggml writes then).",
        table(table_rows),
    )
    (OUT_DIR / "README.md").write_text(readme)
    total = sum((OUT_DIR / n).stat().st_size for n in [*files, "index.json", "README.md"])
    print(f"wrote {len(rows)} rows ({n_elements} values) to {OUT_DIR} ({total} bytes)",
          file=sys.stderr)


if __name__ == "__main__":
    main()
