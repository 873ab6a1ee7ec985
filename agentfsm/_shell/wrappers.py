"""How wrappers (`sudo`, `env`, `xargs`, ...) are spelled, to find the command they run.

Each wrapper's options are written as the program itself declares them to getopt(3): an
option string (`"+u:i"`: `-u` takes a value, `-i` does not, `e::` takes an attached optional
one) and its long options. The words are read as GNU getopt reads them (clusters, attached
values, `--name=value`, unique abbreviations of long names, `--`), so an option is never
taken for the command, nor the command for an option's value. What the wrapper then does
with its operands (`env`'s assignments, `xargs -I`, `flock FILE -c TEXT`, `sudo -s`) is a
small function of its own. A command run through a shell is given as `sh -c TEXT` (or `sh`
when the shell reads its input), which the reader then reads like any other shell.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

__all__ = [
    "PLAIN",
    "SU",
    "WATCH",
    "WRAPPERS",
    "Getopt",
    "Option",
    "Parsed",
    "UnreadableError",
    "Word",
    "Wrapper",
    "base_name",
]

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
class Option:
    """One option as given: its name (`-u`, or `--name` when it has no short form)."""

    name: str
    value: Word = None
    """The value, None when it is known only at run time or not given."""
    given: bool = False
    """Whether a value was given (`-i{}` against a bare `-i`)."""


@dataclass(frozen=True, slots=True)
class Parsed:
    """A wrapper's words read as getopt reads them."""

    options: tuple[Option, ...]
    operands: tuple[Word, ...]
    """The words after the options (for a permuting program, all its non-options, in order)."""

    def has(self, *names: str) -> bool:
        return any(o.name in names for o in self.options)

    def last(self, *names: str) -> Option | None:
        found = [o for o in self.options if o.name in names]
        return found[-1] if found else None


_NONE, _REQUIRED, _OPTIONAL = 0, 1, 2
_KINDS = {"": _NONE, ":": _REQUIRED, "::": _OPTIONAL}


@dataclass(frozen=True, slots=True)
class Getopt:
    """A program's options, as it declares them to getopt(3) and getopt_long(3)."""

    short: str = ""
    """The option string: a letter, `:` after it for a value, `::` for an attached optional one."""
    long: Mapping[str, str] = field(default_factory=dict)
    """Long name -> its short letter, or `""`, `":"`, `"::"` for a long-only option."""
    permute: bool = False
    """Whether options may follow operands (GNU's default; most wrappers say `+` and stop)."""
    numeric: bool = False
    """Whether `-N` (a number) is an option (`nice -10`)."""
    between: Callable[[str], bool] | None = None
    """Words skipped between options (`sudo A=1 -u root cmd`)."""

    def parse(self, words: list[Word]) -> Parsed:
        """Read `words[1:]`; raise UnreadableError where getopt would fail or cannot be followed."""
        options: list[Option] = []
        operands: list[Word] = []
        index = 1
        while index < len(words):
            word = words[index]
            if word is None:
                raise UnreadableError("an option is not known until run time")
            if word == "--":
                operands += words[index + 1 :]
                break
            if self.numeric and len(word) > 1 and word[0] == "-" and word[1:].isdigit():
                options.append(Option("-n", word[1:], given=True))
                index += 1
            elif len(word) > 1 and word[0] == "-":
                index += self._option(words, index, options)
            elif self.between is not None and self.between(word):
                index += 1
            elif self.permute:
                operands.append(word)
                index += 1
            else:
                operands += words[index:]
                break
        return Parsed(tuple(options), tuple(operands))

    def _option(self, words: list[Word], index: int, options: list[Option]) -> int:
        """Read the option word at `index` into `options`; return how many words it took."""
        word = words[index] or ""
        if word.startswith("--"):
            name, equals, value = word[2:].partition("=")
            full = self._long_name(name)
            spec = self.long[full]
            canonical = f"--{full}" if spec in _KINDS else f"-{spec}"
            kind = _KINDS[spec] if spec in _KINDS else self._kind(spec)
            if equals and kind == _NONE:
                raise UnreadableError(f"option --{full} takes no value")
            if equals or kind != _REQUIRED:
                options.append(Option(canonical, value if equals else None, given=bool(equals)))
                return 1
            return self._value(words, index, canonical, options)
        for position, letter in enumerate(word[1:], start=2):
            kind = self._kind(letter)
            attached = word[position:]
            if kind == _NONE:
                options.append(Option(f"-{letter}"))
            elif attached or kind == _OPTIONAL:
                options.append(Option(f"-{letter}", attached or None, given=bool(attached)))
                return 1
            else:
                return self._value(words, index, f"-{letter}", options)
        return 1

    @staticmethod
    def _value(words: list[Word], index: int, name: str, options: list[Option]) -> int:
        if index + 1 >= len(words):
            raise UnreadableError(f"option {name} wants a value")
        options.append(Option(name, words[index + 1], given=True))
        return 2

    def _kind(self, letter: str) -> int:
        at = self.short.find(letter)
        if letter in ":+-" or at < 0:
            raise UnreadableError(f"option -{letter} is not understood")
        following = self.short[at + 1 : at + 3]
        return _OPTIONAL if following == "::" else _REQUIRED if following[:1] == ":" else _NONE

    def _long_name(self, name: str) -> str:
        """The long option `name` stands for: itself, or the one it uniquely abbreviates."""
        if name in self.long:
            return name
        matches = [full for full in self.long if full.startswith(name)] if name else []
        if len(matches) != 1:
            what = "ambiguous" if matches else "not understood"
            raise UnreadableError(f"option --{name} is {what}")
        return matches[0]


