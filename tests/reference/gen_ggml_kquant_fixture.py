#!/usr/bin/env python3
"""Generate tests/fixtures/ggml_kquant/ with llama.cpp's own C/C++ code: the Q4_K, Q5_K and
Q6_K quantizers and the Q4_K_M / Q5_K_M / Q6_K tensor type rules.

1. Quantizers. gguf-py cannot quantize K types, so this compiles a tiny C harness against
   llama.cpp's ggml/src/ggml-quants.c (as vendored by PyPI's llama_cpp_python sdist) and calls
   `quantize_q4_K` / `quantize_q5_K` / `quantize_q6_K` with no importance matrix, the call
   llama.cpp's quantizer (`llama_tensor_quantize_impl` -> `ggml_quantize_chunk`) makes; without
   an imatrix they run `quantize_row_qN_K_ref`. The oracle for formats/ggml/quantize_row.ts
   (checked by formats/ggml/quantize_kquant_test.ts).
2. Type rules (`--part rules`, needs cmake and a C++ compiler; builds libllama, a few minutes).
   A C++ harness asks llama.cpp's `llama_quant_compute_types` (the helper its own
   tests/test-quant-type-selection.cpp uses) which type each tensor of a set of mock models
   gets: dense, tied and untied, 896/640/odd column counts, 70B, 8-expert and other MoE,
   Falcon, DeepSeek-style MLA, hybrid and tensors that are never quantized. The oracle for
   convert/kquant_rules.ts (checked by convert/kquant_rules_test.ts), written to
   llama_tensor_types.json.

Usage (Python and a C compiler are only needed to regenerate; nothing at run time needs them):

    python3 tests/reference/gen_ggml_kquant_fixture.py            # pip-downloads the sdist
    python3 tests/reference/gen_ggml_kquant_fixture.py --llama-cpp DIR   # an unpacked llama.cpp
    python3 tests/reference/gen_ggml_kquant_fixture.py --part quant|rules   # one of the two

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
    llama_tensor_types.json   the mock models' tensors and llama.cpp's type for each, per scheme
    README.md      how it was generated
"""

from __future__ import annotations

import argparse
import array
import hashlib
import json
import math
import os
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
SCHEMES = ["q4_k_m", "q5_k_m", "q6_k"]
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


def gen_quant(src: Path, work: Path) -> None:
    """Part 1: the f32 rows and ggml's Q4_K / Q5_K / Q6_K blocks for them, and index.json."""
    rows = build_rows()
    inp = array.array("f", [v for _, r in rows for v in r])
    if sys.byteorder != "little":
        inp.byteswap()
    inp_bytes = inp.tobytes()
    lengths = [str(len(r)) for _, r in rows]
    quants_c = (src / "ggml" / "src" / "ggml-quants.c").read_bytes()
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
        "llama_cpp_commit": llama_cpp_commit(src),
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


