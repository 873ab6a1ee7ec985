"""Layer 3 guards: is the task done? Completion checks are pluggable verifiers."""

from __future__ import annotations

from agentfsm import ExitReason, RunSnapshot
from agentfsm.guards import AnswerComplete, AnswerIncomplete, Paused, non_empty_answer
from agentfsm.testing import call, snapshot, turn
from tests.guards.hits import fires


def cites_a_source(snap: RunSnapshot) -> str | None:
    """A verifier that wants a URL in the answer."""
    assert snap.output is not None
    return None if "http" in snap.output.text else "the answer cites no source"


def says_no(snap: RunSnapshot) -> bool:
    """A verifier that always fails with a bare False."""
    return False


def says_yes(snap: RunSnapshot) -> bool:
    """A verifier that always passes with True."""
    return True


class TestNonEmptyAnswer:
    def test_fails_blank_text(self) -> None:
        """Whitespace only is an empty answer."""
        assert non_empty_answer(snapshot(output=turn("  \n"))) == "the answer is empty"

    def test_fails_no_output(self) -> None:
        """No output at all is an empty answer."""
        assert non_empty_answer(snapshot()) == "the answer is empty"

    def test_passes_visible_text(self) -> None:
        """Any visible text passes."""
        assert non_empty_answer(snapshot(output=turn("42"))) is None


class TestAnswerComplete:
    def test_applies_to_a_plain_answer(self) -> None:
        """An answer with text, no calls and a stop finish is complete."""
        hit = fires(AnswerComplete(), output=turn("Paris."))
        assert hit.exit_reason is ExitReason.COMPLETED
        assert "passes the completion checks" in hit.reason

    def test_does_not_apply_to_an_empty_answer(self) -> None:
        """An empty answer never completes a task."""
        assert AnswerComplete()(snapshot(output=turn(""))) is None

    def test_does_not_apply_when_there_are_tool_calls(self) -> None:
        """An output with tool calls is not a final answer, whatever its text."""
        assert AnswerComplete()(snapshot(output=turn("Let me check", [call("search")]))) is None

    def test_does_not_apply_to_a_paused_turn(self) -> None:
        """Anthropic `pause_turn` is not final even with text."""
        assert AnswerComplete()(snapshot(output=turn("Working on it", finish="pause"))) is None

    def test_runs_every_verifier(self) -> None:
        """A verifier returning a problem keeps the answer from completing."""
        guard = AnswerComplete(cites_a_source)
        assert guard(snapshot(output=turn("It is 12C."))) is None
        assert guard(snapshot(output=turn("It is 12C, see https://example.org"))) is not None

    def test_true_and_none_pass_false_fails(self) -> None:
        """A verifier passes with True or None and fails with False."""
        answer = snapshot(output=turn("ok"))
        assert AnswerComplete(says_yes)(answer) is not None
        assert AnswerComplete(says_no)(answer) is None

    def test_repr_names_the_verifiers(self) -> None:
        """The repr lists verifiers by name, as code would."""
        assert repr(AnswerComplete()) == "AnswerComplete()"
        assert (
            repr(AnswerComplete(cites_a_source, says_yes))
            == "AnswerComplete(cites_a_source, says_yes)"
        )

    def test_equal_when_built_with_the_same_verifiers(self) -> None:
        """Two guards with the same verifiers are equal; different verifiers differ."""
        assert AnswerComplete(says_yes) == AnswerComplete(says_yes)
        assert AnswerComplete(says_yes) != AnswerComplete(says_no)


class TestAnswerIncomplete:
    def test_applies_with_the_verifiers_problem(self) -> None:
        """An answer failing a verifier applies, with that verifier's words as the reason."""
        hit = fires(AnswerIncomplete(cites_a_source), output=turn("It is 12C."))
        assert hit.reason == "the answer cites no source"

    def test_names_a_verifier_that_said_false(self) -> None:
        """A bare False is reported as that verifier failing, by name."""
        hit = fires(AnswerIncomplete(says_no), output=turn("ok"))
        assert hit.reason == "verifier says_no failed"

    def test_applies_to_an_empty_answer(self) -> None:
        """An empty answer is not done."""
        hit = fires(AnswerIncomplete(), output=turn(""))
        assert hit.reason == "the answer is empty"

    def test_does_not_apply_to_an_answer_that_passes_every_check(self) -> None:
        """An answer that passes every completion check is not incomplete."""
        assert AnswerIncomplete(says_yes)(snapshot(output=turn("Paris."))) is None

    def test_does_not_apply_when_calls_are_pending(self) -> None:
        """Tool calls, executable calls or rejected calls mean the turn is not an answer."""
        assert AnswerIncomplete()(snapshot(output=turn("", [call("search")]))) is None
        assert AnswerIncomplete()(snapshot(output=turn(""), executable=(call("a"),))) is None

    def test_results_without_a_final_answer_have_nothing_to_judge(self) -> None:
        """In the tool results phase only a final tool's answer (held as `output`) is judged;
        a human's reply is never judged."""
        assert AnswerIncomplete()(snapshot(phase="tool_results")) is None
        assert AnswerIncomplete()(snapshot(phase="human_reply", output=turn(""))) is None
        hit = fires(AnswerIncomplete(), phase="tool_results", output=turn(""))
        assert hit.reason == "the answer is empty"


class TestPaused:
    def test_applies_to_a_pause_without_calls(self) -> None:
        """`pause_turn` means call again; the reason quotes the raw finish reason."""
        hit = fires(Paused(), output=turn("Searching...", finish="pause"))
        assert "pause" in hit.reason
        assert "not final" in hit.reason

    def test_does_not_apply_to_a_stop(self) -> None:
        """A normal stop is not a pause."""
        assert Paused()(snapshot(output=turn("done"))) is None

    def test_does_not_apply_with_tool_calls(self) -> None:
        """A pause that carries tool calls is routed by its calls."""
        assert Paused()(snapshot(output=turn("", [call("a")], finish="pause"))) is None
