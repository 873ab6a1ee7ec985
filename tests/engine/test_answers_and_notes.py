"""A guard of your own stops a final answer; a human's note with an approval reaches the model."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import agentfsm as af
from agentfsm import Action, ExitReason, Policy, ToolCall
from agentfsm._model.snapshot import RunSnapshot
from agentfsm.guards import FunctionGuard, TokenBudget


def leaks_secret(snap: RunSnapshot) -> str | None:
    """Applies to an answer that leaks the secret."""
    out = snap.output
    return "the answer leaks the secret" if out is not None and "secret" in out.text else None


def answer(text: str, tokens: int = 0) -> af.ModelTurn:
    return af.ModelTurn(
        text=text, finish_reason=af.FinishReason.STOP, usage=af.Usage(input_tokens=tokens)
    )


class TestGuardsOnFinalAnswers:
    def test_a_custom_guard_that_trips_on_a_final_answer_stops_the_run(self) -> None:
        """A final answer a guard of your own applies to ends STOP with that guard, not FINAL."""
        ctl = af.Controller(Policy(guards=[leaks_secret]))
        d = ctl.on_model_output(answer("the secret is 42"))
        assert (d.action, d.exit_reason) == (Action.STOP, ExitReason.INTERRUPTED)
        assert d.guard == "leaks_secret"
        assert d.reason == "the answer leaks the secret"

    def test_an_answer_the_guard_does_not_apply_to_completes(self) -> None:
        """The same policy accepts an answer its guard does not apply to."""
        ctl = af.Controller(Policy(guards=[leaks_secret]))
        assert ctl.on_model_output(answer("all good")).action is Action.FINAL

    def test_a_budget_among_the_guards_still_lets_a_complete_answer_finish(self) -> None:
        """Budgets bind only when another call is needed: `guards=[TokenBudget]` completes."""
        ctl = af.Controller(Policy(guards=[TokenBudget(10) | FunctionGuard(leaks_secret)]))
        d = ctl.on_model_output(answer("all good", tokens=50))
        assert (d.action, d.exit_reason) == (Action.FINAL, ExitReason.COMPLETED)

    def test_the_custom_part_of_a_composite_still_stops_an_answer(self) -> None:
        """In `TokenBudget(10) | f`, `f` stops a final answer it applies to."""
        ctl = af.Controller(Policy(guards=[TokenBudget(10) | FunctionGuard(leaks_secret)]))
        d = ctl.on_model_output(answer("the secret", tokens=1))
        assert d.action is Action.STOP
        assert d.guard == "leaks_secret"


class TestApprovalNotes:
    def _asked(self) -> af.Controller:
        ctl = af.Controller(Policy(permissions={"deploy": "ask"}))
        turn = af.ModelTurn(tool_calls=[ToolCall(id="d1", name="deploy", arguments={})])
        assert ctl.on_model_output(turn).action is Action.ASK_HUMAN
        return ctl

    def test_a_note_given_with_an_approval_is_in_the_decision(self) -> None:
        """`on_human_reply(True, "use staging")` clears the call and carries the note."""
        d = self._asked().on_human_reply(approved=True, message="use staging")
        assert d.action is Action.EXECUTE_TOOLS
        assert d.note == "use staging"

    def test_an_approval_without_a_note_has_none(self) -> None:
        """No note given, none in the decision."""
        assert self._asked().on_human_reply(approved=True).note is None

    def test_the_note_is_recorded_in_the_decision_event(self) -> None:
        """The trace's decision event holds the note, so a reader sees what the model got."""
        events: list[Mapping[str, Any]] = []
        ctl = self._asked()
        ctl.add_observer(events.append)
        ctl.on_human_reply(approved=True, message="use staging")
        assert [e.get("note") for e in events if e["event"] == "decision"] == ["use staging"]

    def test_a_note_with_a_refusal_goes_in_the_error_results(self) -> None:
        """A refusal's note travels in the declined call's result, as before."""
        d = self._asked().on_human_reply(approved=False, message="not today")
        assert d.note is None
        assert "not today" in d.results[0].content
