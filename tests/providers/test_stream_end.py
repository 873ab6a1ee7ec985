"""A chat stream the server ended with `data: [DONE]` is judged by its structure.

OpenRouter-style servers end a stream properly (`[DONE]`) without ever sending a
finish reason. Such a stream whose answer is there and whose calls' arguments are
whole JSON objects is complete: finish reason UNKNOWN, not truncated, and the
Controller uses it (FINAL or EXECUTE_TOOLS, the missing reason noted at P7). A
stream cut without `[DONE]`, or whose arguments do not parse, is still truncated.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import agentfsm as af
from agentfsm._model.types import Action, FinishReason, ModelTurn, Priority
from agentfsm.providers import StreamAccumulator, normalize

CORPUS = Path(__file__).resolve().parents[2] / ".." / "shared" / "corpus" / "providers"
DONE = "data: [DONE]\n\n"


def reasonless(name: str) -> list[dict[str, Any]]:
    """The chunks of a recorded chat stream with every finish reason taken out."""
    chunks = []
    for line in (CORPUS / name).read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        chunk = json.loads(line)
        for choice in chunk.get("choices") or []:
            choice["finish_reason"] = None
        chunks.append(chunk)
    return chunks


def sse(chunks: list[dict[str, Any]], *, done: bool) -> str:
    """The chunks as the server sends them, `[DONE]` last when the stream ended properly."""
    return "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + (DONE if done else "")


def decide(turn: ModelTurn, tools: list[str] | None = None) -> af.Decision:
    return af.Controller(af.Policy(), tools=tools).on_model_output(turn)


class TestRecordedStreams:
    """Recorded chat streams with their finish reasons taken out."""

    def test_text_ended_with_done_is_a_final_answer(self) -> None:
        """A whole text answer ended by `[DONE]` is not truncated and ends the run at P7."""
        recorded = normalize((CORPUS / "openai_chat/chat-text-stop.stream.jsonl").read_text())
        turn = normalize(sse(reasonless("openai_chat/chat-text-stop.stream.jsonl"), done=True))
        assert (turn.finish_reason, turn.raw_finish_reason, turn.truncated) == (
            FinishReason.UNKNOWN,
            None,
            False,
        )
        assert turn.text
        assert turn.text == recorded.text
        decision = decide(turn)
        assert (decision.action, decision.priority) == (Action.FINAL, Priority.P7)
        assert decision.exit_reason is af.ExitReason.COMPLETED
        assert "no finish reason" in decision.reason

    def test_tool_call_ended_with_done_is_executed(self) -> None:
        """A whole tool call ended by `[DONE]` is executed, the missing reason noted at P7."""
        name = "openai_chat/chat-stream-single-tool_call.jsonl"
        recorded = normalize((CORPUS / name).read_text())
        turn = normalize(sse(reasonless(name), done=True))
        assert not turn.truncated
        assert turn.finish_reason is FinishReason.UNKNOWN
        assert turn.tool_calls == recorded.tool_calls
        assert turn.tool_calls[0].complete
        decision = decide(turn)
        assert (decision.action, decision.priority) == (Action.EXECUTE_TOOLS, Priority.P7)
        assert decision.tool_calls == recorded.tool_calls

    @pytest.mark.parametrize(
        "name",
        [
            "openai_chat/chat-text-stop.stream.jsonl",
            "openai_chat/chat-stream-single-tool_call.jsonl",
        ],
    )
    def test_without_done_the_stream_is_cut(self, name: str) -> None:
        """The same chunks without `[DONE]` are a cut stream, retried at P0."""
        turn = normalize(sse(reasonless(name), done=False))
        assert turn.truncated
        decision = decide(turn)
        assert (decision.action, decision.priority) == (Action.RETRY, Priority.P0)

    def test_done_after_litellm_chunks(self) -> None:
        """`[DONE]` given to the accumulator after dict chunks ends the stream the same way."""
        accumulator = StreamAccumulator("litellm")
        accumulator.extend(reasonless("openai_chat/chat-text-stop.stream.jsonl"))
        assert accumulator.turn().truncated
        accumulator.add(DONE)
        assert not accumulator.turn().truncated

    def test_empty_stream_ended_with_done_is_no_answer(self) -> None:
        """An empty stream ended by `[DONE]` holds no answer: it stays truncated."""
        chunk = reasonless("openai_chat/chat-text-stop.stream.jsonl")[0]
        chunk["choices"][0]["delta"] = {"role": "assistant", "content": ""}
        assert normalize(sse([chunk], done=True)).truncated


def _call_chunks(name: str, text: str, pieces: list[str]) -> list[dict[str, Any]]:
    head = {"id": "chatcmpl-x", "object": "chat.completion.chunk", "model": "m"}

    def chunk(delta: dict[str, Any]) -> dict[str, Any]:
        return {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}

    chunks = [chunk({"role": "assistant", "content": text})]
    first = {"index": 0, "id": "call_1", "type": "function"}
    chunks.append(chunk({"tool_calls": [{**first, "function": {"name": name, "arguments": ""}}]}))
    chunks += [chunk({"tool_calls": [{"index": 0, "function": {"arguments": p}}]}) for p in pieces]
    return chunks


def _split(text: str, cuts: list[int]) -> list[str]:
    points = sorted({c % (len(text) + 1) for c in cuts} | {0, len(text)})
    return [text[a:b] for a, b in itertools.pairwise(points)]


_ARGUMENTS = st.dictionaries(
    st.text(min_size=1, max_size=8),
    st.one_of(st.integers(), st.text(max_size=12), st.booleans(), st.none()),
    max_size=4,
)


class TestStructureDecides:
    """Whatever the answer and the call, `[DONE]` and whole arguments decide."""

    @given(
        arguments=_ARGUMENTS,
        text=st.text(max_size=20),
        cuts=st.lists(st.integers(min_value=0), max_size=6),
        done=st.booleans(),
    )
    def test_whole_call_runs_only_after_done(
        self, arguments: dict[str, Any], text: str, cuts: list[int], done: bool
    ) -> None:
        """A call whose argument text parses runs iff the stream ended with `[DONE]`."""
        raw = json.dumps(arguments)
        turn = normalize(sse(_call_chunks("get_weather", text, _split(raw, cuts)), done=done))
        assert turn.finish_reason is FinishReason.UNKNOWN
        assert turn.truncated is not done
        decision = decide(turn, ["get_weather"])
        if done:
            assert turn.tool_calls[0].arguments == arguments
            assert (decision.action, decision.priority) == (Action.EXECUTE_TOOLS, Priority.P7)
        else:
            assert (decision.action, decision.priority) == (Action.RETRY, Priority.P0)

    @given(arguments=_ARGUMENTS, data=st.data())
    def test_cut_arguments_never_run(self, arguments: dict[str, Any], data: st.DataObject) -> None:
        """Argument text cut short is retried, `[DONE]` or not; the call never runs."""
        raw = json.dumps(arguments)
        cut = raw[: data.draw(st.integers(min_value=1, max_value=len(raw) - 1))]
        turn = normalize(sse(_call_chunks("get_weather", "", [cut]), done=data.draw(st.booleans())))
        assert turn.truncated
        decision = decide(turn, ["get_weather"])
        assert decision.action is Action.RETRY
        assert not decision.tool_calls
