"""Every documented finish reason that says the provider failed stops the turn's calls.

For each provider, each raw reason its table maps to ERROR is put in a body that
also holds text and a tool call. The controller must never execute that call and
never end the run COMPLETED: it retries (bounded) or stops with PROVIDER_ERROR.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import agentfsm as af
from agentfsm._model.types import Action, ExitReason, FinishReason
from agentfsm.providers import (
    _anthropic,
    _bedrock,
    _cohere,
    _gemini,
    _ollama,
    _openai_chat,
    normalize,
)

Body = Callable[[str], dict[str, Any]]


def _chat(reason: str) -> dict[str, Any]:
    call = {"id": "c1", "type": "function", "function": {"name": "run", "arguments": "{}"}}
    message = {"role": "assistant", "content": "hi", "tool_calls": [call]}
    return {"choices": [{"index": 0, "message": message, "finish_reason": reason}]}


def _litellm(reason: str) -> dict[str, Any]:
    body = _chat("stop")
    body["choices"][0]["provider_specific_fields"] = {"native_finish_reason": reason}
    return body


def _anthropic_body(reason: str) -> dict[str, Any]:
    content = [
        {"type": "text", "text": "hi"},
        {"type": "tool_use", "id": "c1", "name": "run", "input": {}},
    ]
    return {"type": "message", "content": content, "stop_reason": reason}


def _gemini_body(reason: str) -> dict[str, Any]:
    parts = [{"text": "hi"}, {"functionCall": {"name": "run", "args": {}}}]
    return {"candidates": [{"content": {"parts": parts}, "finishReason": reason}]}


def _bedrock_body(reason: str) -> dict[str, Any]:
    content = [{"text": "hi"}, {"toolUse": {"toolUseId": "c1", "name": "run", "input": {}}}]
    return {"output": {"message": {"content": content}}, "stopReason": reason}


def _ollama_body(reason: str) -> dict[str, Any]:
    message = {"content": "hi", "tool_calls": [{"function": {"name": "run", "arguments": {}}}]}
    return {"message": message, "done": True, "done_reason": reason}


def _cohere_body(reason: str) -> dict[str, Any]:
    call = {"id": "c1", "type": "function", "function": {"name": "run", "arguments": "{}"}}
    message = {"content": [{"type": "text", "text": "hi"}], "tool_calls": [call]}
    return {"message": message, "finish_reason": reason}


def _responses_body(status: str) -> dict[str, Any]:
    output = [
        {"type": "message", "content": [{"type": "output_text", "text": "hi"}]},
        {"type": "function_call", "call_id": "c1", "name": "run", "arguments": "{}"},
    ]
    return {"object": "response", "status": status, "output": output}


def _failures(table: dict[str, FinishReason]) -> list[str]:
    return sorted(raw for raw, mapped in table.items() if mapped is FinishReason.ERROR)


CASES: list[tuple[str, Body, str]] = [
    *(("openai", _chat, r) for r in _failures(_openai_chat.TABLE)),
    *(("anthropic", _anthropic_body, r) for r in _failures(_anthropic.TABLE)),
    *(("gemini", _gemini_body, r) for r in _failures(_gemini.TABLE)),
    *(("bedrock", _bedrock_body, r) for r in _failures(_bedrock.TABLE)),
    *(("ollama", _ollama_body, r) for r in _failures(_ollama.TABLE)),
    *(("cohere", _cohere_body, r) for r in _failures(_cohere.TABLE)),
    *(("litellm", _litellm, r) for r in ("MALFORMED_FUNCTION_CALL", "malformed_tool_use")),
    ("openai_responses", _responses_body, "failed"),
    ("openai_responses", _responses_body, "cancelled"),
]
IDS = [f"{provider}-{reason}" for provider, _, reason in CASES]


class TestFailedTurns:
    """A turn whose finish reason reports a failure."""

    def test_the_review_covers_the_documented_failures(self) -> None:
        """The documented failure reasons named in the issue are all mapped to ERROR."""
        raws = {reason for _, _, reason in CASES}
        expected = {
            "error",
            "insufficient_system_resource",
            "malformed_tool_use",
            "malformed_model_output",
            "MALFORMED_FUNCTION_CALL",
            "UNEXPECTED_TOOL_CALL",
            "TOO_MANY_TOOL_CALLS",
            "LANGUAGE",
            "OTHER",
            "failed",
        }
        assert expected <= raws

    @pytest.mark.parametrize(("provider", "body", "reason"), CASES, ids=IDS)
    def test_a_failed_turn_is_read_as_error(self, provider: str, body: Body, reason: str) -> None:
        """The finish reason is ERROR and the raw reason is kept."""
        turn = normalize(body(reason), provider)
        assert turn.finish_reason is FinishReason.ERROR
        assert turn.raw_finish_reason == reason

    @pytest.mark.parametrize(("provider", "body", "reason"), CASES, ids=IDS)
    def test_a_failed_turn_never_executes_nor_completes(
        self, provider: str, body: Body, reason: str
    ) -> None:
        """Repeated until the run ends, the turn never runs its call and never completes."""
        ctl = af.Controller(af.Policy(max_retries=2))
        for _ in range(10):
            decision = ctl.on_model_output(normalize(body(reason), provider))
            assert decision.action is not Action.EXECUTE_TOOLS
            assert decision.action is not Action.FINAL
            if ctl.done:
                break
        assert ctl.done
        assert ctl.exit_reason in (ExitReason.PROVIDER_ERROR, ExitReason.UNRECOVERABLE_OUTPUT)

    @pytest.mark.parametrize("reason", sorted(_gemini.BROKEN | _bedrock.BROKEN))
    def test_a_malformed_call_is_retried_first(self, reason: str) -> None:
        """Malformed or unexpected calls are retried at P0 before the run gives up."""
        body = _gemini_body(reason) if reason.isupper() else _bedrock_body(reason)
        decision = af.Controller().on_model_output(body)
        assert decision.action is Action.RETRY
        assert decision.priority == "P0"


class TestUnfinishedResponses:
    """A Responses body that is not finished yet."""

    @pytest.mark.parametrize("status", ["in_progress", "queued"])
    def test_an_unfinished_response_is_never_executed(self, status: str) -> None:
        """A response still in progress is truncated: its calls wait for the finished one."""
        turn = normalize(_responses_body(status))
        assert turn.truncated
        decision = af.Controller().on_model_output(turn)
        assert decision.action is Action.RETRY
