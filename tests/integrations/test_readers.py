"""`af.normalize` and the Controller read the frameworks' real objects (not imitations)."""

from __future__ import annotations

from typing import Any

import pytest
from agents.items import ModelResponse as AgentsResponse
from agents.testing import assistant_message, function_call
from agents.usage import Usage as AgentsUsage
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from pydantic_ai.messages import ModelResponse as PydanticResponse
from pydantic_ai.messages import TextPart, ThinkingPart, ToolCallPart
from pydantic_ai.usage import RequestUsage

import agentfsm as af
from agentfsm.exceptions import PayloadError

F = af.FinishReason


class TestLangChain:
    """LangChain's AIMessage and ToolMessage."""

    def test_ai_message_with_invalid_call(self) -> None:
        """Valid and invalid calls are read, the invalid one broken; `length` marks the cut."""
        message = AIMessage(
            content="",
            tool_calls=[{"name": "f", "args": {"a": 1}, "id": "c1"}],
            invalid_tool_calls=[{"name": "g", "args": '{"b": ', "id": "c2", "error": "bad"}],
            response_metadata={"finish_reason": "length", "model_name": "gpt-x"},
            usage_metadata={"input_tokens": 5, "output_tokens": 7, "total_tokens": 12},
        )
        turn = af.normalize(message)
        assert [(c.id, c.complete) for c in turn.tool_calls] == [("c1", True), ("c2", False)]
        assert "not valid JSON" in str(turn.tool_calls[1].error)
        assert (turn.finish_reason, turn.truncated, turn.model) == (F.LENGTH, True, "gpt-x")
        assert turn.usage is not None
        assert turn.usage.total_tokens == 12

    def test_tool_messages_as_results(self) -> None:
        """ToolMessages answer their calls; `status="error"` counts as an error result."""
        ctl = af.Controller()
        ctl.on_model_output(
            AIMessage(
                content="",
                tool_calls=[
                    {"name": "f", "args": {}, "id": "c1"},
                    {"name": "g", "args": {}, "id": "c2"},
                ],
            )
        )
        d = ctl.on_tool_results(
            [
                ToolMessage(content="ok", tool_call_id="c1"),
                ToolMessage(content="boom", tool_call_id="c2", status="error"),
            ]
        )
        assert (d.action, d.priority) == (af.Action.CONTINUE, "P5")

    def test_a_human_message_is_not_a_model_output(self) -> None:
        """A HumanMessage is refused with PayloadError naming what was looked for."""
        with pytest.raises(PayloadError, match="tool_calls"):
            af.normalize(HumanMessage(content="hi"))


class TestOpenAIAgents:
    """The Agents SDK's ModelResponse."""

    def response(self, *items: Any) -> AgentsResponse:
        """A ModelResponse of output items."""
        usage = AgentsUsage(requests=1, input_tokens=3, output_tokens=4, total_tokens=7)
        return AgentsResponse(output=list(items), usage=usage, response_id="r1")

    def test_calls_and_text(self) -> None:
        """Function calls and text are read through the Responses reader."""
        turn = af.normalize(
            self.response(assistant_message("hi"), function_call("f", {"a": 1}, call_id="c1"))
        )
        assert (turn.text, turn.tool_calls[0].arguments, turn.provider) == (
            "hi",
            {"a": 1},
            "openai_agents",
        )
        assert turn.finish_reason is F.TOOL_CALLS

    def test_incomplete_call_is_cut(self) -> None:
        """An item left `incomplete` marks the output truncated and the call broken."""
        cut = function_call("f", '{"a": 1}', call_id="c1").model_copy(
            update={"status": "incomplete"}
        )
        turn = af.normalize(self.response(cut))
        assert turn.truncated
        assert not turn.tool_calls[0].complete

    def test_an_incomplete_item_is_a_token_limit_cut(self) -> None:
        """The SDK drops the reason; an incomplete item reads as LENGTH, so the retry gets more."""
        cut = function_call("f", '{"a": 1}', call_id="c1").model_copy(
            update={"status": "incomplete"}
        )
        turn = af.normalize(self.response(cut))
        assert (turn.finish_reason, turn.raw_finish_reason) == (F.LENGTH, "incomplete")
        decision = af.Controller().on_model_output(self.response(cut))
        assert decision.action is af.Action.RETRY
        assert decision.adjust == {"max_tokens_factor": 2}


class TestPydanticAI:
    """pydantic-ai's ModelResponse."""

    def test_parts_finish_and_usage(self) -> None:
        """Text, thinking and calls are read; the finish reason and usage too."""
        response = PydanticResponse(
            parts=[
                ThinkingPart("hm"),
                TextPart("hi"),
                ToolCallPart("f", '{"a": 1}', tool_call_id="c1"),
            ],
            usage=RequestUsage(input_tokens=2, output_tokens=3),
            model_name="m",
            finish_reason="tool_call",
        )
        turn = af.normalize(response)
        assert (turn.text, turn.reasoning, turn.model) == ("hi", "hm", "m")
        assert turn.tool_calls[0].arguments == {"a": 1}
        assert turn.finish_reason is F.TOOL_CALLS
        assert turn.usage is not None
        assert turn.usage.total_tokens == 5

    def test_wrong_provider_name(self) -> None:
        """Naming another provider for a pydantic-ai object is refused by name."""
        with pytest.raises(PayloadError, match="pydantic_ai object, not openai"):
            af.normalize(PydanticResponse(parts=[TextPart("x")]), provider="openai")
