/**
 * {@link tokenizerFromHfJson}: a tokenizer from a Hugging Face
 * `tokenizer.json` that gives the ids the `tokenizers` library gives.
 *
 * @module
 */

import { FormatError } from "../formats/errors.ts";
import { CoreTokenizer, EOG_TEXTS, type LeadingStrip } from "./_core.ts";
import {
  kind,
  Node,
  type Piece,
  readBpe,
  readNormalizer,
  readPreTokenizer,
} from "./_hf_components.ts";
import { readDecoder, renderToken } from "./_hf_decoder.ts";
import { addedSet, type AddedToken, splitAdded } from "./_special.ts";
import { utf8 } from "./_unicode.ts";
import type { Tokenizer } from "./tokenizer.ts";

/**
 * Options of {@link tokenizerFromHfJson}.
 *
 * @example
 * ```ts
 * import type { HfTokenizerOptions } from "./tokenizer_from_hf_json.ts";
 * const o: HfTokenizerOptions = { name: "smollm2/tokenizer.json" };
 * console.log(o.name); // "smollm2/tokenizer.json"
 * ```
 */
export interface HfTokenizerOptions {
  /**
   * Name used in error messages (default `"tokenizer.json"`; the config is
   * `"tokenizer_config.json"`).
   *
   * @example
   * ```ts
   * import type { HfTokenizerOptions } from "./tokenizer_from_hf_json.ts";
   * const o: HfTokenizerOptions = { name: "models/gemma/tokenizer.json" };
   * console.log(o.name); // "models/gemma/tokenizer.json"
   * ```
   */
  name?: string;
}

function parse(text: string, file: string): unknown {
  if (typeof text !== "string") {
    throw new TypeError(`${file}: expected the file's text as a string`);
  }
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new FormatError(file, "(root)", 0, `not valid JSON: ${(e as Error).message}`);
  }
}

function readAdded(root: Node): AddedToken[] {
  const raw = root.raw("added_tokens");
  if (raw === undefined || raw === null) return [];
  return root.children("added_tokens").map((n): AddedToken => {
    const special = n.bool("special", false);
    const content = n.string("content");
    if (content.length === 0) throw n.fail("content", "an added token cannot be empty");
    const id = n.uint("id");
    if (id >= 2 ** 31) throw n.fail("id", `token id ${id} is too large`);
    return {
      id,
      content,
      singleWord: n.bool("single_word", false),
      lstrip: n.bool("lstrip", false),
      rstrip: n.bool("rstrip", false),
      normalized: n.bool("normalized", !special),
      special,
    };
  });
}

interface Template {
  prefix: number[];
  suffix: number[];
}

function readPostProcessor(node: Node | undefined, depth = 0): Template {
  const t: Template = { prefix: [], suffix: [] };
  if (node === undefined) return t;
  if (depth > 16) throw node.fail(undefined, "Sequence nested deeper than 16");
  const type = node.type();
  switch (type) {
    case "TemplateProcessing": {
      const specials = node.child("special_tokens");
      let seenSequence = false;
      node.children("single").forEach((item, i) => {
        const sp = item.child("SpecialToken");
        if (sp !== undefined) {
          const name = sp.string("id");
          const entry = specials?.child(name);
          if (entry === undefined) {
            throw node.fail(`single[${i}]`, `special token ${kind(name)} is not in special_tokens`);
          }
          const ids = entry.raw("ids");
          if (!Array.isArray(ids) || ids.some((x) => !Number.isSafeInteger(x) || x < 0)) {
            throw entry.fail("ids", `expected an array of token ids, found ${kind(ids)}`);
          }
          (seenSequence ? t.suffix : t.prefix).push(...(ids as number[]));
        } else if (item.child("Sequence") !== undefined) {
          seenSequence = true;
        } else {
          throw node.fail(`single[${i}]`, "expected { SpecialToken } or { Sequence }");
        }
      });
      return t;
    }
    case "BertProcessing":
    case "RobertaProcessing": {
      const pick = (key: string): number => {
        const v = node.raw(key);
        if (!Array.isArray(v) || v.length !== 2 || !Number.isSafeInteger(v[1]) || v[1] < 0) {
          throw node.fail(key, `expected ["token", id], found ${kind(v)}`);
        }
        return v[1];
      };
      return { prefix: [pick("cls")], suffix: [pick("sep")] };
    }
    case "ByteLevel":
      return t;
    case "Sequence":
      for (const p of node.children("processors")) {
        const inner = readPostProcessor(p, depth + 1);
        t.prefix.push(...inner.prefix);
        t.suffix.push(...inner.suffix);
      }
      return t;
    default:
      throw node.fail("type", `unsupported post-processor "${type}"`);
  }
}

