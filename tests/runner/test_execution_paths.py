"""Every path that executes a call asks `Controller.may_run` by call id first.

The Executor given `controller=`, the runner (`af.run`) and its handoffs to
child agents, and a Controller restored from a dump: random policies and
model outputs go through each, and a side-effect log proves that no denied
call runs and that every call runs at most once and gets exactly one result.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentfsm as af
from agentfsm._runner.agents import cleared
from agentfsm._runner.executor import Executor
from agentfsm._runner.loop import Agent
from agentfsm._runner.retry import ProviderRetry
from agentfsm.exceptions import InvalidInputError
from agentfsm.testing import call, turn
from agentfsm.testing.scripted import Reply, ScriptedCall, say
from agentfsm.testing.server import ScriptedServer
from tests.conftest import LITELLM_CLIENT
from tests.runner.conftest import scripted_run
from tests.seam_strategies import (
    HANDOFF,
    SideEffects,
    as_reply,
    calls_by_n,
    check_log,
    exchanges,
    handoff_outputs,
    model_outputs,
    policies,
    scripts,
)

A = af.Action
_WORK = (A.EXECUTE_TOOLS, A.HANDOFF, A.ASK_HUMAN)


def issued(ctl: af.Controller) -> list[af.ToolCall]:
    """Every call of the last output, cleared or not (what a positional mapping would run)."""
    out = ctl.last_output
    return [] if out is None else list(out.tool_calls)


class TestExecutorAsks:
    def test_a_call_the_controller_did_not_clear_is_not_run(self) -> None:
        """Given every call of an output, the executor runs only the cleared ones."""
        effects = SideEffects()
        ctl = af.Controller(af.Policy(permission_rules=["deny sql", "ask bash"]))
        ctl.on_model_output(
            turn(
                calls=[
                    call("sql", {"n": 1}, id="a"),
                    call("read", {"n": 2}, id="b"),
                    call("bash", {"n": 3}, id="c"),
                ]
            )
        )
        assert ctl.state == "await_human"
        assert Executor(effects.tools()).run(issued(ctl), controller=ctl) == []
        ctl.on_human_reply(approved=True)
        results = Executor(effects.tools()).run(issued(ctl), controller=ctl)
        assert sorted(effects.log) == [("bash", 3), ("read", 2)]
        assert [r.call_id for r in results] == ["b", "c"]

    def test_other_arguments_under_a_cleared_id_do_not_run(self) -> None:
        """A call whose arguments differ from the cleared call's is not run under its id."""
        effects = SideEffects()
        ctl = af.Controller()
        ctl.on_model_output(turn(calls=[call("read", {"n": 1}, id="a")]))
        forged = call("read", {"n": 666}, id="a")
        assert Executor(effects.tools()).run([forged], controller=ctl) == []
        assert effects.log == []

    def test_a_run_stopped_mid_batch_runs_nothing_more(self) -> None:
        """The executor asks again right before each call: after a stop, nothing else starts."""
        ran: list[str] = []
        ctl = af.Controller()

        def first() -> str:
            ran.append("first")
            ctl.stop()  # from inside the batch, as another thread of the host could
            return "stopped the run"

        def second() -> str:
            ran.append("second")
            return "ran"

        ctl.on_model_output(turn(calls=[call("first", id="a"), call("second", id="b")]))
        ex = Executor([first, second], parallel_tool_calls=False)
        results = ex.run(issued(ctl), controller=ctl)
        assert ran == ["first"]
        assert "no longer clears call b" in str(results[1].content)

    def test_the_async_path_asks_too(self) -> None:
        """`arun` with a controller skips a denied call and runs the allowed one."""
        effects = SideEffects()
        ctl = af.Controller(af.Policy(permissions={"sql": "deny"}))
        ctl.on_model_output(turn(calls=[call("sql", {"n": 1}), call("read", {"n": 2})]))
        ex = Executor(effects.tools())
        asyncio.run(ex.arun(issued(ctl), controller=ctl))
        assert effects.log == [("read", 2)]

    def test_a_controller_without_may_run_is_refused(self) -> None:
        """Anything but a controller raises InvalidInputError before a call runs."""
        with pytest.raises(InvalidInputError, match="may_run"):
            Executor([]).run([], controller=object())  # type: ignore[arg-type]


def litellm(cls: type) -> type:
    """Mark a class whose tests run the runner through litellm (and quiet litellm's warnings)."""
    for mark in LITELLM_CLIENT:
        cls = mark(cls)
    return cls


class TestHandoffsAsk:
    def test_cleared_yields_only_what_the_controller_clears(self) -> None:
        """`cleared` gives a HANDOFF decision's call while it is cleared, and nothing after."""
        ctl = af.Controller(af.Policy(handoffs=frozenset({HANDOFF})))
        d = ctl.on_model_output(turn(calls=[call(HANDOFF, {"task": "x"}, id="h")]))
        assert [c.id for c in cleared(ctl, d)] == ["h"]
        ctl.stop()
        assert list(cleared(ctl, d)) == []


