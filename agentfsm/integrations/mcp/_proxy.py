"""The MCP proxy behind `agentfsm mcp-proxy`: a policy between an MCP host and a server.

It relays JSON-RPC messages between the host and the server and takes over four kinds of
message. The host talks to the proxy over stdio (this process's stdin/stdout) or, through
`agentfsm.integrations.mcp._http`, over streamable HTTP with one Proxy per MCP session; the server
is a child process on stdio or a streamable HTTP server reached by URL (`http_server`).

- ids: every request either side gets goes under an id the proxy allocates (`Relay`): the
  host's requests reach the server renumbered, the server's reach the host renumbered, and
  an answer is taken only for a request still waiting, once. Anything else (an unknown id,
  a repeated or forged answer) is dropped, said on stderr and noted in the trace.
- `tools/list`: the proxy lists the server's tools itself (every page) before it decides
  any call, and again after `notifications/tools/list_changed`; calls are decided against
  that listing, never the host's. The latest listing's annotations are the ask floor
  (`_hints.with_hints`); a tool it does not hold is refused; a rule on an argument no
  listed tool takes, or naming a tool a listed one is close to (`Read_File` for
  `read_file`), ends the session at the first listing (status 2) and refuses the tool's
  calls when a later listing brings it. Each tool's description, input schema and
  annotations are pinned at first sight; a tool that later changes is flagged in the
  listing the host gets and every call to it is asked again (denied without elicitation).
- `tools/call`: each call is one turn of a session-long Controller (a model turn holding
  that one call; its result the tool result), so permissions, shell-aware rules, budgets
  and the doom-loop guard apply as they do to an agent. A call the Controller does not
  clear never reaches the server: the host gets a tool error result saying why; one it
  clears reaches it as decided (its name and arguments, rebuilt), and arguments that are
  not an object are refused. `ask`
  reaches the host as its revision allows (`_era.Era`): an `elicitation/create` when its
  `initialize` declared the capability under a revision that has it, or for a stateless
  host an `InputRequiredResult` decided on its retry; anything but an explicit accept with
  a yes denies. Calls are taken one at a time.
- the server's answers to calls: cut to a size, checked for shape; a malformed line or a
  server that exits answers every call in flight with an error result.

Of the rest, only what the proxy models passes (`_wire.host_kind`): the host's
requests of known methods, a closed list of its notifications, and answers; anything
else, a `tools/call` without an id among them, is dropped and traced. On stdio, stdout
carries only MCP messages; what the proxy has to say goes to stderr. When the session
ends (the host closed it, the server went away, a guard stopped it) the Controller's run
ends too, so a trace ends with an end event that `agentfsm replay` reads as a finished run.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import signal
import sys
import threading
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Protocol

from agentfsm._engine.ask_floor import floored
from agentfsm._engine.controller import Controller
from agentfsm._engine.policy import Policy
from agentfsm._model.types import (
    Action,
    Decision,
    ExitReason,
    FinishReason,
    ModelTurn,
    ToolCall,
    ToolResult,
)
from agentfsm.exceptions import AgentFSMError
from agentfsm.guards.intent import LoopLadder
from agentfsm.integrations.mcp._approvals import ApprovalsFile, Scope, remember_of, scope_field
from agentfsm.integrations.mcp._era import Era
from agentfsm.integrations.mcp._hints import changes_things, with_hints
from agentfsm.integrations.mcp._wire import (
    HostRequest,
    Pins,
    Relay,
    cap_result,
    decoded,
    digest,
    error_result,
    flag_changed,
    host_kind,
    listed_tools,
    malformed_result,
    result_text,
    server_error,
    server_kind,
    unfit_rules,
    unlisted_names,
)

__all__ = [
    "DEFAULT_MAX_RESULT_BYTES",
    "GRACE_SECONDS",
    "HostSide",
    "Proxy",
    "ProxyError",
    "ServerConnect",
    "ServerLink",
    "StartError",
    "StdioHost",
    "child_server",
    "say",
    "serve",
    "session_policy",
]

DEFAULT_MAX_RESULT_BYTES = 200_000
"""A tool result larger than this (as JSON) reaches the host cut, with a note saying so."""
_LINE_LIMIT = 64 * 1024 * 1024
"""The longest line read from either side; a longer one is a malformed message."""
_ELICIT_SECONDS = 600.0
"""How long a question to the host may wait for its answer before it counts as a no."""
_MAX_PAGES = 100
"""The most pages of a `tools/list` the proxy follows before it counts the listing failed."""
GRACE_SECONDS = 5.0
"""How long the calls in flight get to finish when a session ends (the host closed it, the
proxy was told to stop) before they are answered with an error result."""


class ProxyError(Exception):
    """The server did not answer a request: it exited, or wrote something that is not MCP."""


class StartError(Exception):
    """The server could not be started or reached at all; nothing of the session ran."""


class HostSide(Protocol):
    """The host's end of a session: MCP messages as decoded JSON-RPC objects."""

    async def receive(self) -> dict[str, Any] | None:
        """The host's next message; None once the host has closed the session."""
        ...

    async def send(self, message: Mapping[str, Any], related: Any = None) -> None:
        """Write one message to the host; `related` is the host's request it belongs to.

        A host that has gone away drops the message: nothing is left to tell it.
        """
        ...

    def closed(self) -> tuple[str, bool]:
        """How the session ended after `receive` returned None, for the trace, and whether
        the host itself ended it (not the proxy shutting down)."""
        ...

    def on_stop(self, stop: Callable[[str], None]) -> None:
        """Take `Proxy.terminate`, for whatever stops this session from outside (the HTTP
        front at SIGTERM; on stdio the signal handler holds the Proxy itself)."""
        ...


