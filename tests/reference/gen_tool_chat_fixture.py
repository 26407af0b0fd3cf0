#!/usr/bin/env python3
"""Generate tests/fixtures/chat/tool_cases.json: OpenAI chat requests with tools, and the prompt
Hugging Face transformers renders for each with the Qwen2.5-Coder chat template.

server/_tool_turn_test.ts validates every request with server/validate_request.ts, renders it the
way the server does (server/_tool_turn.ts, chat/render_chat.ts) and compares the prompt byte for
byte with `expected` here.

Each request is what an OpenAI client sends: `tools` of `{type: "function", function: {...}}`,
assistant turns with `tool_calls` whose `function.arguments` is a JSON *string* and `content`
null, `tool` turns with `tool_call_id`. transformers is given what its documentation asks for
(https://huggingface.co/docs/transformers/chat_extras): the same messages with each call's
`arguments` parsed into a dict (`json.loads`), and `tools=` the request's tools (None when
`tool_choice` is "none": the server does not show them then). Rendering is transformers' own
`render_jinja_template` (what `apply_chat_template(..., tokenize=False)` calls), with
`add_generation_prompt=True` and the GGUF's BOS/EOS token texts.

The template is `tokenizer.chat_template` of cache/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf
(`bash scripts/fetch-models.sh qwen05b`), read with gguf-py.

Usage (Python is only needed to regenerate; nothing at run time depends on it):

    pip install --target /tmp/pychat jinja2==3.1.6 markupsafe==3.0.4 gguf==0.19.0 numpy==2.4.6
    pip install --target /tmp/pyhf transformers==5.24.0
    PYTHONPATH=/tmp/pychat:/tmp/pyhf python3 tests/reference/gen_tool_chat_fixture.py

Deterministic: re-running with the same versions gives an identical file.
"""

from __future__ import annotations

import copy
import json
from importlib.metadata import version
from pathlib import Path

from gguf import GGUFReader
from transformers.utils.chat_template_utils import render_jinja_template

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "fixtures" / "chat" / "tool_cases.json"
MODEL = ROOT / "cache" / "models" / "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
# Token ids 151643 and 151645 of the GGUF (tokenizer.ggml.bos_token_id / eos_token_id).
TOKENS = {"bos_token": "<|endoftext|>", "eos_token": "<|im_end|>"}

WEATHER = {"type": "function", "function": {
    "name": "get_weather",
    "description": "Get the current weather in a city — «now» & \"here\"",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "The city, e.g. Zürich"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
    }, "required": ["city"]},
}}
TIME = {"type": "function", "function": {
    "name": "get_time", "description": "The local time of a timezone", "strict": True,
    "parameters": {"type": "object", "properties": {"tz": {"type": "string"}},
                   "required": ["tz"], "additionalProperties": False},
}}
NOW = {"type": "function", "function": {"name": "now"}}

ASKED = [{"role": "user", "content": "What is the weather like in Paris and 東京?"}]
CALLED = ASKED + [
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_a1", "type": "function", "function": {
            "name": "get_weather", "arguments": "{\"city\": \"Paris\", \"unit\": \"celsius\"}"}},
        {"id": "call_b2", "type": "function", "function": {
            "name": "get_weather", "arguments": "{\"city\":\"東京\",\"n\":[1,2.5,null,true]}"}},
    ]},
    {"role": "tool", "tool_call_id": "call_a1", "content": "{\"temp\": 21.5, \"sky\": \"clear\"}"},
    {"role": "tool", "tool_call_id": "call_b2", "content": "rain \"heavy\"\n"},
]
ANSWERED = CALLED + [
    {"role": "assistant", "content": "Paris: 21.5 °C and clear; 東京: heavy rain."},
    {"role": "user", "content": "And the time in Paris?"},
    {"role": "assistant", "content": "Let me look.", "tool_calls": [
        {"id": "call_c3", "type": "function", "function": {
            "name": "get_time", "arguments": "{\"tz\": \"Europe/Paris\"}"}},
    ]},
    {"role": "tool", "tool_call_id": "call_c3", "content": "14:05"},
]

CASES = [
    ("asked", {"messages": ASKED, "tools": [WEATHER, TIME]}),
    ("asked_system", {"messages": [{"role": "system", "content": "Be brief."}] + ASKED,
                      "tools": [WEATHER]}),
    ("called", {"messages": CALLED, "tools": [WEATHER]}),
    ("answered", {"messages": ANSWERED, "tools": [WEATHER, TIME, NOW]}),
    ("answered_auto", {"messages": ANSWERED, "tools": [WEATHER, TIME], "tool_choice": "auto"}),
    # tool_choice none: the tools are not shown; earlier calls and results still are.
    ("answered_none", {"messages": ANSWERED, "tools": [WEATHER, TIME], "tool_choice": "none"}),
    # No tools in this request, but a history of calls.
    ("called_without_tools", {"messages": CALLED}),
]


def transformers_messages(messages):
    """The request's messages as transformers takes them: each call's arguments a dict."""
    out = copy.deepcopy(messages)
    for m in out:
        for call in m.get("tool_calls") or []:
            call["function"]["arguments"] = json.loads(call["function"]["arguments"])
    return out


def main() -> None:
    reader = GGUFReader(str(MODEL))
    field = reader.fields["tokenizer.chat_template"]
    template = bytes(field.parts[field.data[0]]).decode("utf-8")
    cases = []
    for name, request in CASES:
        shown = request.get("tools") if request.get("tool_choice") != "none" else None
        rendered, _ = render_jinja_template(
            conversations=[transformers_messages(request["messages"])],
            tools=copy.deepcopy(shown),
            chat_template=template,
            add_generation_prompt=True,
            **TOKENS,
        )
        cases.append({"name": name, "request": request, "expected": rendered[0]})
    doc = {
        "about": "OpenAI chat requests with tools and the prompts transformers renders for them "
                 "with the Qwen2.5-Coder-0.5B-Instruct chat template (tests/reference/"
                 "gen_tool_chat_fixture.py)",
        "versions": {"transformers": version("transformers"), "jinja2": version("jinja2"),
                     "gguf": version("gguf")},
        "template_source": "tokenizer.chat_template of "
                           "cache/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        "template": template,
        **TOKENS,
        "cases": cases,
    }
    OUT.write_text(json.dumps(doc, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {len(cases)} cases to {OUT}")


if __name__ == "__main__":
    main()
