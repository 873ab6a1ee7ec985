"""Shared hypothesis strategies: finish reasons, tool calls, model turns, snapshots, guards.

Import them as `from tests.strategies import model_turns, snapshots, ...`. Every
strategy draws values the library must cope with, not only the tidy ones: raw
finish reasons include `""`, `None` and random text; tool calls may be broken;
usage numbers may be absent, zero or large.
"""

from __future__ import annotations

import string
from collections.abc import Iterator, Mapping
from typing import Any

from hypothesis import strategies as st

from agentfsm import FinishReason, ModelTurn, RunSnapshot, ToolCall, ToolResult, Usage
from agentfsm.guards import (
    REGISTRY,
    ContextLimit,
    CostBudget,
    Deadline,
    Guard,
    LoopRung,
    MaxToolCalls,
    MaxTurns,
    NoProgress,
    Otherwise,
    RepeatedCall,
    RetriesExhausted,
    TokenBudget,
    ToolErrorLimit,
)

__all__ = [
    "PROVIDER_FINISH_REASONS",
    "arguments",
    "finish_reasons",
    "guards",
    "hostile_values",
    "leaf_guards",
    "map_finish_reason",
    "model_turns",
    "odd_values",
    "one_argument_tool",
    "snapshots",
    "tool_calls",
    "tool_results",
    "usages",
]

PROVIDER_FINISH_REASONS: dict[str, FinishReason] = {
    # OpenAI chat completions and compatible servers (Ollama's done_reason too)
    "stop": FinishReason.STOP,
    "tool_calls": FinishReason.TOOL_CALLS,
    "function_call": FinishReason.TOOL_CALLS,
    "length": FinishReason.LENGTH,
    "content_filter": FinishReason.CONTENT_FILTER,
    # Anthropic
    "end_turn": FinishReason.STOP,
    "stop_sequence": FinishReason.STOP,
    "tool_use": FinishReason.TOOL_CALLS,
    "max_tokens": FinishReason.LENGTH,
    "pause_turn": FinishReason.PAUSE,
    "refusal": FinishReason.REFUSAL,
    # Gemini
    "STOP": FinishReason.STOP,
    "MAX_TOKENS": FinishReason.LENGTH,
    "SAFETY": FinishReason.CONTENT_FILTER,
    "MALFORMED_FUNCTION_CALL": FinishReason.ERROR,
    "UNEXPECTED_TOOL_CALL": FinishReason.ERROR,
    # Bedrock
    "guardrail_intervened": FinishReason.CONTENT_FILTER,
    "unknown": FinishReason.UNKNOWN,
    "error": FinishReason.ERROR,
}
"""Raw finish reasons providers send, with the mapped reason DESIGN.md gives them."""


def one_argument_tool(name: str, description: str, argument: str, **schema: Any) -> dict[str, Any]:
    """An OpenAI-style function spec whose one required argument is a string; `schema` adds
    keys to its parameters' schema (`additionalProperties=False`)."""
    properties = {argument: {"type": "string"}}
    parameters = {"type": "object", "properties": properties, "required": [argument], **schema}
    return {"name": name, "description": description, "parameters": parameters}


TOOL_NAMES = ("search", "get_weather", "write_file", "handoff_to_billing")
"""A small set of names, so that repeated and identical calls are drawn often."""


def map_finish_reason(raw: FinishReason | str | None) -> FinishReason:
    """The mapped reason for a drawn finish reason: unknown text, `""` and None are UNKNOWN."""
    if isinstance(raw, FinishReason):
        return raw
    if raw is None:
        return FinishReason.UNKNOWN
    return PROVIDER_FINISH_REASONS.get(raw, FinishReason.UNKNOWN)


def finish_reasons() -> st.SearchStrategy[FinishReason | str | None]:
    """A mapped FinishReason, a provider's raw string, `""`, None, or random text."""
    return st.one_of(
        st.sampled_from(list(FinishReason)),
        st.sampled_from(sorted(PROVIDER_FINISH_REASONS)),
        st.just(""),
        st.none(),
        st.text(max_size=16),
    )


_JSON_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-1_000, 1_000),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
)
_JSON = st.recursive(
    _JSON_LEAVES,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)


_ODD_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True),
    st.text(max_size=12),
    st.binary(max_size=8),
    st.sampled_from([object(), int, (), frozenset({1}), {"choices": 1}, [{}], 1j]),
)


def odd_values() -> st.SearchStrategy[Any]:
    """Any value a caller might pass by mistake: every JSON kind, bytes, NaN, classes,
    plain objects, nested in lists and dicts."""
    return st.recursive(
        _ODD_LEAVES,
        lambda inner: (
            st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
        ),
        max_leaves=8,
    )


