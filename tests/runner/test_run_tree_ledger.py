"""One live budget ledger per run tree, in the runner: a child is charged as it spends, and
the tree stops when a budget anywhere on the path above the spend is used up."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from agentfsm import Policy
from agentfsm._model.types import Action, ExitReason
from agentfsm._replay.engine import divergence, replay_run
from agentfsm._replay.trajectories import read_runs
from agentfsm._runner.loop import Agent, RunResult, run
from agentfsm._runner.retry import ProviderRetry
from agentfsm.exceptions import DefinitionError
from agentfsm.testing.scripted import Reply, Responder, call, last_tool_result, say, tool_calls
from agentfsm.testing.server import ScriptedServer
from tests.conftest import LITELLM_CLIENT
from tests.runner.conftest import scripted_arun, scripted_run

pytestmark = LITELLM_CLIENT

TASK = [{"role": "user", "content": "Find x."}]
TURN = 30
"""Tokens of one scripted turn (20 in, 10 out)."""


def lookup(key: str) -> str:
    """Look a key up."""
    return f"{key}: nothing"


def digging_child(turns: int) -> list[Reply | Responder]:
    """A child that looks up `turns` different keys, then answers."""
    script: list[Reply | Responder] = [
        tool_calls(call("lookup", {"key": f"k{n}"})) for n in range(turns)
    ]
    return [*script, say("found nothing")]


def go(server: ScriptedServer, **kwargs: Any) -> RunResult:
    kwargs.setdefault("retry", ProviderRetry(attempts=1))
    return scripted_run(server, TASK, **kwargs)


class TestHandoffSpendsTheParentsBudget:
    """A handoff child charges the parent's ledger live, so the parent's cap binds it."""

    POLICY = Policy(handoffs=frozenset({"research"}), max_tokens=100)
    AGENTS = {"research": Agent(tools=[lookup])}  # noqa: RUF012 - read only

    def script(self) -> list[Reply | Responder]:
        """The parent hands off; the child's second turn costs 60 (40 in, 20 out): it passes
        the parent's 100 at 120 tokens. The child would go on for 330 tokens more."""
        big = Reply(tool_calls=[call("lookup", {"key": "big"})], input_tokens=40, output_tokens=20)
        return [
            tool_calls(call("research", {"task": "dig"})),  # the parent: 30 tokens
            tool_calls(call("lookup", {"key": "first"})),  # the child: 30 (60)
            big,  # the child: 60 (120)
            *digging_child(10),
            lambda body: say(f"parent: {last_tool_result(body)}"),
        ]

    def test_the_child_stops_at_the_parents_cap(self) -> None:
        """The child stops by TreeBudget() at the turn that passes the parent's 100 tokens, and
        the parent stops at its next decision.

        Before the ledger the child ran to its end (12 requests, 450 tokens for the tree) and
        the parent stopped only after it returned.
        """
        with ScriptedServer(self.script()) as server:
            result = go(server, tools=["research"], policy=self.POLICY, agents=self.AGENTS)
            asked = len(server.requests)
        assert result.exit_reason is ExitReason.TOKEN_BUDGET
        assert asked == 3
        assert result.usage.input_tokens + result.usage.output_tokens == 120
        (handoff,) = [m for m in result.messages if m["role"] == "tool"]
        assert "ended with token_budget" in handoff["content"]
        assert "run tree's spend included" in handoff["content"]

    def test_the_parents_trace_replays_to_the_same_stop(self, tmp_path: Path) -> None:
        """The parent's trace holds the child's spend as `charged` events; replay charges them
        again, so the parent's token budget stops the replay where it stopped the run, with
        no divergence.

        Replay skipped `charged`: the replayed parent had spent 30 tokens, not 120, and asked
        for a model output the recording did not have."""
        trace = tmp_path / "parent.jsonl"
        with ScriptedServer(self.script()) as server:
            result = go(
                server, tools=["research"], policy=self.POLICY, agents=self.AGENTS, trace=trace
            )
        assert result.exit_reason is ExitReason.TOKEN_BUDGET
        parent = next(iter(read_runs(str(trace))))  # the child's run, if any, follows
        replayed = replay_run(parent)
        assert replayed.exit_reason == "token_budget"
        assert divergence(parent, replayed) is None

    def test_the_same_from_arun(self) -> None:
        """arun's children charge the same ledger, and stop at the same turn."""

        async def main(server: ScriptedServer) -> RunResult:
            return await scripted_arun(
                server,
                TASK,
                tools=["research"],
                policy=self.POLICY,
                agents=self.AGENTS,
                retry=ProviderRetry(attempts=1),
            )

        with ScriptedServer(self.script()) as server:
            result = asyncio.run(main(server))
            asked = len(server.requests)
        assert result.exit_reason is ExitReason.TOKEN_BUDGET
        assert asked == 3

    def test_a_call_that_would_not_fit_is_not_made(self) -> None:
        """The child holds what its last call spent before the next: at 90 of 100 tokens a
        30-token call does not fit, so the child stops before making it; the parent, told
        why, answers (a root run holds nothing)."""
        script: list[Reply | Responder] = [
            tool_calls(call("research", {"task": "dig"})),
            *digging_child(2)[:2],
            lambda body: say(f"parent: {last_tool_result(body)}"),
            *digging_child(8),  # never asked
        ]
        with ScriptedServer(script) as server:
            result = go(server, tools=["research"], policy=self.POLICY, agents=self.AGENTS)
            asked = len(server.requests)
        assert asked == 4  # the parent, the child's two calls, the parent's answer
        assert result.exit_reason is ExitReason.COMPLETED
        assert "ended with token_budget" in result.text
        assert "would spend about 30 tokens (as the last did)" in result.text

    def test_a_child_within_budget_is_counted_once(self) -> None:
        """A child that fits: its turns are in the parent's usage once, not twice."""
        script: list[Reply | Responder] = [
            tool_calls(call("research", {"task": "dig"})),
            *digging_child(1),
            lambda body: say(f"parent: {last_tool_result(body)}"),
        ]
        policy = Policy(handoffs=frozenset({"research"}), max_tokens=1000)
        with ScriptedServer(script) as server:
            result = go(server, tools=["research"], policy=policy, agents=self.AGENTS)
        assert result.exit_reason is ExitReason.COMPLETED
        assert result.usage.input_tokens + result.usage.output_tokens == 4 * TURN
        assert [d.action for d in result.decisions] == [
            Action.HANDOFF,
            Action.CONTINUE,
            Action.FINAL,
        ]