RULES_HARNESS = r"""
// Asks llama.cpp's own quantizer code which type each tensor of a mock model gets in Q4_K_M,
// Q5_K_M and Q6_K (default quantize parameters, no imatrix), as its
// tests/test-quant-type-selection.cpp does: llama_quant_model_from_metadata, then
// llama_quant_compute_types over the quantizable tensors sorted by layer like
// llama_model_loader::weight_name_comparer.
// stdin:  model ARCH N_LAYER N_HEAD N_HEAD_KV N_EXPERT, tensor NAME NE0 NE1 NE2 NE3 ..., end
// stdout: per tensor NAME TYPE_Q4_K_M TYPE_Q5_K_M TYPE_Q6_K ("keep": not quantized), then end
#include "llama.h"
#include "../src/llama-ext.h"
#include "ggml.h"
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

static int layer_of(const char * name) {
    int l = -1;
    sscanf(name, "blk.%d.", &l);
    return l;
}

int main() {
    llama_backend_init();
    std::string word;
    while (std::cin >> word) {
        if (word != "model") { fprintf(stderr, "expected model, got %s\n", word.c_str()); return 2; }
        std::string arch;
        uint32_t n_layer, n_head, n_head_kv, n_expert;
        std::cin >> arch >> n_layer >> n_head >> n_head_kv >> n_expert;
        struct T { std::string name; int64_t ne[4]; };
        std::vector<T> ts;
        while (std::cin >> word && word != "end") {
            T t;
            std::cin >> t.name >> t.ne[0] >> t.ne[1] >> t.ne[2] >> t.ne[3];
            ts.push_back(t);
        }
        llama_quant_model_desc desc = {};
        desc.architecture = arch.c_str();
        desc.n_embd = 256; desc.n_ff = 256; desc.n_layer = n_layer;
        desc.n_head = n_head; desc.n_head_kv = n_head_kv; desc.n_expert = n_expert;
        desc.n_embd_head_k = 64; desc.n_embd_head_v = 64;
        llama_model * model = llama_quant_model_from_metadata(&desc);
        llama_model_quantize_params qparams = llama_model_quantize_default_params();
        quantize_state_impl * qs = llama_quant_init(model, &qparams);
        ggml_init_params ip = { ts.size() * ggml_tensor_overhead() + 1024, nullptr, true };
        ggml_context * ctx = ggml_init(ip);
        std::vector<ggml_tensor *> all, q;
        for (auto & t : ts) {
            ggml_tensor * g = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, t.ne[0], t.ne[1], t.ne[2], t.ne[3]);
            ggml_set_name(g, t.name.c_str());
            all.push_back(g);
            if (llama_quant_tensor_allows_quantization(qs, g)) q.push_back(g);
        }
        std::stable_sort(q.begin(), q.end(), [](const ggml_tensor * a, const ggml_tensor * b) {
            const int la = layer_of(a->name), lb = layer_of(b->name);
            if (la != lb) return la < lb;
            return strcmp(a->name, b->name) < 0;
        });
        const llama_ftype ftypes[3] = {
            LLAMA_FTYPE_MOSTLY_Q4_K_M, LLAMA_FTYPE_MOSTLY_Q5_K_M, LLAMA_FTYPE_MOSTLY_Q6_K };
        std::vector<std::vector<ggml_type>> res(3, std::vector<ggml_type>(q.size()));
        for (int f = 0; f < 3; f++) {
            if (!q.empty()) llama_quant_compute_types(qs, ftypes[f], q.data(), res[f].data(), q.size());
        }
        for (auto * g : all) {
            auto it = std::find(q.begin(), q.end(), g);
            printf("%s", g->name);
            for (int f = 0; f < 3; f++) {
                printf(" %s", it == q.end() ? "keep" : ggml_type_name(res[f][it - q.begin()]));
            }
            printf("\n");
        }
        printf("end\n");
        fflush(stdout);
        ggml_free(ctx);
        llama_quant_free(qs);
        llama_model_free(model);
    }
    llama_backend_free();
    return 0;
}
"""


def dense_model(n_layer: int, n_embd: int, n_ff: int, q_dim: int, kv_dim: int, vocab: int,
                tied: bool, biases: bool = False, gemma_norms: bool = False):
    """The tensors of a Llama-like dense model, in a checkpoint's order."""
    t: list[tuple[str, list[int]]] = [("token_embd.weight", [n_embd, vocab])]
    for b in range(n_layer):
        p = f"blk.{b}."
        t.append((p + "attn_norm.weight", [n_embd]))
        for name, cols, rows in (("attn_q", n_embd, q_dim), ("attn_k", n_embd, kv_dim),
                                 ("attn_v", n_embd, kv_dim)):
            t.append((p + name + ".weight", [cols, rows]))
            if biases:
                t.append((p + name + ".bias", [rows]))
        t.append((p + "attn_output.weight", [q_dim, n_embd]))
        if gemma_norms:
            t += [(p + "attn_q_norm.weight", [64]), (p + "attn_k_norm.weight", [64]),
                  (p + "post_attention_norm.weight", [n_embd]),
                  (p + "post_ffw_norm.weight", [n_embd])]
        t += [(p + "ffn_norm.weight", [n_embd]), (p + "ffn_gate.weight", [n_embd, n_ff]),
              (p + "ffn_up.weight", [n_embd, n_ff]), (p + "ffn_down.weight", [n_ff, n_embd])]
    t.append(("output_norm.weight", [n_embd]))
    if not tied:
        t.append(("output.weight", [n_embd, vocab]))
    return t


