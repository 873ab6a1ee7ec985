"""Layer 4 guards: repetition, no progress and endless retries."""

from __future__ import annotations

import pytest

from agentfsm import ExitReason
from agentfsm.exceptions import PolicyError
from agentfsm.guards import NoProgress, RepeatedCall, RetriesExhausted
from agentfsm.testing import snapshot
from tests.guards.hits import fires


@pytest.mark.parametrize("cls", [RepeatedCall, NoProgress])
def test_a_threshold_below_one_is_refused(cls: type[RepeatedCall]) -> None:
    """A threshold of 0 would fire on every step, so it is a PolicyError naming the guard."""
    with pytest.raises(PolicyError, match=cls.__name__):
        cls(0)


def test_retries_exhausted_takes_zero_and_refuses_negative() -> None:
    """RetriesExhausted(0) means no retry at all; a negative threshold is a PolicyError."""
    assert RetriesExhausted(0).n == 0
    with pytest.raises(PolicyError, match="RetriesExhausted"):
        RetriesExhausted(-1)


class TestRepeatedCall:
    def test_applies_at_the_threshold(self) -> None:
        """The third identical call in a row trips RepeatedCall(3), quoting the call."""
        snap = snapshot(repeat_streak=3, repeated='search({"q": "x"})')
        hit = RepeatedCall(3)(snap)
        assert hit is not None
        assert hit.reason == 'search({"q": "x"}) would be the 3rd identical call in a row'

    def test_does_not_apply_below_the_threshold(self) -> None:
        """The second identical call still runs."""
        assert RepeatedCall(3)(snapshot(repeat_streak=2, repeated="search({})")) is None

    @pytest.mark.parametrize(
        ("streak", "ordinal"),
        [
            (1, "1st"),
            (2, "2nd"),
            (4, "4th"),
            (11, "11th"),
            (12, "12th"),
            (13, "13th"),
            (21, "21st"),
            (22, "22nd"),
            (23, "23rd"),
            (111, "111th"),
        ],
    )
    def test_names_the_streak_as_an_english_ordinal(self, streak: int, ordinal: str) -> None:
        """The reason spells the streak as an ordinal: 1st, 2nd, 11th, 21st, 111th."""
        hit = fires(RepeatedCall(1), repeat_streak=streak, repeated="f()")
        assert f"the {ordinal} identical call" in hit.reason


class TestNoProgress:
    def test_applies_after_rounds_with_identical_results(self) -> None:
        """n tool rounds in a row that repeated recent results trip it; the reason gives n."""
        hit = fires(NoProgress(4), same_results_in_a_row=4)
        assert hit.reason.startswith("4 tool rounds in a row")

    def test_applies_after_answers_that_failed_the_checks(self) -> None:
        """n answers in a row that failed completion checks trip it too."""
        hit = fires(NoProgress(4), incomplete_in_a_row=5)
        assert hit.reason == "5 answers in a row failed the completion checks"

    def test_does_not_apply_below_the_threshold(self) -> None:
        """Fewer rounds without progress than the threshold let the run go on."""
        assert NoProgress(4)(snapshot(same_results_in_a_row=3, incomplete_in_a_row=3)) is None


class TestRetriesExhausted:
    def test_applies_at_the_threshold(self) -> None:
        """n recoveries in a row give up; the reason gives the count."""
        hit = fires(RetriesExhausted(2), retries_in_a_row=2)
        assert hit.reason == "2 retries in a row did not give a usable output"
        assert hit.exit_reason is ExitReason.UNRECOVERABLE_OUTPUT

    def test_does_not_apply_below_the_threshold(self) -> None:
        """One retry short of the threshold, the output is retried."""
        assert RetriesExhausted(2)(snapshot(retries_in_a_row=1)) is None