class TestRunsStartedByToolsJoinTheTree:
    """A run a tool starts with `af.run` is a child of the tool's run: same ledger, same cap."""

    def test_a_nested_run_stops_at_the_callers_cap(self) -> None:
        """The nested run stops before a call that would not fit the caller's 100 tokens."""

        def research(topic: str) -> str:
            inner = run(
                "openai/scripted",
                f"research {topic}",
                tools=[lookup],
                api_base=server.openai_base,
                api_key="sk-test",
                retry=ProviderRetry(attempts=1),
            )
            return f"{inner.exit_reason.value}: {inner.text}"

        script: list[Reply | Responder] = [
            tool_calls(call("research", {"topic": "x"})),
            *digging_child(2)[:2],
            lambda body: say(f"parent: {last_tool_result(body)}"),
            *digging_child(8),  # never asked
        ]
        with ScriptedServer(script) as server:
            result = go(server, tools=[research], policy=Policy(max_tokens=100))
            asked = len(server.requests)
        # The caller's call, the nested run's two (90 of 100: a third would not fit), and the
        # caller's answer; before the ledger the nested run went on past the caller's cap.
        assert asked == 4
        assert result.exit_reason is ExitReason.COMPLETED
        (message,) = [m for m in result.messages if m["role"] == "tool"]
        assert message["content"].startswith("token_budget")


