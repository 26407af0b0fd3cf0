#!/usr/bin/env python3
"""Generate tests/fixtures/chat/cases.json: chat templates rendered by Python jinja2 the way
Hugging Face transformers renders them.

chat/render_chat_test.ts renders every case with chat/render_chat.ts (npm @huggingface/jinja) and
compares the strings. The environment below copies transformers' `_compile_jinja_template`
(transformers/utils/chat_template_utils.py): `ImmutableSandboxedEnvironment(trim_blocks=True,
lstrip_blocks=True)` with the `loopcontrols` extension, a `tojson` filter that does not escape HTML
or non-ASCII, and the `raise_exception` and `strftime_now` globals; `render` gets `messages`,
`tools=None`, `documents=None`, `add_generation_prompt` and the special tokens, like
`render_jinja_template`. `strftime_now` reads a fixed clock (FIXED_NOW) so that the outputs do not
depend on the day they were generated; the TypeScript test passes the same instant as `now`.

Templates:
- smollm2: `tokenizer.chat_template` of cache/models/smollm2-135m-instruct.Q4_1.gguf, read with
  gguf-py when the model is there (otherwise the copy already in cases.json is kept).
- qwen25_coder: `tokenizer.chat_template` of cache/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf
  (`bash scripts/fetch-models.sh qwen05b`), the same way: Qwen2.5's ChatML with a default system
  prompt and a tools branch (`tools`, `tool_calls`, `tool` turns, `tojson`).
- qwen25_coder_15b: that of cache/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf (`qwen15b`), the
  same but for `{{` and `}}` inside a string literal of the tools branch.
- gemma2: the chat template of Google's Gemma 2 instruct checkpoints.
- gemma3_style: a Gemma-3-like template written for these tests (`{%- -%}` whitespace control,
  system prompt folded into the first user turn, `| trim`, `is string`).
- llama3_style: a Llama-3-like template written for these tests (plain, indented `{% %}` tags that
  exercise trim_blocks/lstrip_blocks, namespace, loop controls, strftime_now, `tools is none`).
Probes: one-line templates for single Jinja features, to find where @huggingface/jinja and jinja2
differ; the TypeScript test lists the known differences.

Usage (Python is only needed to regenerate; nothing at run time depends on it):

    pip install --target /tmp/pychat jinja2==3.1.6 markupsafe==3.0.4 gguf==0.19.0 numpy==2.4.6
    PYTHONPATH=/tmp/pychat python3 tests/reference/gen_chat_fixtures.py

With transformers importable as well (e.g. `pip install --target /tmp/pyhf transformers==5.24.0`
and PYTHONPATH=/tmp/pychat:/tmp/pyhf), every template case is also rendered by transformers'
own `render_jinja_template` (with `tools=` for the cases that have tools) and must agree with the
environment here.
Deterministic: re-running with the same versions gives an identical file.
"""

from __future__ import annotations

import json
import sys
from datetime import datetime
from importlib.metadata import version
from pathlib import Path

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "fixtures" / "chat" / "cases.json"
MODELS = ROOT / "cache" / "models"
GGUF_TEMPLATES = {
    "smollm2": MODELS / "smollm2-135m-instruct.Q4_1.gguf",
    "qwen25_coder": MODELS / "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    "qwen25_coder_15b": MODELS / "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
}

# Local wall-clock time seen by strftime_now (a Saturday afternoon).
FIXED_NOW = datetime(2025, 7, 26, 14, 5, 9)


def make_env() -> ImmutableSandboxedEnvironment:
    """The environment of transformers' _compile_jinja_template, with a fixed clock."""

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(format):
        return FIXED_NOW.strftime(format)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


ENV = make_env()


def gguf_template(name: str) -> str:
    """`tokenizer.chat_template` of the GGUF behind `name`, or the copy already in cases.json."""
    model = GGUF_TEMPLATES[name]
    if model.exists():
        from gguf import GGUFReader

        reader = GGUFReader(str(model))
        field = reader.fields["tokenizer.chat_template"]
        return bytes(field.parts[field.data[0]]).decode("utf-8")
    previous = json.loads(OUT.read_text(encoding="utf-8"))
    print(f"{model} is absent: keeping the {name} template already in {OUT}", file=sys.stderr)
    return previous["templates"][name]["template"]


