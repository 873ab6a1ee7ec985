"""Every kind of output is read or refused out loud: calls keep their kind, nothing vanishes.

OpenAI's `[DONE]` sentinel, Cohere v2 streams, Responses items the host runs,
a program's waiting call, refusals held by frameworks, and the rule that a kind of output
agentfsm does not read is a clear decision (RETRY or a named STOP), never CONTINUE.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

import agentfsm as af
from agentfsm import Action, ExitReason, FinishReason

A, F, X = Action, FinishReason, ExitReason


def decide(payload: object) -> af.Decision:
    """The default controller's decision on one model output."""
    return af.Controller().on_model_output(payload)


def sse(*events: object) -> str:
    """A raw SSE stream as OpenAI sends it: one `data:` line per event, then `[DONE]`."""
    lines = [f"data: {json.dumps(event)}\n\n" for event in events]
    return "".join(lines) + "data: [DONE]\n\n"


def chunk(delta: dict[str, Any], finish: str | None = None, index: int = 0) -> dict[str, Any]:
    """A chat completion chunk of one choice."""
    choice = {"index": index, "delta": delta, "finish_reason": finish}
    return {"object": "chat.completion.chunk", "choices": [choice]}


def tool_delta(arguments: str, **first: str) -> dict[str, Any]:
    """A tool-call delta of call 0 (`first` gives the id and name of its first piece)."""
    function = {"arguments": arguments}
    if "name" in first:
        function["name"] = first["name"]
    return {"tool_calls": [{"index": 0, "id": first.get("id"), "function": function}]}


def response(*output: dict[str, Any], status: str = "completed") -> dict[str, Any]:
    """A Responses API body."""
    return {"object": "response", "status": status, "output": list(output)}


def message(text: str) -> dict[str, Any]:
    """A Responses message item holding one output_text part."""
    return {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text}],
    }


class TestDoneSentinel:
    """OpenAI's `data: [DONE]` ends a raw SSE stream; it never damages it."""

    CALL = sse(
        chunk(tool_delta('{"city": ', id="call_1", name="weather")),
        chunk(tool_delta('"Paris"}')),
        chunk({}, "tool_calls"),
    )

    def test_complete_call_runs(self) -> None:
        """A complete streamed call followed by `[DONE]` is executed, not retried."""
        turn = af.normalize(self.CALL)
        assert (turn.truncated, turn.error) == (False, None)
        assert decide(self.CALL).action is A.EXECUTE_TOOLS

    def test_plain_answer_is_final(self) -> None:
        """A plain streamed answer followed by `[DONE]` is the final answer."""
        stream = sse(chunk({"content": "Paris."}), chunk({}, "stop"))
        decision = decide(stream)
        assert (decision.action, decision.exit_reason) == (A.FINAL, X.COMPLETED)

    def test_done_in_byte_pieces(self) -> None:
        """`[DONE]` split across byte chunks ends the stream as cleanly."""
        data = self.CALL.encode()
        accumulator = af.StreamAccumulator()
        accumulator.extend(data[start : start + 5] for start in range(0, len(data), 5))
        accumulator.end()
        assert accumulator.turn().truncated is False

    def test_a_broken_event_still_damages(self) -> None:
        """A `data:` line that is neither JSON nor `[DONE]` still marks the stream damaged."""
        stream = self.CALL.replace("data: [DONE]", "data: [DONE")
        turn = af.normalize(stream)
        assert turn.truncated
        assert "not valid JSON" in (turn.error or "")


class TestChatChoices:
    """A chat stream read as one turn follows one choice."""

    def test_n_choices_are_not_interleaved(self) -> None:
        """Chunks of choices 1 and 2 (`n=3`) do not mix into choice 0's text."""
        stream = sse(
            chunk({"content": "A"}, index=0),
            chunk({"content": "B"}, index=1),
            chunk({"content": "a"}, index=0),
            chunk({"content": "b"}, index=1),
            chunk({}, "stop", index=0),
            chunk({}, "stop", index=1),
        )
        assert af.normalize(stream).text == "Aa"


