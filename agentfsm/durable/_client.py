"""The client role: start runs, answer them and read them, without running anything.

A front end (a web app, a chat bot, a support console) needs no tools, no
credentials and no model key: `Client` talks only to the database, through
DBOS's own client. A run it starts is put on agentfsm's queue, and a worker
(a process that called `launch` with the agent) takes it from there; a reply it
sends reaches the run wherever it waits.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any

from dbos import DBOSClient, EnqueueOptions

from agentfsm._model._checked import read
from agentfsm._model._errors import at_call
from agentfsm.durable import _runs
from agentfsm.durable._data import check_stored, check_text
from agentfsm.durable._runs import DurableResult, RunStatus
from agentfsm.durable._serializer import JsonSerializer, refuse_pickles
from agentfsm.durable._workflow import RUNS_QUEUE, WORKFLOW_NAME
from agentfsm.exceptions import DefinitionError, InvalidInputError, RunError

__all__ = ["Client", "history_of"]


def history_of(messages: object, where: str) -> list[dict[str, Any]]:
    """The messages a run starts with: a str is one user message; else a list of mappings.

    Raises:
        InvalidInputError: `messages` is neither.
        DataError: a message holds a value the durable database cannot store as given
            (it names the message's index, the key and the value's type).
    """
    if isinstance(messages, str):
        check_stored(messages, where, "messages")
        return [{"role": "user", "content": messages}]
    wrong = InvalidInputError(
        f"{where}: messages must be a str or a list of message mappings ({{'role', 'content'}})"
    )
    if not isinstance(messages, Sequence) or isinstance(messages, bytes):
        raise wrong
    history = read(
        f"{where}: messages",
        InvalidInputError,
        lambda: [dict(m) for m in messages if isinstance(m, Mapping)],
    )
    # Keys that are not str would be stored as JSON text keys: another message than given.
    if len(history) != len(messages) or any(type(k) is not str for m in history for k in m):
        raise wrong
    # Before anything is written: a message the database cannot hold fails here, naming it.
    check_stored(history, where, "messages")
    return history


class Client:
    """Start runs, answer their questions and read them, from a process that runs nothing.

    Args:
        database_url: The workers' database (`sqlite:///<file>` or `postgresql://...`);
            a worker must have launched on it once (the client creates no tables).
        name: The DBOS application name the workers launched with.

    A run the client starts is queued; a worker that declared the agent (and runs the
    newest application version launched on the database) takes it. The client declares
    no agents, so a run of an agent no worker knows fails there (`result` says so).
    """

    @at_call
    def __init__(self, database_url: str, *, name: str = "agentfsm") -> None:
        for field, value in (("database_url", database_url), ("name", name)):
            if not isinstance(value, str) or not value:
                raise DefinitionError(f"Client: {field} must be a non-empty str, not {value!r}")
            check_text(value, "Client", field, DefinitionError)
        refuse_pickles()
        try:
            self._dbos = DBOSClient(
                system_database_url=database_url,
                serializer=JsonSerializer(),
                application_name=name,
                # A front end is told the database is unreachable instead of waiting for it.
                retry_connection_errors=False,
            )
        except Exception as exc:  # a bad URL, an unreachable server: DBOS and drivers vary
            raise RunError(f"Client: cannot reach the durable database: {exc}") from exc
        self._remote = _Remote(self._dbos)

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the client's database connections."""
        self._dbos.destroy()

    @at_call
    def start(
        self,
        agent: str,
        messages: str | Sequence[Mapping[str, Any]],
        *,
        run_id: str | None = None,
    ) -> str:
        """Queue a run of the agent named `agent`; returns its run id (an id twice is one run)."""
        if not isinstance(agent, str) or not agent:
            raise InvalidInputError(f"start: agent must be an agent's name, not {agent!r}")
        check_text(agent, "start", "agent")
        if run_id is not None:
            _runs.checked_id(run_id, "start")
        history = history_of(messages, "start")
        options: EnqueueOptions = {"workflow_name": WORKFLOW_NAME, "queue_name": RUNS_QUEUE}
        if run_id is not None:
            options["workflow_id"] = run_id
        with _runs.reading(run_id or "(new)", "start", self._remote.hint):
            return self._dbos.enqueue(options, agent, history).get_workflow_id()

    @at_call
    def status(self, run_id: str) -> RunStatus:
        """Where a run is: queued, running, waiting for a human, done, failed or cancelled."""
        return _runs.status(self._remote, run_id)

    @at_call
    def asked(self, run_id: str) -> dict[str, Any] | None:
        """What a run waiting for a human asks (question id, turn, reason, tool calls), or None."""
        return _runs.asked(self._remote, run_id)

    @at_call
    def reply(
        self,
        run_id: str,
        approved: bool,
        message: str | None = None,
        *,
        question: str | None = None,
        remember: str | Mapping[str, Any] | None = None,
    ) -> None:
        """Answer `question` (the id `asked` gives), which the run must be asking now.

        Like `agentfsm.durable.reply`; the worker that holds the run resumes it.
        """
        _runs.reply(self._remote, run_id, question, approved, message, remember)

    @at_call
    def result(self, run_id: str, *, timeout: float | None = None) -> DurableResult:
        """Wait for a run to end and return its result (RunError if it failed)."""
        return _runs.result(self._remote, run_id, timeout)

    @at_call
    def pending(self) -> dict[str, str]:
        """The runs not ended yet (queued, running or waiting), each with its application version
        (`""` for a run queued and not yet taken: the newest version's workers will take it).

        During an upgrade, the workers of an old version may stop once no run of their
        version is left here.
        """
        with _runs.reading("(any)", "pending", self._remote.hint):
            found = self._dbos.list_workflows(
                status=["PENDING", "ENQUEUED"],
                name=WORKFLOW_NAME,
                load_input=False,
                load_output=False,
            )
        return {w.workflow_id: str(w.app_version or "") for w in found}


class _Remote:
    """Runs read through DBOS's client: the `Backend` of `Client`."""

    hint = "is the database reachable, and did a worker launch on it?"

    def __init__(self, client: DBOSClient) -> None:
        self.client = client

    def state(self, run_id: str) -> str | None:
        found = self.client.list_workflows(
            workflow_ids=[run_id], load_input=False, load_output=False
        )
        return str(found[0].status) if found else None

    def event(self, run_id: str, key: str) -> Any:
        return self.client.get_event(run_id, key, timeout_seconds=0)

    def send(self, run_id: str, message: Any, topic: str) -> None:
        self.client.send(run_id, message, topic)

    def output(self, run_id: str) -> Any:
        return self.client.retrieve_workflow(run_id).get_result()
