/**
 * `deno task bench:grammar`: the cost of constrained decoding (structured outputs) on
 * Qwen2.5-Coder-0.5B-Instruct Q4_K_M's 151,936-token vocabulary.
 *
 *   deno task bench:grammar [--threads 2] [--seeds 2] [--max-tokens 160] [--out FILE]
 *
 * For each JSON Schema of grammar/_test_schemas.ts (every supported keyword) and each seed,
 * in the model's chat template at temperature 0.8:
 * - the constraint engine's time per generated token: the allow-check of the drawn token, the
 *   full mask when the draw is refused (check-first), and advancing the matcher; median and
 *   p99 over all tokens, the share of steps that needed a mask, and those masks' times;
 * - decode tok/s with the schema, and without it over the same number of tokens (same prompt,
 *   same seed, end-of-generation tokens ignored), alternating; the ratio.
 * One-time costs: the vocabulary trie (once per tokenizer) and each schema's compile.
 *
 * Goal (issue 21): constrained decode >= 90% of unconstrained tok/s. Printed as met or
 * missed; exit status 0 either way (a benchmark, not a test).
 *
 * @module
 */

import { parseArgs } from "node:util";
import { chatTemplateFrom, renderChat } from "../chat/mod.ts";
import { openKernels } from "../ffi/mod.ts";
import {
  compileConstraint,
  compileGrammar,
  jsonSchemaToGbnf,
  TokenConstraint,
  type TokenMatcher,
  tokenTrie,
} from "../grammar/mod.ts";
import { SCHEMAS } from "../grammar/_test_schemas.ts";
import { generate, type GenerationConstraint } from "../runtime/generate.ts";
import { resolveModel } from "../runtime/model_store.ts";
import { openModel } from "../runtime/open_model.ts";
import { Sampler } from "../sampling/mod.ts";

const ROOT = new URL("..", import.meta.url).pathname.replace(/\/$/, "");
const MODEL = `${ROOT}/cache/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf`;

const log = (s: string) => console.error(s);

/** A constraint whose matchers time every call into the engine, per generated token. */
class Timed implements GenerationConstraint {
  readonly inner: TokenConstraint;
  /** Engine milliseconds of each generated token. */
  readonly perToken: number[] = [];
  masks = 0;
  steps = 0;
  /** Milliseconds of each step's mask (memoized per grammar state: most are lookups). */
  maskMs: number[] = [];
  constructor(inner: TokenConstraint) {
    this.inner = inner;
  }
  get vocabSize(): number {
    return this.inner.vocabSize;
  }
  matcher() {
    // deno-lint-ignore no-this-alias
    const self = this;
    const m: TokenMatcher = this.inner.matcher();
    let acc = 0;
    let masked = false;
    return {
      allows(id: number) {
        const t = performance.now();
        const r = m.allows(id);
        acc += performance.now() - t;
        return r;
      },
      mask() {
        const t = performance.now();
        const r = m.mask();
        const ms = performance.now() - t;
        acc += ms;
        if (!masked) {
          masked = true;
          self.masks++;
          self.maskMs.push(ms);
        }
        return r;
      },
      accept(id: number) {
        const t = performance.now();
        m.accept(id);
        acc += performance.now() - t;
        self.perToken.push(acc);
        self.steps++;
        acc = 0;
        masked = false;
      },
      isAccepting: () => m.isAccepting(),
      canContinue: () => m.canContinue(),
    };
  }
}

