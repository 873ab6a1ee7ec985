"""Layer 1 guards: what the model's output structurally asks for."""

from __future__ import annotations

import pytest

from agentfsm import FinishReason, ModelTurn, ToolCall
from agentfsm.guards import (
    HandoffRequested,
    HasToolCalls,
    MalformedToolCall,
    OutputTruncated,
    ProviderFailed,
    SignalConflict,
)
from agentfsm.testing import call, snapshot, turn
from tests.guards.hits import fires

BROKEN = ToolCall(
    id="call_9", name="search", arguments=None, raw_arguments='{"q": "wea', error="truncated JSON"
)


class TestOutputTruncated:
    def test_applies_to_a_length_finish(self) -> None:
        """A `length` finish is a cut output, and the reason quotes the raw finish reason."""
        hit = fires(OutputTruncated(), output=turn("The answer is", finish="length"))
        assert "length" in hit.reason
        assert "incomplete" in hit.reason

    def test_applies_to_a_truncated_stream_whatever_the_finish(self) -> None:
        """A stream cut mid-block is truncated even when the provider claimed `stop`."""
        out = turn("", [call("search", {"q": "x"})], finish="stop", truncated=True)
        hit = fires(OutputTruncated(), output=out)
        assert "1 tool call(s)" in hit.reason
        assert "none is executed" in hit.reason

    def test_counts_the_calls_inside_the_cut_output(self) -> None:
        """The reason says how many tool calls were in the cut output."""
        out = turn("", [call("a"), call("b"), BROKEN], finish="max_tokens", truncated=True)
        hit = fires(OutputTruncated(), output=out)
        assert "3 tool call(s)" in hit.reason
        assert "max_tokens" in hit.reason

    def test_does_not_apply_to_a_complete_output(self) -> None:
        """A complete answer or a complete tool turn is not truncated."""
        assert OutputTruncated()(snapshot(output=turn("done"))) is None
        assert OutputTruncated()(snapshot(output=turn("", [call("a")]))) is None

    def test_does_not_apply_without_an_output(self) -> None:
        """With no model output (tool results phase) there is nothing to be cut."""
        assert OutputTruncated()(snapshot(phase="tool_results")) is None


class TestMalformedToolCall:
    def test_applies_to_a_call_with_an_error(self) -> None:
        """A call whose arguments did not parse is unusable; the reason names it and the error."""
        hit = fires(MalformedToolCall(), output=turn("", [call("ok"), BROKEN]))
        assert "'search'" in hit.reason
        assert "call_9" in hit.reason
        assert "truncated JSON" in hit.reason

    def test_applies_to_a_call_without_arguments(self) -> None:
        """A call whose arguments are None (not even `{}`) is unusable."""
        out = ModelTurn(tool_calls=[ToolCall(id="c1", name="search")])
        assert MalformedToolCall()(snapshot(output=out)) is not None

    def test_does_not_apply_to_complete_calls(self) -> None:
        """Calls with argument objects, empty ones included, are well formed."""
        out = turn("", [call("search", {"q": "x"}), call("now")])
        assert MalformedToolCall()(snapshot(output=out)) is None

    def test_does_not_apply_without_an_output(self) -> None:
        """No output, no malformed call."""
        assert MalformedToolCall()(snapshot()) is None


class TestProviderFailed:
    def test_applies_to_an_error_reported_in_the_output(self) -> None:
        """An error chunk in the output ends the run, and the reason quotes the error."""
        out = ModelTurn(text="partial", error="overloaded_error", finish_reason=FinishReason.ERROR)
        hit = fires(ProviderFailed(), output=out)
        assert "overloaded_error" in hit.reason

    def test_applies_to_an_error_finish_with_no_output(self) -> None:
        """An error finish (Gemini MALFORMED_FUNCTION_CALL) with no text and no call applies."""
        out = ModelTurn(
            finish_reason=FinishReason.ERROR, raw_finish_reason="MALFORMED_FUNCTION_CALL"
        )
        hit = fires(ProviderFailed(), output=out)
        assert "MALFORMED_FUNCTION_CALL" in hit.reason

    def test_a_failed_turn_with_text_is_never_an_answer(self) -> None:
        """An error finish that still produced text applies: a failed turn is no answer."""
        out = ModelTurn(text="Here it is", finish_reason=FinishReason.ERROR)
        assert ProviderFailed()(snapshot(output=out)) is not None

    def test_a_failed_turn_never_runs_its_calls(self) -> None:
        """Tool calls beside a provider error apply too, and the reason says they do not run."""
        out = ModelTurn(tool_calls=[call("search")], error="overloaded_error")
        hit = fires(ProviderFailed(), output=out)
        assert "not run" in hit.reason

    def test_does_not_apply_to_a_normal_answer(self) -> None:
        """A plain answer is no provider failure."""
        assert ProviderFailed()(snapshot(output=turn("done"))) is None


class TestSignalConflict:
    @pytest.mark.parametrize("finish", ["stop", "end_turn", "unknown", ""])
    def test_applies_when_tool_calls_come_without_a_tool_finish(self, finish: str) -> None:
        """Tool calls under `stop` (Ollama, Gemini, compatible servers) are a P7 conflict."""
        out = turn("", [call("search"), call("now")], finish=finish)
        hit = fires(SignalConflict(), output=out)
        assert repr(finish) in hit.reason
        assert "2 tool call(s)" in hit.reason

    def test_names_a_missing_finish_reason(self) -> None:
        """With no finish reason at all, the reason says so."""
        out = ModelTurn(tool_calls=[call("search")], raw_finish_reason=None)
        hit = fires(SignalConflict(), output=out)
        assert "no finish reason" in hit.reason

    def test_applies_when_a_tool_finish_has_no_tool_call(self) -> None:
        """`tool_calls` claimed with no call present is a conflict too."""
        out = turn("Hello", finish="tool_calls")
        hit = fires(SignalConflict(), output=out)
        assert "no tool call" in hit.reason

    def test_does_not_apply_when_claim_and_structure_agree(self) -> None:
        """`tool_calls` with calls, and `stop` without, are consistent."""
        assert SignalConflict()(snapshot(output=turn("", [call("a")], finish="tool_calls"))) is None
        assert SignalConflict()(snapshot(output=turn("done", finish="stop"))) is None
        assert SignalConflict()(snapshot()) is None


class TestHasToolCalls:
    def test_applies_to_executable_calls_and_names_them(self) -> None:
        """Valid calls that may run apply; the reason counts and names them."""
        hit = fires(HasToolCalls(), executable=(call("search"), call("get_weather")))
        assert "2 valid tool calls" in hit.reason
        assert "search, get_weather" in hit.reason

    def test_does_not_apply_to_calls_that_did_not_validate(self) -> None:
        """Calls in the output that did not pass validation are not executable."""
        assert HasToolCalls()(snapshot(output=turn("", [call("search")]))) is None


class TestHandoffRequested:
    def test_applies_to_a_handoff_and_names_the_agent(self) -> None:
        """A handoff call applies; the reason names where the task goes."""
        hit = fires(HandoffRequested(), handoffs=(call("billing_agent"),))
        assert "'billing_agent'" in hit.reason

    def test_does_not_apply_without_a_handoff(self) -> None:
        """Ordinary executable calls are not handoffs."""
        assert HandoffRequested()(snapshot(executable=(call("search"),))) is None