GEMMA2 = (
    "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not "
    "supported') }}{% endif %}{% for message in messages %}{% if (message['role'] == 'user') != "
    "(loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate "
    "user/assistant/user/assistant/...') }}{% endif %}{% if (message['role'] == 'assistant') %}"
    "{% set role = 'model' %}{% else %}{% set role = message['role'] %}{% endif %}{{ "
    "'<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model\\n'}}{% endif %}"
)

GEMMA3_STYLE = """{{ bos_token }}
{%- if messages[0]['role'] == 'system' -%}
    {%- set first_user_prefix = messages[0]['content'] + '\\n\\n' -%}
    {%- set loop_messages = messages[1:] -%}
{%- else -%}
    {%- set first_user_prefix = "" -%}
    {%- set loop_messages = messages -%}
{%- endif -%}
{%- for message in loop_messages -%}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}
        {{ raise_exception("Conversation roles must alternate user/assistant/user/assistant/...") }}
    {%- endif -%}
    {%- if (message['role'] == 'assistant') -%}
        {%- set role = "model" -%}
    {%- else -%}
        {%- set role = message['role'] -%}
    {%- endif -%}
    {{ '<start_of_turn>' + role + '\\n' + (first_user_prefix if loop.first else "") }}
    {%- if message['content'] is string -%}
        {{ message['content'] | trim }}
    {%- else -%}
        {{ raise_exception("Invalid content type") }}
    {%- endif -%}
    {{ '<end_of_turn>\\n' }}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{'<start_of_turn>model\\n'}}
{%- endif -%}
"""

LLAMA3_STYLE = """{{ bos_token }}
{# System prompt: the given one, or a default with today's date. #}
{% set ns = namespace(system="", seen_user=false) %}
{% if messages[0]['role'] == 'system' %}
    {% set ns.system = messages[0]['content'] | trim %}
    {% set loop_messages = messages[1:] %}
{% else %}
    {% set ns.system = "You are a helpful assistant." %}
    {% set loop_messages = messages %}
{% endif %}
<|start_header_id|>system<|end_header_id|>

Cutting Knowledge Date: December 2023
Today Date: {{ strftime_now("%d %b %Y") }}
{% if tools is not none %}
Tools: {{ tools | tojson }}
{% endif %}

{{ ns.system }}<|eot_id|>
{% for message in loop_messages %}
    {% if message['role'] == 'ipython' %}
        {% continue %}
    {% endif %}
    {% if message['role'] == 'user' %}
        {% set ns.seen_user = true %}
    {% endif %}
<|start_header_id|>{{ message['role'] }}<|end_header_id|>

{{ message['content'] | trim }}<|eot_id|>
    {% if message['role'] == 'stop' %}
        {% break %}
    {% endif %}
{% endfor %}
{% if add_generation_prompt %}
<|start_header_id|>assistant<|end_header_id|>

{% endif %}
"""

TEMPLATES_SOURCE = {
    "smollm2": "tokenizer.chat_template of cache/models/smollm2-135m-instruct.Q4_1.gguf",
    "qwen25_coder":
        "tokenizer.chat_template of cache/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    "qwen25_coder_15b":
        "tokenizer.chat_template of cache/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    "gemma2": "chat_template of Google's Gemma 2 instruct checkpoints (tokenizer_config.json)",
    "gemma3_style": "Gemma-3-like template written for these tests",
    "llama3_style": "Llama-3-like template written for these tests",
}

UNICODE = ("Grüße, naïve café — 你好，世界 🌍 👩‍👩‍👧 e\u0301 مرحبا שלום "
           "\u200bzero-width\u00a0nbsp")

