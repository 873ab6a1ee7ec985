"""The runner's executing half against the local scripted server: interruption, steering,
conversations, host-decided ends, provider failures in the trace, and sub-agents."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from agentfsm import Policy
from agentfsm._model.types import Action, ExitReason
from agentfsm._runner.loop import Agent, Inbox, RunResult, arun, run
from agentfsm._runner.retry import ProviderRetry
from agentfsm.testing.scripted import (
    Reply,
    Responder,
    call,
    fault,
    last_tool_result,
    say,
    tool_calls,
)
from agentfsm.testing.server import ScriptedServer
from tests.conftest import LITELLM_CLIENT
from tests.runner.conftest import scripted_arun, scripted_run

pytestmark = LITELLM_CLIENT

TASK = [{"role": "user", "content": "Process the three files."}]
THREE = tool_calls(
    call("step", {"n": 0}, id="s0"),
    call("step", {"n": 1}, id="s1"),
    call("step", {"n": 2}, id="s2"),
)


def go(server: ScriptedServer, tools: list[Any], **kwargs: Any) -> RunResult:
    """Run the task against the server's OpenAI route."""
    kwargs.setdefault("retry", ProviderRetry(attempts=1))
    return scripted_run(server, TASK, tools=tools, **kwargs)


def tool_messages(result: RunResult) -> Counter[str]:
    """How many tool messages each call id has in the conversation."""
    return Counter(m["tool_call_id"] for m in result.messages if m["role"] == "tool")


def events(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


class TestInterruption:
    """A cancellation from another thread keeps every message and result."""

    def test_cancel_mid_batch_answers_every_call_once(self, tmp_path: Path) -> None:
        """Cancel while the second call runs: one result per id, the first one real, INTERRUPTED."""
        cancel, running, release = threading.Event(), threading.Event(), threading.Event()
        done: list[int] = []

        def step(n: int) -> str:
            if n == 1:
                running.set()
                release.wait(30)
            done.append(n)
            (tmp_path / f"out-{n}.txt").write_text(str(n))
            return f"step {n} done"

        def press_stop() -> None:
            if running.wait(120):  # the first model call can be slow on a busy machine
                cancel.set()

        threading.Thread(target=press_stop, daemon=True).start()
        trace = tmp_path / "run.jsonl"
        try:
            with ScriptedServer([THREE, say("never asked")]) as server:
                result = go(server, [step], cancel=cancel, trace=trace)
                assert server.remaining == 1
        finally:
            release.set()
        assert result.exit_reason is ExitReason.INTERRUPTED
        assert tool_messages(result) == {"s0": 1, "s1": 1, "s2": 1}
        contents = {m["tool_call_id"]: m["content"] for m in result.messages if m["role"] == "tool"}
        assert contents["s0"] == "step 0 done"
        assert contents["s1"].startswith("CancelledError")
        assert contents["s2"].startswith("cancelled: 'step' was not started")
        assert (tmp_path / "out-0.txt").read_text() == "0"
        assert events(trace)[-1]["exit_reason"] == "interrupted"
        assert result.decisions[-1].action is Action.STOP

    def test_cancel_during_a_slow_model_call_returns_at_once(self) -> None:
        """The model takes 30 s to answer; the cancel, 0.3 s in, ends the run well before."""
        cancel = threading.Event()
        slow = Reply(text="too late", delay=30.0)
        with ScriptedServer([slow]) as server:
            threading.Timer(0.3, cancel.set).start()
            started = time.monotonic()
            result = go(server, [], cancel=cancel)
            waited = time.monotonic() - started
        assert result.exit_reason is ExitReason.INTERRUPTED
        assert waited < 10.0
        assert result.decisions[-1].action is Action.STOP
        assert "too late" not in result.text

    def test_cancelling_the_arun_task_returns_the_interrupted_result(self) -> None:
        """Cancelling the task of `arun` mid-batch returns INTERRUPTED with every result kept."""

        async def step(n: int) -> str:
            await asyncio.sleep(0 if n == 0 else 10)
            return f"step {n} done"

        async def main(server: ScriptedServer) -> RunResult:
            task = asyncio.ensure_future(
                scripted_arun(server, TASK, tools=[step], retry=ProviderRetry(attempts=1))
            )
            while not any(m for m in server.requests):
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.3)
            task.cancel()
            return await task

        with ScriptedServer([THREE]) as server:
            result = asyncio.run(main(server))
        assert result.exit_reason is ExitReason.INTERRUPTED
        assert tool_messages(result) == {"s0": 1, "s1": 1, "s2": 1}


