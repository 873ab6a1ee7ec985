"""OpenAI Responses API: bodies and stream events."""

from __future__ import annotations

import json
from typing import Any

from agentfsm._model.types import FinishReason
from agentfsm.providers import normalize


def response(
    output: list[dict[str, Any]], status: str = "completed", **extra: Any
) -> dict[str, Any]:
    """A Responses body."""
    return {"object": "response", "model": "m", "status": status, "output": output, **extra}


def function_call(name: str, arguments: str, call_id: str = "call_1") -> dict[str, Any]:
    """A function_call output item."""
    return {
        "type": "function_call",
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
        "status": "completed",
    }


class TestResponsesBody:
    """Non-streamed Responses bodies."""

    def test_incomplete_max_output_tokens(self) -> None:
        """`incomplete` for max_output_tokens is LENGTH and truncated."""
        details = {"reason": "max_output_tokens"}
        turn = normalize(response([], "incomplete", incomplete_details=details))
        assert (turn.finish_reason, turn.raw_finish_reason) == (
            FinishReason.LENGTH,
            "max_output_tokens",
        )
        assert turn.truncated

    def test_incomplete_content_filter(self) -> None:
        """`incomplete` for content_filter is CONTENT_FILTER and truncated."""
        details = {"reason": "content_filter"}
        turn = normalize(response([], "incomplete", incomplete_details=details))
        assert turn.finish_reason is FinishReason.CONTENT_FILTER
        assert turn.truncated

    def test_failed(self) -> None:
        """`failed` is ERROR with the error message."""
        turn = normalize(response([], "failed", error={"message": "server_error"}))
        assert (turn.finish_reason, turn.error) == (FinishReason.ERROR, "server_error")

    def test_completed_text_is_stop(self) -> None:
        """A completed message without calls is STOP with its text."""
        item = {"type": "message", "content": [{"type": "output_text", "text": "hi"}]}
        turn = normalize(response([item]))
        assert (turn.finish_reason, turn.text) == (FinishReason.STOP, "hi")

    def test_refusal_part(self) -> None:
        """A refusal content part goes to `refusal`."""
        item = {"type": "message", "content": [{"type": "refusal", "refusal": "no"}]}
        assert normalize(response([item])).refusal == "no"

    def test_parallel_wrapper_unwrapped(self) -> None:
        """`multi_tool_use.parallel` is unwrapped into the calls it carries."""
        uses = [
            {"recipient_name": "functions.weather", "parameters": {"city": "Paris"}},
            {"recipient_name": "functions.time", "parameters": {}},
        ]
        wrapper = function_call("multi_tool_use.parallel", json.dumps({"tool_uses": uses}), "cw")
        turn = normalize(response([wrapper]))
        assert [(c.id, c.name, c.arguments) for c in turn.tool_calls] == [
            ("cw_0", "weather", {"city": "Paris"}),
            ("cw_1", "time", {}),
        ]

    def test_tool_named_parallel_left_alone(self) -> None:
        """A user tool named `parallel` whose arguments do not name functions stays one call."""
        call = function_call("parallel", json.dumps({"tool_uses": [{"recipient_name": "x"}]}))
        assert [c.name for c in normalize(response([call])).tool_calls] == ["parallel"]

    def test_incomplete_item_broken(self) -> None:
        """A function_call item whose status is incomplete is not executable."""
        item = {**function_call("f", "{}"), "status": "incomplete"}
        assert not normalize(response([item])).tool_calls[0].complete

    def test_reasoning_and_server_tools(self) -> None:
        """Reasoning summaries go to `reasoning`; hosted tool calls are counted, not returned."""
        reasoning = {"type": "reasoning", "summary": [{"type": "summary_text", "text": "r"}]}
        search = {"type": "web_search_call", "status": "completed"}
        turn = normalize(response([reasoning, search]))
        assert (turn.reasoning, turn.server_tool_calls, turn.tool_calls) == ("r", 1, [])


class TestResponsesStream:
    """Responses stream events."""

    def events(self, terminal: bool) -> list[dict[str, Any]]:
        """A stream making one function call, with or without its terminal event."""
        added = {**function_call("f", ""), "status": "in_progress"}
        events: list[dict[str, Any]] = [
            {"type": "response.created", "response": {"status": "in_progress", "output": []}},
            {"type": "response.output_item.added", "output_index": 0, "item": added},
            {"type": "response.function_call_arguments.delta", "output_index": 0, "delta": '{"a"'},
            {"type": "response.function_call_arguments.delta", "output_index": 0, "delta": ": 1}"},
        ]
        if terminal:
            done = function_call("f", '{"a": 1}')
            events += [
                {"type": "response.output_item.done", "output_index": 0, "item": done},
                {"type": "response.completed", "response": {"status": "completed", "output": []}},
            ]
        return events

    def test_complete_stream(self) -> None:
        """A completed stream yields the call with its joined arguments."""
        turn = normalize(self.events(terminal=True))
        assert turn.finish_reason is FinishReason.TOOL_CALLS
        assert not turn.truncated
        assert turn.tool_calls[0].arguments == {"a": 1}

    def test_cut_stream(self) -> None:
        """A stream with no terminal event is truncated and its open call broken."""
        turn = normalize(self.events(terminal=False))
        assert turn.truncated
        assert turn.tool_calls[0].error is not None
        assert turn.tool_calls[0].raw_arguments == '{"a": 1}'

    def test_text_deltas(self) -> None:
        """Text deltas build the message text."""
        events = [
            {"type": "response.output_text.delta", "output_index": 0, "delta": "he"},
            {"type": "response.output_text.delta", "output_index": 0, "delta": "y"},
            {"type": "response.completed", "response": {"status": "completed"}},
        ]
        assert normalize(events).text == "hey"

    def test_error_event(self) -> None:
        """An error event sets the turn's error and truncates it."""
        events = [
            {"type": "response.created", "response": {}},
            {"type": "error", "message": "rate limited"},
        ]
        turn = normalize(events)
        assert (turn.error, turn.truncated) == ("rate limited", True)
