/**
 * {@link readJsonBody}: a request body read with a size cap, decoded as strict
 * UTF-8 and parsed as JSON.
 *
 * @module
 */

import { ApiError } from "./api_error.ts";

/**
 * Reads at most `limit` bytes of `request`'s body and parses them as JSON.
 *
 * @throws {ApiError} 413 when the body is larger than `limit` (by Content-Length or as read),
 * 408 when it has not all arrived within `timeoutMs`, 400 when it is not valid UTF-8, not JSON,
 * or holds a string (or key) with a lone surrogate (`"\ud800"`: valid JSON, but no Unicode
 * text; it would reach the tokenizer as U+FFFD).
 *
 * @example
 * ```ts
 * import { readJsonBody } from "./read_json_body.ts";
 * const r = new Request("http://x/", { method: "POST", body: '{"a":1}' });
 * console.log(await readJsonBody(r, 1024)); // { a: 1 }
 * ```
 */
export async function readJsonBody(
  request: Request,
  limit: number,
  timeoutMs = 30_000,
): Promise<unknown> {
  const declared = request.headers.get("content-length");
  if (declared !== null && /^[0-9]+$/.test(declared) && Number(declared) > limit) {
    await request.body?.cancel().catch(() => {});
    throw tooLarge(limit);
  }
  const chunks: Uint8Array[] = [];
  let size = 0;
  if (request.body !== null) {
    const reader = request.body.getReader();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const late = new Promise<"late">((resolve) => {
      timer = setTimeout(() => resolve("late"), timeoutMs);
    });
    try {
      while (true) {
        const r = await Promise.race([reader.read(), late]);
        if (r === "late") {
          await reader.cancel().catch(() => {});
          throw new ApiError(
            408,
            `the request body did not arrive within ${(timeoutMs / 1000).toFixed(1)} s`,
            { code: "body_timeout" },
          );
        }
        if (r.done) break;
        size += r.value.length;
        if (size > limit) {
          await reader.cancel().catch(() => {});
          throw tooLarge(limit);
        }
        chunks.push(r.value);
      }
    } finally {
      clearTimeout(timer);
    }
  }
  const all = new Uint8Array(size);
  let o = 0;
  for (const c of chunks) {
    all.set(c, o);
    o += c.length;
  }
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(all);
  } catch {
    throw new ApiError(400, "the request body is not valid UTF-8", { code: "invalid_utf8" });
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new ApiError(400, `the request body is not valid JSON: ${(error as Error).message}`, {
      code: "invalid_json",
    });
  }
  const at = illFormedString(value);
  if (at !== undefined) {
    throw new ApiError(400, `${at ?? "the request body"} holds a lone UTF-16 surrogate`, {
      param: at,
      code: "invalid_unicode",
    });
  }
  return value;
}

/**
 * Where a string or key with a lone surrogate is (a field path like `messages[0].content`, or
 * null for the top level), or undefined when there is none. Iterative: any nesting depth.
 */
function illFormedString(root: unknown): string | null | undefined {
  const stack: { value: unknown; path: string | null }[] = [{ value: root, path: null }];
  while (stack.length > 0) {
    const { value, path } = stack.pop()!;
    if (typeof value === "string") {
      if (!value.isWellFormed()) return path;
    } else if (Array.isArray(value)) {
      for (let i = value.length - 1; i >= 0; i--) {
        const x = value[i];
        if (typeof x === "string" || (typeof x === "object" && x !== null)) {
          stack.push({ value: x, path: `${path ?? ""}[${i}]` });
        }
      }
    } else if (typeof value === "object" && value !== null) {
      const o = value as Record<string, unknown>;
      const keys = Object.keys(o);
      for (let i = keys.length - 1; i >= 0; i--) {
        const p = path === null ? keys[i] : `${path}.${keys[i]}`;
        if (!keys[i].isWellFormed()) return p.toWellFormed();
        stack.push({ value: o[keys[i]], path: p });
      }
    }
  }
  return undefined;
}

function tooLarge(limit: number): ApiError {
  return new ApiError(413, `the request body is larger than ${limit} bytes`, {
    code: "request_too_large",
  });
}
