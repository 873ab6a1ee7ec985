"""Taking over a dead worker's runs: bounded in time, and saying what it leaves.

DBOS's own recovery call goes through the worker's connection pool and retries a lost
connection or an exhausted pool with no overall deadline: a `recover` that met a full pool
gave no answer, and the dead worker's runs stayed on its id. It also takes over only the
runs of the caller's application version and says nothing of the others.

Here each attempt opens its own connection (a DBOS client with a pool of one, which never
waits for the worker's pool, and raises a connection failure instead of retrying it
forever); `tenacity` retries failed attempts a bounded number of times, then
`recover` raises `RunError` naming the cause. Re-queueing a run is DBOS's own
statement, guarded by the dead worker's id, so an attempt repeated after a failure
never takes over a run twice.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import tenacity
from dbos import DBOSClient
from dbos._error import DBOSException
from dbos._utils import INTERNAL_QUEUE_NAME
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError

from agentfsm.durable._serializer import JsonSerializer
from agentfsm.durable._workflow import WORKFLOW_NAME
from agentfsm.exceptions import DefinitionError, RunError

__all__ = ["RECOVER_ATTEMPTS", "Launched", "RecoveredRuns", "take_over"]

logger = logging.getLogger("agentfsm.durable")

RECOVER_ATTEMPTS = 5
"""Attempts `recover` makes when the database cannot be reached, before it raises RunError."""
RECOVER_WAIT = (0.5, 8.0)
"""The first and the longest wait between two attempts, in seconds (doubling): five attempts
wait at most 0.5 + 1 + 2 + 4 s, plus each attempt's own connect timeout."""
CONNECT_TIMEOUT = 10
"""Seconds a PostgreSQL connection of `recover` may take to open (unless the URL says)."""


@dataclass(frozen=True)
class Launched:
    """The database and version the worker in this process launched with."""

    database_url: str
    name: str
    version: str


class RecoveredRuns(list[str]):
    """The ids of the runs `recover` took over, sorted: a list, as `recover` always returned.

    `waiting` maps each pending run of the dead worker that was *not* taken over to its
    application version: runs recorded by other agents, policies or agentfsm state format,
    which only a worker of that version may run. Take them over from such a worker
    (launched with the code they started with and `other_versions="leave"`) with
    `recover(the dead worker's id)`.
    """

    def __init__(self, taken: list[str], waiting: dict[str, str]) -> None:
        super().__init__(sorted(taken))
        self.waiting = dict(waiting)


Sleep = Callable[[float], None]


def take_over(
    executor_id: str,
    launched: Launched,
    *,
    attempts: int = RECOVER_ATTEMPTS,
    sleep: Sleep | None = None,
) -> RecoveredRuns:
    """Re-queue the pending runs of `executor_id` of `launched.version`; RunError when the
    database does not answer within `attempts` attempts."""
    retrying = tenacity.Retrying(
        stop=tenacity.stop_after_attempt(attempts),
        wait=tenacity.wait_exponential(multiplier=RECOVER_WAIT[0], max=RECOVER_WAIT[1]),
        retry=tenacity.retry_if_exception(_unreachable),
        before_sleep=lambda state: _log_retry(executor_id, state),
        reraise=True,
        sleep=time.sleep if sleep is None else sleep,
    )
    try:
        taken, waiting = retrying(_attempt, executor_id, launched)
    except (SQLAlchemyError, DBOSException, OSError) as exc:
        raise RunError(
            f"recover: could not take over the runs of worker {executor_id!r}: the durable "
            f"database did not answer in {attempts} attempt(s) ({_cause(exc)}); its runs "
            f"stay pending under {executor_id!r}: call recover({executor_id!r}) again",
            executor_id=executor_id,
            attempts=attempts,
        ) from exc
    result = RecoveredRuns(taken, waiting)
    if waiting:
        logger.warning(
            "recover(%r): %d pending run(s) of that worker were recorded under another "
            "application version than this worker's (%s) and were not taken over: %s. "
            "Only a worker of their version may run them: launch one with the agents they "
            "started with (other_versions='leave') and call recover(%r) there "
            "(recover(...).waiting lists them)",
            executor_id,
            len(waiting),
            launched.version,
            ", ".join(f"{run} ({version})" for run, version in sorted(waiting.items())[:10]),
            executor_id,
        )
    return result


def _attempt(executor_id: str, launched: Launched) -> tuple[list[str], dict[str, str]]:
    """One attempt on a connection of its own: the runs re-queued, and those left waiting."""
    with _client(launched) as client:
        found = client.list_workflows(
            status="PENDING",
            executor_id=executor_id,
            name=WORKFLOW_NAME,
            load_input=False,
            load_output=False,
        )
        waiting = {
            w.workflow_id: str(w.app_version or "")
            for w in found
            if w.app_version != launched.version
        }
        ours = [w.workflow_id for w in found if w.app_version == launched.version]
        # DBOS's own recovery statement: it re-queues a run only while it is PENDING under
        # the dead worker's id, so a run a live worker took meanwhile is left alone.
        requeue = _requeue_of(client)
        taken = [run for run in ours if requeue(run, [executor_id], INTERNAL_QUEUE_NAME)]
    return taken, waiting


def _requeue_of(client: DBOSClient) -> Callable[[str, list[str], str], bool]:
    """DBOS's re-queue-for-recovery call on the client's database; fail closed if this DBOS
    release has none (agentfsm[durable] pins the release that does)."""
    system = getattr(client, "_sys_db", None)
    requeue = getattr(system, "reenqueue_for_recovery", None)
    if not callable(requeue):
        raise DefinitionError(
            "recover: this DBOS release has no recovery re-queue call: install the dbos "
            "version pinned by agentfsm[durable]"
        )
    return requeue  # type: ignore[no-any-return]


@contextmanager
def _client(launched: Launched) -> Iterator[DBOSClient]:
    client = DBOSClient(
        system_database_url=_bounded(launched.database_url),
        serializer=JsonSerializer(),
        application_name=launched.name,
        system_database_pool_size=1,
        # A lost connection raises here (and the attempt is retried, a bounded number of
        # times) instead of DBOS's retry without deadline.
        retry_connection_errors=False,
    )
    try:
        yield client
    finally:
        client.destroy()


def _bounded(database_url: str) -> str:
    """`database_url` with a connect timeout, for PostgreSQL when the URL sets none."""
    if not database_url.startswith("postgres"):
        return database_url
    url = make_url(database_url)
    if "connect_timeout" in url.query:
        return database_url
    return url.update_query_dict({"connect_timeout": str(CONNECT_TIMEOUT)}).render_as_string(
        hide_password=False
    )


def _unreachable(exc: BaseException) -> bool:
    """Whether an attempt failed for want of the database (worth another attempt)."""
    return isinstance(exc, SQLAlchemyError | OSError) or (
        isinstance(exc, DBOSException) and isinstance(exc.__cause__, SQLAlchemyError | OSError)
    )


def _cause(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:300]}" if text else type(exc).__name__


def _log_retry(executor_id: str, state: Any) -> None:
    outcome = state.outcome
    failure = outcome.exception() if outcome is not None else None
    logger.warning(
        "recover(%r): attempt %d failed (%s); trying again in %.1f s",
        executor_id,
        state.attempt_number,
        _cause(failure) if failure is not None else "no answer",
        state.next_action.sleep if state.next_action is not None else 0.0,
    )
