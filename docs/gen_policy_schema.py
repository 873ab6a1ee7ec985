"""Write docs/policy.schema.json, the JSON Schema of a policy file (JSON, or TOML by suffix).

The schema is `agentfsm.Policy`'s own, with each field's docstring as its description and
the shorthands a file may use: a permission rule as text or as a mapping whose `args` and
`shell` map argument names to patterns, one guard or tool name where a list is expected,
and the fields nested under a `policy` key (a `[policy]` table in TOML).

Run `python docs/gen_policy_schema.py` (or `make docs`) after changing `Policy`; a test fails
while the committed file differs from what this script writes. `--check` only says whether it
is up to date (exit 1 when stale).
"""

from __future__ import annotations

import ast
import inspect
import json
import textwrap
from pathlib import Path
from typing import Any

from agentfsm import Policy
from agentfsm._public import class_source

OUT = Path(__file__).resolve().parent / "policy.schema.json"

RULE_TEXT = {
    "type": "string",
    "description": "A rule as text: '<allow|ask|deny> <tool glob>[(<argument>=<glob>, "
    "<argument>^=<path glob>, <argument>~<shell pattern>, ...)]', "
    "e.g. 'deny bash(command~rm -rf *)'.",
}
RULE_MAPPING = {
    "type": "object",
    "description": "A rule as a mapping: `args` maps argument names to globs, `paths` argument "
    "names to globs on the normalized path, `shell` maps one argument name to a shell pattern.",
    "properties": {
        "action": {"enum": ["allow", "ask", "deny"]},
        "tool": {"type": "string", "minLength": 1, "description": "A glob on the tool's name."},
        "args": {"type": "object", "additionalProperties": {"type": "string"}},
        "paths": {"type": "object", "additionalProperties": {"type": "string"}},
        "shell": {
            "type": "object",
            "additionalProperties": {"type": "string"},
            "maxProperties": 1,
        },
    },
    "required": ["action", "tool"],
    "additionalProperties": False,
}


def field_docs() -> dict[str, str]:
    """Each Policy field's docstring: the string literal right after its annotated assignment."""
    tree = ast.parse(textwrap.dedent(class_source(Policy)))
    body = tree.body[0].body if isinstance(tree.body[0], ast.ClassDef) else []
    docs: dict[str, str] = {}
    for node, after in zip(body, [*body[1:], None], strict=True):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            docs[node.target.id] = " ".join(inspect.cleandoc(after.value.value).split())
    return docs


CEDAR_FILE = {
    "type": "string",
    "description": "A Cedar policy file, relative to the policy file (docs/cedar.md).",
}


def one_or_many(schema: dict[str, Any]) -> dict[str, Any]:
    """A list field that also takes one item alone (the validators wrap it in a list)."""
    return {"anyOf": [schema["items"], {k: v for k, v in schema.items() if k != "default"}]}


def policy_schema() -> dict[str, Any]:
    """The schema of the policy's fields, as a file writes them."""
    schema = Policy.model_json_schema(mode="validation")
    defs = schema.pop("$defs")
    rule, cedar = defs["Rule"], defs["CedarSource"]
    rule["description"] = "A rule as `Rule.model_dump()` writes it (`args` as [name, glob] pairs)."
    props: dict[str, Any] = schema["properties"]
    docs = field_docs()
    for name, prop in props.items():
        prop.pop("title", None)
        prop["description"] = docs[name]
    cedar.pop("title", None)
    cedar["description"] = "A Cedar source as a dump writes it: the text, where it came from."
    props["cedar"]["anyOf"] = [CEDAR_FILE, cedar, {"type": "null"}]
    # Not a field: a policy file's way to hold the Cedar text itself (Policy.from_file).
    props["cedar_policies"] = {
        "type": "string",
        "description": "The Cedar policy text itself, instead of a `cedar` file (docs/cedar.md).",
    }
    props["cedar_schema"] = {
        "type": "string",
        "description": "A Cedar schema file, relative to the policy file, for the Cedar "
        "source (docs/cedar.md).",
    }
    rules = props["permission_rules"]
    rules["items"] = {"anyOf": [RULE_TEXT, RULE_MAPPING, rule]}
    for name in ("permission_rules", "handoffs", "final_tools", "guards"):
        description, default = props[name].pop("description"), props[name].get("default")
        props[name] = {**one_or_many(props[name]), "default": default, "description": description}
    schema.pop("title")
    schema["description"] = " ".join(inspect.cleandoc(Policy.__doc__ or "").split())
    return schema


def schema() -> dict[str, Any]:
    """The whole file's schema: the fields at the top, or under a `policy` key."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "agentfsm policy file",
        "description": "The fields of agentfsm.Policy, at the top of the file or under a "
        "`policy` key (a `[policy]` table in TOML). Hooks and verifiers are code and have no "
        "file form; guards are written as code text. See docs/policy.md.",
        "$defs": {"Policy": policy_schema()},
        "anyOf": [
            {"$ref": "#/$defs/Policy"},
            {
                "type": "object",
                "properties": {"policy": {"$ref": "#/$defs/Policy"}},
                "required": ["policy"],
            },
        ],
    }


def render() -> str:
    """The schema as committed: indented JSON text ending in a newline."""
    return json.dumps(schema(), indent=2, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    # Here, not at the top: only a run as a script has docs/ on sys.path (tests load by path).
    from _generated import main

    raise SystemExit(main(OUT, render))
