"""Loops by intent: calls compared by what they ask for, and the escalation ladder.

Real agents loop with paraphrases: the same search with its words reordered, the same
command with other whitespace or quoting, the same file read again. A detector that
compares raw arguments misses them; one that stops every repeat stops healthy runs and is
switched off. So a policy's `loops` ladder compares calls by their *intent key*
(`intent_key`) and escalates per tool: a warning the model sees, then a human ask, then a
stop that says how to continue. A repeat whose result changed is progress: the count
starts again (`agentfsm.states.execute`).

The intent key of a call is its tool name and its arguments normalized:
- keys in any order, numbers by value (`1`, `1.0` and `1e0` are one number; `true` is not 1);
- text with its ends stripped and runs of spaces collapsed (text of several lines keeps its
  line breaks and indentation, only trailing spaces go: code written twice with another
  indentation is another call);
- arguments named in `words` (a search query) as the set of their lowercased words;
- arguments named in `shell` (a command) as the shell reader's reading: the simple commands
  the script runs, then its words and operators as a shell splits them (`ls  -la`,
  `ls '-la'` and `ls "-la"` are one command; `echo a > x` and `echo a > y` are two); a
  script the reader cannot read with confidence is compared as text;
- arguments named `volatile` for the tool (or for every tool) left out, at any depth.
"""

from __future__ import annotations

import itertools
import json
import math
import shlex
from collections.abc import Callable, Hashable, Iterable, Mapping
from functools import lru_cache
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from agentfsm._model.call_identity import describe, signature
from agentfsm._model.types import ToolCall
from agentfsm.exceptions import AgentFSMError

__all__ = ["RUNGS", "LoopLadder", "Rung", "ToolLoops", "intent_key", "key_of", "warning"]

Rung = Literal["warn", "ask", "stop"]
RUNGS: tuple[Rung, ...] = ("stop", "ask", "warn")
"""The rungs from the strongest: the first a streak reaches is the one that fires."""

_WORDS = ("query", "q", "search", "search_query", "keywords")
_SHELL = ("command", "cmd")
_Names = tuple[str, ...]


def _names(value: Any) -> Any:
    return (value,) if isinstance(value, str) else value


