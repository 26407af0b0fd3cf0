/**
 * Tools in a chat: the OpenAI shapes of function tools and of `tool_choice`, the messages of a
 * conversation with calls turned into what chat templates expect (as transformers'
 * `apply_chat_template(messages, tools=...)` takes them), which call format a template uses, and
 * the output constraint of a forced call.
 *
 * @module
 */

import type { ConstraintSpec } from "../grammar/constraint_spec.ts";

/**
 * A function the model may call, as OpenAI's `tools[]` gives it (and as transformers passes it
 * to a template's `tools`).
 *
 * @example
 * ```ts
 * import type { ToolDefinition } from "./chat_tools.ts";
 * const weather: ToolDefinition = {
 *   type: "function",
 *   function: {
 *     name: "get_weather",
 *     description: "Current weather of a city",
 *     parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
 *   },
 * };
 * console.log(weather.function.name);
 * ```
 */
export interface ToolDefinition {
  /** Always `"function"`. */
  type: "function";
  /** The function: its name, what it does, the JSON schema of its arguments. */
  function: {
    /** 1 to 64 of `a-z A-Z 0-9 _ -`. */
    name: string;
    description?: string;
    /** A JSON schema of the arguments object (default: any object). */
    parameters?: Record<string, unknown>;
    /** OpenAI's strict mode: passed to the template as given. */
    strict?: boolean;
  };
}

/**
 * OpenAI's `tool_choice`: `"none"` (no call: the tools are not shown to the model and nothing is
 * parsed), `"auto"` (the model may call), `"required"` (it must call one of them) or a named
 * function (it must call that one).
 *
 * @example
 * ```ts
 * import type { ToolChoice } from "./chat_tools.ts";
 * const c: ToolChoice = { type: "function", function: { name: "get_weather" } };
 * console.log(c);
 * ```
 */
export type ToolChoice =
  | "none"
  | "auto"
  | "required"
  | { type: "function"; function: { name: string } };

/**
 * How a chat template writes calls: `"hermes"` is the Hermes/Qwen2.5 format, a JSON object
 * `{"name": ..., "arguments": {...}}` between `<tool_call>` and `</tool_call>`.
 *
 * @example
 * ```ts
 * import type { ToolCallFormat } from "./chat_tools.ts";
 * const f: ToolCallFormat = "hermes";
 * console.log(f);
 * ```
 */
export type ToolCallFormat = "hermes";

/**
 * The call format of a chat template, or undefined when it renders no tools (it never reads a
 * `tools` variable) or writes calls in a format not parsed here. A template is `"hermes"` when it
 * reads `tools` and writes `<tool_call>` (Qwen2.5, Hermes 2/3).
 *
 * @example
 * ```ts
 * import { toolCallFormat } from "./chat_tools.ts";
 * console.log(toolCallFormat("{% if tools %}<tools>{{ tools | tojson }}</tools>{% endif %}<tool_call>"));
 * // hermes
 * console.log(toolCallFormat("{% for m in messages %}{{ m.content }}{% endfor %}")); // undefined
 * ```
 */
export function toolCallFormat(template: string): ToolCallFormat | undefined {
  return /\btools\b/.test(template) && template.includes("<tool_call>") ? "hermes" : undefined;
}

/**
 * A message of a conversation with tools, in the OpenAI shape: assistant turns may carry
 * `tool_calls` (with `function.arguments` as a JSON string, as OpenAI sends them, or already an
 * object) and a null `content`; `tool` turns carry a call's result.
 *
 * @example
 * ```ts
 * import type { ToolChatMessage } from "./chat_tools.ts";
 * const turn: ToolChatMessage = {
 *   role: "assistant",
 *   content: null,
 *   tool_calls: [{ id: "call_1", type: "function", function: { name: "f", arguments: "{}" } }],
 * };
 * console.log(turn.role);
 * ```
 */