class TestSteering:
    """User messages during a batch skip what has not started; after an answer they continue."""

    def test_a_message_during_the_batch_skips_the_rest_and_reaches_the_model(self) -> None:
        """The calls after the message are skipped and the model reads the message next."""
        inbox = Inbox()

        def step(n: int) -> str:
            inbox.send("stop, only the first file matters")
            return f"step {n} done"

        def check(body: Mapping[str, Any]) -> Reply:
            roles = [m["role"] for m in body["messages"]]
            assert roles[-4:] == ["tool", "tool", "tool", "user"]
            return say(f"Noted: {body['messages'][-1]['content']}")

        with ScriptedServer([THREE, check]) as server:
            result = go(server, [step], inbox=inbox)
        assert result.exit_reason is ExitReason.COMPLETED
        assert result.text == "Noted: stop, only the first file matters"
        contents = [m["content"] for m in result.messages if m["role"] == "tool"]
        assert contents == ["step 0 done", *["skipped: a user message arrived"] * 2]

    def test_a_queued_follow_up_continues_the_conversation(self) -> None:
        """A message queued when the model answers opens the next episode of the same run."""
        inbox = Inbox()

        def first(body: Mapping[str, Any]) -> Reply:
            inbox.send("and in Paris?")
            return say("Sunny in Shanghai.")

        with ScriptedServer([first, say("Rainy in Paris.")]) as server:
            result = go(server, [], inbox=inbox)
        assert result.exit_reason is ExitReason.COMPLETED
        assert [d.action for d in result.decisions] == [Action.FINAL, Action.FINAL]
        assert [d.turn for d in result.decisions] == [1, 2]
        assert [m["content"] for m in result.messages[-3:]] == [
            "Sunny in Shanghai.",
            "and in Paris?",
            "Rainy in Paris.",
        ]


class TestEnds:
    """Ends the host decides, and provider failures in the trace."""

    def test_a_final_tool_ends_the_run_with_its_result(self) -> None:
        """`final_tools=["submit"]`: the submit result is the answer, no further model call."""

        def submit(patch: str) -> str:
            return f"submitted {len(patch)} bytes"

        script = [tool_calls(call("submit", {"patch": "diff --git"})), say("never asked")]
        with ScriptedServer(script) as server:
            result = go(server, [submit], policy=Policy(final_tools=["submit"]))
            assert server.remaining == 1
        assert result.exit_reason is ExitReason.COMPLETED
        assert result.text == "submitted 10 bytes"

    def test_a_provider_failure_is_an_end_event_in_the_trace(self, tmp_path: Path) -> None:
        """A 400 ends the run with PROVIDER_ERROR, and the trace's last decision says so."""
        trace = tmp_path / "run.jsonl"
        with ScriptedServer([fault(400, message="bad tools")]) as server:
            result = go(server, [], trace=trace)
        assert result.exit_reason is ExitReason.PROVIDER_ERROR
        last = events(trace)[-1]
        assert (last["event"], last["exit_reason"]) == ("decision", "provider_error")
        assert "bad tools" in last["reason"]