class ToolLoops(BaseModel):
    """One tool's rungs and argument kinds; a rung left out is the ladder's, 0 turns it off."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    warn: int | None = Field(None, ge=0)
    """Calls of one intent in a row at which the model is warned (and every one after)."""
    ask: int | None = Field(None, ge=0)
    """Calls of one intent in a row at which a human is asked whether it may run."""
    stop: int | None = Field(None, ge=0)
    """Calls of one intent in a row at which the run stops (DOOM_LOOP)."""
    volatile: _Names = ()
    """Arguments left out when this tool's calls are compared (beside the ladder's)."""
    words: _Names | None = None
    """Arguments compared as sets of words (None: the ladder's)."""
    shell: _Names | None = None
    """Arguments read as shell commands (None: the ladder's)."""

    _names = field_validator("volatile", "words", "shell", mode="before")(_names)


class LoopLadder(BaseModel):
    """Escalate repeats of one intent: warn the model, then ask a human, then stop.

    `LoopLadder()` warns at the 3rd call of one intent in a row, asks at the 4th and stops
    at the 5th: on the 257 recorded runs of the corpus no healthy run reaches the 3rd, and
    ToolBench's five-in-a-row streaks stop. A rung of 0 is off. `tools` gives a tool its own
    rungs and arguments; `volatile` names arguments that never tell two calls apart.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    warn: int = Field(3, ge=0)
    """Calls of one intent in a row at which the model is warned (and every one after); 0: never."""
    ask: int = Field(4, ge=0)
    """Calls of one intent in a row at which a human is asked whether it may run; 0: never."""
    stop: int = Field(5, ge=0)
    """Calls of one intent in a row at which the run stops with DOOM_LOOP; 0: never."""
    volatile: _Names = ()
    """Arguments of every tool left out when calls are compared (a request id, a timestamp)."""
    words: _Names = _WORDS
    """Arguments compared as sets of lowercased words (a search query with reordered words)."""
    shell: _Names = _SHELL
    """Arguments read as shell commands."""
    tools: dict[str, ToolLoops] = Field(default_factory=dict)
    """Per-tool rungs and arguments, by exact tool name."""

    _names = field_validator("volatile", "words", "shell", mode="before")(_names)

    @model_validator(mode="after")
    def _ordered(self) -> LoopLadder:
        for name in ("", *self.tools):
            rungs = [(r, self.threshold(name, r)) for r in ("warn", "ask", "stop")]
            for rung, n in rungs:
                if n == 1:
                    raise ValueError(
                        f"{_where(name)}{rung} = 1 would fire on every first call; "
                        "a rung counts calls of one intent in a row: 2 or more, or 0 (off)"
                    )
            on = [(r, n) for r, n in rungs if n]
            for (low, a), (high, b) in itertools.pairwise(on):
                if a >= b:
                    raise ValueError(
                        f"{_where(name)}{low} = {a} must come before {high} = {b}: "
                        "the rungs escalate (warn < ask < stop)"
                    )
        return self

    def __hash__(self) -> int:  # the policy's route cache keys on it; `tools` is a dict
        return hash(self.model_dump_json())

    def threshold(self, tool: str, rung: Rung) -> int:
        """The count of calls in a row at which `rung` fires for `tool` (0: never)."""
        own = self.tools.get(tool)
        value = None if own is None else getattr(own, rung)
        return int(getattr(self, rung) if value is None else value)

    def rung(self, tools: Iterable[str], streak: int) -> Rung | None:
        """The strongest rung a round of calls of `tools` reaches at `streak` calls in a row."""
        names = tuple(tools)
        for rung in RUNGS:
            for name in names:
                n = self.threshold(name, rung)
                if n and streak >= n:
                    return rung
        return None

    def key(self, call: ToolCall) -> Hashable:
        """The call's intent key under this ladder's argument kinds."""
        own = self.tools.get(call.name)
        volatile = frozenset(self.volatile) | frozenset(own.volatile if own else ())
        words = own.words if own is not None and own.words is not None else self.words
        shell = own.shell if own is not None and own.shell is not None else self.shell
        return intent_key(call, volatile=volatile, words=frozenset(words), shell=frozenset(shell))


def _where(name: str) -> str:
    return f"tools[{name!r}]: " if name else ""


def intent_key(
    call: ToolCall,
    *,
    volatile: frozenset[str] = frozenset(),
    words: frozenset[str] = frozenset(_WORDS),
    shell: frozenset[str] = frozenset(_SHELL),
) -> Hashable:
    """The call as a key equal for calls of one intent (see the module's docstring)."""
    args = call.arguments or {}
    kept = _normal(args, volatile, words, shell)
    return (call.name, json.dumps(kept, sort_keys=True, separators=(",", ":"), default=repr))


def _normal(
    value: Any, volatile: frozenset[str], words: frozenset[str], shell: frozenset[str]
) -> Any:
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            name = str(key)
            if name in volatile:
                continue
            if isinstance(item, str) and name in shell:
                out[name] = ["$", _read_command(item)]
            elif isinstance(item, str) and name in words:
                out[name] = ["words", *sorted(set(item.lower().split()))]
            else:
                out[name] = _normal(item, volatile, words, shell)
        return out
    if isinstance(value, list | tuple):
        return [_normal(item, volatile, words, shell) for item in value]
    if isinstance(value, str):
        return _text(value)
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int | float):
        return _number(value)
    return value


def _number(value: float) -> Any:
    """A number by value: an integral float is its int; NaN and the infinities as text."""
    if isinstance(value, float):
        if not math.isfinite(value):
            return repr(value)
        if value.is_integer() and abs(value) < 2**63:
            return int(value)
    return value


def _text(value: str) -> str:
    if "\n" not in value:
        return " ".join(value.split())
    return "\n".join(line.rstrip() for line in value.strip("\n").split("\n")).strip()


@lru_cache(maxsize=1024)
def _read_command(text: str) -> str:
    """`_command` as canonical JSON, kept for the calls that repeat (the ones that matter here):
    reading a script costs a parse (~0.1-0.3 ms), shared with the shell permission rules."""
    return json.dumps(_command(text), separators=(",", ":"))


def _command(text: str) -> list[Any]:
    """A shell script by the shell reader's reading: the simple commands it runs, then its
    words and operators as a shell splits them (quotes taken off, so `'-la'` is `-la`), which
    keep what the commands' words leave out (a redirection's target, a leading `NAME=value`).
    The text itself when the reader is unsure (a name known only at run time could be any
    command): two scripts are never merged on a guess."""
    # Imported here: a policy without a ladder over shell arguments never loads the reader
    # (nor tree-sitter), as a policy with only glob rules never does.
    from agentfsm._shell import parse as read_shell

    try:
        script = read_shell(text)
        if script.unsure or not script.commands:
            return ["text", _text(text)]
        lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        tokens = list(lexer)
    except (AgentFSMError, RecursionError, ValueError):
        return ["text", _text(text)]
    return [[str(views[0]) for views in script.commands], tokens]


def key_of(policy: Any) -> Callable[[ToolCall], Hashable]:
    """How a run under `policy` keys its calls: by intent with a loop ladder, else exactly."""
    ladder = getattr(policy, "loops", None)
    return signature if ladder is None else ladder.key


def warning(ladder: LoopLadder, calls: Iterable[ToolCall], streak: int) -> str:
    """The warning the model reads at the warn rung: what repeats and what comes next."""
    names = [call.name for call in calls]
    nxt = [
        f"at {n} in a row {'a human is asked' if rung == 'ask' else 'the run stops'}"
        for rung in ("ask", "stop")
        if (n := min((t for name in names if (t := ladder.threshold(name, rung))), default=0))
    ]
    then = f" ({'; '.join(nxt)})" if nxt else ""
    return (
        f"loop warning: {describe(calls)} is call {streak} of the same intent in a row, and the "
        f"last one gave the same result; repeating it will not change anything{then}. "
        "Try something else, or say what you are waiting for."
    )
