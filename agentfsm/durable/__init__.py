"""Durable runs on DBOS Transact: survive a crash, pause for days, never run a tool twice.

Install with `pip install 'agentfsm[durable]'`. Every process that runs or
recovers runs declares the same agents and calls `launch`:

    agent = DurableAgent("support", "openai/gpt-4o-mini", tools=[lookup], policy=policy)
    durable.launch([agent], database_url="sqlite:///runs.sqlite")  # or postgresql://...
    run_id = durable.start("support", [{"role": "user", "content": "..."}])
    durable.status(run_id)            # "waiting_for_human" once the run asks
    durable.reply(run_id, approved=True)
    durable.result(run_id)            # a DurableResult

Each model call and each tool call is a DBOS step, recorded once in the
database; after a crash, `launch` in any process on the same database
recovers the runs: recorded steps are not run again, and the Controller,
rebuilt from the recorded outputs, makes the same decisions. A run waiting
for a human holds no thread: it is a coroutine waiting on `DBOS.recv_async`.

A tool call killed while it ran (its side effect done, its result not yet
recorded) is where "never twice" needs the tool's help, so each tool declares it:
- idempotent (`@tool(idempotent=True)` from agentfsm.runner.executor, or
  `DurableAgent(options={name: ToolOptions(idempotent=True)})`): a recovered
  run may run it again; `idempotency_key()` inside the tool gives the same key
  (`<run id>:<turn>:<call id>`) on every run of the call, for the API behind it;
- anything else runs at most once: the calls of a batch are recorded as started
  (a committed step) before any runs, and a recovered run that finds one started
  but without a recorded result does not run it: its result is an error saying
  the call was interrupted and may or may not have taken effect.
Before any call runs, the run's Controller is asked `may_run(call id, name,
arguments)`; a call it does not clear never runs.

The database holds JSON only (`_serializer`): a row edited to hold anything
else, a pickle included, raises `CheckpointError` naming the run; no code in
the database is ever run.

The application version DBOS records is `app_version(agents)`: agentfsm's
state and event formats plus a digest of the agents' models, tools and
policies. DBOS recovers only runs of the current version, so `launch` refuses
to start while runs of another version are pending (`StrandedRunsError`)
instead of leaving them silently unrecovered.

A policy's `max_seconds` counts the run's wall time from its start, across
recoveries (a crash's downtime and a wait for a human included): the time
before each input is a recorded step, so a recovery replays the times the
first pass read and decides exactly as it did.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from typing import Any, Literal

from pydantic import ConfigDict

from agentfsm.core._checked import Checked, check_number

try:
    from dbos import DBOS, DBOSConfig, SetWorkflowID
    from dbos._error import DBOSException
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "agentfsm.durable needs DBOS Transact: pip install 'agentfsm[durable]'"
    ) from exc

from agentfsm.core.types import Decision, ExitReason
from agentfsm.durable._registry import DurableAgent, Progress, agent_named, app_version, register
from agentfsm.durable._serializer import (
    JsonSerializer,
    RecordedError,
    failure_text,
    refuse_pickles,
)
from agentfsm.durable._workflow import (
    HUMAN_TOPIC,
    INTERRUPTED,
    WAITING_KEY,
    WORKFLOW_NAME,
    agent_run,
    idempotency_key,
    load_litellm,
)
from agentfsm.exceptions import (
    AgentFSMError,
    CheckpointError,
    DefinitionError,
    InvalidInputError,
    RunError,
)

__all__ = [
    "HUMAN_TOPIC",
    "INTERRUPTED",
    "DurableAgent",
    "DurableResult",
    "Progress",
    "RunStatus",
    "StrandedRunsError",
    "app_version",
    "asked",
    "idempotency_key",
    "launch",
    "recover",
    "reply",
    "result",
    "shutdown",
    "start",
    "status",
]

RunStatus = Literal["running", "waiting_for_human", "done", "failed", "cancelled"]


class StrandedRunsError(CheckpointError):
    """Runs recorded under another application version are pending: this process would not
    recover them. `details["runs"]` maps each run id to its version."""


class DurableResult(Checked):
    """How a durable run ended: the same fields whether or not it was interrupted."""

    model_config = ConfigDict(frozen=True)

    run_id: str
    """The run's id (its DBOS workflow id)."""
    exit_reason: ExitReason
    """Why the run ended."""
    text: str
    """The last answer text the model gave."""
    turns: int
    """Model outputs the run used."""
    error: str | None = None
    """The provider failure that ended the run, if any."""
    decisions: list[Decision]
    """Every decision the Controller made, in order."""
    messages: list[dict[str, Any]]
    """The conversation as the model last saw it, plus the final answer's round."""
    events: list[dict[str, Any]]
    """The Controller's events: the run's trace."""


