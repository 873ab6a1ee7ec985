"""Layer 5 guards: budgets, permissions, safety and the human in the loop."""

from __future__ import annotations

from typing import Any

import pytest

from agentfsm import FinishReason, ModelTurn
from agentfsm.exceptions import PolicyError
from agentfsm.guards import (
    ContentFiltered,
    ContextLimit,
    CostBudget,
    Deadline,
    Guard,
    HumanApproved,
    HumanDeclined,
    MaxToolCalls,
    MaxTurns,
    NeedsApproval,
    PermissionDenied,
    Refused,
    TokenBudget,
)
from agentfsm.testing import call, snapshot, turn
from tests.guards.hits import fires


@pytest.mark.parametrize(
    "cls", [MaxTurns, MaxToolCalls, TokenBudget, CostBudget, Deadline, ContextLimit]
)
def test_a_negative_limit_is_refused(cls: type[MaxTurns]) -> None:
    """A budget below zero is a ValueError naming the guard."""
    with pytest.raises(PolicyError, match=cls.__name__):
        cls(-1)


class TestMaxTurns:
    def test_applies_at_the_limit(self) -> None:
        """At turn 50 of 50 no model call is left; the reason gives both numbers."""
        hit = fires(MaxTurns(50), turn=50)
        assert "turn 50 of 50" in hit.reason

    def test_does_not_apply_before_the_limit(self) -> None:
        """Turn 49 of 50 may go on."""
        assert MaxTurns(50)(snapshot(turn=49)) is None


class TestMaxToolCalls:
    def test_applies_when_this_turns_calls_would_pass_the_limit(self) -> None:
        """8 used plus 3 wanted exceeds 10; the reason gives 11 and 10."""
        snap = snapshot(tool_calls_used=8, executable=(call("a"), call("b"), call("c")))
        hit = MaxToolCalls(10)(snap)
        assert hit is not None
        assert hit.reason == "11 tool calls would exceed the limit of 10"

    def test_does_not_apply_when_the_calls_exactly_reach_the_limit(self) -> None:
        """8 used plus 2 wanted is exactly 10: allowed."""
        snap = snapshot(tool_calls_used=8, executable=(call("a"), call("b")))
        assert MaxToolCalls(10)(snap) is None


BUDGETS = [
    # 200,000 tokens of 200,000 are spent; one under is fine.
    pytest.param(
        TokenBudget(200_000),
        {"tokens_used": 200_000},
        {"tokens_used": 199_999},
        ["200000 tokens used of a budget of 200000"],
        id="TokenBudget",
    ),
    # $0.75 of $0.50 is over budget; $0.49 is fine.
    pytest.param(
        CostBudget(0.5),
        {"cost_used": 0.75},
        {"cost_used": 0.49},
        ["$0.7500 spent", "$0.5000"],
        id="CostBudget",
    ),
    # 61.5s of 60s is past the deadline; 59.9s is in time.
    pytest.param(
        Deadline(60), {"elapsed": 61.5}, {"elapsed": 59.9}, ["61.5s elapsed of 60s"], id="Deadline"
    ),
    # A context of 130,000 tokens with a limit of 128,000 applies; one under the limit is fine.
    pytest.param(
        ContextLimit(128_000),
        {"context_tokens": 130_000},
        {"context_tokens": 127_999},
        ["130000", "128000"],
        id="ContextLimit",
    ),
]


@pytest.mark.parametrize(("guard", "spent", "within", "said"), BUDGETS)
class TestBudgets:
    """Token, cost, time and context budgets: each applies once spent and says how much of
    how much; just within it, the run goes on."""

    def test_applies_when_spent_naming_both_amounts(
        self, guard: Guard, spent: dict[str, Any], within: dict[str, Any], said: list[str]
    ) -> None:
        hit = fires(guard, **spent)
        assert [part for part in said if part not in hit.reason] == []

    def test_does_not_apply_within(
        self, guard: Guard, spent: dict[str, Any], within: dict[str, Any], said: list[str]
    ) -> None:
        assert guard(snapshot(**within)) is None


