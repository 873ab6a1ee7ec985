"""Shell-aware argument patterns: a pattern is matched against each simple command.

A permission rule such as `deny bash(command~rm -rf *)` does not compare text:
the argument is parsed as a shell script (tree-sitter's bash grammar) and the
pattern is matched against every simple command the script can run, wherever it
stands: after `;`, `&&`, `||`, `|`, `&` or a newline, inside `( )`, `{ }`,
`if`/`for`/`while`, functions, `$( )`, backticks and `<( )`, and inside the
command text given to `eval`, `bash -c`, `sh -c`, `su -c`, `trap` and a heredoc
fed to a shell. `find -exec CMD ;` runs CMD, a command too.

Each simple command is seen in one or more *views*: as written (without its
leading `NAME=value` assignments), then with each wrapper it starts with taken
off (`sudo`, `doas`, `env`, `command`, `builtin`, `exec`, `nohup`, `time`, `nice`,
`ionice`, `timeout`, `stdbuf`, `setsid`, `xargs`, `busybox`, `chroot`).

A pattern is words, split like a shell splits them (quotes group):
`NAME [WORD ...] [*]`, or Claude Code's `NAME [WORD ...]:*`.

- NAME is a glob on the command's name; without a `/` it is compared with the
  name's last path part, so `rm` names `/bin/rm` and `./rm` too.
- A word starting with `-` is a flag: `-rf` asks for the short flags `r` and `f`,
  `--force` for the long flag `force`. Long and short spellings known to be the
  same (`rm`'s `-R`, `--recursive` and `-r`; `--force` and `-f`) are one flag.
- Any other word is a glob on one operand; a lone `*` at the end means "and any
  further words".

A deny or ask pattern (`may_match`) matches a view when the name matches, every
flag of the pattern is among the command's flags (in any order and clustering,
long flags also by GNU abbreviation: `--rec`), and the pattern's operands match
operands of the command in the same order (others may stand between). A word
not known until run time (`$X`, `$(...)`, an unquoted glob, a brace expansion)
could be any flag or operand: the answer is then MAYBE, which deny and ask rules
treat as a match.

An allow pattern (`surely_matches`) matches the command word by word, as Claude
Code's prefix rules do: the name exactly as written, then each pattern word
against the next word of the command, then nothing more unless the pattern ends
in `*`, whose tail also takes words not known until run time. It is tried on the
command as written and with the plain wrappers (`command`, `builtin`, `exec`,
`nohup`, `time`, `nice`, `ionice`, `timeout`, `stdbuf`, `setsid`) taken off;
never on a command with leading assignments or a redirection that writes a file
(other than `/dev/null`).

What cannot be read with confidence makes the whole script *unsure*: a parse
error, a command name not known until run time (`$(echo rm) -rf /`, `$CMD`), a
wrapper option not understood, `eval` or `bash -c` of text not known until run
time, a shell reading commands from a pipe or its input, nesting deeper than
`MAX_DEPTH`.
"""

from __future__ import annotations

import enum
import fnmatch
import re
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from agentfsm.exceptions import PolicyError

__all__ = ["MAX_DEPTH", "Command", "Match", "Pattern", "Script", "from_argv", "parse", "pattern"]

MAX_DEPTH = 8
"""Command text inside command text (`bash -c "eval '...'"`) is read this many levels deep."""

Word = str | None
"""A word of a command, or None when its value is known only at run time."""


class Match(enum.Enum):
    """Whether a command is what a pattern names."""

    NO = "no"
    MAYBE = "maybe"
    YES = "yes"


@dataclass(frozen=True, slots=True)
class Command:
    """One view of a simple command: its words, the first being the command's name."""

    words: tuple[Word, ...]
    plain: bool
    """Whether allow patterns look at this view (see the module docstring)."""

    def __str__(self) -> str:
        return " ".join("<unknown>" if w is None else _quoted(w) for w in self.words)