class TestChatAudio:
    """An audio answer's transcript is its text, never an empty answer."""

    def test_body(self) -> None:
        """A body with `audio` and no `content` reads its transcript as the answer."""
        audio = {"id": "a", "data": "UklG", "transcript": "Hello there."}
        body = {
            "object": "chat.completion",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": None, "audio": audio},
                    "finish_reason": "stop",
                }
            ],
        }
        assert af.normalize(body).text == "Hello there."
        assert decide(body).action is A.FINAL

    def test_stream(self) -> None:
        """Streamed transcript pieces join into the answer."""
        stream = sse(
            chunk({"audio": {"id": "a", "transcript": "Hel"}}),
            chunk({"audio": {"data": "UklG", "transcript": "lo"}}),
            chunk({}, "stop"),
        )
        assert af.normalize(stream).text == "Hello"


def cohere(kind: str, message: dict[str, Any] | None = None, **fields: Any) -> dict[str, Any]:
    """A Cohere v2 chat stream event."""
    event: dict[str, Any] = {"type": kind, **fields}
    if message is not None:
        event["delta"] = {"message": message}
    return event


def cohere_call(*, end: bool = True) -> list[dict[str, Any]]:
    """A Cohere stream that calls `weather` with arguments in two pieces."""
    start = {"tool_calls": {"id": "w_1", "type": "function", "function": {"name": "weather"}}}
    events = [
        cohere("message-start", {"role": "assistant"}, id="m"),
        cohere("tool-plan-delta", {"tool_plan": "I will look it up."}),
        cohere("tool-call-start", start, index=0),
        cohere("tool-call-delta", {"tool_calls": {"function": {"arguments": '{"city":'}}}, index=0),
        cohere("tool-call-delta", {"tool_calls": {"function": {"arguments": '"Oslo"}'}}}, index=0),
    ]
    if end:
        events.append(cohere("tool-call-end", index=0))
        events.append({"type": "message-end", "delta": {"finish_reason": "TOOL_CALL"}})
    return events


class TestCohereStream:
    """Cohere v2 chat streams are read event by event."""

    def test_tool_call(self) -> None:
        """Streamed argument pieces make one complete call; the plan is reasoning."""
        turn = af.normalize(cohere_call())
        call = turn.tool_calls[0]
        assert (turn.provider, turn.finish_reason, turn.raw_finish_reason) == (
            "cohere",
            F.TOOL_CALLS,
            "TOOL_CALL",
        )
        assert (call.id, call.name, call.arguments) == ("w_1", "weather", {"city": "Oslo"})
        assert turn.reasoning == "I will look it up."

    def test_text_and_thinking(self) -> None:
        """Content deltas are the answer; thinking deltas are reasoning."""
        events = [
            cohere("message-start", {}),
            cohere("content-start", {"content": {"type": "thinking", "thinking": ""}}, index=0),
            cohere("content-delta", {"content": {"thinking": "2+2"}}, index=0),
            cohere("content-end", index=0),
            cohere("content-start", {"content": {"type": "text", "text": ""}}, index=1),
            cohere("content-delta", {"content": {"text": "Four."}}, index=1),
            cohere("content-end", index=1),
            {"type": "message-end", "delta": {"finish_reason": "COMPLETE"}},
        ]
        turn = af.normalize(events)
        assert (turn.text, turn.reasoning, turn.finish_reason) == ("Four.", "2+2", F.STOP)
        assert decide(events).action is A.FINAL

    def test_cut_stream(self) -> None:
        """A stream that ends before `tool-call-end` is truncated and its call is not run."""
        turn = af.normalize(cohere_call(end=False))
        assert turn.truncated
        assert not turn.tool_calls[0].complete
        assert decide(cohere_call(end=False)).action is A.RETRY

    def test_one_event_alone(self) -> None:
        """A lone v2 stream event is recognised as Cohere's."""
        assert af.detect_provider(cohere("message-start", {})) == "cohere"


