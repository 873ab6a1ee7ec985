"""litellm stream chunks keep the provider's own finish reason, as litellm bodies do.

litellm (1.110) streams an Anthropic stop reason it maps away (`pause_turn` to `length`,
`refusal` to `content_filter`) in a chunk's `delta.provider_specific_fields["stop_reason"]`,
before the chunk with its mapped `finish_reason`; the accumulated turn reads the
provider's own reason, so a paused turn is PAUSE and not a cut.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import agentfsm as af
from agentfsm._model.types import Action, FinishReason
from agentfsm.providers import StreamAccumulator, normalize
from agentfsm.providers._anthropic import TABLE as ANTHROPIC

LITELLM_MAPS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "refusal": "content_filter",
    "pause_turn": "length",
}
"""litellm's `map_finish_reason` for Anthropic's stop reasons."""
KEPT_RAW = frozenset({"refusal", "pause_turn"})
"""The stop reasons litellm streams in `delta.provider_specific_fields`."""


def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    """One chunk as litellm's `ModelResponseStream.model_dump()` writes it."""
    choice = {"finish_reason": finish, "index": 0, "delta": delta, "logprobs": None}
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "model": "m",
        "choices": [choice],
    }


def stream(pieces: list[str], reason: str, *, finished: bool) -> list[dict[str, Any]]:
    """A litellm stream of Anthropic text, ended by `reason` (or cut before its finish chunk)."""
    chunks = [chunk({"content": piece, "role": "assistant"}) for piece in pieces]
    fields = {"stop_reason": reason} if reason in KEPT_RAW else None
    chunks.append(chunk({"content": "", "provider_specific_fields": fields}))
    if finished:
        chunks.append(chunk({"content": None}, LITELLM_MAPS[reason]))
    return chunks


class TestNativeReason:
    """The provider's own reason wins over litellm's mapped one."""

    def test_paused_stream_is_pause(self) -> None:
        """A streamed `pause_turn` is PAUSE, not truncated, and the run continues."""
        turn = normalize(stream(["Searching", " the web"], "pause_turn", finished=True), "litellm")
        assert (turn.finish_reason, turn.raw_finish_reason, turn.truncated) == (
            FinishReason.PAUSE,
            "pause_turn",
            False,
        )
        decision = af.Controller(af.Policy()).on_model_output(turn)
        assert (decision.action, decision.fired) == (Action.CONTINUE, "Paused()")

    def test_detected_without_a_name(self) -> None:
        """The same chunks fed one by one to an accumulator told `litellm` read the same."""
        accumulator = StreamAccumulator("litellm")
        for item in stream(["a"], "refusal", finished=True):
            accumulator.add(item)
        turn = accumulator.turn()
        assert turn.finish_reason is FinishReason.REFUSAL
        assert turn.refusal

    @given(
        pieces=st.lists(st.text(min_size=1, max_size=8), min_size=1, max_size=5),
        reason=st.sampled_from(sorted(LITELLM_MAPS)),
        finished=st.booleans(),
    )
    def test_every_reason(self, pieces: list[str], reason: str, finished: bool) -> None:
        """Finished, the turn carries Anthropic's own reason, truncated only by a length cut;
        cut before the finish chunk, it is truncated whatever came before."""
        turn = normalize(stream(pieces, reason, finished=finished), "litellm")
        assert turn.text == "".join(pieces)
        if not finished:
            assert turn.truncated
            return
        assert turn.finish_reason is ANTHROPIC[reason]
        assert turn.truncated is (ANTHROPIC[reason] is FinishReason.LENGTH)

    @pytest.mark.parametrize("reason", sorted(KEPT_RAW))
    def test_a_lone_chunk_reads_as_a_stream_of_one(self, reason: str) -> None:
        """One chunk given alone is read by the stream reader: its delta's own reason is kept."""
        one = chunk({"content": "hi", "provider_specific_fields": {"stop_reason": reason}})
        one["choices"][0]["finish_reason"] = LITELLM_MAPS[reason]
        turn = normalize(one, "litellm")
        assert turn == normalize([one], "litellm")
        assert (turn.finish_reason, turn.raw_finish_reason) == (ANTHROPIC[reason], reason)