@dataclass(frozen=True, slots=True)
class Script:
    """The simple commands a shell script can run, each as its views, and what could not be read."""

    commands: tuple[tuple[Command, ...], ...] = ()
    unsure: tuple[str, ...] = ()
    """Why parts of the script could not be read with confidence; empty when all could."""


# --- patterns ----------------------------------------------------------------------------------

_ALIASES: dict[str, dict[str, str]] = {
    "rm": {"-R": "-r", "--recursive": "-r", "--force": "-f", "--dir": "-d", "--verbose": "-v"},
    "cp": {"-R": "-r", "--recursive": "-r", "--force": "-f"},
    "mv": {"--force": "-f"},
    "chmod": {"--recursive": "-R"},
    "chown": {"--recursive": "-R"},
    "chgrp": {"--recursive": "-R"},
    "git": {"--force": "-f"},
}
"""Per command, flag spellings that mean the same flag, mapped to one of them."""


@dataclass(frozen=True, slots=True)
class Pattern:
    """A parsed shell pattern; see the module docstring for what it matches."""

    text: str
    name: str
    words: tuple[str, ...]
    """The words after the name, in order, for word-by-word matching."""
    open: bool
    """Whether the pattern ends in `*` (or `:*`): any further words."""
    flags: frozenset[str] = field(default_factory=frozenset)
    operands: tuple[str, ...] = ()

    def may_match(self, command: Command) -> Match:
        """Whether `command` is, may be (MAYBE) or is not what this deny/ask pattern names."""
        name = command.words[0]
        if name is None or not self._name_matches(name):
            return Match.NO
        base = _base(name)
        args = command.words[1:]
        flags, operands = _split_options(args, base, self.flags)
        complete = self.flags <= flags and _in_order(self.operands, operands)
        if complete:
            return Match.YES
        return Match.MAYBE if None in args else Match.NO

    def surely_matches(self, command: Command) -> bool:
        """Whether this allow pattern matches `command` word by word (never a guess)."""
        words = command.words
        if not command.plain or words[0] is None or not fnmatch.fnmatchcase(words[0], self.name):
            return False
        args = words[1:]
        if len(args) < len(self.words) or (not self.open and len(args) != len(self.words)):
            return False
        return all(
            word is not None and fnmatch.fnmatchcase(word, glob)
            for word, glob in zip(args, self.words, strict=False)
        )

    def _name_matches(self, name: str) -> bool:
        if "/" in self.name:
            return fnmatch.fnmatchcase(name, self.name)
        return fnmatch.fnmatchcase(_base(name), self.name)

    def __str__(self) -> str:
        return self.text


@lru_cache(maxsize=512)
def pattern(text: str) -> Pattern:
    """Parse a shell pattern (`"rm -rf *"`, `"git push:*"`); raise PolicyError when it is wrong."""
    if not isinstance(text, str):
        raise PolicyError(f"a shell pattern is a string, not {type(text).__name__}")
    body = text.strip()
    is_open = body.endswith(":*")
    if is_open:
        body = body[:-2]
    try:
        words = shlex.split(body)
    except ValueError as exc:
        raise PolicyError(f"shell pattern {text!r} does not split into words: {exc}") from exc
    if words and words[-1] == "*" and len(words) > 1:
        is_open, words = True, words[:-1]
    if not words:
        raise PolicyError(f"shell pattern {text!r} names no command")
    name, rest = words[0], words[1:]
    if name.startswith("-"):
        raise PolicyError(f"shell pattern {text!r} starts with a flag, not a command name")
    for word in rest:
        if word == "--" or (word.startswith("--") and "=" in word):
            raise PolicyError(
                f"shell pattern {text!r}: {word!r} is not supported; "
                "write flags without values (`--force`) and operands as globs"
            )
    flags = frozenset(f for w in rest if _is_flag(w) for f in _flag_set(w, _base(name)))
    operands = tuple(w for w in rest if not _is_flag(w))
    return Pattern(text, name, tuple(rest), is_open, flags, operands)