class TestSubAgents:
    """A handoff runs a child agent; its end is the call's result, never the parent's end."""

    def lookup(self, key: str) -> str:
        return {"x": "42"}.get(key, "unknown")

    def test_the_parent_goes_on_after_dispatching_a_sub_task(self) -> None:
        """Regression: the parent does not end with 0 output tokens right after a sub-task.

        The parent hands off, the child looks something up and answers, then the
        parent's model returns an empty turn with 0 output tokens: that is not an
        answer, so the parent calls its model again and ends with its own answer.
        """

        def lookup(key: str) -> str:
            return self.lookup(key)

        script: list[Reply | Responder] = [
            tool_calls(call("research", {"task": "what is x?"})),  # parent
            tool_calls(call("lookup", {"key": "x"})),  # child
            lambda body: say(f"x is {last_tool_result(body)}"),  # child's answer
            Reply(text="", output_tokens=0),  # parent: empty, 0 output tokens
            lambda body: say(f"The sub-agent says: {last_tool_result(body)}"),  # parent
        ]
        policy = Policy(handoffs=frozenset({"research"}))
        agents = {"research": Agent(tools=[lookup], policy=Policy(max_turns=5))}
        with ScriptedServer(script) as server:
            result = go(server, ["research"], policy=policy, agents=agents)
        assert result.exit_reason is ExitReason.COMPLETED
        assert result.text == "The sub-agent says: x is 42"
        assert [d.action for d in result.decisions] == [
            Action.HANDOFF,
            Action.CONTINUE,
            Action.CONTINUE,
            Action.FINAL,
        ]
        assert result.usage.input_tokens == 5 * 20  # the child's two calls are charged
        assert result.usage.output_tokens == 4 * 10

    def test_a_child_that_fails_is_an_error_result_for_the_parent(self) -> None:
        """A child stopped by its own max_turns comes back as an error result; the parent ends."""
        script: list[Reply | Responder] = [
            tool_calls(call("research", {"task": "dig"})),
            tool_calls(call("lookup", {"key": "y"})),  # the child's only turn
            lambda body: say(f"I could not: {last_tool_result(body)}"),
        ]
        policy = Policy(handoffs=frozenset({"research"}))
        agents = {"research": Agent(tools=[self.lookup], policy=Policy(max_turns=1))}
        with ScriptedServer(script) as server:
            result = go(server, ["research"], policy=policy, agents=agents)
        assert result.exit_reason is ExitReason.COMPLETED
        assert result.text.startswith("I could not: sub-agent 'research' ended with max_turns")

    def test_the_childs_tokens_count_toward_the_parents_budget(self) -> None:
        """A child that spends the parent's token budget stops the parent."""
        script: list[Reply | Responder] = [
            tool_calls(call("research", {"task": "dig"})),
            Reply(text="found it", input_tokens=500),
            say("never asked"),
        ]
        policy = Policy(handoffs=frozenset({"research"}), max_tokens=300)
        with ScriptedServer(script) as server:
            result = go(server, ["research"], policy=policy, agents={"research": Agent()})
        assert result.exit_reason is ExitReason.TOKEN_BUDGET

    def test_cancelling_the_parent_task_stops_the_child_and_the_parent(self) -> None:
        """The stop button while a child runs: both end, the handoff call keeps its result."""

        async def wait(seconds: float) -> str:
            await asyncio.sleep(seconds)
            return "waited"

        script: list[Reply | Responder] = [
            tool_calls(call("research", {"task": "dig"})),
            tool_calls(call("wait", {"seconds": 30})),
            say("never asked"),
        ]

        async def main(server: ScriptedServer) -> RunResult:
            task = asyncio.ensure_future(
                scripted_arun(
                    server,
                    TASK,
                    tools=["research"],
                    policy=Policy(handoffs=frozenset({"research"})),
                    agents={"research": Agent(tools=[wait])},
                    retry=ProviderRetry(attempts=1),
                )
            )
            while len(server.requests) < 2:
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.3)
            task.cancel()
            return await task

        with ScriptedServer(script) as server:
            result = asyncio.run(main(server))
            assert server.remaining == 1
        assert result.exit_reason is ExitReason.INTERRUPTED
        (message,) = [m for m in result.messages if m["role"] == "tool"]
        assert "ended with interrupted" in message["content"]

    def test_a_handoff_without_an_agent_is_an_error_result(self) -> None:
        """A handoff name with no registered agent answers the model with an error."""
        script: list[Reply | Responder] = [
            tool_calls(call("research", {"task": "dig"})),
            lambda body: say(str(last_tool_result(body))),
        ]
        with ScriptedServer(script) as server:
            result = go(server, ["research"], policy=Policy(handoffs=frozenset({"research"})))
        assert "no agent is registered for handoff 'research'" in result.text


