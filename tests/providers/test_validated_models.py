"""A payload with wrongly typed fields never yields a model that fails its own validation.

Every `ModelTurn`, `ToolCall` and `Usage` that `normalize` returns is built through the
model's validation: for the recorded outputs of `../shared/corpus/wire/` with fields
replaced by values of the wrong type (an id that is a number, counts that are strings,
text that is an object, arguments keyed by numbers), each model equals its own dump
validated again, and nothing but an agentfsm error escapes.
"""

from __future__ import annotations

import contextlib
import copy
import json
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import agentfsm as af
from agentfsm import Action, FinishReason, ModelTurn, ToolCall, Usage
from agentfsm.exceptions import AgentFSMError
from agentfsm.providers import normalize
from agentfsm.providers._common import Draft, checked_turn

WIRE = Path(__file__).resolve().parents[2] / ".." / "shared" / "corpus" / "wire"

Place = tuple[Any, ...]

WRONG: tuple[Any, ...] = (
    7,
    -1,
    2.5,
    float("nan"),
    10**30,
    True,
    None,
    "7",
    "",
    [1, "a"],
    {"a": 1},
    {1: "x"},
    {"nested": {"deep": [1]}},
    {("tuple", "key"): 1},
)
"""Values of the wrong type for some field of every format (`{1: "x"}`: a Python payload
may hold keys no JSON text can)."""

TARGETS = frozenset(
    {
        "id",
        "call_id",
        "tool_call_id",
        "toolUseId",
        "name",
        "arguments",
        "args",
        "input",
        "partial_json",
        "functionCall",
        "function",
        "tool_calls",
        "text",
        "content",
        "delta",
        "refusal",
        "reasoning_content",
        "thinking",
        "usage",
        "usageMetadata",
        "prompt_tokens",
        "completion_tokens",
        "input_tokens",
        "output_tokens",
        "inputTokens",
        "outputTokens",
        "promptTokenCount",
        "candidatesTokenCount",
        "prompt_eval_count",
        "eval_count",
        "cost",
        "model",
        "finish_reason",
        "stop_reason",
        "finishReason",
        "stopReason",
        "status",
        "type",
        "error",
    }
)
"""Keys whose values the readers copy into a model."""


def wire_dir() -> Path:
    """The wire corpus folder; the run fails (never skips) when it is missing."""
    if not (WIRE / "SOURCES.md").is_file():
        pytest.fail(f"wire corpus missing: expected it at {WIRE.resolve()} (../shared/corpus/wire)")
    return WIRE


def _events(path: Path) -> list[Any]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


@cache
def payloads() -> tuple[tuple[str, Any], ...]:
    """Each JSON body and JSON-lines stream of the corpus, parsed (SSE text is left out)."""
    found = []
    for path in sorted(wire_dir().rglob("*")):
        name = path.relative_to(wire_dir()).as_posix()
        if path.suffix == ".json":
            found.append((name, json.loads(path.read_text(encoding="utf-8"))))
        elif path.suffix == ".jsonl":
            found.append((name, _events(path)))
    return tuple(found)


def places(value: Any, prefix: Place = ()) -> Iterator[Place]:
    """The path of every value inside a JSON value, outermost first."""
    items: Any = value.items() if type(value) is dict else enumerate(value)
    for key, inner in items:
        yield (*prefix, key)
        if type(inner) in (dict, list):
            yield from places(inner, (*prefix, key))


@cache
def aimed_at() -> tuple[tuple[Any, tuple[Place, ...]], ...]:
    """Each corpus payload with its `targeted` places, found once."""
    return tuple((payload, tuple(targeted(payload))) for _, payload in payloads())


def targeted(payload: Any) -> list[Place]:
    """The places whose key is one the readers copy from, first occurrence of each key."""
    seen: dict[Any, Place] = {}
    for place in places(payload):
        if place[-1] in TARGETS:
            seen.setdefault(place[-1], place)
    return list(seen.values())


def mutated(payload: Any, place: Place, value: Any) -> Any:
    """`payload` with the value at `place` replaced by `value`; only the containers on the
    way to it are copied, the rest is shared (the readers never change a payload)."""
    if not place:
        return copy.deepcopy(value)  # WRONG's values are shared by every example: never alias them
    copied = copy.copy(payload)
    copied[place[0]] = mutated(payload[place[0]], place[1:], value)
    return copied


def assert_valid(turn: ModelTurn) -> None:
    """Every model in `turn` equals its own dump validated again: it is a valid instance."""
    assert ModelTurn.model_validate(turn.model_dump()) == turn
    for call in turn.tool_calls:
        assert ToolCall.model_validate(call.model_dump()) == call
    if turn.usage is not None:
        assert Usage.model_validate(turn.usage.model_dump()) == turn.usage


