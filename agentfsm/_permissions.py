"""Permissions: whether a tool call may run, needs a human, or is denied.

A call's permission comes from three sources: rules by tool name and argument
pattern (a glob, `"deny sql(query=*DROP*)"`, a shell pattern matched against
each simple command, `"deny bash(command~rm -rf *)"`, or a glob on a normalized
path, `"allow write_file(path^=/srv/out/*)"`), the per-tool `permissions` table,
and a hook. Every verdict any source gives counts, and the
strongest wins: deny, then ask, then allow. A deny can never be overridden.
Only the exact strings `"allow"`, `"ask"` and `"deny"` are permissions: a hook
that returns anything else (`"DENY"`, `"no"`, `False`, `None`), or raises,
denies the call, and the reason names what it returned.
"""

from __future__ import annotations

import dataclasses
import difflib
import fnmatch
import json
import posixpath
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import ConfigDict, model_validator

from agentfsm._model._checked import Checked
from agentfsm._model.types import PERMISSIONS, Permission, ToolCall, Verdict
from agentfsm.exceptions import DataError, PolicyError

if TYPE_CHECKING:
    from agentfsm._shell import Script

__all__ = [
    "COMMAND_ARGUMENTS",
    "PATH_ARGUMENTS",
    "PERMISSIONS",
    "Permission",
    "PermissionHook",
    "Rule",
    "Verdict",
    "decide",
    "declared_arguments",
    "did_you_mean",
    "is_command_like",
    "is_glob",
    "is_path_like",
    "never_applies",
    "normal_path",
    "rule_arguments",
    "shadowed",
]

PermissionHook = Callable[[ToolCall], Permission]

_STRENGTH = {"allow": 0, "ask": 1, "deny": 2}
_RULE = re.compile(
    r'^\s*(allow|ask|deny)\s+("(?:[^"\\]|\\.)*"|[^\s("]+)\s*(?:\((.*)\))?\s*$', re.DOTALL
)
_ARG_HEAD = re.compile(r"\s*([A-Za-z_][\w.-]*)\s*(\^=|[=~])")
_ARG_SPLIT = re.compile(r",\s*(?=[A-Za-z_][\w.-]*\s*(?:\^=|[=~]))")
_JSON = json.JSONDecoder()