def _is_flag(word: str) -> bool:
    return len(word) > 1 and word.startswith("-") and word != "--"


def _flag_set(word: str, command: str) -> set[str]:
    """The flags one word gives: `-rf` is `-r` and `-f`, `--force=x` is `--force`."""
    aliases = _ALIASES.get(command, {})
    if word.startswith("--"):
        long = word.split("=", 1)[0]
        return {aliases.get(long, long)}
    return {aliases.get(f"-{c}", f"-{c}") for c in word[1:]}


def _abbreviated(word: str, command: str, wanted: frozenset[str]) -> set[str]:
    """The long flags `word` may abbreviate (GNU getopt takes any unique prefix)."""
    stem = word.split("=", 1)[0]
    aliases = _ALIASES.get(command, {})
    longs = {w for w in wanted if w.startswith("--")} | {k for k in aliases if k.startswith("--")}
    return {aliases.get(full, full) for full in longs if full.startswith(stem)}


def _split_options(
    args: Sequence[Word], command: str, wanted: frozenset[str]
) -> tuple[set[str], list[str]]:
    """The flags and the known operands among `args`; `--` ends the flags."""
    flags: set[str] = set()
    operands: list[str] = []
    ended = False
    for word in args:
        if word is None:
            continue
        if not ended and word == "--":
            ended = True
        elif not ended and _is_flag(word):
            flags |= _flag_set(word, command)
            if word.startswith("--"):
                flags |= _abbreviated(word, command, wanted)
        else:
            operands.append(word)
    return flags, operands


def _in_order(globs: Sequence[str], operands: Sequence[str]) -> bool:
    """Whether each glob matches an operand, in order, others allowed between them."""
    found = iter(operands)
    return all(any(fnmatch.fnmatchcase(op, glob) for op in found) for glob in globs)


def _base(name: str) -> str:
    return name.rstrip("/").rsplit("/", 1)[-1] or name


def _quoted(word: str) -> str:
    return shlex.quote(word) if word else "''"


# --- reading a script --------------------------------------------------------------------------


@lru_cache(maxsize=1)
def _parser() -> Any:
    # Imported here: only a policy with a shell rule pays for the grammar.
    import tree_sitter
    import tree_sitter_bash

    return tree_sitter.Parser(tree_sitter.Language(tree_sitter_bash.language()))


@lru_cache(maxsize=512)
def parse(text: str) -> Script:
    """The simple commands `text` can run when given to a shell, and what could not be read."""
    reader = _Reader()
    reader.read_text(text, 0)
    return reader.script()


def from_argv(words: Sequence[object]) -> Script:
    """An argument vector run without a shell (`["rm", "-rf", "/"]`) as a script."""
    reader = _Reader()
    if not words or not all(isinstance(w, str) for w in words):
        reader.unsure.append("the argument vector is empty or holds a value that is not a string")
    else:
        reader.simple([w for w in words if isinstance(w, str)], plain=True, stdin=None, depth=0)
    return reader.script()


_GLOB = re.compile(r"(?<!\\)(?:\\\\)*[*?\[]")
_BRACES = re.compile(r"\{[^{}]*(?:,|\.\.)[^{}]*\}")
_ESCAPE = re.compile(r"\\(.)", re.DOTALL)
_IN_QUOTES = re.compile(r'\\([\\"$`\n])')
_WRITES = frozenset({">", ">>", ">|", "&>", "&>>", "<>"})
_DUPS = frozenset({">&", "<&", ">&-", "<&-"})