interface Config {
  addBos?: boolean;
  addEos?: boolean;
  bos?: string;
  eos?: string;
  chatTemplate?: string;
}

function readConfig(text: string | undefined): Config {
  if (text === undefined) return {};
  const file = "tokenizer_config.json";
  const root = new Node(file, "", parse(text, file));
  const c: Config = {};
  const flag = (key: string) => {
    const v = root.raw(key);
    if (v === undefined || v === null) return undefined;
    if (typeof v !== "boolean") throw root.fail(key, `expected a boolean, found ${kind(v)}`);
    return v;
  };
  const tokenName = (key: string): string | undefined => {
    const v = root.raw(key);
    if (v === undefined || v === null) return undefined;
    if (typeof v === "string") return v;
    return root.child(key)!.string("content");
  };
  const addBos = flag("add_bos_token");
  const addEos = flag("add_eos_token");
  const bos = tokenName("bos_token");
  const eos = tokenName("eos_token");
  if (addBos !== undefined) c.addBos = addBos;
  if (addEos !== undefined) c.addEos = addEos;
  if (bos !== undefined) c.bos = bos;
  if (eos !== undefined) c.eos = eos;
  const tpl = root.raw("chat_template");
  if (typeof tpl === "string") c.chatTemplate = tpl;
  else if (Array.isArray(tpl)) {
    const named = root.children("chat_template");
    const pick = named.find((n) => n.raw("name") === "default") ?? named[0];
    if (pick !== undefined) c.chatTemplate = pick.string("template");
  } else if (tpl !== undefined && tpl !== null) {
    throw root.fail(
      "chat_template",
      `expected a string or a list of templates, found ${kind(tpl)}`,
    );
  }
  return c;
}

