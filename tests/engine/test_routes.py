"""The route table: rows in evaluation order, built from a policy and checked when built."""

from __future__ import annotations

import pytest

from agentfsm import Controller, Policy, Priority, RunSnapshot, State
from agentfsm._engine import Route, RouteTable, build_routes
from agentfsm.exceptions import MachineDefinitionError
from agentfsm.guards import (
    AnswerComplete,
    AnswerIncomplete,
    CostBudget,
    Guard,
    HandoffRequested,
    HasToolCalls,
    MaxTurns,
    NeedsApproval,
    NoProgress,
    Otherwise,
    PermissionDenied,
    RepeatedCall,
    ResultsReady,
    SignalConflict,
    TokenBudget,
)
from agentfsm.testing import call, snapshot, turn

S = State
INTENT = {Priority.P1, Priority.P2}
COMPLETION = {Priority.P3, Priority.P4}


def first_route(table: RouteTable, state: State, snap: RunSnapshot) -> Route:
    """The row the machine takes out of `state`: the first whose guard applies."""
    return next(r for r in table.by_source[state] if r.guard(snap) is not None)


def guarded(table: RouteTable, state: State) -> list[Route]:
    """The rows out of `state` before its fallback."""
    return [r for r in table.by_source[state] if not isinstance(r.guard, Otherwise)]


def sound_rows() -> list[Route]:
    """A minimal sound table: every state reachable, every state reaches end, fallbacks last."""
    o = Otherwise()
    return [
        Route(S.AWAIT_MODEL, o, S.PARSE),
        Route(S.PARSE, o, S.VALIDATE),
        Route(S.VALIDATE, o, S.VERIFY),
        Route(S.VERIFY, o, S.BUDGET_CHECK),
        Route(S.BUDGET_CHECK, HasToolCalls(), S.EXECUTE),
        Route(S.BUDGET_CHECK, HandoffRequested(), S.HANDOFF),
        Route(S.BUDGET_CHECK, NeedsApproval(), S.AWAIT_HUMAN),
        Route(S.BUDGET_CHECK, MaxTurns(1), S.RECOVER),
        Route(S.BUDGET_CHECK, o, S.END),
        Route(S.RECOVER, o, S.AWAIT_MODEL),
        Route(S.EXECUTE, o, S.BUDGET_CHECK),
        Route(S.HANDOFF, o, S.BUDGET_CHECK),
        Route(S.AWAIT_HUMAN, o, S.BUDGET_CHECK),
    ]


def replace(rows: list[Route], source: State, new: list[Route]) -> list[Route]:
    """`rows` with the rows out of `source` replaced by `new`."""
    return [r for r in rows if r.source is not source] + new


class TestDefaultTable:
    def test_the_default_policy_builds_a_sound_table(self) -> None:
        """`build_routes(Policy())` passes validation and covers every state but end."""
        table = build_routes(Policy())
        assert len(table) > 0
        assert {r.source for r in table} == set(State) - {S.END}
        assert RouteTable(table.routes) == table

    def test_every_non_terminal_state_ends_in_a_fallback(self) -> None:
        """The last row out of each state is an Otherwise, so no run can get stuck."""
        table = build_routes(Policy())
        for state in set(State) - {S.END}:
            assert isinstance(table.by_source[state][-1].guard, Otherwise), state

    def test_p0_rows_come_first(self) -> None:
        """Out of every state, the P0 structure rows precede every other guarded row."""
        table = build_routes(Policy())
        for state in State:
            priorities = [r.guard.leaf_priority() for r in guarded(table, state)]
            p0 = [i for i, p in enumerate(priorities) if p is Priority.P0]
            other = [i for i, p in enumerate(priorities) if p is not Priority.P0]
            if p0 and other:
                assert max(p0) < min(other), (state, priorities)

    def test_parse_recovers_before_it_ends_and_reconciles_last(self) -> None:
        """Out of parse: P0 recoveries, then P6 terminal checks, then the P7 reconciliation."""
        table = build_routes(Policy())
        priorities = [r.guard.leaf_priority() for r in guarded(table, S.PARSE)]
        p0 = [i for i, p in enumerate(priorities) if p is Priority.P0]
        p6 = [i for i, p in enumerate(priorities) if p is Priority.P6]
        p7 = [i for i, p in enumerate(priorities) if p is Priority.P7]
        assert p0
        assert p6
        assert p7
        assert max(p0) < min(p6)
        assert max(p6) < min(p7)

    def test_boundaries_come_before_intent_and_completion(self) -> None:
        """Out of every state, every P6 row precedes every P1/P2 and P3/P4 row."""
        table = build_routes(Policy())
        for state in State:
            priorities = [r.guard.leaf_priority() for r in guarded(table, state)]
            later = [i for i, p in enumerate(priorities) if p in INTENT | COMPLETION]
            p6 = [i for i, p in enumerate(priorities) if p is Priority.P6]
            if later and p6:
                assert max(p6) < min(later), (state, priorities)

    def test_intent_comes_before_completion(self) -> None:
        """Out of every state, the model's P1/P2 intents precede every P3/P4 row.

        ResultsReady is left out: it reads tool results, where no completion row applies.
        """
        table = build_routes(Policy())
        for state in State:
            rows = [r for r in guarded(table, state) if not isinstance(r.guard, ResultsReady)]
            priorities = [r.guard.leaf_priority() for r in rows]
            intent = [i for i, p in enumerate(priorities) if p in INTENT]
            completion = [i for i, p in enumerate(priorities) if p in COMPLETION]
            if intent and completion:
                assert max(intent) < min(completion), (state, priorities)

    def test_labels_read_priority_then_guard(self) -> None:
        """A route's label is its leaf priority and the guard's repr."""
        route = Route(S.VALIDATE, RepeatedCall(3), S.END)
        assert route.label() == "P6 RepeatedCall(3)"