class Raising:
    """A value whose every protocol but repr raises: str, ==, hash, bool, len, iteration.

    Code that looks at an argument before checking its type calls one of these."""

    def __str__(self) -> str:
        raise RuntimeError("__str__ raised")

    def __repr__(self) -> str:  # hypothesis prints the failing example with it
        return "Raising()"

    def __eq__(self, other: object) -> bool:
        raise RuntimeError("__eq__ raised")

    def __hash__(self) -> int:
        raise RuntimeError("__hash__ raised")

    def __bool__(self) -> bool:
        raise RuntimeError("__bool__ raised")

    def __len__(self) -> int:
        raise RuntimeError("__len__ raised")

    def __iter__(self) -> Any:
        raise RuntimeError("__iter__ raised")


class RaisingMapping(Mapping[str, Any]):
    """A Mapping (it passes isinstance checks) whose reading raises."""

    def __getitem__(self, key: str) -> Any:
        raise RuntimeError("__getitem__ raised")

    def __iter__(self) -> Iterator[str]:
        raise RuntimeError("__iter__ raised")

    def __len__(self) -> int:
        raise RuntimeError("__len__ raised")

    def __repr__(self) -> str:
        return "RaisingMapping()"


_HOSTILE_LEAVES = st.one_of(
    _ODD_LEAVES,
    st.sampled_from(
        [
            float("inf"),
            float("-inf"),
            -1,
            10**100,
            -(10**100),
            "",
            "x" * 100_000,
            "\ud800",
            "a\x00b",
            b"\xff\xfe",
            {1: "a"},
            {None: None},
            {("t",): 1},
            {b"k": "v"},
        ]
    ),
    st.text(alphabet=st.characters(categories=["Cs"]), min_size=1, max_size=3),
    st.builds(Raising),
    st.builds(RaisingMapping),
)


def hostile_values() -> st.SearchStrategy[Any]:
    """`odd_values` plus what breaks code that reads before it checks: infinities, huge ints
    and strings, lone surrogates, NUL, mappings with non-str keys, and objects whose
    str/==/hash/bool/len/iteration raise (`Raising`, `RaisingMapping`)."""
    return st.recursive(
        _HOSTILE_LEAVES,
        lambda inner: (
            st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
        ),
        max_leaves=6,
    )


def arguments() -> st.SearchStrategy[dict[str, Any]]:
    """A JSON object of tool arguments, small keys so that identical calls recur."""
    return st.dictionaries(st.sampled_from(["q", "city", "path", "n"]), _JSON, max_size=3)


def _ids() -> st.SearchStrategy[str]:
    return st.one_of(
        st.just(""), st.sampled_from(["call_1", "call_2", "toolu_01"]), st.uuids().map(str)
    )


@st.composite
def tool_calls(
    draw: st.DrawFn,
    *,
    names: st.SearchStrategy[str] | None = None,
    broken: bool = True,
) -> ToolCall:
    """A ToolCall; with `broken`, sometimes one whose arguments are cut or not JSON.

    A broken call keeps its `raw_arguments`, has `arguments=None` and an `error`,
    as a normalizer leaves it. Ids may be empty (Ollama, Gemini).
    """
    name = draw(
        names
        if names is not None
        else st.sampled_from(TOOL_NAMES) | st.text(min_size=1, max_size=12)
    )
    call_id = draw(_ids())
    if broken and draw(st.integers(0, 4)) == 0:
        raw = draw(st.sampled_from(['{"q": "wea', "not json", "[1, 2]", '"text"', ""]))
        return ToolCall(
            id=call_id, name=name, arguments=None, raw_arguments=raw, error="invalid JSON arguments"
        )
    return ToolCall(id=call_id, name=name, arguments=draw(arguments()))


def usages() -> st.SearchStrategy[Usage | None]:
    """No usage, or token counts from zero to large, with or without a cost."""
    return st.none() | st.builds(
        Usage,
        input_tokens=st.integers(0, 2_000_000),
        output_tokens=st.integers(0, 200_000),
        cost=st.none() | st.floats(0, 100, allow_nan=False),
    )


@st.composite
def model_turns(
    draw: st.DrawFn,
    *,
    finish: st.SearchStrategy[FinishReason | str | None] | None = None,
    calls: st.SearchStrategy[ToolCall] | None = None,
    max_calls: int = 3,
) -> ModelTurn:
    """A ModelTurn with any finish reason, tool calls (maybe broken), text and usage.

    `finish_reason` is the drawn reason mapped as DESIGN.md says (unrecognised,
    `""` and None are UNKNOWN) and `raw_finish_reason` keeps the drawn string,
    so every combination of claim and structure is reachable.
    """
    raw = draw(finish if finish is not None else finish_reasons())
    listed = draw(st.lists(calls if calls is not None else tool_calls(), max_size=max_calls))
    return ModelTurn(
        text=draw(st.just("") | st.text(max_size=40)),
        tool_calls=listed,
        finish_reason=map_finish_reason(raw),
        raw_finish_reason=raw.value if isinstance(raw, FinishReason) else raw,
        truncated=draw(st.booleans()),
        usage=draw(usages()),
        refusal=draw(st.none() | st.text(min_size=1, max_size=20)),
        error=draw(st.none() | st.text(min_size=1, max_size=20)),
    )


