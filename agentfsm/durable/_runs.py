"""Reading and answering runs, the same way from a worker (DBOS) and from a client (DBOSClient).

A worker reads runs through the launched DBOS in its process; a `Client` reads the
same database through DBOS's client, which runs nothing. Both go through a
`Backend`, so a status, a question, a reply and a result mean the same from both.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal, Protocol

from dbos._error import DBOSException
from pydantic import ConfigDict
from sqlalchemy.exc import SQLAlchemyError

from agentfsm._model._checked import Checked, check_number
from agentfsm._model.types import Decision, ExitReason
from agentfsm.durable._data import check_text
from agentfsm.durable._serializer import RecordedError, failure_text
from agentfsm.durable._workflow import HUMAN_TOPIC, WAITING_KEY
from agentfsm.exceptions import AgentFSMError, CheckpointError, InvalidInputError, RunError
from agentfsm.states._approvals import scope_of

__all__ = ["Backend", "DurableResult", "RunStatus"]

RunStatus = Literal["queued", "running", "waiting_for_human", "done", "failed", "cancelled"]


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


class Backend(Protocol):
    """What reading and answering a run needs from DBOS or from a DBOS client."""

    hint: str
    """What to do when DBOS itself fails (e.g. no `launch` in this process)."""

    def state(self, run_id: str) -> str | None:
        """The run's DBOS status (`PENDING`, `SUCCESS`...), or None when there is no such run."""

    def event(self, run_id: str, key: str) -> Any:
        """The run's event `key` now, or None."""

    def send(self, run_id: str, message: Any, topic: str) -> None:
        """Send `message` to the run on `topic`."""

    def output(self, run_id: str) -> Any:
        """The ended run's recorded output (raises its recorded failure)."""


def checked_id(run_id: object, where: str) -> str:
    """A run id as given to `where`: a non-empty str UTF-8 encodes, or InvalidInputError."""
    return check_text(run_id, where, "run_id")


def dbos_failed(where: str, exc: Exception, hint: str) -> RunError:
    """DBOS's own error (e.g. no `launch` in this process yet) as a RunError."""
    return RunError(f"{where}: {exc} ({hint})")


def edited(run_id: str, why: str) -> CheckpointError:
    return CheckpointError(
        f"durable run {run_id!r} cannot be read from the database: {why}", run_id=run_id
    )


@contextmanager
def reading(run_id: str, where: str, hint: str) -> Iterator[None]:
    """Read a run through DBOS: an unreadable record is a CheckpointError naming the run."""
    try:
        yield
    except CheckpointError as exc:
        raise edited(run_id, exc.message) from None
    except (DBOSException, SQLAlchemyError) as exc:  # SQLAlchemy's: e.g. no tables yet
        raise dbos_failed(where, exc, hint) from exc


_ENDED: dict[str, RunStatus] = {
    "SUCCESS": "done",
    "ERROR": "failed",
    "MAX_RECOVERY_ATTEMPTS_EXCEEDED": "failed",
    "CANCELLED": "cancelled",
    "ENQUEUED": "queued",
    "DELAYED": "queued",
}


def status(backend: Backend, run_id: str) -> RunStatus:
    """Where a run is: queued, running, waiting for a human, done, failed or cancelled."""
    checked_id(run_id, "status")
    with reading(run_id, "status", backend.hint):
        state = backend.state(run_id)
    if state is None:
        raise InvalidInputError(f"no durable run {run_id!r} in this database", run_id=run_id)
    if state in _ENDED:
        return _ENDED[state]
    with reading(run_id, "status", backend.hint):
        question = backend.event(run_id, WAITING_KEY)
    return "waiting_for_human" if question else "running"


def asked(backend: Backend, run_id: str) -> dict[str, Any] | None:
    """What a run waiting for a human asks (question id, turn, reason, tool calls), or None."""
    checked_id(run_id, "asked")
    with reading(run_id, "asked", backend.hint):
        value = backend.event(run_id, WAITING_KEY)
    return value if isinstance(value, dict) else None


