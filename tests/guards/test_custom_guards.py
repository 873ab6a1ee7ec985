"""A guard of your own: implement `check`, and `__call__` and composition come with it."""

from __future__ import annotations

import pytest

import agentfsm as af
from agentfsm.guards import Guard, MaxTurns
from agentfsm.testing import snapshot, turn


class MentionsSecret(Guard):
    """Stop when the answer mentions the word 'secret'."""

    layer = 5
    priority = af.Priority.P6
    exit_reason = af.ExitReason.CONTENT_FILTER

    def check(self, snap: af.RunSnapshot) -> str | None:
        out = snap.output
        return "the answer mentions a secret" if out and "secret" in out.text else None


class Incomplete(Guard):
    """A guard that implements neither check nor __call__."""


class TestCustomGuards:
    def test_check_is_enough_to_be_called_and_composed(self) -> None:
        """A subclass with only `check` fires through `__call__` and inside a composite."""
        snap = snapshot(output=turn("the secret is 42"))
        hit = (MaxTurns(99) | MentionsSecret())(snap)
        assert hit is not None
        assert isinstance(hit.guard, MentionsSecret)
        assert hit.exit_reason is af.ExitReason.CONTENT_FILTER

    def test_built_in_guards_answer_check_from_call(self) -> None:
        """A built-in guard's `check` gives the reason its `__call__` reports."""
        assert MaxTurns(1).check(snapshot(turn=1)) == MaxTurns(1)(snapshot(turn=1)).reason  # type: ignore[union-attr]
        assert MaxTurns(5).check(snapshot(turn=1)) is None

    def test_a_guard_without_either_method_says_so(self) -> None:
        """Calling a guard that implements nothing raises NotImplementedError naming it."""
        with pytest.raises(NotImplementedError, match="Incomplete"):
            Incomplete()(snapshot())
