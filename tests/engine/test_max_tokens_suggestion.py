"""A retry suggests a larger max_tokens only after a cut by the token limit.

`Decision.adjust == {"max_tokens_factor": 2}` tells the host to give the next
call more output tokens. That helps when the provider says the output limit
cut the turn (finish reason LENGTH: `length`, `max_tokens`, `MAX_TOKENS`,
`max_output_tokens`). It does not help when a stream was damaged or ended
without a finish, when the provider broke a call for another reason, or when
the context window is full: those are retried (P0) without the suggestion.
Every case is a real payload of the provider corpus, or one with one field changed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import agentfsm as af
from agentfsm._model.types import Action, FinishReason, Priority

CORPUS = Path(__file__).resolve().parents[2] / ".." / "shared" / "corpus" / "providers"
MORE = {"max_tokens_factor": 2}

LENGTH_CUTS = [
    "anthropic/messages-stream-max_tokens-truncated-tool_use-input_json.jsonl",
    "bedrock/converse-max_tokens.json",
    "cohere/chat-v2-MAX_TOKENS.json",
    "gemini/generateContent-MAX_TOKENS-no-parts-thinking.json",
    "gemini/generateContent-MAX_TOKENS-truncated-text.json",
    "openai_chat/chat-length-truncated-json-content.json",
    "openai_chat/chat-stream-length-truncated.jsonl",
    "openai_compatible/hf-router-together-deepseek-r1-length-empty-tool_calls.json",
    "openai_compatible/openrouter-minimax-stream-length-then-error-chunk.jsonl",
]
"""Every corpus payload that the provider's output limit cut."""

OTHER_CUTS = [
    "gemini/streamGenerateContent-partialArgs-missing-terminal-functionCall.jsonl",
    "gemini/vertex-generateContent-UNEXPECTED_TOOL_CALL-with-functionCall.json",
]
"""Corpus payloads retried because a call is broken, with no output limit reached."""


def text_of(name: str) -> str:
    path = CORPUS / name
    if not path.is_file():
        pytest.fail(f"provider corpus file missing: {path.resolve()}")
    return path.read_text(encoding="utf-8")


def payload(name: str, text: str | None = None) -> Any:
    """A corpus file's payload: a JSON body, or the list of stream lines."""
    text = text_of(name) if text is None else text
    if name.endswith(".json"):
        return json.loads(text)
    return [line for line in text.splitlines() if line.strip()]


def decide(value: Any) -> af.Decision:
    return af.Controller().on_model_output(value)


def all_files() -> list[str]:
    return sorted(str(p.relative_to(CORPUS)) for p in CORPUS.glob("*/*.json*"))


class TestTokenLimitCuts:
    """An output cut by the provider's output limit is retried with a larger max_tokens."""

    @pytest.mark.parametrize("name", LENGTH_CUTS)
    def test_a_max_tokens_cut_suggests_more_tokens(self, name: str) -> None:
        """Each provider's own length claim gives RETRY (P0) and the doubling suggestion."""
        decision = decide(payload(name))
        assert (decision.action, decision.priority) == (Action.RETRY, Priority.P0)
        assert decision.adjust == MORE

    def test_the_lists_cover_every_retried_cut_of_the_corpus(self) -> None:
        """Every corpus payload retried for a cut is listed above, on its side."""
        retried = {
            name for name in all_files() if decide(payload(name)).guard == "OutputTruncated()"
        }
        assert retried == set(LENGTH_CUTS) | set(OTHER_CUTS)

    @pytest.mark.parametrize(
        "name",
        [n for n in LENGTH_CUTS if n.endswith(".jsonl")],
    )
    def test_a_length_cut_stream_with_a_damaged_event_still_suggests(self, name: str) -> None:
        """The limit cut the turn whatever else happened: a damaged event keeps the suggestion."""
        lines = payload(name)
        finish = next(
            i for i, line in enumerate(lines) if '"length"' in line or "max_tokens" in line
        )
        damaged = max(0, finish - 1)  # the event before the one with the finish claim
        lines[damaged] = lines[damaged][: len(lines[damaged]) // 2]
        turn = af.normalize(lines)
        assert "damaged" in (turn.error or "")
        assert turn.finish_reason is FinishReason.LENGTH
        assert decide(lines).adjust == MORE


class TestOtherCuts:
    """Outputs retried for any other reason get no suggestion: more tokens would not help."""

    @pytest.mark.parametrize("name", OTHER_CUTS)
    def test_a_call_broken_without_the_limit_gets_none(self, name: str) -> None:
        """A stream that never completed its call, or a provider error, is retried as it is."""
        decision = decide(payload(name))
        assert (decision.action, decision.priority) == (Action.RETRY, Priority.P0)
        assert decision.adjust == {}

    def test_a_damaged_stream_gets_none(self) -> None:
        """One event of every other corpus stream cut in half: RETRY (P0), no suggestion."""
        streams = [n for n in all_files() if n.endswith(".jsonl") and n not in LENGTH_CUTS]
        damaged = 0
        for name in streams:
            lines = payload(name)
            for index in range(1, len(lines) - 1):
                broken = list(lines)
                broken[index] = broken[index][: len(broken[index]) // 2]
                turn = af.normalize(broken)
                if not turn.truncated:  # a terminal event repeated the whole output
                    continue
                decision = decide(broken)
                assert (decision.action, decision.priority) == (Action.RETRY, Priority.P0), name
                assert decision.adjust == {}, f"{name}, event {index}"
                damaged += 1
        assert damaged >= 100

    @pytest.mark.parametrize(
        "name",
        [
            "openai_chat/chat-stream-single-tool_call.jsonl",
            "anthropic/messages-tool_use-input_json_delta.stream.jsonl",
            "bedrock/converse-stream-tool_use.jsonl",
            "ollama/api-chat-stream-tool_calls-then-done.jsonl",
        ],
    )
    def test_a_stream_that_ends_mid_call_gets_none(self, name: str) -> None:
        """The connection dropped before the finish: retried without the suggestion."""
        lines = payload(name)
        cut = lines[: max(1, len(lines) // 2)]
        turn = af.normalize(cut)
        assert turn.truncated
        assert turn.finish_reason is not FinishReason.LENGTH
        decision = decide(cut)
        assert decision.action is Action.RETRY
        assert decision.adjust == {}

    @pytest.mark.parametrize(
        ("name", "said", "instead"),
        [
            (
                "anthropic/messages-stream-max_tokens-truncated-tool_use-input_json.jsonl",
                '"stop_reason":"max_tokens"',
                '"stop_reason":"model_context_window_exceeded"',
            ),
            ("cohere/chat-v2-MAX_TOKENS.json", '"MAX_TOKENS"', '"ERROR_LIMIT"'),
            (
                "openai_chat/chat-length-truncated-json-content.json",
                '"finish_reason": "length"',
                '"finish_reason": "model_length"',
            ),
        ],
    )
    def test_a_full_context_window_gets_none(self, name: str, said: str, instead: str) -> None:
        """Anthropic, Cohere and Mistral say when the context window, not the limit, cut it."""
        text = text_of(name)
        assert said in text
        cut = payload(name, text.replace(said, instead))
        turn = af.normalize(cut)
        assert turn.finish_reason is FinishReason.LENGTH
        decision = decide(cut)
        assert (decision.action, decision.priority) == (Action.RETRY, Priority.P0)
        assert decision.adjust == {}
