"""Durable runs on DBOS Transact: survive a crash, pause for days, never run a tool twice.

Install with `pip install 'agentfsm[durable]'`. Every process that runs or
recovers runs declares the same agents and calls `launch`:

    agent = DurableAgent("support", "openai/gpt-4o-mini", tools=[lookup], policy=policy)
    durable.launch([agent], database_url="sqlite:///runs.sqlite")  # or postgresql://...
    run_id = durable.start("support", [{"role": "user", "content": "..."}])
    durable.status(run_id)            # "waiting_for_human" once the run asks
    question = durable.asked(run_id)  # {"question": "<run id>/q1", "tool_calls": [...], ...}
    durable.reply(run_id, approved=True, question=question["question"])
    durable.result(run_id)            # a DurableResult

Each model call and each tool call is a DBOS step, recorded once in the
database; after a crash, `launch` in any process on the same database
recovers the runs: recorded steps are not run again, and the Controller,
rebuilt from the recorded outputs, makes the same decisions. A run waiting
for a human holds no thread: it is a coroutine waiting on `DBOS.recv_async`.

A tool call killed while it ran (its side effect done, its result not yet
recorded) is where "never twice" needs the tool's help, so each tool declares it:
- idempotent (`@tool(idempotent=True)` from agentfsm._runner.executor, or
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

A front end that only starts runs, answers them and reads them uses
`Client(database_url)` instead: it declares no agents and runs nothing (its
runs go on a queue every worker takes runs from).

The application version DBOS records is `app_version(agents)`: agentfsm's
state and event formats plus a digest of the agents' models, tools and
policies. Only workers of a run's version run it, so by default `launch`
refuses to start while runs of another version are pending
(`StrandedRunsError`) instead of leaving them silently unrecovered; an upgrade
launches the new workers with `other_versions="leave"` and keeps workers of the
old version until their runs end (`Client.pending()` lists them by version).

A policy's `max_seconds` counts the run's wall time from its start, across
recoveries (a crash's downtime and a wait for a human included): the time
before each input is a recorded step, so a recovery replays the times the
first pass read and decides exactly as it did.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Iterable, Mapping, Sequence
from contextlib import nullcontext
from typing import Any, Literal

try:
    from dbos import DBOS, DBOSConfig, SetWorkflowID
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "agentfsm.durable needs DBOS Transact: pip install 'agentfsm[durable]'"
    ) from exc

from agentfsm import _public
from agentfsm._model._checked import read
from agentfsm._model._errors import at_call as _at_call
from agentfsm.durable import _runs
from agentfsm.durable._client import Client, history_of
from agentfsm.durable._data import check_text
from agentfsm.durable._recovery import Launched, RecoveredRuns, take_over
from agentfsm.durable._registry import DurableAgent, Progress, agent_named, app_version, register
from agentfsm.durable._runs import DurableResult, RunStatus
from agentfsm.durable._serializer import JsonSerializer, refuse_pickles
from agentfsm.durable._workflow import (
    HUMAN_TOPIC,
    INTERRUPTED,
    RUNS_QUEUE,
    WORKFLOW_NAME,
    agent_run,
    idempotency_key,
    load_litellm,
)
from agentfsm.exceptions import (
    CheckpointError,
    DefinitionError,
    InvalidInputError,
    RunError,
)

__all__ = [
    "HUMAN_TOPIC",
    "INTERRUPTED",
    "Client",
    "DurableAgent",
    "DurableResult",
    "OtherVersions",
    "Progress",
    "RecoveredRuns",
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


class StrandedRunsError(CheckpointError):
    """Runs recorded under another application version are pending: this process would not
    recover them. `details["runs"]` maps each run id to its version."""


OtherVersions = Literal["refuse", "leave"]
"""What `launch` does about pending runs of other application versions (see `launch`)."""


@_at_call
def launch(
    agents: Iterable[DurableAgent],
    *,
    database_url: str = "sqlite:///agentfsm-runs.sqlite",
    name: str = "agentfsm",
    executor_id: str | None = None,
    config: Mapping[str, Any] | None = None,
    other_versions: OtherVersions = "refuse",
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
        other_versions: Pending runs recorded under another application version (other
            agents, policies or agentfsm state format) are never run by this process.
            `"refuse"` (the default): raise `StrandedRunsError` rather than leave them
            unnoticed. `"leave"`: start anyway and leave them to workers of their version
            (a rolling upgrade: old workers finish old runs while new ones take new runs).

    Returns:
        The application version runs are recorded under.

    Raises:
        StrandedRunsError: pending runs of another version exist and `other_versions` is
            `"refuse"`.
    """
    settings = _settings(database_url, name, executor_id, config, other_versions)
    listed = register(agents)
    version = app_version(listed)
    refuse_pickles()
    if other_versions == "refuse":
        # Before DBOS.launch, which would record this version as the newest one: a refused
        # deploy must not take new runs away from the workers that keep running.
        _refuse_others(_pending_others(version, database_url, name), version)
    load_litellm()  # seconds to import: pay it at launch, not inside the first run's first step
    DBOS(config=DBOSConfig(**{"application_version": version, **settings}))  # type: ignore[typeddict-item]
    DBOS.launch()
    if other_versions == "refuse":
        try:
            _refuse_others(_pending_others(version), version)
        except StrandedRunsError:
            DBOS.destroy()
            raise
    DBOS.register_queue(RUNS_QUEUE, polling_interval_sec=_QUEUE_POLL)
    global _LAUNCHED
    _LAUNCHED = Launched(database_url, settings["name"], version)
    return version


