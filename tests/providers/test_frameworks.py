"""Readers for what agent frameworks hold, as plain data (their objects: tests/integrations)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

import agentfsm as af
from agentfsm._model.types import FinishReason
from agentfsm.exceptions import AgentFSMError, PayloadError
from agentfsm.providers import detect_provider, normalize

A = af.Action


def assistant(*calls: tuple[str, str, str], content: str | None = None) -> dict[str, Any]:
    """An OpenAI chat assistant message dict, as a chat history holds it."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
            for i, n, a in calls
        ]
    return message


class TestAssistantMessage:
    """An OpenAI chat assistant message dict reads as a turn with no finish claim."""

    def test_with_tool_calls(self) -> None:
        """Its calls are read with their ids and parsed arguments."""
        turn = normalize(assistant(("c1", "get_weather", '{"city": "Paris"}')))
        assert [(c.id, c.name, c.arguments) for c in turn.tool_calls] == [
            ("c1", "get_weather", {"city": "Paris"})
        ]
        assert (turn.provider, turn.finish_reason) == ("openai", FinishReason.UNKNOWN)

    def test_without_tool_calls(self) -> None:
        """A text-only message reads as its text, with no calls."""
        turn = normalize(assistant(content="It is sunny."))
        assert (turn.text, turn.tool_calls) == ("It is sunny.", [])

    def test_detected_as_openai(self) -> None:
        """Detection names it openai, not anthropic (whose body also says role assistant)."""
        assert detect_provider(assistant(content="hi")) == "openai"

    def test_broken_arguments_kept_as_a_broken_call(self) -> None:
        """Unparseable arguments stay in the turn with an error, never executed."""
        turn = normalize(assistant(("c1", "f", '{"a": ')))
        assert turn.tool_calls[0].arguments is None
        assert turn.tool_calls[0].raw_arguments == '{"a": '

    def test_controller_executes_and_finishes(self) -> None:
        """The Controller takes the message dicts: calls run, then a text answer completes."""
        ctl = af.Controller()
        d = ctl.on_model_output(assistant(("c1", "f", "{}")))
        assert d.action is A.EXECUTE_TOOLS
        d = ctl.on_tool_results([{"role": "tool", "tool_call_id": "c1", "content": "ok"}])
        assert d.action is A.CONTINUE
        d = ctl.on_model_output(assistant(content="done"))
        assert (d.action, d.exit_reason) == (A.FINAL, af.ExitReason.COMPLETED)


class TestLangChainDump:
    """A LangChain AI message's model_dump() reads with its invalid calls and finish claim."""

    def dump(self, **fields: Any) -> dict[str, Any]:
        """An AIMessage.model_dump()-shaped dict."""
        base: dict[str, Any] = {
            "type": "ai",
            "content": "",
            "tool_calls": [],
            "invalid_tool_calls": [],
            "response_metadata": {},
            "usage_metadata": None,
        }
        return base | fields

    def test_invalid_tool_call_and_length(self) -> None:
        """An invalid call stays broken with its raw arguments; `length` marks truncation."""
        turn = normalize(
            self.dump(
                tool_calls=[{"name": "f", "args": {"a": 1}, "id": "c1", "type": "tool_call"}],
                invalid_tool_calls=[{"name": "g", "args": '{"b": ', "id": "c2", "error": None}],
                response_metadata={"finish_reason": "length"},
            )
        )
        assert [c.complete for c in turn.tool_calls] == [True, False]
        assert turn.tool_calls[1].raw_arguments == '{"b": '
        assert (turn.finish_reason, turn.truncated) == (FinishReason.LENGTH, True)

    @pytest.mark.parametrize(
        ("metadata", "expected"),
        [
            ({"stop_reason": "end_turn"}, FinishReason.STOP),
            ({"finish_reason": "MAX_TOKENS"}, FinishReason.LENGTH),
            ({"done_reason": "stop"}, FinishReason.STOP),
            ({"stop_reason": "refusal"}, FinishReason.REFUSAL),
            ({}, FinishReason.UNKNOWN),
        ],
    )
    def test_each_providers_finish_key(self, metadata: dict[str, str], expected: str) -> None:
        """The finish claim is read under each provider's own key in response_metadata."""
        assert normalize(self.dump(response_metadata=metadata)).finish_reason is expected

    def test_content_blocks_and_usage(self) -> None:
        """Text and thinking blocks are kept apart; usage_metadata becomes Usage."""
        turn = normalize(
            self.dump(
                content=[{"type": "thinking", "thinking": "hm"}, {"type": "text", "text": "hi"}],
                usage_metadata={"input_tokens": 3, "output_tokens": 2, "total_tokens": 5},
            )
        )
        assert (turn.text, turn.reasoning, turn.provider) == ("hi", "hm", "langchain")
        assert turn.usage is not None
        assert turn.usage.total_tokens == 5


