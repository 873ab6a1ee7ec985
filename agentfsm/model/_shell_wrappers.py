"""How wrappers (`sudo`, `env`, `xargs`, ...) are spelled, to find the command they run."""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["PLAIN", "WATCH", "WRAPPERS", "UnreadableError", "Word", "Wrapper", "base_name"]

Word = str | None
"""A word of a command, or None when its value is known only at run time."""


def base_name(name: str) -> str:
    """The last path part of a command name: `/bin/rm` is `rm`."""
    if "/" not in name:
        return name
    return name.rstrip("/").rsplit("/", 1)[-1] or name


class UnreadableError(Exception):
    """A wrapper's options cannot be followed to the command it runs."""


@dataclass(frozen=True, slots=True)
class Wrapper:
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
            raise UnreadableError("an option is not known until run time")
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
                raise UnreadableError(f"option -{letter} is not understood")
        return 1

    def _long(self, word: str) -> int:
        name = word.split("=", 1)[0]
        if name in self.long_valued:
            return 1 if "=" in word else 2
        if name in self.long_flags:
            return 1
        raise UnreadableError(f"option {name} is not understood")


def _asks_only(word: Word, letters: str) -> bool:
    return (
        word is not None
        and word.startswith("-")
        and not word.startswith("--")
        and any(letter in letters for letter in word[1:])
    )


def _is_assignment(word: Word) -> bool:
    return word is not None and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", word) is not None


WRAPPERS: dict[str, Wrapper] = {
    "sudo": Wrapper(
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
    "doas": Wrapper(flags="nsL", valued="uC"),
    # `env -S TEXT` splits TEXT into words by rules of its own: not followed, so unsure.
    "env": Wrapper(
        flags="i0v",
        valued="uC",
        long_flags=frozenset({"--ignore-environment", "--null", "--debug"}),
        long_valued=frozenset({"--unset", "--chdir"}),
        assignments=True,
    ),
    "command": Wrapper(flags="pvV", queries="vV"),
    "builtin": Wrapper(),
    "exec": Wrapper(flags="cl", valued="a"),
    "nohup": Wrapper(),
    "time": Wrapper(flags="pv", valued="fo", long_valued=frozenset({"--format", "--output"})),
    "nice": Wrapper(valued="n", long_valued=frozenset({"--adjustment"}), numeric=True),
    "ionice": Wrapper(flags="t", valued="cnp", long_valued=frozenset({"--class", "--classdata"})),
    "timeout": Wrapper(
        flags="v",
        valued="ks",
        long_flags=frozenset({"--foreground", "--preserve-status", "--verbose"}),
        long_valued=frozenset({"--kill-after", "--signal"}),
        positional=1,
    ),
    "stdbuf": Wrapper(valued="ioe", long_valued=frozenset({"--input", "--output", "--error"})),
    "setsid": Wrapper(flags="cfw", long_flags=frozenset({"--ctty", "--fork", "--wait"})),
    "xargs": Wrapper(
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
    "busybox": Wrapper(),
    "chroot": Wrapper(
        long_flags=frozenset({"--skip-chdir"}),
        long_valued=frozenset({"--userspec", "--groups"}),
        positional=1,
    ),
}
"""Commands that run the command after their options, and how their options are spelled."""

WRAPPERS.update(
    {
        "taskset": Wrapper(
            flags="ac", long_flags=frozenset({"--all-tasks", "--cpu-list"}), positional=1
        ),
        "flock": Wrapper(
            flags="sxnuFoe",
            valued="wE",
            long_flags=frozenset(
                {"--shared", "--exclusive", "--nonblock", "--unlock", "--no-fork", "--close"}
            ),
            long_valued=frozenset({"--timeout", "--conflict-exit-code"}),
            positional=1,
        ),
        "runuser": Wrapper(flags="lmp", valued="ugG", long_valued=frozenset({"--user", "--group"})),
        "unbuffer": Wrapper(flags="p"),
        "proxychains": Wrapper(flags="q", valued="f"),
        "proxychains4": Wrapper(flags="q", valued="f"),
        "torsocks": Wrapper(flags="diq", valued="aPup"),
        "coproc": Wrapper(),
    }
)

WATCH = Wrapper(
    flags="bcdegptrwx",
    valued="nq",
    long_flags=frozenset(
        {
            "--beep",
            "--color",
            "--differences",
            "--errexit",
            "--chgexit",
            "--precise",
            "--no-title",
            "--no-rerun",
            "--no-wrap",
            "--exec",
        }
    ),
    long_valued=frozenset({"--interval", "--equexit"}),
)

PLAIN = frozenset(
    {"command", "builtin", "exec", "nohup", "time", "nice", "ionice", "timeout", "stdbuf", "setsid"}
)
"""Wrappers that run the command as it is, for the same user and with the same environment."""