@st.composite
def tool_results(draw: st.DrawFn, *, call_ids: st.SearchStrategy[str] | None = None) -> ToolResult:
    """A ToolResult, an error one about a third of the time."""
    return ToolResult(
        call_id=draw(call_ids if call_ids is not None else _ids()),
        content=draw(st.text(max_size=100) | _JSON),
        is_error=draw(st.integers(0, 2)) == 0,
    )


_COUNT = st.integers(0, 12)


@st.composite
def snapshots(draw: st.DrawFn) -> RunSnapshot:
    """A RunSnapshot of any phase with any counters, calls and results."""
    complete = tool_calls(broken=False)
    fields: dict[str, Any] = {
        "phase": draw(st.sampled_from(["model_output", "tool_results", "human_reply"])),
        "turn": draw(st.integers(0, 120)),
        "output": draw(st.none() | model_turns()),
        "executable": tuple(draw(st.lists(complete, max_size=3))),
        "rejected": tuple(draw(st.lists(tool_results(), max_size=2))),
        "denied": tuple(draw(st.lists(complete, max_size=2))),
        "needs_approval": tuple(draw(st.lists(complete, max_size=2))),
        "handoffs": tuple(draw(st.lists(complete, max_size=1))),
        "repeat_streak": draw(_COUNT),
        "repeated": draw(st.sampled_from(["", 'search({"q": "x"})'])),
        "results": tuple(draw(st.lists(tool_results(), max_size=4))),
        "tool_errors_in_a_row": draw(_COUNT),
        "same_results_in_a_row": draw(_COUNT),
        "incomplete_in_a_row": draw(_COUNT),
        "retries_in_a_row": draw(_COUNT),
        "tool_calls_used": draw(st.integers(0, 500)),
        "tokens_used": draw(st.integers(0, 2_000_000)),
        "cost_used": draw(st.floats(0, 100, allow_nan=False)),
        "context_tokens": draw(st.integers(0, 1_000_000)),
        "elapsed": draw(st.floats(0, 10_000, allow_nan=False)),
        "human_approved": draw(st.none() | st.booleans()),
        "human_message": draw(st.none() | st.text(max_size=20)),
    }
    return RunSnapshot(**fields)


_INTS = st.integers(0, 10**7)
_THRESHOLDS = st.integers(1, 10**6)
_FLOATS = st.floats(0, 1e6, allow_nan=False, allow_infinity=False)
_ARGUMENTS: dict[type[Guard], st.SearchStrategy[tuple[Any, ...]]] = {
    MaxTurns: st.tuples(_INTS),
    MaxToolCalls: st.tuples(_INTS),
    TokenBudget: st.tuples(_INTS),
    ContextLimit: st.tuples(_INTS),
    CostBudget: st.tuples(_FLOATS),
    Deadline: st.tuples(_FLOATS | _INTS),
    RepeatedCall: st.tuples(_THRESHOLDS),
    NoProgress: st.tuples(_THRESHOLDS),
    LoopRung: st.tuples(st.sampled_from(["ask", "stop"])),
    RetriesExhausted: st.tuples(_THRESHOLDS),
    ToolErrorLimit: st.tuples(_THRESHOLDS),
    Otherwise: st.tuples(
        st.text(string.printable, max_size=30), st.sampled_from([f"P{i}" for i in range(8)])
    ),
}
"""Arguments of the guards that take some; every other class in REGISTRY takes none."""


def _build(cls: type[Guard]) -> st.SearchStrategy[Guard]:
    arguments = _ARGUMENTS.get(cls)
    if arguments is None:
        return st.just(cls())
    return arguments.map(lambda args: cls(*args))


def leaf_guards() -> st.SearchStrategy[Guard]:
    """One built-in guard of every class a policy file may name, with valid parameters."""
    return st.one_of([_build(cls) for cls in sorted(REGISTRY.values(), key=lambda c: c.__name__)])


def guards(max_leaves: int = 6) -> st.SearchStrategy[Guard]:
    """A random composite of built-in guards, built with `|`, `&` and `~`."""
    return st.recursive(
        leaf_guards(),
        lambda inner: st.one_of(
            st.tuples(inner, inner).map(lambda pair: pair[0] | pair[1]),
            st.tuples(inner, inner).map(lambda pair: pair[0] & pair[1]),
            inner.map(lambda g: ~g),
        ),
        max_leaves=max_leaves,
    )