def _literal(node: Any) -> Word:
    """The value of a word node when it is fixed before run time, else None."""
    kind = node.type
    text = _text(node)
    if kind == "word":
        if _GLOB.search(text) or _BRACES.search(text):
            return None
        return _ESCAPE.sub(lambda m: "" if m.group(1) == "\n" else m.group(1), text)
    if kind == "raw_string":
        return text[1:-1]
    if kind == "number":
        return text
    if kind == "string":
        if any(c.type != "string_content" for c in node.named_children):
            return None
        return _IN_QUOTES.sub(lambda m: "" if m.group(1) == "\n" else m.group(1), text[1:-1])
    if kind == "concatenation":
        if _BRACES.search(text):
            return None
        parts = [_literal(c) for c in node.children]
        return None if None in parts else "".join(p for p in parts if p is not None)
    return None


def _declared(node: Any) -> Word:
    """A word of `export`/`declare`/`local`/`unset`: `NAME=value` when its value is fixed."""
    if node.type != "variable_assignment":
        return _literal(node)
    name = node.child_by_field_name("name")
    value = node.child_by_field_name("value")
    fixed = "" if value is None else _literal(value)
    return None if name is None or fixed is None else f"{_text(name)}={fixed}"


def _text(node: Any) -> str:
    raw: bytes = node.text or b""
    return raw.decode("utf-8", "surrogatepass")


def _heredoc_text(node: Any) -> str | None:
    """The text a heredoc or here-string feeds, when it is fixed before run time."""
    if node.type == "herestring_redirect":
        words = [_literal(c) for c in node.named_children]
        return words[0] if len(words) == 1 else None
    start = next((c for c in node.children if c.type == "heredoc_start"), None)
    body = next((c for c in node.children if c.type == "heredoc_body"), None)
    if start is None or body is None:
        return None
    quoted = _text(start)[:1] in ("'", '"', "\\")
    expanded = any(c.type != "heredoc_content" for c in body.named_children)
    return _text(body) if quoted or not expanded else None


def _writes(redirect: Any) -> bool:
    """Whether a redirection writes a file other than /dev/null."""
    if redirect.type != "file_redirect":
        return False
    operator = next((c.type for c in redirect.children if not c.is_named), "")
    target = redirect.child_by_field_name("destination")
    value = _literal(target) if target is not None else None
    if operator in _DUPS:
        return not (value is not None and (value.isdigit() or value == "-"))
    return operator in _WRITES and value != "/dev/null"