class Rule(Checked):
    """Give `action` to calls of tools named like `tool` whose arguments match `args` and `shell`.

    `tool` and each argument pattern in `args` are shell-style globs (`*`, `?`,
    `[...]`), matched against the whole name or value, case-sensitively. A value
    that is not a string is matched as compact JSON.

    `paths` are globs on a path argument after it is normalized (`normal_path`:
    `.`, `..` and `//` resolved as posixpath.normpath does, so `..` never leaves
    the pattern's folder). A value that cannot be read as an absolute path with
    confidence (relative, `~`-prefixed, holding a NUL byte, not a string) is unsure:
    a deny or ask path pattern applies to it, an allow path pattern never does. A deny
    or ask path pattern also matches a path written as a folder (with a trailing `/`),
    so `/etc/*` covers `/etc` itself (`/etc/`, `/etc/.`); an allow one does not.

    A call lacking an argument the rule names cannot be evaluated by it: an allow
    rule does not match, a deny or ask rule (whose other patterns do or may match)
    makes the call `ask`, and the reason names the missing argument.

    `shell` is at most one shell pattern, `(argument, pattern)`: the argument is
    read as a shell command and the pattern is matched against each simple
    command in it (`agentfsm._shell`, `docs/shell-rules.md`). A deny or ask
    shell rule applies when any simple command is, or may be, what it names, and
    to any command it cannot read with confidence. Allow shell rules let a call
    through only together: when every simple command of the argument surely
    matches one of them; a command they cannot read is at least `ask`.

    The text form reads
    `"<action> <tool>[(<arg>=<glob>, <arg>^=<path glob>, <arg>~<shell pattern>, ...)]"`;
    a value that would not read back (leading or trailing spaces, a `, name=` inside,
    a leading `"`) is written as a JSON string.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    action: Permission
    """What a matching call gets."""
    tool: str
    """A glob on the tool's name."""
    args: tuple[tuple[str, str], ...] = ()
    """(argument name, glob on its value) pairs; all must match."""
    shell: tuple[str, str] | None = None
    """(argument name, shell pattern), e.g. `("command", "rm -rf *")`; see the class docstring."""
    paths: tuple[tuple[str, str], ...] = ()
    """(argument name, glob on the normalized absolute path) pairs, e.g.
    `("path", "/srv/out/*")`; see the class docstring."""

    @model_validator(mode="after")
    def _check_patterns(self) -> Rule:
        if self.shell is not None:
            from agentfsm import _shell as shell  # a policy without shell rules never loads it

            shell.pattern(self.shell[1])
        for name, pattern in self.paths:
            _check_path_pattern(name, pattern)
        return self

    @property
    def names_tool_only(self) -> bool:
        """Whether the rule speaks about every call of its tools (no argument patterns)."""
        return not self.args and self.shell is None and not self.paths

    @classmethod
    def parse(cls, text: str) -> Rule:
        """Read a rule from its text form; a rule that does not parse raises PolicyError."""
        found = _RULE.match(text) if isinstance(text, str) else None
        if found is None:
            raise PolicyError(
                f"permission rule {text!r} does not parse: expected '<allow|ask|deny> <tool glob>"
                "[(<argument>=<glob>, <argument>^=<path glob>, <argument>~<shell pattern>)]', "
                "e.g. 'deny bash(command~rm -rf *)'"
            )
        action, tool, inner = found.groups()
        if tool.startswith('"'):
            tool = _quoted_tool(tool, text)
        parts: dict[str, list[tuple[str, str]]] = {"=": [], "~": [], "^=": []}
        for name, op, value in _arguments(inner, text) if inner is not None else ():
            parts[op].append((name, value))
        shells = parts["~"]
        if len(shells) > 1:
            raise PolicyError(f"permission rule {text!r} has more than one shell pattern (~)")
        try:
            return cls(
                action=action,
                tool=tool,
                args=tuple(parts["="]),
                shell=shells[0] if shells else None,
                paths=tuple(parts["^="]),
            )
        except DataError as exc:
            raise PolicyError(f"permission rule {text!r} is invalid: {exc.message}") from exc

    @classmethod
    def of(cls, item: Any) -> Rule:
        """Build a rule from a Rule, its text form or a mapping; raise PolicyError otherwise."""
        if isinstance(item, Rule):
            return item
        if isinstance(item, str):
            return cls.parse(item)
        if isinstance(item, Mapping):
            return cls._from_mapping(item)
        raise PolicyError(
            f"permission rule {item!r} is a {type(item).__name__}: expected a string such as "
            "'deny bash(command~rm -rf *)' or a mapping {'action', 'tool', 'args', 'shell', "
            "'paths'}"
        )

    @classmethod
    def _from_mapping(cls, item: Mapping[str, Any]) -> Rule:
        """A mapping: `args` and `paths` map names to globs (or are `model_dump`'s pairs),
        `shell` maps one name to a shell pattern."""
        action, tool = item.get("action"), item.get("tool")
        args, shell = _pairs(item.get("args")), _pairs(item.get("shell"))
        paths = _pairs(item.get("paths"))
        extra = sorted(set(item) - {"action", "tool", "args", "shell", "paths"}, key=repr)
        problem = None
        if action not in _STRENGTH:
            problem = f"'action' must be 'allow', 'ask' or 'deny', not {action!r}"
        elif not isinstance(tool, str) or not tool:
            problem = f"'tool' must be a non-empty glob, not {tool!r}"
        elif args is None or paths is None:
            problem = "'args' and 'paths' must map argument names to glob strings"
        elif shell is None or len(shell) > 1:
            problem = "'shell' must map one argument name to a shell pattern"
        elif extra:
            problem = f"unknown key(s) {extra}"
        if problem is not None:
            raise PolicyError(f"permission rule {dict(item)!r} is invalid: {problem}")
        try:
            return cls(
                action=action,
                tool=tool,
                args=args,
                shell=shell[0] if shell else None,
                paths=paths,
            )
        except DataError as exc:
            raise PolicyError(f"permission rule {dict(item)!r} is invalid: {exc.message}") from exc

    def matches(self, call: ToolCall) -> bool:
        """Whether the rule alone gives `call` its action (an allow shell rule: covers every
        command); a deny or ask rule missing an argument of the call does not (it asks)."""
        if self.action != "allow":
            verdict = _restricting(self, call, {})
            return verdict is not None and verdict[0] == self.action
        if not self.applies_to(call):
            return False
        if self.shell is None:
            return True
        script = _script(call, self.shell[0])
        together = _covered(call, (self,), {self.shell[0]: script})
        return together is not None and together[0] == "allow"

    def applies_to(self, call: ToolCall) -> bool:
        """Whether the tool name and every glob match, every path pattern surely matches, and
        the shell argument is present (an allow rule's test; deny and ask rules read more)."""
        if not fnmatch.fnmatchcase(call.name, self.tool):
            return False
        arguments = call.arguments or {}
        for name, pattern in self.args:
            if name not in arguments or not _glob_matches(pattern, arguments[name]):
                return False
        for name, pattern in self.paths:
            if name not in arguments or _path_says(pattern, arguments[name], sure=True) != "":
                return False
        return self.shell is None or self.shell[0] in arguments

    def __str__(self) -> str:
        parts = [
            f"{name}={_written(pattern, tilde=is_command_like(name))}"
            for name, pattern in self.args
        ]
        parts += [f"{name}^={_written(pattern)}" for name, pattern in self.paths]
        if self.shell is not None:
            parts.append(f"{self.shell[0]}~{_written(self.shell[1])}")
        tool = self.tool if re.fullmatch(r'[^\s("]+', self.tool) else json.dumps(self.tool)
        return f"{self.action} {tool}" + (f"({', '.join(parts)})" if parts else "")