Inner = Callable[[Parsed], list[Word] | None]
"""What a wrapper runs, from its parsed words: the command's words, or None when none."""


def _operands(skip: int = 0) -> Inner:
    """The command is the operands after the first `skip` (`timeout`'s duration)."""

    def inner(parsed: Parsed) -> list[Word] | None:
        rest = list(parsed.operands[skip:])
        return rest or None

    return inner


@dataclass(frozen=True, slots=True)
class Wrapper:
    """A command that runs another command: its options, and what it runs."""

    options: Getopt = field(default_factory=Getopt)
    queries: frozenset[str] = frozenset()
    """Options with which the wrapper runs nothing (`command -v`, `sudo -l`, `--help`)."""
    command: Inner = field(default_factory=_operands)
    """The command it runs, from its parsed words."""
    outputs: frozenset[str] = frozenset()
    """Options whose value is a file the wrapper writes (`time -o FILE`), as `>` would."""

    def inner(self, words: list[Word]) -> list[Word] | None:
        """The command this wrapper runs, or None when it runs none."""
        parsed = self.options.parse(words)
        if any(o.name in self.queries for o in parsed.options):
            return None
        return self.command(parsed)

    def writes(self, words: list[Word]) -> bool:
        """Whether the wrapper writes a file (other than `/dev/null`) named by an option.

        Only asked once `inner` read the words, so the options parse.
        """
        if not self.outputs:
            return False
        return any(
            o.name in self.outputs and o.value != "/dev/null"
            for o in self.options.parse(words).options
        )


_HELP = frozenset({"--help", "--version"})


def _shell_text(words: tuple[Word, ...]) -> Word:
    """The text `sudo -s CMD...`/`sudo -i CMD...` gives the shell's `-c`, read both ways.

    sudo (1.9, `parse_args.c`) puts a backslash before each character that is not a
    letter, a digit, `_`, `-` or `$` and joins the words with spaces, so `$X` still
    expands; its maintainers keep it so. Other implementations (sudo-rs, older ports) may
    join the words as they are: the text holds both readings, one per line, so every
    command either would run is seen.
    """
    if None in words:
        return None
    known = [w for w in words if w is not None]
    escaped = (
        "".join(c if (c.isascii() and c.isalnum()) or c in "_-$" else "\\" + c for c in word)
        for word in known
    )
    return " ".join(escaped) + "\n" + " ".join(known)