class TestResponsesClientItems:
    """Responses items the host runs are calls that keep their kind."""

    @pytest.mark.parametrize(
        ("item", "name", "arguments"),
        [
            (
                {"type": "custom_tool_call", "call_id": "c1", "name": "sql", "input": "SELECT 1"},
                "sql",
                {"input": "SELECT 1"},
            ),
            (
                {"type": "local_shell_call", "call_id": "c1", "action": {"command": ["ls"]}},
                "local_shell",
                {"command": ["ls"]},
            ),
            (
                {"type": "shell_call", "call_id": "c1", "action": {"commands": ["pwd"]}},
                "shell",
                {"commands": ["pwd"]},
            ),
            (
                {"type": "apply_patch_call", "call_id": "c1", "operation": {"path": "a.md"}},
                "apply_patch",
                {"path": "a.md"},
            ),
            (
                {"type": "computer_call", "call_id": "c1", "action": {"type": "click"}},
                "computer",
                {"action": {"type": "click"}},
            ),
            (
                {
                    "type": "tool_search_call",
                    "call_id": "c1",
                    "execution": "client",
                    "arguments": {"goal": "weather"},
                },
                "tool_search",
                {"goal": "weather"},
            ),
        ],
    )
    def test_item_is_a_call(self, item: dict[str, Any], name: str, arguments: Any) -> None:
        """The item is a complete call named for its tool, of its item type, run by the host."""
        body = response({**item, "status": "completed"})
        call = af.normalize(body).tool_calls[0]
        assert (call.id, call.name, call.arguments, call.kind) == (
            "c1",
            name,
            arguments,
            item["type"],
        )
        assert decide(body).action is A.EXECUTE_TOOLS

    def test_computer_batched_actions(self) -> None:
        """A computer call's batched actions and pending safety checks reach the host."""
        checks = [{"id": "s1", "code": "malicious_instructions"}]
        item = {
            "type": "computer_call",
            "call_id": "c1",
            "actions": [{"type": "click"}],
            "pending_safety_checks": checks,
        }
        call = af.normalize(response(item)).tool_calls[0]
        assert call.arguments == {"actions": [{"type": "click"}], "pending_safety_checks": checks}

    def test_item_without_its_work_is_not_run(self) -> None:
        """A shell call that carries no action is kept but never executed as an empty call."""
        item = {"type": "shell_call", "call_id": "c1", "status": "completed"}
        call = af.normalize(response(item)).tool_calls[0]
        assert (call.kind, call.complete) == ("shell_call", False)
        assert decide(response(item)).action is A.RETRY

    def test_custom_input_kept_raw(self) -> None:
        """A custom tool's free-form input is also kept exactly as received."""
        item = {"type": "custom_tool_call", "call_id": "c1", "name": "sql", "input": "{not json"}
        call = af.normalize(response(item)).tool_calls[0]
        assert (call.raw_arguments, call.complete) == ("{not json", True)

    def test_mcp_approval_request(self) -> None:
        """An MCP approval request is a call the host answers (`mcp_approval_response`)."""
        item = {
            "type": "mcp_approval_request",
            "id": "mcpr_1",
            "name": "shorten",
            "arguments": "{}",
        }
        call = af.normalize(response(item)).tool_calls[0]
        assert (call.id, call.name, call.kind) == ("mcpr_1", "shorten", "mcp_approval_request")

    def test_server_tool_search_is_not_a_call(self) -> None:
        """A tool search the server ran is counted, never handed to the host."""
        item = {"type": "tool_search_call", "execution": "server", "arguments": {}}
        turn = af.normalize(response(item, message("ok")))
        assert (turn.tool_calls, turn.server_tool_calls) == ([], 1)

    def test_hosted_shell_is_not_a_call(self) -> None:
        """A shell call whose output is already in the response ran on the server."""
        call = {"type": "shell_call", "call_id": "s1", "action": {"commands": ["ls"]}}
        output = {"type": "shell_call_output", "call_id": "s1", "output": []}
        turn = af.normalize(response(call, output, message("done")))
        assert (turn.tool_calls, turn.server_tool_calls) == ([], 1)

    def test_function_calls_keep_the_default_kind(self) -> None:
        """A plain function call is of kind `function`."""
        item = {"type": "function_call", "call_id": "f", "name": "f", "arguments": "{}"}
        assert af.normalize(response(item)).tool_calls[0].kind == "function"


PROGRAM = {"type": "program", "call_id": "p1", "code": "await tools.stock({})"}
"""An OpenAI `program` item: code the model wrote, run on OpenAI's side."""
WAITING = {
    "type": "function_call",
    "status": "in_progress",
    "call_id": "c1",
    "name": "stock",
    "arguments": '{"sku": "1"}',
    "caller": {"type": "program", "caller_id": "p1"},
}
"""The program's call of a client tool, waiting for the host's result."""