class ServerLink(Protocol):
    """The server's end of a session, open for as long as its context manager is."""

    async def receive(self) -> dict[str, Any] | str | None:
        """The server's next message, why it was not one (a str), or None once it is gone."""
        ...

    async def send(self, message: Mapping[str, Any]) -> None:
        """Write one message to the server; ProxyError when it is gone."""
        ...

    async def close_input(self) -> None:
        """Tell the server no more messages come (it may still answer those it has)."""
        ...

    def gone(self) -> str:
        """Why `receive` returned None."""
        ...


ServerConnect = Callable[[], AbstractAsyncContextManager[ServerLink]]
"""Opens the server's end for one session (a child process, an HTTP session)."""

UNLIMITED_TURNS = 1_000_000_000
"""The proxy's `max_turns` when the policy file does not set one (see `session_policy`)."""


PROXY_LOOPS = LoopLadder(warn=3, ask=5, stop=0)
"""The proxy's loop ladder when the policy file sets none (docs/loops.md): the model is
warned at the 3rd call of one intent in a row with the same result, a human is asked from the
5th on, and a loop never ends a host's session by itself (stop 0): the human decides."""


def session_policy(policy: Policy) -> Policy:
    """The policy a proxy session runs under: defaults for a host that lives for hours.

    Every call is a turn, so the Policy's default `max_turns` (50, sized for an agent's
    run) would stop an editor's session after 50 calls. The proxy takes `max_turns` only
    from a policy that sets it; the other budgets apply as written. Unless the policy sets
    them: repeats are judged by the loop ladder `PROXY_LOOPS` (a repeat whose result changed
    is progress), rather than by `repeat_threshold` and the no-progress count (which end
    a session that reads a file again); and a denial is the policy's answer, not a failing
    tool (`denials_are_tool_errors=False`).
    """
    given = policy.model_fields_set
    update: dict[str, Any] = {}
    if "max_turns" not in given:
        update["max_turns"] = UNLIMITED_TURNS
    if not given & {"loops", "repeat_threshold", "on_repeat"}:
        update["loops"] = PROXY_LOOPS
        if "no_progress_threshold" not in given:
            update["no_progress_threshold"] = None
    if "denials_are_tool_errors" not in given:
        update["denials_are_tool_errors"] = False
    return policy.model_copy(update=update) if update else policy


