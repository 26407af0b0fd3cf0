/**
 * `cflow serve`: resolves (converting once) the model and runs the
 * OpenAI-compatible server until SIGINT or SIGTERM.
 *
 * @module
 */

import { isOllamaReference, OLLAMA_PREFIX } from "../runtime/ollama_store.ts";
import { checkAddress, type RequestLogEntry, startServer } from "../server/mod.ts";
import { type ModelArgs, packedOption, resolveForCli } from "./generate.ts";
import { EXIT } from "./exit_codes.ts";

/** Settings of `cflow serve`, already parsed. */
export interface ServeArgs extends ModelArgs {
  host: string;
  port: number;
  parallel: number;
  apiKey?: string;
  /** Refuse unknown fields and bodies not typed application/json. */
  strict?: boolean;
  /** Seconds a SIGTERM/SIGINT drain lets running generations take (default 30). */
  drainTimeout?: number;
}

/**
 * One request as a log line: `cflow serve: POST /v1/completions 200 35 ms, prompt 5,
 * generated 8, ignored n_predict`, or with `json` one JSON object.
 *
 * @example
 * ```ts
 * import { requestLogLine } from "./serve.ts";
 * console.log(requestLogLine({ method: "GET", path: "/health", status: 200, ms: 1, ignored: [] }, false));
 * // cflow serve: GET /health 200 1 ms
 * ```
 */
export function requestLogLine(e: RequestLogEntry, json: boolean): string {
  if (json) {
    return JSON.stringify({
      method: e.method,
      path: e.path,
      status: e.status,
      ms: e.ms,
      prompt_tokens: e.promptTokens ?? null,
      completion_tokens: e.completionTokens ?? null,
      ignored_fields: e.ignored,
    });
  }
  const parts = [`cflow serve: ${e.method} ${e.path} ${e.status} ${e.ms} ms`];
  if (e.promptTokens !== undefined) parts.push(`prompt ${e.promptTokens}`);
  if (e.completionTokens !== undefined) parts.push(`generated ${e.completionTokens}`);
  if (e.ignored.length > 0) parts.push(`ignored ${e.ignored.join(" ")}`);
  return parts.join(", ");
}

/**
 * `cflow serve`: prints `listening on URL` to stdout once ready, serves until
 * SIGINT/SIGTERM, then closes the models.
 *
 * @example
 * ```ts ignore
 * import { runServe } from "./serve.ts";
 * await runServe({ model: "m.gguf", host: "127.0.0.1", port: 8080, parallel: 1,
 *   kvCache: "f16", quant: "q4_0", json: false });
 * ```
 */
export async function runServe(args: ServeArgs): Promise<number> {
  // A taken port is said before any conversion or load.
  checkAddress(args.host, args.port);
  const path = await resolveForCli(args);
  const spec = args.speculation;
  const draftPath = spec?.draftModel === undefined
    ? undefined
    : await resolveForCli({ model: spec.draftModel, quant: args.quant });
  const server = await startServer({
    model: path,
    // An Ollama model is called as Ollama lists it (`llama3.2:1b`).
    modelId: isOllamaReference(args.model)
      ? args.model.slice(OLLAMA_PREFIX.length)
      : args.model.split("/").filter((p) => p !== "").pop(),
    host: args.host,
    port: args.port,
    parallel: args.parallel,
    apiKey: args.apiKey,
    contextLength: args.ctx,
    kvCache: args.kvCache,
    packed: packedOption(args.packed),
    template: args.template,
    strict: args.strict,
    speculation: spec && {
      draftModel: draftPath,
      lookupNgram: spec.lookupNgram,
      draftMax: spec.draftMax,
      minP: spec.draftMinP,
    },
    log: (e) => console.error(requestLogLine(e, args.json)),
  });
  // The first signal drains (new generations get 503, running ones finish, up to the
  // timeout); a second one stops at once.
  let draining = false;
  const stop = () => {
    if (draining) {
      void server.close();
      return;
    }
    draining = true;
    const seconds = args.drainTimeout ?? 30;
    console.error(`cflow serve: draining (up to ${seconds} s); a second signal stops at once`);
    void server.drain(seconds * 1000).then(({ ended }) => {
      if (ended > 0) console.error(`cflow serve: the drain timeout ended ${ended} generation(s)`);
    });
  };
  Deno.addSignalListener("SIGINT", stop);
  Deno.addSignalListener("SIGTERM", stop);
  console.log(
    args.json
      ? JSON.stringify({ url: server.url, model: path, parallel: args.parallel })
      : `cflow serve: listening on ${server.url} (${args.parallel} slot${
        args.parallel === 1 ? "" : "s"
      } of ${path})`,
  );
  try {
    await server.finished;
  } finally {
    Deno.removeSignalListener("SIGINT", stop);
    Deno.removeSignalListener("SIGTERM", stop);
    await server.close();
  }
  return EXIT.OK;
}
