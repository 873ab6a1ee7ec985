"""`agentfsm lint POLICY [--tools FILE]`: what in a policy file can never work as written.

It reports, one finding a line as `FILE:LINE: level: message` (the line where the file
shows it; `FILE: level: message` where it cannot be placed):
- errors: a field with a bad value or an unknown name, a guard that does not parse or
  names no known guard, a permission rule that does not parse; with `--tools`, a rule,
  `permissions` entry, or name in `ask_floor`, `final_tools` or `handoffs` naming a tool
  that is not declared, or an argument the tool does not take (each with the closest
  declared name);
- warnings: a rule that never decides a call (another rule applies to every call it
  applies to with a stronger action, or the same action written first, or the table's
  entry for its tool is stronger: an `ask` under a broader `deny`, a shell pattern
  another of the same action covers), a plain glob (`=`) on a path-like argument (the
  path pattern `^=` reads `..`), a plain glob on a command-like argument (the shell
  pattern `~` reads every spelling), a glob starting with `~` (`command=~rm *`); with
  `--tools` a glob matching no declared tool, and without it a shell pattern (`~`) on an
  argument whose name is not a command's (`COMMAND_ARGUMENTS`: a misspelled name makes
  the rule ask every call, never check it). A rule written `command=~rm *` (the shell
  pattern mistyped) does not parse: an error with the rule it means.
- a Cedar source (`cedar`, `cedar_policies`, `cedar_schema`; docs/cedar.md): Cedar that does
  not parse (an error naming the Cedar file and line) or does not fit its schema; a source
  with no permit (a warning: it denies every call); with `--tools`, a `Tool::"x"` in a
  policy's resource scope that no declared tool has (a warning).

`--tools FILE` is a JSON list of tool declarations as `Controller(tools=...)` takes
them: OpenAI-style function specs (`{"type": "function", "function": {...}}` or
`{"name", "description", "parameters"}`), Anthropic's `input_schema`, or plain names.
Exit 0 when nothing is found, 1 on findings, 2 when the policy or tools file cannot be
read (not a regular file, not UTF-8, not JSON or TOML, a key written twice in one object,
or fields both at the top and under `policy`), as `Policy.from_file` refuses it.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentfsm._cli._options import Once, subcommand
from agentfsm._engine.policy import (
    NAMED_TOOLS,
    Policy,
    _cedar_file,
    policy_fields,
    undeclared_entries,
    undeclared_names,
)
from agentfsm._model import limits
from agentfsm._model._files import line_of, open_regular
from agentfsm._model.tools import tool_specs
from agentfsm._permissions import (
    COMMAND_ARGUMENTS,
    Rule,
    did_you_mean,
    is_command_like,
    is_glob,
    is_path_like,
    never_applies,
    normal_path,
    shadowed,
)
from agentfsm.exceptions import AgentFSMError, PolicyError, ToolDefinitionError
from agentfsm.guards import REGISTRY, parse_guard

__all__ = ["EXIT_FINDINGS", "Finding", "Lines", "add_parser", "lint", "main"]

EXIT_FINDINGS = 1
"""Something in the policy can never work as written."""


@dataclass(frozen=True)
class Finding:
    """One problem: where the file shows it (1-based line, None when unknown), how bad, what."""

    line: int | None
    level: str
    message: str


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register `lint` on an argparse subparsers object; `args.handler(args)` runs it."""
    parser = subcommand(
        subparsers, "lint", "report what in a policy file can never work as written", __doc__
    )
    parser.add_argument("policy", metavar="POLICY", help="policy file (JSON, or TOML by suffix)")
    parser.add_argument(
        "--tools", action=Once, metavar="FILE", help="JSON list of the declared tools"
    )
    parser.set_defaults(handler=main)
    return parser


def main(args: argparse.Namespace) -> int:
    """Lint the policy file; print the findings; 0 clean, 1 findings (2 raised as bad input)."""
    text = _read(args.policy, PolicyError, "policy file")
    # As Policy.from_file reads it: a repeated key, or fields both at the top and under
    # `policy`, is refused (exit 2) with the file and line, never linted as the last value.
    data = policy_fields(text, args.policy, toml=args.policy.endswith(".toml"))
    tools = _tools(args.tools) if args.tools else None
    lines = Lines(text, toml=args.policy.endswith(".toml"))
    findings = lint(data, lines, tools, Path(args.policy).parent)
    for finding in findings:
        where = f"{args.policy}:{finding.line}" if finding.line is not None else args.policy
        print(f"{where}: {finding.level}: {finding.message}")
    return EXIT_FINDINGS if findings else 0