class Proxy:
    """One session between a host and a server, under a policy.

    Args:
        policy: The policy every call is checked against (through `session_policy`).
        connect: Opens the server's end: `child_server(command)` or `http_server(url)`.
        observers: The Controller's observers (a TraceWriter), if any.
        max_result_bytes: The largest tool result passed on whole.
        run_id: The Controller's run id (the HTTP session's id), or a random one.
        shadow: A candidate policy judged beside `policy` on every call and recorded in the
            trace, never enforced (with the listing's annotations as its ask floor too).
        approvals: An approvals file the proxy re-reads when it changes, granting what it
            lists (for a host that cannot ask; docs/mcp-proxy.md#remembered-approvals).
    """

    def __init__(
        self,
        policy: Policy,
        connect: ServerConnect,
        observers: Sequence[Any] = (),
        max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
        run_id: str | None = None,
        shadow: Policy | None = None,
        approvals: str | None = None,
    ) -> None:
        self.policy = session_policy(policy)
        self.approvals = None if approvals is None else ApprovalsFile(approvals)
        self.shadow = shadow
        self.connect = connect
        self.observers = list(observers)
        self.max_result_bytes = max_result_bytes
        self.run_id = run_id
        self.pins = Pins()
        self.controller: Controller | None = None
        self.era = Era(self)
        """The MCP revision the host speaks: how it is asked, how its results are shaped."""
        self.elicit_seconds = _ELICIT_SECONDS
        self.relay = Relay()
        self.tools: dict[str, Mapping[str, Any]] = {}
        """The server's tools by name, as the proxy itself last listed them: every call is
        decided against this listing, never the host's."""
        self.unfit: dict[str, str] = {}
        """Tools whose rules stopped fitting at a later listing: their calls are refused."""
        self._listing: asyncio.Task[None] | None = None
        self._stale = False  # the server said its tools changed during a listing
        self._calls = itertools.count(1)
        self._cancelled_ids: set[tuple[str, Any]] = set()  # the host's calls cancelled early
        self._one_call = asyncio.Lock()
        self._tasks: set[asyncio.Task[None]] = set()
        self._server_gone: str | None = None
        self._link: ServerLink | None = None
        self._host: HostSide | None = None
        self._calling: Any = None  # the host's id of the tools/call now at the server
        self._closing = False  # the host has closed the session; the server may go
        self._halt = asyncio.Event()
        self._halt_why = ""
        self._terminated: str | None = None  # why the proxy was told to stop (a signal)
        self._notes: list[str] = []  # what was dropped before the session's run began

    # -- the two sides ------------------------------------------------------------

    async def run(self, host: HostSide) -> int:
        """Relay until the host closes the session (0) or the server goes away (1).

        2 when the server cannot be started or reached at all, or when the policy does not
        fit the server's first listing (a rule on an argument no listed tool takes).
        However the session ends, its Controller's run ends with it (an end event in the
        trace).
        """
        self._host = host
        host.on_stop(self.terminate)
        try:
            return await self._run(host)
        except asyncio.CancelledError:
            # Cut short from outside (a shutdown's deadline): the trace still ends.
            self._end(self._terminated or "the proxy shut down", False, started=True)
            raise

    async def _run(self, host: HostSide) -> int:
        try:
            async with self.connect() as link:
                self._link = link
                status = await self._relay(link)
        except StartError as exc:
            say(str(exc))
            status, why, by_host = 2, str(exc), False
        except Exception as exc:  # the server's transport failed under the session
            why = f"the connection to the MCP server failed: {_describe(exc)}"
            say(why)
            self._gone(why)
            status, by_host = 1, False
        else:
            why, by_host = self._ending(host, status)
            if self._terminated is not None:
                status = 0  # stopped as asked, its calls answered: not a failure
        await self._drain()
        for task in list(self._tasks):
            task.cancel()
        self._end(why, by_host, started=status != 2 or self._halt.is_set())
        return status

    def terminate(self, why: str) -> None:
        """Stop the session from outside (SIGTERM): the calls in flight get their results,
        or after the grace period an error result saying the proxy stopped; the run ends
        interrupted with `why`. A second signal (SIGINT, then SIGTERM) keeps the first why."""
        if self._terminated is not None:
            return
        self._terminated = why
        self._halt_why = why
        self._halt.set()

    def _ending(self, host: HostSide, status: int) -> tuple[str, bool]:
        """Why the session ended, for the trace, and whether the host ended it."""
        if self._terminated is not None:
            return self._terminated, False
        if status == 0:
            return host.closed()
        if self._halt.is_set():
            return self._halt_why, False
        return self._server_gone or "", False

    async def _relay(self, link: ServerLink) -> int:
        server = asyncio.create_task(self._read_server(link))
        host = asyncio.create_task(self._read_host())
        halt = asyncio.create_task(self._halt.wait())
        try:
            done, _ = await asyncio.wait({server, host, halt}, return_when=asyncio.FIRST_COMPLETED)
            if halt in done:
                await self._drain()
                if self._terminated is not None:
                    await self._answer_the_rest(self._terminated)
                return 2
            if host not in done:
                return 1
            # The host's input ended: finish what it asked, then let the server go.
            await self._drain()
            self._closing = True
            await link.close_input()
            await asyncio.wait({server}, timeout=5)
            return 0
        finally:
            server.cancel()
            host.cancel()
            halt.cancel()

    def _end(self, why: str, by_host: bool, started: bool) -> None:
        """End the session's run, so the trace says how the session ended.

        A host that closed the session is the session's model giving its final answer:
        that is an input the trace records, so `agentfsm replay` feeds it again and ends
        the run where it ended. A server that went away, or a proxy that shut down, stops
        the run from outside.
        """
        if not started and self.controller is None:
            return  # nothing ran: no run to end
        ctl = self._session()
        try:
            if by_host and not ctl.done:
                ctl.on_model_output(ModelTurn(text=why, finish_reason=FinishReason.STOP))
            if not ctl.done:  # a guard ended it already, and said why
                reason = ExitReason.COMPLETED if by_host else ExitReason.INTERRUPTED
                ctl.stop(reason, why or None)
        except AgentFSMError as exc:  # a call left half-done: stop it from outside
            if not ctl.done:
                ctl.stop(ExitReason.INTERRUPTED, why or None)
            say(f"the session's run ended from outside: {exc}")

    async def _drain(self) -> None:
        """Let the calls in flight write their results before the session ends."""
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=GRACE_SECONDS)

    async def _answer_the_rest(self, why: str) -> None:
        """Past the grace period of a stop: what still waits on the server is answered with
        an error saying why (a call's result), and what waits on anything else (the host's
        reply to a question) is cancelled, its call answered so too (`_handle`)."""
        self._fail_all(why)
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=1)
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=1)

    async def _read_host(self) -> None:
        assert self._host is not None
        while (message := await self._host.receive()) is not None:
            if "method" in message:  # the revision's envelope read, its own traffic taken
                message = await self.era.host_message(message)
            if message is not None:
                await self._from_host(message)

    async def _read_server(self, link: ServerLink) -> None:
        while (message := await link.receive()) is not None:
            if isinstance(message, str):
                self._malformed(message)
            else:
                await self._from_server(message)
        why = link.gone()
        if not self._closing:
            say(f"{why}; answering the calls in flight with errors")
        self._gone(why)

    def _gone(self, why: str) -> None:
        self._server_gone = why
        self._fail_all(why)

    def _malformed(self, what: str) -> None:
        why = f"the MCP server sent {what}"
        say(why)
        self._fail_all(why)

    def _fail_all(self, why: str) -> None:
        """Answer every request waiting on the server: the proxy's with ProxyError, the
        host's forwarded ones with a JSON-RPC error."""
        for ident, waiter in self.relay.to_server.waiting().items():
            self.relay.to_server.forget(ident)
            if isinstance(waiter, _Own) and not waiter.future.done():
                waiter.future.set_exception(ProxyError(why))
            elif isinstance(waiter, HostRequest):
                self._spawn(self.reply_error(waiter.host_id, why))

    def note(self, what: str) -> None:
        """Say what the proxy dropped or refused on stderr and in the session's trace."""
        say(what)
        self._trace(what)

    def _trace(self, what: str) -> None:
        if self.controller is None:
            self._notes.append(what)  # written once the run has begun
            return
        event = {"event": "mcp_proxy", "run_id": self.controller.run_id, "note": what}
        for observer in self.observers:
            with contextlib.suppress(Exception):  # a note must not break the session
                observer(event)

    def halt(self, why: str) -> None:
        """End the session with status 2: it cannot be run under this policy."""
        say(why)
        self._halt_why = why
        self._halt.set()

    async def send_host(self, message: Mapping[str, Any], related: Any = None) -> None:
        """Write one message to the host; `related` is the host's request it belongs to."""
        assert self._host is not None
        await self._host.send(message, related)

    async def send_server(self, message: Mapping[str, Any]) -> None:
        """Write one message to the server; ProxyError when it is gone."""
        if self._server_gone or self._link is None:
            raise ProxyError(self._server_gone or "the MCP server is not running")
        await self._link.send(message)

    async def ask_server(self, method: str, params: Any, host_id: Any = None) -> Any:
        """Send a request to the server under an id of the proxy's ledger; its result, or
        ProxyError.

        `host_id` is the id of the host's request it carries, so the host's cancellation
        of that request reaches the server under the proxy's id.
        """
        waiter = _Own(asyncio.get_running_loop().create_future(), host_id)
        ident = self.relay.to_server.send(waiter)
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": ident, "method": method}
        if params is not None:
            message["params"] = params
        try:
            await self.send_server(message)
            return await waiter.future
        finally:
            self.relay.to_server.forget(ident)

    async def ask_host(self, method: str, params: Any, timeout: float, related: Any) -> Any:
        """Send a request of the proxy's own to the host; its reply message, None on timeout."""
        waiter = _Own(asyncio.get_running_loop().create_future())
        ident = self.relay.to_host.send(waiter)
        try:
            await self.send_host(
                {"jsonrpc": "2.0", "id": ident, "method": method, "params": params}, related
            )
            return await asyncio.wait_for(waiter.future, timeout)
        except TimeoutError:
            return None
        finally:
            self.relay.to_host.forget(ident)

    # -- routing ------------------------------------------------------------------

    async def _from_host(self, message: dict[str, Any]) -> None:
        """Route the host's message; what the proxy does not model is dropped and traced.

        Nothing reaches the server as the host wrote it: a request goes under the proxy's
        id (`tools/*` the proxy answers itself), a notification of a known method as its
        method and params, a cancellation renumbered.
        """
        kind = host_kind(message)
        if kind == "answer":  # to the proxy's own question, or to the server's
            await self._host_answered(message)
            return
        if kind not in ("request", "notification"):
            self.note(f"dropped the host's message: {kind}")
            if kind.startswith("a request ") and "id" in message:
                await self.reply_error(message["id"], f"{kind}; not sent", code=-32601)
            return
        method = message["method"]
        if method in ("tools/call", "tools/list"):
            self._spawn(self._handle(message))
        elif method == "notifications/cancelled":
            await self._cancelled(message)
        elif kind == "request":  # the host's request reaches the server under the proxy's id
            sent = self.relay.host_request(message)
            self.era.forwarded(message, sent)
            await self._forward(message, sent)
        else:
            sent = {"jsonrpc": "2.0", "method": method}
            if "params" in message:
                sent["params"] = message["params"]
            await self._forward(message, sent)
        if method == "notifications/initialized":
            self._start_listing()  # the proxy's own listing, before any call is decided

    async def _host_answered(self, message: dict[str, Any]) -> None:
        waiter, forward = self.relay.host_answer(message)
        if isinstance(waiter, _Own):
            if not waiter.future.done():
                waiter.future.set_result(message)
        elif forward is not None:
            with contextlib.suppress(ProxyError):  # a server that is gone needs no answer
                await self.send_server(forward)
        else:
            self.note(
                f"dropped the host's answer under id {message.get('id')!r}: "
                "no request of the proxy or the server waits on it"
            )

    async def _cancelled(self, message: dict[str, Any]) -> None:
        """The host's cancellation, under the proxy's id when its request is at the server.

        The request's wait ends here: a server told to cancel need not answer, and a call
        left waiting would hold every later call behind it. A call still waiting its turn
        is never sent.
        """
        params = message.get("params")
        if not isinstance(params, Mapping) or params.get("requestId") is None:
            return  # names no request: nothing to cancel
        found = self.relay.host_cancelled(params["requestId"])
        for ident, waiter in found:
            if isinstance(waiter, _Own) and not waiter.future.done():
                waiter.future.set_exception(ProxyError("the host cancelled the request"))
            await self._forward(message, {**message, "params": {**params, "requestId": ident}})
        ident = params["requestId"]
        # Only an id a call can have (a string or whole number) may name one waiting its turn;
        # a list or object would not even hash.
        callable_id = isinstance(ident, int | str) and not isinstance(ident, bool)
        if not found and callable_id and len(self._cancelled_ids) < 10_000:
            self._cancelled_ids.add(_key(ident))  # a call still waiting its turn

    async def _forward(self, message: Mapping[str, Any], sent: Mapping[str, Any]) -> None:
        """Send `sent` (the host's `message`, renumbered) to the server; a request the
        server cannot get is answered with an error."""
        try:
            await self.send_server(sent)
        except ProxyError as exc:
            if "id" in message and "method" in message:
                self.relay.to_server.answer(sent.get("id"))
                await self.reply_error(message["id"], str(exc))

    async def _from_server(self, message: dict[str, Any]) -> None:
        """Route the server's message; what the proxy does not model is dropped and traced.

        A request the proxy does not forward is answered "method not found", so the server
        does not wait on a host that will never hear of it.
        """
        kind = server_kind(message)
        if kind == "answer":
            await self._server_answered(message)
            return
        if kind not in ("request", "notification"):
            self.note(f"dropped the server's message: {kind}")
            if kind.startswith("a request ") and "id" in message:
                error = {"code": -32601, "message": f"agentfsm mcp-proxy: {kind}; not sent"}
                await self.send_server({"jsonrpc": "2.0", "id": message["id"], "error": error})
            return
        method = message["method"]
        if method == "notifications/tools/list_changed":
            self._start_listing(again=True)
        if method == "notifications/cancelled":
            message = self._server_cancelled(message)
            if not message:
                return
        elif "id" in message and self.era.refuses_server_request():
            self.note(f"refused the server's request {method!r}: this host takes no requests")
            error = {"code": -32601, "message": "agentfsm mcp-proxy: the host takes no requests"}
            with contextlib.suppress(ProxyError):
                await self.send_server({"jsonrpc": "2.0", "id": message["id"], "error": error})
            return
        elif "id" in message:  # the server's request reaches the host under the proxy's id
            message = self.relay.server_request(message)
        # Calls run one at a time, so what the server says while one runs belongs to it
        # (progress, its own questions): over HTTP it goes on that call's stream.
        await self.send_host(message, self._calling)

    async def _server_answered(self, message: dict[str, Any]) -> None:
        waiter, forward = self.relay.server_answer(message)
        if isinstance(waiter, _Own):
            if not waiter.future.done():
                if "error" in message or "result" not in message:
                    waiter.future.set_exception(ProxyError(server_error(message)))
                else:
                    waiter.future.set_result(message["result"])
        elif forward is not None:
            forward = self.era.answered(message, forward)
            await self.send_host(forward, forward["id"])
        else:
            self.note(
                f"dropped the server's answer under id {message.get('id')!r}: no request "
                "the proxy sent it waits on that id (a forged, late or repeated answer)"
            )

    def _server_cancelled(self, message: dict[str, Any]) -> dict[str, Any]:
        """The server's cancellation under the id the host knows its request by, or {}."""
        params = message.get("params")
        server_id = params.get("requestId") if isinstance(params, Mapping) else None
        found = self.relay.server_cancelled(server_id)
        if not found or not isinstance(params, Mapping):
            self.note(f"dropped the server's cancellation of unknown request {server_id!r}")
            return {}
        return {**message, "params": {**params, "requestId": found[0]}}

    def _spawn(self, work: Any) -> None:
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _handle(self, message: dict[str, Any]) -> None:
        ident = message["id"]
        try:
            if message["method"] == "tools/list":
                result = await self._list(message.get("params"), ident)
            else:
                result = await self._call(message.get("params"), ident)
        except asyncio.CancelledError:
            # Stopped from outside past the grace period: the host still gets an answer.
            if self._terminated is not None and message["method"] == "tools/call":
                why = f"agentfsm mcp-proxy: {self._terminated}; the call was not answered"
                with contextlib.suppress(Exception):
                    await self.reply(ident, error_result(why))
            raise
        except Exception as exc:  # the host gets an answer whatever failed here
            why = str(exc) if isinstance(exc, ProxyError) else f"{type(exc).__name__}: {exc}"
            if not isinstance(exc, ProxyError):
                say(f"{message['method']} failed: {why}")
            if message["method"] == "tools/call":
                await self.reply(ident, error_result(f"agentfsm mcp-proxy: {why}"))
            else:
                await self.reply_error(ident, why)
            return
        await self.reply(ident, result, message["method"])

    async def reply(self, ident: Any, result: Any, method: str | None = None) -> None:
        """Answer the host's request `ident` (a `method`) with `result`, shaped for the
        host's revision, under the id of the request the host sent last for it."""
        target = self.era.reply_to(ident)
        if self.era.nobody(target):
            return
        result = self.era.shaped(method, result)
        await self.send_host({"jsonrpc": "2.0", "id": target, "result": result}, target)

    async def reply_error(self, ident: Any, why: str, code: int = -32603) -> None:
        """Answer the host's request `ident` with a JSON-RPC error."""
        target = self.era.reply_to(ident)
        if self.era.nobody(target):
            return
        error = {"code": code, "message": f"agentfsm mcp-proxy: {why}"}
        await self.send_host({"jsonrpc": "2.0", "id": target, "error": error}, target)

    # -- the proxy's own listing --------------------------------------------------

    async def _list(self, params: Any, ident: Any) -> Any:
        """The host's listing: passed on with changed tools flagged. It decides nothing:
        calls are decided against the proxy's own listing."""
        result = await self.ask_server("tools/list", params, ident)
        tools = result.get("tools") if isinstance(result, Mapping) else None
        if not isinstance(tools, list):
            return result
        self.pins.see(tools)
        return {**result, "tools": flag_changed(tools, self.pins.changed)}

    def _start_listing(self, again: bool = False) -> None:
        """List the server's tools (again: after it said they changed) unless under way;
        a change said while a listing is under way lists once more after it."""
        if self._listing is not None and not self._listing.done():
            self._stale = self._stale or again
            return
        if self._listing is not None and not again and not _failed(self._listing):
            return  # listed already
        self._listing = _quiet(asyncio.create_task(self._list_all()))

    async def _listed(self) -> None:
        """Wait for the proxy's own listing; list first when none is done or under way, or
        when the last one failed. ProxyError when the server cannot be listed."""
        if self._listing is None or _failed(self._listing):
            self._listing = _quiet(asyncio.create_task(self._list_all()))
        await asyncio.shield(self._listing)

    async def _list_all(self) -> None:
        """List the server's tools until a listing ends with no change said meanwhile."""
        for _ in range(_MAX_PAGES):
            self._stale = False
            await self._list_pages()
            if not self._stale:
                return
        raise ProxyError("the MCP server's tools kept changing while they were listed")

    async def _list_pages(self) -> None:
        """List every page of the server's tools and take the listing as the proxy's."""
        tools: dict[str, Mapping[str, Any]] = {}
        cursor = None
        for _ in range(_MAX_PAGES):
            params = {"cursor": cursor} if cursor else None
            page = await self.ask_server("tools/list", params)
            found = listed_tools(page)
            if found is None:
                raise ProxyError("the MCP server's tools/list result is not a listing")
            tools.update((tool["name"], tool) for tool in found)
            cursor = page.get("nextCursor")
            if not isinstance(cursor, str) or not cursor:
                self._take(tools)
                return
        raise ProxyError(f"the MCP server's tool listing did not end after {_MAX_PAGES} pages")

    def _take(self, tools: dict[str, Mapping[str, Any]]) -> None:
        """Make `tools` the proxy's listing; check the policy's rules against it.

        At the first listing a rule on an argument no matching tool takes ends the session
        (status 2); later, the calls of a new or changed tool whose rules no longer fit
        are refused.
        """
        first = not self.tools and self.controller is None
        before = self.tools
        changed = self.pins.see(list(tools.values()))
        if changed:
            say(f"tools changed since first listed: {', '.join(sorted(changed))}")
        self.tools = tools
        if first:
            policy = self.policy
            close, far = unlisted_names(policy.permission_rules, policy.permissions, tools)
            for what in far:
                say(f"{what}; it can match no call")
            problems = close + unfit_rules(policy.permission_rules, tools)
            if problems:
                self.halt(f"the policy does not fit the MCP server's tools: {'; '.join(problems)}")
                raise ProxyError("the policy does not fit the MCP server's tools")
            return
        for name, tool in tools.items():
            if before.get(name) == tool:
                continue
            self.unfit.pop(name, None)
            problems = self._misnamed(tools, name)
            problems += unfit_rules(self.policy.permission_rules, tools, only=name)
            if problems:
                self.unfit[name] = "; ".join(problems)
                self.note(f"tool {name!r} changed and its rules no longer fit: {problems[0]}")

    def _misnamed(self, tools: Mapping[str, Mapping[str, Any]], name: str) -> list[str]:
        """The rules and `permissions` entries written for a name close to the new or
        changed tool `name` (`Read_File` for `read_file`): each would miss its calls."""
        rules, table = self.policy.permission_rules, self.policy.permissions
        return unlisted_names(rules, table, tools, only=name)[0]

    # -- one tool call, one turn of the session -----------------------------------

    async def _call(self, params: Any, ident: Any) -> dict[str, Any]:
        if not isinstance(params, Mapping) or not isinstance(params.get("name"), str):
            return error_result("agentfsm mcp-proxy: tools/call without a tool name")
        arguments = params.get("arguments", {})
        if not isinstance(arguments, Mapping):
            why = f"not executed: the call's arguments are {_json_type(arguments)}, not an object"
            self.note(f"refused a call of {params['name']!r}: {why}")
            return error_result(f"agentfsm mcp-proxy: {why}")
        async with self._one_call:
            if self._terminated is not None:  # the proxy is stopping: nothing new runs
                why = f"{self._terminated}; not executed"
                self.note(f"refused a call of {params['name']!r}: {why}")
                return error_result(f"agentfsm mcp-proxy: {why}")
            if _key(ident) in self._cancelled_ids:
                self._cancelled_ids.discard(_key(ident))
                return error_result("agentfsm mcp-proxy: the host cancelled the call")
            refused = await self._unlisted(params["name"])
            if refused is not None:
                self.note(refused)
                return error_result(f"agentfsm mcp-proxy: {refused}")
            return await self._decide(params, ident, dict(arguments))

    async def _unlisted(self, name: str) -> str | None:
        """Why a call of `name` is refused before the policy reads it: the proxy's own
        listing failed, does not hold the tool, or holds it with rules that do not fit."""
        try:
            await self._listed()
        except ProxyError as exc:
            return f"not executed: the proxy could not list the server's tools ({exc})"
        if name not in self.tools:
            return f"not executed: the MCP server does not list a tool {name!r}"
        if name in self.unfit:
            return f"not executed: the rules for tool {name!r} no longer fit: {self.unfit[name]}"
        return None

    def _session(self) -> Controller:
        """The session's Controller, made at its first call with the proxy's own listing's
        annotations as the ask floor."""
        if self.controller is None:
            hints = {name: tool.get("annotations") for name, tool in self.tools.items()}
            hinted = with_hints(self.policy, hints)
            shadow = None if self.shadow is None else with_hints(self.shadow, hints)
            self.controller = Controller(
                hinted,
                run_id=self.run_id,
                observers=self.observers,
                shadow=shadow,
                identify=self._identity,
            )
            notes, self._notes = self._notes, []
            for what in notes:
                self._trace(what)
        return self.controller

    def _identity(self, name: str) -> str | None:
        """A tool's identity for remembered approvals: its pin in the current listing."""
        tool = self.tools.get(name)
        return None if tool is None else "mcp:" + digest(tool)

    def _extra_care(self, call: ToolCall) -> str | None:
        """Why a call the policy clears must still be asked: a tool changed since first
        listed (description, schema or annotations), or one the proxy's current listing
        says may change things with no allow for exactly that call.

        The Controller's floor is the first listing's; this reads the listing the call is
        decided against, so a tool whose annotations turn destructive asks from then on.
        """
        name = call.name
        if name in self.pins.changed:
            return f"tool {name!r} changed since it was first listed"
        if not changes_things(self.tools[name].get("annotations")):
            return None
        rules, table = self.policy.permission_rules, self.policy.permissions
        if floored(("allow", "the policy"), call, rules, table)[0] != "allow":
            return f"tool {name!r} may change things (its current annotations)"
        return None

    async def _decide(
        self, params: Mapping[str, Any], ident: Any, args: dict[str, Any]
    ) -> dict[str, Any]:
        ctl = self._session()
        name = params["name"]
        if ctl.done:
            why = ctl.exit_reason.value if ctl.exit_reason else "ended"
            return error_result(
                f"agentfsm: the session has stopped ({why}); nothing runs. To go on, start a "
                "new session (reconnect this MCP server in the host), or raise the limit that "
                "stopped it in the policy file"
            )
        if self.approvals is not None:
            self.approvals.sync(ctl, self._trace)
        call = ToolCall(id=f"call-{next(self._calls)}", name=name, arguments=args)
        turn = ModelTurn(tool_calls=[call], finish_reason=FinishReason.TOOL_CALLS)
        decision = ctl.on_model_output(turn)
        # A remembered approval answered the ask the annotations' floor makes; a changed
        # tool is never covered (its pin moved), so it is asked below as before.
        care = None if call.id in decision.covered else self._extra_care(call)
        if decision.action is Action.ASK_HUMAN:
            why = "; ".join(filter(None, [decision.reason, care]))
            if not self.era.can_ask(ident):
                # Nobody can be asked: say so, rather than "declined by the human".
                unasked = (
                    _loop_unasked(why)
                    if decision.guard.startswith("LoopRung")
                    else _cannot_ask(call.name, why, self.era.unable(ident))
                )
                decision = ctl.on_human_reply(False, unasked)
                if decision.action is Action.STOP:
                    return _refusal(decision, call.id)
                return error_result(f"agentfsm: {unasked}")
            yes, scope = await self._ask(call, why, ident)
            no = None if yes else "not approved through MCP elicitation"
            remember = {call.id: scope} if yes and scope is not None else None
            decision = ctl.on_human_reply(yes, no, remember=remember)
            care = None
        if decision.action is not Action.EXECUTE_TOOLS or not ctl.claim(call.id, name, args):
            return _refusal(decision, call.id)
        if care is not None and not await self._elicit(call, care, ident):
            why = f"not executed: {care}, and it was not approved"
            ctl.on_tool_results(
                [ToolResult(call_id=call.id, name=name, content=why, is_error=True)]
            )
            return error_result(f"agentfsm: {why}")
        return await self._execute(ctl, call, params, ident, decision.note)

    async def _execute(
        self,
        ctl: Controller,
        call: ToolCall,
        params: Mapping[str, Any],
        ident: Any,
        note: str | None = None,
    ) -> dict[str, Any]:
        self._calling = ident
        try:
            result = await self.ask_server("tools/call", _sent(call, params), ident)
            why = malformed_result(result)
            if why is not None:
                raise ProxyError(f"the MCP server answered with a malformed result: {why}")
        except ProxyError as exc:
            result = error_result(f"agentfsm mcp-proxy: {exc}")
        finally:
            self._calling = None
        result = cap_result(dict(result), self.max_result_bytes)
        text = result_text(result)
        is_error = bool(result.get("isError"))
        ctl.on_tool_results(
            [ToolResult(call_id=call.id, name=call.name, content=text, is_error=is_error)]
        )
        if note and isinstance(result.get("content"), list):
            # The loop ladder's warning: the model reads it beside the result it warns about
            # (the result is compared without it, so the warning never reads as a change).
            result["content"] = [*result["content"], {"type": "text", "text": f"agentfsm: {note}"}]
        return result

    async def _elicit(self, call: ToolCall, why: str, related: Any) -> bool:
        """Ask the host's user whether `call` may run; True only for an accept with a yes."""
        return (await self._ask(call, why, related, offer_scopes=False))[0]

    async def _ask(
        self, call: ToolCall, why: str, related: Any, *, offer_scopes: bool = True
    ) -> tuple[bool, Scope]:
        """Ask the host's user whether `call` may run, and for how long the answer holds.

        The host's revision says how (`Era.ask`): a request to the host, or an answer to the
        call that asks and waits for the host to send the call again. True only for an
        accept with a yes; the scope is the form's `remember` choice
        (`_approvals.SCOPE_CHOICES`), offered to a host of a handshake revision, and None
        (this call only) for anything else.
        """
        if not self.era.can_ask(related):
            return False, None
        shown = json.dumps(call.arguments, ensure_ascii=False)[:2000]
        message = f"Run tool {call.name} with {shown}? ({why})"
        offered = offer_scopes and self.era.stateless is None
        extra = {"remember": scope_field()} if offered else None
        yes, content = await self.era.ask(
            call.name, dict(call.arguments or {}), message, related, extra
        )
        if not yes:
            return False, None
        return True, remember_of(content) if offered else None


