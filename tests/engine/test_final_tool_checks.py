"""A final tool's result is a final output: it passes the completion checks before COMPLETED."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

import agentfsm as af
from agentfsm._model.snapshot import RunSnapshot
from tests.strategies import arguments

A, X, P = af.Action, af.ExitReason, af.Priority


def submit_turn(cid: str = "s", *others: af.ToolCall) -> af.ModelTurn:
    calls = [af.ToolCall(id=cid, name="submit", arguments={"patch": "diff"}), *others]
    return af.ModelTurn(tool_calls=calls, finish_reason=af.FinishReason.TOOL_CALLS)


def needs_tests(snap: RunSnapshot) -> str | None:
    """Refuse an answer that does not say the tests pass."""
    text = snap.output.text if snap.output is not None else ""
    return None if "tests pass" in text else "the answer does not say the tests pass"


class TestFinalToolChecks:
    """`Policy(final_tools=...)` with verifiers: the result is checked as an answer is."""

    def test_a_failing_verifier_continues_at_p4_with_its_reason(self) -> None:
        """The submit result fails a verifier: CONTINUE at P4 with the verifier's reason."""
        ctl = af.Controller(af.Policy(final_tools=["submit"], verifiers=[needs_tests]))
        ctl.on_model_output(submit_turn())
        d = ctl.on_tool_results([af.ToolResult(call_id="s", content="patched")])
        assert (d.action, d.priority, d.exit_reason) == (A.CONTINUE, P.P4, None)
        assert d.reason == "the answer does not say the tests pass"
        assert d.fired == "AnswerIncomplete(needs_tests)"
        assert not ctl.done

    def test_a_passing_result_ends_completed_with_it_as_the_answer(self) -> None:
        """The result that passes every check ends the run COMPLETED; it is the answer."""
        ctl = af.Controller(af.Policy(final_tools=["submit"], verifiers=[needs_tests]))
        ctl.on_model_output(submit_turn())
        d = ctl.on_tool_results([af.ToolResult(call_id="s", content="patched, tests pass")])
        assert (d.action, d.priority, d.exit_reason) == (A.FINAL, P.P3, X.COMPLETED)
        assert d.answer == "patched, tests pass"

    def test_an_empty_result_is_not_a_final_answer(self) -> None:
        """The built-in check runs on it too: an empty result continues the run."""
        ctl = af.Controller(af.Policy(final_tools=["submit"]))
        ctl.on_model_output(submit_turn())
        d = ctl.on_tool_results([af.ToolResult(call_id="s", content="  ")])
        assert (d.action, d.priority) == (A.CONTINUE, P.P4)
        assert "the answer is empty" in d.reason

    def test_the_verifier_reason_wins_over_a_failed_sibling(self) -> None:
        """A failing check of the answer is the decision even when another call failed."""
        ctl = af.Controller(af.Policy(final_tools=["submit"], verifiers=[needs_tests]))
        other = af.ToolCall(id="o", name="lint", arguments={})
        ctl.on_model_output(submit_turn("s", other))
        d = ctl.on_tool_results(
            [
                af.ToolResult(call_id="s", content="patched"),
                af.ToolResult(call_id="o", content="boom", is_error=True),
            ]
        )
        assert (d.action, d.priority) == (A.CONTINUE, P.P4)

    def test_data_results_are_checked_as_their_json(self) -> None:
        """A result that is data reaches the verifiers as its JSON text."""
        seen: list[str] = []

        def record(snap: RunSnapshot) -> None:
            seen.append(snap.output.text if snap.output is not None else "")

        ctl = af.Controller(af.Policy(final_tools=["submit"], verifiers=[record]))
        ctl.on_model_output(submit_turn())
        d = ctl.on_tool_results([af.ToolResult(call_id="s", content={"ok": True})])
        assert d.answer == {"ok": True}
        assert seen == ['{"ok": true}']

    @given(
        content=st.text(max_size=30) | arguments(),
        verdict=st.sampled_from([None, True, False, "not yet"]),
        on_incomplete=st.sampled_from(["continue", "ask"]),
        engine=st.sampled_from(["compiled", "transitions"]),
    )
    def test_a_final_tool_ends_exactly_when_a_plain_answer_would(
        self, content: Any, verdict: Any, on_incomplete: Any, engine: Any
    ) -> None:
        """Any result content, any verifier verdict, either `on_incomplete`: the final tool's
        result ends, continues or asks exactly as a model's answer of the same text does."""

        def verifier(snap: RunSnapshot) -> Any:
            return verdict

        policy = af.Policy(
            final_tools=["submit"], verifiers=[verifier], on_incomplete=on_incomplete
        )
        tool_run = af.Controller(policy, engine=engine)
        tool_run.on_model_output(submit_turn())
        d = tool_run.on_tool_results([af.ToolResult(call_id="s", content=content)])
        text = content if isinstance(content, str) else json.dumps(content)
        plain = af.Controller(policy, engine=engine).on_model_output(
            af.ModelTurn(text=text, finish_reason=af.FinishReason.STOP)
        )
        assert (d.action, d.priority, d.exit_reason) == (
            plain.action,
            plain.priority,
            plain.exit_reason,
        )
        said = plain.reason.replace("the answer passes", "the final tool's result passes")
        assert d.reason.split(" (empty result from")[0] == said
        if d.action is A.FINAL:
            assert d.answer == content
