"""A cleared call runs at most once, however many times its decision is given to the executor.

Two threads, two asyncio tasks or a retry give the same decision to `Executor.run`/`arun`:
the executor claims each call from the Controller (`Controller.claim`) right when it starts,
so the first attempt to start a call runs and answers it, and every other attempt neither
runs it nor gives it a result. The attempts start together at a barrier, and each tool holds
its call open for a moment, so the second attempt really plans the batch while the first runs.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

import agentfsm as af
from agentfsm._runner.executor import Executor, ToolOptions
from agentfsm.testing import call, turn

_HOLD = 0.15
"""Seconds a counted tool keeps running: the other attempts plan and start meanwhile."""


class Counted:
    """Tools that count their runs (thread-safe), each holding its call open for `hold` seconds."""

    def __init__(self, hold: float = _HOLD) -> None:
        self.hold = hold
        self.runs: Counter[str] = Counter()
        self._lock = threading.Lock()

    def _ran(self, name: str, n: int) -> str:
        with self._lock:
            self.runs[f"{name}:{n}"] += 1
        return f"{name} {n} done"

    def tools(self) -> dict[str, Any]:
        def pay(n: int) -> str:
            """A payment: not idempotent."""
            time.sleep(self.hold)
            return self._ran("pay", n)

        async def send(n: int) -> str:
            """An e-mail, sent by a coroutine tool."""
            await asyncio.sleep(self.hold)
            return self._ran("send", n)

        def read(n: int) -> str:
            """A read."""
            time.sleep(self.hold)
            return self._ran("read", n)

        return {"pay": pay, "send": send, "read": read}


def executor(counted: Counted, **kwargs: Any) -> Executor:
    return Executor(counted.tools(), options={"read": ToolOptions(effect="read")}, **kwargs)


def decided(*calls: af.ToolCall) -> tuple[af.Controller, af.Decision]:
    ctl = af.Controller()
    decision = ctl.on_model_output(turn(calls=list(calls)))
    assert decision.action is af.Action.EXECUTE_TOOLS
    return ctl, decision


def in_threads(ex: Executor, ctl: af.Controller, decision: af.Decision, n: int) -> list[Any]:
    """`ex.run(decision)` in `n` threads that start together; each thread's results."""
    barrier = threading.Barrier(n)
    outcomes: list[Any] = [None] * n

    def attempt(i: int) -> None:
        barrier.wait()
        outcomes[i] = ex.run(decision, controller=ctl)

    threads = [threading.Thread(target=attempt, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    return outcomes


async def in_tasks(ex: Executor, ctl: af.Controller, decision: af.Decision, n: int) -> list[Any]:
    """`ex.arun(decision)` in `n` tasks that start together; each task's results."""
    barrier = asyncio.Barrier(n)

    async def attempt() -> list[af.ToolResult]:
        await barrier.wait()
        return await ex.arun(decision, controller=ctl)

    return list(await asyncio.gather(*(attempt() for _ in range(n))))


def answered(outcomes: list[list[af.ToolResult]]) -> Counter[str]:
    """How many results each call id got, over every attempt."""
    return Counter(r.call_id for results in outcomes for r in results)


class TestOneDecisionTwice:
    def test_two_threads_run_a_payment_once(self) -> None:
        """The same decision in two threads at once: the payment runs once, one result."""
        counted = Counted()
        ctl, decision = decided(call("pay", {"n": 1}, id="p"))
        outcomes = in_threads(executor(counted), ctl, decision, 2)
        assert counted.runs == Counter({"pay:1": 1})
        assert answered(outcomes) == Counter({"p": 1})
        assert sorted(len(o) for o in outcomes) == [0, 1]

    def test_two_tasks_run_a_coroutine_tool_once(self) -> None:
        """The same decision in two asyncio tasks at once: the coroutine tool runs once."""
        counted = Counted()
        ctl, decision = decided(call("send", {"n": 1}, id="s"), call("pay", {"n": 2}, id="p"))
        outcomes = asyncio.run(in_tasks(executor(counted), ctl, decision, 2))
        assert counted.runs == Counter({"send:1": 1, "pay:2": 1})
        assert answered(outcomes) == Counter({"s": 1, "p": 1})

    def test_a_retry_before_the_results_are_given_runs_nothing(self) -> None:
        """Run again before its results reach the controller, a batch runs and answers nothing."""
        counted = Counted(hold=0)
        ctl, decision = decided(call("pay", {"n": 1}, id="p"), call("read", {"n": 2}, id="r"))
        ex = executor(counted)
        first = ex.run(decision, controller=ctl)
        assert ex.run(decision, controller=ctl) == []
        assert asyncio.run(ex.arun(decision, controller=ctl)) == []
        assert counted.runs == Counter({"pay:1": 1, "read:2": 1})
        assert [r.call_id for r in first] == ["p", "r"]
        assert ctl.on_tool_results(first).action is af.Action.CONTINUE

    def test_a_call_cleared_again_in_a_later_turn_runs_again(self) -> None:
        """A claim lasts one decision: the same call id cleared by the next output runs."""
        counted = Counted(hold=0)
        ctl, decision = decided(call("pay", {"n": 1}, id="p"))
        ex = executor(counted)
        ctl.on_tool_results(ex.run(decision, controller=ctl))
        again = ctl.on_model_output(turn(calls=[call("pay", {"n": 1}, id="p")]))
        assert [r.call_id for r in ex.run(again, controller=ctl)] == ["p"]
        assert counted.runs == Counter({"pay:1": 2})

    def test_a_writer_after_a_call_started_elsewhere_waits_for_that_attempt(self) -> None:
        """Calls ordered after one another attempt started are left to that attempt, in order."""
        counted = Counted()
        ctl, decision = decided(call("pay", {"n": 1}, id="a"), call("pay", {"n": 2}, id="b"))
        outcomes = in_threads(executor(counted), ctl, decision, 2)
        assert counted.runs == Counter({"pay:1": 1, "pay:2": 1})
        # One attempt ran both writers, in order; the other answered neither.
        assert sorted([r.call_id for r in o] for o in outcomes) == [[], ["a", "b"]]

    def test_an_idempotent_tool_s_own_retries_still_run(self) -> None:
        """The claim is per call, not per attempt of the tool: an idempotent retry runs."""
        tries: list[int] = []

        def flaky(n: int) -> str:
            """Fails once, then works."""
            tries.append(n)
            if len(tries) == 1:
                raise ConnectionError("reset")
            return "ok"

        ex = Executor([flaky], options={"flaky": ToolOptions(idempotent=True)})
        ctl, decision = decided(call("flaky", {"n": 1}, id="f"))
        (result,) = ex.run(decision, controller=ctl)
        assert result.content == "ok"
        assert tries == [1, 1]


_NAMES = st.sampled_from(["pay", "send", "read"])


class TestAtMostOnceProperty:
    @given(
        names=st.lists(_NAMES, min_size=1, max_size=5),
        threads=st.integers(min_value=1, max_value=3),
        tasks=st.integers(min_value=0, max_value=3),
        parallel=st.booleans(),
    )
    def test_any_batch_given_to_any_attempts_runs_each_call_once(
        self, names: list[str], threads: int, tasks: int, parallel: bool
    ) -> None:
        """Whatever batch, given to threads and tasks at once: each cleared call runs exactly
        once over all attempts, and gets exactly one result over all of them."""
        counted = Counted(hold=0.01)
        calls = [call(name, {"n": i}, id=f"c{i}") for i, name in enumerate(names)]
        ctl, decision = decided(*calls)
        ex = executor(counted, parallel_tool_calls=parallel)
        outcomes: list[Any] = []

        def tasks_in_a_thread() -> None:
            if tasks:
                outcomes.extend(asyncio.run(in_tasks(ex, ctl, decision, tasks)))

        side = threading.Thread(target=tasks_in_a_thread)
        side.start()
        outcomes.extend(in_threads(ex, ctl, decision, threads))
        side.join(timeout=30)
        assert counted.runs == Counter(f"{name}:{i}" for i, name in enumerate(names))
        assert answered(outcomes) == Counter(c.id for c in calls)
        assert ctl.on_tool_results([r for o in outcomes for r in o]).action is af.Action.CONTINUE
