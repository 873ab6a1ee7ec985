"""The executor given hostile tools: exceptions that cannot be described, values that cannot be
rendered, huge error messages, and writers that time out while later calls wait for them."""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

import agentfsm as af
from agentfsm._runner.executor import Executor, describe, tool

DIGITS = sys.get_int_max_str_digits()
"""The most digits Python turns an int into (4,300 unless the environment changed it)."""
HUGE: int = 10 ** (DIGITS + 10)
"""An int with more digits than that: `str()` raises ValueError."""


class UnprintableError(Exception):
    """An exception whose message cannot be read: its `__str__` raises."""

    def __str__(self) -> str:
        raise RuntimeError("__str__ failed")


class NotTextError(Exception):
    """An exception whose `__str__` returns something other than a str."""

    def __str__(self) -> Any:
        return 42


class ExitingError(Exception):
    """An exception whose `__str__` raises SystemExit, which `except Exception` lets through."""

    def __str__(self) -> str:
        raise SystemExit(1)


class Stop(BaseException):
    """A BaseException that is neither KeyboardInterrupt nor SystemExit."""


def one(name: str, call_id: str = "c0", **arguments: Any) -> af.ToolCall:
    return af.ToolCall(id=call_id, name=name, arguments=arguments)


def finishes(work: Any, seconds: float = 10.0) -> Any:
    """Run `work()` on a daemon thread; its value, or fail when it is still running after
    `seconds` (the bug this guards against hangs forever)."""
    out: list[Any] = []
    thread = threading.Thread(target=lambda: out.append(work()), daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still running after {seconds}s: the executor hangs"
    return out[0]


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """An event that lets abandoned tools end once the test is over."""
    event = threading.Event()
    yield event
    event.set()


class TestExceptionsThatCannotBeDescribed:
    """Every exception a tool raises is its call's error result, however it describes itself."""

    @pytest.mark.parametrize(
        "exc", [UnprintableError(), NotTextError(), ExitingError(), Stop("halt"), SystemExit(3)]
    )
    def test_the_sync_path_answers_instead_of_hanging(self, exc: BaseException) -> None:
        """A tool raising an exception whose str() fails used to kill its worker thread and hang
        `run` forever; every such exception is now the call's error result, named by its type."""

        def broken() -> str:
            raise exc

        (result,) = finishes(lambda: Executor([broken]).run([one("broken")]))
        assert result.is_error
        assert result.content.startswith(type(exc).__name__)

    def test_with_a_timeout_it_is_not_reported_as_a_timeout(self) -> None:
        """The failure is reported as what it was, not as the timeout the dead worker caused."""

        def broken() -> str:
            raise UnprintableError

        (result,) = finishes(lambda: Executor([broken], timeout=2).run([one("broken")]))
        assert result.content == (
            "UnprintableError (its message cannot be shown: str() raised RuntimeError)"
        )

    @pytest.mark.parametrize("exc", [UnprintableError(), NotTextError(), Stop("halt")])
    def test_the_async_path_answers_instead_of_raising(self, exc: BaseException) -> None:
        """`arun` used to raise the RuntimeError of the exception's __str__; it answers instead,
        for a coroutine tool and for a sync tool run on a thread alike."""

        async def broken_async() -> str:
            raise exc

        def broken_sync() -> str:
            raise exc

        ex = Executor([broken_async, broken_sync])
        batch = [one("broken_async", "a"), one("broken_sync", "s")]
        results = asyncio.run(ex.arun(batch))
        assert [r.is_error for r in results] == [True, True]
        assert all(r.content.startswith(type(exc).__name__) for r in results)

    def test_a_message_with_a_lone_surrogate_is_escaped(self) -> None:
        """An error naming a non-UTF-8 file is sent with the surrogate escaped, like a result."""

        def opens() -> str:
            raise OSError("cannot open r\udcff.txt")

        (result,) = Executor([opens]).run([one("opens")])
        assert result.content == "OSError: cannot open r\\udcff.txt"

    def test_describe_never_raises(self) -> None:
        """`describe` names an exception by its type when its message cannot be read."""
        assert describe(ValueError("bad")) == "ValueError: bad"
        assert describe(ValueError()) == "ValueError"
        assert describe(NotTextError()).startswith("NotTextError (its message cannot be shown")


class TestValuesThatCannotBeRendered:
    """A value that has no text form is the call's error result; the batch and the run go on."""

    def test_an_int_past_the_int_to_text_limit_is_an_error(self) -> None:
        """An int of more digits than Python converts to text used to crash whoever rendered it."""

        def huge() -> int:
            return HUGE

        (result,) = Executor([huge]).run([one("huge")])
        assert result.is_error
        assert result.content.startswith("ToolOutputError: tool 'huge' returned a")

    def test_an_int_inside_a_value_past_the_limit_is_an_error(self) -> None:
        """Nested in a dict, the same int is an error result too."""

        def huge() -> dict[str, int]:
            return {"n": HUGE}

        (result,) = Executor([huge]).run([one("huge")])
        assert result.is_error
        assert "tool 'huge' returned a dict" in result.content

    def test_an_int_just_under_the_limit_is_kept(self) -> None:
        """The largest int Python can write is returned as it is."""
        big: int = 10 ** (DIGITS - 1)

        def large() -> int:
            return big

        (result,) = Executor([large]).run([one("large")])
        assert not result.is_error
        assert result.content == big

    def test_a_mapping_whose_items_raise_is_an_error(self) -> None:
        """A value whose own methods fail while it is rendered is an error, not a dead worker."""

        class Hostile(dict[str, int]):
            def items(self) -> Any:
                raise LookupError("no items today")

            def __iter__(self) -> Any:
                raise LookupError("no keys today")

        def weird() -> Any:
            return Hostile(a=1)

        (result,) = finishes(lambda: Executor([weird]).run([one("weird")]))
        assert result.is_error
        assert "LookupError" in result.content

    def test_lone_surrogates_are_escaped(self) -> None:
        """A non-UTF-8 file name (a lone surrogate) is sent as a visible escape, never a crash of
        the HTTP client that encodes the next request."""

        def listing() -> dict[str, list[str]]:
            return {"files": ["report\udcff.txt"]}

        def name() -> str:
            return "report\udcff.txt"

        results = Executor([listing, name]).run([one("listing", "l"), one("name", "n")])
        assert results[0].content == '{"files": ["report\\udcff.txt"]}'
        assert results[1].content == "report\\udcff.txt"
        for result in results:
            result.content.encode("utf-8")


class TestErrorResultsAreCapped:
    """`max_result_chars` bounds error results as it bounds results."""

    def test_a_huge_exception_message_is_cut_with_a_marker(self) -> None:
        """A 5 MB exception message reaches the model cut to the cap, marked as cut."""

        def loud() -> str:
            raise ValueError("x" * 5_000_000)

        (result,) = Executor([loud], max_result_chars=1000).run([one("loud")])
        assert result.is_error
        assert len(result.content) < 1100
        assert result.content.startswith("ValueError: xxx")
        assert result.content.endswith(
            "[... cut: the result was 5,000,012 characters; the first 1,000 are shown]"
        )

    def test_the_async_path_cuts_too(self) -> None:
        """The same cap holds for `arun`."""

        async def loud() -> str:
            raise ValueError("y" * 100_000)

        (result,) = asyncio.run(Executor([loud], max_result_chars=50).arun([one("loud")]))
        assert len(result.content) < 150
        assert "[... cut: the result was 100,012 characters" in result.content

    def test_without_a_cap_the_message_is_whole(self) -> None:
        """`max_result_chars=None` keeps every message whole, errors included."""

        def loud() -> str:
            raise ValueError("z" * 100_000)

        (result,) = Executor([loud], max_result_chars=None).run([one("loud")])
        assert result.content == "ValueError: " + "z" * 100_000


class Log:
    """When each tool started and ended, from the tools' own threads."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, float]] = []
        self.lock = threading.Lock()

    def mark(self, name: str, what: str) -> None:
        with self.lock:
            self.events.append((name, what, time.monotonic()))

    def names(self, what: str) -> list[str]:
        with self.lock:
            return [n for n, w, _ in self.events if w == what]


def slow_writer(log: Log, release: threading.Event) -> Any:
    @tool(timeout=0.2)
    def write_slowly(label: str) -> str:
        log.mark(label, "start")
        release.wait(1.0)
        log.mark(label, "end")
        return "written"

    return write_slowly


def recorder(log: Log, effect: str) -> Any:
    def record(label: str) -> str:
        log.mark(label, "start")
        log.mark(label, "end")
        return f"{label} done"

    record.__name__ = effect
    return tool(record, effect="read" if effect == "read" else "write")


class TestAWriterThatTimesOut:
    """A timed-out call may still be running: nothing ordered after it starts in its batch."""

    def batch(self) -> list[af.ToolCall]:
        return [
            one("read", "r0", label="r0"),
            one("write_slowly", "w1", label="w1"),
            one("read", "r2", label="r2"),
            one("write", "w3", label="w3"),
        ]

    def test_later_calls_do_not_start_while_it_may_still_write(
        self, release: threading.Event
    ) -> None:
        """After w1 times out its thread goes on; r2 and w3, ordered after it, are not started
        (they used to start at once, overlapping the writer) and say why."""
        log = Log()
        ex = Executor([slow_writer(log, release), recorder(log, "read"), recorder(log, "write")])
        results = ex.run(self.batch())
        time.sleep(0.1)  # w3 would have run by now
        assert log.names("start") == ["r0", "w1"]
        assert "w1" not in log.names("end")  # the writer is still running
        assert [r.content for r in results[:2]] == [
            "r0 done",
            "TimeoutError: tool 'write_slowly' did not finish within 0.2s",
        ]
        for result in results[2:]:
            assert result.is_error
            assert result.content.startswith(
                "not run: call 'w1' ('write_slowly'), which this call waits for, timed out"
            )
        release.set()

    def test_the_async_path_keeps_the_same_rule(self, release: threading.Event) -> None:
        """`arun` refuses the same calls for a sync writer whose thread it abandoned."""
        log = Log()
        ex = Executor([slow_writer(log, release), recorder(log, "read"), recorder(log, "write")])
        results = asyncio.run(ex.arun(self.batch()))
        time.sleep(0.1)
        assert log.names("start") == ["r0", "w1"]
        assert [r.is_error for r in results] == [False, True, True, True]
        assert "may still be running" in results[3].content
        release.set()

    def test_reads_next_to_a_timed_out_read_still_run(self, release: threading.Event) -> None:
        """A read that times out holds back only the next writer, not the reads beside it."""
        log = Log()

        @tool(effect="read", timeout=0.2)
        def read_slowly(label: str) -> str:
            log.mark(label, "start")
            release.wait(1.0)
            return "late"

        ex = Executor([read_slowly, recorder(log, "read"), recorder(log, "write")])
        batch = [
            one("read_slowly", "r0", label="r0"),
            one("read", "r1", label="r1"),
            one("write", "w2", label="w2"),
        ]
        results = ex.run(batch)
        assert sorted(log.names("start")) == ["r0", "r1"]  # together, in either order
        assert results[1].content == "r1 done"
        assert results[2].content.startswith("not run: call 'r0' ('read_slowly')")
        release.set()

    def test_an_async_tool_cancelled_by_its_timeout_holds_nothing_back(self) -> None:
        """A coroutine's timeout cancels it to its end, so the calls after it run."""
        log = Log()

        @tool(timeout=0.1)
        async def write_async(label: str) -> str:
            log.mark(label, "start")
            await asyncio.sleep(5)
            return "late"

        ex = Executor([write_async, recorder(log, "write")])
        batch = [one("write_async", "w0", label="w0"), one("write", "w1", label="w1")]
        results = asyncio.run(ex.arun(batch))
        assert "TimeoutError" in results[0].content
        assert results[1].content == "w1 done"

    def test_the_next_batch_runs(self, release: threading.Event) -> None:
        """The refusal holds inside the batch only: the model may call the tools again."""
        log = Log()
        ex = Executor([slow_writer(log, release), recorder(log, "read"), recorder(log, "write")])
        ex.run(self.batch())
        release.set()
        (result,) = ex.run([one("write", "w9", label="w9")])
        assert result.content == "w9 done"
