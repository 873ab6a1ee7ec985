"""Steering skips are answered, not failed; the repair bound counts rounds, not error results."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

import agentfsm as af
from agentfsm._runner.executor import SKIPPED, Executor

A, X, P = af.Action, af.ExitReason, af.Priority

DECLARED = [
    {
        "name": "read",
        "description": "Read a file.",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
        },
    }
]


def call(cid: str, name: str = "read", **arguments: Any) -> af.ToolCall:
    return af.ToolCall(id=cid, name=name, arguments=arguments or {"path": cid})


def turn(*calls: af.ToolCall) -> af.ModelTurn:
    return af.ModelTurn(tool_calls=list(calls), finish_reason=af.FinishReason.TOOL_CALLS)


def ok(cid: str) -> af.ToolResult:
    return af.ToolResult(call_id=cid, content=f"{cid} read")


def failed(cid: str) -> af.ToolResult:
    return af.ToolResult(call_id=cid, content="OSError: no such file", is_error=True)


def errors_in_a_row(ctl: af.Controller) -> int:
    count: int = ctl.dump()["run"]["tool_errors"]
    return count


class TestSteeringSkips:
    """A user message while results are pending skips the calls not run: none of them failed."""

    def test_a_skip_is_not_a_failure(self) -> None:
        """The calls a message skipped make a P1 continue, not P5 'N tool call(s) failed'."""
        ctl = af.Controller()
        ctl.on_model_output(turn(call("a"), call("b"), call("c")))
        ctl.on_user_message("stop, only a matters")
        d = ctl.on_tool_results([ok("a")])
        assert (d.action, d.priority, d.fired) == (A.CONTINUE, P.P1, "ResultsReady()")
        assert "failed" not in d.reason
        assert "2 call(s) were skipped" in d.reason
        assert "no result for call" not in d.reason
        assert [(r.call_id, r.content) for r in d.results] == [("b", SKIPPED), ("c", SKIPPED)]

    def test_the_runners_skip_results_are_skips_too(self) -> None:
        """The Executor's skip results (given by the host) are no failure either."""
        ctl = af.Controller()
        ctl.on_model_output(turn(call("a"), call("b")))
        ctl.on_user_message("wait")
        d = ctl.on_tool_results([ok("a"), Executor.skipped(call("b"))])
        assert (d.action, d.priority) == (A.CONTINUE, P.P1)
        assert d.results == []

    def test_a_real_failure_beside_skips_is_the_only_one_reported(self) -> None:
        """An error result next to skips is P5, and the count names only the failed call."""
        ctl = af.Controller()
        ctl.on_model_output(turn(call("a"), call("b"), call("c")))
        ctl.on_user_message("wait")
        d = ctl.on_tool_results([failed("a")])
        assert (d.action, d.priority) == (A.CONTINUE, P.P5)
        assert d.reason.startswith("1 tool call(s) failed")

    def test_a_skip_text_without_a_user_message_is_an_error(self) -> None:
        """Only a user message makes a skip: an error result reading like one still counts."""
        ctl = af.Controller(af.Policy(max_consecutive_tool_errors=1))
        ctl.on_model_output(turn(call("a")))
        d = ctl.on_tool_results([af.ToolResult(call_id="a", content=SKIPPED, is_error=True)])
        assert (d.action, d.exit_reason) == (A.STOP, X.TOOL_ERRORS)

    def test_a_round_of_skips_leaves_the_streak_as_it_was(self) -> None:
        """Skips neither count toward the repair bound nor reset it."""
        ctl = af.Controller(af.Policy(max_consecutive_tool_errors=2))
        ctl.on_model_output(turn(call("a")))
        ctl.on_tool_results([failed("a")])
        ctl.on_model_output(turn(call("b")))
        ctl.on_user_message("wait")
        assert ctl.on_tool_results([]).action is A.CONTINUE
        assert errors_in_a_row(ctl) == 1
        ctl.on_model_output(turn(call("c")))
        assert ctl.on_tool_results([failed("c")]).exit_reason is X.TOOL_ERRORS

    @given(
        n=st.integers(1, 5),
        data=st.data(),
        steer=st.booleans(),
        bound=st.integers(1, 3),
        before=st.integers(0, 2),
    )
    def test_every_call_is_answered_once_and_only_real_errors_fail(
        self, n: int, data: st.DataObject, steer: bool, bound: int, before: int
    ) -> None:
        """Any batch, any results given (success, error, the runner's skip, none), with or
        without a user message: each call has exactly one result, P5 and the repair count
        follow the results that are not skips, and a skip is a skip only after a message."""
        ctl = af.Controller(af.Policy(max_consecutive_tool_errors=bound + before))
        for k in range(before):  # failed rounds already in a row
            ctl.on_model_output(turn(call(f"p{k}")))
            ctl.on_tool_results([failed(f"p{k}")])
        ids = [f"c{i}" for i in range(n)]
        ctl.on_model_output(turn(*(call(i) for i in ids)))
        if steer:
            ctl.on_user_message("change of plan")
        kinds = data.draw(st.lists(st.sampled_from(["ok", "error", "skip", "none"]), min_size=n))
        given_results = []
        for cid, kind in zip(ids, kinds, strict=False):
            if kind == "ok":
                given_results.append(ok(cid))
            elif kind == "error":
                given_results.append(failed(cid))
            elif kind == "skip":
                given_results.append(Executor.skipped(call(cid)))
        d = ctl.on_tool_results(given_results)
        answered = [r.call_id for r in (*given_results, *d.results)]
        assert sorted(answered) == sorted(ids)
        every = {r.call_id: r for r in (*given_results, *d.results)}
        real_errors = [
            i for i in ids if every[i].is_error and not (steer and every[i].content == SKIPPED)
        ]
        answered_not_skipped = [
            i for i in ids if not (steer and every[i].is_error and every[i].content == SKIPPED)
        ]
        expected = before + 1 if real_errors else (0 if answered_not_skipped else before)
        if expected >= bound + before:
            assert (d.action, d.exit_reason) == (A.STOP, X.TOOL_ERRORS)
        else:
            assert d.action is A.CONTINUE
            assert d.priority is (P.P5 if real_errors else P.P1)
            assert errors_in_a_row(ctl) == expected


