"""Layer 2 guards: what the tool results say."""

from __future__ import annotations

import pytest

from agentfsm import ExitReason, ToolResult
from agentfsm.exceptions import PolicyError
from agentfsm.guards import ResultsReady, ToolErrorLimit, ToolFailed
from agentfsm.testing import snapshot
from tests.guards.hits import fires


def failed(call_id: str, content: str = "boom") -> ToolResult:
    return ToolResult(call_id=call_id, content=content, is_error=True)


def ok(call_id: str) -> ToolResult:
    return ToolResult(call_id=call_id, content="fine")


class TestToolErrorLimit:
    def test_applies_at_the_limit(self) -> None:
        """The n-th failed round in a row trips it; the reason gives the count and the limit."""
        hit = fires(ToolErrorLimit(3), tool_errors_in_a_row=3)
        assert hit.reason == "3 rounds of tool calls in a row failed (limit 3)"
        assert hit.exit_reason is ExitReason.TOOL_ERRORS

    def test_does_not_apply_below_the_limit(self) -> None:
        """One failed round short of the limit, repairs go on."""
        assert ToolErrorLimit(3)(snapshot(tool_errors_in_a_row=2)) is None

    def test_refuses_a_limit_below_one(self) -> None:
        """A limit of 0 would stop runs that had no error: a ValueError, like RepeatedCall(0)."""
        with pytest.raises(PolicyError, match="ToolErrorLimit"):
            ToolErrorLimit(0)

    def test_repr_reads_as_code(self) -> None:
        """The repr is the constructor call."""
        assert repr(ToolErrorLimit(5)) == "ToolErrorLimit(5)"


class TestToolFailed:
    def test_applies_to_an_error_result(self) -> None:
        """An error result from the host goes back to the model; the reason quotes it."""
        hit = fires(ToolFailed(), results=(ok("c1"), failed("c2", "file not found")))
        assert "1 tool call(s) failed" in hit.reason
        assert "c2: file not found" in hit.reason

    def test_applies_to_a_call_the_controller_rejected(self) -> None:
        """A rejected call (undeclared tool, bad arguments) counts as a failure."""
        hit = fires(ToolFailed(), rejected=(failed("c7", "unknown tool 'rm'"),))
        assert "c7: unknown tool 'rm'" in hit.reason

    def test_lists_three_failures_and_counts_the_rest(self) -> None:
        """Past three failures, the reason quotes three and says how many more."""
        results = tuple(failed(f"c{i}") for i in range(5))
        hit = fires(ToolFailed(), results=results)
        assert hit.reason.startswith("5 tool call(s) failed")
        assert "c2: boom" in hit.reason
        assert "c3" not in hit.reason
        assert "(+2 more)" in hit.reason

    def test_shortens_long_error_text(self) -> None:
        """A long error is cut to 80 characters in the reason."""
        hit = fires(ToolFailed(), results=(failed("c1", "x" * 500),))
        assert "x" * 77 + "..." in hit.reason
        assert "x" * 78 not in hit.reason

    def test_does_not_apply_when_every_result_succeeded(self) -> None:
        """Successful results are not failures."""
        assert ToolFailed()(snapshot(results=(ok("c1"), ok("c2")))) is None


class TestResultsReady:
    def test_applies_in_the_tool_results_phase(self) -> None:
        """When results arrive, the model is called again; the reason counts them."""
        hit = fires(ResultsReady(), phase="tool_results", results=(ok("c1"), ok("c2")))
        assert "2 result(s)" in hit.reason

    def test_does_not_apply_to_a_model_output(self) -> None:
        """A model output is not a round of results."""
        assert ResultsReady()(snapshot(phase="model_output", results=(ok("c1"),))) is None
