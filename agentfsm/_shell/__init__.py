"""Shell-aware argument patterns: a pattern is matched against each simple command.

A permission rule such as `deny bash(command~rm -rf *)` does not compare text:
the argument is parsed as a shell script (tree-sitter's bash grammar) and the
pattern is matched against every simple command the script can run, wherever it
stands: after `;`, `&&`, `||`, `|`, `&` or a newline, inside `( )`, `{ }`,
`if`/`for`/`while`, functions, `$( )`, backticks and `<( )`, and inside the
command text given to `eval`, `bash -c`, `sh -c`, `su -c`, `trap` and a heredoc
fed to a shell. `find -exec CMD ;` runs CMD, a command too. A word after a
redirection's target is the command's (`rm >f -rf DIR` is `rm -rf DIR`).

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
(other than `/dev/null`), and never on a script that may set a variable or change the
directory (`Script.sets`): what the shell it runs in exports is not known, so
`PATH=/tmp/x:$PATH; git fetch` is not `git fetch`.

The reader models a closed list of forms (`agentfsm._shell.closed`: node kinds, tokens,
builtins, redirection operators, `set`/`shopt` options; `docs/shell-rules.md` lists them):
anything not on it makes the whole script *unsure*, as does whatever else cannot be read
with confidence: a parse error, a command name not known until run time
(`$(echo rm) -rf /`, `$CMD`), a wrapper option not understood, `eval` or `bash -c` of
text not known until run time, a shell reading commands from a pipe or its input,
nesting deeper than `MAX_DEPTH`, text longer than `MAX_LENGTH` (not parsed), and text
bash evaluates that is known only at run time: arithmetic on a variable the script has
not set to an integer (`x='a[$(rm -rf /)]'; (( x ))` runs `rm`), `${x@P}`, `${!x}`,
`BASH_ENV`.
"""

from __future__ import annotations

import enum
import fnmatch
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from agentfsm._shell.reader import Reader
from agentfsm._shell.script import MAX_DEPTH, MAX_LENGTH, Command, Script
from agentfsm._shell.wrappers import Word, base_name
from agentfsm.exceptions import PolicyError

__all__ = [
    "MAX_DEPTH",
    "MAX_LENGTH",
    "Command",
    "Match",
    "Pattern",
    "Script",
    "Word",
    "from_argv",
    "parse",
    "pattern",
]


class Match(enum.Enum):
    """Whether a command is what a pattern names."""

    NO = "no"
    MAYBE = "maybe"
    YES = "yes"


# --- patterns ----------------------------------------------------------------------------------

_HAS_GLOB = re.compile(r"[*?\[]")

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
        base = base_name(name)
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
        base = base_name(name)
        if not _HAS_GLOB.search(self.name):  # most names are plain words: skip fnmatch
            return base == self.name
        return fnmatch.fnmatchcase(base, self.name)

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
    flags = frozenset(f for w in rest if _is_flag(w) for f in _flag_set(w, base_name(name)))
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


# --- reading a script --------------------------------------------------------------------------


@lru_cache(maxsize=512)
def parse(text: str) -> Script:
    """The simple commands `text` can run when given to a shell, and what could not be read."""
    reader = Reader()  # the first reader loads the grammar
    reader.read_text(text, 0)
    return reader.script()


def from_argv(words: Sequence[object]) -> Script:
    """An argument vector run without a shell (`["rm", "-rf", "/"]`) as a script."""
    reader = Reader()
    if not words or not all(isinstance(w, str) for w in words):
        reader.unsure.append("the argument vector is empty or holds a value that is not a string")
    else:
        reader.simple([w for w in words if isinstance(w, str)], plain=True, stdin=None, depth=0)
    return reader.script()
