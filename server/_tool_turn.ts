/**
 * The tool side of one chat request: what the template is given, what the prompt ends with,
 * the constraint of a forced call, and the reply's calls, whole or streamed.
 *
 * @module
 */

import {
  toolCallConstraint,
  type ToolCallEvent,
  toolCallFormat,
  ToolCallParser,
} from "../chat/mod.ts";
import type { ConstraintSpec } from "../grammar/constraint_spec.ts";
import { ApiError } from "./api_error.ts";
import type { FinishReason, ToolCallDelta } from "./openai_format.ts";
import type { ChatRequest } from "./validate_request.ts";

/** What a chat request does with tools. */
export interface ToolTurn {
  /** Template variables: `tools` when they are offered. */
  extra?: { tools: unknown[] };
  /** The forced call's JSON constraint. */
  constraint?: ConstraintSpec;
  /** A parser of the reply, when calls are parsed. */
  parser?: () => ToolCallParser;
}

/**
 * The tool side of `r` for a model whose chat template is `template`: tools are offered unless
 * `tool_choice` is `"none"`; a template that renders no tools in the Hermes/Qwen2.5 format gets
 * a 400 for `tools` (and for messages with calls or results), rather than calls silently lost.
 */
export function toolTurn(template: string, r: ChatRequest): ToolTurn {
  const format = toolCallFormat(template);
  const choice = r.toolChoice ?? (r.tools === undefined ? "none" : "auto");
  if (format === undefined) {
    const why = "the model's chat template does not render tools in a format cflow parses " +
      "(the Hermes/Qwen2.5 <tool_call> format; see README, Tool calls)";
    if (r.tools !== undefined && choice !== "none") {
      throw new ApiError(400, `tools are not supported for this model: ${why}`, {
        param: "tools",
        code: "tools_unsupported",
      });
    }
    const i = r.messages.findIndex((m) => m.tool_calls !== undefined || m.role === "tool");
    if (i >= 0) {
      const field = r.messages[i].role === "tool" ? "role" : "tool_calls";
      throw new ApiError(400, `messages[${i}].${field}: tool messages are not supported: ${why}`, {
        param: `messages[${i}].${field}`,
        code: "tools_unsupported",
      });
    }
  }
  if (r.tools === undefined || choice === "none") return {};
  const tools = r.tools;
  const names = new Set(tools.map((t) => t.function.name));
  const forced = choice !== "auto";
  return {
    extra: { tools },
    constraint: forced ? toolCallConstraint(tools, choice) : undefined,
    parser: () => new ToolCallParser({ names, parallel: r.parallelToolCalls }),
  };
}

/** `tool_calls` when the reply ended by itself with calls, else the generation's reason. */
export function finishWithCalls(reason: FinishReason, calls: number): FinishReason {
  return reason === "stop" && calls > 0 ? "tool_calls" : reason;
}

/**
 * The streamed deltas of a parser's events: content as it is; a call as two deltas, its head
 * (index, id, type, name, empty arguments), then its arguments.
 */
export function eventDeltas(
  events: readonly ToolCallEvent[],
): { content?: string; tool_calls?: ToolCallDelta[] }[] {
  const out: { content?: string; tool_calls?: ToolCallDelta[] }[] = [];
  for (const e of events) {
    if (e.kind === "content") {
      out.push({ content: e.text });
      continue;
    }
    const { id, type, function: f } = e.call;
    out.push({
      tool_calls: [{ index: e.index, id, type, function: { name: f.name, arguments: "" } }],
    });
    out.push({ tool_calls: [{ index: e.index, function: { arguments: f.arguments } }] });
  }
  return out;
}
