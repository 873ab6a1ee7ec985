"""Streamable HTTP for `agentfsm mcp-proxy`: a front for hosts that connect by URL, and a
link to a server that is reached by URL.

Both use the `mcp` package's own transports, at the level of JSON-RPC messages, so the
proxy stays a relay (everything it does not take over passes through as it came):

- `serve_http`: each MCP session a host opens is a `StreamableHTTPServerTransport` with
  its own session id, and its own `Proxy` (its own Controller, its own elicitation
  capability from its own `initialize`, its own server child process or server session).
  The package's session manager drives a high-level `Server`; a relay needs the session's
  raw streams, so the session table is kept here, the way that manager keeps it.
- `http_server(url)`: the server's end of a session is a `streamable_http_client`.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from types import FrameType
from typing import Any
from urllib.parse import urlsplit
from uuid import uuid4

import anyio
import anyio.abc
import httpx2
import uvicorn
from mcp.client.streamable_http import streamable_http_client
from mcp.server.streamable_http import (
    MCP_SESSION_ID_HEADER,
    StreamableHTTPServerTransport,
)
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp.shared.message import ClientMessageMetadata, ServerMessageMetadata, SessionMessage
from mcp.types import JSONRPCMessage, jsonrpc_message_adapter
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.types import Message, Receive, Scope, Send

from agentfsm.integrations.mcp._http_stateless import StatelessFront
from agentfsm.integrations.mcp._proxy import (
    GRACE_SECONDS,
    HostSide,
    ProxyError,
    ServerConnect,
    ServerLink,
    StartError,
    say,
)
from agentfsm.integrations.mcp._revisions import STATELESS

__all__ = ["HttpFront", "HttpHost", "check_reachable", "http_server", "parse_listen", "serve_http"]

_CLOSED = (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError)
_SHUTDOWN_SECONDS = GRACE_SECONDS + 15.0
"""How long the sessions get to end at a stop: the calls' grace period, then up to 5 s for a
server child to exit once its input is closed, and the last answers to leave."""

RunSession = Callable[[str, HostSide], Awaitable[int]]
"""Runs one host session to its end: the session id, the host's end; the exit status."""


def _as_message(data: Mapping[str, Any]) -> JSONRPCMessage | None:
    try:
        return jsonrpc_message_adapter.validate_python(dict(data), by_name=False)
    except ValidationError:
        return None


def _as_dict(message: JSONRPCMessage) -> dict[str, Any]:
    return message.model_dump(by_alias=True, mode="json", exclude_unset=True)


# -- the host over HTTP ---------------------------------------------------------------


class HttpHost:
    """One host session's end: the raw streams of its `StreamableHTTPServerTransport`."""

    def __init__(self, read: Any, write: Any) -> None:
        self._read = read
        self._write = write
        self.ending = "the host ended the session"
        self.by_host = True
        self._stop: Callable[[str], None] | None = None
        self._stopped: str | None = None

    async def receive(self) -> dict[str, Any] | None:
        while True:
            try:
                item = await self._read.receive()
            except _CLOSED:
                return None
            if isinstance(item, SessionMessage):
                return _as_dict(item.message)
            say(f"the host sent something that is not MCP ({item}); dropped")

    async def send(self, message: Mapping[str, Any], related: Any = None) -> None:
        parsed = _as_message(message)
        if parsed is None:
            say("a message for the host is not JSON-RPC; dropped")
            return
        # The transport puts a message on the stream of the request it is related to:
        # a question about a call reaches the host on that call's own response stream.
        metadata = None
        if isinstance(related, int | str) and not isinstance(related, bool):
            metadata = ServerMessageMetadata(related_request_id=related)
        with contextlib.suppress(*_CLOSED):
            await self._write.send(SessionMessage(parsed, metadata=metadata))

    def closed(self) -> tuple[str, bool]:
        return self.ending, self.by_host

    def on_stop(self, stop: Callable[[str], None]) -> None:
        self._stop = stop
        if self._stopped is not None:  # stopped before its Proxy began
            stop(self._stopped)

    def stop(self, why: str) -> None:
        """Stop the session from outside: its calls answered, its run ended with `why`."""
        self.ending, self.by_host = why, False
        self._stopped = why
        if self._stop is not None:
            self._stop(why)