/**
 * A tokenizer from the text of a Hugging Face `tokenizer.json`, and
 * optionally of its `tokenizer_config.json` (for `add_bos_token`,
 * `add_eos_token`, `bos_token`, `eos_token` and `chat_template`).
 *
 * Encoding follows `tokenizers` (`Tokenizer::encode` with its
 * `encode_special_tokens` flag set to `!parseSpecial`): added tokens that
 * are not normalized are cut out of the raw text (leftmost-longest, with
 * `single_word`, `lstrip`, `rstrip`), each remaining piece is normalized,
 * normalized added tokens are cut out, the pre-tokenizer splits, and the BPE
 * model (with `ignore_merges`, `byte_fallback`, `unk_token`/`fuse_unk`,
 * `continuing_subword_prefix`, `end_of_word_suffix`) merges each piece.
 * Supported: normalizers `Sequence`, `Replace`, `Prepend`, `NFC`, `NFD`,
 * `NFKC`, `NFKD`, `Lowercase`, `Strip`; pre-tokenizers `Sequence`,
 * `ByteLevel`, `Split` (string or regex, every behavior, `invert`),
 * `Digits`, `Metaspace`, `Whitespace`, `WhitespaceSplit`; decoders
 * `Sequence`, `ByteLevel`, `Replace`, `ByteFallback`, `Fuse`, `Strip`,
 * `Metaspace`; post-processors `TemplateProcessing`, `ByteLevel`,
 * `BertProcessing`, `RobertaProcessing`, `Sequence`. Anything else is a
 * `FormatError` (`formats/errors.ts`) naming the JSON path, as is malformed data (merges
 * naming unknown tokens, duplicate ids, bad regexes).
 *
 * Decoding writes each token's bytes and decodes UTF-8 once, so an invalid
 * byte sequence becomes one U+FFFD per maximal invalid subpart (`tokenizers`
 * writes one per byte-fallback token).
 *
 * @example
 * ```ts
 * import { tokenizerFromHfJson } from "./tokenizer_from_hf_json.ts";
 * const json = JSON.stringify({
 *   added_tokens: [{ id: 0, content: "<eos>", special: true, normalized: false }],
 *   normalizer: { type: "Replace", pattern: { String: " " }, content: "▁" },
 *   pre_tokenizer: null,
 *   decoder: {
 *     type: "Sequence",
 *     decoders: [
 *       { type: "Replace", pattern: { String: "▁" }, content: " " },
 *       { type: "ByteFallback" },
 *       { type: "Fuse" },
 *     ],
 *   },
 *   model: {
 *     type: "BPE",
 *     byte_fallback: true,
 *     vocab: { "<eos>": 0, "h": 1, "i": 2, "▁": 3, "hi": 4, "▁hi": 5, "<0x21>": 6 },
 *     merges: ["h i", "▁ hi"],
 *   },
 * });
 * const tok = tokenizerFromHfJson(json, JSON.stringify({ eos_token: "<eos>" }));
 * console.log(tok.encode("hi hi!<eos>", { parseSpecial: true })); // [4, 5, 6, 0]
 * console.log(tok.decode([4, 5, 6])); // "hi hi!"
 * console.log(tok.eosId); // 0
 * ```
 */