def _sudo(parsed: Parsed) -> list[Word] | None:
    """`sudo -s CMD`/`sudo -i CMD` runs CMD through a shell; with no command, a shell."""
    if not parsed.operands:
        return None if parsed.has("-k") else ["sh"]
    if parsed.has("-s", "-i"):
        return ["sh", "-c", _shell_text(parsed.operands)]
    return list(parsed.operands)


def _is_sudo_assignment(word: str) -> bool:
    # sudo takes any word holding `=` and not starting with `/` for VAR=value, even
    # between its options (`is_envar` in sudo's parse_args.c); the name is not checked.
    return "=" in word and not word.startswith("/")


def _env(parsed: Parsed) -> list[Word] | None:
    """GNU env: a lone `-` is `-i`; then every word holding `=` is an assignment."""
    if parsed.has("-S"):
        raise UnreadableError("env -S splits its text by rules of its own")
    rest = list(parsed.operands)
    if rest[:1] == ["-"]:
        rest = rest[1:]
    while rest and rest[0] is not None and "=" in rest[0]:
        rest = rest[1:]
    return rest or None


_ANY: Word = None


def _xargs(parsed: Parsed) -> list[Word] | None:
    """The command gets the input's words: at the end, or in place of `-I`'s string."""
    if not parsed.operands:
        return None  # xargs runs `echo`
    replace: Option | None = None
    for option in parsed.options:
        if option.name in ("-I", "-i"):
            replace = option
        elif option.name in ("-L", "-l"):
            replace = None  # GNU xargs: a later -L ends -I ("mutually exclusive")
    if replace is None:
        return [*parsed.operands, _ANY]
    text = replace.value if replace.given else "{}"
    # GNU xargs replaces inside the arguments only; others may replace in the name too.
    return [None if text is None or w is None or text in w else w for w in parsed.operands]


def _flock(parsed: Parsed) -> list[Word] | None:
    """`flock FILE CMD ...` runs CMD; `flock FILE -c TEXT` runs TEXT through a shell."""
    rest = list(parsed.operands[1:])
    if rest[:1] in (["-c"], ["--command"]):
        return ["sh", "-c", rest[1]] if len(rest) == 2 else None  # else flock refuses
    return rest or None


def _su(parsed: Parsed) -> list[Word] | None:
    """su (and runuser without -u): `[-] [USER [ARG...]]` runs `$SHELL [-c CMD] [ARG...]`."""
    rest = list(parsed.operands)
    if rest[:1] == ["-"]:
        rest = rest[1:]
    command = parsed.last("-c", "--session-command")
    shell: list[Word] = ["sh"] if command is None else ["sh", "-c", command.value]
    return shell + rest[1:]  # the arguments after the user go to the shell


def _runuser(parsed: Parsed) -> list[Word] | None:
    """`runuser -u USER CMD ...` runs CMD; without -u it is su."""
    if not parsed.has("-u"):
        return _su(parsed)
    return list(parsed.operands) or None


def _doas(parsed: Parsed) -> list[Word] | None:
    return ["sh"] if parsed.has("-s") else list(parsed.operands) or None


def _chroot(parsed: Parsed) -> list[Word] | None:
    """`chroot DIR CMD ...` runs CMD; `chroot DIR` alone runs `$SHELL -i`."""
    return list(parsed.operands[1:]) or ["sh", "-i"]


_SU_LONG = {
    "command": "c",
    "session-command": ":",
    "fast": "f",
    "group": "g",
    "supp-group": "G",
    "login": "l",
    "preserve-environment": "p",
    "pty": "P",
    "shell": "s",
    "whitelist-environment": "w",
    "help": "h",
    "version": "V",
}