class TestToolMessages:
    """Tool message dicts are taken as results by the Controller."""

    def running(self, *calls: tuple[str, str]) -> af.Controller:
        """A Controller waiting for the results of `calls` (id, name)."""
        ctl = af.Controller()
        ctl.on_model_output(assistant(*[(i, n, "{}") for i, n in calls]))
        return ctl

    def test_tool_role_dicts(self) -> None:
        """`{"role": "tool", "tool_call_id", "content"}` answers its call."""
        ctl = self.running(("c1", "f"), ("c2", "g"))
        d = ctl.on_tool_results(
            [
                {"role": "tool", "tool_call_id": "c1", "content": "one"},
                {"role": "tool", "tool_call_id": "c2", "content": [{"type": "text", "text": "2"}]},
            ]
        )
        assert (d.action, d.results) == (A.CONTINUE, [])

    def test_legacy_function_message(self) -> None:
        """A legacy `function` message answers the pending call with its name."""
        ctl = af.Controller()
        d = ctl.on_model_output(
            {
                "role": "assistant",
                "content": None,
                "function_call": {"name": "f", "arguments": "{}"},
            }
        )
        assert d.action is A.EXECUTE_TOOLS
        assert d.tool_calls[0].id
        d = ctl.on_tool_results([{"role": "function", "name": "f", "content": "ok"}])
        assert d.action is A.CONTINUE
        assert "no result" not in d.reason

    def test_function_message_for_no_pending_call(self) -> None:
        """A `function` message naming no pending call is refused; the Controller is unchanged."""
        ctl = self.running(("c1", "f"))
        with pytest.raises(PayloadError, match="'g' answers no pending call"):
            ctl.on_tool_results([{"role": "function", "name": "g", "content": "x"}])
        assert ctl.state == "execute"
        assert [c.id for c in ctl.pending_calls] == ["c1"]

    def test_tool_message_without_id(self) -> None:
        """A tool message with an empty tool_call_id is refused by name."""
        ctl = self.running(("c1", "f"))
        with pytest.raises(PayloadError, match="tool_call_id"):
            ctl.on_tool_results([{"role": "tool", "tool_call_id": "", "content": "x"}])


@dataclass
class ModelResponse:
    """A class named like a framework's model output, from a version no reader knows."""

    items: list[Any] = field(default_factory=list)


class AIMessage:
    """A LangChain-named class missing the fields the reader looks for."""

    type = "ai"


class TestUnknownShapes:
    """An object no reader knows raises PayloadError naming its type and the fields looked for."""

    @pytest.mark.parametrize("value", [ModelResponse(), AIMessage(), object()])
    def test_named_type_and_fields(self, value: object) -> None:
        """The message names the class and the fields each reader looks for."""
        with pytest.raises(PayloadError) as info:
            normalize(value)
        message = str(info.value)
        assert type(value).__qualname__ in message
        assert "response_id" in message
        assert "invalid_tool_calls" in message
        assert "parts" in message

    def test_through_the_controller(self) -> None:
        """The Controller raises the same AgentFSMError and stays awaiting the model."""
        ctl = af.Controller()
        with pytest.raises(AgentFSMError, match="ModelResponse"):
            ctl.on_model_output(ModelResponse())
        assert (ctl.state, ctl.turn) == ("await_model", 0)

    def test_a_message_list_no_reader_recognises(self) -> None:
        """A list of chat messages is not a stream: PayloadError, not an AttributeError."""
        with pytest.raises(PayloadError, match="stream"):
            normalize([{"role": "user", "content": "hi"}, {"role": "system", "content": "x"}])
