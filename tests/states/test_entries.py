"""Each named state's entry function: the work done on entering it."""

from __future__ import annotations

import pytest

import agentfsm as af
from agentfsm._model.run_state import Run, Step
from agentfsm._model.snapshot import RunSnapshot
from agentfsm._model.tools import tool_specs
from agentfsm.exceptions import PayloadError, UnknownCallIdError
from agentfsm.guards import MaxTurns
from agentfsm.guards._base import Hit
from agentfsm.states import (
    ENTRY,
    NO_WORK,
    await_human,
    await_model,
    end,
    execute,
    handoff,
    parse,
    recover,
    validate,
)
from agentfsm.testing import call, turn


def new_run(policy: af.Policy | None = None, tools: list[str] | None = None) -> Run:
    return Run("r", policy or af.Policy(), tool_specs(tools))


def parsed(run: Run, output: object) -> Step:
    step = Step(RunSnapshot(), output)
    parse.enter(run, step)
    return step


class TestEntryTable:
    def test_every_state_has_an_entry_module(self) -> None:
        """Every state is either in ENTRY or documented as doing its work in its guards."""
        assert set(ENTRY) | set(NO_WORK) == set(af.State)
        assert not set(ENTRY) & set(NO_WORK)


class TestParse:
    def test_counts_the_turn_and_its_usage(self) -> None:
        """Entering parse counts one turn and adds the output's tokens and cost."""
        run = new_run()
        step = parsed(run, turn("hi", usage=(100, 20), cost=0.01))
        assert (run.turn, run.tokens, run.cost, run.context_tokens) == (1, 120, 0.01, 120)
        assert (step.snap.turn, step.snap.tokens_used) == (1, 120)

    def test_reads_a_provider_payload(self) -> None:
        """A raw provider body is normalized into the step's ModelTurn."""
        body = {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "text", "text": "Hello"}],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 3, "output_tokens": 1},
        }
        step = parsed(new_run(), body)
        assert step.output is not None
        assert (step.output.text, step.output.finish_reason) == ("Hello", af.FinishReason.STOP)

    def test_a_bad_payload_raises_before_anything_is_counted(self) -> None:
        """An unreadable payload raises PayloadError and the run's counters stay put."""
        run = new_run()
        with pytest.raises(PayloadError):
            parsed(run, {"nothing": "here"})
        assert run.turn == 0

    def test_issues_missing_and_duplicate_ids_with_notes(self) -> None:
        """Empty and repeated ids are replaced deterministically and noted."""
        step = parsed(new_run(), turn(calls=[call("a", id="x"), call("b"), call("c", id="x")]))
        assert step.output is not None
        assert [c.id for c in step.output.tool_calls] == ["x", "afsm_1_1", "afsm_1_2"]
        assert len(step.snap.notes) == 2


class TestValidate:
    def test_partitions_the_calls(self) -> None:
        """Declared calls run, undeclared ones are refused, 'ask' ones wait, handoffs alone."""
        policy = af.Policy(permissions={"ask_me": "ask", "never": "deny"})
        run = new_run(policy, ["ok", "ask_me", "never"])
        step = parsed(
            run,
            turn(
                calls=[
                    call("ok", id="1"),
                    call("ask_me", id="2"),
                    call("never", id="3"),
                    call("ghost", id="4"),
                ]
            ),
        )
        validate.enter(run, step)
        snap = step.snap
        assert [c.id for c in snap.executable] == ["1"]
        assert [c.id for c in snap.needs_approval] == ["2"]
        assert [c.id for c in snap.denied] == ["3"]
        assert sorted(r.call_id for r in snap.rejected) == ["3", "4"]

    def test_a_handoff_with_other_calls_is_refused(self) -> None:
        """A handoff must be the only call of its turn; otherwise it gets an error result."""
        run = new_run(af.Policy(handoffs=frozenset({"transfer"})))
        step = parsed(run, turn(calls=[call("transfer", id="h"), call("x", id="1")]))
        validate.enter(run, step)
        assert step.snap.handoffs == ()
        assert "only call" in step.snap.rejected[0].content

    def test_the_streak_counts_rounds_not_parallel_copies(self) -> None:
        """Three identical calls in one turn are one round; the same round next turn is two."""
        run = new_run()
        same = [call("g", {"q": 1}, id=str(i)) for i in range(3)]
        step = parsed(run, turn(calls=same))
        validate.enter(run, step)
        assert step.snap.repeat_streak == 1
        execute.enter(run, step)
        step = parsed(run, turn(calls=[call("g", {"q": 1}, id=str(i + 3)) for i in range(3)]))
        validate.enter(run, step)
        assert step.snap.repeat_streak == 2

    def test_a_usable_output_resets_the_retry_count(self) -> None:
        """Entering validate means the output was usable: retries in a row go back to 0."""
        run = new_run()
        run.retries = 2
        validate.enter(run, parsed(run, turn("fine")))
        assert run.retries == 0


