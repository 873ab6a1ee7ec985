"""Every call id the model made gets exactly one result, on every way a run ends.

A host following the README appends every model output that is not a RETRY to its
history, sends `decision.results` beside its own results, and stops at FINAL or STOP.
When the run stops on a turn whose calls will not run, the controller answers them
itself, so the host's history is never left with a call that has no result.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import agentfsm as af
from agentfsm import Action, ExitReason, FinishReason, ModelTurn, Policy, ToolCall, ToolResult

NAMES = ("search", "deploy", "rm")


def turn(*names: str, finish: FinishReason = FinishReason.TOOL_CALLS, **fields: Any) -> ModelTurn:
    """A model output calling `names`, with ids c0, c1, ..."""
    calls = [ToolCall(id=f"c{i}", name=n, arguments={"q": i}) for i, n in enumerate(names)]
    return ModelTurn(tool_calls=calls, finish_reason=finish, **fields)


def answered_once(decision: af.Decision, ids: list[str]) -> None:
    """Each id in `ids` has exactly one result in `decision.results`, an error saying why."""
    counts = Counter(r.call_id for r in decision.results)
    assert {i: counts[i] for i in ids} == dict.fromkeys(ids, 1), decision
    for result in decision.results:
        assert result.is_error
        assert isinstance(result.content, str)
        assert result.content


class TestStopOnAModelOutput:
    @pytest.mark.parametrize(
        ("policy", "output", "exit_reason"),
        [
            (Policy(max_turns=1), turn("search", "search"), ExitReason.MAX_TURNS),
            (Policy(max_tool_calls=1), turn("search", "deploy"), ExitReason.MAX_TOOL_CALLS),
            (
                Policy(max_tokens=10),
                turn("search", usage=af.Usage(input_tokens=20)),
                ExitReason.TOKEN_BUDGET,
            ),
            (
                Policy(max_cost=0.01),
                turn("search", usage=af.Usage(input_tokens=1, cost=0.5)),
                ExitReason.COST_BUDGET,
            ),
            (
                Policy(max_context_tokens=100),
                turn("search", usage=af.Usage(input_tokens=200)),
                ExitReason.CONTEXT_EXHAUSTED,
            ),
            (
                Policy(),
                turn("search", finish=FinishReason.REFUSAL, refusal="no"),
                ExitReason.REFUSAL,
            ),
            (
                Policy(),
                turn("search", finish=FinishReason.CONTENT_FILTER),
                ExitReason.CONTENT_FILTER,
            ),
            (
                Policy(),
                turn("search", "deploy", finish=FinishReason.ERROR, error="overloaded"),
                ExitReason.PROVIDER_ERROR,
            ),
            (
                Policy(on_deny="stop", permissions={"rm": "deny"}),
                turn("search", "rm"),
                ExitReason.PERMISSION_DENIED,
            ),
            (
                Policy(max_retries=0),
                turn("search", finish=FinishReason.LENGTH, truncated=True),
                ExitReason.UNRECOVERABLE_OUTPUT,
            ),
        ],
    )
    def test_the_calls_of_the_stopping_turn_get_error_results(
        self, policy: Policy, output: ModelTurn, exit_reason: ExitReason
    ) -> None:
        """A stop on a turn with calls answers each of them once, naming the stop's reason."""
        ctl = af.Controller(policy)
        d = ctl.on_model_output(output)
        assert (d.action, d.exit_reason) == (Action.STOP, exit_reason)
        answered_once(d, [c.id for c in output.tool_calls])
        not_run = [r for r in d.results if r.content.startswith("not executed")]
        assert all(d.reason in r.content for r in not_run)

    def test_a_deadline_stop_answers_the_calls(self) -> None:
        """A run past its wall-time budget stops, and the turn's calls get their results."""
        now = [0.0]
        ctl = af.Controller(Policy(max_seconds=5), clock=lambda: now[0])
        now[0] = 10.0
        d = ctl.on_model_output(turn("search", "deploy"))
        assert d.exit_reason is ExitReason.DEADLINE
        answered_once(d, ["c0", "c1"])

    def test_a_doom_loop_stop_answers_the_repeated_call(self) -> None:
        """With on_repeat="stop" the repeated call that ends the run gets its result."""
        ctl = af.Controller(Policy(on_repeat="stop"))
        for _ in range(3):
            d = ctl.on_model_output(turn("search"))
            if d.action is Action.EXECUTE_TOOLS:
                d = ctl.on_tool_results([ToolResult(call_id="c0", content="same")])
        assert d.exit_reason is ExitReason.DOOM_LOOP
        answered_once(d, ["c0"])


