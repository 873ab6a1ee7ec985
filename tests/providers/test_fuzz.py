"""Arbitrary JSON never crashes `normalize`: it returns a turn or raises PayloadError."""

from __future__ import annotations

import contextlib
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentfsm._model.types import ModelTurn
from agentfsm.exceptions import PayloadError
from agentfsm.providers import StreamAccumulator, normalize

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)

# Keys that steer a payload into each normalizer, so the fuzzing reaches past detection.
MARKERS = st.sampled_from(
    [
        {"choices": [{"message": {}}]},
        {"choices": [{"delta": {}}]},
        {"object": "response", "status": "completed"},
        {"type": "message", "content": []},
        {"type": "content_block_start"},
        {"type": "response.output_item.added"},
        {"candidates": []},
        {"stopReason": "end_turn"},
        {"contentBlockStart": {}},
        {"message": {}, "done": True},
        {"message": {}, "finish_reason": "TOOL_CALL"},
    ]
)
FIELDS = st.sampled_from(
    [
        "choices",
        "message",
        "delta",
        "tool_calls",
        "function",
        "arguments",
        "name",
        "id",
        "index",
        "finish_reason",
        "content",
        "output",
        "status",
        "incomplete_details",
        "type",
        "item",
        "output_index",
        "stop_reason",
        "input",
        "partial_json",
        "candidates",
        "parts",
        "functionCall",
        "args",
        "partialArgs",
        "willContinue",
        "finishReason",
        "stopReason",
        "contentBlockDelta",
        "toolUse",
        "done",
        "done_reason",
        "error",
        "usage",
        "text",
    ]
)


def _shaped(depth: int) -> st.SearchStrategy[Any]:
    if depth == 0:
        return JSON
    child = _shaped(depth - 1)
    return st.one_of(
        JSON,
        st.lists(child, max_size=3),
        st.dictionaries(FIELDS, child, max_size=5),
    )


SHAPED = st.builds(
    lambda base, extra: {**extra, **base}, MARKERS, st.dictionaries(FIELDS, _shaped(3), max_size=6)
)


def check(payload: object) -> None:
    """`normalize` returns a ModelTurn or raises PayloadError; nothing else escapes."""
    try:
        turn = normalize(payload)
    except PayloadError:
        return
    assert isinstance(turn, ModelTurn)
    ModelTurn.model_validate(turn.model_dump())


class TestFuzz:
    """Property tests over arbitrary and provider-shaped JSON."""

    @settings(deadline=None)
    @given(JSON)
    def test_arbitrary_json(self, payload: object) -> None:
        """Any JSON value gives a turn or a PayloadError."""
        check(payload)

    @settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(SHAPED)
    def test_provider_shaped_bodies(self, payload: dict[str, Any]) -> None:
        """Bodies with a provider's keys and junk values give a valid turn or a PayloadError."""
        check(payload)

    @settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(st.lists(SHAPED | JSON, max_size=6))
    def test_provider_shaped_streams(self, events: list[Any]) -> None:
        """Streams of provider-shaped junk give a valid turn or a PayloadError."""
        check(events)
        accumulator = StreamAccumulator()
        accumulator.extend(events)
        with contextlib.suppress(PayloadError):
            accumulator.turn()
