"""`agentfsm replay --engine ray`: replay on a Ray cluster, attached the way Ray's own tools attach.

Which cluster: `--address` (`host:port`, `auto` or `local`), else the `RAY_ADDRESS` environment
variable, else `auto`, the cluster that `ray start --head` started on this machine. Nothing is
started unless asked: `--address local` starts a private Ray for this replay, the only case where
`--workers` becomes a CPU count (a running cluster's resources are its own).

What travels: the driver reads the policy files once and sends the policies themselves with the
work; no worker opens a policy file. Trace files are read by the workers where they are, relative
paths from the driver's working directory: on several machines every node must see the traces at
the driver's paths (a shared filesystem mounted at the same place).

How the work runs: files go out in the process pool's chunks (about `CHUNK_BYTES` of files a task),
at most `workers` tasks run at once (by default the cluster's CPUs), at most `AHEAD` chunks per
worker are out (running, or done and waiting to be printed), and outcomes come back in file order.

What is printed: stdout holds only the replay's lines. While attached, Ray prints its own notices
(a worker or node that died, a task that cannot be scheduled) to `sys.stdout`; they are sent to
stderr instead. When the engine fails, the replay raises `EngineError` (`agentfsm replay` exits 3
with one line): a task that failed for good, or a cluster whose GCS has not answered for
`GCS_TIMEOUT` seconds (Ray's own driver would wait 60 s and then end the process with status 1,
the code that means "the runs differ").
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import socket
import sys
import time
from collections import deque
from collections.abc import Callable, Generator, Iterable, Iterator
from typing import Any

from agentfsm._cli._replay_jobs import (
    AHEAD,
    EngineError,
    Job,
    Outcome,
    Progress,
    chunks,
    fewer_collections,
    load_policy,
    replay_file,
)
from agentfsm._cli._text import one_line
from agentfsm.exceptions import AgentFSMError

__all__ = [
    "GCS_TIMEOUT",
    "Heartbeat",
    "Window",
    "attached",
    "replay_chunk",
    "replay_on_ray",
    "shipped",
    "task_failure",
]

GCS_TIMEOUT = 10.0
"""Seconds the cluster's GCS may go without answering before the replay gives up (exit 3)."""
POLL = 1.0
"""Seconds between looks at the GCS while the replay waits for a task."""

HINT = (
    "start one with `ray start --head` and set RAY_ADDRESS=host:port (or pass --address), "
    "or pass --address local to start a private one for this replay"
)


def replay_on_ray(
    jobs: list[Job], progress: Progress, workers: int | None, address: str | None
) -> Generator[Outcome, None, None]:
    """Replay `jobs` on the Ray cluster at `address`; outcomes in file order.

    While it runs, `sys.stdout` is stderr: Ray prints its notices there from a thread of
    its own at any time, and the caller writes the replay's lines to the stdout it kept.
    """
    ray = _import_ray()
    with contextlib.redirect_stdout(sys.stderr), attached(ray, address, workers):
        cpus = int(ray.cluster_resources().get("CPU", 0))
        workers = workers or max(1, cpus)
        nodes = sum(1 for node in ray.nodes() if node["Alive"])
        where = ray.get_runtime_context().gcs_address
        print(
            f"agentfsm replay: Ray cluster at {where}: {nodes} node(s), {cpus} CPU(s); "
            f"{workers} task(s) at once",
            file=sys.stderr,
        )
        task = ray.remote(replay_chunk)
        cwd = os.getcwd()
        head = Heartbeat(where)
        window = Window(
            ray,
            lambda chunk: task.remote(cwd, chunk),
            workers,
            workers * AHEAD,
            check=head.check,
            head=head,
        )
        for outcomes in window.results(chunks(shipped(jobs))):
            for outcome in outcomes:
                progress.advance(outcome.runs)
                yield outcome


def _import_ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise AgentFSMError("--engine ray needs Ray: pip install 'agentfsm[ray]'") from exc
    return ray