def rules_models() -> list[dict]:
    """Mock models that reach every rule of the three schemes."""
    models = []

    def add(name: str, arch: str, n_layer: int, tensors, n_head=8, n_head_kv=8, n_expert=0):
        names = [n for n, _ in tensors]
        assert len(set(names)) == len(names), name
        models.append({"name": name, "arch": arch, "n_layer": n_layer, "n_head": n_head,
                       "n_head_kv": n_head_kv, "n_expert": n_expert,
                       # llama_quant_model_from_metadata's only LLM_TYPE_70B case.
                       "is70B": arch == "llama" and n_layer == 80 and n_head != n_head_kv,
                       "tensors": tensors})

    add("llama 32 blocks, 4096 columns, untied", "llama", 32,
        dense_model(32, 4096, 14336, 4096, 1024, 32000, tied=False), 32, 8)
    # 70B: only the tensors whose type the 70B rule can change, and a few others.
    t = [x for x in dense_model(80, 8192, 28672, 8192, 1024, 32000, tied=False)
         if not x[0].startswith("blk.") or x[0].split(".")[2] in ("attn_v", "attn_k", "ffn_down")]
    add("llama 70B (80 blocks, GQA)", "llama", 80, t, 64, 8)
    add("qwen2 24 blocks, 896 columns, tied, biases", "qwen2", 24,
        dense_model(24, 896, 4864, 896, 128, 151936, tied=True, biases=True), 14, 2)
    add("qwen2 24 blocks, 896 columns, untied", "qwen2", 24,
        dense_model(24, 896, 4864, 896, 128, 151936, tied=False, biases=True), 14, 2)
    add("gemma3 18 blocks, 640 columns, tied", "gemma3", 18,
        dense_model(18, 640, 2048, 1024, 256, 262144, tied=True, gemma_norms=True), 4, 1)
    add("llama 3 blocks, 100 and 288 columns", "llama", 3,
        dense_model(3, 100, 288, 100, 100, 1000, tied=False))
    for n in (1, 2, 7, 9):
        add(f"llama {n} blocks", "llama", n, dense_model(n, 256, 512, 256, 256, 512, tied=True))

    # Mixtral-like: 8 experts.
    t = [("token_embd.weight", [4096, 32000])]
    for b in range(32):
        p = f"blk.{b}."
        t += [(p + "attn_norm.weight", [4096]), (p + "attn_q.weight", [4096, 4096]),
              (p + "attn_k.weight", [4096, 1024]), (p + "attn_v.weight", [4096, 1024]),
              (p + "attn_output.weight", [4096, 4096]), (p + "ffn_norm.weight", [4096]),
              (p + "ffn_gate_inp.weight", [4096, 8]),
              (p + "ffn_gate_exps.weight", [4096, 14336, 8]),
              (p + "ffn_up_exps.weight", [4096, 14336, 8]),
              (p + "ffn_down_exps.weight", [14336, 4096, 8])]
    t += [("output_norm.weight", [4096]), ("output.weight", [4096, 32000])]
    add("llama 8 experts (Mixtral)", "llama", 32, t, 32, 8, 8)

    # Qwen2-MoE-like: 60 experts and a shared expert, blocks listed as text.
    t = [("token_embd.weight", [2048, 151936]), ("output.weight", [2048, 151936]),
         ("output_norm.weight", [2048])]
    for b in sorted(range(24), key=str):
        p = f"blk.{b}."
        t += [(p + "attn_q.bias", [2048]), (p + "attn_k.weight", [2048, 2048]),
              (p + "attn_v.weight", [2048, 2048]), (p + "attn_output.weight", [2048, 2048]),
              (p + "ffn_gate_inp.weight", [2048, 60]),
              (p + "ffn_gate_inp_shexp.weight", [2048]),
              (p + "ffn_up_exps.weight", [2048, 1408, 60]),
              (p + "ffn_down_exps.weight", [1408, 2048, 60]),
              (p + "ffn_down_shexp.weight", [5632, 2048])]
    add("qwen2moe 60 experts", "qwen2moe", 24, t, 16, 16, 60)

    # Falcon-like: fused attn_qkv, 4544 columns (a multiple of 32, not of 256).
    t = [("token_embd.weight", [4544, 65024])]
    for b in range(32):
        p = f"blk.{b}."
        t += [(p + "attn_norm.weight", [4544]), (p + "attn_norm.bias", [4544]),
              (p + "attn_qkv.weight", [4544, 4672]), (p + "attn_output.weight", [4544, 4544]),
              (p + "ffn_up.weight", [4544, 18176]), (p + "ffn_down.weight", [18176, 4544])]
    t += [("output_norm.weight", [4544]), ("output.weight", [4544, 65024])]
    add("falcon 32 blocks", "falcon", 32, t, 71, 1)
    # The same shapes with 4608 columns, so that the Falcon rules are not hidden by fallbacks.
    t = [(n, [4608 if d == 4544 else d for d in dims]) for n, dims in t if "norm" not in n]
    add("falcon 32 blocks, 4608 columns", "falcon", 32, t, 72, 1)

    # Phi-3-like: fused attn_qkv in a non-Falcon model.
    t = [("token_embd.weight", [3072, 32064])]
    for b in range(32):
        p = f"blk.{b}."
        t += [(p + "attn_norm.weight", [3072]), (p + "attn_qkv.weight", [3072, 9216]),
              (p + "attn_output.weight", [3072, 3072]), (p + "ffn_norm.weight", [3072]),
              (p + "ffn_up.weight", [3072, 16384]), (p + "ffn_down.weight", [8192, 3072])]
    t += [("output_norm.weight", [3072]), ("output.weight", [3072, 32064])]
    add("phi3 32 blocks, attn_qkv", "phi3", 32, t, 32, 32)

    # DeepSeek-V2-like MLA with 64 experts; the first block dense.
    t = [("token_embd.weight", [5120, 102400])]
    for b in range(12):
        p = f"blk.{b}."
        t += [(p + "attn_norm.weight", [5120]), (p + "attn_q_a.weight", [5120, 1536]),
              (p + "attn_q_a_norm.weight", [1536]), (p + "attn_q_b.weight", [1536, 24576]),
              (p + "attn_kv_a_mqa.weight", [5120, 576]), (p + "attn_kv_a_norm.weight", [512]),
              (p + "attn_kv_b.weight", [512, 32768]), (p + "attn_output.weight", [16384, 5120]),
              (p + "ffn_norm.weight", [5120])]
        if b == 0:
            t += [(p + "ffn_gate.weight", [5120, 12288]), (p + "ffn_up.weight", [5120, 12288]),
                  (p + "ffn_down.weight", [12288, 5120])]
        else:
            t += [(p + "ffn_gate_inp.weight", [5120, 64]),
                  (p + "ffn_gate_exps.weight", [5120, 1536, 64]),
                  (p + "ffn_up_exps.weight", [5120, 1536, 64]),
                  (p + "ffn_down_exps.weight", [1536, 5120, 64]),
                  (p + "ffn_gate_shexp.weight", [5120, 3072]),
                  (p + "ffn_up_shexp.weight", [5120, 3072]),
                  (p + "ffn_down_shexp.weight", [3072, 5120])]
    t += [("output_norm.weight", [5120]), ("output.weight", [5120, 102400])]
    add("deepseek2 12 blocks, MLA, 64 experts", "deepseek2", 12, t, 128, 128, 64)

    # Hybrid (LFM2-like): attention in 6 of 16 blocks, short convolutions elsewhere.
    t = [("token_embd.weight", [1024, 65536]), ("token_embd_norm.weight", [1024])]
    for b in range(16):
        p = f"blk.{b}."
        t.append((p + "attn_norm.weight", [1024]))
        if b in (2, 5, 8, 10, 12, 14):
            t += [(p + "attn_q.weight", [1024, 1024]), (p + "attn_k.weight", [1024, 256]),
                  (p + "attn_v.weight", [1024, 256]), (p + "attn_output.weight", [1024, 1024])]
        else:
            t += [(p + "shortconv.conv.weight", [3, 1024]),
                  (p + "shortconv.in_proj.weight", [1024, 3072]),
                  (p + "shortconv.out_proj.weight", [1024, 1024])]
        t += [(p + "ffn_norm.weight", [1024]), (p + "ffn_gate.weight", [1024, 4608]),
              (p + "ffn_up.weight", [1024, 4608]), (p + "ffn_down.weight", [4608, 1024])]
    add("lfm2 16 blocks, attention in 6", "lfm2", 16, t, 16, 8)

    # GLM-5-next names with rules of their own.
    t = [("token_embd.weight", [6144, 154880]), ("output.weight", [6144, 154880])]
    for b in range(4):
        p = f"blk.{b}."
        t += [(p + "attn_q_a.weight", [6144, 2048]), (p + "attn_q_b.weight", [2048, 16384]),
              (p + "attn_kv_a_mqa.weight", [6144, 576]), (p + "attn_k_b.weight", [192, 8192]),
              (p + "attn_v_b.weight", [512, 8192]), (p + "attn_output.weight", [16384, 6144]),
              (p + "indexer.attn_k.weight", [6144, 128]), (p + "indexer.proj.weight", [6144, 64]),
              (p + "hc_attn_fn.weight", [6144, 16]), (p + "nextn.eh_proj.weight", [12288, 6144]),
              (p + "ffn_gate.weight", [6144, 12288]), (p + "ffn_down.weight", [12288, 6144])]
    add("glm5-next 4 blocks", "glm5-next", 4, t, 64, 64)

    # Names and shapes that llama.cpp never quantizes, next to ones it does.
    t = [("token_embd.weight", [768, 30522]), ("position_embd.weight", [768, 512]),
         ("token_types.weight", [768, 2]), ("rope_freqs.weight", [64]),
         ("per_layer_token_embd.weight", [7680, 4096]), ("altup_proj.weight", [2048, 2048, 3]),
         ("laurel_l.weight", [2048, 64]), ("per_layer_model_proj.weight", [2048, 7680]),
         ("v.patch_embd.weight", [14, 14, 3, 1152]), ("v.position_embd.weight", [1152, 729]),
         ("mm.a.code_embd.weight", [1024, 2048]), ("abcde", [256, 4]), ("abcdef", [256, 4]),
         ("blk.0.attn_q.weight", [768, 1]), ("blk.0.attn_k.weight", [768, 768, 1, 1]),
         ("blk.0.attn_v.weight", [768, 768]), ("blk.0.ssm_conv1d.weight", [4, 1536]),
         ("blk.0.time_mix_w1.weight", [2048, 160]), ("blk.0.attn_rel_b.weight", [32, 12]),
         ("blk.0.ffn_gate_inp.weight", [768, 8]), ("blk.0.ffn_gate_tid2eid.weight", [768, 8]),
         ("blk.0.indexer.k_proj.weight", [768, 128]), ("blk.0.ffn_down.weight", [3072, 768]),
         ("blk.0.attn_output.weight", [768, 768]), ("blk.0.ffn_up.weight", [768, 3072])]
    add("never quantized", "llama", 1, t)
    return models