class TestProgrammaticToolCalling:
    """A program's call waiting for the host is a call to run."""

    def test_waiting_call_runs(self) -> None:
        """An in-progress call in a completed response is executed; the program is the server's."""
        body = response(PROGRAM, WAITING)
        turn = af.normalize(body)
        assert (turn.tool_calls[0].arguments, turn.server_tool_calls) == ({"sku": "1"}, 1)
        assert decide(body).action is A.EXECUTE_TOOLS

    @pytest.mark.needs("agents")
    def test_agents_sdk_waiting_call_runs(self) -> None:
        """The Agents SDK drops the response status; a program's waiting call still runs."""
        from agents.items import ModelResponse as AgentsResponse
        from agents.usage import Usage
        from openai.types.responses import ResponseFunctionToolCall

        call = ResponseFunctionToolCall.model_validate(WAITING)
        reply = AgentsResponse(output=[call], usage=Usage(), response_id=None)
        decision = decide(reply)
        assert (decision.action, [c.name for c in decision.tool_calls]) == (
            A.EXECUTE_TOOLS,
            ["stock"],
        )

    def test_unfinished_response_is_not_run(self) -> None:
        """The same call inside a response still in progress is unfinished: never run."""
        decision = decide(response(PROGRAM, WAITING, status="in_progress"))
        assert decision.action is A.RETRY
        assert decision.tool_calls == []


CODE = {"type": "server_tool_use", "id": "srv_1", "name": "code_execution", "input": {}}
"""Anthropic code execution, run on Anthropic's side."""
CALLED = {
    "type": "tool_use",
    "id": "toolu_1",
    "name": "roll",
    "input": {},
    "caller": {"type": "code_execution_20250825", "tool_id": "srv_1"},
}
"""A client tool called by that code."""
RESULT = {"type": "code_execution_tool_result", "tool_use_id": "srv_1", "content": {}}
"""The code's result: every call it made has been answered."""


class TestAnthropicProgrammaticCalls:
    """Calls code execution made and already got answers for are history, not calls to run."""

    def body(self, *blocks: dict[str, Any], stop: str) -> dict[str, Any]:
        """A Messages body."""
        return {"type": "message", "content": list(blocks), "stop_reason": stop}

    def test_waiting_call_runs(self) -> None:
        """A call from running code waits for the host: it is executed."""
        assert decide(self.body(CODE, CALLED, stop="tool_use")).action is A.EXECUTE_TOOLS

    def test_answered_call_is_history(self) -> None:
        """Once the code's result is in the content, its calls were answered: it is final."""
        text = {"type": "text", "text": "Player 1 wins."}
        body = self.body(CODE, CALLED, RESULT, text, stop="end_turn")
        assert af.normalize(body).tool_calls == []
        assert decide(body).action is A.FINAL

    def test_several_messages_read_as_the_last(self) -> None:
        """A recording of several streamed messages reads as its last message."""
        events = [
            {"type": "message_start", "message": {"model": "m", "usage": {}}},
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": "Rolling."},
            },
            {"type": "content_block_stop", "index": 0},
            {"type": "content_block_start", "index": 1, "content_block": CALLED},
            {"type": "content_block_stop", "index": 1},
            {"type": "message_delta", "delta": {"stop_reason": "tool_use"}},
            {"type": "message_stop"},
            {"type": "message_start", "message": {"model": "m", "usage": {}}},
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": "Done."},
            },
            {"type": "content_block_stop", "index": 0},
            {"type": "message_delta", "delta": {"stop_reason": "end_turn"}},
            {"type": "message_stop"},
        ]
        turn = af.normalize(events)
        assert (turn.text, turn.tool_calls, turn.finish_reason) == ("Done.", [], F.STOP)


class TestBedrockServerTools:
    """A toolUse Bedrock ran itself is counted, never run by the host."""

    def test_server_tool_use_in_a_stream(self) -> None:
        """Nova's code interpreter (`type: server_tool_use`) is not handed to the host."""
        events = [
            {"messageStart": {"role": "assistant"}},
            {
                "contentBlockStart": {
                    "contentBlockIndex": 0,
                    "start": {
                        "toolUse": {
                            "name": "nova_code",
                            "toolUseId": "t1",
                            "type": "server_tool_use",
                        }
                    },
                }
            },
            {"contentBlockDelta": {"contentBlockIndex": 0, "delta": {"toolUse": {"input": "{}"}}}},
            {"contentBlockStop": {"contentBlockIndex": 0}},
            {"contentBlockDelta": {"contentBlockIndex": 1, "delta": {"text": "4"}}},
            {"messageStop": {"stopReason": "end_turn"}},
        ]
        turn = af.normalize(events)
        assert (turn.tool_calls, turn.server_tool_calls, turn.text) == ([], 1, "4")


