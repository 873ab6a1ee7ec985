"""What reading a shell script gives: the views of its simple commands (see `shell`).

Apart from `shell` so that the reader (`_shell_reader`) and the patterns (`shell`) both build
on it without importing each other.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from agentfsm._shell.wrappers import Word

__all__ = ["MAX_DEPTH", "MAX_LENGTH", "Command", "Script"]

MAX_DEPTH = 8
"""Command text inside command text (`bash -c "eval '...'"`, backquotes in backquotes) is read
this many levels deep."""

MAX_LENGTH = 64 * 1024
"""Command text longer than this many bytes (UTF-8) is not parsed: the grammar's time grows
with the square of the length for some shapes (a long pipeline of `a=1 ls`)."""


@dataclass(frozen=True, slots=True)
class Command:
    """One view of a simple command: its words, the first being the command's name."""

    words: tuple[Word, ...]
    plain: bool
    """Whether allow patterns look at this view (see `shell`'s docstring)."""

    def __str__(self) -> str:
        return " ".join("<unknown>" if w is None else _quoted(w) for w in self.words)


@dataclass(frozen=True, slots=True)
class Script:
    """The simple commands a shell script can run, each as its views, and what could not be read."""

    commands: tuple[tuple[Command, ...], ...] = ()
    unsure: tuple[str, ...] = ()
    """Why parts of the script could not be read with confidence; empty when all could."""
    sets: tuple[str, ...] = ()
    """The variables the script may set (assigned, looped over, read into, set by arithmetic
    or `${X:=v}`), in order. Which of them the environment the script runs in exports is
    not known here (`PATH=/tmp/x; git fetch` runs `/tmp/x/git`; an exported `GIT_SSH_COMMAND`
    makes `git fetch` run it), so allow patterns never cover a script that sets any."""


def _quoted(word: str) -> str:
    return shlex.quote(word) if word else "''"
