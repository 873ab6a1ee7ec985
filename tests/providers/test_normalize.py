"""Entry points: detection, input shapes, bad input and the stream accumulator."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentfsm._model.types import FinishReason
from agentfsm.exceptions import PayloadError
from agentfsm.providers import PROVIDERS, StreamAccumulator, detect_provider, normalize

BODY: dict[str, Any] = {
    "id": "c",
    "object": "chat.completion",
    "created": 1,
    "model": "gpt-4o",
    "choices": [
        {
            "index": 0,
            "finish_reason": "tool_calls",
            "message": {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                ],
            },
        }
    ],
}


def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    """A chat completion chunk."""
    return {
        "id": "c",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-4o",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


class TestInputShapes:
    """Every accepted shape of the same output gives the same turn."""

    def test_json_text_and_bytes(self) -> None:
        """A body as JSON text or bytes reads like the dict."""
        assert normalize(json.dumps(BODY)) == normalize(BODY)
        assert normalize(json.dumps(BODY).encode()) == normalize(BODY)

    @pytest.mark.needs("openai")
    def test_sdk_object(self) -> None:
        """An openai SDK object is read through `model_dump()`."""
        from openai.types.chat import ChatCompletion

        assert normalize(ChatCompletion.model_validate(BODY)) == normalize(BODY)

    @pytest.mark.needs("openai")
    def test_sdk_stream_objects(self) -> None:
        """openai SDK chunk objects read like their dicts."""
        from openai.types.chat import ChatCompletionChunk

        chunks = [chunk({"content": "a"}), chunk({}, "stop")]
        objects = [ChatCompletionChunk.model_validate(c) for c in chunks]
        assert normalize(objects) == normalize(chunks)

    def test_lines_and_bytes_lines(self) -> None:
        """A stream as JSON lines, SSE lines or bytes reads like its dicts."""
        chunks = [chunk({"content": "a"}), chunk({}, "stop")]
        expected = normalize(chunks)
        assert normalize([json.dumps(c) for c in chunks]) == expected
        assert normalize([f"data: {json.dumps(c)}".encode() for c in chunks]) == expected
        assert normalize(iter(chunks)) == expected


class TestDetection:
    """Cheap key checks name the format."""

    @pytest.mark.parametrize(
        ("payload", "name"),
        [
            (BODY, "openai"),
            ({"object": "response", "status": "completed", "output": []}, "openai_responses"),
            ({"type": "message", "content": [], "stop_reason": "end_turn"}, "anthropic"),
            ({"candidates": []}, "gemini"),
            ({"output": {"message": {}}, "stopReason": "end_turn"}, "bedrock"),
            ({"message": {}, "done": True}, "ollama"),
            ({"message": {}, "finish_reason": "COMPLETE"}, "cohere"),
            ({**BODY, "vertex_ai_grounding_metadata": []}, "litellm"),
            ([{"type": "message_start", "message": {}}], "anthropic"),
            ([{"type": "response.created"}], "openai_responses"),
            ([{"messageStart": {"role": "assistant"}}], "bedrock"),
        ],
    )
    def test_detect(self, payload: object, name: str) -> None:
        """Each format is recognised from its own keys."""
        assert detect_provider(payload) == name

    def test_provider_names(self) -> None:
        """The public provider names are the contract's."""
        assert set(PROVIDERS) == {
            "openai",
            "openai_responses",
            "anthropic",
            "gemini",
            "bedrock",
            "ollama",
            "cohere",
            "litellm",
            "langchain",
            "openai_agents",
            "pydantic_ai",
        }


class TestBadInput:
    """Payloads no normalizer recognises raise PayloadError, never something else."""

    def test_message_names_formats_and_keys(self) -> None:
        """The error names the formats tried and the top-level keys seen."""
        with pytest.raises(PayloadError) as caught:
            normalize({"foo": 1, "bar": 2})
        message = str(caught.value)
        assert "openai_responses" in message
        assert "gemini" in message
        assert "['bar', 'foo']" in message

    @pytest.mark.parametrize("payload", [None, 3, [], [1, 2], "not json", {}, ["data: [DONE]"]])
    def test_unrecognised(self, payload: object) -> None:
        """Non-objects, empty streams and junk raise PayloadError."""
        with pytest.raises(PayloadError):
            normalize(payload)

    def test_unknown_provider_name(self) -> None:
        """An unknown provider name is refused."""
        with pytest.raises(PayloadError, match="unknown provider"):
            normalize(BODY, provider="palm")

    def test_provider_that_does_not_fit(self) -> None:
        """Naming a provider whose shape the payload does not have is refused."""
        with pytest.raises(PayloadError, match="not a anthropic body"):
            normalize(BODY, provider="anthropic")

    def test_partially_valid_payload(self) -> None:
        """A payload with one broken call gives a turn with that call marked, not a crash."""
        payload = json.loads(json.dumps(BODY))
        payload["choices"][0]["message"]["tool_calls"].append({"function": {"arguments": 5}})
        turn = normalize(payload)
        assert [call.complete for call in turn.tool_calls] == [True, False]


class TestStreamAccumulator:
    """Feeding chunks one at a time."""

    def test_incremental(self) -> None:
        """The turn can be read mid-stream (truncated) and again at the end."""
        accumulator = StreamAccumulator()
        accumulator.add(chunk({"content": "a"}))
        assert accumulator.turn().truncated
        accumulator.add(chunk({"content": "b"}, "stop"))
        turn = accumulator.turn()
        assert (turn.text, turn.truncated, turn.finish_reason) == ("ab", False, FinishReason.STOP)
        assert accumulator.provider == "openai"

    def test_skips_leading_noise(self) -> None:
        """Chunks no format recognises before the first real one are ignored."""
        accumulator = StreamAccumulator()
        accumulator.extend(["", ": keep-alive", {"hello": 1}, chunk({}, "stop")])
        assert accumulator.turn().finish_reason is FinishReason.STOP

    def test_nothing_recognised(self) -> None:
        """Reading a turn when no chunk was recognised raises PayloadError."""
        accumulator = StreamAccumulator()
        accumulator.add({"hello": 1})
        assert accumulator.provider is None
        with pytest.raises(PayloadError, match="stream"):
            accumulator.turn()

    def test_named_provider(self) -> None:
        """A named provider reads chunks without detection."""
        accumulator = StreamAccumulator("ollama")
        accumulator.add({"message": {"content": "a"}, "done": True, "done_reason": "stop"})
        assert accumulator.turn().provider == "ollama"
