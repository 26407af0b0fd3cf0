/**
 * What the server tests share: the test model (SmolLM2-135M-Instruct, converted once into the
 * cache the launcher uses), a server around a test body, and a JSON POST.
 *
 * @module
 */

import { resolveModel } from "../runtime/model_store.ts";
import { SMOLLM2_GGUF, smollm2Present, TEST_CACHE } from "../tests/util/test_models.ts";
import { type Server, type ServerOptions, startServer } from "./mod.ts";

const GGUF = SMOLLM2_GGUF;

/** True when the test model has been fetched (tests that need it are ignored otherwise). */
export const present: boolean = smollm2Present;

/** The converted model's path. */
export async function model(): Promise<string> {
  return await resolveModel(GGUF, { cache: `${TEST_CACHE}/converted`, quant: "q4_0" });
}

/** Runs `body` against a server on a free loopback port, closing it afterwards. */
export async function withServer(
  options: Omit<ServerOptions, "model">,
  body: (server: Server) => Promise<void>,
): Promise<void> {
  const server = await startServer({ model: await model(), port: 0, ...options });
  try {
    await body(server);
  } finally {
    await server.close();
  }
}

/** POSTs `body` as JSON (a string or bytes are sent as they are). */
export function post(
  url: string,
  body: unknown,
  headers: Record<string, string> = {},
  signal?: AbortSignal,
): Promise<Response> {
  return fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: typeof body === "string"
      ? body
      : body instanceof Uint8Array
      ? new Uint8Array(body)
      : JSON.stringify(body),
    signal,
  });
}
