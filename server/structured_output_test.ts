/**
 * Structured outputs end to end: `cflow serve` on SmolLM2-135M-Instruct with the official
 * `openai` client, `response_format` JSON Schemas covering every supported keyword, 3 seeds
 * each at temperature 0.8; every output is checked by ajv (a validator nobody here wrote).
 * llama-server's `grammar` field with GBNF grammars, each output checked by our matcher and by
 * an independent regular expression or hand parser. Refused keywords and bad grammars are 400s
 * naming them. The same on `--parallel 2` (continuous batching).
 */

import assert from "node:assert/strict";
import OpenAI from "npm:openai@4.104.0";
import { Ajv } from "ajv";
import addFormatsImport from "ajv-formats";
import { post, present, withServer } from "./_test_server.ts";
import { GrammarMatcher, jsonSchemaToGbnf } from "../grammar/mod.ts";
import { SCHEMAS } from "../grammar/_test_schemas.ts";

// deno-lint-ignore no-explicit-any
const addFormats = addFormatsImport as unknown as (ajv: any) => void;

const SEEDS = [1, 2, 3];
/** Schemas whose outputs have no length bound: a max_tokens cut is allowed there, as a prefix. */
const UNBOUNDED = new Set(["additionalProperties schema"]);

const ajv = new Ajv({ strict: false });
addFormats(ajv);

Deno.test({
  name:
    "structured outputs: 24 JSON Schemas x 3 seeds at temperature 0.8, every output validates (ajv)",
  ignore: !present,
  sanitizeResources: false,
  async fn() {
    await withServer({}, async (server) => {
      const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "none" });
      const failures: string[] = [];
      for (const { name, schema } of SCHEMAS) {
        const validate = ajv.compile(schema);
        for (const seed of SEEDS) {
          const r = await client.chat.completions.create({
            model: "m",
            messages: [{ role: "user", content: `Give a short JSON example (${name}).` }],
            temperature: 0.8,
            seed,
            max_tokens: 200,
            response_format: {
              type: "json_schema",
              json_schema: { name: "t", schema, strict: true },
            },
          });
          const text = r.choices[0].message.content ?? "";
          const finish = r.choices[0].finish_reason;
          if (finish === "length" && UNBOUNDED.has(name)) {
            // A schema that admits outputs of any length may be cut by max_tokens (a sampled
            // model can keep adding properties, as llama-server's would): then the text must be
            // a prefix its grammar accepts.
            const m = GrammarMatcher.fromGbnf(jsonSchemaToGbnf(schema));
            if (!m.advance(new TextEncoder().encode(text))) {
              failures.push(`${name} seed ${seed} (length): not a prefix of the schema: ${text}`);
            }
            continue;
          }
          let value: unknown;
          try {
            value = JSON.parse(text);
          } catch {
            failures.push(`${name} seed ${seed} (${finish}): not JSON: ${text}`);
            continue;
          }
          if (finish !== "stop") failures.push(`${name} seed ${seed}: finish ${finish}: ${text}`);
          if (!validate(value)) {
            failures.push(`${name} seed ${seed}: ${ajv.errorsText(validate.errors)}: ${text}`);
          }
        }
      }
      assert.deepEqual(failures, []);
    });
  },
});

/** Test grammars with an independent check of each (a regular expression or a hand parser). */
const GRAMMARS: { name: string; gbnf: string; check: (s: string) => boolean }[] = [
  {
    name: "arithmetic",
    gbnf: `root ::= expr
expr ::= term (("+" | "-") term){0,3}
term ::= factor (("*" | "/") factor){0,2}
factor ::= [1-9] [0-9]? | "(" expr ")"
`,
    check: (s) => {
      // A recursive-descent parser written separately from the grammar engine.
      let i = 0, depth = 0;
      const factor = (): boolean => {
        if (s[i] === "(") {
          i++;
          if (++depth > 50 || !expr() || s[i] !== ")") return false;
          depth--;
          i++;
          return true;
        }
        const m = /^[1-9][0-9]?/.exec(s.slice(i));
        if (m === null) return false;
        i += m[0].length;
        return true;
      };
      const term = (): boolean => {
        if (!factor()) return false;
        for (let k = 0; k < 2 && (s[i] === "*" || s[i] === "/"); k++) {
          i++;
          if (!factor()) return false;
        }
        return true;
      };
      const expr = (): boolean => {
        if (!term()) return false;
        for (let k = 0; k < 3 && (s[i] === "+" || s[i] === "-"); k++) {
          i++;
          if (!term()) return false;
        }
        return true;
      };
      return expr() && i === s.length;
    },
  },
  {
    name: "list",
    gbnf: 'root ::= "- " item ("\\n- " item){1,3}\nitem ::= [a-z]{1,10}\n',
    check: (s) => /^- [a-z]{1,10}(\n- [a-z]{1,10}){1,3}$/.test(s),
  },
  {
    name: "small language",
    gbnf: `# statements: assignments of small expressions, ending in print
root ::= (stmt "\\n"){1,3} "print " var
stmt ::= var " = " (num | var (" + " num)?)
var ::= [a-c]
num ::= "0" | [1-9] [0-9]{0,2}
`,
    check: (s) =>
      /^(([a-c]) = ((0|[1-9][0-9]{0,2})|[a-c]( \+ (0|[1-9][0-9]{0,2}))?)\n){1,3}print [a-c]$/.test(
        s,
      ),
  },
];