_LAUNCHED: Launched | None = None
"""The database and version of the worker launched in this process, for `recover`."""


_QUEUE_POLL = 0.5
"""Seconds between a worker's looks at the queue for runs a `Client` started."""


def _settings(
    database_url: object,
    name: object,
    executor_id: object,
    config: object,
    other_versions: object,
) -> dict[str, Any]:
    """`launch`'s arguments checked, as DBOSConfig entries (all but the version)."""
    for field, value in (("database_url", database_url), ("name", name)):
        check_text(value, "launch", field, DefinitionError)
    if config is not None and not isinstance(config, Mapping):
        raise DefinitionError(f"launch: config must be a mapping, not {type(config).__name__}")
    if executor_id is not None:
        check_text(executor_id, "launch", "executor_id", DefinitionError)
    # A str first: `in` would call the value's own __eq__, which may raise.
    if not isinstance(other_versions, str) or other_versions not in ("refuse", "leave"):
        raise DefinitionError(
            f"launch: other_versions must be 'refuse' or 'leave', not {other_versions!r}"
        )
    extra: dict[Any, Any] = read(
        "launch: config", DefinitionError, lambda: {} if config is None else dict(config)
    )
    if any(type(key) is not str for key in extra):
        raise DefinitionError("launch: config's keys must be DBOSConfig entry names (str)")
    if "executor_id" in extra:
        raise DefinitionError("launch: pass executor_id=..., not config={'executor_id': ...}")
    if "serializer" in extra:
        raise DefinitionError(
            "launch: config may not set 'serializer': agentfsm stores its steps as JSON, "
            "and any other format could run code from an edited database"
        )
    settings: dict[str, Any] = {
        "name": name,
        "system_database_url": database_url,
        "log_level": "WARNING",
        **extra,
        "serializer": JsonSerializer(),
    }
    if executor_id is not None:
        settings["executor_id"] = executor_id
    return settings


