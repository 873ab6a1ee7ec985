"""Which MCP revision one proxy session serves its host under, and what that changes.

`Proxy` holds one `Era` per session and asks it at the few points where the revisions
differ (see `agentfsm.integrations.mcp._revisions`): how the host's messages are read,
whether a call's `ask` can reach anyone, how the host is asked, how results are shaped.
A session is of one era from its first message on; a message of the other is refused.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from agentfsm._version import __version__
from agentfsm.integrations.mcp._revisions import (
    ELICITING,
    HANDSHAKE,
    STATELESS_NOTIFICATIONS,
    STATELESS_REQUESTS,
    Envelope,
    accepted,
    approved,
    complete_result,
    discover_result,
    elicit_params,
    input_required,
    new_state,
    read_envelope,
    stripped,
    upstream_initialize,
)
from agentfsm.integrations.mcp._wire import elicits

__all__ = ["Era"]

_NOBODY = object()
"""A call's answer has nobody to go to: its host asked and never came back."""


def _key(ident: object) -> tuple[str, Any]:
    return type(ident).__name__, ident


class Session(Protocol):
    """What an `Era` uses of its session (a `Proxy`): its two sides and its notes."""

    elicit_seconds: float

    def note(self, what: str) -> None: ...

    def _start_listing(self, again: bool = False) -> None: ...

    async def send_host(self, message: Mapping[str, Any], related: Any = None) -> None: ...

    async def send_server(self, message: Mapping[str, Any]) -> None: ...

    async def ask_server(self, method: str, params: Any, host_id: Any = None) -> Any: ...

    async def ask_host(self, method: str, params: Any, timeout: float, related: Any) -> Any: ...

    async def reply_error(self, ident: Any, why: str, code: int = -32603) -> None: ...


@dataclass(eq=False)
class _Question:
    """An approval the proxy asked a stateless host, until the host sends the call again."""

    name: str
    arguments: Mapping[str, Any]
    answer: asyncio.Future[tuple[Any, bool]]
    """The retry's id, and whether it approved."""