@dataclass(eq=False)
class _Own:
    """A request of the proxy's own, waiting for its answer."""

    future: asyncio.Future[Any]
    host_id: Any = None
    """The host's request it carries (a tools/call, a tools/list), for its cancellation."""


def _quiet(task: asyncio.Task[None]) -> asyncio.Task[None]:
    """`task`, its failure read when it ends (a call that needs the listing reads it again)."""
    task.add_done_callback(lambda done: done.cancelled() or done.exception())
    return task


def _failed(task: asyncio.Task[None]) -> bool:
    """Whether `task` ended without finishing its work."""
    return task.done() and (task.cancelled() or task.exception() is not None)


def _sent(call: ToolCall, params: Mapping[str, Any]) -> dict[str, Any]:
    """The `tools/call` params the server gets: exactly the call decided, and the host's
    progress token (a string or whole number) so its progress still reaches the host."""
    sent: dict[str, Any] = {"name": call.name, "arguments": dict(call.arguments or {})}
    meta = params.get("_meta")
    token = meta.get("progressToken") if isinstance(meta, Mapping) else None
    if isinstance(token, int | str) and not isinstance(token, bool):
        sent["_meta"] = {"progressToken": token}
    return sent


def _json_type(value: object) -> str:
    """The JSON type of a decoded value, as the host wrote it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    return "a string" if isinstance(value, str) else "an array"


def _key(ident: object) -> tuple[str, Any]:
    """A JSON-RPC id as a set key that tells `true` from 1 and "1" from 1."""
    return type(ident).__name__, ident


def _cannot_ask(name: str, why: str, unable: str) -> str:
    """Why an asked call did not run on a host that cannot be asked: nobody was asked."""
    return (
        f"{name!r} was not run: it needs a human's approval ({why}), and this host cannot ask "
        f"one ({unable}), so nobody was asked. Allow it in the "
        f"policy (for example `allow {name}`, or a rule naming its arguments), approve it out "
        "of band in an approvals file (`agentfsm mcp-proxy --approvals FILE`), or use a host "
        "that can answer an ask"
    )


def _loop_unasked(why: str) -> str:
    """Why a repeat the loop ladder asks about did not run on a host that cannot ask."""
    return (
        f"not run: {why}; the policy's loop ladder asks a human about it, and this host cannot "
        "ask one (no MCP elicitation). The session goes on: change the call, or say what you "
        "are waiting for; a call whose result changed counts as progress"
    )


def _refusal(decision: Decision, call_id: str) -> dict[str, Any]:
    """The error result the host gets for a call the Controller did not clear."""
    said = next((r.content for r in decision.results if r.call_id == call_id), None)
    text = said if isinstance(said, str) and said else decision.reason
    head = "agentfsm: "
    if decision.action is Action.STOP and decision.exit_reason is not None:
        head = f"agentfsm stopped the session ({decision.exit_reason.value}): "
    return error_result(f"{head}{text}")


class StdioHost:
    """The host on this process's stdin and stdout, one JSON-RPC message a line."""

    def __init__(self) -> None:
        self._stdin: asyncio.StreamReader | None = None
        self._lock = asyncio.Lock()

    async def _open(self) -> asyncio.StreamReader:
        if self._stdin is None:
            loop = asyncio.get_running_loop()
            self._stdin = asyncio.StreamReader(limit=_LINE_LIMIT)
            reader = self._stdin
            try:
                await loop.connect_read_pipe(
                    lambda: asyncio.StreamReaderProtocol(reader), sys.stdin.buffer
                )
            except ValueError:  # a regular file, not a pipe: read it in a thread
                threading.Thread(target=_feed, args=(loop, reader), daemon=True).start()
        return self._stdin

    async def receive(self) -> dict[str, Any] | None:
        stdin = await self._open()
        while True:
            try:
                line = await stdin.readline()
            except ValueError:
                say("a message from the host is longer than the proxy reads; dropped")
                continue
            if not line:
                return None
            message = decoded(line)
            if message is not None:
                return message
            if line.strip():
                say("the host sent a line that is not a JSON-RPC message; dropped")

    async def send(self, message: Mapping[str, Any], related: Any = None) -> None:
        data = json.dumps(message, ensure_ascii=False, separators=(",", ":")) + "\n"
        async with self._lock:
            with contextlib.suppress(OSError):  # a host that has gone cannot be told
                sys.stdout.buffer.write(data.encode("utf-8"))
                sys.stdout.buffer.flush()

    def closed(self) -> tuple[str, bool]:
        return "the host closed the session", True

    def on_stop(self, stop: Callable[[str], None]) -> None:
        """Nothing to keep: `serve` gives SIGTERM to the Proxy itself."""


