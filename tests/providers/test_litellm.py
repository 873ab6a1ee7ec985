"""litellm responses, built by litellm's own conversion code from raw provider bodies."""

from __future__ import annotations

import json
import os
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from agentfsm._model.types import FinishReason
from agentfsm.providers import StreamAccumulator, detect_provider, normalize

pytestmark = [
    pytest.mark.litellm,
    # litellm's own modules trip a pydantic warning about ReadOnly TypedDict items on import.
    pytest.mark.filterwarnings("ignore:Item.*ReadOnly.*:UserWarning"),
]

CORPUS = Path(__file__).resolve().parents[2] / ".." / "shared" / "corpus" / "providers"


def transform(provider: str, body: dict[str, Any]) -> Any:
    """Run litellm's own response transformation for `provider` on a raw body."""
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    import httpx
    import litellm
    from litellm.litellm_core_utils.litellm_logging import Logging
    from litellm.llms.anthropic.chat.transformation import AnthropicConfig
    from litellm.llms.vertex_ai.gemini.vertex_and_google_ai_studio_gemini import (
        VertexGeminiConfig,
    )

    config = VertexGeminiConfig() if provider == "gemini" else AnthropicConfig()
    logging = Logging(
        model="m",
        messages=[{"role": "user", "content": "hi"}],
        stream=False,
        call_type="completion",
        start_time=datetime.now(),
        litellm_call_id="test",
        function_id="test",
    )
    logging.update_environment_variables(
        model="m", user=None, optional_params={}, litellm_params={}, custom_llm_provider=provider
    )
    raw = httpx.Response(200, json=body, request=httpx.Request("POST", "https://example.invalid"))
    return config.transform_response(
        model="m",
        raw_response=raw,
        model_response=litellm.ModelResponse(),
        logging_obj=logging,
        request_data={},
        messages=[],
        optional_params={},
        litellm_params={},
        encoding=None,
    )


def gemini(parts: list[dict[str, Any]], reason: str) -> dict[str, Any]:
    """A raw Gemini body with one candidate."""
    candidate = {"content": {"role": "model", "parts": parts}, "finishReason": reason}
    return {"candidates": [candidate], "usageMetadata": {"promptTokenCount": 3}}


CALL = {"functionCall": {"name": "f", "args": {"a": 1}}}


class TestLitellmGemini:
    """Gemini reasons litellm flattens are recovered from what it keeps."""

    def test_malformed_with_call(self) -> None:
        """MALFORMED_FUNCTION_CALL (litellm says tool_calls) is ERROR and never executable."""
        response = transform("gemini", gemini([CALL], "MALFORMED_FUNCTION_CALL"))
        assert response.choices[0].finish_reason == "tool_calls"
        turn = normalize(response)
        assert (turn.provider, turn.finish_reason) == ("litellm", FinishReason.ERROR)
        assert turn.raw_finish_reason == "MALFORMED_FUNCTION_CALL"
        assert turn.truncated
        assert not turn.tool_calls[0].complete

    def test_malformed_without_call(self) -> None:
        """MALFORMED_FUNCTION_CALL that litellm maps to stop is ERROR, not an empty STOP."""
        response = transform("gemini", gemini([], "MALFORMED_FUNCTION_CALL"))
        assert response.choices[0].finish_reason == "stop"
        turn = normalize(response)
        assert (turn.finish_reason, turn.truncated) == (FinishReason.ERROR, True)
        assert turn.error is not None

    def test_unrecognised_reason(self) -> None:
        """A reason litellm does not know (mapped to stop) is UNKNOWN, kept raw."""
        turn = normalize(transform("gemini", gemini([{"text": "a"}], "BRAND_NEW_REASON")))
        assert (turn.finish_reason, turn.raw_finish_reason) == (
            FinishReason.UNKNOWN,
            "BRAND_NEW_REASON",
        )

    def test_dict_form(self) -> None:
        """The `model_dump()` dict is recognised as litellm's and read the same way."""
        response = transform("gemini", gemini([CALL], "MALFORMED_FUNCTION_CALL"))
        dumped = response.model_dump()
        assert detect_provider(dumped) == "litellm"
        assert normalize(dumped) == normalize(response)

    def test_stop_with_call(self) -> None:
        """A function call under STOP keeps litellm's tool_calls claim and the call."""
        turn = normalize(transform("gemini", gemini([CALL], "STOP")))
        assert turn.tool_calls[0].arguments == {"a": 1}
        assert turn.tool_calls[0].complete


class TestLitellmAnthropic:
    """Anthropic reasons litellm flattens are recovered from what it keeps."""

    def test_pause_turn(self) -> None:
        """`pause_turn` (litellm says length) is PAUSE and not truncated."""
        body = json.loads(
            (CORPUS / "anthropic/messages-pause_turn-server-web_search.json").read_text()
        )
        response = transform("anthropic", body)
        assert response.choices[0].finish_reason == "length"
        turn = normalize(response)
        assert (turn.finish_reason, turn.truncated) == (FinishReason.PAUSE, False)

    def test_refusal(self) -> None:
        """`refusal` (litellm says content_filter) is REFUSAL with refusal text."""
        body = json.loads((CORPUS / "anthropic/messages-refusal-no-details.json").read_text())
        response = transform("anthropic", body)
        assert response.choices[0].finish_reason == "content_filter"
        turn = normalize(response)
        assert turn.finish_reason is FinishReason.REFUSAL
        assert turn.refusal


class TestLitellmStream:
    """litellm streaming chunks, fed one at a time."""

    def test_mock_stream(self) -> None:
        """Chunks from litellm's own streaming wrapper accumulate into the full answer."""
        os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
        import litellm

        stream = litellm.completion(
            model="gpt-4o",
            messages=[{"role": "user", "content": "hi"}],
            mock_response="hello there",
            stream=True,
        )
        accumulator = StreamAccumulator()
        for chunk in stream:
            accumulator.add(chunk)
        turn = accumulator.turn()
        assert (turn.provider, turn.text) == ("litellm", "hello there")
        assert turn.finish_reason is FinishReason.STOP
        assert not turn.truncated