SU = Wrapper(
    Getopt("c:fg:G:lmpPs:hVw:", _SU_LONG, permute=True),
    queries=frozenset({"-h", "-V"}),
    command=_su,
)
"""`su`: it runs a shell, with `-c` text or reading its input (util-linux su, GNU getopt)."""


WRAPPERS: dict[str, Wrapper] = {
    "sudo": Wrapper(
        # sudo 1.9 (`parse_args.c`); `-h` (help, or a host when a word follows) not followed.
        Getopt(
            "+Aa:BbC:c:D:Eeg:HiKklNnPp:R:r:SsT:t:U:u:Vv",
            {
                "askpass": "A",
                "auth-type": "a",
                "bell": "B",
                "background": "b",
                "close-from": "C",
                "login-class": "c",
                "chdir": "D",
                "preserve-env": "::",
                "edit": "e",
                "group": "g",
                "set-home": "H",
                "help": "",
                "host": ":",
                "login": "i",
                "remove-timestamp": "K",
                "reset-timestamp": "k",
                "list": "l",
                "no-update": "N",
                "non-interactive": "n",
                "preserve-groups": "P",
                "prompt": "p",
                "chroot": "R",
                "role": "r",
                "stdin": "S",
                "shell": "s",
                "type": "t",
                "command-timeout": "T",
                "other-user": "U",
                "user": "u",
                "version": "V",
                "validate": "v",
            },
            between=_is_sudo_assignment,
        ),
        queries=frozenset({"-e", "-l", "-v", "-V", "-K", "--help"}),
        command=_sudo,
    ),
    "doas": Wrapper(Getopt("+a:C:Lnsu:"), queries=frozenset({"-C", "-L"}), command=_doas),
    "env": Wrapper(
        Getopt(
            "+C:iS:u:v0",
            {
                "chdir": "C",
                "ignore-environment": "i",
                "split-string": "S",
                "unset": "u",
                "debug": "v",
                "null": "0",
                "block-signal": "::",
                "default-signal": "::",
                "ignore-signal": "::",
                "list-signal-handling": "",
                "help": "",
                "version": "",
            },
        ),
        queries=_HELP,
        command=_env,
    ),
    "command": Wrapper(Getopt("+pvV"), queries=frozenset({"-v", "-V"})),
    "builtin": Wrapper(),
    "exec": Wrapper(Getopt("+cla:")),
    "nohup": Wrapper(Getopt("+", {"help": "", "version": ""}), queries=_HELP),
    # GNU time 1.9. The bash keyword `time` takes only `-p`; read as GNU time, it is
    # read as running more than bash runs, never less.
    "time": Wrapper(
        Getopt(
            "+af:o:pqvV",
            {
                "append": "a",
                "format": "f",
                "output": "o",
                "portability": "p",
                "quiet": "q",
                "verbose": "v",
                "help": "",
                "version": "V",
            },
        ),
        queries=frozenset({"-V", "--help"}),
        outputs=frozenset({"-o"}),  # `-o FILE` writes FILE: the command is not plain
    ),
    "nice": Wrapper(
        Getopt("+n:", {"adjustment": "n", "help": "", "version": ""}, numeric=True),
        queries=_HELP,
    ),
    "ionice": Wrapper(
        Getopt(
            "+c:n:p:P:tu:hV",
            {
                "class": "c",
                "classdata": "n",
                "pid": "p",
                "pgid": "P",
                "ignore": "t",
                "uid": "u",
                "help": "h",
                "version": "V",
            },
        ),
        queries=frozenset({"-p", "-P", "-u", "-h", "-V"}),  # these change running processes
    ),
    "timeout": Wrapper(
        Getopt(
            "+k:s:v",
            {
                "foreground": "",
                "kill-after": "k",
                "preserve-status": "",
                "signal": "s",
                "verbose": "v",
                "help": "",
                "version": "",
            },
        ),
        queries=_HELP,
        command=_operands(skip=1),
    ),
    "stdbuf": Wrapper(
        Getopt(
            "+i:o:e:",
            {"input": "i", "output": "o", "error": "e", "help": "", "version": ""},
        ),
        queries=_HELP,
    ),
    "setsid": Wrapper(
        Getopt("+cfwhV", {"ctty": "c", "fork": "f", "wait": "w", "help": "h", "version": "V"}),
        queries=frozenset({"-h", "-V"}),
    ),
    "xargs": Wrapper(
        # GNU findutils 4.9: `-e`, `-i`, `-l` take an optional value, attached only.
        Getopt(
            "+0a:E:e::i::I:l::L:n:prs:txP:d:",
            {
                "null": "0",
                "arg-file": "a",
                "delimiter": "d",
                "eof": "e",
                "replace": "i",
                "max-lines": "l",
                "max-args": "n",
                "open-tty": "o",
                "interactive": "p",
                "no-run-if-empty": "r",
                "max-chars": "s",
                "verbose": "t",
                "show-limits": "",
                "exit": "x",
                "max-procs": "P",
                "process-slot-var": ":",
                "help": "",
                "version": "",
            },
        ),
        queries=_HELP,
        command=_xargs,
    ),
    "busybox": Wrapper(),
    "chroot": Wrapper(
        Getopt(
            "+",
            {"userspec": ":", "groups": ":", "skip-chdir": "", "help": "", "version": ""},
        ),
        queries=_HELP,
        command=_chroot,
    ),
    "taskset": Wrapper(
        Getopt(
            "+apchV",
            {"all-tasks": "a", "pid": "p", "cpu-list": "c", "help": "h", "version": "V"},
        ),
        queries=frozenset({"-p", "-h", "-V"}),  # `-p` changes a running process
        command=_operands(skip=1),
    ),
    "flock": Wrapper(
        # util-linux flock: `-c`/`--command` is read only as the word after FILE.
        Getopt(
            "+sexnoFuw:E:hV",
            {
                "shared": "s",
                "exclusive": "x",
                "unlock": "u",
                "nonblocking": "n",
                "nonblock": "n",
                "nb": "n",
                "timeout": "w",
                "wait": "w",
                "conflict-exit-code": "E",
                "close": "o",
                "no-fork": "F",
                "verbose": "",
                "help": "h",
                "version": "V",
            },
        ),
        queries=frozenset({"-h", "-V"}),
        command=_flock,
    ),
    "runuser": Wrapper(
        Getopt("c:fg:G:lmpPs:u:hVw:", {**_SU_LONG, "user": "u"}, permute=True),
        queries=frozenset({"-h", "-V"}),
        command=_runuser,
    ),
    "unbuffer": Wrapper(Getopt("+p")),
    "proxychains": Wrapper(Getopt("+qf:")),
    "proxychains4": Wrapper(Getopt("+qf:")),
    "torsocks": Wrapper(Getopt("+diqa:P:u:p:")),
    "coproc": Wrapper(),
}
"""Commands that run the command after their options, and how their options are spelled."""

WATCH = Wrapper(
    Getopt(
        "+bcd::eghn:pq:rtvwx",
        {
            "beep": "b",
            "color": "c",
            "differences": "d",
            "errexit": "e",
            "chgexit": "g",
            "interval": "n",
            "precise": "p",
            "equexit": "q",
            "no-rerun": "r",
            "no-title": "t",
            "no-wrap": "w",
            "exec": "x",
            "help": "h",
            "version": "v",
        },
    ),
    queries=frozenset({"-h", "-v"}),
)
"""`watch`: its command's words are joined and run by `sh -c`."""

PLAIN = frozenset(
    {"command", "builtin", "exec", "nohup", "time", "nice", "ionice", "timeout", "stdbuf", "setsid"}
)
"""Wrappers that run the command as it is, for the same user and with the same environment."""