def read_checked(payload: Any) -> ModelTurn | None:
    """`normalize(payload)`, checked valid, or None when it raised an agentfsm error."""
    try:
        turn = normalize(payload)
    except AgentFSMError:
        return None
    assert_valid(turn)
    return turn


@st.composite
def damaged_payloads(draw: st.DrawFn) -> Any:
    """A corpus payload with one to three values replaced by values of the wrong type."""
    _, payload = draw(st.sampled_from(payloads()))
    for _ in range(draw(st.integers(1, 3))):
        aimed = targeted(payload)
        every = list(places(payload))
        aim: bool = draw(st.booleans())
        pool = aimed if aimed and aim else every
        if not pool:
            break
        payload = mutated(payload, draw(st.sampled_from(pool)), draw(st.sampled_from(WRONG)))
    return payload


class TestWronglyTypedFields:
    """Wrongly typed fields of recorded payloads never make an invalid model."""

    @given(damaged_payloads())
    def test_random_mutations_give_valid_models(self, payload: Any) -> None:
        """Random replacements anywhere in a payload give valid models or an agentfsm error."""
        read_checked(payload)

    @pytest.mark.parametrize("value", WRONG, ids=repr)
    def test_every_copied_field_of_every_payload(self, value: Any) -> None:
        """Each field a reader copies, in each corpus payload, replaced by `value`."""
        for payload, aimed in aimed_at():
            for place in aimed:
                read_checked(mutated(payload, place, value))


class TestWhatBecomesOfABadValue:
    """A value that does not validate leaves the call broken and the turn retried."""

    def test_arguments_keyed_by_numbers_break_the_call(self) -> None:
        """Arguments whose keys are not strings leave the call broken, with its id and name."""
        body = {
            "model": "m",
            "message": {
                "role": "assistant",
                "tool_calls": [{"id": "c1", "function": {"name": "f", "arguments": {1: "x"}}}],
            },
            "done": True,
        }
        (call,) = normalize(body).tool_calls
        assert (call.id, call.name, call.arguments) == ("c1", "f", None)
        assert call.error is not None
        assert "does not validate" in call.error
        assert af.Controller().on_model_output(body).action is Action.RETRY

    def test_a_wrongly_typed_id_count_and_text_read_as_empty(self) -> None:
        """A numeric id, string counts and object text read as empty values, not as errors."""
        body = {
            "choices": [
                {
                    "message": {
                        "content": {"text": "hi"},
                        "tool_calls": [{"id": 12, "function": {"name": "f", "arguments": "{}"}}],
                    },
                    "finish_reason": "tool_calls",
                }
            ],
            "usage": {"prompt_tokens": "3", "completion_tokens": {"n": 1}},
        }
        turn = normalize(body)
        assert_valid(turn)
        assert (turn.text, turn.tool_calls[0].id, turn.usage) == ("", "", Usage())

    @pytest.mark.needs("pydantic_ai")
    def test_a_pydantic_ai_call_keyed_by_numbers_is_broken(self) -> None:
        """A pydantic-ai `ToolCallPart` whose args dict has int keys is a broken call, retried."""
        from pydantic_ai.messages import ModelResponse, ToolCallPart

        response = ModelResponse(parts=[ToolCallPart("f", {1: "x"}, "c1")])  # type: ignore[dict-item]
        (call,) = normalize(response).tool_calls
        assert (call.id, call.name, call.arguments) == ("c1", "f", None)
        assert af.Controller().on_model_output(response).action is Action.RETRY

    def test_a_turn_field_that_does_not_validate_marks_the_turn_damaged(self) -> None:
        """A draft value of the wrong type is left out, and the turn is truncated and retried."""
        values = Draft("openai", text="done", finish=FinishReason.STOP).build().__dict__.copy()
        values["model"] = 5
        turn = checked_turn(values)
        assert_valid(turn)
        assert (turn.text, turn.model, turn.truncated) == ("done", None, True)
        assert turn.error is not None
        assert "model" in turn.error
        assert af.Controller().on_model_output(turn).action is Action.RETRY


class TestPayloadsAreNotChanged:
    """Reading a payload never changes the host's own objects."""

    def test_every_corpus_payload_is_left_as_it_was(self) -> None:
        """normalize leaves each recorded body and stream exactly as it was given."""
        for name, payload in payloads():
            given = copy.deepcopy(payload)
            with contextlib.suppress(AgentFSMError):
                normalize(given)
            assert given == payload, name