@litellm
class TestHandoffsInTheRunner:
    def test_a_denied_handoff_starts_no_child(self) -> None:
        """Regression: a denied handoff went to HANDOFF and the runner started the child."""
        child = SideEffects()
        script = [
            Reply(tool_calls=[ScriptedCall(name=HANDOFF, arguments={"task": "t"}, id="h")]),
            Reply(tool_calls=[ScriptedCall(name="read", arguments={"n": 1}, id="r")]),
            say("child done"),
            say("parent done"),
        ]
        policy = af.Policy(handoffs=frozenset({HANDOFF}), permissions={HANDOFF: "deny"})
        with ScriptedServer(script) as server:
            result = go(server, policy, {HANDOFF: Agent(tools=child.tools())})
        assert child.log == []
        assert result.decisions[0].action is A.CONTINUE
        assert "permission denied" in json.dumps(result.messages)


def go(server: ScriptedServer, policy: af.Policy, agents: dict[str, Agent], **kw: Any) -> Any:
    return scripted_run(
        server,
        "go",
        tools=kw.pop("tools", [HANDOFF]),
        policy=policy,
        agents=agents,
        retry=ProviderRetry(attempts=1),
        **kw,
    )


class TestHostProperty:
    """A host that hands the executor every call of an output, as a positional mapping would."""

    @settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(
        policies(hooks=True),
        st.lists(model_outputs() | handoff_outputs(), min_size=1, max_size=6),
        st.lists(st.booleans(), min_size=8, max_size=8),
        st.integers(0, 6),
    )
    def test_no_denied_call_runs_and_every_call_gets_one_result(
        self, policy: af.Policy, outputs: list[dict[str, Any]], answers: list[bool], cut: int
    ) -> None:
        """Denied calls never run; a call runs at most once; each call gets exactly one result."""
        effects = SideEffects()
        tools = effects.tools()
        ctl = af.Controller(policy, tools=tools)
        ex = Executor(tools)
        approved: set[int] = set()
        for index, output in enumerate(outputs):
            if ctl.done:
                break
            if index == cut:  # a restored controller clears exactly what the original would
                ctl = af.Controller.load(
                    json.loads(json.dumps(ctl.dump())), policy=policy, tools=tools
                )
            got: Counter[str] = Counter()
            d = ctl.on_model_output(output)
            calls = issued(ctl)
            got.update(r.call_id for r in d.results)
            while d.action in _WORK:
                if d.action is A.ASK_HUMAN:
                    yes = answers[len(approved) % len(answers)]
                    if yes:
                        approved.update((c.arguments or {})["n"] for c in d.tool_calls)
                    d = ctl.on_human_reply(approved=yes)
                else:
                    cleared_ids = {c.id for c in d.tool_calls}
                    results = ex.run(calls, controller=ctl)
                    assert {r.call_id for r in results} == cleared_ids
                    got.update(r.call_id for r in results)
                    d = ctl.on_tool_results(results)
                got.update(r.call_id for r in d.results)
            for c in calls:
                assert got[c.id] <= 1
                if not ctl.done:
                    assert got[c.id] == 1, f"call {c.id} got {got[c.id]} results"
        check_log(effects, calls_by_n(outputs), policy, approved)


@litellm
class TestRunnerProperty:
    """`af.run` against the scripted server, handoffs to a child agent included."""

    @settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(policies(hooks=True), scripts(), st.lists(st.booleans(), min_size=4, max_size=4))
    def test_no_denied_call_runs_and_every_call_gets_one_result(
        self, policy: af.Policy, outputs: list[dict[str, Any]], answers: list[bool]
    ) -> None:
        """Through the runner and its handoffs: no denied call runs, each runs at most once."""
        # Room for several batches: the point is what runs, not how soon a budget ends it.
        policy = policy.model_copy(
            update={
                "max_turns": 8,
                "max_consecutive_tool_errors": 4,
                "handoffs": frozenset({HANDOFF}),
            }
        )
        parent, child = SideEffects(), SideEffects()
        approved: set[int] = set()
        asked = iter(answers * 10)

        def on_ask(decision: af.Decision) -> bool:
            yes = next(asked, False)
            if yes:
                approved.update((c.arguments or {}).get("n", 0) for c in decision.tool_calls)
            return yes

        agents = {HANDOFF: Agent(tools=child.tools(), policy=policy)}
        with ScriptedServer([as_reply(o) for o in outputs]) as server:
            result = go(server, policy, agents, tools=parent.tools(), on_ask=on_ask)
            children = [r.body["messages"] for r in server.requests]
        # A child's first request holds only its task, which ends with the handoff's `#n`.
        for messages in children:
            if len(messages) == 1 and messages[0]["content"] != "go":
                parent.log.append((HANDOFF, int(messages[0]["content"].rsplit("#", 1)[1])))
        calls = calls_by_n(outputs)
        check_log(parent, calls, policy, approved)
        check_log(child, calls, policy, approved)
        for asked_ids, answered in exchanges(result.messages):
            assert sorted(answered) == sorted(asked_ids), (asked_ids, answered)
        texts = [m["content"] for m in result.messages if m["role"] == "tool"]
        for name, n in parent.log:  # every tool call that ran reached the model once
            assert name == HANDOFF or sum(t == f"{name} ran {n}" for t in texts) == 1