CONVERSATIONS = {
    "user_only": [{"role": "user", "content": "Hello!"}],
    "system_user": [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "What is 2+2?"},
    ],
    "multi_turn": [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Name a prime."},
        {"role": "assistant", "content": "7"},
        {"role": "user", "content": "Another one?"},
    ],
    "user_assistant": [
        {"role": "user", "content": "Say hi."},
        {"role": "assistant", "content": "Hi."},
    ],
    "unicode": [
        {"role": "user", "content": UNICODE},
        {"role": "assistant", "content": "Привет! Καλημέρα. こんにちは 🤖"},
        {"role": "user", "content": "tabs\tand\nnewlines\r\nand \"quotes\" 'apostrophes' \\ backslash"},
    ],
    "whitespace_and_markup": [
        {"role": "user", "content": "  \n padded {{ not_a_tag }} {% if %} <|im_end|> <end_of_turn>\n\n "},
        {"role": "assistant", "content": "\n"},
        {"role": "user", "content": ""},
    ],
    "system_only": [{"role": "system", "content": "Only a system prompt."}],
    "two_users": [
        {"role": "user", "content": "one"},
        {"role": "user", "content": "two"},
    ],
    # Tool use, as OpenAI-style clients send it: an assistant turn whose tool_calls wrap each call
    # in `function` (arguments as an object, and as a JSON string), consecutive `tool` turns, an
    # answer, a later system turn.
    "tool_calls": [
        {"role": "system", "content": "You answer with the tools."},
        {"role": "user", "content": "Weather in Zürich and 東京?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"type": "function", "function": {"name": "get_weather", "arguments": {
                "city": "Zürich", "unit": "celsius", "days": 3, "hourly": False,
                "at": [12.5, None, "noon"]}}},
            {"type": "function", "function": {"name": "get_weather",
                                              "arguments": "{\"city\": \"東京\"}"}},
        ]},
        {"role": "tool", "content": "{\"temp\": 21.5}"},
        {"role": "tool", "content": "rain \"heavy\"\n"},
        {"role": "assistant", "content": "Zürich: 21.5 °C; 東京: heavy rain."},
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Thanks"},
    ],
    # An assistant turn with content and bare (unwrapped) calls, a lone tool turn first and last.
    "tool_calls_bare": [
        {"role": "tool", "content": "orphan result"},
        {"role": "user", "content": "Add 2 and 3."},
        {"role": "assistant", "content": "Calling add.", "tool_calls": [
            {"name": "add", "arguments": {"a": 2, "b": 3}},
        ]},
        {"role": "tool", "content": "5"},
    ],
}

WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Weather for a city — «current» & forecast",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "e.g. \"Zürich\""},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        "days": {"type": "integer", "minimum": 1, "maximum": 7.5},
    }, "required": ["city"]}}}
