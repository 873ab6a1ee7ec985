"""Every size and depth an input controls is bounded, with a clear error past the bound.

The limits live in `agentfsm._model.limits`; these tests lower them where a
realistic input would be too slow to build, and check that crossing one gives
a `PayloadError`, a `TraceError`, an `InvalidInputError` or a broken call, never
a `RecursionError` or gigabytes of memory.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import agentfsm as af
from agentfsm._model import limits
from agentfsm._model.limits import MAX_DEPTH, nesting_exceeds
from agentfsm._model.types import Action, ModelTurn, ToolCall
from agentfsm._replay.trace import read_trace
from agentfsm._replay.trajectories import read_runs
from agentfsm.exceptions import InvalidInputError, PayloadError, TraceError
from agentfsm.providers import detect_provider, normalize

HEADER = json.dumps({"event": "trace", "schema": 1, "producer": "agentfsm"}) + "\n"


def nested(depth: int) -> dict[str, Any]:
    """A dict nested `depth` levels deep."""
    root: dict[str, Any] = {}
    node = root
    for _ in range(depth - 1):
        node["a"] = {}
        node = node["a"]
    return root


def chat_call(arguments: object) -> dict[str, Any]:
    """A chat completion body with one call whose arguments are `arguments`."""
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": arguments}}
    return {"choices": [{"message": {"tool_calls": [call]}, "finish_reason": "tool_calls"}]}


def gemini_piece(path: str) -> dict[str, Any]:
    """A Gemini chunk streaming one argument piece at `path`."""
    piece = {"jsonPath": path, "stringValue": "x"}
    call: dict[str, Any] = {"name": "f", "partialArgs": [piece], "willContinue": True}
    return {"candidates": [{"content": {"parts": [{"functionCall": call}]}}]}


class TestNestingExceeds:
    """The iterative depth check."""

    def test_counts_levels_of_dicts_and_lists(self) -> None:
        """A value is as deep as its deepest chain of dicts and lists."""
        assert not nesting_exceeds({"a": [1]}, 2)
        assert nesting_exceeds({"a": [[1]]}, 2)
        assert not nesting_exceeds("text", 0)

    def test_never_recurses(self) -> None:
        """A value nested far past Python's recursion limit is measured without recursion."""
        assert nesting_exceeds(nested(100_000), MAX_DEPTH)


class TestDeepPayloads:
    """Payloads nested past the limits."""

    def test_deep_json_text_is_a_payload_error(self) -> None:
        """JSON text nested 100,000 deep is refused with PayloadError, not RecursionError."""
        text = "[" * 100_000 + "]" * 100_000
        with pytest.raises(PayloadError):
            normalize(text)
        with pytest.raises(PayloadError):
            detect_provider(text)

    @pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 5_000])
    def test_deep_arguments_make_the_call_broken(self, depth: int) -> None:
        """Arguments nested past MAX_DEPTH (as a dict or as JSON text) are never executed."""
        for arguments in (nested(depth), json.dumps(nested(min(depth, 900)))):
            if isinstance(arguments, str) and depth > 900:
                arguments = '{"a":' * 5_000 + "1" + "}" * 5_000
            turn = normalize(chat_call(arguments))
            (call,) = turn.tool_calls
            assert call.arguments is None
            assert call.error is not None
            assert "nest" in call.error

    def test_arguments_at_the_limit_are_kept(self) -> None:
        """Arguments exactly MAX_DEPTH deep are an ordinary call."""
        (call,) = normalize(chat_call(nested(MAX_DEPTH))).tool_calls
        assert call.complete

    def test_a_hand_built_deep_turn_is_retried(self) -> None:
        """A ModelTurn built by the host with deep arguments is retried, not executed."""
        call = ToolCall.model_construct(id="c1", name="f", arguments=nested(5_000), error=None)
        decision = af.Controller().on_model_output(ModelTurn(tool_calls=[call]))
        assert decision.action is Action.RETRY
        assert "nest" in decision.reason

    def test_a_deep_tool_result_is_refused_where_it_is_given(self) -> None:
        """A result nested 5,000 deep raises InvalidInputError and leaves the run waiting."""
        ctl = af.Controller()
        ctl.on_model_output(chat_call("{}"))
        deep: list[Any] = []
        node = deep
        for _ in range(5_000):
            node.append([])
            node = node[0]
        with pytest.raises(InvalidInputError, match="nests deeper"):
            ctl.on_tool_results([af.ToolResult(call_id="c1", content=deep)])
        assert ctl.state == "execute"
        assert ctl.on_tool_results([af.ToolResult(call_id="c1", content="ok")]).action