class TestRefused:
    def test_applies_to_a_refusal_finish(self) -> None:
        """A `refusal` finish ends the run; the reason quotes the text."""
        hit = fires(Refused(), output=turn("I can't help with that.", finish="refusal"))
        assert "I can't help with that." in hit.reason

    def test_applies_to_a_separate_refusal_field(self) -> None:
        """A refusal reported beside the answer (OpenAI `refusal`) applies under `stop`."""
        out = ModelTurn(refusal="No.", finish_reason=FinishReason.STOP)
        hit = fires(Refused(), output=out)
        assert "'No.'" in hit.reason

    def test_quotes_at_most_120_characters(self) -> None:
        """A long refusal is quoted in part."""
        hit = fires(Refused(), output=turn("n" * 500, finish="refusal"))
        assert "n" * 120 in hit.reason
        assert "n" * 121 not in hit.reason

    def test_does_not_apply_to_an_answer(self) -> None:
        """A normal answer is no refusal."""
        assert Refused()(snapshot(output=turn("Sure."))) is None
        assert Refused()(snapshot()) is None


class TestContentFiltered:
    def test_applies_to_a_filtered_output(self) -> None:
        """A content-filter finish ends the run; the reason quotes the raw reason."""
        out = ModelTurn(finish_reason=FinishReason.CONTENT_FILTER, raw_finish_reason="SAFETY")
        hit = fires(ContentFiltered(), output=out)
        assert "SAFETY" in hit.reason

    def test_does_not_apply_otherwise(self) -> None:
        """Any other finish is not filtered."""
        assert ContentFiltered()(snapshot(output=turn("ok"))) is None


class TestNeedsApproval:
    def test_applies_and_names_the_calls(self) -> None:
        """Calls marked `ask` need a human; the reason names them."""
        hit = fires(NeedsApproval(), needs_approval=(call("write_file"), call("rm")))
        assert "write_file, rm" in hit.reason

    def test_does_not_apply_without_such_calls(self) -> None:
        """Allowed calls need no approval."""
        assert NeedsApproval()(snapshot(executable=(call("search"),))) is None


class TestPermissionDenied:
    def test_applies_and_names_the_denied_calls(self) -> None:
        """Denied calls stop the run; the reason names them."""
        hit = fires(PermissionDenied(), denied=(call("rm"),))
        assert hit.reason == "permission denied for rm"

    def test_does_not_apply_without_denials(self) -> None:
        """No denied call, no stop."""
        assert PermissionDenied()(snapshot()) is None


class TestHumanDeclined:
    def test_applies_to_a_bare_no(self) -> None:
        """A human who declines without a message ends the run."""
        hit = fires(HumanDeclined(), phase="human_reply", human_approved=False)
        assert hit.reason == "the human declined"

    def test_does_not_apply_when_the_human_explains(self) -> None:
        """A refusal with a message goes back to the model instead."""
        snap = snapshot(phase="human_reply", human_approved=False, human_message="use the sandbox")
        assert HumanDeclined()(snap) is None

    def test_does_not_apply_to_a_yes_or_no_reply(self) -> None:
        """Approval, or no reply yet, is not a decline."""
        assert HumanDeclined()(snapshot(human_approved=True)) is None
        assert HumanDeclined()(snapshot(human_approved=None)) is None


class TestHumanApproved:
    def test_applies_to_approved_calls(self) -> None:
        """Approved calls run; the reason counts them."""
        snap = snapshot(phase="human_reply", human_approved=True, executable=(call("rm"),))
        hit = HumanApproved()(snap)
        assert hit is not None
        assert "1 call(s)" in hit.reason

    def test_does_not_apply_with_nothing_to_run(self) -> None:
        """Approval with no calls to run, or a decline, does not apply."""
        assert HumanApproved()(snapshot(human_approved=True)) is None
        assert HumanApproved()(snapshot(human_approved=False, executable=(call("rm"),))) is None