export function tokenizerFromHfJson(
  json: string,
  config?: string,
  options?: HfTokenizerOptions,
): Tokenizer {
  const file = options?.name ?? "tokenizer.json";
  const root = new Node(file, "", parse(json, file));
  const modelNode = root.child("model");
  if (modelNode === undefined) throw root.fail("model", "required model is missing");
  const model = readBpe(modelNode);
  const normalizer = readNormalizer(root.child("normalizer"));
  const pre = readPreTokenizer(root.child("pre_tokenizer"));
  const decoder = readDecoder(root.child("decoder"));
  const post = readPostProcessor(root.child("post_processor"));
  const added = readAdded(root);
  const cfg = readConfig(config);

  const texts = new Map<number, string>();
  const ids = new Map<string, number>();
  for (const [t, id] of model.vocab) {
    texts.set(id, t);
    ids.set(t, id);
  }
  const specialIds = new Set<number>();
  for (const a of added) {
    // `tokenizers` spells a normalized added token in its normalized form (id_to_token, decode).
    texts.set(a.id, a.normalized && normalizer ? normalizer(a.content) : a.content);
    ids.set(a.content, a.id);
    if (a.special) specialIds.add(a.id);
  }
  let vocabSize = 0;
  for (const id of texts.keys()) vocabSize = Math.max(vocabSize, id + 1);
  for (const id of [...post.prefix, ...post.suffix]) {
    if (id >= vocabSize) {
      throw root.fail("post_processor", `token id ${id} is outside the vocabulary`);
    }
  }

  // `tokenizers` tries special tokens before the other added tokens.
  const ordered = [...added.filter((a) => a.special), ...added.filter((a) => !a.special)];
  const rawSet = addedSet(ordered.filter((a) => !a.normalized), (a) => a.content);
  const normTokens = ordered.filter((a) => a.normalized);
  const normSet = addedSet(normTokens, (a) => (normalizer ? normalizer(a.content) : a.content));

  const lookup = (name: string, key: string): number => {
    const id = ids.get(name);
    if (id === undefined) {
      throw new FormatError("tokenizer_config.json", key, 0, `${kind(name)} is not a token`);
    }
    return id;
  };
  let bosId = cfg.bos !== undefined ? lookup(cfg.bos, "bos_token") : undefined;
  let eosId = cfg.eos !== undefined ? lookup(cfg.eos, "eos_token") : undefined;
  let prefix = post.prefix;
  let suffix = post.suffix;
  if (cfg.addBos !== undefined || cfg.addEos !== undefined) {
    if (cfg.addBos && bosId === undefined) {
      throw new FormatError(
        "tokenizer_config.json",
        "add_bos_token",
        0,
        "is true but bos_token is not set",
      );
    }
    if (cfg.addEos && eosId === undefined) {
      throw new FormatError(
        "tokenizer_config.json",
        "add_eos_token",
        0,
        "is true but eos_token is not set",
      );
    }
    prefix = cfg.addBos ? [bosId!] : [];
    suffix = cfg.addEos ? [eosId!] : [];
  }
  if (bosId === undefined && prefix.length === 1) bosId = prefix[0];
  if (eosId === undefined && suffix.length === 1) eosId = suffix[0];

  const eog = new Set<number>();
  if (eosId !== undefined) eog.add(eosId);
  for (const t of EOG_TEXTS) {
    const id = ids.get(t);
    if (id !== undefined) eog.add(id);
  }

  const encode = (text: string, parseSpecial: boolean): number[] => {
    const out: number[] = [];
    let offset = 0;
    for (const s1 of splitAdded(text.toWellFormed(), rawSet, parseSpecial)) {
      const atStart = offset === 0;
      offset += s1.text.length;
      if (s1.id !== undefined) {
        out.push(s1.id);
        continue;
      }
      if (s1.text.length === 0) continue;
      const norm = normalizer ? normalizer(s1.text) : s1.text;
      const parts = normTokens.length > 0
        ? splitAdded(norm, normSet, parseSpecial)
        : [{ text: norm }];
      let offset2 = 0;
      for (const s2 of parts) {
        const first = atStart && offset2 === 0;
        offset2 += s2.text.length;
        if (s2.id !== undefined) {
          out.push(s2.id);
          continue;
        }
        if (s2.text.length === 0) continue;
        let pieces: Piece[] = [{ text: s2.text, first }];
        if (pre !== undefined) pieces = pre(pieces);
        for (const p of pieces) for (const id of model.tokenize(p.text)) out.push(id);
      }
    }
    return out;
  };

  let leading: LeadingStrip = { mode: "none" };
  if (decoder?.stripFirst) leading = { mode: "first" };
  else if (decoder?.stripWhole) {
    leading = {
      mode: "whole",
      bytes: utf8(decoder.stripWhole.char),
      count: decoder.stripWhole.count,
    };
  }
  const finish = decoder?.finish ?? [];

  return new CoreTokenizer({
    vocabSize,
    text: (id) => texts.get(id) ?? "",
    id: (t) => ids.get(t),
    piece: (id) => {
      const t = texts.get(id);
      return t === undefined ? new Uint8Array(0) : renderToken(decoder, t);
    },
    special: (id) => specialIds.has(id),
    encode,
    prefix,
    suffix,
    ...(bosId !== undefined ? { bosId } : {}),
    ...(eosId !== undefined ? { eosId } : {}),
    addBos: bosId !== undefined && prefix.includes(bosId),
    addEos: eosId !== undefined && suffix.includes(eosId),
    ...(cfg.chatTemplate !== undefined ? { chatTemplate: cfg.chatTemplate } : {}),
    eog,
    leading,
    ...(decoder === undefined ? { joiner: utf8(" ") } : {}),
    ...(finish.length > 0
      ? { finish: (b: Uint8Array) => finish.reduce((acc, f) => f(acc), b) }
      : {}),
  });
}
