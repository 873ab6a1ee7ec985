"""The boundary types, and the unvalidated builder the routing path uses."""

from __future__ import annotations

import pickle

import pytest

import agentfsm as af
from agentfsm._model.types import unchecked_decision
from agentfsm.exceptions import DataError


def decision_values() -> dict[str, object]:
    return {
        "action": af.Action.CONTINUE,
        "priority": af.Priority.P1,
        "layer": 2,
        "reason": "r",
        "guard": "ResultsReady()",
        "fired": "ResultsReady()",
        "tool_calls": [],
        "results": [af.ToolResult(call_id="c", content="x")],
        "exit_reason": None,
        "turn": 3,
        "state": af.State.AWAIT_MODEL,
        "path": (af.State.EXECUTE, af.State.BUDGET_CHECK, af.State.AWAIT_MODEL),
        "adjust": {},
        "answer": None,
        "note": None,
        "shadow": (),
        "covered": {},
    }


class TestBuild:
    def test_a_built_model_equals_the_validated_one(self) -> None:
        """unchecked() gives the same model as validation, for the same complete values."""
        assert unchecked_decision(decision_values()) == af.Decision(**decision_values())

    def test_a_built_model_is_frozen_and_dumps(self) -> None:
        """A built model refuses assignment and dumps to JSON like any other."""
        built = unchecked_decision(decision_values())
        with pytest.raises(DataError):
            built.turn = 4
        assert built.model_dump(mode="json")["path"] == ["execute", "budget_check", "await_model"]

    def test_copies_of_built_models_do_not_share_state(self) -> None:
        """model_copy of a built model changes the copy only."""
        first = unchecked_decision(decision_values())
        second = first.model_copy(update={"turn": 9})
        assert (first.turn, second.turn) == (3, 9)
        assert unchecked_decision(decision_values()).model_fields_set == set(
            af.Decision.model_fields
        )

    def test_a_built_model_pickles(self) -> None:
        """A built model survives pickle (replay sends decisions across processes)."""
        built = unchecked_decision(decision_values())
        assert pickle.loads(pickle.dumps(built)) == built


class TestEnums:
    @pytest.mark.parametrize(
        "enum", [af.State, af.Priority, af.Action, af.ExitReason, af.FinishReason]
    )
    def test_members_hash_and_compare_like_their_strings(self, enum: type[af.State]) -> None:
        """A member and its string value are interchangeable as dict keys."""
        for member in enum:
            assert {member.value: 1}[member] == 1
            assert member == member.value
