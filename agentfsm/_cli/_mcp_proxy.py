"""The MCP proxy behind `agentfsm mcp-proxy`: a policy between an MCP host and a server.

It relays JSON-RPC messages between the host and the server and takes over three kinds of
message. The host talks to the proxy over stdio (this process's stdin/stdout) or, through
`agentfsm._cli._mcp_http`, over streamable HTTP with one Proxy per MCP session; the server
is a child process on stdio or a streamable HTTP server reached by URL (`http_server`).

- `tools/call`: each call is one turn of a session-long Controller (a model turn holding
  that one call; its result the tool result), so permissions, shell-aware rules, budgets
  and the doom-loop guard apply as they do to an agent. A call the Controller does not
  clear never reaches the server: the host gets a tool error result saying why. `ask`
  becomes an `elicitation/create` to the host when it declared the capability; anything
  but an explicit accept with a yes denies. Calls are taken one at a time.
- `tools/list` (the host's, and the proxy's own after `notifications/tools/list_changed`):
  each tool's description and input schema are pinned at first sight; a tool that later
  changes is flagged in the listing and every call to it is asked again (denied without
  elicitation). Tool annotations are `ask` defaults through `_mcp_hints.with_hints`.
- the server's answers to calls: cut to a size, checked for shape; a malformed line or a
  server that exits answers every call in flight with an error result.

Everything else passes through unchanged. On stdio, stdout carries only MCP messages; what
the proxy has to say goes to stderr. When the session ends (the host closed it, the server
went away, a guard stopped it) the Controller's run ends too, so a trace ends with an end
event that `agentfsm replay` reads as a finished run.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import sys
import threading
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

from agentfsm._cli._mcp_wire import (
    Pins,
    cap_result,
    decoded,
    elicits,
    error_result,
    flag_changed,
    malformed_result,
    result_text,
    server_error,
)
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
from agentfsm.integrations._mcp_hints import changes_things, with_hints

__all__ = [
    "DEFAULT_MAX_RESULT_BYTES",
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
_OUR_IDS = "agentfsm-proxy-"
"""The prefix of the ids of the proxy's own requests; replies to them never pass through."""


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


def session_policy(policy: Policy) -> Policy:
    """The policy a proxy session runs under.

    Every call is a turn, so the Policy's default `max_turns` (50, sized for an agent's
    run) would stop an editor's session after 50 calls. The proxy takes `max_turns` only
    from a policy that sets it; the other budgets apply as written.
    """
    if "max_turns" in policy.model_fields_set:
        return policy
    return policy.model_copy(update={"max_turns": UNLIMITED_TURNS})


