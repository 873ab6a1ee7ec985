"""Text that bash expands or evaluates where the grammar sees only data (see `shell`).

Plain functions on strings, apart from the reader: the command text inside backquotes,
the reserved words tree-sitter-bash misreads as a command name, a backslash-newline that
joins a word, and the names an arithmetic expression reads.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = [
    "INTEGER_SPECIALS",
    "Variables",
    "arithmetic_names",
    "backquoted",
    "is_integer",
    "joins_word",
    "runs_substitution",
]

_BACKQUOTE_ESCAPES = "$`\\"


def backquoted(text: str, *, in_string: bool = False) -> list[str] | None:
    """The command texts of the backquote substitutions in `text`; None when one is not closed.

    Inside backquotes a backslash before `$`, a backquote or a backslash (and `"` inside a
    double-quoted string) is removed before the text runs: `` `echo \\`rm\\`` `` runs
    `` echo `rm` ``. A backslash outside backquotes escapes the next character.
    """
    escapes = _BACKQUOTE_ESCAPES + ('"' if in_string else "")
    found: list[str] = []
    index, size = 0, len(text)
    while index < size:
        char = text[index]
        if char == "\\":
            index += 2
            continue
        index += 1
        if char != "`":
            continue
        body: list[str] = []
        while index < size and text[index] != "`":
            if text[index] == "\\" and index + 1 < size and text[index + 1] in escapes:
                index += 1
            body.append(text[index])
            index += 1
        if index >= size:
            return None
        found.append("".join(body))
        index += 1
    return found


_SUBSTITUTION = re.compile(r"(?<!\\)(?:\\\\)*\$\((\()?")


def runs_substitution(text: str) -> bool:
    """Whether `text` holds an unescaped `$(` or backquote: a substitution bash runs.

    `$((` counts too unless bash reads it as arithmetic (`_closes_as_arithmetic`); otherwise
    bash runs it as a command substitution of a subshell (`$((\nrm\n)\ngit)` runs rm, then
    git; so does `$((echo a); (rm))`).
    """
    if "`" in text.replace("\\`", ""):
        return True
    for match in _SUBSTITUTION.finditer(text):
        if match.group(1) is None or not _closes_as_arithmetic(text, match.end()):
            return True
    return False


def _closes_as_arithmetic(text: str, start: int) -> bool:
    """Whether bash reads the `$((` ending at `start` as arithmetic: the parenthesis that
    closes the inner `(` is followed at once by the one that closes `$(` (`$((1+2))`, not
    `$((echo a); (rm))`, which bash runs as a command substitution)."""
    depth = 2
    for at in range(start, len(text)):
        char = text[at]
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 1:
                return text[at + 1 : at + 2] == ")"
    return False  # never closed: not read as arithmetic here


_CONTINUATION = re.compile(rb"(?<!\\)(?:\\\\)*\\\n")
_NOT_WORD = frozenset(b" \t\n;&|()<>")


def joins_word(data: bytes) -> list[int]:
    """Byte offsets of each backslash-newline with a word character on both sides.

    Bash removes a backslash-newline before it splits words (outside single quotes,
    comments and quoted heredocs), so `r\\<newline>m` is `rm`; the grammar splits it.
    """
    found = []
    for match in _CONTINUATION.finditer(data):
        at = match.end() - 2
        before = data[at - 1] if at > 0 else 32
        after = data[at + 2] if at + 2 < len(data) else 32
        if before not in _NOT_WORD and after not in _NOT_WORD:
            found.append(at)
    return found


_NAME = re.compile(r"(?<![0-9A-Za-z_#@.])[A-Za-z_][A-Za-z0-9_]*")
_POSITIONAL = re.compile(r"\$\{?[0-9@*]")
_ASSIGNED = re.compile(r"\s*=(?!=)")

INTEGER_SPECIALS = frozenset(
    {"RANDOM", "SRANDOM", "SECONDS", "LINENO", "BASHPID", "PPID", "UID", "EUID", "EPOCHSECONDS"}
)
"""Variables bash keeps as integers whatever is assigned to them."""


def arithmetic_names(text: str) -> tuple[list[str], list[str], bool]:
    """The variables an arithmetic expression reads, those it assigns with `=`, and whether
    it reads a positional parameter (`$1`, `$@`), whose value is never known here.

    A name read in arithmetic is evaluated as an expression in turn, so its value
    matters; `${#x}` (a length) and the digits of `16#ff` or `0x1f` are not names.
    """
    reads: list[str] = []
    assigns: list[str] = []
    for match in _NAME.finditer(text):
        name = match.group()
        if _ASSIGNED.match(text, match.end()):
            assigns.append(name)
        else:
            reads.append(name)
    return reads, assigns, _POSITIONAL.search(text) is not None


_INTEGER = re.compile(r"-?[0-9]+")


def is_integer(text: str) -> bool:
    """Whether `text` is a decimal integer, a value arithmetic cannot run code from."""
    return _INTEGER.fullmatch(text) is not None


@dataclass(slots=True)
class Variables:
    """Which variables the script has set to integers, and the names its arithmetic reads.

    Bash evaluates the value of a variable read in arithmetic as an expression, and an
    array subscript in it expands `$(...)`: `x='a[$(rm -rf /)]'; (( x ))` runs `rm`. A
    name is known when the script set it to an integer before reading it, and never to
    anything else; every other read is unsure.
    """

    known: set[str] = field(default_factory=set)
    tainted: set[str] = field(default_factory=set)
    integer_typed: set[str] = field(default_factory=set)
    """Names declared with `-i`: what is assigned to them is evaluated as arithmetic."""
    reads: list[tuple[str, bool]] = field(default_factory=list)

    def assign(self, name: str, *, integer: bool) -> None:
        """Record that the script sets `name`, to an integer or to anything else."""
        if integer:
            self.known.add(name)
        else:
            self.tainted.add(name)
            self.known.discard(name)

    def evaluate(self, text: str) -> str | None:
        """Record the names arithmetic `text` reads and sets; why it is unsure, or None."""
        if runs_substitution(text):
            return f"arithmetic evaluates text a command writes or quoted text: {text[:120]}"
        reads, assigns, positional = arithmetic_names(text)
        if positional:
            return f"arithmetic reads a positional parameter, not known here: {text[:120]}"
        self.reads += [(name, name in self.known or name in INTEGER_SPECIALS) for name in reads]
        self.known.update(assigns)  # arithmetic stores integers
        return None

    def unknown(self) -> list[str]:
        """The names arithmetic read without knowing them to hold integers."""
        return list(dict.fromkeys(n for n, ok in self.reads if not ok or n in self.tainted))