export interface ToolChatMessage {
  /** `"system"`, `"user"`, `"assistant"`, `"tool"` or whatever else the template knows. */
  role: string;
  /** The text of the turn; null for an assistant turn of calls only. */
  content: string | null;
  /** An assistant turn's calls: arguments as OpenAI's JSON string, or an object. */
  tool_calls?: readonly {
    id?: string;
    type?: "function";
    function: { name: string; arguments: string | Record<string, unknown> };
  }[];
  /** A `tool` turn's call id. */
  tool_call_id?: string;
  /** The speaker's name (OpenAI's `name`). */
  name?: string;
}

/**
 * Messages as chat templates expect them (what transformers' `apply_chat_template` is given): a
 * null `content` becomes `""` (templates test it for truth, as Python's None), each call's
 * `function.arguments` a parsed object (Qwen2.5's template writes it with `tojson`; a string
 * would be written quoted). Other fields are kept.
 *
 * @throws {TypeError} If a call's `arguments` string is not a JSON object.
 *
 * @example
 * ```ts
 * import { templateMessages } from "./chat_tools.ts";
 * const [m] = templateMessages([{
 *   role: "assistant",
 *   content: null,
 *   tool_calls: [{ id: "call_1", type: "function", function: { name: "f", arguments: '{"x":1}' } }],
 * }]);
 * console.log(m.content === "", m.tool_calls); // true [ { id: "call_1", type: "function", function: { name: "f", arguments: { x: 1 } } } ]
 * ```
 */
export function templateMessages(
  messages: readonly ToolChatMessage[],
): ({ role: string; content: string } & Record<string, unknown>)[] {
  return messages.map((m, i) => {
    const out: { role: string; content: string } & Record<string, unknown> = {
      ...m,
      content: m.content ?? "",
    };
    if (m.tool_calls !== undefined) {
      out.tool_calls = m.tool_calls.map((c, j) => {
        let args: unknown = c.function.arguments;
        if (typeof args === "string") {
          try {
            args = JSON.parse(args);
          } catch {
            args = undefined;
          }
        }
        if (typeof args !== "object" || args === null || Array.isArray(args)) {
          throw new TypeError(
            `messages[${i}].tool_calls[${j}].function.arguments is not a JSON object`,
          );
        }
        return { ...c, function: { ...c.function, arguments: args } };
      });
    }
    return out;
  });
}

/**
 * The constraint on the reply when a call is forced: one JSON object
 * `{"name": NAME, "arguments": ARGS}` (a bare call, which the parser takes as the call) where ARGS
 * validates against that tool's `parameters` (any object when it has none); for `"required"`
 * any of the tools (`anyOf`), for a named function that one. The reply is not opened with
 * `<tool_call>` in the prompt: Qwen2.5-Coder-0.5B-Instruct ends its reply right after such an
 * opener (greedy), and writes its calls as bare JSON by itself.
 *
 * @throws {RangeError} If the named function is not among `tools`, or `tools` is empty.
 *
 * @example
 * ```ts
 * import { toolCallConstraint } from "./chat_tools.ts";
 * const spec = toolCallConstraint([{ type: "function", function: { name: "now" } }], "required");
 * console.log(JSON.stringify(spec));
 * // {"kind":"json_schema","schema":{"type":"object","properties":{"name":{"const":"now"},"arguments":{"type":"object"}},"required":["name","arguments"],"additionalProperties":false}}
 * ```
 */
export function toolCallConstraint(
  tools: readonly ToolDefinition[],
  choice: "required" | { type: "function"; function: { name: string } },
): ConstraintSpec {
  const one = (t: ToolDefinition) => ({
    type: "object",
    properties: {
      name: { const: t.function.name },
      arguments: t.function.parameters ?? { type: "object" },
    },
    required: ["name", "arguments"],
    additionalProperties: false,
  });
  if (choice === "required") {
    if (tools.length === 0) throw new RangeError("toolCallConstraint: no tools");
    return {
      kind: "json_schema",
      schema: tools.length === 1 ? one(tools[0]) : { anyOf: tools.map(one) },
    };
  }
  const tool = tools.find((t) => t.function.name === choice.function.name);
  if (tool === undefined) {
    throw new RangeError(`toolCallConstraint: no tool named ${choice.function.name}`);
  }
  return { kind: "json_schema", schema: one(tool) };
}
