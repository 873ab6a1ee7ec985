"""The executor runs real tools: files, a subprocess, slow, failing and hanging tools."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import agentfsm as af
from agentfsm._runner.executor import SKIPPED, Executor, ToolOptions, tool
from agentfsm.exceptions import AgentFSMError, ToolDefinitionError
from tests.strategies import RaisingMapping


class Log:
    """A shared, thread-safe log of (name, event, time) entries."""

    def __init__(self) -> None:
        self.entries: list[tuple[str, str, float]] = []
        self.lock = threading.Lock()

    def mark(self, name: str, event: str) -> None:
        with self.lock:
            self.entries.append((name, event, time.monotonic()))

    def at(self, name: str, event: str) -> float:
        return next(t for n, e, t in self.entries if n == name and e == event)

    def intervals(self) -> list[tuple[float, float]]:
        names = [n for n, e, _ in self.entries if e == "start"]
        return [(self.at(n, "start"), self.at(n, "end")) for n in names]

    def most_at_once(self) -> int:
        """The largest number of calls running at the same instant."""
        points = sorted(
            [(s, 1) for s, _ in self.intervals()] + [(e, -1) for _, e in self.intervals()],
            key=lambda p: (p[0], p[1]),
        )
        best = now = 0
        for _, step in points:
            now += step
            best = max(best, now)
        return best


def calls(name: str, n: int, **arguments: Any) -> list[af.ToolCall]:
    return [af.ToolCall(id=f"c{i}", name=name, arguments={"n": i, **arguments}) for i in range(n)]


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """An event that lets hanging tools end once the test is over."""
    event = threading.Event()
    yield event
    event.set()


def sleeper(log: Log, seconds: float, effect: str = "read") -> Callable[..., str]:
    @tool(effect="read" if effect == "read" else "write")
    def nap(n: int) -> str:
        log.mark(f"nap{n}", "start")
        time.sleep(seconds)
        log.mark(f"nap{n}", "end")
        return f"slept {n}"

    return nap


class TestOrdering:
    """Read-after-write ordering, the concurrency cap and result order, from a shared log."""

    def test_a_read_waits_for_an_earlier_write_to_a_real_file(self, tmp_path: Path) -> None:
        """A shell command writes q-1.png; the read_image call after it in the batch sees it."""
        log = Log()

        def shell(command: str) -> str:
            log.mark("shell", "start")
            time.sleep(0.05)
            done = subprocess.run(
                command, shell=True, cwd=tmp_path, capture_output=True, text=True, check=False
            )
            log.mark("shell", "end")
            return done.stdout + done.stderr

        @tool(effect="read")
        def read_image(path: str) -> str:
            log.mark("read", "start")
            data = (tmp_path / path).read_bytes() if (tmp_path / path).exists() else b""
            log.mark("read", "end")
            return f"{len(data)} bytes"

        batch = [
            af.ToolCall(id="a", name="shell", arguments={"command": "printf PNGDATA > q-1.png"}),
            af.ToolCall(id="b", name="read_image", arguments={"path": "q-1.png"}),
        ]
        results = Executor([shell, read_image]).run(batch)
        assert [r.content for r in results] == ["(empty result)", "7 bytes"]
        assert log.at("read", "start") >= log.at("shell", "end")

    def test_reads_between_writes_run_together_and_wait_for_the_writer(self) -> None:
        """Reads after a write start only when it ended, then overlap each other."""
        log = Log()
        nap = sleeper(log, 0.1)

        def write(n: int) -> str:
            log.mark("write", "start")
            time.sleep(0.05)
            log.mark("write", "end")
            return "written"

        batch = [af.ToolCall(id="w", name="write", arguments={"n": 0}), *calls("nap", 3)]
        Executor([write, nap]).run(batch)
        starts = [log.at(f"nap{i}", "start") for i in range(3)]
        assert min(starts) >= log.at("write", "end")
        assert log.most_at_once() == 3

    def test_a_write_waits_for_earlier_reads(self) -> None:
        """A writer after reads starts only when every earlier read has ended."""
        log = Log()
        nap = sleeper(log, 0.05)

        def write(n: int) -> str:
            log.mark("write", "start")
            return "written"

        batch = [*calls("nap", 2), af.ToolCall(id="w", name="write", arguments={"n": 9})]
        Executor([write, nap]).run(batch)
        assert log.at("write", "start") >= max(log.at(f"nap{i}", "end") for i in range(2))

    @pytest.mark.parametrize("cap", [1, 2, 4])
    def test_the_concurrency_cap_holds(self, cap: int) -> None:
        """No more than `max_concurrency` calls ever overlap in time."""
        log = Log()
        Executor([sleeper(log, 0.05)], max_concurrency=cap).run(calls("nap", 6))
        assert log.most_at_once() == cap

    def test_parallel_tool_calls_false_runs_one_at_a_time(self) -> None:
        """With parallel_tool_calls=False even readers never overlap."""
        log = Log()
        Executor([sleeper(log, 0.03)], parallel_tool_calls=False).run(calls("nap", 4))
        assert log.most_at_once() == 1

    def test_writers_by_default_run_one_at_a_time(self) -> None:
        """A tool that declares nothing is a writer: the batch runs in order."""
        log = Log()
        Executor([sleeper(log, 0.03, effect="write")]).run(calls("nap", 3))
        starts = [log.at(f"nap{i}", "start") for i in range(3)]
        assert starts == sorted(starts)
        assert log.most_at_once() == 1

    def test_results_come_back_in_call_order(self) -> None:
        """Calls that finish in reverse order still get their results in call order."""
        finished: list[int] = []
        done = [threading.Event() for _ in range(4)]

        @tool(effect="read")
        def wait(n: int) -> int:
            # Each call finishes only after the next one has: the reverse order, whatever
            # the machine's load (sleeps of different lengths raced under a busy CPU).
            if n < 3:
                done[n + 1].wait(timeout=10)
            finished.append(n)
            done[n].set()
            return n

        results = Executor([wait]).run(calls("wait", 4))
        assert finished == [3, 2, 1, 0]
        assert [r.call_id for r in results] == ["c0", "c1", "c2", "c3"]
        assert [r.content for r in results] == [0, 1, 2, 3]


class TestFailures:
    """Exceptions, timeouts, bad values and missing tools become error results."""

    def test_an_exception_names_its_type(self) -> None:
        """A tool that raises gives an error result naming the exception type."""

        def fails(n: int) -> str:
            raise PermissionError(f"cannot open /root/{n}")

        (result,) = Executor([fails]).run(calls("fails", 1))
        assert result.is_error
        assert result.content == "PermissionError: cannot open /root/0"

    def test_a_slow_tool_times_out_and_the_batch_goes_on(self) -> None:
        """A call past its timeout is a TimeoutError result; the other calls still run."""

        @tool(timeout=0.1, effect="read")
        def slow(n: int) -> str:
            time.sleep(1.0)
            return "late"

        @tool(effect="read")
        def quick(n: int) -> str:
            return "quick"

        batch = [*calls("slow", 1), af.ToolCall(id="q", name="quick", arguments={"n": 1})]
        started = time.monotonic()
        results = Executor([slow, quick]).run(batch)
        assert time.monotonic() - started < 0.8
        assert results[0].content == "TimeoutError: tool 'slow' did not finish within 0.1s"
        assert results[0].is_error
        assert results[1].content == "quick"

    def test_an_async_tool_times_out(self) -> None:
        """In arun, an async tool past its timeout is cancelled and answered TimeoutError."""
        cancelled = []

        async def slow(n: int) -> str:
            try:
                await asyncio.sleep(5)
            except asyncio.CancelledError:
                cancelled.append(n)
                raise
            return "late"

        ex = Executor([slow], options={"slow": ToolOptions(timeout=0.05)})
        (result,) = asyncio.run(ex.arun(calls("slow", 1)))
        assert "TimeoutError" in result.content
        assert cancelled == [0]

    def test_a_timeout_error_raised_by_the_tool_is_not_a_timeout(self) -> None:
        """A tool's own TimeoutError keeps its message."""

        def connect(n: int) -> str:
            raise TimeoutError("the database did not answer")

        (result,) = Executor([connect], timeout=5).run(calls("connect", 1))
        assert result.content == "TimeoutError: the database did not answer"

    def test_an_unserialisable_value_is_an_error_naming_the_tool(self) -> None:
        """A tool returning a set gets an error result, not a crash."""

        def odd(n: int) -> Any:
            return {1, 2}

        (result,) = Executor([odd]).run(calls("odd", 1))
        assert result.is_error
        assert "tool 'odd' returned a set" in result.content

    @pytest.mark.parametrize(("depth", "words"), [(150, "nested deeper than 100"), (5000, "")])
    def test_a_result_nested_too_deep_is_an_error(self, depth: int, words: str) -> None:
        """A result the controller would refuse (or json cannot even write: RecursionError)
        used to end `af.run` with InvalidInputError; it is the call's error result instead."""
        nested: list[Any] = []
        for _ in range(depth):
            nested = [nested]

        def deep(n: int) -> Any:
            return nested

        (result,) = Executor([deep]).run(calls("deep", 1))
        assert result.is_error
        assert result.content.startswith("ToolOutputError: tool 'deep' returned a list")
        assert words in result.content
        ctl = af.Controller(tools=["deep"])
        ctl.on_model_output(
            af.ModelTurn(tool_calls=[af.ToolCall(id="c1", name="deep", arguments={})])
        )
        decision = ctl.on_tool_results([result.model_copy(update={"call_id": "c1"})])
        assert decision.action == af.Action.CONTINUE

    def test_a_big_result_is_cut_with_its_size(self) -> None:
        """A result over the cap is cut, with a marker giving the original size."""

        def dump(n: int) -> str:
            return "x" * 5000

        (result,) = Executor([dump], max_result_chars=100).run(calls("dump", 1))
        assert result.content.startswith("x" * 100 + "\n[... cut: the result was 5,000 characters")

    def test_a_tool_without_implementation_is_an_error(self) -> None:
        """A call to a name with no callable gets an error result listing the tools that run."""
        (result,) = Executor(["described_only"]).run(calls("described_only", 1))
        assert result.is_error
        assert "no Python implementation" in result.content


