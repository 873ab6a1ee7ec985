"""Reads a shell script's syntax tree into the views of its simple commands (see `shell`)."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

from agentfsm.model._shell_script import MAX_DEPTH, Command, Script
from agentfsm.model._shell_wrappers import (
    PLAIN,
    SU,
    WATCH,
    WRAPPERS,
    UnreadableError,
    Word,
    Wrapper,
)
from agentfsm.model._shell_wrappers import base_name as _base

__all__ = ["Reader"]


@lru_cache(maxsize=1)
def _parser() -> Any:
    # Imported here: only a policy with a shell rule pays for the grammar.
    import tree_sitter
    import tree_sitter_bash

    return tree_sitter.Parser(tree_sitter.Language(tree_sitter_bash.language()))


_GLOB = re.compile(r"(?<!\\)(?:\\\\)*[*?\[]")
_BRACES = re.compile(r"\{[^{}]*(?:,|\.\.)[^{}]*\}")
_ESCAPE = re.compile(r"\\(.)", re.DOTALL)
_IN_QUOTES = re.compile(r'\\([\\"$`\n])')
_WRITES = frozenset({">", ">>", ">|", "&>", "&>>", "<>"})
_DUPS = frozenset({">&", "<&", ">&-", "<&-"})


_WORD_LETTERS = "zqxjkvwyZQXJKVWY"


def _ascii_copy(text: str, data: bytes) -> bytes:
    """`data` with each non-ASCII character replaced by as many bytes of one ASCII letter.

    tree-sitter-bash 0.25 crashes the process on some characters outside the basic
    plane after a `{`; the shell treats every non-ASCII character as part of a word,
    as it treats a letter, so the copy has the same structure and byte offsets. The
    letter is one the text does not hold, so a heredoc delimiter cannot be confused.
    """
    if data.isascii():
        return data
    letter = next((c for c in _WORD_LETTERS if c not in text), "z")
    return "".join(c if c.isascii() else letter * len(c.encode()) for c in text).encode()


class _Source:
    """A script's original bytes, read through the syntax tree of its parsed copy."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def literal(self, node: Any) -> Word:
        """The value of a word node when it is fixed before run time, else None."""
        kind = node.type
        text = self.text(node)
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
            parts = [self.literal(c) for c in node.children]
            return None if None in parts else "".join(p for p in parts if p is not None)
        return None

    def declared(self, node: Any) -> Word:
        """A word of `export`/`declare`/`local`/`unset`: `NAME=value` when its value is fixed."""
        if node.type != "variable_assignment":
            return self.literal(node)
        name = node.child_by_field_name("name")
        value = node.child_by_field_name("value")
        fixed = "" if value is None else self.literal(value)
        return None if name is None or fixed is None else f"{self.text(name)}={fixed}"

    def text(self, node: Any) -> str:
        """The original text of `node` (the tree was parsed from a copy)."""
        raw = self.data[node.start_byte : node.end_byte]
        return raw.decode("utf-8", "replace")  # a cut inside a character: never an error

    def heredoc_text(self, node: Any) -> str | None:
        """The text a heredoc or here-string feeds, when it is fixed before run time."""
        if node.type == "herestring_redirect":
            words = [self.literal(c) for c in node.named_children]
            return words[0] if len(words) == 1 else None
        start = next((c for c in node.children if c.type == "heredoc_start"), None)
        body = next((c for c in node.children if c.type == "heredoc_body"), None)
        if start is None or body is None:
            return None
        quoted = self.text(start)[:1] in ("'", '"', "\\")
        expanded = any(c.type != "heredoc_content" for c in body.named_children)
        return self.text(body) if quoted or not expanded else None

    def writes(self, redirect: Any) -> bool:
        """Whether a redirection writes a file other than /dev/null."""
        if redirect.type == "heredoc_redirect":  # tree-sitter nests `<<E > out`'s `> out` here
            return any(self.writes(r) for r in redirect.children_by_field_name("redirect"))
        if redirect.type != "file_redirect":
            return False
        operator = next((c.type for c in redirect.children if not c.is_named), "")
        target = redirect.child_by_field_name("destination")
        value = self.literal(target) if target is not None else None
        if operator in _DUPS:
            return not (value is not None and (value.isdigit() or value == "-"))
        return operator in _WRITES and value != "/dev/null"