def build_llama(src: Path, work: Path, build: Path | None) -> tuple[Path, Path]:
    """Builds llama.cpp's libllama (CPU only, static) unless `build` holds one already, and the
    harness; returns (build dir, harness)."""
    for tool in ("cmake", "c++"):
        if not shutil.which(tool):
            sys.exit(f"gen_ggml_kquant_fixture: --part rules needs {tool}")
    if build is not None:
        return build, build_rules_harness(src, work, build)
    build = work / "llama-build"
    gen = ["-G", "Ninja"] if shutil.which("ninja") else []
    subprocess.run(["cmake", "-S", str(src), "-B", str(build), *gen, "-DCMAKE_BUILD_TYPE=Release",
                    "-DGGML_NATIVE=OFF", "-DGGML_OPENMP=OFF", "-DBUILD_SHARED_LIBS=OFF",
                    "-DLLAMA_CURL=OFF", "-DLLAMA_OPENSSL=OFF", "-DLLAMA_BUILD_TESTS=OFF",
                    "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_TOOLS=OFF",
                    "-DLLAMA_BUILD_SERVER=OFF", "-DLLAMA_BUILD_COMMON=OFF"],
                   check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["cmake", "--build", str(build), "--target", "llama", "-j",
                    str(os.cpu_count() or 2)], check=True, stdout=subprocess.DEVNULL)
    return build, build_rules_harness(src, work, build)