class _Reader:
    """Walks a syntax tree, collecting the views of each simple command and what is unsure."""

    def __init__(self) -> None:
        self.commands: list[tuple[Command, ...]] = []
        self.unsure: list[str] = []

    def script(self) -> Script:
        return Script(tuple(self.commands), tuple(dict.fromkeys(self.unsure)))

    def read_text(self, text: str, depth: int) -> None:
        if depth > MAX_DEPTH:
            self.unsure.append(f"command text is nested more than {MAX_DEPTH} levels deep")
            return
        if "\x00" in text:
            self.unsure.append("the command holds a NUL character")
            return
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError:
            self.unsure.append("the command is not valid text (a lone surrogate)")
            return
        try:
            tree = _parser().parse(data)
        except ImportError as exc:  # a core dependency; missing, nothing can be read
            self.unsure.append(f"the shell grammar is not installed ({exc})")
            return
        if tree.root_node.has_error:
            self.unsure.append("it does not parse as a shell command")
        self.walk(tree.root_node, depth)

    def walk(self, root: Any, depth: int) -> None:
        # A stack, not recursion: `$($($(...)))` may nest deeper than Python's recursion limit.
        stack: list[tuple[Any, bool, str | None]] = [(root, False, None)]
        while stack:
            node, writes, stdin = stack.pop()
            kind = node.type
            if kind == "redirected_statement":
                writes, stdin = self._redirections(node, writes)
            elif kind == "command":
                self._command(node, writes, stdin, depth)
            elif kind in ("declaration_command", "unset_command"):
                words = [_text(node.children[0])] + [_declared(c) for c in node.named_children]
                self.commands.append((Command(tuple(words), plain=not writes),))
            body_stdin = stdin if kind == "redirected_statement" else None
            stack.extend((child, writes, body_stdin) for child in reversed(node.children))

    def _redirections(self, node: Any, writes: bool) -> tuple[bool, str | None]:
        stdin = None
        for redirect in node.children_by_field_name("redirect"):
            writes = writes or _writes(redirect)
            if redirect.type in ("heredoc_redirect", "herestring_redirect"):
                stdin = _heredoc_text(redirect)
        return writes, stdin

    def _command(self, node: Any, writes: bool, stdin: str | None, depth: int) -> None:
        name = node.child_by_field_name("name")
        if name is None:
            return
        for redirect in node.children_by_field_name("redirect"):
            writes = writes or _writes(redirect)
            if redirect.type in ("heredoc_redirect", "herestring_redirect"):
                stdin = _heredoc_text(redirect)
        assigned = any(c.type == "variable_assignment" for c in node.children)
        words = [_literal(name.named_children[0]) if name.named_children else None]
        words += [_literal(a) for a in node.children_by_field_name("argument")]
        self.simple(words, plain=not (writes or assigned), stdin=stdin, depth=depth)

    def simple(self, words: list[Word], *, plain: bool, stdin: str | None, depth: int) -> None:
        """Record one simple command: its views, and any command text it runs."""
        views: list[Command] = []
        current: list[Word] | None = words
        while current:
            name = current[0]
            if name is None:
                self.unsure.append(f"a command name is not known until run time: {_show(current)}")
                break
            views.append(Command(tuple(current), plain))
            base = _base(name)
            runner = _RUNS_TEXT.get(base)
            if runner is not None:
                runner(self, current, stdin, depth)
                break
            if base == "find":
                self._find(current, depth)
            unwrap = _WRAPPERS.get(base)
            if unwrap is None:
                break
            current = self._unwrapped(unwrap, current)
            plain = plain and base in _PLAIN
        if views:
            self.commands.append(tuple(views))

    def _unwrapped(self, unwrap: _Wrapper, words: list[Word]) -> list[Word] | None:
        try:
            return unwrap.inner(words)
        except _UnreadableError as exc:
            self.unsure.append(f"{_show(words)}: {exc}")
            return None

    def nested(self, text: Word, depth: int, where: list[Word]) -> None:
        if text is None:
            self.unsure.append(f"command text is not known until run time: {_show(where)}")
        else:
            self.read_text(text, depth + 1)

    def _find(self, words: list[Word], depth: int) -> None:
        """Record the commands `find -exec CMD ;` (and -execdir, -ok, -okdir) runs."""
        inner: list[Word] | None = None
        for word in words[1:]:
            if inner is None:
                inner = [] if word in ("-exec", "-execdir", "-ok", "-okdir") else None
            elif word in (";", "+"):
                self.simple(inner, plain=False, stdin=None, depth=depth)
                inner = None
            else:
                inner.append(None if word is None or "{}" in word else word)
        if inner:
            self.simple(inner, plain=False, stdin=None, depth=depth)


def _show(words: Sequence[Word]) -> str:
    return str(Command(tuple(words), plain=False))[:120]


# --- commands that run command text ------------------------------------------------------------

_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "rbash", "fish"})


def _shell(reader: _Reader, words: list[Word], stdin: str | None, depth: int) -> None:
    """`bash -c TEXT` runs TEXT; `bash` with no script runs what it reads from its input."""
    command_mode = stdin_mode = False
    index = 1
    while index < len(words):
        word = words[index]
        if word is None:
            reader.unsure.append(f"a shell option is not known until run time: {_show(words)}")
            return
        if word in ("--", "-"):
            index += 1
            break
        if word in ("--rcfile", "--init-file"):
            index += 2
            continue
        if len(word) < 2 or word[0] not in "-+":
            break
        letters = "" if word.startswith("--") else word[1:]
        command_mode = command_mode or "c" in letters
        stdin_mode = stdin_mode or "s" in letters
        index += 1 + sum(letter in "oO" for letter in letters)
    rest = words[index:]
    if command_mode:
        reader.nested(rest[0] if rest else None, depth, words)
    elif rest and not stdin_mode:
        return  # a script file: a command of its own, not read here
    elif stdin is not None:
        reader.read_text(stdin, depth + 1)
    else:
        reader.unsure.append(f"a shell reads commands from its input: {_show(words)}")