class TestEvaluationOrder:
    def test_a_truncated_output_recovers_before_any_conflict_is_noted(self) -> None:
        """A cut output that claims `stop` with tool calls goes to recover (P0 before P7)."""
        out = turn("", [call("search")], finish="stop", truncated=True)
        route = first_route(Policy().routes, S.PARSE, snapshot(output=out))
        assert route.dest is S.RECOVER

    def test_stop_with_tool_calls_is_reconciled_and_validated(self) -> None:
        """`stop` with tool calls is a P7 conflict that moves on to validate, not to end."""
        out = turn("", [call("search")], finish="stop")
        route = first_route(Policy().routes, S.PARSE, snapshot(output=out))
        assert isinstance(route.guard, SignalConflict)
        assert route.dest is S.VALIDATE

    def test_a_refusal_ends_before_its_conflict_is_reconciled(self) -> None:
        """A refusal that claims `tool_calls` without any call still ends the run."""
        out = turn("I won't.", finish="tool_calls").model_copy(update={"refusal": "I won't."})
        route = first_route(Policy().routes, S.PARSE, snapshot(output=out))
        assert route.dest is S.END

    def test_the_third_identical_call_is_not_executed(self) -> None:
        """With on_repeat="stop", a call repeated a third time goes to end (P6 before P1)."""
        snap = snapshot(
            output=turn("", [call("search")]), executable=(call("search"),), repeat_streak=3
        )
        route = first_route(Policy(on_repeat="stop").routes, S.VALIDATE, snap)
        assert route.guard == RepeatedCall(3)
        assert route.dest is S.END

    def test_approval_is_asked_before_calls_run(self) -> None:
        """A call that needs approval goes to await_human even beside runnable calls."""
        snap = snapshot(executable=(call("search"),), needs_approval=(call("write_file"),))
        route = first_route(Policy().routes, S.VALIDATE, snap)
        assert route.dest is S.AWAIT_HUMAN

    def test_an_exhausted_budget_stops_calls_before_they_run(self) -> None:
        """In budget_check, MaxTurns at its limit wins over executing valid calls."""
        snap = snapshot(turn=50, executable=(call("search"),))
        route = first_route(Policy().routes, S.BUDGET_CHECK, snap)
        assert route.guard == MaxTurns(50)
        assert route.dest is S.END

    def test_valid_calls_are_executed_rather_than_verified(self) -> None:
        """An output with valid calls and text goes to budget_check, not verify."""
        snap = snapshot(output=turn("Let me look", [call("search")]), executable=(call("search"),))
        assert first_route(Policy().routes, S.VALIDATE, snap).dest is S.BUDGET_CHECK

    def test_a_complete_answer_ends_and_an_empty_one_does_not(self) -> None:
        """Out of verify, a complete answer ends the run; an empty one goes on to budget_check."""
        table = Policy().routes
        assert first_route(table, S.VERIFY, snapshot(output=turn("Paris."))).dest is S.END
        assert first_route(table, S.VERIFY, snapshot(output=turn(""))).dest is S.BUDGET_CHECK


class TestHumanReplyBudgets:
    def test_a_decline_that_goes_back_to_the_model_meets_max_turns(self) -> None:
        """Regression: a decline with a message at the last turn went to the model for a turn
        past max_turns, a state Controller.load then refused as impossible."""
        policy = Policy(max_turns=2, permission_rules=["ask *"])
        ctl = Controller(policy)
        for n in (1, 2):
            assert ctl.on_model_output(turn(calls=[call("bash", {"n": n})])).action == "ask_human"
            decision = ctl.on_human_reply(approved=False, message="not that")
        assert decision.action == "stop"
        assert decision.exit_reason == "max_turns"
        assert ctl.turn == 2
        Controller.load(ctl.dump(), policy=policy)  # a state the live controller can reach