def build_rules_harness(src: Path, work: Path, build: Path) -> Path:
    cpp = work / "rules_harness.cpp"
    cpp.write_text(RULES_HARNESS)
    exe = work / "rules_harness"
    libs = sorted(str(p) for p in build.rglob("*.a"))
    # llama first, then ggml's libraries; listed twice so the static link resolves in any order.
    libs = [l for l in libs if l.endswith("libllama.a")] + [l for l in libs if "ggml" in l]
    subprocess.run(["c++", "-std=c++17", "-O1", "-I", str(src / "include"),
                    "-I", str(src / "ggml" / "include"), "-I", str(src / "src"), "-o", str(exe),
                    str(cpp), *libs, *libs, "-lpthread", "-lm", "-ldl"], check=True)
    return exe


def gen_rules(src: Path, work: Path, build: Path | None) -> None:
    """Part 2: llama_tensor_types.json, llama.cpp's type for each tensor of the mock models."""
    _, exe = build_llama(src, work, build)
    models = rules_models()
    lines = []
    for m in models:
        lines.append(f"model {m['arch']} {m['n_layer']} {m['n_head']} {m['n_head_kv']}"
                     f" {m['n_expert']}")
        for name, dims in m["tensors"]:
            ne = [*dims, 1, 1, 1][:4]
            lines.append(f"tensor {name} {' '.join(map(str, ne))}")
        lines.append("end")
    r = subprocess.run([str(exe)], input="\n".join(lines) + "\n", capture_output=True, text=True,
                       check=True)
    blocks = r.stdout.split("end\n")
    assert blocks[-1] == "" and len(blocks) == len(models) + 1, r.stdout[-500:]
    out_models = []
    for m, block in zip(models, blocks):
        got = [line.split(" ") for line in block.strip().split("\n")]
        assert [g[0] for g in got] == [n for n, _ in m["tensors"]], m["name"]
        rows = [[name, dims, *(None if x == "keep" else x.upper() for x in g[1:])]
                for (name, dims), g in zip(m["tensors"], got)]
        out_models.append({"name": m["name"], "arch": m["arch"], "n_layer": m["n_layer"],
                           "n_expert": m["n_expert"], "is70B": m["is70B"], "tensors": rows})
    quant_cpp = (src / "src" / "llama-quant.cpp").read_bytes()
    doc = {
        "generator": "tests/reference/gen_ggml_kquant_fixture.py --part rules",
        "provenance": {"sdist": f"{SDIST}=={SDIST_VERSION}",
                       "llama_cpp_commit": llama_cpp_commit(src),
                       "llama_quant_cpp_sha256": sha256(quant_cpp),
                       "function": "llama_quant_compute_types (src/llama-ext.h)"},
        "tensor_row": ["name", "dims (ggml order)", *SCHEMES],
        "models": out_models,
    }
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    # One tensor per line keeps the file short and diffable (and is how `deno fmt` keeps it).
    rows = []
    for m in out_models:
        for i, r in enumerate(m["tensors"]):
            m["tensors"][i] = f"@@row{len(rows)}@@"
            rows.append(r)
    text = json.dumps(doc, indent=2)
    text = re.sub(r'"@@row(\d+)@@"', lambda mm: json.dumps(rows[int(mm.group(1))]), text)
    for m in out_models:
        m["tensors"] = [rows[int(t[5:-2])] for t in m["tensors"]]
    assert json.loads(text) == doc
    (OUT_DIR / "llama_tensor_types.json").write_text(text + "\n")