def _quoted_tool(quoted: str, text: str) -> str:
    """A tool glob written as a JSON string; it must decode to a non-empty string."""
    try:
        tool = json.loads(quoted)
    except ValueError as exc:
        raise PolicyError(
            f"permission rule {text!r}: the tool {quoted} is not a JSON string"
        ) from exc
    if not tool:
        raise PolicyError(f"permission rule {text!r} names no tool")
    return str(tool)


def _arguments(inner: str, text: str) -> list[tuple[str, str, str]]:
    """The `(name, "=" or "~", value)` items of a rule's parentheses."""
    items: list[tuple[str, str, str]] = []
    position = 0
    while True:
        head = _ARG_HEAD.match(inner, position)
        if head is None:
            where = inner[position:].split(",", 1)[0].strip()
            raise PolicyError(
                f"permission rule {text!r} does not parse: {where!r} is not "
                "'<argument>=<glob>', '<argument>^=<path glob>' or '<argument>~<shell pattern>'"
            )
        value, position = _value(inner, head.end())
        if head.group(2) == "=" and inner[head.end() :].lstrip(" ").startswith("~"):
            _refuse_tilde_glob(head.group(1), value, text)
        items.append((head.group(1), head.group(2), value))
        if position >= len(inner):
            return items
        position += 1  # the comma between items


def _refuse_tilde_glob(name: str, value: str, text: str) -> None:
    """`command=~rm -rf *` is the shell pattern `command~rm -rf *` mistyped: a glob on a
    command that starts with `~` matches no command, so a deny written so never denies.
    A glob that truly starts with `~` is written as a JSON string: `command="~/bin/x"`."""
    if is_command_like(name):
        raise PolicyError(
            f"permission rule {text!r}: {name}={value} is a glob on the whole command starting "
            f"with '~'; did you mean the shell pattern {name}{value}? (a glob that starts "
            f"with '~' is written as a JSON string: {name}={json.dumps(value)})"
        )


def _value(inner: str, start: int) -> tuple[str, int]:
    """One value starting at `start` and the index of the comma after it (or the end)."""
    quote = len(inner) - len(inner[start:].lstrip(" "))
    if inner.startswith('"', quote):
        try:
            value, end = _JSON.raw_decode(inner, quote)
        except ValueError:
            value = None
        if isinstance(value, str):
            rest = inner[end:]
            after = end + len(rest) - len(rest.lstrip())
            if after == len(inner) or _ARG_SPLIT.match(inner, after):
                return value, after
    split = _ARG_SPLIT.search(inner, start)
    stop = split.start() if split else len(inner)
    return inner[start:stop].strip(), stop


def _written(value: str, *, tilde: bool = False) -> str:
    """`value` as it stands in a rule's text: as is when it reads back, else a JSON string
    (with `tilde`, a glob on a command starting with `~`, which text reads as a typo)."""
    reads_back = value == value.strip() and not value.startswith('"')
    reads_back = reads_back and not (tilde and value.startswith("~"))
    if reads_back and _ARG_SPLIT.search(value) is None:
        return value
    return json.dumps(value, ensure_ascii=False)


def _pairs(value: object) -> tuple[tuple[str, str], ...] | None:
    """A mapping of names to strings, or `model_dump`'s pairs, as pairs; None when neither."""
    if value is None:
        return ()
    if isinstance(value, Mapping):
        value = list(value.items())
    elif (
        isinstance(value, list | tuple)
        and len(value) == 2
        and all(isinstance(v, str) for v in value)
    ):
        value = [value]  # a rule's `shell` field as model_dump gives it
    if not isinstance(value, list | tuple):
        return None
    pairs = [tuple(p) for p in value if isinstance(p, list | tuple) and len(p) == 2]
    if len(pairs) != len(value) or not all(isinstance(v, str) for p in pairs for v in p):
        return None
    return tuple((str(a), str(b)) for a, b in pairs)


