"""Streamable HTTP for hosts of the stateless MCP revision (2026-07-28).

A stateless request is one POST with its own envelope, no session id, its answer the
POST's response. The proxy's policy still needs a run to count calls in, and an `ask`
needs the host's retry to find the call that waits on it, so every stateless request to
one proxy goes to one `Proxy` (one Controller, one server session, one trace), started at
the first such request and again after it ends.

Hosts choose their JSON-RPC ids, and two hosts may send the same one at once: each POST's
request reaches the Proxy under an id of its own (`s1`, `s2`, ...) and its answer goes back
under the host's. Answers are JSON; what the server says meanwhile (progress) is dropped.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any
from uuid import uuid4

import anyio.abc
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import Receive, Scope, Send

from agentfsm.integrations.mcp._proxy import HostSide, say
from agentfsm.integrations.mcp._revisions import read_envelope

__all__ = ["StatelessFront", "StatelessHost"]

_CLOSED = object()


class StatelessHost:
    """The host side of the one stateless session: the POSTs' requests, in the order they
    came, and their answers back to the POSTs that wait for them."""

    def __init__(self) -> None:
        self._inbox: asyncio.Queue[Any] = asyncio.Queue()
        self._waiting: dict[str, tuple[Any, asyncio.Future[dict[str, Any]]]] = {}
        self._ids = itertools.count(1)
        self.ending = "the proxy shut down"
        self._stop: Callable[[str], None] | None = None

    async def ask(self, message: Mapping[str, Any]) -> dict[str, Any]:
        """Hand the Proxy one host request; its answer, under the host's own id."""
        inner = f"s{next(self._ids)}"
        answer: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[inner] = (message["id"], answer)
        try:
            await self._inbox.put({**message, "id": inner})
            return await answer
        finally:
            self._waiting.pop(inner, None)

    def close(self, why: str) -> None:
        """No more requests come: the session ends once its calls are answered."""
        self.ending = why
        self._inbox.put_nowait(_CLOSED)

    async def receive(self) -> dict[str, Any] | None:
        item = await self._inbox.get()
        if item is _CLOSED:
            self._inbox.put_nowait(_CLOSED)  # every later receive ends too
            return None
        return dict(item)

    async def send(self, message: Mapping[str, Any], related: Any = None) -> None:
        if "method" in message:
            return  # a notification: a stateless answer is one JSON body
        inner = message.get("id")
        found = self._waiting.get(inner) if isinstance(inner, str) else None
        if found is None:
            return  # its POST has gone
        host_id, answer = found
        if not answer.done():
            answer.set_result({**message, "id": host_id})

    def closed(self) -> tuple[str, bool]:
        return self.ending, False

    def on_stop(self, stop: Callable[[str], None]) -> None:
        self._stop = stop

    def stop(self, why: str) -> None:
        """Stop the session (SIGTERM): its calls answered within the grace, its run ended."""
        self.ending = why
        if self._stop is not None:
            self._stop(why)

    def abandon(self) -> None:
        """The session has ended: the requests it will never answer get an error."""
        for host_id, answer in list(self._waiting.values()):
            if not answer.done():
                error = {"code": -32603, "message": f"agentfsm mcp-proxy: {self.ending}"}
                answer.set_result({"jsonrpc": "2.0", "id": host_id, "error": error})


class StatelessFront:
    """The stateless POSTs of an `HttpFront`: checked, then answered by the one session.

    Args:
        run_session: Runs a session to its end (the front's).
        security: The Host and Origin checks (the front's).
        group: The task group sessions run in, once the front serves.
    """

    def __init__(
        self,
        run_session: Callable[[str, HostSide], Awaitable[int]],
        security: TransportSecuritySettings,
        group: Callable[[], anyio.abc.TaskGroup | None],
    ) -> None:
        self.run_session = run_session
        self.security = security
        self.group = group
        self.host: StatelessHost | None = None

    def _session(self) -> StatelessHost:
        if self.host is None:
            group = self.group()
            assert group is not None
            host = StatelessHost()
            self.host = host
            group.start_soon(self._run, host)
        return self.host

    async def _run(self, host: StatelessHost) -> None:
        session_id = f"stateless-{uuid4().hex[:12]}"
        try:
            await self.run_session(session_id, host)
        except Exception as exc:  # a failed session must not end the others
            say(f"session {session_id} failed: {type(exc).__name__}: {exc}")
        finally:
            if self.host is host:
                self.host = None
            host.close("the session ended")
            host.abandon()

    def close(self) -> None:
        if self.host is not None:
            self.host.close("the proxy shut down")

    def stop(self, why: str) -> None:
        if self.host is not None:
            self.host.stop(why)

    async def __call__(self, scope: Scope, receive: Receive, send: Send, version: str) -> None:
        request = Request(scope, receive)
        refused = await TransportSecurityMiddleware(self.security).validate_request(
            request, is_post=scope["method"] == "POST"
        )
        if refused is not None:
            await refused(scope, receive, send)
            return
        if scope["method"] != "POST":
            await Response(status_code=405, headers={"Allow": "POST"})(scope, receive, send)
            return
        try:
            message = json.loads(await request.body())
        except (ValueError, RecursionError):
            await _error(None, -32700, "Parse error", 400)(scope, receive, send)
            return
        if not isinstance(message, dict) or not isinstance(message.get("method"), str):
            why = "the body must be one JSON-RPC request or notification"
            await _error(None, -32600, why, 400)(scope, receive, send)
            return
        if "id" not in message:  # the revision has no notifications to act on over HTTP
            await Response(status_code=202)(scope, receive, send)
            return
        ident = message["id"]
        if isinstance(ident, bool) or not isinstance(ident, int | str):
            why = "a request's id must be a string or a whole number"
            await _error(None, -32600, why, 400)(scope, receive, send)
            return
        envelope = read_envelope(message)
        if isinstance(envelope, str) or envelope is None or envelope.version != version:
            why = "the request's _meta envelope does not name the MCP-Protocol-Version header's"
            await _error(message.get("id"), -32020, why, 400)(scope, receive, send)
            return
        answer = await self._session().ask(message)
        await JSONResponse(answer)(scope, receive, send)


def _error(ident: Any, code: int, message: str, status: int) -> Response:
    body = {"jsonrpc": "2.0", "id": ident, "error": {"code": code, "message": message}}
    return JSONResponse(body, status_code=status)
