// Generates tests/fixtures/ggml_q8_k/ with llama.cpp's own Q8_K activation quantizer,
// `quantize_row_q8_K_ref` exported by the libggml-base.so that node-llama-cpp 3.21.1 ships
// (installed by scripts/install-llamacpp.sh into .tools/llamacpp/). The oracle for
// kernels-zig/src/act_q8_k.zig, checked through a plan's `quantize_k` operation by
// ffi/quantize_k_test.ts.
//
//   ./dev run --allow-read --allow-write=tests/fixtures --allow-ffi tests/reference/gen_ggml_q8_k_fixture.ts
//   ./dev fmt tests/fixtures/ggml_q8_k/README.md
//
// Outputs (deterministic):
//   input_f32.bin  rows of 256 little-endian f32 values, one after another
//   q8_k.bin       ggml's block_q8_K of every row: f32 d, 256 int8 quants, 16 int16 bsums
//                  (292 bytes)
//   README.md      what the rows are and where the bytes come from

const LIB = ".tools/llamacpp/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/libggml-base.so";
const OUT = "tests/fixtures/ggml_q8_k";
const QK_K = 256;
const BLOCK = 4 + QK_K + 2 * (QK_K / 16);

/** A small deterministic generator (xorshift32), so the rows never change. */
function rng(seed: number): () => number {
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13;
    s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5;
    s >>>= 0;
    return s / 2 ** 32;
  };
}

/** The rows and why each is there. */
function rows(): { name: string; values: Float32Array }[] {
  const r = rng(0x5eed);
  const gauss = () => {
    const u = Math.max(r(), 1e-12);
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * r());
  };
  const out: { name: string; values: Float32Array }[] = [];
  const add = (name: string, f: (i: number) => number) =>
    out.push({ name, values: Float32Array.from({ length: QK_K }, (_, i) => f(i)) });
  add("normal activations", () => gauss());
  add("normal activations with an outlier", (i) => i === 77 ? 40 : gauss());
  add("negative largest value", (i) => i === 3 ? -9.5 : gauss() * 2);
  // max = -127 gives iscale = 1: the quants are the values, ties at every .5.
  add("ties at .5 (iscale 1)", (i) => i === 0 ? -127 : ((i % 200) - 100) + 0.5);
  add("equal magnitudes: +3 first", (i) => i === 10 ? 3 : i === 20 ? -3 : r() * 2 - 1);
  add("equal magnitudes: -3 first", (i) => i === 10 ? -3 : i === 20 ? 3 : r() * 2 - 1);
  add("zeros", () => 0);
  add("one nonzero value", (i) => i === 255 ? 1e-3 : 0);
  add("tiny values", () => gauss() * 1e-30);
  add("subnormals", () => gauss() * 1e-40);
  add("large values", () => gauss() * 1e20);
  add("residual-stream scale", () => gauss() * 300);
  return out;
}

const lib = Deno.dlopen(LIB, {
  quantize_row_q8_K_ref: { parameters: ["buffer", "buffer", "i64"], result: "void" },
});
const all = rows();
const input = new Float32Array(all.length * QK_K);
all.forEach((row, i) => input.set(row.values, i * QK_K));
const blocks = new Uint8Array(all.length * BLOCK);
lib.symbols.quantize_row_q8_K_ref(input, blocks, BigInt(input.length));
lib.close();

async function sha256(bytes: Uint8Array<ArrayBuffer>): Promise<string> {
  const d = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
  return [...d].map((b) => b.toString(16).padStart(2, "0")).join("");
}

await Deno.mkdir(OUT, { recursive: true });
const inBytes = new Uint8Array(input.buffer);
await Deno.writeFile(`${OUT}/input_f32.bin`, inBytes);
await Deno.writeFile(`${OUT}/q8_k.bin`, blocks);
const readme = `# ggml's Q8_K activation quantization

Made by \`tests/reference/gen_ggml_q8_k_fixture.ts\`, which calls \`quantize_row_q8_K_ref\` of
the \`libggml-base.so\` shipped by node-llama-cpp 3.21.1 (llama.cpp as installed by
\`scripts/install-llamacpp.sh\`) on the rows below. Checked against cflow's \`quantize_k\` plan
operation (kernels-zig/src/act_q8_k.zig) by \`ffi/quantize_k_test.ts\`.

- \`input_f32.bin\`: ${all.length} rows of ${QK_K} little-endian f32, sha256 ${await sha256(
  inBytes,
)}
- \`q8_k.bin\`: one \`block_q8_K\` per row (f32 d, ${QK_K} int8 quants, 16 int16 sums of 16), ${BLOCK}
  bytes each, sha256 ${await sha256(blocks)}

Rows:

${all.map((r, i) => `${i}. ${r.name}`).join("\n")}
`;
await Deno.writeTextFile(`${OUT}/README.md`, readme);
console.log(`wrote ${OUT}: ${all.length} rows`);