class TestFrameworkRefusals:
    """A refusal a framework keeps aside is a refusal: STOP, never an empty answer."""

    @pytest.mark.needs("langchain_core")
    def test_langchain_additional_kwargs(self) -> None:
        """langchain-openai's `additional_kwargs["refusal"]` ends the run REFUSAL."""
        from langchain_core.messages import AIMessage

        ai = AIMessage(content="", additional_kwargs={"refusal": "I can't help with that."})
        assert af.normalize(ai).refusal == "I can't help with that."
        decision = decide(ai)
        assert (decision.action, decision.exit_reason) == (A.STOP, X.REFUSAL)

    @pytest.mark.needs("langchain_core")
    def test_langchain_refusal_block(self) -> None:
        """A `refusal` content block (langchain-openai on the Responses API) is a refusal."""
        from langchain_core.messages import AIMessage

        ai = AIMessage(content=[{"type": "refusal", "refusal": "No."}])
        assert decide(ai).exit_reason is X.REFUSAL

    @pytest.mark.needs("langchain_core")
    def test_langchain_dump(self) -> None:
        """The refusal survives `model_dump()`."""
        from langchain_core.messages import AIMessage

        ai = AIMessage(content="", additional_kwargs={"refusal": "No."})
        assert decide(ai.model_dump()).exit_reason is X.REFUSAL

    @pytest.mark.needs("pydantic_ai")
    def test_pydantic_ai_provider_details(self) -> None:
        """pydantic-ai's empty response with `provider_details["refusal"]` is a refusal."""
        from pydantic_ai.messages import ModelResponse

        reply = ModelResponse(
            parts=[], finish_reason="content_filter", provider_details={"refusal": "No."}
        )
        turn = af.normalize(reply)
        assert (turn.refusal, turn.finish_reason) == ("No.", F.REFUSAL)
        assert decide(reply).exit_reason is X.REFUSAL

    @pytest.mark.needs("agents")
    def test_agents_sdk_refusal_part(self) -> None:
        """An Agents SDK response whose message holds a refusal part is a refusal."""
        from agents.items import ModelResponse as AgentsResponse
        from agents.usage import Usage
        from openai.types.responses import ResponseOutputMessage, ResponseOutputRefusal

        part = ResponseOutputRefusal(type="refusal", refusal="No.")
        item = ResponseOutputMessage(
            id="m", type="message", role="assistant", status="completed", content=[part]
        )
        reply = AgentsResponse(output=[item], usage=Usage(), response_id=None)
        assert decide(reply).exit_reason is X.REFUSAL

    def test_chat_message_refusal_part(self) -> None:
        """An assistant message whose content holds a `refusal` part is a refusal."""
        msg = {"role": "assistant", "content": [{"type": "refusal", "refusal": "No."}]}
        assert decide(msg).exit_reason is X.REFUSAL


def anthropic_stream(*middle: dict[str, Any]) -> list[dict[str, Any]]:
    """A complete Messages stream with `middle` events between a text block and the stop."""
    return [
        {"type": "message_start", "message": {"model": "m", "usage": {}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}},
        *middle,
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}},
        {"type": "message_stop"},
    ]