class TestChildrenAreNeverWider:
    """A child runs under its own policy narrowed by its parent's."""

    def test_a_tool_the_parent_denies_is_not_run_by_the_child(self) -> None:
        """The parent denies `lookup`; the child's own policy allows it: it is not run."""
        ran: list[str] = []

        def lookup_counted(key: str) -> str:
            ran.append(key)
            return "x"

        lookup_counted.__name__ = "lookup"
        script: list[Reply | Responder] = [
            tool_calls(call("research", {"task": "dig"})),
            tool_calls(call("lookup", {"key": "secret"})),
            lambda body: say(f"child: {last_tool_result(body)}"),
            lambda body: say(f"parent: {last_tool_result(body)}"),
        ]
        policy = Policy(handoffs=frozenset({"research"}), permission_rules=["deny look*"])
        agents = {
            "research": Agent(
                tools=[lookup_counted], policy=Policy(permissions={"lookup": "allow"})
            )
        }
        with ScriptedServer(script) as server:
            result = go(server, tools=["research"], policy=policy, agents=agents)
        assert ran == []
        assert result.exit_reason is ExitReason.COMPLETED
        assert "denied" in result.text

    def test_a_tool_the_parent_asks_about_is_asked_in_the_child(self) -> None:
        """The parent asks before `lookup`; the child's on_ask is asked before it runs."""
        asked: list[str] = []

        def on_ask(decision: Any) -> tuple[bool, str | None]:
            asked.extend(c.name for c in decision.tool_calls)
            return False, None

        script: list[Reply | Responder] = [
            tool_calls(call("research", {"task": "dig"})),
            tool_calls(call("lookup", {"key": "k"})),
            lambda body: say(f"parent: {last_tool_result(body)}"),
        ]
        policy = Policy(handoffs=frozenset({"research"}), permission_rules=["ask look*"])
        with ScriptedServer(script) as server:
            result = go(
                server,
                tools=["research"],
                policy=policy,
                agents={"research": Agent(tools=[lookup])},
                on_ask=on_ask,
            )
        assert asked == ["lookup"]
        assert "human_declined" in result.text


class TestShowBudget:
    """`show_budget` shows the model what is left before each call, in the request only."""

    def test_each_request_ends_with_what_is_left(self) -> None:
        """3 turns and 100 tokens: the first request says so, the second 2 turns and 70."""
        script: list[Reply | Responder] = [tool_calls(call("lookup", {"key": "a"})), say("done")]
        with ScriptedServer(script) as server:
            result = go(
                server, tools=[lookup], policy=Policy(max_turns=3, max_tokens=100), show_budget=True
            )
            notes = [r.body["messages"][-1] for r in server.requests]
        assert notes == [
            {"role": "system", "content": "Budget left: 3 model turns, 100 tokens."},
            {"role": "system", "content": "Budget left: 2 model turns, 70 tokens."},
        ]
        assert all(m["role"] != "system" for m in result.messages)

    def test_a_function_writes_the_message_or_none(self) -> None:
        """The host's function gets the Left; None sends no message that turn."""
        seen: list[int | None] = []

        def show(left: Any) -> dict[str, str] | None:
            seen.append(left.tokens)
            return None if left.turns == 1 else {"role": "user", "content": f"{left.tokens} left"}

        script: list[Reply | Responder] = [tool_calls(call("lookup", {"key": "a"})), say("done")]
        with ScriptedServer(script) as server:
            go(server, tools=[lookup], policy=Policy(max_turns=2, max_tokens=500), show_budget=show)
            last = [r.body["messages"][-1] for r in server.requests]
        assert seen == [500, 470]
        assert last[0] == {"role": "user", "content": "500 left"}
        assert last[1]["role"] == "tool"

    def test_a_child_sees_the_trees_budget(self) -> None:
        """A handoff child's requests show the parent's cap less what the tree spent."""
        script: list[Reply | Responder] = [
            tool_calls(call("research", {"task": "dig"})),
            say("found"),
            lambda body: say(f"parent: {last_tool_result(body)}"),
        ]
        policy = Policy(handoffs=frozenset({"research"}), max_tokens=100, max_turns=5)
        with ScriptedServer(script) as server:
            go(
                server,
                tools=["research"],
                policy=policy,
                agents={"research": Agent()},
                show_budget=True,
            )
            child_note = server.requests[1].body["messages"][-1]
        assert child_note == {"role": "system", "content": "Budget left: 5 model turns, 70 tokens."}

    def test_a_wrong_kind_is_refused_before_any_request(self) -> None:
        """show_budget=3 raises DefinitionError naming the argument."""
        with ScriptedServer([say("never")]) as server:
            with pytest.raises(DefinitionError, match="show_budget must be"):
                go(server, show_budget=3)
            assert server.requests == []