def _eval(reader: _Reader, words: list[Word], stdin: str | None, depth: int) -> None:
    args = words[1:]
    text = None if None in args else " ".join(w for w in args if w is not None)
    reader.nested(text, depth, words)


def _trap(reader: _Reader, words: list[Word], stdin: str | None, depth: int) -> None:
    if len(words) > 2 and (words[1] is None or not words[1].startswith("-")):
        reader.nested(words[1], depth, words)


def _su(reader: _Reader, words: list[Word], stdin: str | None, depth: int) -> None:
    for index, word in enumerate(words[1:], start=1):
        if word in ("-c", "--command"):
            reader.nested(words[index + 1] if index + 1 < len(words) else None, depth, words)
            return
        if word is not None and word.startswith("--command="):
            reader.nested(word.split("=", 1)[1], depth, words)
            return
    if stdin is not None:
        reader.read_text(stdin, depth + 1)
    else:
        reader.unsure.append(f"a shell reads commands from its input: {_show(words)}")


_RUNS_TEXT: dict[str, Callable[[_Reader, list[Word], str | None, int], None]] = {
    **dict.fromkeys(_SHELLS, _shell),
    "eval": _eval,
    "trap": _trap,
    "su": _su,
}
"""Commands whose arguments (or input) are command text, read as a script of its own."""


# --- wrappers ----------------------------------------------------------------------------------


class _UnreadableError(Exception):
    """A wrapper's options cannot be followed to the command it runs."""


@dataclass(frozen=True, slots=True)
class _Wrapper:
    """How a wrapper's options are spelled, and what stands before the command it runs."""

    flags: str = ""
    """Short options without a value."""
    valued: str = ""
    """Short options that take a value (`-u root`, `-uroot`)."""
    long_flags: frozenset[str] = frozenset()
    long_valued: frozenset[str] = frozenset()
    positional: int = 0
    """Operands before the command (`timeout`'s duration, `chroot`'s directory)."""
    assignments: bool = False
    """Whether `NAME=value` words may stand before the command (`env`, `sudo`)."""
    numeric: bool = False
    """Whether `-N` (a number) is an option (`nice -10`)."""
    appends_input: bool = False
    """Whether the command gets more arguments from the input (`xargs`)."""
    queries: str = ""
    """Short options with which the wrapper runs nothing (`command -v`, `sudo -l`)."""

    def inner(self, words: list[Word]) -> list[Word] | None:
        """The command this wrapper runs, or None when it runs none."""
        index = 1
        while index < len(words):
            if words[index] == "--":
                index += 1
                break
            step = self._option(words, index)
            if step == 0:
                break
            index += step
        if any(_asks_only(w, self.queries) for w in words[1:index]):
            return None
        index += self.positional
        while self.assignments and index < len(words) and _is_assignment(words[index]):
            index += 1
        rest = words[index:]
        if not rest:
            return None
        return [*rest, None] if self.appends_input else rest

    def _option(self, words: list[Word], index: int) -> int:
        """How many words the option at `index` takes; 0 when the command starts there."""
        word = words[index]
        if word is None:
            raise _UnreadableError("an option is not known until run time")
        if not word.startswith("-") or word == "-":
            return 0
        if word.startswith("--"):
            return self._long(word)
        if self.numeric and word[1:].isdigit():
            return 1
        for position, letter in enumerate(word[1:], start=1):
            if letter in self.valued:
                return 1 if position < len(word) - 1 else 2
            if letter not in self.flags:
                raise _UnreadableError(f"option -{letter} is not understood")
        return 1

    def _long(self, word: str) -> int:
        name = word.split("=", 1)[0]
        if name in self.long_valued:
            return 1 if "=" in word else 2
        if name in self.long_flags:
            return 1
        raise _UnreadableError(f"option {name} is not understood")


