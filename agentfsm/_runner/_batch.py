"""How one batch of tool calls runs: its order, its worker threads or tasks, its events.

The executor (`agentfsm._runner.executor`) plans a batch into jobs and hands it
to `SyncBatch` (worker threads and one Condition) or `AsyncBatch` (a task per
running call). Both start calls in call order as their dependencies finish,
at most `max_concurrency` at a time, and give every call exactly one result.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import math
import queue
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any, Protocol

from agentfsm._model.types import ToolCall, ToolResult

__all__ = [
    "AsyncBatch",
    "Flag",
    "Job",
    "JobState",
    "Options",
    "Runs",
    "SyncBatch",
    "TimedOutError",
    "awaited",
    "in_thread",
    "limited",
    "order",
]

_POLL = 0.05
"""Seconds between two looks at a cancellation (or a skip) while something runs."""


class Flag(Protocol):
    def is_set(self) -> bool: ...


class JobState(Enum):
    """Where one call of a batch is: waiting for its turn, running, or answered."""

    WAITING = "waiting"
    RUNNING = "running"
    DONE = "done"


class Options(Protocol):
    """How one tool runs (the executor's `ToolOptions`, seen from here)."""

    @property
    def effect(self) -> str: ...

    @property
    def timeout(self) -> float | None: ...

    @property
    def idempotent(self) -> bool: ...


class Runs(Protocol):
    """What a batch asks of the executor that planned it: to call a tool, and each result.

    A protocol, so that this module does not import the executor that imports it.
    """

    @property
    def max_concurrency(self) -> int: ...

    def _call(self, job: Job) -> Any: ...

    async def _acall(self, job: Job) -> Any: ...

    def result_of(self, call: ToolCall, value: Any) -> ToolResult: ...

    def failed(self, call: ToolCall, exc: BaseException) -> ToolResult | None: ...

    def timed_out(self, call: ToolCall) -> ToolResult: ...

    def after_timeout(self, call: ToolCall, late: ToolCall) -> ToolResult: ...

    def cancelled(self, call: ToolCall, *, started: bool) -> ToolResult: ...

    def skipped(self, call: ToolCall) -> ToolResult: ...

    def no_tool(self, call: ToolCall) -> ToolResult: ...


@dataclass(slots=True, eq=False)
class Job:
    """One call of a batch: what runs it, what it waits for, and its result."""

    index: int
    call: ToolCall
    fn: Callable[..., Any] | None
    options: Options
    after: tuple[int, ...] = ()
    """The indexes of the calls this one starts after (see `order`)."""
    state: JobState = JobState.WAITING
    deadline: float = math.inf
    result: ToolResult | None = None
    """The call's one result; None for a call another attempt at the decision started."""
    late: Job | None = None
    """The call that timed out and may still run, which this one was ordered after."""


def late_before(jobs: list[Job], job: Job) -> Job | None:
    """The timed-out call, perhaps still running, that `job` waits for (directly or not)."""
    return next((jobs[i].late for i in job.after if jobs[i].late is not None), None)


class _Batch:
    """What both batches share: the order calls start in, and how each gets one result.

    A subclass says how many calls run, how one starts (a thread or a task) and
    what happens when one is answered.
    """

    def __init__(
        self,
        executor: Runs,
        jobs: list[Job],
        cancel: Flag | None,
        skip: Flag | None,
        on_result: Callable[[ToolResult], None] | None,
    ) -> None:
        self.ex = executor
        self.jobs = jobs
        self.cancel = cancel
        self.skip = skip
        self.on_result = on_result
        # Polling only when an event can be set from outside: otherwise a result wakes us.
        self.polling = cancel is not None or skip is not None
        self._setup()

    def _setup(self) -> None:
        """The state of one kind of batch."""

    def running(self) -> int:
        """How many calls run now."""
        raise NotImplementedError

    def _launch(self, job: Job) -> None:
        """Start a job just marked RUNNING."""
        raise NotImplementedError

    def _done(self, job: Job, result: ToolResult | None) -> None:
        """Give the job its one result (None: the attempt that started it gives it)."""
        job.state = JobState.DONE
        job.result = result

    def cancelled(self) -> bool:
        return self.cancel is not None and self.cancel.is_set()

    def all_done(self) -> bool:
        return all(job.state is JobState.DONE for job in self.jobs)

    def _start_ready(self) -> None:
        """Start (or answer without running) every call whose turn has come, in call order,
        while fewer than `max_concurrency` run."""
        skipping = self.skip is not None and self.skip.is_set()
        for job in self.jobs:
            if self.running() >= self.ex.max_concurrency:
                return
            if not self._ready(job):
                continue
            if self._yielded(job):
                self._done(job, None)
                continue
            answer = self._unstartable(job, skipping)
            if answer is not None:
                self._done(job, answer)
            else:
                job.state = JobState.RUNNING
                self._launch(job)

    def _ready(self, job: Job) -> bool:
        """Whether the job waits and every call it is ordered after is answered."""
        return job.state is JobState.WAITING and all(
            self.jobs[i].state is JobState.DONE for i in job.after
        )

    def _yielded(self, job: Job) -> bool:
        """Whether the job is ordered after a call another attempt at the decision started:
        that attempt runs what follows it in order, so this one starts and answers none of it."""
        # Answered with no result is only ever a call left to the other attempt.
        return any(self.jobs[i].result is None for i in job.after)

    def _unstartable(self, job: Job, skipping: bool) -> ToolResult | None:
        """The result of a call that must not start, or None when it may."""
        job.late = late_before(self.jobs, job)
        if job.late is not None:
            return self.ex.after_timeout(job.call, job.late.call)
        if skipping:
            return self.ex.skipped(job.call)
        if job.fn is None:
            return self.ex.no_tool(job.call)
        return None

    def _cancel_unfinished(self) -> None:
        """Answer every call not yet answered as cancelled, saying whether it had started."""
        for job in self.jobs:
            if job.state is not JobState.DONE:
                started = job.state is JobState.RUNNING
                self._done(job, self.ex.cancelled(job.call, started=started))


class SyncBatch(_Batch):
    """One batch on the sync path: worker threads, one Condition, deadlines and events.

    Results are handed to `on_result` in the driving thread, never in a worker's.
    """

    def _setup(self) -> None:
        self.cond = threading.Condition()
        self._running = 0
        self.finished: list[Job] = []  # answered, not yet handed to on_result
        self._starting: list[Job] = []  # marked RUNNING, not yet given a thread

    def running(self) -> int:
        return self._running

    def drive(self) -> None:
        with self.cond:
            while True:
                self._deliver()
                if self.cancelled():
                    self._cancel_unfinished()
                self._start_next()
                self._deliver()
                if self.all_done():
                    return
                wait = self._expire(time.monotonic())
                if self.polling:
                    wait = min(wait, _POLL)
                if self.finished:
                    continue
                self.cond.wait(None if wait == math.inf else wait)

    def _start_next(self, here: bool = False) -> Job | None:
        """Start every call whose turn has come; with `here`, return one to run in this thread.

        A worker that finished a call runs the next one itself: a chain of writers
        costs no thread hand-off per call.
        """
        if self.cancelled():
            return None
        self._start_ready()
        starting, self._starting = self._starting, []
        mine = starting.pop(0) if here and starting else None
        for job in starting:
            _WORKERS.submit(lambda job=job: self._work(job))  # type: ignore[misc]
        return mine

    def _launch(self, job: Job) -> None:
        self._running += 1
        if job.options.timeout is not None:
            job.deadline = time.monotonic() + job.options.timeout
        self._starting.append(job)

    def _work(self, first: Job) -> None:
        job: Job | None = first
        while job is not None:
            result: ToolResult | None
            try:
                result = self.ex.result_of(job.call, self.ex._call(job))
            except BaseException as exc:  # every failure is the call's result
                result = self.ex.failed(job.call, exc)
            with self.cond:
                if job.state is JobState.RUNNING:  # not abandoned by a timeout or a cancellation
                    self._done(job, result)
                job = self._start_next(here=True)
                self.cond.notify()

    def _done(self, job: Job, result: ToolResult | None) -> None:
        if job.state is JobState.RUNNING:
            self._running -= 1
        super()._done(job, result)
        self.finished.append(job)

    def _deliver(self) -> None:
        if self.finished and self.on_result is not None:
            for job in self.finished:
                if job.result is not None:
                    self.on_result(job.result)
        self.finished.clear()

    def _expire(self, now: float) -> float:
        """Give timed-out calls their error; return the seconds to the next deadline."""
        soonest = math.inf
        for job in self.jobs:
            if job.state is not JobState.RUNNING or job.deadline == math.inf:
                continue
            if now >= job.deadline:
                job.late = job  # abandoned, not stopped: what waits for it must not start
                self._done(job, self.ex.timed_out(job.call))
            else:
                soonest = min(soonest, job.deadline - now)
        return soonest


class AsyncBatch(_Batch):
    """One batch on the async path: a task per running call.

    Results are handed to `on_result` as soon as they are known.
    """

    def _setup(self) -> None:
        self.tasks: dict[asyncio.Task[Any], Job] = {}

    def running(self) -> int:
        return len(self.tasks)

    async def drive(self) -> None:
        try:
            while True:
                if self.cancelled():
                    await self._cancel_all()
                self._start_ready()
                if self.all_done():
                    return
                if not self.tasks:
                    continue
                done, _ = await asyncio.wait(
                    set(self.tasks),
                    timeout=_POLL if self.polling else None,
                    return_when="FIRST_COMPLETED",
                )
                for task in done:
                    job = self.tasks.pop(task)
                    self._done(job, self._outcome(job, task))
        except asyncio.CancelledError:
            await self._cancel_all()
            raise

    def _launch(self, job: Job) -> None:
        work = limited(self.ex._acall(job), job.options.timeout)
        self.tasks[asyncio.ensure_future(work)] = job

    def _outcome(self, job: Job, task: asyncio.Task[Any]) -> ToolResult | None:
        if task.cancelled():
            return self.ex.cancelled(job.call, started=True)
        exc = task.exception()
        # A coroutine's timeout cancels it to its end; a sync tool's thread goes on.
        if isinstance(exc, TimedOutError) and not inspect.iscoroutinefunction(job.fn):
            job.late = job
        if exc is not None:
            return self.ex.failed(job.call, exc)
        return self.ex.result_of(job.call, task.result())

    def _done(self, job: Job, result: ToolResult | None) -> None:
        super()._done(job, result)
        if self.on_result is not None and result is not None:
            self.on_result(result)

    async def _cancel_all(self) -> None:
        """Cancel the running tasks and wait for them; then answer every call cancelled."""
        for task in self.tasks:
            task.cancel()
        if self.tasks:
            await asyncio.wait(set(self.tasks))
        self.tasks.clear()
        self._cancel_unfinished()


class _Workers:
    """Daemon threads that run sync tools; a thread is added whenever none is idle.

    Threads, not a ThreadPoolExecutor: a tool that hangs past its timeout is
    abandoned, and must neither hold a slot that later calls wait for nor keep
    the interpreter from exiting.
    """

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._idle = 0
        self._lock = threading.Lock()

    def submit(self, work: Callable[[], None]) -> None:
        # The caller's context goes with the work, as asyncio.to_thread does: a run the
        # tool starts finds the run that called it (agentfsm._runner.session).
        context = contextvars.copy_context()
        with self._lock:
            self._jobs.put(lambda: context.run(work))
            if self._idle:
                self._idle -= 1
                return
        threading.Thread(target=self._serve, name="agentfsm-tool", daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                work = self._jobs.get(timeout=30.0)
            except queue.Empty:
                with self._lock:
                    if self._jobs.empty():
                        self._idle -= 1
                        return
                continue
            work()
            with self._lock:
                self._idle += 1


_WORKERS = _Workers()


class AbandonedError(Exception):
    """The caller stopped waiting for `until_cancelled`'s call; it finishes on its own."""


def until_cancelled(fn: Callable[[], Any], cancelled: Callable[[], bool]) -> Any:
    """Run `fn` on a worker thread and return its value, or raise AbandonedError once `cancelled()`.

    For a blocking call (a sync model request) that a cancellation must not wait
    for: the call is left to finish on its daemon thread, its value unused.
    """
    done = threading.Event()
    outcome: list[tuple[bool, Any]] = []

    def work() -> None:
        try:
            outcome.append((True, fn()))
        except BaseException as exc:
            outcome.append((False, exc))
        finally:
            done.set()

    _WORKERS.submit(work)
    while not done.wait(_POLL):
        if cancelled():
            raise AbandonedError
    ok, value = outcome[0]
    if not ok:
        raise value
    return value


async def in_thread(fn: Callable[[], Any]) -> Any:
    """Run a sync callable on a worker thread and await its value."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()

    def work() -> None:
        try:
            outcome: tuple[bool, Any] = (True, fn())
        except BaseException as exc:
            outcome = (False, exc)
        # RuntimeError: the loop closed while the tool ran, and nobody waits any more.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(_settle, future, outcome)

    _WORKERS.submit(work)
    return await future


def _settle(future: asyncio.Future[Any], outcome: tuple[bool, Any]) -> None:
    if future.done():
        return
    ok, value = outcome
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)


class TimedOutError(Exception):
    """A call ran past its timeout (not a TimeoutError the tool raised itself)."""


async def limited(work: Awaitable[Any], timeout: float | None) -> Any:
    if timeout is None:
        return await work
    try:
        async with asyncio.timeout(timeout) as scope:
            return await work
    except TimeoutError:
        if scope.expired():
            raise TimedOutError from None
        raise


async def awaited(value: Awaitable[Any]) -> Any:
    return await value


def order(jobs: list[Job], parallel: bool) -> None:
    """Set what each call waits for: earlier writers, and for a writer every earlier call."""
    last_writer: int | None = None
    since: list[int] = []  # calls after the last writer
    for job in jobs:
        if not parallel:
            job.after = (job.index - 1,) if job.index else ()
            continue
        before = () if last_writer is None else (last_writer,)
        if job.options.effect == "write":
            job.after = (*before, *since)
            last_writer, since = job.index, []
        else:
            job.after = before
            since.append(job.index)
