/**
 * `cflow generate`, `cflow chat` and `cflow perplexity`: load a model
 * (converting GGUF or Hugging Face checkpoints once into the cache), its
 * tokenizer and chat template, and run it.
 *
 * @module
 */

import { openKernels } from "../ffi/mod.ts";
import type { KvCacheType, Transformer } from "../model/mod.ts";
import { fnv1a64, generate, type GenerationStats } from "../runtime/generate.ts";
import { checkDraftVocabulary, DraftModel } from "../runtime/draft_model.ts";
import { NgramLookup } from "../runtime/ngram_lookup.ts";
import { compileConstraint, type ConstraintSpec } from "../grammar/mod.ts";
import type { SpeculationOptions } from "../runtime/speculative.ts";
import { resolveModel } from "../runtime/model_store.ts";
import { openModel } from "../runtime/open_model.ts";
import { perplexity } from "../runtime/perplexity.ts";
import { Sampler, type SamplerOptions } from "../sampling/mod.ts";
import { chatPromptIds, chatTemplateFrom } from "../chat/mod.ts";
import type { Tokenizer } from "../tokenizer/mod.ts";
import type { TargetQuant } from "../convert/mod.ts";
import { progressBar } from "./progress.ts";
import { EXIT } from "./exit_codes.ts";
import { resolveModelArgument } from "./paths.ts";

/** A command-line mistake (exit status 2, `EXIT.USAGE`). */
export class UsageError extends Error {
  override name = "UsageError";
}

/** Options shared by the model commands, already parsed. */
export interface ModelArgs {
  model: string;
  /** A chat template to use instead of the model's own (its text). */
  template?: string;
  ctx?: number;
  kvCache: KvCacheType;
  quant?: TargetQuant;
  json: boolean;
  /** Whether weights are repacked into panels at load (default auto). */
  packed?: "auto" | "on" | "off";
  /** When packed weights' file pages are dropped. */
  evict?: "never" | "after-pack" | "phase-boundary";
  /** Where expert tiles are read from. */
  expertTier?: "mmap" | "disk";
  /** Disk tier: read and wait in the routing layer, or overlap the expert_delay window. */
  expertFetch?: "sync" | "staged";
  /** Disk tier: MiB of LRU expert cache. */
  expertCacheMiB?: number;
  /** Speculative decoding (generate, chat, serve). */
  speculation?: SpeculationArgs;
}

/** `--draft-model`, `--lookup-ngram`, `--draft-max`, `--draft-min-p`, parsed. */
export interface SpeculationArgs {
  /** The draft model (a --model form), or absent with lookupNgram. */
  draftModel?: string;
  /** Prompt lookup's n-gram, or absent with draftModel. */
  lookupNgram?: number;
  /** Most drafted tokens per check. */
  draftMax: number;
  /** The draft model's stopping probability. */
  draftMinP: number;
}

/** Model, tokenizer and chat template, ready. */
export interface Session {
  model: Transformer;
  tokenizer: Tokenizer;
  path: string;
  /** With --draft-model: the draft, loaded with the target's context length. */
  draft?: Transformer;
}

/** The speculation options of a session's arguments (undefined: none). */
export function speculationOf(
  session: Session,
  args: SpeculationArgs | undefined,
): SpeculationOptions | undefined {
  if (args === undefined) return undefined;
  const drafter = session.draft !== undefined
    ? new DraftModel(session.draft, { minP: args.draftMinP })
    : new NgramLookup(args.lookupNgram!);
  return { drafter, maxDraft: args.draftMax };
}

/**
 * Resolves a model for the model commands: a pull alias names the model
 * pulled into the user cache, `ollama:NAME[:TAG]` the GGUF file in
 * Ollama's store; a GGUF file or HF folder is converted into the cache on
 * first use, with a progress bar when stderr is a terminal.
 */
export async function resolveForCli(args: Pick<ModelArgs, "model" | "quant">): Promise<string> {
  return await resolveModel(await resolveModelArgument(args.model), {
    quant: args.quant,
    progress: progressBar({ label: "converting" }),
    onConvert: (src, dst) => console.error(`cflow: converting ${src} once into ${dst}`),
  });
}