function quantile(xs: number[], q: number): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * (s.length - 1) + 0.5))];
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    args: Deno.args,
    options: {
      threads: { type: "string", default: "2" },
      seeds: { type: "string", default: "2" },
      "max-tokens": { type: "string", default: "160" },
      out: { type: "string" },
    },
  });
  const threads = Number(values.threads), seeds = Number(values.seeds);
  const maxTokens = Number(values["max-tokens"]);
  for (
    const [name, v, lo, hi] of [
      ["--threads", threads, 1, 256],
      ["--seeds", seeds, 1, 20],
      ["--max-tokens", maxTokens, 8, 4096],
    ] as const
  ) {
    if (!Number.isInteger(v) || v < lo || v > hi) {
      throw new RangeError(`${name} ${v} is not in [${lo}, ${hi}]`);
    }
  }
  try {
    await Deno.stat(MODEL);
  } catch {
    throw new Error(`${MODEL} is missing: run bash scripts/fetch-models.sh qwen05b`);
  }
  openKernels({ threads });
  const cpu = (await Deno.readTextFile("/proc/cpuinfo")).match(/model name\s*:\s*(.*)/)?.[1] ?? "?";
  log(`CPU ${cpu}, ${threads} threads; loading the model`);
  const path = await resolveModel(MODEL, {});
  const { model, tokenizer } = openModel(path, { contextLength: 1024 });
  try {
    let t0 = performance.now();
    tokenTrie(tokenizer);
    const trieMs = performance.now() - t0;
    log(
      `vocabulary trie: ${tokenizer.vocabSize} tokens in ${
        trieMs.toFixed(0)
      } ms (once per tokenizer)`,
    );
    // The costliest mask: a string body (almost every token allowed), on a fresh grammar (no
    // memoized transitions or masks).
    const stringMs: number[] = [];
    for (let i = 0; i < 5; i++) {
      const c = new TokenConstraint(
        compileGrammar(jsonSchemaToGbnf({ type: "string" })),
        tokenizer,
      );
      const m = c.matcher();
      m.accept(tokenizer.encode('"')[0]);
      const t = performance.now();
      m.mask();
      stringMs.push(performance.now() - t);
    }
    log(`cold string-body mask: median ${quantile(stringMs, 0.5).toFixed(1)} ms`);
    const choice = chatTemplateFrom({ "tokenizer.chat_template": tokenizer.chatTemplate }, {});
    const all: number[] = [];
    let masks = 0, steps = 0;
    const maskMs: number[] = [];
    const compileMs: number[] = [];
    let conTok = 0, conMs = 0, plainTok = 0, plainMs = 0;
    const rows: string[] = [];
    for (const { name, schema } of SCHEMAS) {
      t0 = performance.now();
      const compiled = compileConstraint({ kind: "json_schema", schema }, tokenizer);
      compileMs.push(performance.now() - t0);
      const text = renderChat(choice.template, [{
        role: "user",
        content: `Reply with a JSON value for this schema (${name}): ${JSON.stringify(schema)}`,
      }], { bosToken: "", eosToken: "", addGenerationPrompt: true });
      const prompt = tokenizer.encode(text, { addSpecial: true, parseSpecial: true });
      for (let seed = 1; seed <= seeds; seed++) {
        const timed = new Timed(compiled);
        const sampling = { temperature: 0.8, topK: 40, topP: 0.95, minP: 0.05, seed };
        const it = generate(model, tokenizer, new Sampler(model.config.vocab, sampling), prompt, {
          maxTokens,
          constraint: timed,
        });
        let r = await it.next();
        while (!r.done) r = await it.next();
        const c = r.value;
        // The same number of tokens without the schema (EOG ignored, so the count matches).
        const it2 = generate(model, tokenizer, new Sampler(model.config.vocab, sampling), prompt, {
          maxTokens: c.generatedTokens,
          ignoreEos: true,
        });
        let r2 = await it2.next();
        while (!r2.done) r2 = await it2.next();
        const p = r2.value;
        all.push(...timed.perToken);
        masks += timed.masks;
        steps += timed.steps;
        maskMs.push(...timed.maskMs);
        if (c.generatedTokens > 1) {
          conTok += c.generatedTokens - 1;
          conMs += c.decodeMs ?? 0;
          plainTok += p.generatedTokens - 1;
          plainMs += p.decodeMs ?? 0;
        }
        rows.push(
          `${name.padEnd(34)} seed ${seed}: ${String(c.generatedTokens).padStart(3)} tokens ` +
            `(${c.stopReason}), engine median ${quantile(timed.perToken, 0.5).toFixed(3)} ms, ` +
            `masks ${timed.masks}, ${c.decodeTokS.toFixed(1)} vs ${p.decodeTokS.toFixed(1)} tok/s`,
        );
        log(rows[rows.length - 1]);
      }
    }
    const conTokS = conTok / (conMs / 1000), plainTokS = plainTok / (plainMs / 1000);
    const ratio = conTokS / plainTokS;
    const summary = [
      `CPU: ${cpu}, ${threads} threads; Qwen2.5-Coder-0.5B-Instruct Q4_K_M, vocabulary ${tokenizer.vocabSize}`,
      `${SCHEMAS.length} schemas x ${seeds} seeds, temperature 0.8, top-k 40, top-p 0.95, min-p 0.05`,
      `vocabulary trie: ${trieMs.toFixed(0)} ms once; schema compile median ${
        quantile(compileMs, 0.5).toFixed(1)
      } ms, max ${Math.max(...compileMs).toFixed(1)} ms`,
      `engine per token (check + mask when refused + advance): median ${
        quantile(all, 0.5).toFixed(3)
      } ms, p99 ${quantile(all, 0.99).toFixed(2)} ms, mean ${
        (all.reduce((a, b) => a + b, 0) / all.length).toFixed(3)
      } ms over ${all.length} tokens`,
      `a string body's mask on a fresh grammar (the costliest): median ${
        quantile(stringMs, 0.5).toFixed(1)
      } ms of 5`,
      `steps needing a full mask: ${masks} of ${steps} (${
        (100 * masks / Math.max(steps, 1)).toFixed(1)
      }%); those masks (memoized per state) median ${quantile(maskMs, 0.5).toFixed(2)} ms, max ${
        Math.max(0, ...maskMs).toFixed(1)
      } ms`,
      `decode: ${conTokS.toFixed(2)} tok/s with a schema, ${
        plainTokS.toFixed(2)
      } without (same token counts): ${(100 * ratio).toFixed(1)}%`,
      `goal constrained >= 90% of unconstrained: ${ratio >= 0.9 ? "met" : "missed"}`,
    ];
    console.log(summary.join("\n"));
    if (values.out !== undefined) {
      await Deno.writeTextFile(values.out, [...rows, "", ...summary].join("\n") + "\n");
    }
  } finally {
    model.close();
  }
}

if (import.meta.main) await main();