class HttpFront:
    """The ASGI app: MCP sessions over streamable HTTP at `path`, each run by `run_session`.

    A session lives until the host ends it (DELETE), its server goes away, the proxy exits,
    or it has been idle for `idle` seconds (None: never): no request of it open, none for
    that long. A host that is there keeps its event stream (a GET) open, so only a session
    whose host went away without ending it expires. A request with an unknown session id
    gets 404, as the transport answers: the host then opens a new session.
    """

    def __init__(
        self,
        run_session: RunSession,
        security: TransportSecuritySettings,
        path: str = "/mcp",
        idle: float | None = None,
        max_sessions: int | None = None,
    ) -> None:
        self.run_session = run_session
        self.security = security
        self.path = path
        self.idle = idle
        self.max_sessions = max_sessions
        """Sessions open at once before a new one is refused (None: no bound)."""
        self.sessions: dict[str, tuple[StreamableHTTPServerTransport, HttpHost | None]] = {}
        self.open_requests: dict[str, Counter[str]] = {}
        """Requests of each session being handled, by HTTP method (a GET is the host's event
        stream; a POST is open until its answers are sent)."""
        self.last_request: dict[str, float] = {}
        self.task_group: anyio.abc.TaskGroup | None = None
        self.stateless = StatelessFront(run_session, security, lambda: self.task_group)
        """The stateless revision's requests, all in one session of their own."""
        self.stopping: str | None = None
        """Why the proxy is stopping (`drain`), once it is: no new session opens."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        if scope["path"].rstrip("/") != self.path:
            await PlainTextResponse("Not Found", status_code=404)(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        version = headers.get(MCP_PROTOCOL_VERSION_HEADER)
        if version in STATELESS:  # one POST, one answer: no session of its own
            if self.stopping is not None:
                why = f"agentfsm mcp-proxy is stopping ({self.stopping}): it takes no new request"
                await _error(why, 503)(scope, receive, send)
                return
            await self.stateless(scope, receive, send, version)
            return
        if version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS:
            why = f"unsupported MCP protocol version {version!r}"
            await _error(why, 400)(scope, receive, send)
            return
        session_id = headers.get(MCP_SESSION_ID_HEADER)
        if session_id is not None:
            found = self.sessions.get(session_id)
            if found is None:
                await _error("Session not found", 404)(scope, receive, send)
                return
            with self._request(session_id, scope["method"]):
                await found[0].handle_request(scope, receive, send)
            return
        if scope["method"] != "POST":
            await _error("Bad Request: Missing session ID", 400)(scope, receive, send)
            return
        if self.stopping is not None:
            why = f"agentfsm mcp-proxy is stopping ({self.stopping}): it opens no new session"
            await _error(why, 503)(scope, receive, send)
            return
        await self._open(scope, receive, send)

    async def _open(self, scope: Scope, receive: Receive, send: Send) -> None:
        """A request without a session id: an `initialize` that opens a session, or a 4xx."""
        assert self.task_group is not None
        # The transport checks Host and Origin too, but only once its session (and its
        # server process) exists: a request from elsewhere starts nothing.
        refused = await TransportSecurityMiddleware(self.security).validate_request(
            Request(scope, receive), is_post=True
        )
        if refused is not None:
            await refused(scope, receive, send)
            return
        if self.max_sessions is not None and len(self.sessions) >= self.max_sessions:
            # Each session holds a server child: past the bound a new one starts nothing.
            say(f"a new session was refused: {len(self.sessions)} are open (--max-sessions)")
            why = (
                f"agentfsm mcp-proxy serves at most {self.max_sessions} sessions at once "
                f"(--max-sessions) and {len(self.sessions)} are open: end one (DELETE), or wait "
                "for an abandoned one to expire (--session-idle)"
            )
            await _error(why, 503)(scope, receive, send)
            return
        transport = StreamableHTTPServerTransport(uuid4().hex, security_settings=self.security)
        session_id = transport.mcp_session_id
        assert session_id is not None
        self.sessions[session_id] = (transport, None)
        await self.task_group.start(self._session, transport)
        status: int | None = None

        async def watch(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            with self._request(session_id, "POST"):
                await transport.handle_request(scope, receive, watch)
        finally:
            if status is None or status >= 400:  # no session was opened
                await self._discard(session_id, transport)

    @contextlib.contextmanager
    def _request(self, session_id: str, method: str) -> Iterator[None]:
        """Count a request of the session as open while it is handled."""
        methods = self.open_requests.setdefault(session_id, Counter())
        methods[method] += 1
        try:
            yield
        finally:
            methods[method] -= 1
            if session_id in self.sessions:
                self.last_request[session_id] = anyio.current_time()

    async def expire_idle(self, scope: anyio.CancelScope) -> None:
        """End the sessions idle for `self.idle` seconds, as the proxy's exit ends them."""
        assert self.idle is not None
        with scope:
            while True:
                await anyio.sleep(min(self.idle / 4, 30.0))
                now = anyio.current_time()
                for session_id, (transport, host) in list(self.sessions.items()):
                    if host is None or any(self.open_requests.get(session_id, {}).values()):
                        continue
                    if now - self.last_request.get(session_id, now) < self.idle:
                        continue
                    say(f"session {session_id} was idle for {self.idle:g} s: ended")
                    host.ending = f"the session was idle for {self.idle:g} s"
                    host.by_host = False
                    with anyio.CancelScope(shield=True):
                        await transport.terminate()

    async def _session(
        self,
        transport: StreamableHTTPServerTransport,
        *,
        task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        session_id = transport.mcp_session_id
        assert session_id is not None
        try:
            async with transport.connect() as (read, write):
                host = HttpHost(read, write)
                if session_id in self.sessions:
                    self.sessions[session_id] = (transport, host)
                if self.stopping is not None:
                    host.stop(self.stopping)
                task_status.started()
                try:
                    await self.run_session(session_id, host)
                except Exception as exc:  # one session's failure must not end the others
                    say(f"session {session_id} failed: {type(exc).__name__}: {exc}")
                await self._answered(session_id)
        finally:
            await self._discard(session_id, transport)

    async def _answered(self, session_id: str) -> None:
        """Wait (a little) for the session's last answers to leave before it is terminated.

        Terminating a transport drops what its open requests still hold; a session whose
        server went away has just answered its calls in flight with errors.
        """
        with anyio.move_on_after(5):
            while self.open_requests.get(session_id, Counter())["POST"] > 0:
                await anyio.sleep(0.05)

    async def _discard(self, session_id: str, transport: StreamableHTTPServerTransport) -> None:
        self.sessions.pop(session_id, None)
        self.last_request.pop(session_id, None)
        self.open_requests.pop(session_id, None)
        if not transport.is_terminated:
            with anyio.CancelScope(shield=True):
                await transport.terminate()

    async def drain(self, why: str) -> None:
        """Stop every session (SIGINT, SIGTERM) and wait for them to end, at most
        `_SHUTDOWN_SECONDS`: no new session opens; each session's calls in flight get their
        results within the grace period, else an error result saying `why`; its trace ends
        interrupted, its server is stopped, its last answers leave."""
        self.stopping = why
        say(f"{why}: ending {len(self.sessions)} open session(s)")
        for _, host in list(self.sessions.values()):
            if host is not None:
                host.stop(why)
        self.stateless.stop(why)
        with anyio.move_on_after(_SHUTDOWN_SECONDS):
            while self.sessions or self.stateless.host is not None:
                await anyio.sleep(0.05)

    async def close_all(self) -> None:
        """End every session left at exit (after `drain`, or when none ran): its transport
        terminated, its run ended by the proxy shutting down."""
        self.stateless.close()
        for transport, host in list(self.sessions.values()):
            if host is not None:
                host.ending, host.by_host = "the proxy shut down", False
            with anyio.CancelScope(shield=True):
                await transport.terminate()


def _error(message: str, status: int) -> Response:
    body = {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": message}}
    return JSONResponse(body, status_code=status)


def parse_listen(text: str) -> tuple[str, int]:
    """`[HOST:]PORT` as (host, port); ValueError naming what is wrong."""
    host, sep, port_text = text.rpartition(":")
    if not sep:
        host = "127.0.0.1"
    host = host.removeprefix("[").removesuffix("]")
    if not host:
        raise ValueError(f"no host before the ':' in {text!r}")
    try:
        port = int(port_text)
    except ValueError:
        raise ValueError(f"the port in {text!r} is not a whole number") from None
    if not 0 <= port <= 65535:
        raise ValueError(f"the port in {text!r} is not between 0 and 65535")
    return host, port


def _security(host: str, port: int) -> TransportSecuritySettings:
    """Only requests addressed to the proxy itself: a web page cannot reach it by a DNS name
    it controls (DNS rebinding), nor from its own origin."""
    names = {host, "127.0.0.1", "localhost", "[::1]"}
    names = {f"[{n}]" if ":" in n and not n.startswith("[") else n for n in names}
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[f"{n}:{port}" for n in sorted(names)],
        allowed_origins=[f"http://{n}:{port}" for n in sorted(names)],
    )


def serve_http(
    run_session: RunSession,
    host: str,
    port: int,
    idle: float | None = None,
    max_sessions: int | None = None,
) -> int:
    """Serve MCP over streamable HTTP on host:port until SIGINT or SIGTERM, which drain every
    session (`HttpFront.drain`); the exit status.

    The URL goes to stdout as its one line once the port is open (port 0 picks a free
    one); everything else goes to stderr. 2 when the port cannot be opened.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        say(f"cannot listen on {host}:{port}: {exc.strerror or exc}")
        return 2
    port = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{port}/mcp"
    front = HttpFront(run_session, _security(host, port), idle=idle, max_sessions=max_sessions)
    config = uvicorn.Config(front, lifespan="off", log_level="warning", timeout_graceful_shutdown=2)
    server = _Server(config, front)

    async def main() -> None:
        server.loop = asyncio.get_running_loop()
        async with anyio.create_task_group() as group:
            front.task_group = group
            expiring = anyio.CancelScope()
            if idle is not None:
                group.start_soon(front.expire_idle, expiring)
            print(url, flush=True)
            say(f"serving MCP over streamable HTTP at {url}")
            try:
                await server.serve(sockets=[sock])
            finally:
                expiring.cancel()
                await front.close_all()
                # After a drain what is left is cut short (each run still ends its trace).
                left = 1.0 if front.stopping is not None else _SHUTDOWN_SECONDS
                group.cancel_scope.deadline = anyio.current_time() + left

    # uvicorn takes SIGINT and SIGTERM while it serves, then raises the signal again for
    # the handlers it found: those must let the sessions end (traces, server processes).
    previous = {sig: signal.signal(sig, _noted) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        asyncio.run(main())
    finally:
        sock.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0


def _noted(sig: int, frame: object) -> None:
    """The handler uvicorn's second raise of a signal reaches: the shutdown is under way."""


class _Server(uvicorn.Server):
    """uvicorn's server, but its first SIGINT or SIGTERM drains the sessions
    (`HttpFront.drain`) before uvicorn's own shutdown: that one closes the open requests
    after its graceful timeout, and the event streams of calls in flight would end empty.
    A second signal during the drain is uvicorn's: it shuts down at once."""

    def __init__(self, config: uvicorn.Config, front: HttpFront) -> None:
        super().__init__(config)
        self.front = front
        self.loop: asyncio.AbstractEventLoop | None = None
        self._draining = False
        self._drain_task: asyncio.Future[None] | None = None

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self._draining or self.loop is None:
            super().handle_exit(sig, frame)
            return
        why = f"the proxy received {signal.Signals(sig).name} and stopped"
        # A signal handler runs between any two bytecodes: the drain starts on the loop.
        self._draining = True
        self.loop.call_soon_threadsafe(self._drain, why)

    def _drain(self, why: str) -> None:
        # A task of its own (anyio's task group takes tasks only from a task): kept here.
        self._drain_task = asyncio.ensure_future(self._drain_then_exit(why))

    async def _drain_then_exit(self, why: str) -> None:
        try:
            await self.front.drain(why)
        finally:
            self.should_exit = True  # uvicorn's shutdown: the connections left close


# -- the server over HTTP -------------------------------------------------------------


class _HttpLink:
    """The server's end over a `streamable_http_client`: one MCP session at the server."""

    def __init__(self, read: Any, write: Any) -> None:
        self._read = read
        self._write = write
        self._closing = asyncio.Event()
        self._why = "the connection to the MCP server closed"
        self._initialize: Any = None  # the id of the host's initialize, until answered
        self._version: str | None = None

    async def receive(self) -> dict[str, Any] | str | None:
        getting = asyncio.ensure_future(self._read.receive())
        closing = asyncio.ensure_future(self._closing.wait())
        try:
            await asyncio.wait({getting, closing}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            closing.cancel()
            if not getting.done():
                getting.cancel()
        if not getting.done() or getting.cancelled():
            return None
        try:
            item = getting.result()
        except _CLOSED:
            return None
        if not isinstance(item, SessionMessage):
            return f"something that is not MCP ({item})"
        message = _as_dict(item.message)
        if self._initialize is not None and message.get("id") == self._initialize:
            self._initialize = None
            result = message.get("result")
            version = result.get("protocolVersion") if isinstance(result, Mapping) else None
            self._version = version if isinstance(version, str) else None
        return message

    async def send(self, message: Mapping[str, Any]) -> None:
        parsed = _as_message(message)
        if parsed is None:
            raise ProxyError("a message for the MCP server is not JSON-RPC")
        if message.get("method") == "initialize":
            self._initialize = message.get("id")
        # The protocol has each request after `initialize` name the version it agreed.
        metadata = None
        if self._version is not None:
            metadata = ClientMessageMetadata(headers={MCP_PROTOCOL_VERSION_HEADER: self._version})
        try:
            await self._write.send(SessionMessage(parsed, metadata=metadata))
        except _CLOSED as exc:
            raise ProxyError("the connection to the MCP server is closed") from exc

    async def close_input(self) -> None:
        self._closing.set()

    def gone(self) -> str:
        return self._why


_UPSTREAM_TIMEOUT = httpx2.Timeout(30.0, read=300.0)
"""Seconds to connect, write and wait for a pooled connection; to read: the mcp package's."""


def http_server(
    url: str, headers: Mapping[str, str] | None = None, auth: httpx2.Auth | None = None
) -> ServerConnect:
    """Connects to a streamable HTTP MCP server at `url`, one MCP session per host session,
    sending `headers` (an API key, say) with every request, and authorized by `auth` (the
    OAuth client of `_oauth.oauth_client`) when given."""
    sent = dict(headers or {})

    async def refused(response: httpx2.Response) -> None:
        # The mcp client tells the host only that the server answered an error; the one
        # running the proxy learns here which, and what to give.
        if response.status_code in (401, 403):
            say(
                f"the MCP server at {url} answered {response.status_code} "
                f"{response.reason_phrase}: give what it asks for with --header, or --oauth "
                "when it uses MCP's OAuth authorization"
            )

    @contextlib.asynccontextmanager
    async def connect() -> AsyncIterator[ServerLink]:
        # The client the mcp transport takes (its type names httpx2), with the transport's
        # own default timeouts: a long read, since the server may hold the event stream
        # open. A client given to the transport is not closed by it, so it is closed here.
        async with (
            httpx2.AsyncClient(
                headers=sent,
                timeout=_UPSTREAM_TIMEOUT,
                event_hooks={"response": [refused]},
                auth=auth,
            ) as client,
            streamable_http_client(url, http_client=client) as (read, write),
        ):
            yield _HttpLink(read, write)

    return connect


def check_reachable(url: str) -> None:
    """StartError unless `url` is an http(s) URL whose host accepts a connection."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise StartError(f"--url must be an http:// or https:// URL with a host, not {url!r}")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise StartError(f"the port in --url {url!r} is not a number") from None
    try:
        socket.create_connection((parts.hostname, port), timeout=10).close()
    except OSError as exc:
        raise StartError(f"cannot reach the MCP server at {url}: {exc.strerror or exc}") from exc
