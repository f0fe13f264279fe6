#!/usr/bin/env python3
"""Reference renders of real chat templates with tools, for
tests/tokenizer/chat_tools_test.cpp: what Hugging Face transformers'
apply_chat_template writes for each case in tool-cases.json.

Run by hand when a case or a template changes (needs python3-jinja2; CI does
not run it, the test reads the committed output):

    python3 tests/data/chat-templates/render_reference.py

The Jinja environment is transformers' (src/transformers/utils/chat_template_utils.py):
a sandbox with trim_blocks and lstrip_blocks, loop controls, a `tojson` that is
json.dumps(ensure_ascii=False) with Python's default separators, and
raise_exception. The cases are OpenAI-format requests; the messages reach the
template as an OpenAI-compatible server hands them over: a null content as
"", and a tool call's arguments (a JSON string) as the string itself, except
for templates that print them with `| tojson` unconditionally (Qwen2.5,
Llama 3.2), which get the parsed object, as vLLM's and llama.cpp's servers
do. No strftime_now: Llama's "Today Date" is the template's fallback, 26 Jul
2024. A case's template_kwargs (enable_thinking) are passed as apply_chat_template
passes its keyword arguments. A case the template refuses (raise_exception)
records the message.
"""
import copy
import json
import os
import sys

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.dirname(HERE)


def load_templates():
    with open(os.path.join(DATA, "qwen-tokenizer", "tokenizer_config.json"), encoding="utf-8") as f:
        qwen3 = json.load(f)["chat_template"]
    with open(os.path.join(HERE, "qwen2.5-instruct.jinja"), encoding="utf-8") as f:
        qwen25 = f.read()
    with open(os.path.join(HERE, "llama-3.2-instruct.jinja"), encoding="utf-8") as f:
        llama32 = f.read()
    # name: (text, arguments as objects, bos_token)
    return {"qwen3": (qwen3, False, ""), "qwen2.5": (qwen25, True, ""),
            "llama3.2": (llama32, True, "<|begin_of_text|>")}


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def environment():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env


def template_messages(messages, arguments_as_object):
    out = copy.deepcopy(messages)
    for m in out:
        if m.get("content") is None:
            m["content"] = ""
        for call in m.get("tool_calls", []):
            if arguments_as_object:
                call["function"]["arguments"] = json.loads(call["function"]["arguments"])
    return out


def main():
    with open(os.path.join(HERE, "tool-cases.json"), encoding="utf-8") as f:
        cases = json.load(f)
    env = environment()
    out = []
    for name, (text, arguments_as_object, bos) in load_templates().items():
        template = env.from_string(text)
        for case in cases:
            kwargs = {"messages": template_messages(case["messages"], arguments_as_object),
                      "add_generation_prompt": case["add_generation_prompt"],
                      "bos_token": bos, "eos_token": "<|im_end|>"}
            if case.get("tools") is not None:
                kwargs["tools"] = case["tools"]
            kwargs.update(case.get("template_kwargs", {}))
            try:
                out.append({"template": name, "case": case["name"], "rendered": template.render(**kwargs)})
            except jinja2.exceptions.TemplateError as e:
                out.append({"template": name, "case": case["name"], "error": str(e)})
    with open(os.path.join(HERE, "tool-renders.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"{len(out)} renders written", file=sys.stderr)


if __name__ == "__main__":
    main()