/**
 * Resolves, converts if needed, and loads a model; packing the weights at
 * load shows a progress bar when it takes more than a moment and stderr is
 * a terminal.
 */
export async function openSession(
  args: ModelArgs,
  defaultContext: number | "trained" = "trained",
): Promise<Session> {
  openKernels();
  const path = await resolveForCli(args);
  const budget = kvBudget();
  const { model, tokenizer } = openModel(path, {
    contextLength: args.ctx ?? defaultContext,
    contextMemoryBytes: budget.bytes,
    kvCache: args.kvCache,
    packed: packedOption(args.packed),
    evict: args.evict,
    expertTier: args.expertTier,
    expertFetch: args.expertFetch,
    expertCacheMiB: args.expertCacheMiB,
    packProgress: progressBar({ label: "loading", delayMs: 300 }),
  });
  const cap = model.contextCap;
  if (cap !== undefined) {
    console.error(
      `cflow: context ${cap.chosen} tokens of the ${cap.trained} the model was trained for: ` +
        `${budget.why} (${mib(cap.kvBytes)} MiB of KV cache); --ctx N to choose`,
    );
  }
  const draftArg = args.speculation?.draftModel;
  if (draftArg === undefined) return { model, tokenizer, path };
  try {
    return { model, tokenizer, path, draft: await openDraft(draftArg, args, model, tokenizer) };
  } catch (error) {
    model.close();
    throw error;
  }
}

/** Loads a draft model for `target`: its context, its KV cache type, its vocabulary. */
export async function openDraft(
  draftArg: string,
  args: ModelArgs,
  target: Transformer,
  targetTokenizer: Tokenizer,
): Promise<Transformer> {
  const draftPath = await resolveForCli({ model: draftArg, quant: args.quant });
  const draft = openModel(draftPath, {
    contextLength: target.contextLength,
    kvCache: args.kvCache,
    packed: packedOption(args.packed),
    evict: args.evict,
    packProgress: progressBar({ label: "loading draft", delayMs: 300 }),
  });
  try {
    checkDraftVocabulary(targetTokenizer, draft.tokenizer, draftArg);
    if (draft.model.contextLength < target.contextLength) {
      throw new RangeError(
        `draft model ${draftArg}: its context of ${draft.model.contextLength} is shorter than the target's ${target.contextLength}`,
      );
    }
  } catch (error) {
    draft.model.close();
    throw error;
  }
  return draft.model;
}

function mib(bytes: number): string {
  return (bytes / (1 << 20)).toFixed(0);
}

/**
 * The most bytes the KV cache of a default-length context may take: a
 * quarter of the memory available now (the weights, the workspace and other
 * programs need the rest), or 2 GiB where that cannot be read.
 */
function kvBudget(): { bytes: number; why: string } {
  try {
    const available = Deno.systemMemoryInfo().available;
    if (available > 0) {
      return {
        bytes: available / 4,
        why: `a quarter of the ${mib(available)} MiB of memory available`,
      };
    }
  } catch {
    // no --allow-sys=systemMemoryInfo: the fixed budget below
  }
  return { bytes: 2 * 1024 ** 3, why: "2 GiB (the available memory could not be read)" };
}

/** `--packed auto|on|off` as the model option. */
export function packedOption(mode: ModelArgs["packed"]): boolean | "auto" {
  return mode === "on" ? true : mode === "off" ? false : "auto";
}

/** Reads the prompt from stdin (bounded, strict UTF-8). */
export async function readStdinText(limit = 16 << 20): Promise<string> {
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of Deno.stdin.readable) {
    size += chunk.length;
    if (size > limit) throw new RangeError(`stdin: more than ${limit} bytes`);
    chunks.push(chunk);
  }
  const all = new Uint8Array(size);
  let o = 0;
  for (const c of chunks) {
    all.set(c, o);
    o += c.length;
  }
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(all);
  } catch {
    throw new RangeError("stdin: the input is not valid UTF-8");
  }
}