UNKNOWN: dict[str, object] = {
    "responses item": response(message("Here."), {"type": "hologram_call", "call_id": "h"}),
    "responses message part": response(
        {"type": "message", "content": [{"type": "output_hologram", "data": "..."}]}
    ),
    "anthropic block": {
        "type": "message",
        "content": [{"type": "text", "text": "Hi"}, {"type": "hologram", "data": "..."}],
        "stop_reason": "end_turn",
    },
    "anthropic event": anthropic_stream({"type": "hologram_start", "index": 0}),
    "anthropic delta": anthropic_stream(
        {"type": "content_block_delta", "index": 0, "delta": {"type": "hologram_delta"}}
    ),
    "gemini part": {
        "candidates": [
            {
                "content": {
                    "parts": [{"text": "Here."}, {"inlineData": {"mimeType": "image/png"}}]
                },
                "finishReason": "STOP",
            }
        ]
    },
    "bedrock block": {
        "output": {"message": {"content": [{"text": "Here."}, {"hologram": {}}]}},
        "stopReason": "end_turn",
    },
    "bedrock event": [
        {"messageStart": {"role": "assistant"}},
        {"contentBlockDelta": {"contentBlockIndex": 0, "delta": {"text": "Here."}}},
        {"hologramEvent": {}},
        {"messageStop": {"stopReason": "end_turn"}},
    ],
    "bedrock delta": [
        {"contentBlockDelta": {"contentBlockIndex": 0, "delta": {"text": "Here."}}},
        {"contentBlockDelta": {"contentBlockIndex": 0, "delta": {"hologram": {}}}},
        {"messageStop": {"stopReason": "end_turn"}},
    ],
    "cohere event": [
        cohere("content-delta", {"content": {"text": "Here."}}, index=0),
        cohere("hologram-delta", {}),
        {"type": "message-end", "delta": {"finish_reason": "COMPLETE"}},
    ],
}
"""One payload per reader, each holding output of a kind the reader does not know."""


def _langchain_block() -> Any:
    from langchain_core.messages import AIMessage

    return AIMessage(content=[{"type": "text", "text": "Here."}, {"type": "hologram"}])


def _pydantic_ai_part() -> Any:
    from pydantic_ai.messages import BinaryContent, FilePart, ModelResponse, TextPart

    return ModelResponse(
        parts=[
            TextPart(content="Here."),
            FilePart(content=BinaryContent(data=b"\x89PNG", media_type="image/png")),
        ],
        finish_reason="stop",
    )


FRAMEWORK_UNKNOWN = {
    "langchain block": ("langchain_core", _langchain_block),
    "pydantic-ai part": ("pydantic_ai", _pydantic_ai_part),
}
"""The same for the frameworks' readers: the module it needs, and how to build the payload."""

CASES = [
    *sorted(UNKNOWN),
    *(
        pytest.param(case, marks=pytest.mark.needs(module))
        for case, (module, _) in sorted(FRAMEWORK_UNKNOWN.items())
    ),
]


def unknown(case: str) -> Any:
    """The payload of `case`, built when the test runs (a framework's only if it is there)."""
    if case in FRAMEWORK_UNKNOWN:
        return FRAMEWORK_UNKNOWN[case][1]()
    return UNKNOWN[case]


class TestUnknownKinds:
    """Output of a kind no reader understands is a clear decision, never silently dropped."""

    @pytest.mark.parametrize("case", CASES)
    def test_never_continue_nor_final(self, case: str) -> None:
        """The decision is RETRY or a named STOP: never FINAL on what is left, nor CONTINUE."""
        decision = decide(unknown(case))
        assert decision.action in (A.RETRY, A.STOP)
        assert decision.action is A.RETRY or decision.exit_reason is not None

    @pytest.mark.parametrize("case", CASES)
    def test_the_turn_says_what(self, case: str) -> None:
        """The turn's error names what could not be read; the readable rest is kept."""
        turn = af.normalize(unknown(case))
        assert turn.truncated
        assert "does not read" in (turn.error or "")
        assert turn.text in ("Hi", "Here.", "")

    def test_a_kind_that_is_no_string(self) -> None:
        """A type that is a JSON array is refused like any unknown one, never a TypeError."""
        stream = anthropic_stream(
            {"type": "content_block_delta", "index": 0, "delta": {"type": ["text_delta"]}}
        )
        assert decide(stream).action is A.RETRY

    def test_retries_are_bounded(self) -> None:
        """The same unreadable output again and again ends the run UNRECOVERABLE_OUTPUT."""
        controller = af.Controller(af.Policy(max_retries=2))
        actions = [controller.on_model_output(UNKNOWN["responses item"]) for _ in range(3)]
        assert [d.action for d in actions] == [A.RETRY, A.RETRY, A.STOP]
        assert actions[-1].exit_reason is X.UNRECOVERABLE_OUTPUT