ADD_TOOL = {"type": "function", "function": {
    "name": "add", "description": "a + b", "parameters": {"type": "object", "properties": {
        "a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}}}

# Template variables for (template, conversation, extras name) cases: `tools` goes to
# transformers' `tools=` argument.
EXTRAS = {
    "": {},
    "tools": {"tools": [WEATHER_TOOL, ADD_TOOL]},
    "one_tool": {"tools": [ADD_TOOL]},
    "no_tools": {"tools": []},
}

# (template, conversation[, extras]) tuples; each is rendered with add_generation_prompt false and
# true.
QWEN_CASES = [
    (c,) for c in ["user_only", "system_user", "multi_turn", "user_assistant", "unicode",
                   "whitespace_and_markup", "system_only", "two_users", "tool_calls",
                   "tool_calls_bare"]
] + [
    ("user_only", "tools"), ("system_user", "tools"), ("multi_turn", "one_tool"),
    ("tool_calls", "tools"), ("tool_calls_bare", "one_tool"), ("unicode", "tools"),
    ("system_user", "no_tools"),
]
TEMPLATE_CASES = [
    ("smollm2", c) for c in ["user_only", "system_user", "multi_turn", "user_assistant", "unicode",
                             "whitespace_and_markup", "system_only", "two_users"]
] + [("qwen25_coder", *c) for c in QWEN_CASES] + [
    ("qwen25_coder_15b", c, "tools") for c in ["system_user", "tool_calls"]
] + [
    ("gemma2", c) for c in ["user_only", "user_assistant", "unicode", "whitespace_and_markup",
                            "system_user", "two_users"]
] + [
    ("gemma3_style", c) for c in ["user_only", "system_user", "multi_turn", "user_assistant",
                                  "unicode", "whitespace_and_markup", "two_users"]
] + [
    ("llama3_style", c) for c in ["user_only", "system_user", "multi_turn", "unicode",
                                  "whitespace_and_markup"]
]

TOKENS = {
    "smollm2": {"bos_token": "<|im_start|>", "eos_token": "<|im_end|>"},
    # Token ids 151643 and 151645 of the GGUF (tokenizer.ggml.bos_token_id / eos_token_id).
    "qwen25_coder": {"bos_token": "<|endoftext|>", "eos_token": "<|im_end|>"},
    "qwen25_coder_15b": {"bos_token": "<|endoftext|>", "eos_token": "<|im_end|>"},
    "gemma2": {"bos_token": "<bos>", "eos_token": "<eos>"},
    "gemma3_style": {"bos_token": "<bos>", "eos_token": "<eos>"},
    "llama3_style": {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"},
}

EMOJI_FIRST = [{"role": "user", "content": "🌍 world  "}]
PROBE_MESSAGES = [
    {"role": "system", "content": "sys"},
    {"role": "user", "content": "Hello there, World"},
    {"role": "assistant", "content": "héllo 🌍"},
]

# (name, template, messages or None for PROBE_MESSAGES, extra context)
PROBES = [
    ("none_renders", "{{ none }}|{{ None }}", None, {}),
    ("undefined_renders_empty", "[{{ no_such_variable }}]", None, {}),
    ("booleans", "{{ true }} {{ false }} {{ 1 == 1 }}", None, {}),
    ("float_int", "{{ 1.0 }} {{ 3 / 2 }} {{ 4 / 2 }} {{ 10 // 3 }} {{ 2 ** 10 }} {{ 7 % 3 }}", None, {}),
    ("list_repr", "{{ [1, 'a', none, true] }}", None, {}),
    ("dict_repr", "{{ {'a': 1, 'b': 'x'} }}", None, {}),
    ("tojson_unicode", "{{ messages | tojson }}", None, {}),
    ("tojson_indent", "{{ {'k': [1, 2], 'é': none} | tojson(indent=2) }}", None, {}),
    ("tojson_tools", "{{ tools | tojson }}", None,
     {"tools": [{"type": "function", "function": {"name": "météo", "parameters": {
         "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]}),
    # A JSON object's integer-like keys ("10") come first in JavaScript, whatever their order.
    ("tojson_integer_keys", "{{ tools | tojson }}", None,
     {"tools": [{"b": 1, "10": 2, "a": {"2": True, "1": None}}]}),
    ("tools_empty_list", "{{ 'T' if tools else 'F' }}{{ tools | length }}", None, {"tools": []}),
    ("tools_none", "{{ 'T' if tools is none else 'F' }}{{ 'T' if documents is none else 'F' }}",
     None, {}),
    ("list_access", "{{ messages | length }} {{ messages[-1].content }} {{ (messages | last).role }} "
     "{{ messages[1:] | map(attribute='role') | join(',') }} {{ messages[::-1][0].role }}", None, {}),
    ("loop_vars", "{% for m in messages %}{{ loop.index }}/{{ loop.length }}/{{ loop.revindex0 }}"
     "{% if not loop.last %},{% endif %}{% endfor %}", None, {}),
    ("loop_continue", "{% for m in messages %}{% if loop.first %}{% continue %}{% endif %}"
     "{{ m.role }};{% endfor %}", None, {}),
    ("loop_break", "{% for m in messages %}{% if loop.index0 == 2 %}{% break %}{% endif %}"
     "{{ m.role }};{% endfor %}", None, {}),
    ("loop_output_before_break", "{% for m in messages %}{{ m.role }}{% break %}{% endfor %}",
     None, {}),
    ("namespace", "{% set ns = namespace(n=0) %}{% for m in messages %}"
     "{% set ns.n = ns.n + 1 %}{% endfor %}{{ ns.n }}", None, {}),
    ("string_length_emoji", "{{ messages[2].content | length }}", None, {}),
    ("string_index_emoji", "[{{ messages[0].content[0] }}]", EMOJI_FIRST, {}),
    ("string_slice_emoji", "[{{ messages[0].content[1:] }}]", EMOJI_FIRST, {}),
    ("trim_ascii", "[{{ '  a b \\n\\t' | trim }}]", None, {}),
    ("trim_unicode_spaces", "[{{ messages[0].content | trim }}]",
     [{"role": "user", "content": " \u3000\u2003x\u00a0\u2028 "}], {}),
    ("trim_nel", "[{{ messages[0].content | trim }}]",
     [{"role": "user", "content": "\u0085x\u0085"}], {}),
    ("trim_bom", "[{{ messages[0].content | trim }}]",
     [{"role": "user", "content": "\ufeffx\ufeff"}], {}),
    ("trim_unit_separators", "[{{ messages[0].content | trim }}]",
     [{"role": "user", "content": "\x1cx\x1f"}], {}),
    ("strip_method", "[{{ messages[0].content.strip() }}]",
     [{"role": "user", "content": " \u3000x\u00a0 "}], {}),
    ("string_methods", "{{ messages[1].content.split(', ') | join('|') }}|"
     "{{ messages[1].content.upper() }}|{{ messages[1].content.lower() }}|"
     "{{ 'yes' if messages[1].content.startswith('Hello') else 'no' }}|"
     "{{ 'yes' if messages[1].content.endswith('World') else 'no' }}|"
     "{{ messages[1].content.replace('l', 'L') }}|{{ ' x '.lstrip() }}|{{ ' x '.rstrip() }}", None, {}),
    ("strip_chars", "{{ 'xxaxx'.lstrip('x') }}|{{ 'xxaxx'.rstrip('x') }}|{{ 'xxaxx'.strip('x') }}",
     None, {}),
    ("filters", "{{ ['b', 'a', 'c'] | sort | join(',') }}|{{ [1, 2, 3] | first }}|"
     "{{ [1, 2, 3] | last }}|{{ 'abc' | upper }}|{{ 'hello world' | title }}|"
     "{{ 'hello' | capitalize }}|{{ x | default('d') }}|{{ [3, 1] | reverse | join(',') }}", None, {}),
    ("selectattr", "{{ messages | selectattr('role', 'equalto', 'user') | list | length }}", None, {}),
    ("rejectattr", "{{ messages | rejectattr('role', 'equalto', 'user') | map(attribute='role') "
     "| join(',') }}", None, {}),
    ("map_attribute", "{{ messages | map(attribute='role') | join(' ') }}", None, {}),
    ("concat_tilde", "{{ 'a' ~ 1 ~ 'b' }}", None, {}),
    ("concat_tilde_none", "{{ 'a' ~ none }}", None, {}),
    ("string_repeat", "{{ '=' * 3 }}", None, {}),
    ("in_operator", "{% if 'ell' in messages[1].content and 'user' in ['user'] and 'q' not in 'abc' %}"
     "yes{% endif %}", None, {}),
    ("dict_get", "{{ messages[0].get('name', 'anon') }} {{ messages[0].get('role') }}", None, {}),
    ("items_order", "{% for k, v in extra_obj.items() %}{{ k }}={{ v }};{% endfor %}", None,
     {"extra_obj": {"z": 1, "a": 2, "m": 3}}),
    ("macro", "{% macro wrap(x, l='[') %}{{ l }}{{ x }}]{% endmacro %}{{ wrap('a') }}{{ wrap('b', l='<') }}",
     None, {}),
    ("format_filter", "{{ '%s-%d' | format('a', 3) }}", None, {}),
    ("indent_filter", "{{ 'a\\nb' | indent(2) }}", None, {}),
    ("whitespace_blocks", "<\n  {% if true %}\n  x\n  {% endif %}\n>", None, {}),
    ("whitespace_dash", "<\n  {%- if true -%}\n  x\n  {%- endif -%}\n>", None, {}),
    ("whitespace_comment", "a\n  {# c #}\nb", None, {}),
    ("whitespace_expression", "a\n  {{ 'x' }}\nb", None, {}),
    ("whitespace_set", "a\n    {% set y = 1 %}\n{{ y }}", None, {}),
    ("trailing_newline", "x\n", None, {}),
    ("strftime", "{{ strftime_now('%Y-%m-%d %H:%M:%S %b %B %a %A %j %p %I %y %e %%') }}", None, {}),
    ("bos_concat_undefined", "{{ bos_token + 'x' }}", None, {}),
    ("raise_exception", "{{ raise_exception('custom failure') }}", None, {}),
    ("raw_block", "{% raw %}{{ x }}{% endraw %}", None, {}),
    ("is_tests", "{% if 1 is number and 'a' is string and messages is iterable and messages[0] is mapping "
     "and x is not defined and none is none %}ok{% endif %}", None, {}),
    ("extra_values", "{{ 'think' if enable_thinking else 'no_think' }} {{ date_string }} {{ n + 1 }} "
     "{{ flags | length }}", None,
     {"enable_thinking": False, "date_string": "26 Jul 2025", "n": 41, "flags": [1, 2]}),
    ("range", "{{ range(5) | join(',') }}|{{ range(1, 10, 3) | join(',') }}|"
     "{{ range(5, 0, -2) | join(',') }}|{{ range(0) | length }}|{{ range(3, 1) | length }}", None, {}),
    ("range_float", "{{ range(2.5) | length }}", None, {}),
    ("syntax_error", "{% if %}", None, {}),
    ("unknown_filter", "{{ 'a' | no_such_filter }}", None, {}),
]


# strftime: every directive chat/_strftime.ts supports, on dates that hit the edge cases (midnight,
# noon, single-digit days, year starts and ends, a leap day).
STRFTIME_FORMAT = ("%a|%A|%b|%B|%c|%C|%d|%D|%e|%F|%h|%H|%I|%j|%k|%l|%m|%M|%n|%p|%R|%S|%t|%T|%u|"
                   "%U|%w|%W|%x|%X|%y|%Y|%z|%Z|%%|%-d|%-m|%-H|%-I|%-j")
STRFTIME_DATES = [
    datetime(2025, 7, 26, 14, 5, 9),
    datetime(2024, 2, 29, 0, 0, 0),
    datetime(2023, 1, 1, 12, 30, 59),
    datetime(2021, 12, 31, 23, 59, 58),
    datetime(2027, 1, 4, 9, 7, 3),
    datetime(1999, 9, 9, 1, 2, 3),
]


def render(template: str, messages, add_generation_prompt: bool, tokens: dict, extra: dict):
    try:
        context = {"messages": messages, "tools": None, "documents": None,
                   "add_generation_prompt": add_generation_prompt, **tokens, **extra}
        out = ENV.from_string(template).render(**context)
        return {"expected": out}
    except jinja2.exceptions.TemplateError as e:
        return {"error": f"{type(e).__name__}: {e}"}
    except Exception as e:  # noqa: BLE001 - Python errors (TypeError ...) also count as failures
        return {"error": f"{type(e).__name__}: {e}"}


def transformers_render(template: str, messages, add_generation_prompt: bool, tokens: dict,
                        extra: dict):
    from transformers.utils.chat_template_utils import render_jinja_template

    rendered, _ = render_jinja_template(
        conversations=[messages], chat_template=template,
        add_generation_prompt=add_generation_prompt, **tokens, **extra,
    )
    return rendered[0]


def main() -> None:
    templates = {
        "smollm2": gguf_template("smollm2"),
        "qwen25_coder": gguf_template("qwen25_coder"),
        "qwen25_coder_15b": gguf_template("qwen25_coder_15b"),
        "gemma2": GEMMA2,
        "gemma3_style": GEMMA3_STYLE,
        "llama3_style": LLAMA3_STYLE,
    }
    try:
        import transformers  # noqa: F401

        check = True
    except ImportError:
        check = False

    cases = []
    checked = 0
    for name, conv, *extras in TEMPLATE_CASES:
        extras_name = extras[0] if extras else ""
        extra = EXTRAS[extras_name]
        for agp in (False, True):
            messages = CONVERSATIONS[conv]
            tokens = TOKENS[name]
            result = render(templates[name], messages, agp, tokens, extra)
            if check and "expected" in result and "strftime_now" not in templates[name]:
                assert transformers_render(templates[name], messages, agp, tokens, extra) == \
                    result["expected"], (name, conv, extras_name, agp)
                checked += 1
            conv_name = f"{conv}+{extras_name}" if extras_name else conv
            cases.append({
                "name": f"{name}/{conv_name}/{'gen' if agp else 'nogen'}",
                "template": name,
                "messages": messages,
                **({"extra": extra} if extra else {}),
                "add_generation_prompt": agp,
                **tokens,
                **result,
            })

    probes = []
    for name, template, messages, extra in PROBES:
        msgs = PROBE_MESSAGES if messages is None else messages
        probes.append({
            "name": name,
            "template": template,
            "messages": msgs,
            "extra": extra,
            **render(template, msgs, False, {}, extra),
        })

    strftime_cases = [{"date": d.isoformat(), "format": STRFTIME_FORMAT,
                       "expected": d.strftime(STRFTIME_FORMAT)} for d in STRFTIME_DATES]

    doc = {
        "generator": "tests/reference/gen_chat_fixtures.py",
        "versions": {"jinja2": version("jinja2"), "markupsafe": version("markupsafe")},
        "checked_with_transformers": version("transformers") if check else None,
        "now": FIXED_NOW.isoformat(),
        "templates": {k: {"source": TEMPLATES_SOURCE[k], "template": v} for k, v in templates.items()},
        "cases": cases,
        "probes": probes,
        "strftime": strftime_cases,
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(doc, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {OUT}: {len(cases)} cases, {len(probes)} probes"
          f"{f' ({checked} cases checked with transformers)' if check else ''}")


if __name__ == "__main__":
    main()