def write_readme() -> None:
    """README.md from whatever index.json and llama_tensor_types.json hold."""
    index = json.loads((OUT_DIR / "index.json").read_text())
    prov = index["provenance"]
    rows = index["rows"]
    n_elements = index["n_elements"]
    n_blocks = n_elements // QK_K
    table_rows = [("file", "contents", "sha256"),
                  ("`input_f32.bin`", f"{len(rows)} rows, {n_elements} little-endian f32",
                   f"`{index['sha256']['input_f32.bin']}`")]
    for key, (name, size, _) in TYPES.items():
        table_rows.append((f"`{key}.bin`", f"{n_blocks} × {size} bytes ({name} blocks)",
                           f"`{index['sha256'][key + '.bin']}`"))
    table_rows.append(("`index.json`", "rows (name, length, offsets), provenance, sha256", ""))
    rules_path = OUT_DIR / "llama_tensor_types.json"
    rules_blocks: list[str] = []
    if rules_path.exists():
        rules = json.loads(rules_path.read_text())
        n_tensors = sum(len(m["tensors"]) for m in rules["models"])
        table_rows.append(("`llama_tensor_types.json`",
                           f"{len(rules['models'])} mock models, {n_tensors} tensors, their types",
                           f"`{sha256(rules_path.read_bytes())}`"))
        rprov = rules["provenance"]
        rules_blocks = [
            "## Tensor types (`llama_tensor_types.json`)",
            "Oracle for `convert/kquant_rules.ts`, checked by `convert/kquant_rules_test.ts`:"
            " mock models (names and dims of every tensor) and the type llama.cpp's quantizer"
            " gives each in Q4_K_M, Q5_K_M and Q6_K without an importance matrix (`null`: kept"
            " as in the source). `--part rules` builds libllama from the same sdist (cmake, a C++"
            " compiler, a few minutes) and a harness that calls `llama_quant_compute_types` of"
            " `src/llama-ext.h`, as llama.cpp's `tests/test-quant-type-selection.cpp` does, on the"
            " quantizable tensors sorted by block number like the model loader."
            f" `src/llama-quant.cpp` sha256 `{rprov['llama_quant_cpp_sha256']}`. The models: "
            + "; ".join(m["name"] for m in rules["models"]) + ".",
        ]
    readme = markdown(
        "# ggml_kquant fixture",
        "Oracles from llama.cpp's own code: for the Q4_K, Q5_K and Q6_K encoders of"
        " `formats/ggml/quantize_row.ts` (f32 rows and the blocks ggml's C reference quantizers"
        " write for them, checked byte for byte by `formats/ggml/quantize_kquant_test.ts`), and"
        " for the tensor type rules of `convert/kquant_rules.ts`.",
        f"Source: llama.cpp as vendored by the PyPI sdist `{SDIST}=={SDIST_VERSION}`"
        f" (llama.cpp commit `{prov['llama_cpp_commit']}`).",
        "Regenerate (Python standard library only, plus a C compiler, and for `--part rules`"
        " cmake and a C++ compiler; without `--llama-cpp` the script pip-downloads the sdist):",
        "```sh\n"
        "python3 tests/reference/gen_ggml_kquant_fixture.py    # both parts\n"
        f"# or: pip download --no-deps --no-binary=:all: {SDIST}=={SDIST_VERSION}, unpack, then\n"
        "python3 tests/reference/gen_ggml_kquant_fixture.py --llama-cpp DIR/vendor/llama.cpp"
        " --part quant\n"
        "```",
        "## Quantized blocks",
        "gguf-py cannot quantize K types, so the script compiles a small C harness against"
        " llama.cpp's `ggml/src/ggml-quants.c` and calls `quantize_q4_K` / `quantize_q5_K` /"
        " `quantize_q6_K` once per row with no importance matrix, the call llama.cpp's quantizer"
        " makes; without an imatrix these run `quantize_row_q4_K_ref` / `quantize_row_q5_K_ref` /"
        f" `quantize_row_q6_K_ref`. `ggml-quants.c` sha256 `{prov['ggml_quants_c_sha256']}`.",
        f"Built with `{prov['cflags']}` for baseline {prov['machine']} (no FMA), as"
        " llama.cpp builds ggml-base, by every compiler found, all of which agreed byte for byte: "
        + "; ".join(prov["compilers"]) + f". Python {prov['python']}. A build that fuses"
        " multiplies and adds (FMA contraction: gcc's default `-ffp-contract=fast` with"
        " `-march=native`, or any aarch64 build) rounds differently and writes different bytes for"
        " some blocks (for Gaussian data, a few percent of Q4_K and Q6_K blocks and more of Q5_K);"
        " x86-64 builds of llama.cpp's quantizer do not fuse in ggml-base.",
        f"Inputs are deterministic (`random.Random(20260601)`); `rows` in `index.json` names each"
        f" of the {len(rows)} rows: Gaussian rows of 256 to 4096 values at typical weight scales,"
        " rows with outliers, heavy tails, all-positive and all-negative rows, zero, constant and"
        " single-value rows, rows with zero sub-blocks, grids that make `nearest_int` ties, tiny"
        " magnitudes (f16 scales underflow, groups under `GROUP_MAX_EPS`, f32 subnormals) and huge"
        " ones (f16 scales overflow to Infinity, `x * x` and the sums overflow f32 and give"
        " Infinity and NaN inside ggml's search; the fixture pins down what ggml writes then).",
        *rules_blocks,
        "## Files",
        table(table_rows),
    )
    (OUT_DIR / "README.md").write_text(readme)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--llama-cpp", type=Path, help="an unpacked llama.cpp source tree")
    ap.add_argument("--part", choices=["all", "quant", "rules"], default="all")
    ap.add_argument("--llama-build", type=Path,
                    help="an existing cmake build folder of the same llama.cpp with libllama built")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        src = args.llama_cpp.resolve() if args.llama_cpp else fetch_llama_cpp(work)
        if args.part in ("all", "quant"):
            gen_quant(src, work)
        if args.part in ("all", "rules"):
            gen_rules(src, work, args.llama_build.resolve() if args.llama_build else None)
    write_readme()
    total = sum(p.stat().st_size for p in OUT_DIR.iterdir())
    print(f"wrote {OUT_DIR} ({total} bytes)", file=sys.stderr)


if __name__ == "__main__":
    main()