class TestExecute:
    def prepared(self) -> tuple[Run, Step]:
        run = new_run()
        step = parsed(run, turn(calls=[call("a", id="1"), call("b", id="2")]))
        validate.enter(run, step)
        execute.enter(run, step)
        return run, step

    def test_makes_the_calls_pending_and_counts_them(self) -> None:
        """Entering execute makes every call pending and counts it against the budget."""
        run, _ = self.prepared()
        assert list(run.pending) == ["1", "2"]
        assert run.tool_calls_used == 2

    def test_collect_pairs_results_and_synthesizes_the_missing(self) -> None:
        """Results come back in call order; a missing id gets an error result."""
        run, _ = self.prepared()
        fields = execute.collect(run, [af.ToolResult(call_id="2", content="two")])
        results = fields["results"]
        assert isinstance(results, tuple)
        assert [(r.call_id, r.is_error) for r in results] == [("1", True), ("2", False)]
        assert fields["missing"] == ("1",)

    def test_collect_refuses_unknown_and_doubled_ids(self) -> None:
        """An unknown id or a second result for one id raises UnknownCallIdError."""
        run, _ = self.prepared()
        with pytest.raises(UnknownCallIdError, match="never asked for"):
            execute.collect(run, [af.ToolResult(call_id="9", content="?")])
        with pytest.raises(UnknownCallIdError, match="two results"):
            execute.collect(run, [af.ToolResult(call_id="1"), af.ToolResult(call_id="1")])


class TestSmallerStates:
    def test_recover_counts_one_retry(self) -> None:
        """Entering recover adds one retry in a row."""
        run = new_run()
        recover.enter(run, Step(RunSnapshot()))
        assert run.retries == 1

    def test_handoff_makes_the_handoff_pending(self) -> None:
        """Entering handoff waits for the delegate's result on the handoff call."""
        run = new_run()
        handoff.enter(run, Step(RunSnapshot(handoffs=(call("transfer", id="h"),))))
        assert list(run.pending) == ["h"]

    def test_await_human_keeps_what_needs_approval(self) -> None:
        """Entering await_human keeps the calls to approve and the refused calls' results."""
        run = new_run()
        refused = af.ToolResult(call_id="x", content="no", is_error=True)
        snap = RunSnapshot(needs_approval=(call("rm", id="1"),), rejected=(refused,))
        await_human.enter(run, Step(snap))
        assert [c.id for c in run.pending_approval] == ["1"]
        assert run.pending_rejected == (refused,)

    def test_await_model_commits_the_counters(self) -> None:
        """Entering await_model commits error and no-progress counters and clears pending."""
        run = new_run()
        run.pending = {"1": call("a", id="1")}
        await_model.enter(run, Step(RunSnapshot(tool_errors_in_a_row=2, same_results_in_a_row=1)))
        assert (run.tool_errors, run.same_results, run.pending) == (2, 1, {})

    def test_end_records_the_exit_reason(self) -> None:
        """Entering end records the exit reason of the guard that ended the run."""
        run = new_run()
        step = Step(RunSnapshot())
        step.hit = Hit(MaxTurns(1), "out of turns", af.ExitReason.MAX_TURNS)
        end.enter(run, step)
        assert run.exit_reason is af.ExitReason.MAX_TURNS