Deno.test({
  name:
    "structured outputs: GBNF grammars (llama-server's grammar field) only produce accepted strings",
  ignore: !present,
  sanitizeResources: false,
  async fn() {
    await withServer({}, async (server) => {
      for (const g of GRAMMARS) {
        for (const seed of SEEDS) {
          const res = await post(`${server.url}/v1/completions`, {
            prompt: `Example (${g.name}):\n`,
            grammar: g.gbnf,
            temperature: 0.8,
            seed,
            max_tokens: 120,
          });
          assert.equal(res.status, 200);
          const body = await res.json();
          const text: string = body.choices[0].text;
          assert.equal(body.choices[0].finish_reason, "stop", `${g.name}: ${text}`);
          const m = GrammarMatcher.fromGbnf(g.gbnf);
          assert.ok(
            m.advance(new TextEncoder().encode(text)) && m.isAccepting(),
            `${g.name}: ${text}`,
          );
          assert.ok(g.check(text), `${g.name} (independent check): ${JSON.stringify(text)}`);
        }
      }
    });
  },
});

Deno.test({
  name: "structured outputs: refused keywords and bad grammars are 400s naming them",
  ignore: !present,
  sanitizeResources: false,
  async fn() {
    await withServer({}, async (server) => {
      const cases: [Record<string, unknown>, RegExp][] = [
        [
          {
            response_format: {
              type: "json_schema",
              json_schema: { name: "x", schema: { type: "object", patternProperties: { a: {} } } },
            },
          },
          /patternProperties/,
        ],
        [
          {
            response_format: {
              type: "json_schema",
              json_schema: { schema: { properties: { a: { type: "string", pattern: "(?=a)a" } } } },
            },
          },
          /pattern.*lookahead|lookahead.*pattern/,
        ],
        [{ json_schema: { type: "array", uniqueItems: true } }, /uniqueItems/],
        [{ grammar: "root ::= item\n" }, /undefined rule 'item'/],
        [{ grammar: 'root ::= root "a" | "b"' }, /left-recursive/],
        [{ response_format: { type: "xml" } }, /response_format.type/],
      ];
      for (const [extra, re] of cases) {
        const res = await post(`${server.url}/v1/chat/completions`, {
          messages: [{ role: "user", content: "hi" }],
          max_tokens: 4,
          ...extra,
        });
        const body = await res.json();
        assert.equal(res.status, 400, JSON.stringify(body));
        assert.equal(body.error.type, "invalid_request_error");
        assert.match(body.error.message, re);
      }
    });
  },
});

Deno.test({
  name:
    "structured outputs: continuous batching (--parallel 2) holds each sequence to its own schema",
  ignore: !present,
  sanitizeResources: false,
  async fn() {
    await withServer({ parallel: 2 }, async (server) => {
      const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "none" });
      const picks = [SCHEMAS[0], SCHEMAS[9], SCHEMAS[10], SCHEMAS[16]];
      const runs = picks.map(async ({ name, schema }, i) => {
        const r = await client.chat.completions.create({
          model: "m",
          messages: [{ role: "user", content: `JSON for ${name}` }],
          temperature: 0.8,
          seed: 10 + i,
          max_tokens: 200,
          response_format: { type: "json_schema", json_schema: { name: "t", schema } },
        });
        return {
          name,
          schema,
          text: r.choices[0].message.content ?? "",
          finish: r.choices[0].finish_reason,
        };
      });
      for (const { name, schema, text, finish } of await Promise.all(runs)) {
        assert.equal(finish, "stop", `${name}: ${text}`);
        const validate = ajv.compile(schema);
        assert.ok(
          validate(JSON.parse(text)),
          `${name}: ${ajv.errorsText(validate.errors)}: ${text}`,
        );
      }
      // json_object, streamed, on /v1/completions too.
      const params = {
        model: "m",
        prompt: "A JSON object:",
        temperature: 0.8,
        seed: 5,
        max_tokens: 200,
        stream: true as const,
      };
      // response_format is not in the client's completions type; the server takes it there too.
      const stream = await client.completions.create(
        { ...params, response_format: { type: "json_object" } } as typeof params,
      );
      let text = "";
      let finish: string | null = null;
      for await (const chunk of stream) {
        text += chunk.choices[0]?.text ?? "";
        finish = chunk.choices[0]?.finish_reason ?? finish;
      }
      if (finish === "stop") {
        const v = JSON.parse(text);
        assert.ok(typeof v === "object" && v !== null && !Array.isArray(v), text);
      } else {
        // Cut by max_tokens: still a prefix the grammar accepts.
        assert.equal(finish, "length");
      }
    });
  },
});