def launch(
    agents: Iterable[DurableAgent],
    *,
    database_url: str = "sqlite:///agentfsm-runs.sqlite",
    name: str = "agentfsm",
    executor_id: str | None = None,
    config: Mapping[str, Any] | None = None,
) -> str:
    """Declare `agents`, start DBOS on `database_url`, and recover this worker's runs.

    Args:
        agents: Every agent whose runs this process starts or recovers.
        database_url: `sqlite:///<file>` (embedded, the default) or `postgresql://...`.
        name: The DBOS application name.
        executor_id: This worker's stable identity (DBOS's executor id; by default
            `$DBOS__VMID` or `"local"`). Runs are recorded under it, and `launch` recovers
            the pending runs recorded under it: give each worker of a database its own id,
            the same across restarts (a host or pod name). The runs of a worker that is
            gone for good are taken over with `recover(its id)`.
        config: More `DBOSConfig` entries, applied last; not `serializer` (the database
            holds agentfsm's JSON only) nor `executor_id` (the argument above).

    Returns:
        The application version runs are recorded under.

    Raises:
        StrandedRunsError: pending runs of another application version exist.
    """
    for field, value in (("database_url", database_url), ("name", name)):
        if not isinstance(value, str) or not value:
            raise DefinitionError(f"launch: {field} must be a non-empty str, not {value!r}")
    if config is not None and not isinstance(config, Mapping):
        raise DefinitionError(f"launch: config must be a mapping, not {type(config).__name__}")
    if executor_id is not None and (not isinstance(executor_id, str) or not executor_id):
        raise DefinitionError(f"launch: executor_id must be a non-empty str, not {executor_id!r}")
    if config is not None and "executor_id" in config:
        raise DefinitionError("launch: pass executor_id=..., not config={'executor_id': ...}")
    if config is not None and "serializer" in config:
        raise DefinitionError(
            "launch: config may not set 'serializer': agentfsm stores its steps as JSON, "
            "and any other format could run code from an edited database"
        )
    listed = register(agents)
    version = app_version(listed)
    load_litellm()  # seconds to import: pay it at launch, not inside the first run's first step
    settings: dict[str, Any] = {
        "name": name,
        "system_database_url": database_url,
        "application_version": version,
        "log_level": "WARNING",
        **(config or {}),
        "serializer": JsonSerializer(),
    }
    if executor_id is not None:
        settings["executor_id"] = executor_id
    refuse_pickles()
    DBOS(config=DBOSConfig(**settings))  # type: ignore[typeddict-item]
    DBOS.launch()
    stranded = {
        w.workflow_id: str(w.app_version)
        for w in DBOS.list_workflows(
            status="PENDING", name=WORKFLOW_NAME, load_input=False, load_output=False
        )
        if w.app_version != version
    }
    if stranded:
        DBOS.destroy()
        raise StrandedRunsError(
            f"{len(stranded)} pending run(s) were recorded under another application version "
            f"than {version!r} (agents, policies or agentfsm's state format changed): "
            f"{sorted(stranded.items())[:5]}; launch them with the agents they started with",
            runs=stranded,
        )
    return version