def _read(path: str, error: type[AgentFSMError], what: str) -> str:
    try:  # as Policy.from_file reads: a regular file only, bounded, UTF-8
        with open_regular(
            path,
            lambda why: error(f"cannot read {what} {path}: {why}"),
            max_bytes=limits.MAX_POLICY_BYTES,
        ) as raw:
            return str(raw.read().decode("utf-8"))
    except OSError as exc:
        raise error(f"cannot read {what} {path}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise error(f"{what} {path} is not UTF-8 text: {exc.reason}") from exc


def _tools(path: str) -> dict[str, Any]:
    """The declared tools' schemas by name, from a JSON list of declarations."""
    try:
        data = json.loads(_read(path, ToolDefinitionError, "tools file"))
    except json.JSONDecodeError as exc:
        raise ToolDefinitionError(f"{path}:{exc.lineno}: not valid JSON: {exc.msg}") from exc
    if isinstance(data, Mapping) and "tools" in data:  # a request body's `tools`
        data = data["tools"]
    if not isinstance(data, list):
        raise ToolDefinitionError(f"tools file {path} must hold a JSON list of tool declarations")
    try:
        specs = tool_specs(data) or {}
    except ToolDefinitionError as exc:
        raise ToolDefinitionError(f"tools file {path}: {exc}") from exc
    return {name: spec.parameters for name, spec in specs.items()}


class Lines:
    """Where a policy file shows a field or a list item, found in its text (JSON or TOML)."""

    def __init__(self, text: str, *, toml: bool) -> None:
        self.text = text
        self.toml = toml

    def line_at(self, position: int) -> int:
        """The 1-based line of a character position."""
        return line_of(self.text, position)

    def key(self, name: str) -> int | None:
        """The position where field `name` is written, or None."""
        quoted = re.escape(json.dumps(name))
        if self.toml:
            bare = re.escape(name)
            pattern = rf"(?m)^[ \t]*(?:{quoted}|'{bare}'|{bare})[ \t]*=|\[\[?(?:policy\.)?{bare}\]"
        else:
            pattern = rf"{quoted}\s*:"
        found = re.search(pattern, self.text)
        return found.start() if found is not None else None

    def items(self, name: str, values: list[Any]) -> list[int | None]:
        """The line of each item of list field `name`, searched in order after the field."""
        start = self.key(name)
        if start is None:
            return [None] * len(values)
        cursor = start
        lines: list[int | None] = []
        for value in values:
            found = self._next(value, cursor)
            if found is None:
                lines.append(self.line_at(start))
                continue
            lines.append(self.line_at(found[0]))
            cursor = found[1]
        return lines

    def _next(self, value: Any, cursor: int) -> tuple[int, int] | None:
        """Where `value` is next written from `cursor` on: (start, end), or None."""
        if isinstance(value, str):
            spellings = {json.dumps(value), json.dumps(value, ensure_ascii=False), f"'{value}'"}
            hits = [(self.text.find(s, cursor), len(s)) for s in spellings]
            hits = [(at, size) for at, size in hits if at >= 0]
            if not hits:
                return None
            at, size = min(hits)
            return at, at + size
        found = re.compile(r"[\"']?action[\"']?\s*[:=]").search(self.text, cursor)
        return (found.start(), found.end()) if found is not None else None


def lint(
    fields: Mapping[str, Any],
    lines: Lines,
    tools: Mapping[str, Any] | None,
    base: Path | None = None,
) -> list[Finding]:
    """The findings of a policy file's `fields` (`policy_fields`), placed with `lines`;
    `base` is the policy file's folder, where a `cedar` file name is read."""
    findings: list[Finding] = []
    rules: list[tuple[Rule, int | None]] = []
    for name, value in fields.items():
        if name in _CEDAR_KEYS:
            if name == next(key for key in fields if key in _CEDAR_KEYS):  # once, together
                findings += _cedar(name, fields, lines, tools, base)
        elif name == "guards":
            findings += _guards(value, lines)
        elif name == "permission_rules":
            findings += _rules(value, lines, rules)
        else:
            findings += _field(name, value, lines)
    findings += _against(rules, fields.get("permissions"), tools, lines)
    if tools is not None:
        findings += _named_tools(fields, tools, lines)
    return sorted(findings, key=lambda f: -1 if f.line is None else f.line)


def _named_tools(
    fields: Mapping[str, Any], tools: Mapping[str, Any], lines: Lines
) -> list[Finding]:
    """Names in `ask_floor`, `final_tools` and `handoffs` that no declared tool has."""
    findings = []
    for name in NAMED_TOOLS:
        if name not in fields or _problem({name: fields[name]}) is not None:
            continue  # absent, or already reported as a bad value
        policy = Policy.model_validate({name: fields[name]})
        where = lines.key(name)
        line = lines.line_at(where) if where is not None else None
        findings += [Finding(line, "error", why) for _, why in undeclared_names(policy, tools)]
    return findings


_CEDAR_KEYS = ("cedar", "cedar_policies", "cedar_schema")
"""The keys of a policy file that make its Cedar source, read together."""


def _cedar(
    name: str,
    fields: Mapping[str, Any],
    lines: Lines,
    tools: Mapping[str, Any] | None,
    base: Path | None,
) -> list[Finding]:
    """A Cedar source (`cedar` or `cedar_policies`, and `cedar_schema`, placed at the first
    of them): text that does not parse (with its file and line), policies that do not fit
    the schema, a policy set with no permit (it denies every call), and with `--tools` a
    `Tool::"x"` no declared tool has."""
    where = lines.key(name)
    line = lines.line_at(where) if where is not None else None
    try:
        mine = {key: fields[key] for key in _CEDAR_KEYS if key in fields}
        source = Policy.from_mapping(_cedar_file(mine, (base or Path()) / "policy")).cedar
    except PolicyError as exc:
        return [Finding(line, "error", exc.message)]
    if source is None:
        return []
    findings = []
    if not any(body.get("effect") == "permit" for body in source.described.values()):
        findings.append(
            Finding(
                line, "warning", f"{source.origin}: no Cedar permit policy: it denies every call"
            )
        )
    for tool in source.tools_named() if tools is not None else ():
        if tools is not None and tool not in tools:
            hint = did_you_mean(tool, tools)
            findings.append(
                Finding(
                    line,
                    "warning",
                    f"{source.origin}: Cedar names Tool::{json.dumps(tool)}, which is not a "
                    f"declared tool{hint}",
                )
            )
    return findings


def _field(name: str, value: Any, lines: Lines) -> list[Finding]:
    where = lines.key(name)
    line = lines.line_at(where) if where is not None else None
    if name not in Policy.model_fields:
        hint = did_you_mean(name, Policy.model_fields)
        return [Finding(line, "error", f"unknown field {name!r}{hint}")]
    problem = _problem({name: value})
    return [] if problem is None else [Finding(line, "error", problem)]


def _problem(fields: dict[str, Any]) -> str | None:
    """What is wrong with a policy of just these fields, in the policy's words, or None."""
    try:
        Policy.model_validate(fields)
    except PolicyError as exc:
        problems = exc.details.get("problems")
        said = "; ".join(f"{f}: {m}" for f, m in problems) if problems else exc.message
        return said.replace("Value error, ", "")
    return None


def _listed(value: Any) -> list[Any] | None:
    if isinstance(value, str | Mapping):
        return [value]
    return list(value) if isinstance(value, list) else None


def _each(
    name: str, value: Any, lines: Lines, check: Callable[[Any, int | None], str | None]
) -> list[Finding]:
    """The findings of a field that takes one item or a list: the field's own problem when it
    is neither, else an error at each item's line for which `check(item, line)` says what is
    wrong (None: nothing)."""
    items = _listed(value)
    if items is None:
        return _field(name, value, lines)
    said = [(line, check(i, line)) for i, line in zip(items, lines.items(name, items), strict=True)]
    return [Finding(line, "error", why) for line, why in said if why is not None]


def _guards(value: Any, lines: Lines) -> list[Finding]:
    return _each("guards", value, lines, lambda text, _: _guard_problem(text))


def _guard_problem(text: Any) -> str | None:
    try:
        parse_guard(text)
    except PolicyError as exc:
        unknown = re.match(r"unknown guard '([^']+)'", exc.message)
        message = exc.message.split("; known:")[0] if unknown else exc.message
        hint = did_you_mean(unknown.group(1), REGISTRY) if unknown else ""
        return f"guards: {message}{hint}"
    return None


def _rules(value: Any, lines: Lines, rules: list[tuple[Rule, int | None]]) -> list[Finding]:
    """The rules' findings; each rule that reads is added to `rules` with its line."""

    def check(item: Any, line: int | None) -> str | None:
        try:
            (rule,) = Policy.model_validate({"permission_rules": [item]}).permission_rules
        except PolicyError as exc:
            return _problem({"permission_rules": [item]}) or str(exc)
        rules.append((rule, line))
        return None

    return _each("permission_rules", value, lines, check)


def _against(
    rules: list[tuple[Rule, int | None]],
    table: Any,
    tools: Mapping[str, Any] | None,
    lines: Lines,
) -> list[Finding]:
    """Rules that can never fire: against the declared tools, and shadowed by others."""
    table = table if isinstance(table, Mapping) else {}
    findings: list[Finding] = []
    if tools is not None:
        findings += _against_tools(rules, table, tools, lines)
    else:
        findings += _unsure_shell_arguments(rules)
    findings += _path_globs(rules)
    findings += _command_globs(rules)
    only = [rule for rule, _ in rules]
    for index, why in shadowed(only, table):
        findings.append(Finding(rules[index][1], "warning", why))
    return findings


def _unsure_shell_arguments(rules: list[tuple[Rule, int | None]]) -> list[Finding]:
    """Shell patterns on an argument whose name does not say it holds a command."""
    findings = []
    for rule, line in rules:
        if rule.shell is not None and not is_command_like(rule.shell[0]):
            findings.append(
                Finding(
                    line,
                    "warning",
                    f"rule {str(rule)!r} reads argument {rule.shell[0]!r} as a shell command, "
                    "but the name is not one of a command "
                    f"({', '.join(sorted(COMMAND_ARGUMENTS))}, *_command, *_cmd, *_script): "
                    "a call without it is only asked, never checked; pass --tools to check the "
                    "name against the tool's schema",
                )
            )
    return findings


def _path_globs(rules: list[tuple[Rule, int | None]]) -> list[Finding]:
    """Plain globs on path-like arguments, with the path pattern that reads them safely."""
    findings = []
    for rule, line in rules:
        for name, pattern in rule.args:
            if not is_path_like(name):
                continue
            normal = normal_path(pattern)[0]
            better = (
                f"{name}^={pattern}"
                if normal == pattern and (pattern == "/" or not pattern.endswith("/"))
                else f"{name}^=<an absolute, normalized path glob>"
            )
            findings.append(
                Finding(
                    line,
                    "warning",
                    f"rule {str(rule)!r} matches path argument {name!r} with a plain glob, "
                    f"which '..' gets past ('{pattern}' may match '/x/../elsewhere'); "
                    f"write the path pattern {better}",
                )
            )
    return findings


def _command_globs(rules: list[tuple[Rule, int | None]]) -> list[Finding]:
    """Plain globs on command-like arguments, and globs starting with `~` (`command=~rm *`,
    the shell pattern mistyped), with the shell pattern to write instead."""
    findings = []
    for rule, line in rules:
        for name, pattern in rule.args:
            why = _command_glob(rule, name, pattern)
            if why is not None:
                findings.append(Finding(line, "warning", why))
    return findings


def _command_glob(rule: Rule, name: str, pattern: str) -> str | None:
    if pattern.startswith("~") and not is_path_like(name):
        return (
            f"rule {str(rule)!r} matches {name!r} with a glob starting with '~'; "
            f"did you mean the shell pattern {name}{pattern}?"
        )
    if not is_command_like(name) or (rule.action == "allow" and not is_glob(pattern)):
        return None  # an allow of one exact command string lets nothing else through
    if rule.action == "allow":
        harm = f"'{pattern}' also matches the command followed by '; rm -rf /'"
    else:
        harm = f"'{pattern}' misses 'rm -fr /', 'sudo rm -rf /' and commands after ';' or '&&'"
    return (
        f"rule {str(rule)!r} matches command argument {name!r} with a plain glob, which "
        f"compares the whole string ({harm}); write the shell pattern "
        f"{name}~{_shell_form(pattern)}"
    )


def _shell_form(glob: str) -> str:
    """`glob` as a shell pattern when it reads as one, else a placeholder."""
    from agentfsm import _shell as shell

    try:
        shell.pattern(glob)
    except PolicyError:
        return "<a shell pattern>"
    return glob


def _against_tools(
    rules: list[tuple[Rule, int | None]],
    table: Mapping[str, Any],
    tools: Mapping[str, Any],
    lines: Lines,
) -> list[Finding]:
    findings: list[Finding] = []
    for rule, line in rules:
        why = never_applies(rule, tools)
        if why is not None:
            findings.append(Finding(line, "error", f"{why}; it can never match"))
        elif not any(fnmatch.fnmatchcase(name, rule.tool) for name in tools):
            why = f"rule {str(rule)!r} matches no declared tool: it can never match"
            findings.append(Finding(line, "warning", why))
    where = lines.key("permissions")
    line = lines.line_at(where) if where is not None else None
    findings += [Finding(line, "error", why) for why in undeclared_entries(table, tools)]
    return findings