def _asks_only(word: Word, letters: str) -> bool:
    return (
        word is not None
        and word.startswith("-")
        and not word.startswith("--")
        and any(letter in letters for letter in word[1:])
    )


def _is_assignment(word: Word) -> bool:
    return word is not None and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", word) is not None


_WRAPPERS: dict[str, _Wrapper] = {
    "sudo": _Wrapper(
        flags="AbEeHiKklnPSsVv",
        valued="CDghpRrTtUu",
        long_flags=frozenset(
            {
                "--askpass",
                "--background",
                "--preserve-env",
                "--edit",
                "--set-home",
                "--login",
                "--remove-timestamp",
                "--reset-timestamp",
                "--list",
                "--non-interactive",
                "--preserve-groups",
                "--stdin",
                "--shell",
                "--version",
                "--validate",
            }
        ),
        long_valued=frozenset(
            {
                "--close-from",
                "--chdir",
                "--group",
                "--host",
                "--prompt",
                "--chroot",
                "--role",
                "--type",
                "--command-timeout",
                "--other-user",
                "--user",
            }
        ),
        assignments=True,
        queries="elvV",
    ),
    "doas": _Wrapper(flags="nsL", valued="uC"),
    # `env -S TEXT` splits TEXT into words by rules of its own: not followed, so unsure.
    "env": _Wrapper(
        flags="i0v",
        valued="uC",
        long_flags=frozenset({"--ignore-environment", "--null", "--debug"}),
        long_valued=frozenset({"--unset", "--chdir"}),
        assignments=True,
    ),
    "command": _Wrapper(flags="pvV", queries="vV"),
    "builtin": _Wrapper(),
    "exec": _Wrapper(flags="cl", valued="a"),
    "nohup": _Wrapper(),
    "time": _Wrapper(flags="pv", valued="fo", long_valued=frozenset({"--format", "--output"})),
    "nice": _Wrapper(valued="n", long_valued=frozenset({"--adjustment"}), numeric=True),
    "ionice": _Wrapper(flags="t", valued="cnp", long_valued=frozenset({"--class", "--classdata"})),
    "timeout": _Wrapper(
        flags="v",
        valued="ks",
        long_flags=frozenset({"--foreground", "--preserve-status", "--verbose"}),
        long_valued=frozenset({"--kill-after", "--signal"}),
        positional=1,
    ),
    "stdbuf": _Wrapper(valued="ioe", long_valued=frozenset({"--input", "--output", "--error"})),
    "setsid": _Wrapper(flags="cfw", long_flags=frozenset({"--ctty", "--fork", "--wait"})),
    "xargs": _Wrapper(
        flags="0oprtx",
        valued="adEIiLlnPs",
        long_flags=frozenset(
            {"--null", "--open-tty", "--interactive", "--no-run-if-empty", "--verbose", "--exit"}
        ),
        long_valued=frozenset(
            {
                "--arg-file",
                "--delimiter",
                "--eof",
                "--replace",
                "--max-lines",
                "--max-args",
                "--max-procs",
                "--max-chars",
                "--process-slot-var",
            }
        ),
        appends_input=True,
    ),
    "busybox": _Wrapper(),
    "chroot": _Wrapper(
        long_flags=frozenset({"--skip-chdir"}),
        long_valued=frozenset({"--userspec", "--groups"}),
        positional=1,
    ),
}
"""Commands that run the command after their options, and how their options are spelled."""

_PLAIN = frozenset(
    {"command", "builtin", "exec", "nohup", "time", "nice", "ionice", "timeout", "stdbuf", "setsid"}
)
"""Wrappers that run the command as it is, for the same user and with the same environment."""