/** afterLoad -> after_load. */
function snake(name: string): string {
  return name.replace(/[A-Z]/g, (c) => "_" + c.toLowerCase());
}

function statsLine(s: GenerationStats, rssMiB: number): string {
  const spec = s.speculation;
  return `prompt ${s.promptTokens} tokens, prefill ${s.prefillTokS.toFixed(1)} tok/s, ` +
    `ttft ${s.ttftMs.toFixed(0)} ms, decode ${s.decodeTokS.toFixed(1)} tok/s, ` +
    `${s.generatedTokens} tokens (${s.stopReason}), peak RSS ${rssMiB.toFixed(0)} MiB` +
    (spec === undefined
      ? ""
      : `, ${spec.kind} drafted ${spec.drafted}, accepted ${spec.accepted} ` +
        `(${(100 * spec.acceptanceRate).toFixed(0)}%)`);
}

/** Generation settings from the command line. */
export interface GenerateArgs extends ModelArgs {
  prompt: string;
  /** Tokens to generate; undefined: until end of text or the context is full. */
  maxTokens?: number;
  sampling: SamplerOptions;
  stop: string[];
  truncate: "error" | "left";
  chatTemplate: boolean;
  /** --json-schema / --grammar: what the output must match. */
  constraint?: ConstraintSpec;
}

/**
 * `cflow generate`: streams text to stdout and one stats line to stderr, or
 * with --json prints one object.
 */
export async function runGenerate(args: GenerateArgs): Promise<number> {
  const session = await openSession(args);
  const { model, tokenizer } = session;
  try {
    // With the chat template, the prompt is a user message: its text cannot spell the
    // template's special tokens (chatPromptIds); without it, it is plain text.
    let prompt: number[];
    if (args.chatTemplate) {
      const choice = chatTemplateFrom({ "tokenizer.chat_template": tokenizer.chatTemplate }, {
        override: args.template,
        model: args.model,
      });
      prompt = chatPromptIds(tokenizer, choice.template, [{ role: "user", content: args.prompt }], {
        addGenerationPrompt: true,
      });
    } else {
      prompt = tokenizer.encode(args.prompt, { addSpecial: true, parseSpecial: false });
    }
    // Without --max-tokens, --truncate left keeps room for a quarter of the context.
    const room = model.contextLength - (args.maxTokens ?? Math.floor(model.contextLength / 4));
    if (prompt.length > model.contextLength || (args.truncate === "left" && prompt.length > room)) {
      if (args.truncate !== "left") {
        throw new RangeError(
          `the prompt has ${prompt.length} tokens, more than the context of ${model.contextLength} ` +
            `(use --ctx to raise it, or --truncate left to keep the end of the prompt)`,
        );
      }
      prompt = prompt.slice(prompt.length - Math.max(1, room));
    }
    const sampler = new Sampler(model.config.vocab, args.sampling);
    const ids: number[] = [];
    let out = "";
    const enc = new TextEncoder();
    const abort = new AbortController();
    const onSigint = () => abort.abort();
    Deno.addSignalListener("SIGINT", onSigint);
    let stats: GenerationStats;
    try {
      const it = generate(model, tokenizer, sampler, prompt, {
        maxTokens: args.maxTokens ?? model.contextLength,
        stop: args.stop,
        signal: abort.signal,
        speculation: speculationOf(session, args.speculation),
        constraint: args.constraint && compileConstraint(args.constraint, tokenizer),
      });
      while (true) {
        const r = await it.next();
        if (r.done) {
          stats = r.value;
          break;
        }
        if (r.value.id >= 0) ids.push(r.value.id);
        out += r.value.text;
        if (!args.json && r.value.text !== "") await Deno.stdout.write(enc.encode(r.value.text));
      }
    } finally {
      Deno.removeSignalListener("SIGINT", onSigint);
    }
    const rss = openKernels().peakRss() / (1 << 20);
    if (args.json) {
      console.log(JSON.stringify({
        text: out,
        tokens: ids,
        hash: fnv1a64(ids),
        prompt_tokens: prompt.length,
        stats: {
          prompt_tokens: stats.promptTokens,
          prefill_tok_s: stats.prefillTokS,
          ttft_ms: stats.ttftMs,
          decode_tok_s: stats.decodeTokS,
          generated_tokens: stats.generatedTokens,
          peak_rss_mib: rss,
          stop_reason: stats.stopReason,
          context_length: model.contextLength,
          kernel_variant: model.kernelVariant,
          weights: model.loadStats.packed ? "panels" : "tiles",
          panel_prefetch: openKernels().panelPrefetch.on,
          pack_ms: model.loadStats.packMs,
          evict: model.evictMode,
          ...(stats.memory && {
            memory: Object.fromEntries(
              Object.entries(stats.memory).map(([phase, m]) => [snake(phase), {
                rss_mib: m.rss / (1 << 20),
                pss_mib: m.pss / (1 << 20),
                pss_file_mib: m.pssFile / (1 << 20),
                pss_anon_mib: m.pssAnon / (1 << 20),
              }]),
            ),
          }),
          ...(stats.expertBytes && {
            expert_bytes: {
              prefill: stats.expertBytes.prefill,
              decode_per_token: stats.expertBytes.decodePerToken,
              decode_per_layer_per_token: stats.expertBytes.decodePerLayerPerToken,
              bank_per_layer: stats.expertBytes.bankPerLayer,
            },
            ...(stats.expertBytes.tier && {
              expert_tier: {
                direct: stats.expertBytes.tier.direct,
                read_bytes_per_token: stats.expertBytes.tier.readBytesPerToken,
                stall_ms_per_token: stats.expertBytes.tier.stallMsPerToken,
                cache_hit_rate: stats.expertBytes.tier.hitRate,
              },
            }),
            pass_ms_per_token: stats.passMsPerToken,
          }),
          ...(stats.speculation && {
            speculation: {
              kind: stats.speculation.kind,
              drafted: stats.speculation.drafted,
              accepted: stats.speculation.accepted,
              acceptance_rate: stats.speculation.acceptanceRate,
              checks: stats.speculation.checks,
              draft_ms: stats.speculation.draftMs,
            },
          }),
        },
      }));
    } else {
      await Deno.stdout.write(enc.encode("\n"));
      console.error(statsLine(stats, rss));
    }
    return stats.stopReason === "aborted" ? EXIT.INTERRUPTED : EXIT.OK;
  } finally {
    session.draft?.close();
    model.close();
  }
}