@contextlib.contextmanager
def attached(ray: Any, address: str | None, workers: int | None) -> Iterator[None]:
    """Connect this process to the cluster at `address` for the block, then disconnect.

    A process already connected (a program running Ray calls `main`) keeps its connection.
    """
    if ray.is_initialized():
        yield
        return
    # Ray resolves `auto` as its own tools do (RAY_ADDRESS, then the cluster started here);
    # `target` only names it in errors.
    target = address or os.environ.get("RAY_ADDRESS") or "auto"
    options: dict[str, Any] = {"address": address or "auto", "log_to_driver": False}
    if target == "local":  # a cluster of its own: this machine, `workers` CPUs of it
        options.update(num_cpus=workers, include_dashboard=False)
    try:
        _answers(target)
        ray.init(**options)
    except Exception as exc:  # ConnectionError, ValueError, RuntimeError: Ray's words say which
        raise AgentFSMError(
            f"--engine ray: cannot attach to a Ray cluster at {target!r}: "
            f"{one_line(str(exc))}; {HINT}"
        ) from exc
    try:
        yield
    finally:
        ray.shutdown()  # disconnects this driver; the cluster keeps running


def _answers(target: str) -> None:
    """Raise ConnectionError when nothing listens at a `host:port` (Ray would retry for minutes)."""
    host, _, port = target.rpartition(":")
    if not host or not port.isdigit():  # auto, local, or what Ray reports itself
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=10).close()
    except OSError as exc:
        raise ConnectionError(f"nothing answers at {target} ({exc.strerror or exc})") from exc