class TestPolicyChoices:
    def test_repeats_stop_the_run_with_stop(self) -> None:
        """With `on_repeat="stop"`, RepeatedCall leads to end."""
        policy = Policy(on_repeat="stop")
        rows = [r for r in policy.routes if isinstance(r.guard, RepeatedCall)]
        assert [(r.source, r.dest) for r in rows] == [(S.VALIDATE, S.END)]

    def test_on_repeat_ask_sends_repeats_to_a_human(self) -> None:
        """With `on_repeat="ask"`, RepeatedCall leads to await_human instead of end."""
        rows = [r for r in Policy(on_repeat="ask").routes if isinstance(r.guard, RepeatedCall)]
        assert [(r.source, r.dest) for r in rows] == [(S.VALIDATE, S.AWAIT_HUMAN)]

    def test_the_repeat_threshold_is_the_policys(self) -> None:
        """`repeat_threshold=5` with on_repeat="stop" builds RepeatedCall(5)."""
        policy = Policy(repeat_threshold=5, on_repeat="stop")
        assert Route(S.VALIDATE, RepeatedCall(5), S.END) in policy.routes

    def test_feedback_stops_only_after_two_more_repeats(self) -> None:
        """With on_repeat="feedback" (the default) the stop comes FEEDBACK_GRACE repeats later."""
        from agentfsm._engine.policy import FEEDBACK_GRACE

        threshold = 3 + FEEDBACK_GRACE
        assert Route(S.VALIDATE, RepeatedCall(threshold), S.END) in Policy().routes

    def test_on_deny_stop_adds_a_permission_denied_stop(self) -> None:
        """`on_deny="stop"` adds PermissionDenied -> end out of validate, before approvals."""
        default = [r for r in Policy().routes if isinstance(r.guard, PermissionDenied)]
        assert all(r.dest is not S.END for r in default)
        table = Policy(on_deny="stop").routes
        guards = [r.guard for r in table.by_source[S.VALIDATE]]
        assert Route(S.VALIDATE, PermissionDenied(), S.END) in table
        assert guards.index(PermissionDenied()) < guards.index(NeedsApproval())
        assert guards.index(PermissionDenied()) < guards.index(HasToolCalls())

    def test_on_incomplete_ask_sends_unfinished_answers_to_a_human(self) -> None:
        """`on_incomplete="ask"` routes AnswerIncomplete to await_human."""
        table = Policy(on_incomplete="ask").routes
        rows = [r for r in table if isinstance(r.guard, AnswerIncomplete)]
        assert [r.dest for r in rows] == [S.AWAIT_HUMAN]

    def test_budgets_become_stop_rows_out_of_budget_check_and_recover(self) -> None:
        """`max_tokens` and extra guards become rows to end out of budget_check and recover."""
        extra = CostBudget(0.5) | TokenBudget(9)
        table = Policy(max_tokens=1_000, guards=[extra]).routes
        for source in (S.BUDGET_CHECK, S.RECOVER):
            assert Route(source, TokenBudget(1_000), S.END) in table
            assert Route(source, extra, S.END) in table

    def test_no_progress_can_be_turned_off(self) -> None:
        """`no_progress_threshold=None` leaves NoProgress out of the table."""
        guards = [r.guard for r in Policy(no_progress_threshold=None).routes]
        assert not any(isinstance(g, NoProgress) for g in guards)
        assert any(isinstance(g, NoProgress) for g in (r.guard for r in Policy().routes))

    def test_verifiers_are_passed_to_the_completion_guards(self) -> None:
        """The policy's verifiers are the ones AnswerComplete runs."""

        def cites(snap: RunSnapshot) -> bool:
            return False

        table = Policy(verifiers=(cites,)).routes
        assert Route(S.VERIFY, AnswerComplete(cites), S.END) in table


