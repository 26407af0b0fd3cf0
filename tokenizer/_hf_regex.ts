/**
 * Oniguruma patterns (what `tokenizers` compiles a `Regex` pattern with) as
 * JavaScript `RegExp`s with the same meaning for the constructs tokenizer
 * files use. White space, `\w`, `\d`, `.`, `^`, `$` and `\b` are spelled out
 * because JavaScript's differ (its `\s` includes U+FEFF and not U+0085; its
 * `\w`/`\b` are ASCII; Ruby-syntax `^`/`$` are line anchors). Constructs
 * JavaScript cannot express (possessive quantifiers, atomic groups, nested
 * classes, class intersection) are refused with a message naming them.
 *
 * @module
 */

import { WHITESPACE_CLASS } from "./_unicode.ts";

const WORD_CLASS = "\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\p{Join_Control}";
const SYNTAX = new Set([..."^$\\.*+?()[]{}|/"]);
const GC = new Set([
  ..."L Lu Ll Lt Lm Lo LC M Mn Mc Me N Nd Nl No P Pc Pd Ps Pe Pi Pf Po S Sm Sc Sk So Z Zs Zl Zp C Cc Cf Cs Co Cn"
    .split(" "),
]);

function property(name: string): string {
  if (GC.has(name)) return name;
  try {
    new RegExp(`\\p{${name}}`, "u");
    return name;
  } catch {
    try {
      new RegExp(`\\p{Script=${name}}`, "u");
      return `Script=${name}`;
    } catch {
      throw new SyntaxError(`unknown Unicode property \\p{${name}}`);
    }
  }
}

/** Translates an Oniguruma pattern to a global, Unicode-aware RegExp; throws SyntaxError. */
export function onigToRegExp(src: string): RegExp {
  let out = "";
  let inClass = false;
  let quantified = false; // the previous token was a quantifier
  let i = 0;
  const unsupported = (what: string) =>
    new SyntaxError(`${what} in ${JSON.stringify(src)} has no JavaScript equivalent`);
  while (i < src.length) {
    const c = src[i];
    let wasQuantifier = false;
    if (c === "\\") {
      const d = src[i + 1];
      if (d === undefined) throw new SyntaxError(`pattern ${JSON.stringify(src)} ends with \\`);
      i += 2;
      switch (d) {
        case "s":
          out += inClass ? WHITESPACE_CLASS : `[${WHITESPACE_CLASS}]`;
          break;
        case "S":
          if (inClass) throw unsupported("\\S inside a class");
          out += `[^${WHITESPACE_CLASS}]`;
          break;
        case "w":
          out += inClass ? WORD_CLASS : `[${WORD_CLASS}]`;
          break;
        case "W":
          if (inClass) throw unsupported("\\W inside a class");
          out += `[^${WORD_CLASS}]`;
          break;
        case "d":
          out += "\\p{Nd}";
          break;
        case "D":
          out += "\\P{Nd}";
          break;
        case "h":
          out += inClass ? "0-9a-fA-F" : "[0-9a-fA-F]";
          break;
        case "b":
          if (inClass) {
            out += "\\x08";
            break;
          }
          out +=
            `(?:(?<=[${WORD_CLASS}])(?![${WORD_CLASS}])|(?<![${WORD_CLASS}])(?=[${WORD_CLASS}]))`;
          break;
        case "B":
          out +=
            `(?:(?<=[${WORD_CLASS}])(?=[${WORD_CLASS}])|(?<![${WORD_CLASS}])(?![${WORD_CLASS}]))`;
          break;
        case "A":
          out += "^";
          break;
        case "z":
        case "Z":
          out += "$";
          break;
        case "p":
        case "P": {
          let name: string;
          if (src[i] === "{") {
            const close = src.indexOf("}", i);
            if (close < 0) throw new SyntaxError(`unterminated \\${d}{ in ${JSON.stringify(src)}`);
            name = src.slice(i + 1, close);
            i = close + 1;
          } else {
            name = src[i] ?? "";
            i++;
          }
          let neg = d === "P";
          if (name.startsWith("^")) {
            neg = !neg;
            name = name.slice(1);
          }
          out += `\\${neg ? "P" : "p"}{${property(name)}}`;
          break;
        }
        case "x":
          if (src[i] === "{") {
            const close = src.indexOf("}", i);
            out += `\\u{${src.slice(i + 1, close)}}`;
            i = close + 1;
          } else {
            out += `\\x${src.slice(i, i + 2)}`;
            i += 2;
          }
          break;
        case "u":
          out += `\\u${src.slice(i, i + 4)}`;
          i += 4;
          break;
        case "n":
        case "r":
        case "t":
        case "f":
        case "v":
          out += `\\${d}`;
          break;
        case "0":
          out += "\\0";
          break;
        case "k":
          out += `\\k`;
          break;
        default:
          if (/[1-9]/.test(d)) out += `\\${d}`;
          else if (/[A-Za-z]/.test(d)) throw unsupported(`\\${d}`);
          else if (SYNTAX.has(d) || (inClass && d === "-")) out += `\\${d}`;
          else out += d;
      }
    } else if (inClass) {
      if (c === "]") {
        inClass = false;
        out += "]";
      } else if (c === "[") {
        throw unsupported("a nested character class");
      } else if (c === "&" && src[i + 1] === "&") {
        throw unsupported("class intersection (&&)");
      } else {
        out += c;
      }
      i++;
    } else if (c === "[") {
      inClass = true;
      out += "[";
      i++;
      if (src[i] === "^") {
        out += "^";
        i++;
      }
      if (src[i] === "]") {
        out += "\\]";
        i++;
      }
    } else if (c === "(") {
      if (src.startsWith("(?>", i)) throw unsupported("an atomic group (?>…)");
      if (src.startsWith("(?#", i)) {
        const close = src.indexOf(")", i);
        i = close < 0 ? src.length : close + 1;
        continue;
      }
      if (/^\(\?[imx-]+\)/.test(src.slice(i))) throw unsupported("an inline flag group");
      out += "(";
      i++;
    } else if (c === ".") {
      out += "[^\\n]";
      i++;
    } else if (c === "^") {
      out += "(?<![^\\n])";
      i++;
    } else if (c === "$") {
      out += "(?![^\\n])";
      i++;
    } else if (c === "{") {
      const q = /^\{(\d+)(,(\d*))?\}/.exec(src.slice(i));
      if (q !== null) {
        out += q[0];
        i += q[0].length;
        wasQuantifier = true;
      } else {
        out += "\\{";
        i++;
      }
    } else if (c === "}") {
      out += "\\}";
      i++;
    } else if (c === "*" || c === "+" || c === "?") {
      if (c === "+" && quantified) throw unsupported("a possessive quantifier");
      out += c;
      i++;
      wasQuantifier = c !== "?" || !quantified;
    } else {
      out += c;
      i++;
    }
    quantified = wasQuantifier;
  }
  if (inClass) throw new SyntaxError(`unterminated character class in ${JSON.stringify(src)}`);
  return new RegExp(out, "gu");
}

/** The regex of `tokenizers`' ByteLevel pre-tokenizer (GPT-2's). */
export const GPT2_PATTERN =
  "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
