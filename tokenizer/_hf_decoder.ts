/**
 * The `decoder` section of a Hugging Face `tokenizer.json`, read into a
 * {@link Decoder} whose per-token steps {@link renderToken} runs to give a
 * token's bytes, following the `tokenizers` decoders of the same name. The
 * reader throws a `FormatError` naming the path (`decoder.decoders[1].type`).
 *
 * @module
 */

import { checkDepth, type Node, pattern, replaceAll } from "./_hf_components.ts";
import { CHAR_TO_BYTE, utf8 } from "./_unicode.ts";

// ------------------------------------------------------------------- decoders

/** A token on its way through the decoder: text, or bytes once a step produced them. */
type Value = string | Uint8Array;

/** One decoder step applied to each token (`index` is the token's position after skipping). */
type TokenStep = (v: Value, index: number) => Value;

/** A compiled decoder. */
export interface Decoder {
  /** Steps applied to each token. */
  readonly perToken: readonly TokenStep[];
  /** Whether a step strips the first token's leading space (Metaspace). */
  readonly stripFirst: boolean;
  /** Leading characters a whole-text Strip removes (after Fuse): the character and count. */
  readonly stripWhole?: { readonly char: string; readonly count: number };
  /** Whole-text steps after Fuse (except the leading strip). */
  readonly finish: ((text: Uint8Array) => Uint8Array)[];
}

const encoder = new TextEncoder();
const lossy = new TextDecoder("utf-8", { ignoreBOM: true });

function asString(v: Value): string {
  return typeof v === "string" ? v : lossy.decode(v);
}

function stripChars(text: string, ch: string, start: number, stop: number): string {
  const chars = [...text];
  let s = 0;
  while (s < start && s < chars.length && chars[s] === ch) s++;
  let e = chars.length;
  for (let k = 0; k < stop && e > s && chars[e - 1] === ch; k++) e--;
  return chars.slice(s, e).join("");
}

/** Reads a `decoder`; undefined for none. */
export function readDecoder(node: Node | undefined): Decoder | undefined {
  if (node === undefined) return undefined;
  const steps: Node[] = [];
  const flatten = (n: Node, depth: number) => {
    checkDepth(n, depth);
    if (n.type() === "Sequence") n.children("decoders").forEach((c) => flatten(c, depth + 1));
    else steps.push(n);
  };
  flatten(node, 0);
  const perToken: TokenStep[] = [];
  const finish: ((t: Uint8Array) => Uint8Array)[] = [];
  let fused = false;
  let stripFirst = false;
  let stripWhole: { char: string; count: number } | undefined;
  for (const n of steps) {
    const type = n.type();
    switch (type) {
      case "Fuse":
        fused = true;
        break;
      case "Replace": {
        const p = pattern(n, "pattern");
        const content = n.string("content");
        if (fused) {
          finish.push((t) => encoder.encode(replaceAll(lossy.decode(t), p, content)));
        } else {
          perToken.push((v) => replaceAll(asString(v), p, content));
        }
        break;
      }
      case "ByteFallback":
        if (!fused) {
          perToken.push((v) => {
            if (
              typeof v !== "string" || v.length !== 6 || !v.startsWith("<0x") || !v.endsWith(">")
            ) return v;
            const b = parseInt(v.slice(3, 5), 16);
            return /^[0-9A-Fa-f]{2}$/.test(v.slice(3, 5)) ? Uint8Array.of(b) : v;
          });
        }
        break;
      case "ByteLevel":
        perToken.push((v) => {
          if (typeof v !== "string") return v;
          const out = new Uint8Array(v.length);
          for (let i = 0; i < v.length; i++) {
            const b = CHAR_TO_BYTE.get(v.charCodeAt(i));
            if (b === undefined) return encoder.encode(v);
            out[i] = b;
          }
          return out;
        });
        break;
      case "Strip": {
        const ch = n.string("content");
        const start = n.uint("start", 0);
        const stop = n.uint("stop", 0);
        if (fused) {
          if (start > 0) stripWhole = { char: ch, count: start };
          if (stop > 0) {
            finish.push((t) => encoder.encode(stripChars(lossy.decode(t), ch, 0, stop)));
          }
        } else {
          perToken.push((v) => stripChars(asString(v), ch, start, stop));
        }
        break;
      }
      case "Metaspace": {
        const replacement = n.string("replacement");
        let scheme = n.optString("prepend_scheme");
        if (scheme === undefined) scheme = n.bool("add_prefix_space", true) ? "always" : "never";
        perToken.push((v) => asString(v).replaceAll(replacement, " "));
        if (scheme !== "never") stripFirst = true;
        break;
      }
      default:
        throw n.fail("type", `unsupported decoder "${type}"`);
    }
  }
  return { perToken, stripFirst, ...(stripWhole ? { stripWhole } : {}), finish };
}

/** Bytes of one token through a decoder's per-token steps. */
export function renderToken(decoder: Decoder | undefined, token: string): Uint8Array {
  if (decoder === undefined) return utf8(token);
  let v: Value = token;
  for (const step of decoder.perToken) v = step(v, 1);
  return typeof v === "string" ? utf8(v) : v;
}