class Reader:
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
            tree = _parser().parse(_ascii_copy(text, data))
        except ImportError as exc:  # a core dependency; missing, nothing can be read
            self.unsure.append(f"the shell grammar is not installed ({exc})")
            return
        if tree.root_node.has_error:
            self.unsure.append("it does not parse as a shell command")
        self.walk(tree.root_node, _Source(data), depth)

    def walk(self, root: Any, source: _Source, depth: int) -> None:
        # A stack, not recursion: `$($($(...)))` may nest deeper than Python's recursion limit.
        stack: list[tuple[Any, bool]] = [(root, False)]
        stdin_of: dict[int, str] = {}  # node id -> the heredoc text its command reads
        while stack:
            node, writes = stack.pop()
            kind = node.type
            if kind == "redirected_statement":
                writes, stdin = self._redirections(node, source, writes)
                receiver = _receiver(node.child_by_field_name("body"))
                if stdin is not None and receiver is not None:
                    stdin_of[receiver.id] = stdin
            elif kind == "command":
                self._command(node, source, writes, stdin_of.get(node.id), depth)
            elif kind in ("declaration_command", "unset_command"):
                words: list[Word] = [source.text(node.children[0])]
                words += [source.declared(c) for c in node.named_children]
                self.commands.append((Command(tuple(words), plain=not writes),))
            stack.extend((child, writes) for child in reversed(node.children))

    def _redirections(
        self, node: Any, source: _Source, writes: bool, stdin: str | None = None
    ) -> tuple[bool, str | None]:
        for redirect in node.children_by_field_name("redirect"):
            writes = writes or source.writes(redirect)
            if redirect.type in ("heredoc_redirect", "herestring_redirect"):
                stdin = source.heredoc_text(redirect)
        return writes, stdin

    def _command(
        self, node: Any, source: _Source, writes: bool, stdin: str | None, depth: int
    ) -> None:
        name = node.child_by_field_name("name")
        if name is None:
            return
        writes, stdin = self._redirections(node, source, writes, stdin)
        assigned = any(c.type == "variable_assignment" for c in node.children)
        words = [source.literal(name.named_children[0]) if name.named_children else None]
        words += [source.literal(a) for a in node.children_by_field_name("argument")]
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
            unwrap = WRAPPERS.get(base)
            if unwrap is None:
                break
            current = self.unwrapped(unwrap, current)
            plain = plain and base in PLAIN
        if views:
            self.commands.append(tuple(views))

    def unwrapped(self, unwrap: Wrapper, words: list[Word]) -> list[Word] | None:
        try:
            return unwrap.inner(words)
        except UnreadableError as exc:
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


def _receiver(body: Any) -> Any:
    """The command a redirection of `body` feeds: tree-sitter hangs `a && b <<EOF` on the list."""
    while body is not None and body.type in ("list", "pipeline") and body.named_children:
        body = body.named_children[-1]
    return body if body is not None and body.type == "command" else None


def _show(words: Sequence[Word]) -> str:
    return str(Command(tuple(words), plain=False))[:120]


# --- commands that run command text ------------------------------------------------------------

_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "rbash", "fish"})


def _shell(reader: Reader, words: list[Word], stdin: str | None, depth: int) -> None:
    """`bash -c TEXT` runs TEXT; `bash` with no script runs what it reads from its input."""
    command_mode = stdin_mode = False
    index = 1
    while index < len(words):
        word = words[index]
        if word is None:
            reader.unsure.append(f"a shell argument is not known until run time: {_show(words)}")
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


def _eval(reader: Reader, words: list[Word], stdin: str | None, depth: int) -> None:
    """`eval [--] ARG...` runs its arguments joined by spaces; `eval -x` is an error."""
    args = words[1:]
    if args[:1] == ["--"]:
        args = args[1:]
    elif args and args[0] is not None and len(args[0]) > 1 and args[0].startswith("-"):
        return  # bash: "invalid option", nothing runs
    text = None if None in args else " ".join(w for w in args if w is not None)
    reader.nested(text, depth, words)


def _trap(reader: Reader, words: list[Word], stdin: str | None, depth: int) -> None:
    """`trap [-lp] [--] ACTION SIGNAL...` sets ACTION, command text run later."""
    rest = words[1:]
    first = rest[0] if rest else None
    if first == "--":
        rest = rest[1:]
    elif first is not None and len(first) > 1 and first.startswith("-"):
        return  # -l and -p print; any other option is an error: nothing is set
    if len(rest) < 2 or rest[0] in ("", "-"):
        return  # one word is a signal to reset; "" ignores the signals, "-" resets them
    reader.nested(rest[0], depth, words)


def _su(reader: Reader, words: list[Word], stdin: str | None, depth: int) -> None:
    """`su [options] [-] [USER [ARG...]]` runs a shell, given `-c` text or reading its input."""
    shell = reader.unwrapped(SU, words)
    if shell:
        _shell(reader, shell, stdin, depth)


def _source(reader: Reader, words: list[Word], stdin: str | None, depth: int) -> None:
    """`source FILE` runs a file, a command of its own; `source <(...)` runs unknown text."""
    if len(words) < 2 or words[1] is None:
        reader.unsure.append(f"the file it runs is not known until run time: {_show(words)}")


def _alias(reader: Reader, words: list[Word], stdin: str | None, depth: int) -> None:
    """`alias x='rm -rf /'` defines command text that a later `x` may run."""
    for word in words[1:]:
        if word is None:
            reader.unsure.append(f"an alias is not known until run time: {_show(words)}")
        elif "=" in word:
            reader.read_text(word.split("=", 1)[1], depth + 1)


def _watch(reader: Reader, words: list[Word], stdin: str | None, depth: int) -> None:
    """`watch [options] COMMAND...` runs its words, joined, through `sh -c`."""
    inner = reader.unwrapped(WATCH, words)
    if inner:
        text = None if None in inner else " ".join(w for w in inner if w is not None)
        reader.nested(text, depth, words)


_RUNS_TEXT: dict[str, Callable[[Reader, list[Word], str | None, int], None]] = {
    **dict.fromkeys(_SHELLS, _shell),
    "eval": _eval,
    "trap": _trap,
    "su": _su,
    "source": _source,
    ".": _source,
    "alias": _alias,
    "watch": _watch,
}
"""Commands whose arguments (or input) are command text, read as a script of its own."""
