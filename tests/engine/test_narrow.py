"""A sub-agent is never wider than its parent: `Policy.narrowed_by`, by property."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import agentfsm as af
from agentfsm.exceptions import PolicyError
from agentfsm.guards import TreeBudget
from tests.seam_strategies import TOOLS, VALUES, policies

STRENGTH = {"allow": 0, "ask": 1, "deny": 2}
_ARGS = ("query", "command", "path", "task")


@st.composite
def calls(draw: st.DrawFn) -> af.ToolCall:
    arguments: dict[str, Any] = draw(
        st.dictionaries(st.sampled_from(_ARGS), st.sampled_from(VALUES), max_size=2)
    )
    return af.ToolCall(id="c1", name=draw(st.sampled_from(TOOLS)), arguments=arguments)


class TestVerdicts:
    """Per call, the child's verdict is the stronger of the parent's and its own."""

    @given(policies(hooks=True), policies(hooks=True), calls())
    def test_the_narrowed_verdict_is_the_stronger_of_the_two(
        self, parent: af.Policy, child: af.Policy, call: af.ToolCall
    ) -> None:
        """Deny wins, ask wins over allow: never weaker than the parent, never than the child."""
        said = child.narrowed_by(parent).permission_for(call)
        parents, own = parent.permission_for(call), child.permission_for(call)
        assert STRENGTH[said] == max(STRENGTH[parents], STRENGTH[own])

    @given(policies(hooks=True), policies(hooks=True), calls())
    def test_no_child_controller_runs_what_the_parent_would_stop(
        self, parent: af.Policy, child: af.Policy, call: af.ToolCall
    ) -> None:
        """Through a child's Controller: a call the parent would deny or ask about is never
        cleared to run by the child's decision."""
        parent_says = parent.permission_for(call)
        ctl = af.Controller(child.narrowed_by(parent))
        decision = ctl.on_model_output(af.ModelTurn(tool_calls=[call]))
        ran = ctl.may_run(decision.tool_calls[0].id) if decision.tool_calls else False
        if parent_says != "allow":
            assert not ran
            assert decision.action not in (af.Action.EXECUTE_TOOLS, af.Action.HANDOFF)

    def test_a_parent_ask_makes_a_child_allow_ask(self) -> None:
        """Parent asks before `bash`, the child allows it: the child asks."""
        parent = af.Policy(permission_rules=["ask bash"])
        child = af.Policy(permissions={"bash": "allow"})
        assert child.narrowed_by(parent).permission_for(af.ToolCall(id="1", name="bash")) == "ask"


class TestLimits:
    """Each limit is the lesser; stricter choices win; the parent's guards bind the child."""

    @given(
        st.integers(1, 50),
        st.integers(1, 50),
        st.none() | st.integers(0, 500),
        st.none() | st.integers(0, 500),
    )
    def test_each_limit_is_the_lesser(
        self, p_turns: int, c_turns: int, p_tokens: int | None, c_tokens: int | None
    ) -> None:
        """max_turns and max_tokens: the lesser of two; None (no limit) never wins."""
        parent = af.Policy(max_turns=p_turns, max_tokens=p_tokens)
        child = af.Policy(max_turns=c_turns, max_tokens=c_tokens)
        got = child.narrowed_by(parent)
        assert got.max_turns == min(p_turns, c_turns)
        known = [t for t in (p_tokens, c_tokens) if t is not None]
        assert got.max_tokens == (min(known) if known else None)

    def test_stricter_choices_and_the_parents_guards(self) -> None:
        """on_deny and on_unknown_price take stop; a repeat the parent stops is not asked."""
        parent = af.Policy(on_deny="stop", on_repeat="stop", guards=["TokenBudget(7)"])
        child = af.Policy(on_repeat="ask", on_unknown_price="stop")
        got = child.narrowed_by(parent)
        assert (got.on_deny, got.on_repeat, got.on_unknown_price) == ("stop", "stop", "stop")
        assert [repr(g) for g in got.guards] == ["TokenBudget(7)", "TreeBudget()"]
        assert TreeBudget() in got.guards

    def test_narrowing_twice_adds_nothing_more(self) -> None:
        """A grandchild narrowed again keeps one TreeBudget()."""
        root = af.Policy(max_turns=5)
        got = af.Policy().narrowed_by(root).narrowed_by(root)
        assert [repr(g) for g in got.guards] == ["TreeBudget()"]

    def test_a_parent_that_is_not_a_policy_is_refused(self) -> None:
        """narrowed_by(3) raises PolicyError naming the method; the child is unchanged."""
        child = af.Policy(max_turns=4)
        with pytest.raises(PolicyError, match=r"narrowed_by takes an agentfsm\.Policy, not int"):
            child.narrowed_by(3)  # type: ignore[arg-type]
        assert child.max_turns == 4