class TestRetries:
    """tenacity retries idempotent tools only."""

    def flaky(self, failures: int) -> tuple[Callable[..., str], list[int]]:
        attempts: list[int] = []

        def flaky(n: int) -> str:
            attempts.append(n)
            if len(attempts) <= failures:
                raise ConnectionError("reset")
            return "ok"

        return flaky, attempts

    def test_an_idempotent_tool_is_retried(self) -> None:
        """Two failures then a success give the success after three attempts."""
        fn, attempts = self.flaky(2)
        ex = Executor([fn], options={"flaky": ToolOptions(idempotent=True)})
        assert ex.run(calls("flaky", 1))[0].content == "ok"
        assert len(attempts) == 3

    def test_a_tool_not_declared_idempotent_runs_once(self) -> None:
        """A failing tool that may have side effects is never run twice."""
        fn, attempts = self.flaky(1)
        (result,) = Executor([fn]).run(calls("flaky", 1))
        assert result.content == "ConnectionError: reset"
        assert len(attempts) == 1


class TestCancellation:
    """Cancel and skip keep one result per call id."""

    def test_a_hanging_tool_is_cancelled(self, release: threading.Event) -> None:
        """Setting `cancel` ends a hanging call and the calls not started, each with a result."""
        log = Log()

        def hang(n: int) -> str:
            log.mark("hang", "start")
            release.wait(10)
            return "released"

        cancel = threading.Event()
        threading.Timer(0.1, cancel.set).start()
        batch = [*calls("hang", 1), af.ToolCall(id="next", name="hang", arguments={"n": 1})]
        started = time.monotonic()
        results = Executor([hang]).run(batch, cancel=cancel)
        assert time.monotonic() - started < 1.0
        assert [r.call_id for r in results] == ["c0", "next"]
        assert results[0].content.startswith("CancelledError: tool 'hang' was cancelled")
        assert results[1].content.startswith("cancelled: 'hang' was not started")

    def test_a_user_message_skips_the_calls_not_started(self) -> None:
        """`skip` lets the running call finish and skips the rest."""
        skip = threading.Event()

        def work(n: int) -> str:
            skip.set()  # the user types while the first call runs
            time.sleep(0.05)
            return f"done {n}"

        results = Executor([work]).run(calls("work", 3), skip=skip)
        assert [r.content for r in results] == ["done 0", SKIPPED, SKIPPED]

    def test_cancelling_the_task_cancels_async_tools(self) -> None:
        """Cancelling the task awaiting arun cancels its tools; on_result saw what finished."""
        seen: list[af.ToolResult] = []

        @tool(effect="read")
        async def job(n: int) -> str:
            await asyncio.sleep(0 if n == 0 else 5)
            return f"job {n}"

        async def main() -> None:
            task = asyncio.ensure_future(
                Executor([job]).arun(calls("job", 2), on_result=seen.append)
            )
            await asyncio.sleep(0.1)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

        asyncio.run(main())
        assert (seen[0].call_id, seen[0].content) == ("c0", "job 0")
        assert seen[1].content.startswith("CancelledError")

    def test_an_asyncio_event_cancels_arun(self, release: threading.Event) -> None:
        """An asyncio.Event given as `cancel` ends arun with a result for every call."""

        def hang(n: int) -> str:
            release.wait(10)
            return "released"

        async def main() -> list[af.ToolResult]:
            cancel = asyncio.Event()
            asyncio.get_running_loop().call_later(0.05, cancel.set)
            return await Executor([hang]).arun(calls("hang", 2), cancel=cancel)

        results = asyncio.run(main())
        assert [r.is_error for r in results] == [True, True]