class TestHumanAndUser:
    def test_a_decline_answers_the_asked_and_the_allowed_calls(self) -> None:
        """A human declining without a message ends the run; every call of the turn is answered."""
        ctl = af.Controller(Policy(permissions={"deploy": "ask", "rm": "deny"}))
        asked = ctl.on_model_output(turn("search", "deploy", "rm"))
        assert asked.action is Action.ASK_HUMAN
        d = ctl.on_human_reply(approved=False)
        assert d.exit_reason is ExitReason.HUMAN_DECLINED
        assert Counter(r.call_id for r in [*asked.results, *d.results]) == Counter(
            ["c0", "c1", "c2"]
        )

    def test_an_approval_that_meets_a_budget_answers_the_approved_calls(self) -> None:
        """A budget reached as the human approves: the approved calls get their results."""
        ctl = af.Controller(Policy(max_turns=1, permissions={"deploy": "ask"}))
        asked = ctl.on_model_output(turn("deploy"))
        if asked.action is Action.ASK_HUMAN:
            d = ctl.on_human_reply(approved=True)
            answered_once(d, ["c0"])
        else:
            answered_once(asked, ["c0"])

    def test_a_user_message_while_a_human_is_asked_answers_every_call(self) -> None:
        """A user message instead of a reply declines with that message: each call answered."""
        ctl = af.Controller(Policy(permissions={"deploy": "ask"}))
        ctl.on_model_output(turn("search", "deploy"))
        d = ctl.on_user_message("no, check the logs first")
        assert d is not None
        assert d.action is Action.CONTINUE
        answered_once(d, ["c0", "c1"])
        assert all("check the logs first" in r.content for r in d.results)

    def test_stop_while_a_human_is_asked_answers_the_allowed_calls_too(self) -> None:
        """stop() during an approval answers the asked call and the allowed one beside it."""
        ctl = af.Controller(Policy(permissions={"deploy": "ask"}))
        ctl.on_model_output(turn("search", "deploy"))
        answered_once(ctl.stop(), ["c0", "c1"])


# -- the property: random runs, a host that follows the README ------------------------------

policies = st.builds(
    Policy,
    max_turns=st.integers(1, 5),
    max_tool_calls=st.none() | st.integers(0, 4),
    max_tokens=st.none() | st.integers(1, 400),
    max_context_tokens=st.none() | st.integers(50, 300),
    max_retries=st.integers(0, 2),
    max_consecutive_tool_errors=st.integers(1, 5),
    repeat_threshold=st.integers(2, 3),
    on_repeat=st.sampled_from(["feedback", "ask", "stop"]),
    on_deny=st.sampled_from(["feedback", "stop"]),
    permissions=st.fixed_dictionaries(
        {}, optional={n: st.sampled_from(["allow", "ask", "deny"]) for n in NAMES}
    ),
)
finishes = st.sampled_from(
    [FinishReason.TOOL_CALLS] * 6
    + [FinishReason.STOP, FinishReason.LENGTH, FinishReason.REFUSAL]
    + [FinishReason.CONTENT_FILTER, FinishReason.ERROR, FinishReason.UNKNOWN]
)


@st.composite
def outputs(draw: st.DrawFn, number: int) -> ModelTurn:
    """A model output: 0-3 calls (ids may be missing or repeated), any finish, some usage."""
    count = draw(st.integers(0, 3))
    calls = [
        ToolCall(
            id=draw(st.sampled_from([f"t{number}_{i}", f"t{number}_0", ""])),
            name=draw(st.sampled_from(NAMES)),
            arguments={"q": draw(st.integers(0, 1))},
        )
        for i in range(count)
    ]
    finish = draw(finishes)
    return ModelTurn(
        text=draw(st.sampled_from(["", "done"])),
        tool_calls=calls,
        finish_reason=finish,
        truncated=finish is FinishReason.LENGTH,
        error="boom" if finish is FinishReason.ERROR else None,
        usage=af.Usage(input_tokens=draw(st.integers(0, 150)), output_tokens=10),
    )


class TestEveryCallAnsweredProperty:
    @given(policies, st.data())
    def test_every_call_id_has_exactly_one_result_when_the_run_ends(
        self, policy: Policy, data: st.DataObject
    ) -> None:
        """Whatever the run and however it ends, each call the host holds has one result."""
        ctl = af.Controller(policy)
        history: list[str] = []  # call ids of the model outputs the host keeps
        results: list[str] = []  # call ids of every result the model will read
        for number in range(12):
            d = ctl.on_model_output(data.draw(outputs(number)))
            if d.action is not Action.RETRY:
                history += [c.id for c in ctl.last_output.tool_calls] if ctl.last_output else []
            d = self._act(ctl, d, data, results)
            if d.action in (Action.FINAL, Action.STOP):
                break
        else:
            d = ctl.stop()
            results += [r.call_id for r in d.results]
        assert ctl.done
        assert Counter(results) == Counter(history)

    @staticmethod
    def _act(
        ctl: af.Controller, d: af.Decision, data: st.DataObject, results: list[str]
    ) -> af.Decision:
        """Act on decisions as the README's host does, until the model is needed or it ends."""
        while True:
            results += [r.call_id for r in d.results]
            if d.action is Action.ASK_HUMAN:
                how = data.draw(st.sampled_from(["yes", "no", "no-note", "user", "stop"]))
                if how == "stop":
                    d = ctl.stop()
                elif how == "user":
                    reply = ctl.on_user_message("do something else")
                    assert reply is not None
                    d = reply
                else:
                    d = ctl.on_human_reply(how == "yes", None if how == "no" else "a note")
                continue
            if d.action in (Action.EXECUTE_TOOLS, Action.HANDOFF):
                ran = [c for c in d.tool_calls if ctl.may_run(c.id) and data.draw(st.booleans())]
                given = [ToolResult(call_id=c.id, content="ok") for c in ran]
                results += [r.call_id for r in given]
                d = ctl.on_tool_results(given)
                continue
            return d
