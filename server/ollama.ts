/**
 * {@link ollamaRoutes}: Ollama's API on `cflow serve` (`/api/chat`, `/api/generate`,
 * `/api/tags`, `/api/show`, `/api/ps`, `/api/version`), over the same slots, queue, prompt
 * caches, metrics, drain, API key and request log as the OpenAI routes. Generations stream as
 * NDJSON (one JSON object a line, the last with `done: true`) unless `stream: false`.
 *
 * @module
 */

import { chatPromptIds, ChatTemplateError } from "../chat/mod.ts";
import { VERSION } from "../version.ts";
import { ApiError, jsonResponse } from "./api_error.ts";
import { complete } from "./complete.ts";
import type { RequestInfo, ServerState } from "./handler.ts";
import { ignoredOf, needJson, notDraining } from "./_route_util.ts";
import {
  doneFields,
  ndjsonLine,
  type OllamaClock,
  ollamaDetails,
  ollamaError,
  ollamaModelfile,
  ollamaParameters,
} from "./ollama_format.ts";
import { ollamaEmbed } from "./ollama_embed.ts";
import { readJsonBody } from "./read_json_body.ts";
import type { GenerationResult } from "./run_generation.ts";
import {
  validateOllamaChat,
  validateOllamaGenerate,
  validateOllamaShow,
} from "./validate_ollama.ts";
import type { SamplingRequest } from "./validate_request.ts";

/** Milliseconds of Ollama's "keep alive forever" (Go's largest duration, about 292 years). */
const FOREVER_MS = 9_223_372_036_854;

/** What a generation route puts in each object it sends. */
interface Shape {
  /** The object of one streamed piece of text (without model and created_at). */
  piece(text: string): Record<string, unknown>;
  /** The fields of the last object (or the whole answer) besides the counts. */
  last(text: string, result: GenerationResult): Record<string, unknown>;
}

function stamp(model: string): { model: string; created_at: string } {
  return { model, created_at: new Date().toISOString() };
}

/** The prompt's token budget in `numCtx` (default: the slot's context). */
function budget(
  state: ServerState,
  prompt: readonly number[],
  r: SamplingRequest,
  numCtx: number | undefined,
  param: string,
): number {
  if (prompt.length === 0) throw new ApiError(400, "the prompt has no tokens", { param });
  const ctx = numCtx ?? state.contextLength;
  const room = ctx - prompt.length;
  if (room < 1) {
    throw new ApiError(
      400,
      `the prompt has ${prompt.length} tokens; the context holds ${ctx}` +
        (numCtx === undefined ? "" : " (options.num_ctx)"),
      { param, code: "context_length_exceeded" },
    );
  }
  // As Ollama: num_predict beyond the context ends the answer at the context ("length").
  return Math.min(r.maxTokens ?? room, room);
}

/** Takes a slot (waiting in the queue) and generates, as NDJSON or one object. */
async function generateOllama(
  state: ServerState,
  request: Request,
  info: RequestInfo,
  model: string,
  prompt: number[],
  r: SamplingRequest,
  maxTokens: number,
  shape: Shape,
): Promise<Response> {
  const clock: OllamaClock = { started: info.started, acquired: 0, ended: 0 };
  const finalObject = (result: GenerationResult, text: string) => {
    clock.ended = performance.now();
    return {
      ...stamp(model),
      ...shape.last(text, result),
      ...doneFields(result, prompt.length, clock),
    };
  };
  return await complete(state, request, info, prompt, r, maxTokens, {
    // A refused schema keyword names Ollama's field.
    constraintField: "format",
    acquired: () => {
      clock.acquired = performance.now();
    },
    whole: (result) => finalObject(result, result.text),
    contentType: "application/x-ndjson",
    start: [],
    emit: (text) => ndjsonLine({ ...stamp(model), ...shape.piece(text), done: false }),
    finish: (result) => [ndjsonLine(finalObject(result, ""))],
    error: (e) => ndjsonLine(ollamaError(e)),
  });
}

/** Ollama's answer to a request with nothing to generate: the model is loaded (it always is). */
function loaded(model: string, stream: boolean, fields: Record<string, unknown>): Response {
  const value = { ...stamp(model), ...fields, done: true, done_reason: "load" };
  if (!stream) return jsonResponse(value);
  return new Response(`${JSON.stringify(value)}\n`, {
    headers: { "content-type": "application/x-ndjson" },
  });
}

/**
 * The chat template applied to `messages`, with a generation prompt, as token ids whose special
 * tokens are the template's only (chatPromptIds); `addSpecial` false leaves out the BOS (a
 * continuation of a returned `context`).
 */
function render(
  state: ServerState,
  messages: { role: string; content: string }[],
  param: string,
  addSpecial = true,
): number[] {
  if (state.chatTemplate === undefined) {
    throw new ApiError(400, "the model has no chat template: use /api/generate with raw: true", {
      param,
    });
  }
  const t = state.tokenizer;
  try {
    return chatPromptIds(t, state.chatTemplate, messages, {
      addGenerationPrompt: true,
      addSpecial,
    });
  } catch (error) {
    if (error instanceof ChatTemplateError) {
      throw new ApiError(400, `the chat template refused the messages: ${error.message}`, {
        param,
      });
    }
    throw error;
  }
}

