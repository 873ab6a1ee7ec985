"""Cohere v1 `/chat` bodies (`cohere.Client().chat`, `NonStreamedChatResponse`).

The bodies below follow the v1 Chat API reference and the SDK's
`NonStreamedChatResponse` and `ToolCall` types: the reply as top-level `text`, a
`generation_id` and `response_id`, `chat_history` (roles USER, CHATBOT, TOOL),
`finish_reason` (COMPLETE, STOP_SEQUENCE, MAX_TOKENS, ERROR, ERROR_TOXIC, ERROR_LIMIT,
USER_CANCEL), `meta` with `billed_units` and `tokens`, and `tool_calls` of a `name`
and a `parameters` object with no id.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import agentfsm as af
from agentfsm._model.types import Action, ExitReason, FinishReason, ModelTurn, Priority
from agentfsm.exceptions import PayloadError
from agentfsm.providers import detect_provider, normalize

CORPUS = Path(__file__).resolve().parents[2] / ".." / "shared" / "corpus"
REPORT = {"name": "query_daily_sales_report", "parameters": {"day": "2023-09-29"}}


def v1(text: str, finish_reason: str = "COMPLETE", **extra: Any) -> dict[str, Any]:
    """A v1 chat body with the fields every reply carries."""
    history = [
        {"role": "USER", "message": "What were the sales on September 29?"},
        {"role": "CHATBOT", "message": text},
    ]
    meta = {
        "api_version": {"version": "1"},
        "billed_units": {"input_tokens": 31, "output_tokens": 12},
        "tokens": {"input_tokens": 902, "output_tokens": 12},
    }
    return {
        "response_id": "7d4b4a1f-3b66-4a55-9c0a-7f35d1e3c5a2",
        "text": text,
        "generation_id": "f0a4b3f2-7c16-43c8-9a9e-4a1c2c1b6d1e",
        "chat_history": history,
        "finish_reason": finish_reason,
        "meta": meta,
        **extra,
    }


def decide(turn: ModelTurn, tools: list[str] | None = None) -> af.Decision:
    return af.Controller(af.Policy(), tools=tools).on_model_output(turn)


class TestV1Bodies:
    """v1 replies read as the API means them."""

    def test_text_answer(self) -> None:
        """A COMPLETE reply is a final answer; usage comes from `meta.tokens`."""
        turn = normalize(v1("Sales were $10,000 on September 29."))
        assert detect_provider(v1("x")) == "cohere"
        assert (turn.provider, turn.text, turn.finish_reason) == (
            "cohere",
            "Sales were $10,000 on September 29.",
            FinishReason.STOP,
        )
        assert turn.usage is not None
        assert (turn.usage.input_tokens, turn.usage.output_tokens) == (902, 12)
        decision = decide(turn)
        assert (decision.action, decision.exit_reason) == (Action.FINAL, ExitReason.COMPLETED)

    def test_tool_calls_without_ids(self) -> None:
        """`tool_calls` of name and parameters run, with ids agentfsm issues; the text
        beside them is the model's plan, kept as reasoning."""
        plan = "I will use the query_daily_sales_report tool to find the sales."
        turn = normalize(v1(plan, tool_calls=[REPORT, {**REPORT, "parameters": {}}]))
        assert [(c.name, c.arguments, c.id) for c in turn.tool_calls] == [
            ("query_daily_sales_report", {"day": "2023-09-29"}, ""),
            ("query_daily_sales_report", {}, ""),
        ]
        assert (turn.text, turn.reasoning) == ("", plan)
        decision = decide(turn, ["query_daily_sales_report"])
        assert (decision.action, decision.priority) == (Action.EXECUTE_TOOLS, Priority.P7)
        ids = [c.id for c in decision.tool_calls]
        assert all(ids)
        assert len(set(ids)) == 2

    def test_parameters_not_an_object_never_run(self) -> None:
        """Parameters that are not an object leave the call broken: retried, never run."""
        turn = normalize(v1("", tool_calls=[{**REPORT, "parameters": ["2023-09-29"]}]))
        assert not turn.tool_calls[0].complete
        assert decide(turn, ["query_daily_sales_report"]).action is Action.RETRY

    @pytest.mark.parametrize(
        ("reason", "finish", "truncated"),
        [
            ("MAX_TOKENS", FinishReason.LENGTH, True),
            ("ERROR_LIMIT", FinishReason.LENGTH, True),
            ("STOP_SEQUENCE", FinishReason.STOP, False),
            ("ERROR_TOXIC", FinishReason.CONTENT_FILTER, False),
            ("ERROR", FinishReason.ERROR, False),
            ("USER_CANCEL", FinishReason.ERROR, False),
        ],
    )
    def test_finish_reasons(self, reason: str, finish: FinishReason, truncated: bool) -> None:
        """Every v1 finish reason maps; a failed one is never a completed answer."""
        turn = normalize(v1("Sales were", reason))
        assert (turn.finish_reason, turn.raw_finish_reason, turn.truncated) == (
            finish,
            reason,
            truncated,
        )
        decision = decide(turn)
        if finish is not FinishReason.STOP:
            assert decision.exit_reason is not ExitReason.COMPLETED

    def test_billed_units_when_no_tokens(self) -> None:
        """Without `meta.tokens`, usage is the billed units."""
        body = v1("ok")
        del body["meta"]["tokens"]
        usage = normalize(body).usage
        assert usage is not None
        assert (usage.input_tokens, usage.output_tokens) == (31, 12)

    def test_json_text(self) -> None:
        """A v1 body as JSON text reads the same."""
        body = v1("Sales were $10,000.", tool_calls=[REPORT])
        assert normalize(json.dumps(body)) == normalize(body)


def _bodies() -> list[Path]:
    return sorted(
        path
        for folder in ("providers", "wire")
        for path in (CORPUS / folder).glob("*/*.json")
        if path.parent.name != "cohere"
    )


class TestNoConfusion:
    """Reading v1 takes no other format's body."""

    @pytest.mark.parametrize("path", _bodies(), ids=lambda p: f"{p.parent.name}/{p.name}")
    def test_other_bodies_are_not_cohere(self, path: Path) -> None:
        """No recorded body of another provider is detected as Cohere."""
        payload = json.loads(path.read_text(encoding="utf-8"))
        try:
            name = detect_provider(payload)
        except PayloadError:
            return
        assert name != "cohere"
