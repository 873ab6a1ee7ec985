"""The chat reader gives the turn a body's fields say, by the API's rules, on normalize's path."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from agentfsm._model.types import FinishReason
from agentfsm.providers import normalize
from agentfsm.providers._openai_chat import TABLE, read_body

JSON_SCALARS = (
    st.none() | st.booleans() | st.integers(-5, 10**6) | st.floats() | st.text(max_size=8)
)
FLAT_ARGS = st.dictionaries(st.text(max_size=5), JSON_SCALARS, max_size=4)
ANY_ARGS = FLAT_ARGS | st.dictionaries(st.text(max_size=3), st.lists(JSON_SCALARS, max_size=2))


def _argument_text(args: dict[str, Any], draw: Any) -> Any:
    text = json.dumps(args)
    return draw(st.sampled_from([text, f" {text} ", text[:-1], "", None, args, "[1]"]))


@st.composite
def bodies(draw: Any) -> dict[str, Any]:
    """Chat completion bodies, well formed or not in any of the fields the reader reads."""
    calls = [
        {
            "id": draw(st.sampled_from([f"call_{k}", "", None, 7])),
            "type": "function",
            "function": {
                "name": draw(st.sampled_from(["echo", "", None])),
                "arguments": _argument_text(draw(ANY_ARGS), draw),
            },
        }
        for k in range(draw(st.integers(0, 3)))
    ]
    message: dict[str, Any] = {"role": "assistant"}
    for key, values in {
        "content": st.none() | st.text(max_size=8) | st.just([{"type": "text", "text": "a"}]),
        "tool_calls": st.just(calls) | st.none() | st.just("x"),
        "refusal": st.none() | st.text(max_size=4),
        "reasoning_content": st.none() | st.text(max_size=4),
        "reasoning": st.none() | st.text(max_size=4),
    }.items():
        if draw(st.booleans()):
            message[key] = draw(values)
    choice: dict[str, Any] = {"index": 0, "message": message}
    if draw(st.booleans()):
        choice["finish_reason"] = draw(st.sampled_from([*TABLE, "", "other", None, 3]))
    body: dict[str, Any] = {"id": "chatcmpl-1", "object": "chat.completion", "choices": [choice]}
    if draw(st.booleans()):
        usage: dict[str, Any] = {
            "prompt_tokens": draw(st.integers(0, 10**6) | st.floats() | st.none()),
            "completion_tokens": draw(st.integers(0, 10**6) | st.booleans()),
        }
        if draw(st.booleans()):
            usage["cost"] = draw(st.floats(0, 1) | st.text(max_size=2))
        body["usage"] = usage
    if draw(st.booleans()):
        body["model"] = draw(st.sampled_from(["gpt-x", "", None]))
    if draw(st.booleans()):
        body["error"] = draw(st.sampled_from([None, "", {"message": "boom", "code": 500}]))
    return body


class TestChatBodyReader:
    """`read_body`, the chat format's one reader, against the fields of the body."""

    @given(bodies())
    def test_the_turn_is_what_the_body_says(self, body: dict[str, Any]) -> None:
        """Text, finish, usage, refusal, reasoning and model are the body's, coerced as said."""
        turn = read_body(body, "openai").build()
        choice = body["choices"][0]
        message = choice["message"]
        content = message.get("content")
        assert turn.text == (content if isinstance(content, str) else "a" if content else "")
        raw = choice.get("finish_reason")
        assert turn.raw_finish_reason == (raw if isinstance(raw, str) else None)
        mapped = TABLE.get(raw, FinishReason.UNKNOWN) if isinstance(raw, str) else None
        assert turn.finish_reason is (mapped or FinishReason.UNKNOWN)
        assert turn.truncated is (turn.finish_reason is FinishReason.LENGTH)
        assert turn.refusal == (message.get("refusal") or None)
        reasoning = message.get("reasoning_content") or message.get("reasoning")
        assert turn.reasoning == (reasoning or None)
        assert turn.model == (body.get("model") or None)
        usage = body.get("usage")
        if usage is None:
            assert turn.usage is None
        else:
            assert turn.usage is not None
            prompt = usage["prompt_tokens"]
            expected = prompt if type(prompt) is int else 0
            if type(prompt) is float and prompt == prompt and abs(prompt) < 1e18:
                expected = int(prompt)
            assert turn.usage.input_tokens == expected
            done = usage["completion_tokens"]
            assert turn.usage.output_tokens == (done if type(done) is int else 0)
        assert (turn.error is not None) is bool(body.get("error"))

    @given(bodies())
    def test_calls_carry_their_arguments_or_an_error(self, body: dict[str, Any]) -> None:
        """Each call is parsed from its JSON text; anything but an object is kept broken."""
        turn = read_body(body, "openai").build()
        calls = body["choices"][0]["message"].get("tool_calls")
        sent = calls if isinstance(calls, list) else []
        assert len(turn.tool_calls) == len(sent)
        for call, wire in zip(turn.tool_calls, sent, strict=True):
            function = wire["function"]
            assert call.id == (wire["id"] if isinstance(wire["id"], str) else "")
            raw = function["arguments"]
            if not function["name"]:  # never runnable; a broken argument text is named first
                assert call.arguments is None
                assert call.error is not None
                continue
            if isinstance(raw, str) and raw.strip().startswith("{"):
                try:
                    parsed = json.loads(raw)
                except ValueError:
                    parsed = None
                assert call.arguments == parsed
                assert (call.error is None) is (parsed is not None)
            elif raw is None or (isinstance(raw, str) and not raw.strip()):
                assert call.arguments == {}
            elif isinstance(raw, dict):
                assert call.arguments == raw
            else:
                assert call.arguments is None
                assert call.error is not None

    @given(bodies())
    def test_normalize_reads_through_the_reader(self, body: dict[str, Any]) -> None:
        """Detected or named, a chat body takes the one path: the reader's turn."""
        turn = read_body(body, "openai").build()
        assert normalize(body) == turn
        assert normalize(body, "openai") == turn

    @given(bodies())
    def test_a_message_alone_reads_as_in_its_body(self, body: dict[str, Any]) -> None:
        """An assistant message read alone (a chat history's) gives its body's answer, calls,
        refusal and reasoning; it carries no finish claim, usage or model of its own."""
        whole = normalize(body)
        alone = normalize(body["choices"][0]["message"])
        assert (alone.provider, alone.finish_reason, alone.raw_finish_reason) == (
            "openai",
            FinishReason.UNKNOWN,
            None,
        )
        assert (alone.usage, alone.model, alone.error, alone.truncated) == (None, None, None, False)
        fields = ("text", "tool_calls", "refusal", "reasoning")
        assert [getattr(alone, f) for f in fields] == [getattr(whole, f) for f in fields]