class Proxy:
    """One session between a host and a server, under a policy.

    Args:
        policy: The policy every call is checked against (through `session_policy`).
        connect: Opens the server's end: `child_server(command)` or `http_server(url)`.
        observers: The Controller's observers (a TraceWriter), if any.
        max_result_bytes: The largest tool result passed on whole.
        run_id: The Controller's run id (the HTTP session's id), or a random one.
    """

    def __init__(
        self,
        policy: Policy,
        connect: ServerConnect,
        observers: Sequence[Any] = (),
        max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
        run_id: str | None = None,
    ) -> None:
        self.policy = session_policy(policy)
        self.connect = connect
        self.observers = list(observers)
        self.max_result_bytes = max_result_bytes
        self.run_id = run_id
        self.pins = Pins()
        self.controller: Controller | None = None
        self.hinted: frozenset[str] = frozenset()
        self.can_elicit = False
        self._ids = itertools.count(1)
        self._to_server: dict[Any, asyncio.Future[Any]] = {}
        self._to_host: dict[Any, asyncio.Future[Any]] = {}
        self._in_flight: dict[Any, Any] = {}  # the host's request id -> the proxy's id
        self._cancelled_ids: set[Any] = set()  # the host's requests cancelled before sent
        self._one_call = asyncio.Lock()
        self._tasks: set[asyncio.Task[None]] = set()
        self._server_gone: str | None = None
        self._link: ServerLink | None = None
        self._host: HostSide | None = None
        self._calling: Any = None  # the host's id of the tools/call now at the server
        self._closing = False  # the host has closed the session; the server may go

    # -- the two sides ------------------------------------------------------------

    async def run(self, host: HostSide) -> int:
        """Relay until the host closes the session (0) or the server goes away (1).

        2 when the server cannot be started or reached at all. However the session ends,
        its Controller's run ends with it (an end event in the trace).
        """
        self._host = host
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
            why, by_host = host.closed() if status == 0 else (self._server_gone or "", False)
        await self._drain()
        for task in list(self._tasks):
            task.cancel()
        self._end(why, by_host, started=status != 2)
        return status

    async def _relay(self, link: ServerLink) -> int:
        server = asyncio.create_task(self._read_server(link))
        host = asyncio.create_task(self._read_host())
        try:
            done, _ = await asyncio.wait({server, host}, return_when=asyncio.FIRST_COMPLETED)
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
            await asyncio.wait(set(self._tasks), timeout=5)

    async def _read_host(self) -> None:
        assert self._host is not None
        while (message := await self._host.receive()) is not None:
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
        for future in self._to_server.values():
            if not future.done():
                future.set_exception(ProxyError(why))
        self._to_server.clear()

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
        """Send a request to the server under the proxy's own id; its result, or ProxyError.

        `host_id` is the id of the host's request it carries, so the host's cancellation
        of that request reaches the server under the proxy's id.
        """
        ident = f"{_OUR_IDS}{next(self._ids)}"
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._to_server[ident] = future
        if host_id is not None:
            self._in_flight[host_id] = ident
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": ident, "method": method}
        if params is not None:
            message["params"] = params
        try:
            await self.send_server(message)
            return await future
        finally:
            self._to_server.pop(ident, None)
            if host_id is not None:
                self._in_flight.pop(host_id, None)

    async def ask_host(self, method: str, params: Any, timeout: float, related: Any) -> Any:
        """Send a request of the proxy's own to the host; its reply message, None on timeout."""
        ident = f"{_OUR_IDS}{next(self._ids)}"
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._to_host[ident] = future
        try:
            await self.send_host(
                {"jsonrpc": "2.0", "id": ident, "method": method, "params": params}, related
            )
            return await asyncio.wait_for(future, timeout)
        except TimeoutError:
            return None
        finally:
            self._to_host.pop(ident, None)

    # -- routing ------------------------------------------------------------------

    async def _from_host(self, message: dict[str, Any]) -> None:
        method = message.get("method")
        if method is None:  # a reply: to the proxy's question, else to the server's
            future = self._to_host.pop(message.get("id"), None)
            if future is not None:
                if not future.done():
                    future.set_result(message)
                return
            await self._forward(message)
            return
        if method == "initialize":
            self.can_elicit = elicits(message.get("params"))
        if method == "notifications/cancelled":
            message = self._cancelled(message)
        if method in ("tools/call", "tools/list") and "id" in message:
            self._spawn(self._handle(message))
            return
        await self._forward(message)

    def _cancelled(self, message: dict[str, Any]) -> dict[str, Any]:
        """The host's cancellation, under the proxy's id when it carried the request.

        The request's wait ends here: a server told to cancel need not answer, and a call
        left waiting would hold every later call behind it.
        """
        params = message.get("params")
        if isinstance(params, Mapping) and params.get("requestId") in self._in_flight:
            ours = self._in_flight[params["requestId"]]
            future = self._to_server.pop(ours, None)
            if future is not None and not future.done():
                future.set_exception(ProxyError("the host cancelled the request"))
            return {**message, "params": {**params, "requestId": ours}}
        if isinstance(params, Mapping) and len(self._cancelled_ids) < 10_000:
            self._cancelled_ids.add(params.get("requestId"))  # a call still waiting its turn
        return message

    async def _forward(self, message: Mapping[str, Any]) -> None:
        try:
            await self.send_server(message)
        except ProxyError as exc:
            if "id" in message and "method" in message:
                await self.reply_error(message["id"], str(exc))

    async def _from_server(self, message: dict[str, Any]) -> None:
        if "method" not in message:
            ident = message.get("id")
            future = self._to_server.pop(ident, None)
            if future is not None and not future.done():
                if "error" in message or "result" not in message:
                    future.set_exception(ProxyError(server_error(message)))
                else:
                    future.set_result(message["result"])
            # A late reply to a request already answered (the proxy's own) is dropped.
            if future is None and not (isinstance(ident, str) and ident.startswith(_OUR_IDS)):
                await self.send_host(message, ident)
            return
        if message["method"] == "notifications/tools/list_changed":
            self._spawn(self._relist())
        # Calls run one at a time, so what the server says while one runs belongs to it
        # (progress, its own questions): over HTTP it goes on that call's stream.
        await self.send_host(message, self._calling)

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
        except Exception as exc:  # the host gets an answer whatever failed here
            why = str(exc) if isinstance(exc, ProxyError) else f"{type(exc).__name__}: {exc}"
            if not isinstance(exc, ProxyError):
                say(f"{message['method']} failed: {why}")
            if message["method"] == "tools/call":
                await self.reply(ident, error_result(f"agentfsm mcp-proxy: {why}"))
            else:
                await self.reply_error(ident, why)
            return
        await self.reply(ident, result)

    async def reply(self, ident: Any, result: Any) -> None:
        """Answer the host's request `ident` with `result`."""
        await self.send_host({"jsonrpc": "2.0", "id": ident, "result": result}, ident)

    async def reply_error(self, ident: Any, why: str) -> None:
        """Answer the host's request `ident` with a JSON-RPC error."""
        error = {"code": -32603, "message": f"agentfsm mcp-proxy: {why}"}
        await self.send_host({"jsonrpc": "2.0", "id": ident, "error": error}, ident)

    async def _list(self, params: Any, ident: Any) -> Any:
        result = await self.ask_server("tools/list", params, ident)
        tools = result.get("tools") if isinstance(result, Mapping) else None
        if not isinstance(tools, list):
            return result
        self.pins.see(tools)
        return {**result, "tools": flag_changed(tools, self.pins.changed)}

    async def _relist(self) -> None:
        """List the server's tools again after it said they changed, following pages."""
        cursor = None
        with contextlib.suppress(ProxyError):
            for _ in range(100):
                params = {"cursor": cursor} if cursor else None
                result = await self.ask_server("tools/list", params)
                if not isinstance(result, Mapping) or not isinstance(result.get("tools"), list):
                    return
                changed = self.pins.see(result["tools"])
                if changed:
                    say(f"tools changed since first listed: {', '.join(sorted(changed))}")
                cursor = result.get("nextCursor")
                if not isinstance(cursor, str) or not cursor:
                    return

    # -- one tool call, one turn of the session -----------------------------------

    async def _call(self, params: Any, ident: Any) -> dict[str, Any]:
        if not isinstance(params, Mapping) or not isinstance(params.get("name"), str):
            return error_result("agentfsm mcp-proxy: tools/call without a tool name")
        arguments = params.get("arguments") or {}
        if not isinstance(arguments, Mapping):
            return error_result("agentfsm mcp-proxy: the call's arguments are not an object")
        async with self._one_call:
            if ident in self._cancelled_ids:
                self._cancelled_ids.discard(ident)
                return error_result("agentfsm mcp-proxy: the host cancelled the call")
            return await self._decide(params, ident, dict(arguments))

    def _session(self) -> Controller:
        """The session's Controller, made at its first call with the hints seen by then."""
        if self.controller is None:
            hinted = with_hints(self.policy, self.pins.annotations)
            self.hinted = frozenset(self.pins.annotations)
            self.controller = Controller(hinted, run_id=self.run_id, observers=self.observers)
        return self.controller

    def _extra_care(self, name: str) -> str | None:
        """Why a call the policy clears must still be asked: a changed or late-hinted tool."""
        if name in self.pins.changed:
            return f"tool {name!r} changed since it was first listed"
        if name not in self.hinted and name in self.pins.annotations:
            late = with_hints(self.policy, {name: self.pins.annotations[name]})
            if late is not self.policy and changes_things(self.pins.annotations[name]):
                return f"tool {name!r} was listed after the session began and may change things"
        return None

    async def _decide(
        self, params: Mapping[str, Any], ident: Any, args: dict[str, Any]
    ) -> dict[str, Any]:
        ctl = self._session()
        name = params["name"]
        if ctl.done:
            why = ctl.exit_reason.value if ctl.exit_reason else "ended"
            return error_result(f"agentfsm: the session has stopped ({why}); nothing runs")
        call = ToolCall(id=f"call-{next(self._ids)}", name=name, arguments=args)
        turn = ModelTurn(tool_calls=[call], finish_reason=FinishReason.TOOL_CALLS)
        decision = ctl.on_model_output(turn)
        care = self._extra_care(name)
        if decision.action is Action.ASK_HUMAN:
            why = "; ".join(filter(None, [decision.reason, care]))
            yes = await self._elicit(call, why, ident)
            no = None if yes else "not approved through MCP elicitation"
            decision = ctl.on_human_reply(yes, no)
            care = None
        if decision.action is not Action.EXECUTE_TOOLS or not ctl.claim(call.id, name, args):
            return _refusal(decision, call.id)
        if care is not None and not await self._elicit(call, care, ident):
            why = f"not executed: {care}, and it was not approved"
            ctl.on_tool_results(
                [ToolResult(call_id=call.id, name=name, content=why, is_error=True)]
            )
            return error_result(f"agentfsm: {why}")
        return await self._execute(ctl, call, params, ident)

    async def _execute(
        self, ctl: Controller, call: ToolCall, params: Mapping[str, Any], ident: Any
    ) -> dict[str, Any]:
        self._calling = ident
        try:
            result = await self.ask_server("tools/call", dict(params), ident)
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
        return result

    async def _elicit(self, call: ToolCall, why: str, related: Any) -> bool:
        """Ask the host's user whether `call` may run; True only for an accept with a yes."""
        if not self.can_elicit:
            return False
        shown = json.dumps(call.arguments, ensure_ascii=False)[:2000]
        params = {
            "mode": "form",
            "message": f"Run tool {call.name} with {shown}? ({why})",
            "requestedSchema": {
                "type": "object",
                "properties": {"approve": {"type": "boolean", "title": f"Run {call.name}?"}},
                "required": ["approve"],
            },
        }
        reply = await self.ask_host("elicitation/create", params, _ELICIT_SECONDS, related)
        result = reply.get("result") if isinstance(reply, Mapping) else None
        if not isinstance(result, Mapping) or result.get("action") != "accept":
            return False
        content = result.get("content")
        return isinstance(content, Mapping) and content.get("approve") is True


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
) -> int:
    """Serve the host on stdio until it closes the session; the exit status."""
    proxy = Proxy(policy, connect, observers, max_result_bytes)
    return asyncio.run(proxy.run(StdioHost()))