class Era:
    """One session's revision: handshake (`initialize`) or stateless (an envelope a request).

    Handshake: the host's `initialize` declares elicitation for the session, and only a
    revision that has `elicitation/create` (the one the server agreed) lets it be sent.
    Stateless: each `tools/call` declares its own capabilities; the proxy asks by answering
    the call with an `InputRequiredResult` and decides when the host sends it again.
    """

    def __init__(self, proxy: Session) -> None:
        self.proxy = proxy
        self.stateless: str | None = None
        """The stateless revision the session runs under; None for a handshake session."""
        self.handshake = False
        """Whether the host has sent `initialize`."""
        self.declared = False
        """Whether the handshake host declared form elicitation in its `initialize`."""
        self.agreed: str | None = None
        """The handshake revision the server agreed in its answer to `initialize`."""
        self._initialize_id: Any = None
        self._asks: dict[tuple[str, Any], bool] = {}  # stateless: each call's capability
        self._methods: dict[int, str] = {}  # stateless: forwarded requests' methods
        self._questions: dict[str, _Question] = {}
        self._rebound: dict[tuple[str, Any], Any] = {}  # a call's id -> its retry's id
        self._upstream: asyncio.Task[Mapping[str, Any]] | None = None

    # -- the host's messages -------------------------------------------------------

    async def host_message(self, message: dict[str, Any]) -> dict[str, Any] | None:
        """The host's request or notification as the proxy routes it; None when it was
        taken here (answered or refused)."""
        envelope = read_envelope(message)
        if isinstance(envelope, str):
            await self._refuse(message, envelope, -32602)
            return None
        if envelope is None:
            if self.stateless is not None:
                await self._refuse(message, "a message without its _meta envelope", -32600)
                return None
            if message.get("method") == "initialize":
                self.handshake = True
                self.declared = elicits(message.get("params"))
            return message
        if self.handshake:
            await self._refuse(message, "a stateless request in an initialized session", -32600)
            return None
        self.stateless = envelope.version
        return await self._stateless(message, envelope)

    async def _stateless(
        self, message: dict[str, Any], envelope: Envelope
    ) -> dict[str, Any] | None:
        method = message["method"]
        ident = message.get("id")
        if "id" not in message:
            if method not in STATELESS_NOTIFICATIONS:
                return message  # host_kind drops it, and says so
            return self._cancel(stripped(message))
        if method not in STATELESS_REQUESTS and method != "server/discover":
            return message  # host_kind refuses it, and says so
        try:
            initialized = await self._initialized()
        except Exception as exc:  # the host is told, whatever failed
            await self.proxy.reply_error(ident, f"the MCP server could not be initialized: {exc}")
            return None
        if method == "server/discover":
            await self.proxy.send_host(
                {"jsonrpc": "2.0", "id": ident, "result": discover_result(initialized)}, ident
            )
            return None
        params = message.get("params")
        state = params.get("requestState") if isinstance(params, Mapping) else None
        if method == "tools/call" and state is not None:
            await self._retried(message, state)
            return None
        if method == "tools/call":
            self._asks[_key(ident)] = envelope.elicits()
        return stripped(message)

    def _cancel(self, message: dict[str, Any]) -> dict[str, Any]:
        """A cancellation of a call the host sent again names the call's first id, which the
        proxy still knows it by."""
        params = message.get("params")
        named = params.get("requestId") if isinstance(params, Mapping) else None
        for first, retry in self._rebound.items():
            if retry is not _NOBODY and _key(retry) == _key(named) and isinstance(params, Mapping):
                return {**message, "params": {**params, "requestId": first[1]}}
        return message

    async def _refuse(self, message: Mapping[str, Any], why: str, code: int) -> None:
        self.proxy.note(f"dropped the host's message: {why}")
        if "id" in message:
            await self.proxy.reply_error(message["id"], f"{why}; not sent", code=code)

    async def _initialized(self) -> Mapping[str, Any]:
        """The server's answer to the proxy's own `initialize`, sent once for the session."""
        if self._upstream is None:
            self._upstream = asyncio.ensure_future(self._initialize())
        return await asyncio.shield(self._upstream)

    async def _initialize(self) -> Mapping[str, Any]:
        proxy = self.proxy
        params = upstream_initialize("agentfsm-mcp-proxy", __version__)
        result = await proxy.ask_server("initialize", params)
        version = result.get("protocolVersion") if isinstance(result, Mapping) else None
        if version not in HANDSHAKE:
            raise RuntimeError(
                f"it answered protocol version {version!r}, which the proxy does not model"
            )
        self.agreed = version
        await proxy.send_server({"jsonrpc": "2.0", "method": "notifications/initialized"})
        proxy._start_listing()  # the proxy's own listing, before any call
        return dict(result)

    # -- what the session may ask, and how -----------------------------------------

    def can_ask(self, ident: Any) -> bool:
        """Whether the host of the call `ident` can be asked to approve it."""
        if self.stateless is not None:
            return self._asks.get(_key(ident), False)
        return self.declared and self.agreed in ELICITING

    def unable(self, ident: Any) -> str:
        """Why the host of the call `ident` cannot be asked, in its terms."""
        if self.stateless is not None:
            return "the call declared no MCP elicitation capability in its _meta"
        if self.declared:
            return f"MCP revision {self.agreed}, which the server agreed, has no elicitation"
        return "it declared no MCP elicitation capability"

    async def ask(
        self,
        name: str,
        arguments: Mapping[str, Any],
        message: str,
        ident: Any,
        extra: Mapping[str, Any] | None = None,
    ) -> tuple[bool, Mapping[str, Any]]:
        """Ask the host whether the call `ident` may run: True only for an accept with a yes,
        and the accepted form's content. `extra` adds fields to the form of a handshake
        session (a stateless question is the approval field alone)."""
        question = elicit_params(self.agreed, message, name)
        if self.stateless is None:
            if extra:
                question["requestedSchema"]["properties"].update(extra)
            reply = await self.proxy.ask_host(
                "elicitation/create", question, self.proxy.elicit_seconds, ident
            )
            result = reply.get("result") if isinstance(reply, Mapping) else None
            content = result.get("content") if isinstance(result, Mapping) else None
            return accepted(result), content if isinstance(content, Mapping) else {}
        state = new_state()
        loop = asyncio.get_running_loop()
        self._questions[state] = _Question(name, dict(arguments), loop.create_future())
        now = self._rebound.get(_key(ident), ident)
        result = {"jsonrpc": "2.0", "id": now, "result": input_required(state, question)}
        await self.proxy.send_host(result, now)
        try:
            retry, yes = await asyncio.wait_for(
                self._questions[state].answer, self.proxy.elicit_seconds
            )
        except TimeoutError:
            self._rebound[_key(ident)] = _NOBODY  # answered already: nobody waits for more
            return False, {}
        finally:
            self._questions.pop(state, None)
        self._rebound[_key(ident)] = retry
        self._asks[_key(ident)] = self._asks.pop(_key(retry), False)
        return yes, {}

    async def _retried(self, message: Mapping[str, Any], state: object) -> None:
        """The host sent a call again with its answer: the asked call continues, answered
        under the retry's id. An unknown state, or a retry of another call, approves nothing."""
        params = message["params"]
        question = self._questions.get(state) if isinstance(state, str) else None
        if question is None or question.answer.done():
            why = (
                "a requestState the proxy did not issue, or whose question was answered or expired"
            )
            await self._refuse(message, why, -32602)
            return
        same = (
            params.get("name") == question.name
            and (params.get("arguments") or {}) == question.arguments
        )
        if not same:
            self.proxy.note(
                f"the host's answer about {question.name!r} came with another call; not approved"
            )
        envelope = read_envelope(message)
        self._asks[_key(message["id"])] = isinstance(envelope, Envelope) and envelope.elicits()
        question.answer.set_result((message["id"], same and approved(params)))

    # -- the answers ---------------------------------------------------------------

    def reply_to(self, ident: Any) -> Any:
        """The id the final answer to the host's request `ident` goes under (its retry's, if
        the host sent it again); `None` and False when nobody waits for it."""
        self._asks.pop(_key(ident), None)
        return self._rebound.pop(_key(ident), ident)

    def nobody(self, target: Any) -> bool:
        """Whether `target` (from `reply_to`) means the answer has nobody to go to."""
        return target is _NOBODY

    def shaped(self, method: str | None, result: Any) -> Any:
        """A result as the session's host reads it."""
        return result if self.stateless is None else complete_result(method, result)

    def forwarded(self, host: Mapping[str, Any], sent: Mapping[str, Any]) -> None:
        """Note the host's request `host`, forwarded as `sent`, to shape its answer."""
        method = host.get("method")
        if method == "initialize":
            self._initialize_id = sent.get("id")
        if (
            self.stateless is not None
            and isinstance(method, str)
            and isinstance(sent.get("id"), int)
        ):
            self._methods[sent["id"]] = method

    def answered(self, message: Mapping[str, Any], forward: dict[str, Any]) -> dict[str, Any]:
        """The server's answer to a forwarded host request, as the host gets it."""
        ident = message.get("id")
        if self._initialize_id is not None and ident == self._initialize_id:
            self._initialize_id = None
            result = message.get("result")
            version = result.get("protocolVersion") if isinstance(result, Mapping) else None
            self.agreed = version if isinstance(version, str) else None
        method = self._methods.pop(ident, None) if isinstance(ident, int) else None
        if self.stateless is not None and "result" in forward:
            forward = {**forward, "result": complete_result(method, forward["result"])}
        return forward

    def refuses_server_request(self) -> bool:
        """Whether the server's requests are refused here: a stateless host takes none."""
        return self.stateless is not None