class TestGeminiPaths:
    """Gemini `partialArgs` paths the stream controls."""

    def test_a_huge_index_breaks_the_call_without_allocating(self) -> None:
        """Index 300,000,000 in a 166-byte chunk breaks the call; no array is grown."""
        turn = normalize(gemini_piece("$.a[300000000]"))
        (call,) = turn.tool_calls
        assert call.error is not None
        assert "skips elements" in call.error
        assert call.raw_arguments == '{"a": []}'

    def test_a_path_past_the_step_limit_breaks_the_call(self) -> None:
        """A jsonPath of more than MAX_JSON_PATH_STEPS steps breaks the call."""
        (call,) = normalize(gemini_piece("$" + ".a" * 10_000)).tool_calls
        assert call.error is not None
        assert "steps" in call.error

    def test_a_path_that_is_not_understood_breaks_the_call(self) -> None:
        """A jsonPath that is not `$` then `.key`/`[index]` steps breaks the call."""
        (call,) = normalize(gemini_piece("$['a.b']")).tool_calls
        assert call.error is not None
        assert "not understood" in call.error


class TestTraceFiles:
    """Trace and trajectory files the reader bounds."""

    def test_a_line_past_the_limit_is_a_trace_error(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A line longer than MAX_LINE_BYTES is reported by number; later lines still read."""
        monkeypatch.setattr(limits, "MAX_LINE_BYTES", 1_000)
        path = tmp_path / "t.jsonl"
        good = json.dumps({"event": "user_message", "text": "hi"})
        path.write_text(HEADER + '{"event": "x", "pad": "' + "x" * 10_000 + '"}\n' + good + "\n")
        with pytest.raises(TraceError, match=r":2: the line is longer than 1000 bytes"):
            list(read_trace(path))
        errors: list[TraceError] = []
        assert [e["event"] for e in read_trace(path, errors=errors)] == ["user_message"]
        assert len(errors) == 1

    def test_a_file_without_a_newline_is_refused_in_bounded_memory(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A header line past the limit (a huge file with no newline) is a TraceError."""
        monkeypatch.setattr(limits, "MAX_LINE_BYTES", 1_000)
        path = tmp_path / "t.jsonl"
        path.write_text('{"event": "trace", "pad": "' + "x" * 100_000)
        with pytest.raises(TraceError, match="longer than 1000 bytes"):
            list(read_trace(path))

    def test_a_deep_trace_line_is_a_trace_error(self, tmp_path: Path) -> None:
        """A line nested 100,000 deep is a TraceError naming the line, not a RecursionError."""
        path = tmp_path / "t.jsonl"
        path.write_text(HEADER + '{"event": "x", "a": ' + "[" * 100_000 + "]" * 100_000 + "}\n")
        with pytest.raises(TraceError, match=":2: the JSON nests too deeply"):
            list(read_trace(path))

    def test_a_deep_document_is_a_trace_error(self, tmp_path: Path) -> None:
        """A single-document trajectory nested 100,000 deep is a TraceError."""
        path = tmp_path / "doc.json"
        path.write_text("[" * 100_000 + "]" * 100_000)
        with pytest.raises(TraceError, match="nests too deeply"):
            list(read_runs(path))

    def test_a_document_past_the_size_limit_is_refused_unread(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A document larger than MAX_DOCUMENT_BYTES is refused before it is loaded."""
        monkeypatch.setattr(limits, "MAX_DOCUMENT_BYTES", 100)
        path = tmp_path / "doc.json"
        path.write_text(json.dumps({"messages": [{"role": "user", "content": "x" * 200}]}))
        with pytest.raises(TraceError, match="the limit is 100 bytes"):
            list(read_runs(path))
