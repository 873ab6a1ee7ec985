"""Controllers sharing a run tree's ledger: a child's turns reach the parent's budgets as they
are counted, and the child's TreeBudget() stops it when a budget above it is spent."""

from __future__ import annotations

import pytest

import agentfsm as af
from agentfsm._model.ledger import Ledger
from agentfsm._model.types import Usage
from agentfsm.exceptions import DefinitionError

A, X = af.Action, af.ExitReason
HANDOFF = af.ToolCall(id="h", name="research", arguments={"task": "dig"})


def turn_of(tokens: int, *calls: af.ToolCall, text: str = "") -> af.ModelTurn:
    return af.ModelTurn(
        text=text, tool_calls=list(calls), usage=Usage(input_tokens=tokens, output_tokens=0)
    )


def lookup(n: int) -> af.ToolCall:
    return af.ToolCall(id=f"l{n}", name="lookup", arguments={"key": n})


class TestTree:
    def tree(self) -> tuple[af.Controller, af.Controller]:
        parent_policy = af.Policy(max_tokens=100, handoffs=frozenset({"research"}))
        ledger = Ledger()
        root = ledger.open(parent_policy, run_id="parent")
        parent = af.Controller(parent_policy, run_id="parent", ledger=root)
        child_policy = af.Policy().narrowed_by(parent_policy)
        below = ledger.open(child_policy, run_id="child", parent=root)
        child = af.Controller(child_policy, run_id="child", ledger=below)
        return parent, child

    def test_the_child_stops_when_the_parents_budget_is_spent(self) -> None:
        """Parent 30 + child 3 x 30 tokens: the child's third turn stops it (TOKEN_BUDGET) by
        TreeBudget(), naming the parent's budget; the parent stops at its next decision."""
        parent, child = self.tree()
        d = parent.on_model_output(turn_of(30, HANDOFF))
        assert d.action is A.HANDOFF
        for n in range(2):
            assert child.on_model_output(turn_of(30, lookup(n))).action is A.EXECUTE_TOOLS
            child.on_tool_results([af.ToolResult(call_id=f"l{n}", content="x")])
        d = child.on_model_output(turn_of(30, lookup(2)))
        assert (d.action, d.exit_reason, d.guard) == (A.STOP, X.TOKEN_BUDGET, "TreeBudget()")
        assert "'parent' has used 120 tokens of its budget of 100" in d.reason
        d = parent.on_tool_results([af.ToolResult(call_id="h", content="stopped", is_error=True)])
        assert (d.action, d.exit_reason) == (A.STOP, X.TOKEN_BUDGET)
        assert "120 tokens used of a budget of 100" in d.reason

    def test_a_child_answer_still_completes(self) -> None:
        """A budget binds only when another call is needed: a final answer that spends the
        last tokens ends COMPLETED, as it does for one run."""
        parent, child = self.tree()
        parent.on_model_output(turn_of(90, HANDOFF))
        d = child.on_model_output(turn_of(30, text="done"))
        assert (d.action, d.exit_reason) == (A.FINAL, X.COMPLETED)

    def test_a_run_in_no_tree_is_never_stopped_by_tree_budget(self) -> None:
        """TreeBudget() without a ledger: the run goes on."""
        ctl = af.Controller(af.Policy(guards=["TreeBudget()"]))
        assert ctl.on_model_output(turn_of(10**6, lookup(0))).action is A.EXECUTE_TOOLS

    def test_a_ledger_that_is_not_an_account_is_refused(self) -> None:
        """Controller(ledger=...) takes an Account: anything else raises DefinitionError."""
        with pytest.raises(DefinitionError, match="ledger must be a ledger Account, not Ledger"):
            af.Controller(ledger=Ledger())  # type: ignore[arg-type]