def recover(executor_id: str) -> list[str]:
    """Take over the pending runs of the worker `executor_id`, which is gone for good.

    DBOS recovers a worker's runs only when a worker with the same executor id launches;
    when that worker will not come back, call this from a live worker: the runs are queued
    again and continue (from their last recorded step) in a worker of this database.
    Never call it for a worker that is still running: its runs would run in two places.

    Returns:
        The ids of the runs taken over.
    """
    if not isinstance(executor_id, str) or not executor_id:
        raise InvalidInputError(
            f"recover: executor_id must be a non-empty str, not {executor_id!r}"
        )
    try:
        # The call DBOS's own recovery endpoint makes; it re-queues, so one worker claims each run.
        handles = DBOS._recover_pending_workflows([executor_id])
    except DBOSException as exc:
        raise _dbos_failed("recover", exc) from exc
    return sorted(h.get_workflow_id() for h in handles)


def shutdown() -> None:
    """Stop DBOS in this process; pending runs stay in the database for the next `launch`."""
    global _LOOP
    DBOS.destroy()
    with _LOOP_LOCK:
        loop, _LOOP = _LOOP, None
    if loop is not None:
        loop.call_soon_threadsafe(loop.stop)


def start(
    agent: str | DurableAgent,
    messages: str | Sequence[Mapping[str, Any]],
    *,
    run_id: str | None = None,
) -> str:
    """Start a run of a declared agent; returns its run id (starting an id twice is one run)."""
    if isinstance(agent, DurableAgent):
        name = agent.name
    elif isinstance(agent, str):
        name = agent
    else:
        raise InvalidInputError(f"start: agent must be a name or a DurableAgent, not {agent!r}")
    agent_named(name)
    if run_id is not None:
        _checked_id(run_id, "start")
    if isinstance(messages, str):
        messages = [{"role": "user", "content": messages}]
    wrong = InvalidInputError(
        "start: messages must be a str or a list of message mappings ({'role', 'content'})"
    )
    if not isinstance(messages, Sequence):
        raise wrong
    history = [dict(m) for m in messages if isinstance(m, Mapping)]
    if len(history) != len(messages):
        raise wrong

    async def begin() -> str:
        with SetWorkflowID(run_id) if run_id is not None else nullcontext():
            handle = await DBOS.start_workflow_async(agent_run, name, history)
        return handle.get_workflow_id()

    # The run becomes a task on one event loop: a run (paused or not) holds no thread.
    # DBOS.start_workflow from this thread would park a pool thread on every run.
    return asyncio.run_coroutine_threadsafe(begin(), _runs_loop()).result()


_LOOP: asyncio.AbstractEventLoop | None = None
_LOOP_LOCK = threading.Lock()


def _runs_loop() -> asyncio.AbstractEventLoop:
    """The event loop the runs this process starts live on (one daemon thread)."""
    global _LOOP
    with _LOOP_LOCK:
        if _LOOP is None or _LOOP.is_closed():
            _LOOP = asyncio.new_event_loop()
            threading.Thread(target=_LOOP.run_forever, name="agentfsm-durable", daemon=True).start()
        return _LOOP


def _checked_id(run_id: object, where: str) -> str:
    """A run id as given to `where`: a non-empty str, or InvalidInputError."""
    if not isinstance(run_id, str) or not run_id:
        raise InvalidInputError(f"{where}: run_id must be a non-empty str, not {run_id!r}")
    return run_id


def _dbos_failed(where: str, exc: DBOSException) -> RunError:
    """DBOS's own error (e.g. no `launch` in this process yet) as a RunError."""
    return RunError(f"{where}: {exc} (call agentfsm.durable.launch(...) first in this process)")


def _edited(run_id: str, why: str) -> CheckpointError:
    return CheckpointError(
        f"durable run {run_id!r} cannot be read from the database: {why}", run_id=run_id
    )


@contextmanager
def _reading(run_id: str, where: str) -> Iterator[None]:
    """Read a run through DBOS: an unreadable record is a CheckpointError naming the run."""
    try:
        yield
    except CheckpointError as exc:
        raise _edited(run_id, exc.message) from None
    except DBOSException as exc:
        raise _dbos_failed(where, exc) from exc