async function body(state: ServerState, request: Request): Promise<unknown> {
  needJson(request, state.strict === true);
  return await readJsonBody(request, state.limits.maxBodyBytes, state.limits.bodyTimeoutMs);
}

async function chat(state: ServerState, request: Request, info: RequestInfo): Promise<Response> {
  const r = validateOllamaChat(
    await body(state, request),
    state.limits,
    state.vocab,
    state.contextLength,
    ignoredOf(state, info),
  );
  const assistant = (content: string) => ({ message: { role: "assistant", content } });
  if (r.load) return loaded(r.model, r.sampling.stream, assistant(""));
  const prompt = render(state, r.messages, "messages");
  const maxTokens = budget(state, prompt, r.sampling, r.numCtx, "messages");
  return await generateOllama(state, request, info, r.model, prompt, r.sampling, maxTokens, {
    piece: assistant,
    last: (content) => assistant(content),
  });
}

async function generate(
  state: ServerState,
  request: Request,
  info: RequestInfo,
): Promise<Response> {
  const r = validateOllamaGenerate(
    await body(state, request),
    state.limits,
    state.vocab,
    state.contextLength,
    ignoredOf(state, info),
  );
  if (r.load) return loaded(r.model, r.sampling.stream, { response: "" });
  if (!r.raw && state.chatTemplate === undefined && r.system !== undefined) {
    throw new ApiError(400, "the model has no chat template to put system in", {
      param: "system",
    });
  }
  // An earlier answer's context comes first, as it is: the slot's KV cache holds it still.
  const t = state.tokenizer;
  const before = r.context ?? [];
  const addSpecial = before.length === 0;
  // Through the chat template, the prompt and system are message text (no special tokens of
  // their own); raw, the prompt is the whole prompt and its special tokens are parsed, as
  // Ollama does.
  const ids = !r.raw && state.chatTemplate !== undefined
    ? render(
      state,
      [
        ...(r.system === undefined ? [] : [{ role: "system", content: r.system }]),
        { role: "user", content: r.prompt },
      ],
      "prompt",
      addSpecial,
    )
    : t.encode(r.prompt, { addSpecial, parseSpecial: r.raw });
  const prompt = [...before, ...ids];
  const maxTokens = budget(state, prompt, r.sampling, r.numCtx, "prompt");
  return await generateOllama(state, request, info, r.model, prompt, r.sampling, maxTokens, {
    piece: (response) => ({ response }),
    // As Ollama: the prompt's tokens and the answer's text tokenized again, to send back as
    // `context` and continue from.
    last: (response, result) => ({
      response,
      context: [...prompt, ...t.encode(result.text, { addSpecial: false, parseSpecial: false })],
    }),
  });
}

/** The model as `/api/tags` and `/api/ps` list it. */
function listed(state: ServerState): Record<string, unknown> {
  const d = state.description;
  if (d === undefined) throw new ApiError(500, "the model was not described at load");
  return {
    name: state.modelId,
    model: state.modelId,
    modified_at: d.modifiedAt,
    size: d.sizeBytes,
    digest: d.digest,
    details: ollamaDetails(d),
  };
}

async function show(state: ServerState, request: Request, info: RequestInfo): Promise<Response> {
  validateOllamaShow(await body(state, request), ignoredOf(state, info));
  const d = state.description;
  if (d === undefined) throw new ApiError(500, "the model was not described at load");
  return jsonResponse({
    ...(d.license === undefined ? {} : { license: d.license }),
    modelfile: ollamaModelfile(state.modelId, state.chatTemplate, state.contextLength),
    parameters: ollamaParameters(state.contextLength),
    template: state.chatTemplate ?? "",
    details: ollamaDetails(d),
    model_info: d.modelInfo,
    capabilities: ["completion"],
    modified_at: d.modifiedAt,
  });
}

/**
 * The Ollama routes, for the route table of `createHandler`: path to [method, handler].
 * `/api/embed` and `/api/embeddings` are not among them (404).
 *
 * @example
 * ```ts ignore
 * import { ollamaRoutes } from "./ollama.ts";
 * const routes = { ...ollamaRoutes(state, request, info) };
 * ```
 */
export function ollamaRoutes(
  state: ServerState,
  request: Request,
  info: RequestInfo,
): Record<string, [string, () => Promise<Response> | Response]> {
  return {
    "/api/chat": ["POST", () => chat(notDraining(state), request, info)],
    "/api/generate": ["POST", () => generate(notDraining(state), request, info)],
    "/api/embed": ["POST", () => ollamaEmbed(notDraining(state), request, info, false)],
    "/api/embeddings": ["POST", () => ollamaEmbed(notDraining(state), request, info, true)],
    "/api/tags": ["GET", () => jsonResponse({ models: [listed(state)] })],
    "/api/show": ["POST", () => show(state, request, info)],
    "/api/ps": ["GET", () => {
      const kv = state.slots.length * state.contextLength * (state.kv?.bytesPerToken ?? 0);
      const model = listed(state);
      return jsonResponse({
        models: [{
          ...model,
          // The file and every slot's KV cache, all in host memory (no GPU).
          size: (model.size as number) + kv,
          expires_at: new Date(Date.now() + FOREVER_MS).toISOString(),
          size_vram: 0,
          context_length: state.contextLength,
        }],
      });
    }],
    "/api/version": ["GET", () => jsonResponse({ version: VERSION })],
  };
}