class _ChildLink:
    """A server child process, one JSON-RPC message a line on its stdin and stdout."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self._why = "the MCP server closed its output"

    async def receive(self) -> dict[str, Any] | str | None:
        stdout = self.process.stdout
        assert stdout is not None
        while True:
            try:
                line = await stdout.readline()
            except ValueError:
                return "a line longer than the proxy reads"
            if not line:
                code = await self.process.wait()
                self._why = f"the MCP server exited (status {code})"
                return None
            if not line.strip():
                continue
            message = decoded(line)
            if message is None:
                return f"a line that is not a JSON-RPC message: {line[:120]!r}"
            return message

    async def send(self, message: Mapping[str, Any]) -> None:
        stdin = self.process.stdin
        if stdin is None or self.process.returncode is not None:
            raise ProxyError("the MCP server is not running")
        data = json.dumps(message, ensure_ascii=False, separators=(",", ":")) + "\n"
        try:
            stdin.write(data.encode("utf-8"))
            await stdin.drain()
        except (OSError, RuntimeError) as exc:
            raise ProxyError(f"the MCP server's input is closed: {exc}") from exc

    async def close_input(self) -> None:
        if self.process.stdin is not None:
            with contextlib.suppress(OSError):
                self.process.stdin.close()

    def gone(self) -> str:
        return self._why

    async def stop(self) -> None:
        if self.process.returncode is not None:
            return
        await self.close_input()
        try:
            await asyncio.wait_for(self.process.wait(), 5)
        except TimeoutError:
            self.process.kill()
            await self.process.wait()


def child_server(command: Sequence[str]) -> ServerConnect:
    """Connects to a server started as a child process on stdio, one per session."""
    argv = list(command)

    @contextlib.asynccontextmanager
    async def connect() -> AsyncIterator[ServerLink]:
        try:
            process = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                limit=_LINE_LIMIT,
            )
        except OSError as exc:
            raise StartError(f"cannot start the server {argv[0]!r}: {exc.strerror or exc}") from exc
        link = _ChildLink(process)
        try:
            yield link
        finally:
            await link.stop()

    return connect


def _describe(exc: BaseException) -> str:
    """An exception in a line, the first of a group's (anyio's task groups raise groups)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _feed(loop: asyncio.AbstractEventLoop, reader: asyncio.StreamReader) -> None:
    """Copy this process's stdin into `reader` (for a stdin that is not a pipe)."""
    try:
        while data := os.read(sys.stdin.fileno(), 65536):
            loop.call_soon_threadsafe(reader.feed_data, data)
    finally:
        loop.call_soon_threadsafe(reader.feed_eof)