class TestRepairRounds:
    """`max_consecutive_tool_errors` bounds failed rounds of calls, however many calls failed."""

    def test_a_batch_that_failed_whole_is_one_round_and_reaches_the_model(self) -> None:
        """Three failed parallel calls under a bound of 2: the errors go to the model (P5)."""
        ctl = af.Controller(af.Policy(max_consecutive_tool_errors=2))
        ctl.on_model_output(turn(call("a"), call("b"), call("c")))
        d = ctl.on_tool_results([failed("a"), failed("b"), failed("c")])
        assert (d.action, d.priority, d.exit_reason) == (A.CONTINUE, P.P5, None)
        assert d.reason.startswith("3 tool call(s) failed")
        ctl.on_model_output(turn(call("d"), call("e")))
        d = ctl.on_tool_results([failed("d"), failed("e")])
        assert (d.action, d.exit_reason) == (A.STOP, X.TOOL_ERRORS)
        assert "2 rounds of tool calls in a row failed (limit 2)" in d.reason

    def test_a_turn_with_several_invalid_calls_still_runs_its_valid_one(self) -> None:
        """Two calls refused by the schema and one valid: the valid one executes, the
        refused ones get error results, and the round counts once."""
        ctl = af.Controller(af.Policy(max_consecutive_tool_errors=2), tools=DECLARED)
        bad = [af.ToolCall(id=i, name="read", arguments={"file": i}) for i in ("x", "y")]
        d = ctl.on_model_output(turn(*bad, call("a")))
        assert d.action is A.EXECUTE_TOOLS
        assert [c.id for c in d.tool_calls] == ["a"]
        assert [(r.call_id, r.is_error) for r in d.results] == [("x", True), ("y", True)]
        d = ctl.on_tool_results([ok("a")])
        assert d.action is A.CONTINUE
        assert errors_in_a_row(ctl) == 1

    def test_refusals_and_a_failed_result_of_one_turn_are_one_round(self) -> None:
        """A refused call and a failed sibling count once, at the results."""
        ctl = af.Controller(af.Policy(max_consecutive_tool_errors=2), tools=DECLARED)
        bad = af.ToolCall(id="x", name="write", arguments={})
        ctl.on_model_output(turn(bad, call("a")))
        d = ctl.on_tool_results([failed("a")])
        assert (d.action, d.priority) == (A.CONTINUE, P.P5)
        assert errors_in_a_row(ctl) == 1

    def test_a_round_without_failure_ends_the_streak(self) -> None:
        """A round whose calls all succeeded starts the count again."""
        ctl = af.Controller(af.Policy(max_consecutive_tool_errors=2))
        ctl.on_model_output(turn(call("a")))
        ctl.on_tool_results([failed("a")])
        ctl.on_model_output(turn(call("b"), call("c")))
        ctl.on_tool_results([ok("b"), ok("c")])
        assert errors_in_a_row(ctl) == 0

    @given(
        rounds=st.lists(
            st.lists(st.sampled_from(["ok", "error", "refused"]), min_size=1, max_size=4),
            min_size=1,
            max_size=6,
        ),
        bound=st.integers(1, 4),
    )
    def test_the_run_ends_at_the_bound_th_failed_round_in_a_row_and_never_before(
        self, rounds: list[list[str]], bound: int
    ) -> None:
        """Rounds of calls that succeed, fail or are refused (any mix, any size): the run ends
        TOOL_ERRORS exactly at the decision that reports the `bound`-th failed round in a row;
        every earlier round's errors go back to the model, and valid calls beside refused
        ones run."""
        ctl = af.Controller(
            af.Policy(max_consecutive_tool_errors=bound, max_turns=50), tools=DECLARED
        )
        streak = 0
        for index, kinds in enumerate(rounds):
            calls = [
                af.ToolCall(id=f"r{index}c{i}", name="read", arguments={"file": index})
                if kind == "refused"
                else call(f"r{index}c{i}", path=f"{index}/{i}")
                for i, kind in enumerate(kinds)
            ]
            d = ctl.on_model_output(turn(*calls))
            runnable = [c for c, kind in zip(calls, kinds, strict=True) if kind != "refused"]
            streak = streak + 1 if "error" in kinds or "refused" in kinds else 0
            if not runnable:
                assert d.action is (A.STOP if streak >= bound else A.CONTINUE)
            else:
                assert [c.id for c in d.tool_calls] == [c.id for c in runnable]
                results = [
                    failed(c.id) if kind == "error" else ok(c.id)
                    for c, kind in zip(calls, kinds, strict=True)
                    if kind != "refused"
                ]
                d = ctl.on_tool_results(results)
            if streak >= bound:
                assert d.exit_reason is X.TOOL_ERRORS
                return
            assert d.action is A.CONTINUE
            assert d.exit_reason is None