/** `cflow perplexity`: llama.cpp-style perplexity over a text file. */
export async function runPerplexity(args: ModelArgs & { file: string }): Promise<number> {
  const text = new TextDecoder("utf-8", { fatal: true }).decode(await Deno.readFile(args.file));
  const { model, tokenizer } = await openSession(args, 512);
  try {
    // As llama-perplexity tokenizes (add_special = true): a model that adds BOS gets one before
    // the text too, so the chunks are cut from the same token stream.
    const tokens = tokenizer.encode(text, { addSpecial: true, parseSpecial: false });
    const ctx = args.ctx ?? Math.min(512, model.contextLength);
    const start = performance.now();
    const r = perplexity(
      model,
      tokens,
      ctx,
      tokenizer.addBos ? tokenizer.bosId : undefined,
      (done, total, ppl) => {
        if (!args.json) console.error(`[${done}/${total}] ppl ${ppl.toFixed(4)}`);
      },
    );
    const secs = (performance.now() - start) / 1000;
    if (args.json) {
      console.log(
        JSON.stringify({
          ppl: r.ppl,
          stderr: r.stderr,
          chunks: r.chunks,
          ctx,
          tokens: tokens.length,
          scored: r.scored,
          seconds: secs,
        }),
      );
    } else {
      console.log(
        `perplexity ${r.ppl.toFixed(4)} +/- ${
          r.stderr.toFixed(4)
        } (${r.chunks} chunks of ${ctx}, ${r.scored} tokens scored, ${secs.toFixed(1)} s)`,
      );
    }
    return EXIT.OK;
  } finally {
    model.close();
  }
}