def _compact(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def _glob_matches(pattern: str, value: object) -> bool:
    """Whether a glob matches an argument's value (a non-string as compact JSON)."""
    return fnmatch.fnmatchcase(value if isinstance(value, str) else _compact(value), pattern)


# -- path patterns ----------------------------------------------------------------------


def normal_path(value: object) -> tuple[str | None, str]:
    """`value` as a normalized absolute path, or None and why it cannot be read as one.

    Normalized as posixpath.normpath does, without reading the file system (symlinks
    are not followed): `.` and empty segments drop, `..` removes the segment before
    it and never climbs above `/`, and leading slashes become one. A relative path
    (no base is known), a `~` path (a home directory known only at run time), a NUL
    byte or a value that is not a string is unsure.
    """
    if not isinstance(value, str):
        return None, f"it is a {type(value).__name__}, not a path string"
    if "\0" in value:
        return None, "it holds a NUL byte"
    if value.startswith("~"):
        return None, "it starts with '~', a home directory known only at run time"
    if not value.startswith("/"):
        return None, "it is a relative path, and no base directory is known"
    return "/" + posixpath.normpath(value).lstrip("/"), ""


def _check_path_pattern(name: str, pattern: str) -> None:
    """A path pattern must itself be a normalized absolute path glob, so it reads one way."""
    if (
        not pattern.startswith("/")
        or "\0" in pattern
        or (pattern != "/" and pattern.endswith("/"))
        or normal_path(pattern)[0] != pattern
    ):
        raise PolicyError(
            f"path pattern {name}^={pattern!r} must be an absolute, normalized path glob "
            "(no '.', '..', '//' or trailing '/'), e.g. '/srv/out/*' for everything inside /srv/out"
        )


def _path_says(pattern: str, value: object, *, sure: bool) -> str | None:
    """Whether a path pattern matches `value`: "" surely, None surely not, else why unsure.

    With `sure` (an allow) the normalized path must match. Otherwise (a deny or ask:
    "is or may be") the path also matches when the pattern matches it written as a
    folder, with a trailing `/`: `/etc/*` then covers `/etc` itself, which `/etc/`,
    `/etc/.` and `/etc/ssl/..` normalize to, as the plain glob `/etc/*` does.
    """
    normal, why = normal_path(value)
    if normal is None:
        return f"{value!r:.80} may be under {pattern}: {why}"
    if fnmatch.fnmatchcase(normal, pattern):
        return ""
    if not sure and fnmatch.fnmatchcase(normal.rstrip("/") + "/", pattern):
        return ""
    return None


_PLAIN_WORD = re.compile(r"[\w./:,@%+=-]*", re.ASCII)
"""The words a shell reads as themselves, one word each (an allow-list: anything else, such
as whitespace, `$`, a backtick, `;`, `|`, `&`, redirections, quotes, a backslash, a glob, a
brace, `~`, `#` or `!`, may make a joined argv run otherwise: `["ls", "x; rm -rf /"]` is
two commands, `["rm", "{-rf,/}"]` expands into words the vector does not hold)."""
_PLAIN_PROGRAM = re.compile(r"[\w./:,@+-]+", re.ASCII)
"""The program words a shell reads as one name: not `=` (`["X=1 rm"]`) nor `%` (a job)."""
_RESERVED = re.compile(
    "case|coproc|do|done|elif|else|esac|fi|for|function|if|in|select|then|time|until|while"
)
"""Bash's reserved words that are plain names (`!`, `[[`, `{` are not plain): as a joined
argv's first word one runs the next words (`["coproc", "rm", "-rf", "/"]` runs rm)."""


def _script(call: ToolCall, argument: str) -> Script:
    """The shell script in `call`'s argument: a string is parsed, a list of strings is an argv."""
    from agentfsm import _shell as shell

    value = (call.arguments or {}).get(argument)
    if isinstance(value, str):
        return shell.parse(value)
    if isinstance(value, list):
        script = shell.from_argv(value)
        if not _joined_differs(value):
            return script
        # Tools commonly join a list into a shell string (`" ".join(argv)` given to `sh -c`):
        # both readings count, so a deny applies when either may be what it names and an
        # allow covers the call only when it covers every command of both.
        joined = shell.parse(" ".join(value)) if all(isinstance(w, str) for w in value) else None
        if joined is None:
            return dataclasses.replace(script, unsure=(*script.unsure, "a word is not a string"))
        return shell.Script(
            commands=(*script.commands, *joined.commands),
            unsure=(*script.unsure, *joined.unsure),
        )
    return shell.Script(unsure=(f"argument {argument!r} is not a string",))


def _joined_differs(words: list[object]) -> bool:
    """Whether an argv may run otherwise when a tool joins it into a shell string: unless
    every word is a `_PLAIN_WORD` and the program word a `_PLAIN_PROGRAM`, not reserved."""
    texts = [w for w in words if isinstance(w, str)]
    if texts and (_RESERVED.fullmatch(texts[0]) or not _PLAIN_PROGRAM.fullmatch(texts[0])):
        return True
    return not all(_PLAIN_WORD.fullmatch(word) for word in texts)


def _flagged(rule: Rule, script: Script) -> str | None:
    """Why a deny or ask shell `rule` applies to `script`, or None when it does not."""
    from agentfsm import _shell as shell

    assert rule.shell is not None
    pattern = shell.pattern(rule.shell[1])
    maybe = None
    for views in script.commands:
        for view in views:
            found = pattern.may_match(view)
            if found is shell.Match.YES:
                return f"{view} is {pattern}"
            if found is shell.Match.MAYBE and maybe is None:
                maybe = f"{view} may be {pattern}: some of its words are known only at run time"
    if script.unsure:
        return f"the command cannot be read with confidence: {script.unsure[0]}"
    return maybe


def _covered(call: ToolCall, rules: Sequence[Rule], scripts: dict[str, Script]) -> Verdict | None:
    """What allow shell `rules` (all applying to `call`) say together.

    Allow when every simple command surely matches one of them; ask when the
    command cannot be read with confidence; nothing when a command is not covered.
    """
    from agentfsm import _shell as shell

    by_argument: dict[str, list[shell.Pattern]] = {}
    for rule in rules:
        assert rule.shell is not None
        by_argument.setdefault(rule.shell[0], []).append(shell.pattern(rule.shell[1]))
    for argument, patterns in by_argument.items():
        script = scripts.get(argument) or _script(call, argument)
        if script.unsure:
            why = f"the command cannot be read with confidence: {script.unsure[0]}"
            return "ask", f"rule(s) {_names(rules)} cannot allow it: {why}"
        if script.sets:
            why = (
                f"it sets {script.sets[0]}, and what the environment it runs in exports is "
                "not known (an exported variable changes what the commands it runs do)"
            )
            return "ask", f"rule(s) {_names(rules)} cannot allow it: {why}"
        for views in script.commands:
            if not any(p.surely_matches(v) for v in views for p in patterns):
                return None
    return "allow", f"rule(s) {_names(rules)} cover every command"


def _names(rules: Sequence[Rule]) -> str:
    return ", ".join(repr(str(r)) for r in rules)


def decide(
    call: ToolCall,
    rules: tuple[Rule, ...],
    table: Mapping[str, Permission],
    hook: Callable[[ToolCall], Any] | None,
) -> Verdict:
    """Return the strongest permission any source gives `call`, and which source gave it.

    Matching rules, the table's entry for the tool and the hook all count; when
    none of them speaks, the table's `"*"` entry (allow when absent) decides. Allow
    shell rules speak together: allow when they cover every simple command; when
    they cannot read the command, at least ask.
    """
    best, floor = _from_rules(call, rules)
    if best is not None and best[0] == "deny":
        return best
    if call.name in table:
        best = _stronger(best, _understood(table[call.name], f"permissions[{call.name!r}]"))
    if hook is not None:
        best = _stronger(best, _ask_hook(hook, call))
    if best is None:
        best = _understood(table["*"], "permissions['*']") if "*" in table else None
        best = best or ("allow", "the default")
        return best if floor is None else _stronger(best, floor)
    return best


def _from_rules(call: ToolCall, rules: tuple[Rule, ...]) -> tuple[Verdict | None, Verdict | None]:
    """The strongest verdict of the rules, and an `ask` when allow shell rules cannot read it."""
    best: Verdict | None = None
    allowing: list[Rule] = []
    scripts: dict[str, Script] = {}
    for rule in rules:
        if rule.action != "allow":
            said = _restricting(rule, call, scripts)
            if said is None:
                continue
            best = _stronger(best, said)
        elif not rule.applies_to(call):
            continue
        elif rule.shell is None:
            best = _stronger(best, _understood(rule.action, f"rule {str(rule)!r}"))
        else:
            allowing.append(rule)
            continue
        if best[0] == "deny":
            return best, None
    together = _covered(call, allowing, scripts) if allowing else None
    if together is None:
        return best, None
    if together[0] == "allow":
        return _stronger(best, together), None
    return best, together  # an unreadable command: a floor under the default, not a verdict


def _restricting(rule: Rule, call: ToolCall, scripts: dict[str, Script]) -> Verdict | None:
    """What a deny or ask `rule` says of `call`: None when a pattern surely does not match.

    When every pattern present is, or may be, what it names: the rule's action, or
    `ask` when an argument the rule names is absent from the call, which the rule
    then cannot evaluate (`deny bash(comand~rm -rf *)` never silently passes a call).
    """
    if not fnmatch.fnmatchcase(call.name, rule.tool):
        return None
    arguments = call.arguments or {}
    whys = _present_patterns(rule, call, scripts)
    if whys is None:
        return None
    absent = [name for name in rule_arguments(rule) if name not in arguments]
    if absent:
        return "ask", (
            f"rule {str(rule)!r} names argument {absent[0]!r}, which this call does not have: "
            "the rule cannot be evaluated, so the call is asked"
        )
    return _understood(rule.action, f"rule {str(rule)!r}" + "".join(f": {w}" for w in whys))


def _present_patterns(rule: Rule, call: ToolCall, scripts: dict[str, Script]) -> list[str] | None:
    """Why each pattern of a deny or ask `rule` whose argument the call has is, or may be,
    what it names (nothing for a sure glob or path match); None when one surely is not."""
    arguments = call.arguments or {}
    for name, pattern in rule.args:
        if name in arguments and not _glob_matches(pattern, arguments[name]):
            return None
    whys: list[str] = []
    for name, pattern in rule.paths:
        if name not in arguments:
            continue
        why = _path_says(pattern, arguments[name], sure=False)
        if why is None:
            return None
        if why:  # unsure: "is or may be" applies a deny or ask
            whys.append(why)
    if rule.shell is not None and rule.shell[0] in arguments:
        argument = rule.shell[0]
        script = scripts[argument] = scripts.get(argument) or _script(call, argument)
        why = _flagged(rule, script)
        if why is None:
            return None
        whys.append(why)
    return whys


def _understood(value: object, source: str) -> Verdict:
    """`value` as a verdict from `source`; anything but "allow", "ask" or "deny" denies.

    A validated policy holds only those three; this keeps a policy changed behind
    pydantic's back (or a table a caller passes directly) from failing open.
    """
    if type(value) is str and value in _STRENGTH:
        return value, source  # type: ignore[return-value]
    return "deny", f"{source} is {value!r:.60}, not 'allow', 'ask' or 'deny'"


def _ask_hook(hook: Callable[[ToolCall], Any], call: ToolCall) -> Verdict:
    try:
        value = hook(call)
    except Exception as exc:  # a hook that fails must not let the call through
        return "deny", f"the permission hook raised {type(exc).__name__}: {exc}"
    # `type(value) is str` so that a str subclass with a lying __eq__ cannot pass.
    if type(value) is str and value in _STRENGTH:
        return value, "the permission hook"  # type: ignore[return-value]
    return "deny", (
        f"the permission hook returned {value!r}, which is not 'allow', 'ask' or 'deny'"
    )


def _stronger(current: Verdict | None, new: Verdict) -> Verdict:
    if current is None or _STRENGTH[new[0]] > _STRENGTH[current[0]]:
        return new
    return current


# -- rules read against the declared tools, and against each other ----------------------

_GLOB = re.compile(r"[*?\[]")
_MAX_SCHEMA_DEPTH = 8
"""How deep `$ref`, `allOf`, `anyOf` and `oneOf` are followed to read a tool's argument names."""


COMMAND_ARGUMENTS = frozenset(
    {"command", "commands", "cmd", "cmdline", "command_line", "script", "shell", "bash", "sh"}
    | {"argv"}
)
"""Argument names that hold a shell command; also any name ending in `_command`, `_cmd` or
`_script`. `agentfsm lint` without `--tools` warns on a shell pattern (`~`) on another name:
a misspelled name (`comand`) is absent from every call, and the rule then only asks."""

PATH_ARGUMENTS = frozenset(
    {"path", "paths", "file", "files", "filename", "filepath", "file_path", "pathname"}
    | {"dir", "dirname", "directory", "folder", "dest", "destination", "target", "src"}
    | {"cwd", "workdir", "working_dir", "root"}
)
"""Argument names that hold a file system path; also any name ending in `_path`, `_file`,
`_dir`, `_directory` or `_folder`. `agentfsm lint` warns on a plain glob (`=`) on one:
`/srv/out/*` also matches `/srv/out/../x`; the path pattern (`^=`) does not."""

_COMMAND_ENDS = ("_command", "_cmd", "_script")
_PATH_ENDS = ("_path", "_file", "_dir", "_directory", "_folder")


def is_command_like(name: str) -> bool:
    """Whether an argument name says it holds a shell command (`COMMAND_ARGUMENTS`)."""
    return name.lower() in COMMAND_ARGUMENTS or name.lower().endswith(_COMMAND_ENDS)


def is_path_like(name: str) -> bool:
    """Whether an argument name says it holds a file system path (`PATH_ARGUMENTS`)."""
    return name.lower() in PATH_ARGUMENTS or name.lower().endswith(_PATH_ENDS)


def is_glob(text: str) -> bool:
    """Whether `text` holds a glob wildcard (`*`, `?`, `[`): a rule's tool part names a family."""
    return _GLOB.search(text) is not None


def declared_arguments(schema: object) -> frozenset[str] | None:
    """The argument names a tool's JSON schema declares, or None when it accepts any name.

    A schema that declares `properties` (directly, or through local `$ref`s and
    `allOf`/`anyOf`/`oneOf`) names its arguments. No schema, no `properties`,
    `patternProperties`, an explicit `additionalProperties` other than false (a
    callable's `**kwargs`), or a reference not read here: any name may be an argument.
    """
    return _arguments_of(schema, schema, _MAX_SCHEMA_DEPTH)


def _arguments_of(schema: object, root: object, depth: int) -> frozenset[str] | None:
    if not isinstance(schema, Mapping) or depth == 0 or "patternProperties" in schema:
        return None
    if schema.get("additionalProperties", False) is not False:
        return None
    parts: list[object] = []
    if "$ref" in schema:
        parts.append(_local_ref(schema["$ref"], root))
    for key in ("allOf", "anyOf", "oneOf"):
        branches = schema.get(key, [])
        parts.extend(branches if isinstance(branches, list) else [None])
    names: set[str] = set()
    properties = schema.get("properties")
    if isinstance(properties, Mapping):
        names.update(str(name) for name in properties)
    elif not parts:
        return None
    for part in parts:
        found = _arguments_of(part, root, depth - 1)
        if found is None:
            return None
        names |= found
    return frozenset(names)


def _local_ref(ref: object, root: object) -> object:
    """The schema a local `#/$defs/...` reference points to; None for anything else."""
    if not isinstance(ref, str) or not ref.startswith("#/"):
        return None
    target = root
    for part in ref[2:].split("/"):
        if not isinstance(target, Mapping):
            return None
        target = target.get(part.replace("~1", "/").replace("~0", "~"))
    return target


def never_applies(rule: Rule, tools: Mapping[str, object]) -> str | None:
    """Why `rule` can apply to no call of the declared `tools` (name -> JSON schema), or None.

    A rule whose tool part is a plain name must name a declared tool; an argument it
    names must be one that some matching tool takes, when their schemas say which.
    A glob that matches no declared tool is not an error here (`agentfsm lint` says so).
    """
    matching = [name for name in tools if fnmatch.fnmatchcase(name, rule.tool)]
    if not matching:
        if is_glob(rule.tool):
            return None
        return (
            f"rule {str(rule)!r} names tool {rule.tool!r}, which is not declared"
            f"{did_you_mean(rule.tool, tools)} (declared: {', '.join(sorted(tools)) or 'none'})"
        )
    known = [declared_arguments(tools[name]) for name in matching]
    if not known or any(names is None for names in known):
        return None
    takes = frozenset().union(*(names for names in known if names is not None))
    for argument in rule_arguments(rule):
        if argument not in takes:
            which = f"tool {matching[0]!r}" if len(matching) == 1 else "no tool matching it"
            verb = "does not take" if len(matching) == 1 else "takes"
            return (
                f"rule {str(rule)!r} names argument {argument!r}, which {which} {verb}"
                f"{did_you_mean(argument, takes)} (arguments: {', '.join(sorted(takes)) or 'none'})"
            )
    return None


def rule_arguments(rule: Rule) -> list[str]:
    """The argument names a rule's patterns read: its globs, path patterns, then shell pattern."""
    names = [name for name, _ in (*rule.args, *rule.paths)]
    return names + ([rule.shell[0]] if rule.shell is not None else [])


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """`"; did you mean 'x'?"` for the closest of `choices`, or nothing when none is close."""
    close = difflib.get_close_matches(word, list(choices), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def shadowed(rules: Sequence[Rule], table: Mapping[str, object]) -> list[tuple[int, str]]:
    """The rules that can never decide a call, by index, and why.

    Every matching rule counts and the strongest verdict wins (a tie goes to the
    rule written first, then to the rules over the table): a rule never decides when
    another rule applies to every call it applies to, with a stronger action or the
    same action written earlier, or when the table's entry for its one tool is stronger.
    A deny or ask rule on a call lacking an argument it names asks (`decide`), so a
    deny with arguments shadows an ask only when written before it.
    """
    found: list[tuple[int, str]] = []
    for index, rule in enumerate(rules):
        why = _decided_before(rule, index, rules) or _table_decides(rule, table)
        if why is not None:
            found.append((index, why))
    return found


def _decided_before(rule: Rule, index: int, rules: Sequence[Rule]) -> str | None:
    for other_index, other in enumerate(rules):
        if other_index == index or not _covers(other, rule):
            continue
        stronger = _STRENGTH[other.action] > _STRENGTH[rule.action]
        if stronger and rule.action == "ask" and other_index > index and rule_arguments(other):
            # On a call lacking one of its arguments the deny only asks too, and the ask
            # written first speaks: it still decides there.
            continue
        # Allow shell rules speak together, so a wider one makes a narrower one idle
        # wherever it is written (a twin only after it, or both would be named).
        together = rule.action == other.action == "allow" and None not in (rule.shell, other.shell)
        wider = together and not _covers(rule, other)
        if stronger or (other.action == rule.action and (other_index < index or wider)):
            how = "a stronger action" if stronger else "the same action, written first"
            how = "the same action" if wider and other_index > index else how
            return (
                f"rule {str(rule)!r} never decides: rule {str(other)!r} applies to every "
                f"call it applies to, with {how}"
            )
    return None


def _table_decides(rule: Rule, table: Mapping[str, object]) -> str | None:
    entry = table.get(rule.tool) if not is_glob(rule.tool) else None
    if entry in _STRENGTH and _STRENGTH[str(entry)] > _STRENGTH[rule.action]:
        return (
            f"rule {str(rule)!r} never decides: permissions[{rule.tool!r}] is {entry!r}, "
            "which is stronger and speaks for every call of the tool"
        )
    return None


def _covers(wide: Rule, narrow: Rule) -> bool:
    """Whether `wide` surely gives its verdict on every call where `narrow` gives its own.

    Read conservatively: a glob includes another only when it is all `*`, equal, or
    matches a plain name; a path pattern only its own twin in a rule of the same kind
    (allow, or deny and ask); a deny or ask shell pattern one of a deny or ask rule
    with the same name, fewer flags and operands in order; an allow shell pattern one
    of an allow rule alike but for the pattern, word by word.
    """
    if not _glob_includes(wide.tool, narrow.tool):
        return False
    if wide.paths and (
        not set(wide.paths) <= set(narrow.paths)
        or (wide.action == "allow") != (narrow.action == "allow")
    ):
        return False
    return _args_cover(wide, narrow) and _shell_covers(wide, narrow)


def _args_cover(wide: Rule, narrow: Rule) -> bool:
    """Whether each glob of `wide` matches every value `narrow` lets through."""
    present = set(rule_arguments(narrow))
    narrow_args = dict(narrow.args)
    for name, pattern in wide.args:
        if name not in present:
            return False
        if name in narrow_args:
            if not _glob_includes(pattern, narrow_args[name]):
                return False
        elif pattern.strip("*"):  # `narrow` reads it otherwise: only `*` surely matches
            return False
    return True


def _shell_covers(wide: Rule, narrow: Rule) -> bool:
    """Whether `wide`'s shell pattern (if any) speaks on every command `narrow`'s does."""
    if wide.shell is None:
        return True
    if narrow.shell is None or narrow.shell[0] != wide.shell[0]:
        return False
    if wide.action == narrow.action == "allow":
        same = (wide.tool, wide.args, wide.paths) == (narrow.tool, narrow.args, narrow.paths)
        return same and _allow_includes(wide.shell[1], narrow.shell[1])
    if "allow" in (wide.action, narrow.action):
        return False
    return _shell_includes(wide.shell[1], narrow.shell[1])


def _shell_includes(wide: str, narrow: str) -> bool:
    """Whether every command deny or ask shell pattern `narrow` is or may be, `wide` is or
    may be too: the same name (or a wider glob), fewer flags, operands a subsequence."""
    from agentfsm import _shell as shell

    w, n = shell.pattern(wide), shell.pattern(narrow)
    if w.name != n.name and ("/" in w.name + n.name or not _glob_includes(w.name, n.name)):
        return False
    if not w.flags <= n.flags:
        return False
    rest = iter(n.operands)  # the earliest fit leaves the most room for the next operand
    return all(any(_glob_includes(glob, other) for other in rest) for glob in w.operands)


def _allow_includes(wide: str, narrow: str) -> bool:
    """Whether allow shell pattern `wide` surely matches every command `narrow` surely
    matches: word by word, each glob of `wide` including its counterpart."""
    from agentfsm import _shell as shell

    w, n = shell.pattern(wide), shell.pattern(narrow)
    if not _glob_includes(w.name, n.name) or len(w.words) > len(n.words):
        return False
    if not w.open and (n.open or len(w.words) != len(n.words)):
        return False
    return all(_glob_includes(a, b) for a, b in zip(w.words, n.words, strict=False))


def _glob_includes(wide: str, narrow: str) -> bool:
    """Whether every text `narrow` matches, `wide` matches too (read conservatively)."""
    if wide == narrow or (wide and not wide.strip("*")):
        return True
    return not is_glob(narrow) and fnmatch.fnmatchcase(narrow, wide)