class TestConcurrency:
    """The runner's batches run through the executor."""

    def test_readers_run_together_in_the_runner(self) -> None:
        """Three read-only calls of one turn overlap in time."""
        from agentfsm._runner.executor import tool

        spans: list[tuple[float, float]] = []

        @tool(effect="read")
        def step(n: int) -> str:
            start = time.monotonic()
            time.sleep(0.2)
            spans.append((start, time.monotonic()))
            return "ok"

        with ScriptedServer([THREE, say("done")]) as server:
            go(server, [step])
        assert max(s for s, _ in spans) < min(e for _, e in spans)


class TestRunsStartedByTools:
    """A run a tool starts with `af.run` is charged to the run that called the tool."""

    SCRIPT: ClassVar[list[Reply | Responder]] = [
        tool_calls(call("research", {"topic": "x"})),  # the parent asks its tool
        Reply(text="x is 42", input_tokens=500, output_tokens=30),  # the tool's own run
        lambda body: say(f"done: {last_tool_result(body)}"),  # the parent's answer
    ]

    @staticmethod
    def inner(server: ScriptedServer, topic: str) -> dict[str, Any]:
        """The arguments of the run a research tool starts (for run and arun alike)."""
        return {
            "model": "openai/scripted",
            "messages": [{"role": "user", "content": f"research {topic}"}],
            "tools": None,
            "api_base": server.openai_base,
            "api_key": "sk-test",
            "retry": ProviderRetry(attempts=1),
        }

    def research_tool(self, server: ScriptedServer) -> Any:
        def research(topic: str) -> str:
            return run(**self.inner(server, topic)).text

        return research

    def test_the_tools_run_is_charged_to_the_caller(self) -> None:
        """The parent's usage holds its own two calls and the tool's run (500 + 2 x 20 in)."""
        with ScriptedServer(self.SCRIPT) as server:
            result = go(server, [self.research_tool(server)])
        assert result.text == "done: x is 42"
        assert result.usage.input_tokens == 500 + 2 * 20
        assert result.usage.output_tokens == 30 + 2 * 10

    def test_the_tools_run_counts_toward_the_callers_budget(self) -> None:
        """A 300-token budget: the tool's 530 tokens stop the parent before its next call."""
        with ScriptedServer(self.SCRIPT) as server:
            result = go(server, [self.research_tool(server)], policy=Policy(max_tokens=300))
            assert server.remaining == 1
        assert result.exit_reason is ExitReason.TOKEN_BUDGET

    def test_an_async_tools_run_is_charged_to_the_caller(self) -> None:
        """The same from arun with an async tool that awaits arun."""

        async def main(server: ScriptedServer) -> RunResult:
            async def research(topic: str) -> str:
                return (await arun(**self.inner(server, topic))).text

            return await scripted_arun(
                server, TASK, tools=[research], retry=ProviderRetry(attempts=1)
            )

        with ScriptedServer(self.SCRIPT) as server:
            result = asyncio.run(main(server))
        assert result.text == "done: x is 42"
        assert result.usage.input_tokens == 500 + 2 * 20

    def test_a_handoff_child_is_charged_once(self) -> None:
        """A handoff's child is charged by the handoff only, not a second time as a tool's run."""
        script: list[Reply | Responder] = [
            tool_calls(call("research", {"task": "dig"})),
            Reply(text="found it", input_tokens=100),
            lambda body: say(f"done: {last_tool_result(body)}"),
        ]
        policy = Policy(handoffs=frozenset({"research"}))
        with ScriptedServer(script) as server:
            result = go(server, ["research"], policy=policy, agents={"research": Agent()})
        assert result.usage.input_tokens == 100 + 2 * 20