def status(run_id: str) -> RunStatus:
    """Where a run is: running, waiting for a human, done, failed or cancelled."""
    _checked_id(run_id, "status")
    with _reading(run_id, "status"):
        found = DBOS.get_workflow_status(run_id)
    if found is None:
        raise InvalidInputError(f"no durable run {run_id!r} in this database", run_id=run_id)
    state = found.status
    if state == "SUCCESS":
        return "done"
    if state in ("ERROR", "MAX_RECOVERY_ATTEMPTS_EXCEEDED"):
        return "failed"
    if state == "CANCELLED":
        return "cancelled"
    with _reading(run_id, "status"):
        asked = DBOS.get_event(run_id, WAITING_KEY, timeout_seconds=0)
    return "waiting_for_human" if asked else "running"


def asked(run_id: str) -> dict[str, Any] | None:
    """What a run waiting for a human asks (turn, reason, tool calls), or None."""
    _checked_id(run_id, "asked")
    with _reading(run_id, "asked"):
        value = DBOS.get_event(run_id, WAITING_KEY, timeout_seconds=0)
    return value if isinstance(value, dict) else None


def reply(run_id: str, approved: bool, message: str | None = None) -> None:
    """Answer the question a run waits on; it resumes in the process that holds it.

    Raises:
        InvalidInputError: the run does not exist or is not waiting for a human.
    """
    _checked_id(run_id, "reply")
    # Only True approves: a reply of "no" or 0 must never run the calls it answers.
    if not isinstance(approved, bool):
        raise InvalidInputError(f"reply: approved must be True or False, not {approved!r}")
    if message is not None and not isinstance(message, str):
        raise InvalidInputError(f"reply: message must be a str or None, not {message!r}")
    question = asked(run_id) if status(run_id) == "waiting_for_human" else None
    if question is None:
        raise InvalidInputError(
            f"run {run_id!r} is not waiting for a human (it is {status(run_id)})", run_id=run_id
        )
    answer = {"turn": question["turn"], "approved": approved, "message": message}
    DBOS.send(run_id, answer, topic=HUMAN_TOPIC)


def result(run_id: str, *, timeout: float | None = None) -> DurableResult:
    """Wait for a run to end and return its result.

    Raises:
        RunError: the run failed, or did not end within `timeout` seconds.
        CheckpointError: the run's record in the database was edited (it names the run).
    """
    _checked_id(run_id, "result")
    if timeout is not None:
        check_number("result", "timeout", timeout, minimum=0, error=InvalidInputError)
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        now = status(run_id)
        if now == "done":
            return _ended(run_id)
        if now == "failed":
            raise _failure(run_id)
        if now == "cancelled":
            raise RunError(f"durable run {run_id!r} was cancelled", run_id=run_id)
        if deadline is not None and time.monotonic() > deadline:
            raise RunError(
                f"durable run {run_id!r} did not end within {timeout}s (it is {now})",
                run_id=run_id,
            )
        time.sleep(0.05)


def _ended(run_id: str) -> DurableResult:
    """The recorded result of a run that ended."""
    with _reading(run_id, "result"):
        output: Any = DBOS.retrieve_workflow(run_id).get_result()
    try:
        return DurableResult.model_validate(output)
    except (AgentFSMError, ValueError) as exc:
        raise _edited(run_id, f"its result is not a result agentfsm wrote ({exc})") from None


def _failure(run_id: str) -> RunError:
    """Why a run failed: an edited record is a CheckpointError naming the run."""
    try:
        with _reading(run_id, "result"):
            DBOS.retrieve_workflow(run_id).get_result()
    except CheckpointError as exc:
        return exc
    except RecordedError as exc:
        if exc.kind == CheckpointError.__name__:
            return _edited(run_id, exc.message)
        return RunError(f"durable run {run_id!r} failed: {failure_text(exc)}", run_id=run_id)
    except Exception as exc:  # what DBOS raises for a run it gave up on
        return RunError(f"durable run {run_id!r} failed: {failure_text(exc)}", run_id=run_id)
    return RunError(f"durable run {run_id!r} failed", run_id=run_id)