class TestValidation:
    def test_a_sound_table_is_accepted(self) -> None:
        """The minimal sound table builds without error."""
        assert len(RouteTable(sound_rows())) == len(sound_rows())

    def test_an_edge_out_of_end_is_refused(self) -> None:
        """An edge leaving end is a MachineDefinitionError naming its destination."""
        rows = [*sound_rows(), Route(S.END, Otherwise(), S.AWAIT_MODEL)]
        with pytest.raises(MachineDefinitionError, match=r"'end'.*await_model"):
            RouteTable(rows)

    def test_a_missing_fallback_is_refused(self) -> None:
        """A state whose last row is not Otherwise is named in the error."""
        rows = replace(sound_rows(), S.HANDOFF, [Route(S.HANDOFF, HasToolCalls(), S.BUDGET_CHECK)])
        with pytest.raises(MachineDefinitionError, match=r"fallback.*: handoff$"):
            RouteTable(rows)

    def test_a_state_without_any_row_lacks_a_fallback(self) -> None:
        """A state with no rows at all is named as lacking a fallback."""
        rows = replace(sound_rows(), S.EXECUTE, [])
        with pytest.raises(MachineDefinitionError, match=r"fallback.*execute"):
            RouteTable(rows)

    def test_a_fallback_that_is_not_last_does_not_count(self) -> None:
        """An Otherwise row followed by another row is no fallback."""
        rows = replace(
            sound_rows(),
            S.HANDOFF,
            [
                Route(S.HANDOFF, Otherwise(), S.BUDGET_CHECK),
                Route(S.HANDOFF, HasToolCalls(), S.END),
            ],
        )
        with pytest.raises(MachineDefinitionError, match=r"fallback.*handoff"):
            RouteTable(rows)

    def test_an_unreachable_state_is_refused(self) -> None:
        """A state no edge leads to is named as unreachable from await_model."""
        rows = [r for r in sound_rows() if r.dest is not S.HANDOFF]
        with pytest.raises(MachineDefinitionError, match=r"unreachable from await_model: handoff$"):
            RouteTable(rows)

    def test_a_trap_is_refused(self) -> None:
        """A state that cannot reach end is named as a trap."""
        rows = replace(
            sound_rows(), S.AWAIT_HUMAN, [Route(S.AWAIT_HUMAN, Otherwise(), S.AWAIT_HUMAN)]
        )
        with pytest.raises(
            MachineDefinitionError, match=r"cannot reach 'end' \(traps\): await_human$"
        ):
            RouteTable(rows)

    def test_every_trapped_state_is_named(self) -> None:
        """When several states are trapped together, all of them are named."""
        rows = replace(sound_rows(), S.HANDOFF, [Route(S.HANDOFF, Otherwise(), S.AWAIT_HUMAN)])
        rows = replace(rows, S.AWAIT_HUMAN, [Route(S.AWAIT_HUMAN, Otherwise(), S.HANDOFF)])
        with pytest.raises(MachineDefinitionError, match=r"traps.*: await_human, handoff$"):
            RouteTable(rows)

    def test_a_spin_between_working_states_is_refused(self) -> None:
        """A cycle that never reaches a waiting state is refused, naming the states in it."""
        rows = replace(
            sound_rows(),
            S.VERIFY,
            [
                Route(S.VERIFY, HasToolCalls(), S.PARSE),
                Route(S.VERIFY, Otherwise(), S.BUDGET_CHECK),
            ],
        )
        with pytest.raises(MachineDefinitionError, match="loop forever") as info:
            RouteTable(rows)
        for name in ("parse", "validate", "verify"):
            assert name in str(info.value)
        assert "budget_check" not in str(info.value)

    def test_a_cycle_through_a_waiting_state_is_allowed(self) -> None:
        """A cycle that passes through await_model is the normal loop, not a spin."""
        rows = replace(
            sound_rows(),
            S.VERIFY,
            [
                Route(S.VERIFY, HasToolCalls(), S.AWAIT_MODEL),
                Route(S.VERIFY, Otherwise(), S.BUDGET_CHECK),
            ],
        )
        assert len(RouteTable(rows)) == len(rows)


class TestRouteTable:
    def test_rows_are_indexed_by_source_in_order(self) -> None:
        """`by_source[state]` holds that state's rows in table order; end has none."""
        table = RouteTable(sound_rows())
        assert [r.dest for r in table.by_source[S.BUDGET_CHECK]] == [
            S.EXECUTE,
            S.HANDOFF,
            S.AWAIT_HUMAN,
            S.RECOVER,
            S.END,
        ]
        assert table.by_source[S.END] == ()

    def test_equal_rows_make_equal_tables(self) -> None:
        """Tables of equal rows are equal and hash alike; tables of different policies differ."""
        assert RouteTable(sound_rows()) == RouteTable(sound_rows())
        assert hash(RouteTable(sound_rows())) == hash(RouteTable(sound_rows()))
        assert build_routes(Policy(max_turns=7)) != build_routes(Policy())

    def test_routes_are_frozen(self) -> None:
        """A Route cannot be changed once built."""
        route = Route(S.PARSE, Otherwise(), S.VALIDATE)
        with pytest.raises(AttributeError):
            route.dest = S.END  # type: ignore[misc]

    def test_guard_type_is_kept(self) -> None:
        """A route keeps the very guard object it was given."""
        guard: Guard = MaxTurns(3) | RepeatedCall(4)
        assert Route(S.BUDGET_CHECK, guard, S.END).guard is guard