def _pending_others(
    version: str, database_url: str | None = None, name: str | None = None
) -> dict[str, str]:
    """Pending runs of versions other than `version`: through a client before DBOS is
    launched (none when the database has no tables yet), else through the launched DBOS."""
    if database_url is None:
        found = DBOS.list_workflows(
            status=["PENDING", "ENQUEUED"], name=WORKFLOW_NAME, load_input=False, load_output=False
        )
        return {
            w.workflow_id: str(w.app_version)
            for w in found
            if w.app_version and w.app_version != version
        }
    quiet = _QuietDBOS()
    logging.getLogger("dbos").addFilter(quiet)
    try:
        client = Client(database_url, name=name or "agentfsm")
    except RunError:
        return {}  # a database DBOS has not created yet: checked again once it is launched
    finally:
        logging.getLogger("dbos").removeFilter(quiet)
    try:
        return {k: v for k, v in client.pending().items() if v and v != version}
    except RunError:
        return {}
    finally:
        client.close()


class _QuietDBOS(logging.Filter):
    """Leaves out DBOS's error that the database does not exist yet (`launch` creates it)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "Error connecting to the DBOS system database" not in record.getMessage()


def _refuse_others(stranded: Mapping[str, str], version: str) -> None:
    if not stranded:
        return
    raise StrandedRunsError(
        f"{len(stranded)} pending run(s) were recorded under another application version "
        f"than {version!r} (agents, policies or agentfsm's state format changed): "
        f"{sorted(stranded.items())[:5]}. This process would never run them. Either keep "
        "workers of their version running until they end (Client(...).pending() lists them) "
        "and launch this one with other_versions='leave', or launch with the agents they "
        "started with",
        runs=dict(stranded),
    )


@_at_call
def recover(executor_id: str) -> RecoveredRuns:
    """Take over the pending runs of the worker `executor_id`, which is gone for good.

    DBOS recovers a worker's runs only when a worker with the same executor id launches;
    when that worker will not come back, call this from a live worker: the runs are queued
    again and continue (from their last recorded step) in a worker of this database.
    Never call it for a worker that is still running: its runs would run in two places.
    Calling it twice, or from two workers, takes each run over once.

    Only the runs of this worker's application version are taken over. The dead worker's
    runs of other versions are listed in the result's `waiting` (run id -> version) and
    in a warning on the `agentfsm.durable` logger: launch a worker of their version
    (`other_versions="leave"`) and call `recover` from it.

    It answers within a bound: it uses a database connection of its own (never waiting
    for the worker's pool), and when the database cannot be reached it tries
    five times, waiting 0.5 s, 1 s, 2 s, 4 s between attempts, then raises.

    Returns:
        The ids of the runs taken over, sorted (a `RecoveredRuns`: a list of str, with
        `waiting`).

    Raises:
        InvalidInputError: `executor_id` is not a non-empty str.
        RunError: no `launch` in this process, or the database did not answer; the runs
            stay pending under `executor_id`, and calling `recover` again is safe.
    """
    if not isinstance(executor_id, str) or not executor_id:
        raise InvalidInputError(
            f"recover: executor_id must be a non-empty str, not {executor_id!r}"
        )
    check_text(executor_id, "recover", "executor_id")
    launched = _LAUNCHED
    if launched is None:
        raise RunError(f"recover: no worker runs in this process ({_HERE.hint})")
    return take_over(executor_id, launched)


@_at_call
def shutdown() -> None:
    """Stop DBOS in this process; pending runs stay in the database for the next `launch`."""
    global _LOOP, _LAUNCHED
    _LAUNCHED = None
    with _LOOP_LOCK:
        loop, _LOOP = _LOOP, None
    if loop is not None and loop.is_running():
        # The runs still on the loop (waiting for a human or a model) are cancelled and
        # awaited while DBOS is up: DBOS lets a cancelled run pass without recording it, so
        # it stays pending for the next launch. Left to the garbage collector instead, each
        # run's coroutine would be closed later on some other thread, with no DBOS context
        # and no loop, and fail there.
        stopping = asyncio.run_coroutine_threadsafe(_cancel_runs(), loop)
        try:
            stopping.result(timeout=_SHUTDOWN_WAIT)
        except TimeoutError:
            stopping.cancel()
        loop.call_soon_threadsafe(loop.stop)
    DBOS.destroy()


# How long shutdown waits for the cancelled runs to unwind (a tool running in a thread is
# not waited for: its run is cancelled where it awaits the thread).
_SHUTDOWN_WAIT = 10.0


async def _cancel_runs() -> None:
    """Cancel every run on this loop and wait until each has unwound."""
    runs = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
    for task in runs:
        task.cancel()
    await asyncio.gather(*runs, return_exceptions=True)


@_at_call
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
        _runs.checked_id(run_id, "start")
    history = history_of(messages, "start")

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
            threading.Thread(
                target=_serve, args=(_LOOP,), name="agentfsm-durable", daemon=True
            ).start()
        return _LOOP


def _serve(loop: asyncio.AbstractEventLoop) -> None:
    """The loop thread: run until `shutdown` stops the loop, then close it."""
    try:
        loop.run_forever()
    finally:
        loop.close()


class _InProcess:
    """Runs read through the DBOS launched in this process."""

    hint = "call agentfsm.durable.launch(...) first in this process"

    def state(self, run_id: str) -> str | None:
        found = DBOS.get_workflow_status(run_id)
        return None if found is None else str(found.status)

    def event(self, run_id: str, key: str) -> Any:
        return DBOS.get_event(run_id, key, timeout_seconds=0)

    def send(self, run_id: str, message: Any, topic: str) -> None:
        DBOS.send(run_id, message, topic=topic)

    def output(self, run_id: str) -> Any:
        return DBOS.retrieve_workflow(run_id).get_result()


_HERE = _InProcess()


@_at_call
def status(run_id: str) -> RunStatus:
    """Where a run is: queued, running, waiting for a human, done, failed or cancelled."""
    return _runs.status(_HERE, run_id)


@_at_call
def asked(run_id: str) -> dict[str, Any] | None:
    """What a run waiting for a human asks, or None.

    A dict: `question` (its id, `<run id>/q<n>`, to give to `reply`), `turn`, `reason`,
    `tool_calls` (the calls it asks about, each with its id, name and arguments) and
    `scopes` (what `reply(remember=)` takes for them, for a host to offer).
    """
    return _runs.asked(_HERE, run_id)


@_at_call
def reply(
    run_id: str,
    approved: bool,
    message: str | None = None,
    *,
    question: str | None = None,
    remember: str | Mapping[str, Any] | None = None,
) -> None:
    """Answer `question`, which the run must be asking now; it resumes where it is held.

    With `remember` (a scope: `"uses=N"`, `"seconds=T"`, `"run"`, `"conversation"`, or
    `{"scope": ..., "pattern": ...}`, docs/approvals.md) an approval also holds for the
    later calls it covers, stored with the run and never covering a deny.

    A reply names the question it answers (`question=asked(run_id)["question"]`): an
    approval given for one question never approves another. A question that was answered
    or declined when the run's `human_timeout` ran out, and everything the run asked
    before it, are gone: a reply to one is refused and nothing is sent. A reply that
    crosses the run moving on (sent as its wait ends) reaches it and is dropped there.
    Without `question=` the reply is refused (it was optional before: that reply approved
    whatever the run asked when it arrived).

    Raises:
        InvalidInputError: no `question`, the run does not exist, waits for no human, or
            asks another question now.
    """
    _runs.reply(_HERE, run_id, question, approved, message, remember)


@_at_call
def result(run_id: str, *, timeout: float | None = None) -> DurableResult:
    """Wait for a run to end and return its result.

    Raises:
        RunError: the run failed, or did not end within `timeout` seconds.
        CheckpointError: the run's record in the database was edited (it names the run).
    """
    return _runs.result(_HERE, run_id, timeout)


_public.publish(__name__, globals(), __all__)