def say(text: str) -> None:
    """Tell the user something on stderr, under the command's name."""
    print(f"agentfsm mcp-proxy: {text}", file=sys.stderr, flush=True)


def serve(
    policy: Policy,
    connect: ServerConnect,
    observers: Sequence[Any] = (),
    max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
    shadow: Policy | None = None,
    approvals: str | None = None,
) -> int:
    """Serve the host on stdio until it closes the session, or SIGTERM or SIGINT; the exit
    status.

    SIGTERM or SIGINT ends the session as a shutdown does: the calls in flight are answered (their
    result, or an error result saying the proxy stopped), the trace ends interrupted, and the
    proxy exits 0.
    """
    proxy = Proxy(policy, connect, observers, max_result_bytes, shadow=shadow, approvals=approvals)

    # SIGINT too: Claude Code stops a stdio server with SIGINT, then SIGTERM, without
    # closing its input; left to Python's KeyboardInterrupt, the trace was never ended.
    signals = (signal.SIGTERM, signal.SIGINT)

    async def main() -> int:
        loop = asyncio.get_running_loop()
        for sig in signals:
            why = f"the proxy received {sig.name} and stopped"
            loop.add_signal_handler(sig, proxy.terminate, why)
        try:
            return await proxy.run(StdioHost())
        finally:
            for sig in signals:
                loop.remove_signal_handler(sig)

    return asyncio.run(main())