class TestBadInput:
    """Bad batches and declarations raise AgentFSMError naming what was wrong."""

    def test_a_repeated_call_id_is_refused(self) -> None:
        """Two calls with one id cannot each get one result."""
        batch = [af.ToolCall(id="x", name="t"), af.ToolCall(id="x", name="t")]
        with pytest.raises(AgentFSMError, match="'x' appears twice"):
            Executor(["t"]).run(batch)

    def test_a_decision_that_executes_nothing_is_refused(self) -> None:
        """Only EXECUTE_TOOLS and HANDOFF decisions can be run."""
        decision = af.Controller().stop()
        with pytest.raises(AgentFSMError, match="EXECUTE_TOOLS or HANDOFF"):
            Executor(["t"]).run(decision)

    @pytest.mark.parametrize(
        ("kwargs", "match"),
        [
            ({"max_concurrency": 0}, "max_concurrency"),
            ({"options": {"nope": ToolOptions()}}, "undeclared"),
            ({"options": RaisingMapping()}, "options could not be read: RuntimeError"),
            ({"timeout": -1}, "timeout"),
        ],
    )
    def test_bad_settings_are_refused(self, kwargs: dict[str, Any], match: str) -> None:
        """Settings out of range raise a DefinitionError naming the setting."""
        with pytest.raises(AgentFSMError, match=match):
            Executor(["t"], **kwargs)

    def test_a_controller_decision_runs_end_to_end(self) -> None:
        """A decision from the Controller runs and its results are accepted back."""

        def echo(text: str) -> str:
            return text

        ctl = af.Controller(tools=[echo])
        turn = af.ModelTurn(tool_calls=[af.ToolCall(id="e", name="echo", arguments={"text": "hi"})])
        decision = ctl.on_model_output(turn)
        results = Executor([echo]).run(decision)
        assert ctl.on_tool_results(results).action is af.Action.CONTINUE


def test_the_subprocess_tool_really_ran(tmp_path: Path) -> None:
    """A tool running a Python subprocess returns its real output."""

    def python(code: str) -> str:
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path
        )
        return done.stdout.strip()

    code = "import os; open('made.txt', 'w').write('x'); print(os.getpid())"
    (result,) = Executor([python]).run(
        [af.ToolCall(id="p", name="python", arguments={"code": code})]
    )
    assert result.content.isdigit()
    assert (tmp_path / "made.txt").read_text() == "x"


class TestToolDecorator:
    def test_only_a_function_is_marked(self) -> None:
        """@tool on a value that is no function, or one that takes no attributes, is named."""
        with pytest.raises(ToolDefinitionError, match="marks a function, not int"):
            tool(0)  # type: ignore[call-overload]
        with pytest.raises(ToolDefinitionError, match="takes no attributes"):
            tool(len)
        with pytest.raises(ToolDefinitionError, match="marks a function"):
            tool(effect="read")("not a function")  # type: ignore[type-var]
