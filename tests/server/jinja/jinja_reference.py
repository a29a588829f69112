#!/usr/bin/env python3
"""Renders a test template with python3-jinja2 configured as Hugging Face renders chat
templates (trim_blocks, lstrip_blocks, loopcontrols, an immutable sandbox, tojson without
HTML escaping, raise_exception, strftime_now at a fixed time), once per context.

usage: jinja_reference.py TEMPLATE CONTEXTS.json EPOCH
prints a JSON list, one entry per context: {"out": text} or {"error": kind, "message": text}
"""
import datetime
import json
import sys

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment


class Raised(Exception):
    pass


def main():
    template_path, contexts_path, epoch = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with open(template_path, encoding="utf-8") as f:
        source = f.read()
    with open(contexts_path, encoding="utf-8") as f:
        contexts = json.load(f)

    def raise_exception(message):
        raise Raised(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime.datetime.fromtimestamp(epoch).strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    template = env.from_string(source)
    results = []
    for context in contexts:
        try:
            results.append({"out": template.render(**context)})
        except Raised as e:
            results.append({"error": "raised", "message": str(e)})
        except Exception as e:  # what the C++ side must also refuse
            results.append({"error": type(e).__name__, "message": str(e)})
    json.dump(results, sys.stdout, ensure_ascii=True)


if __name__ == "__main__":
    main()