def reply(
    backend: Backend,
    run_id: str,
    question: object,
    approved: bool,
    message: str | None,
    remember: object = None,
) -> None:
    """Answer `question`, which the run asks now; InvalidInputError (nothing sent) otherwise."""
    if remember is not None:  # checked here, so the run never reads a scope it cannot take
        scope_of(remember, "reply: remember")
        remember = json.loads(json.dumps(remember))
    checked_id(run_id, "reply")
    # Only True approves: a reply of "no" or 0 must never run the calls it answers.
    if not isinstance(approved, bool):
        raise InvalidInputError(f"reply: approved must be True or False, not {approved!r}")
    if message is not None and not isinstance(message, str):
        raise InvalidInputError(f"reply: message must be a str or None, not {message!r}")
    if message:  # the run reads it back from the database, as UTF-8 text
        check_text(message, "reply", "message")
    if question is None:
        raise InvalidInputError(
            "reply: name the question you answer: reply(run_id, approved, "
            "question=asked(run_id)['question']); a reply without it could approve "
            "whatever the run asks when it arrives",
            run_id=run_id,
        )
    if not isinstance(question, str) or not question:
        raise InvalidInputError(
            f"reply: question must be the question's id from asked(), not {question!r}"
        )
    check_text(question, "reply", "question")
    now = status(backend, run_id)
    waiting = asked(backend, run_id) if now == "waiting_for_human" else None
    if waiting is None:
        raise InvalidInputError(
            f"run {run_id!r} is not waiting for a human (it is {now}): the reply to "
            f"{question!r} was not sent",
            run_id=run_id,
        )
    if waiting.get("question") != question:
        raise InvalidInputError(
            f"run {run_id!r} does not ask {question!r} now (it asks "
            f"{waiting.get('question')!r}): that question was answered or timed out, and "
            "the reply was not sent; read asked(run_id) and answer what it asks",
            run_id=run_id,
        )
    # The run checks the id again: a reply that crosses the run moving on is dropped there.
    answer = {"question": question, "approved": approved, "message": message}
    if remember is not None:
        answer["remember"] = remember
    with reading(run_id, "reply", backend.hint):
        backend.send(run_id, answer, HUMAN_TOPIC)


def result(backend: Backend, run_id: str, timeout: float | None) -> DurableResult:
    """Wait for a run to end and return its result (RunError if it failed or took too long)."""
    checked_id(run_id, "result")
    if timeout is not None:
        check_number("result", "timeout", timeout, minimum=0, error=InvalidInputError)
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        now = status(backend, run_id)
        if now == "done":
            return _ended(backend, run_id)
        if now == "failed":
            raise _failure(backend, run_id)
        if now == "cancelled":
            raise RunError(f"durable run {run_id!r} was cancelled", run_id=run_id)
        if deadline is not None and time.monotonic() > deadline:
            raise RunError(
                f"durable run {run_id!r} did not end within {timeout}s (it is {now})",
                run_id=run_id,
            )
        time.sleep(0.05)


def _ended(backend: Backend, run_id: str) -> DurableResult:
    """The recorded result of a run that ended."""
    with reading(run_id, "result", backend.hint):
        output: Any = backend.output(run_id)
    try:
        return DurableResult.model_validate(output)
    except (AgentFSMError, ValueError) as exc:
        raise edited(run_id, f"its result is not a result agentfsm wrote ({exc})") from None


def _failure(backend: Backend, run_id: str) -> RunError:
    """Why a run failed: an edited record is a CheckpointError naming the run."""
    try:
        with reading(run_id, "result", backend.hint):
            backend.output(run_id)
    except CheckpointError as exc:
        return exc
    except RecordedError as exc:
        if exc.kind == CheckpointError.__name__:
            return edited(run_id, exc.message)
        return RunError(f"durable run {run_id!r} failed: {failure_text(exc)}", run_id=run_id)
    except Exception as exc:  # what DBOS raises for a run it gave up on
        return RunError(f"durable run {run_id!r} failed: {failure_text(exc)}", run_id=run_id)
    return RunError(f"durable run {run_id!r} failed", run_id=run_id)