class Heartbeat:
    """Whether the cluster's GCS (on its head node) still answers: a TCP connection to its
    port, at most every `POLL` seconds; `check` raises EngineError once it has not answered
    for `timeout` seconds.

    Ray's own driver waits 60 s for a lost GCS and then ends the process with status 1; a
    killed GCS refuses connections at once, so this notices within `timeout` instead.
    `clock` is the time it counts with (a test gives its own, so no test waits on it).
    """

    def __init__(
        self,
        address: str,
        timeout: float = GCS_TIMEOUT,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.address = address
        self.timeout = timeout
        self.clock = clock
        self.silent_since: float | None = None
        self.last_look: float | None = None

    def check(self) -> None:
        """Look at the GCS (at most every `POLL` s); raise EngineError when it is gone."""
        now = self.clock()
        if self.last_look is not None and now - self.last_look < POLL:
            return
        self.last_look = now
        silence = self.silence()
        if silence is None:
            self.silent_since = None
            return
        self.silent_since = now if self.silent_since is None else self.silent_since
        if now - self.silent_since >= self.timeout:
            raise EngineError(
                f"--engine ray: lost the Ray cluster: its GCS at {self.address} has not "
                f"answered for {self.timeout:g} s ({silence}); the replay stopped with no "
                "answer about the runs"
            )

    def silence(self) -> str | None:
        """Why the GCS does not answer now (one connection attempt), or None when it does."""
        host, _, port = self.address.rpartition(":")
        try:
            socket.create_connection((host.strip("[]"), int(port)), timeout=POLL).close()
        except (OSError, ValueError) as exc:
            return (exc.strerror if isinstance(exc, OSError) else None) or str(exc)
        return None


def shipped(jobs: list[Job]) -> list[Job]:
    """The jobs with each policy file replaced by the policy it holds, read here (once a file)."""
    return [
        dataclasses.replace(job, policy=load_policy(job.policy), against=load_policy(job.against))
        for job in jobs
    ]


def replay_chunk(cwd: str, jobs: list[Job]) -> list[Outcome]:
    """One Ray task: replay a chunk of files in order, relative paths from the driver's `cwd`.

    The worker process belongs to this replay's job, so changing its directory touches no one
    else's task.
    """
    try:
        os.chdir(cwd)
        lost = None
    except OSError as exc:
        lost = (
            f"not on node {socket.gethostname()}: the driver's working directory {cwd} is not "
            f"there ({exc.strerror or exc}); every node must see the traces at the driver's paths"
        )
    with fewer_collections():
        return [
            replay_file(job) if lost is None or os.path.isabs(job.path) else _lost(job, lost)
            for job in jobs
        ]


def _lost(job: Job, why: str) -> Outcome:
    return Outcome(job.path, errors=[f"{job.path}: {why}"])


class Window:
    """Tasks in submission order, at most `running` at once and `held` not yet taken back.

    `results` submits a task per item while both bounds allow, waits (`ray.wait`) for any task
    when the oldest is still running, and yields each task's value in submission order: memory
    holds at most `held` results however many items there are.
    """

    def __init__(
        self,
        ray: Any,
        submit: Any,
        running: int,
        held: int,
        check: Callable[[], None] = lambda: None,
        head: Heartbeat | None = None,
    ) -> None:
        self.ray = ray
        self.submit = submit
        self.check = check
        """Called about every `POLL` seconds while waiting; raises to stop the replay."""
        self.head = head
        """The cluster's head, asked whether it still answers when a task fails."""
        self.running = running
        self.held = max(held, running)
        self.order: deque[Any] = deque()
        """Submitted tasks not yet taken back, oldest first."""
        self.busy: set[Any] = set()
        """Submitted tasks not yet seen finished."""
        self.peak_busy = 0
        self.peak_held = 0

    def results(self, items: Iterable[Any]) -> Iterator[Any]:
        """Each item's task value, in the items' order."""
        todo = iter(items)
        try:
            while self._fill(todo) or self.order:
                head = self.order[0]
                if head in self.busy:
                    done, _ = self.ray.wait(list(self.busy), num_returns=1, timeout=POLL)
                    self.busy.difference_update(done)
                    self.check()
                    continue
                self.order.popleft()
                yield self._value(head)
        finally:  # stopped early (a bad file): what is still out is not needed
            for ref in self.order:
                self.ray.cancel(ref)

    def _fill(self, todo: Iterator[Any]) -> bool:
        """Submit while the bounds allow; False once nothing was left to submit."""
        while len(self.busy) < self.running and len(self.order) < self.held:
            item = next(todo, None)
            if item is None:
                return False
            ref = self.submit(item)
            self.order.append(ref)
            self.busy.add(ref)
            self.peak_busy = max(self.peak_busy, len(self.busy))
            self.peak_held = max(self.peak_held, len(self.order))
        return True

    def _value(self, ref: Any) -> Any:
        try:
            return self.ray.get(ref)
        except self.ray.exceptions.RayError as exc:
            raise task_failure(self.ray, exc, self.head) from exc


_LOST = (
    "LocalRayletDiedError",
    "NodeDiedError",
    "WorkerCrashedError",
    "ObjectLostError",
    "RaySystemError",
    "RpcError",
    "GetTimeoutError",
)
"""Ray's errors for a task lost with its node, worker or connection, not failed in its code."""


def task_failure(ray: Any, exc: BaseException, head: Heartbeat | None) -> EngineError:
    """What a replay task's failure means, as the replay's EngineError.

    The task's own code failing (a `RayTaskError`: an import error, another agentfsm on
    the node) asks whether every node has the same agentfsm; a head that no longer
    answers is named as the lost head (it is no installation problem); a node or worker
    lost under the task says so.
    """
    lines = str(exc).strip().splitlines() or [type(exc).__name__]
    said = f"{type(exc).__name__}: {lines[-1]}" if lines[-1] != type(exc).__name__ else lines[-1]
    silence = None if head is None else head.silence()
    if silence is not None and head is not None:
        return EngineError(
            f"--engine ray: lost the Ray cluster's head: its GCS at {head.address} does not "
            f"answer ({silence}), and a replay task failed with it ({said}); the replay "
            "stopped with no answer about the runs: restart the head (ray start --head) and "
            "replay again"
        )
    errors = ray.exceptions
    lost = tuple(getattr(errors, name) for name in _LOST if hasattr(errors, name))
    if isinstance(exc, lost):
        return EngineError(
            f"--engine ray: a replay task was lost with its node or worker ({said}); the "
            "replay stopped with no answer about the runs"
        )
    code = tuple(
        getattr(errors, n) for n in ("RayTaskError", "RuntimeEnvSetupError") if hasattr(errors, n)
    )
    if isinstance(exc, code):
        return EngineError(
            f"--engine ray: a replay task failed on the cluster: {lines[-1]} (is the same "
            "agentfsm installed on every node?)"
        )
    return EngineError(f"--engine ray: a replay task failed on the cluster: {said}")
