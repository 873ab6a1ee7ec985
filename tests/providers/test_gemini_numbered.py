"""Gemini and Vertex AI finish reasons written as numbers (the google SDKs' int enum encoding).

A body dumped with integers for enums says `"finishReason": 1` for STOP and `2` for
MAX_TOKENS. Numbers 0-5 mean the same in Vertex AI and the Gemini API; from 6 on the
two enums differ, and a number is read by name only where both readings mean the same
thing. `raw_finish_reason` keeps the number as text; a number neither API names is UNKNOWN.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import agentfsm as af
from agentfsm._model.types import Action, FinishReason, ModelTurn, Priority
from agentfsm.providers import normalize
from agentfsm.providers._gemini import BROKEN, TABLE

CORPUS = Path(__file__).resolve().parents[2] / ".." / "shared" / "corpus" / "providers" / "gemini"
ALIKE = ("FINISH_REASON_UNSPECIFIED", "STOP", "MAX_TOKENS", "SAFETY", "RECITATION", "OTHER")
VERTEX = (
    *ALIKE,
    *("BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "MALFORMED_FUNCTION_CALL", "MODEL_ARMOR"),
    *("IMAGE_SAFETY", "IMAGE_PROHIBITED_CONTENT", "IMAGE_RECITATION", "IMAGE_OTHER"),
    *("UNEXPECTED_TOOL_CALL", "NO_IMAGE"),
)
"""google.cloud.aiplatform.v1 `Candidate.FinishReason`, by number."""
GEMINI_API = (
    *ALIKE,
    *("LANGUAGE", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "MALFORMED_FUNCTION_CALL"),
    *("IMAGE_SAFETY", "UNEXPECTED_TOOL_CALL"),
)
"""google.ai.generativelanguage.v1beta `Candidate.FinishReason`, by number."""


def numbered(name: str) -> dict[str, Any]:
    """A recorded body with its finish reason written as its number."""
    body: dict[str, Any] = json.loads((CORPUS / name).read_text())
    for candidate in body["candidates"]:
        candidate["finishReason"] = VERTEX.index(candidate["finishReason"])
    return body


def decide(turn: ModelTurn, tools: list[str] | None = None) -> af.Decision:
    return af.Controller(af.Policy(), tools=tools).on_model_output(turn)


class TestRecordedBodies:
    """Recorded bodies, their reasons written as the SDK writes them."""

    def test_stop_is_a_finished_answer(self) -> None:
        """`1` is STOP: the answer ends the run at once, as `"STOP"` does."""
        named = normalize(json.loads((CORPUS / "generateContent-text-STOP.json").read_text()))
        turn = normalize(numbered("generateContent-text-STOP.json"))
        assert (turn.finish_reason, turn.raw_finish_reason, turn.truncated) == (
            FinishReason.STOP,
            "1",
            False,
        )
        assert turn.text == named.text
        decision = decide(turn)
        assert (decision.action, decision.priority) == (Action.FINAL, Priority.P3)

    def test_max_tokens_is_a_cut(self) -> None:
        """`2` is MAX_TOKENS: truncated, retried with a larger limit, never a final answer."""
        turn = normalize(numbered("generateContent-MAX_TOKENS-truncated-text.json"))
        assert (turn.finish_reason, turn.raw_finish_reason, turn.truncated) == (
            FinishReason.LENGTH,
            "2",
            True,
        )
        decision = decide(turn)
        assert decision.action is Action.RETRY
        assert decision.adjust.get("max_tokens_factor")

    def test_safety_is_a_filter(self) -> None:
        """`3` is SAFETY: the run stops on the content filter."""
        turn = normalize(numbered("generateContent-SAFETY-empty-content.json"))
        assert turn.finish_reason is FinishReason.CONTENT_FILTER
        assert decide(turn).exit_reason is af.ExitReason.CONTENT_FILTER

    def test_streamed_stop(self) -> None:
        """A stream whose last chunk says `1` is finished, not cut."""
        path = CORPUS / "streamGenerateContent-functionCall.jsonl"
        chunks = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        named = normalize(chunks)
        for chunk in chunks:
            for candidate in chunk.get("candidates") or []:
                if "finishReason" in candidate:
                    candidate["finishReason"] = VERTEX.index(candidate["finishReason"])
        turn = normalize(chunks)
        assert (turn.finish_reason, turn.truncated) == (named.finish_reason, named.truncated)
        assert turn.tool_calls == named.tool_calls
        assert turn.raw_finish_reason == str(VERTEX.index(str(named.raw_finish_reason)))

    def test_numbered_block_reason_is_a_filter(self) -> None:
        """A numbered `promptFeedback.blockReason` blocked the prompt as a named one does."""
        name = "vertex-generateContent-promptFeedback-blockReason-no-candidates.json"
        body = json.loads((CORPUS / name).read_text())
        body["promptFeedback"]["blockReason"] = 2
        turn = normalize(body)
        assert (turn.finish_reason, turn.raw_finish_reason) == (FinishReason.CONTENT_FILTER, "2")


def body_with(reason: object) -> dict[str, Any]:
    """A body with an answer and one call, stopped for `reason`."""
    parts = [{"text": "Sunny."}, {"functionCall": {"name": "get_weather", "args": {"city": "x"}}}]
    return {"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": reason}]}


class TestEveryNumber:
    """Whatever the number, a call runs only when both readings say the generation ended well."""

    @given(number=st.integers(min_value=-5, max_value=len(VERTEX) + 5))
    def test_number_reads_as_its_meaning(self, number: int) -> None:
        """A number both enums read alike is that reason; one they read apart is an
        ERROR whose calls never run; one neither names is UNKNOWN; the number is kept."""
        turn = normalize(body_with(number))
        assert turn.raw_finish_reason == str(number)
        names = {t[number] for t in (VERTEX, GEMINI_API) if 0 <= number < len(t)}
        meanings = {(TABLE[n], n in BROKEN) for n in names}
        if not names:
            assert turn.finish_reason is FinishReason.UNKNOWN
        elif len(meanings) == 1:
            assert turn.finish_reason is TABLE[names.pop()]
        else:
            assert turn.finish_reason is FinishReason.ERROR
            assert turn.error is not None
            assert not any(call.complete for call in turn.tool_calls)
        decision = decide(turn, ["get_weather"])
        if decision.action is Action.EXECUTE_TOOLS:
            assert names <= {"STOP", "FINISH_REASON_UNSPECIFIED"}

    @pytest.mark.parametrize("number", [6, 9, 10, 12])
    def test_disputed_numbers_name_both_readings(self, number: int) -> None:
        """The error of a disputed number names what it is in each API."""
        turn = normalize(body_with(number))
        assert turn.error is not None
        assert "Vertex AI" in turn.error
        assert "Gemini API" in turn.error
        assert VERTEX[number] in turn.error
        assert GEMINI_API[number] in turn.error

    def test_malformed_call_number_is_retried(self) -> None:
        """A number both read as a broken call (`UNEXPECTED_TOOL_CALL` where they agree) is
        retried and its call never runs; the name appears in the error."""
        number = VERTEX.index("UNEXPECTED_TOOL_CALL")
        turn = normalize(body_with(number))
        assert turn.truncated
        assert not turn.tool_calls[0].complete
        assert "UNEXPECTED_TOOL_CALL" in (turn.tool_calls[0].error or "")
        assert decide(turn, ["get_weather"]).action is Action.RETRY

    def test_booleans_are_not_numbers(self) -> None:
        """`true` is no enum number: the claim is ignored, as any other non-string is."""
        assert normalize(body_with(True)).raw_finish_reason is None
