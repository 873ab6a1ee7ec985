"""What the MCP proxy reads and writes on the wire: tool pins, tool results, messages.

Plain functions over JSON-RPC data as decoded from a line (dicts and lists), shared by
`agentfsm.integrations.mcp._proxy`; nothing here does I/O.
"""

from __future__ import annotations

import difflib
import fnmatch
import hashlib
import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentfsm._permissions import Rule, is_glob, never_applies

__all__ = [
    "HOST_NOTIFICATIONS",
    "HOST_REQUESTS",
    "SERVER_NOTIFICATIONS",
    "SERVER_REQUESTS",
    "HostRequest",
    "Ledger",
    "Pins",
    "Relay",
    "ServerRequest",
    "cap_result",
    "decoded",
    "digest",
    "elicits",
    "error_result",
    "flag_changed",
    "host_kind",
    "listed_tools",
    "malformed_result",
    "result_text",
    "same_id",
    "server_error",
    "unfit_rules",
    "unlisted_names",
]

_CHANGED_FLAG = "[agentfsm: this tool changed since it was first listed; calls are asked again]"


HOST_REQUESTS = frozenset(
    {
        "initialize",
        "ping",
        "tools/list",
        "tools/call",
        "resources/list",
        "resources/templates/list",
        "resources/read",
        "resources/subscribe",
        "resources/unsubscribe",
        "prompts/list",
        "prompts/get",
        "completion/complete",
        "logging/setLevel",
    }
)
"""The requests a host may send that the proxy forwards (`tools/*` it decides itself)."""
HOST_NOTIFICATIONS = frozenset(
    {
        "notifications/initialized",
        "notifications/cancelled",
        "notifications/progress",
        "notifications/roots/list_changed",
    }
)
"""The notifications a host may send that the proxy forwards (a cancellation renumbered)."""


SERVER_REQUESTS = frozenset({"ping", "roots/list", "sampling/createMessage", "elicitation/create"})
"""The requests a server may send that the proxy forwards to the host (under its own id):
every server-to-client request of the revisions the `mcp` package knows (`tasks/*` left out,
as the package leaves them out)."""
SERVER_NOTIFICATIONS = frozenset(
    {
        "notifications/cancelled",
        "notifications/message",
        "notifications/progress",
        "notifications/prompts/list_changed",
        "notifications/resources/list_changed",
        "notifications/resources/updated",
        "notifications/tools/list_changed",
        "notifications/elicitation/complete",
        "notifications/subscriptions/acknowledged",
    }
)
"""The notifications a server may send that the proxy forwards (a cancellation renumbered)."""


def host_kind(message: Mapping[str, Any]) -> str:
    """What the host's message is: "answer", "request", "notification", or why it is dropped.

    Only what the proxy models passes: a request of a method in `HOST_REQUESTS` under a
    string or whole-number id, a notification (no id) of a method in `HOST_NOTIFICATIONS`,
    an answer (no method) under any id (the ledger takes only its own). Anything else, a
    `tools/call` without an id or under a `null`, `true`, `1.5` or object id included, is
    not forwarded.
    """
    return _kind(message, HOST_REQUESTS, HOST_NOTIFICATIONS)


def server_kind(message: Mapping[str, Any]) -> str:
    """What the server's message is: "answer", "request", "notification", or why it is dropped.

    The same closed rule as `host_kind`, the other way, over `SERVER_REQUESTS` and
    `SERVER_NOTIFICATIONS`: a hostile or newer server's other messages never reach the host.
    """
    return _kind(message, SERVER_REQUESTS, SERVER_NOTIFICATIONS)


def _kind(
    message: Mapping[str, Any], requests: frozenset[str], notifications: frozenset[str]
) -> str:
    if "method" not in message:
        return "answer"
    method = message["method"]
    if not isinstance(method, str):
        return "a message whose method is not a string"
    if "id" not in message:
        if method in notifications:
            return "notification"
        return f"a notification {method!r} the proxy does not forward"
    ident = message["id"]
    if isinstance(ident, bool) or not isinstance(ident, int | str):
        return f"a {method!r} request under an id that is not a string or whole number"
    if method not in requests:
        return f"a request {method!r} the proxy does not forward"
    return "request"


def digest(tool: Mapping[str, Any]) -> str:
    """The pin of a listed tool: a hash of its description, input schema and annotations."""
    pinned = {
        "description": tool.get("description"),
        "inputSchema": tool.get("inputSchema"),
        "annotations": tool.get("annotations"),
    }
    text = json.dumps(pinned, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass
class Pins:
    """Each tool's pin from its first listing, and the tools that changed since."""

    first: dict[str, str] = field(default_factory=dict)
    changed: set[str] = field(default_factory=set)

    def see(self, tools: Sequence[Any]) -> list[str]:
        """Record a listing; return the names of the tools that differ from their pin."""
        found = []
        for tool in tools:
            if not isinstance(tool, Mapping) or not isinstance(tool.get("name"), str):
                continue
            name = tool["name"]
            pin = digest(tool)
            if self.first.setdefault(name, pin) != pin:
                self.changed.add(name)
            if name in self.changed:
                found.append(name)
        return found


def flag_changed(tools: Sequence[Any], changed: set[str]) -> list[Any]:
    """The listing with each changed tool's description prefixed by a warning."""
    flagged = []
    for tool in tools:
        if isinstance(tool, Mapping) and tool.get("name") in changed:
            said = tool.get("description")
            text = f"{_CHANGED_FLAG} {said}" if isinstance(said, str) else _CHANGED_FLAG
            tool = {**tool, "description": text}
        flagged.append(tool)
    return flagged


def error_result(text: str) -> dict[str, Any]:
    """A `tools/call` result that tells the host the call failed, and why."""
    return {"content": [{"type": "text", "text": text}], "isError": True}


def result_text(result: Mapping[str, Any]) -> str:
    """The text blocks of a `tools/call` result, joined: what the trace records."""
    blocks = result.get("content")
    if not isinstance(blocks, list):
        return ""
    return "\n".join(
        b["text"] for b in blocks if isinstance(b, Mapping) and isinstance(b.get("text"), str)
    )


def cap_result(result: dict[str, Any], max_bytes: int) -> dict[str, Any]:
    """`result` when its JSON fits `max_bytes`, else its text cut to fit with a note."""
    size = len(json.dumps(result, ensure_ascii=False, default=str).encode("utf-8"))
    if size <= max_bytes:
        return result
    text = result_text(result)
    keep = text.encode("utf-8")[: max(max_bytes - 200, 0)].decode("utf-8", "ignore")
    note = f"\n[agentfsm: result cut from {size} to about {max_bytes} bytes]"
    return {
        "content": [{"type": "text", "text": keep + note}],
        "isError": bool(result.get("isError")),
    }


def malformed_result(result: object) -> str | None:
    """Why a server's `tools/call` result is not one, or None when it is."""
    if not isinstance(result, Mapping):
        return f"the result is a {type(result).__name__}, not an object"
    blocks = result.get("content")
    if not isinstance(blocks, list) or not all(isinstance(b, Mapping) for b in blocks):
        return "the result's content is not a list of content blocks"
    if "isError" in result and not isinstance(result["isError"], bool):
        return "the result's isError is not a boolean"
    return None


def elicits(params: object) -> bool:
    """Whether the host's `initialize` declared form elicitation."""
    if not isinstance(params, Mapping):
        return False
    caps = params.get("capabilities")
    found = caps.get("elicitation") if isinstance(caps, Mapping) else None
    if not isinstance(found, Mapping):
        return False
    return "form" in found or "url" not in found


def decoded(line: bytes) -> dict[str, Any] | None:
    """A JSON-RPC message from a line, or None when it is not one."""
    try:
        message = json.loads(line)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return None
    if "method" not in message and "id" not in message:
        return None
    return message


def server_error(message: Mapping[str, Any]) -> str:
    error = message.get("error")
    if isinstance(error, Mapping):
        return f"the MCP server answered with an error: {error.get('message', error)}"
    return "the MCP server answered with neither a result nor an error"


def listed_tools(page: object) -> list[Mapping[str, Any]] | None:
    """The tools of one `tools/list` result page, or None when it is not a listing.

    A tool without a string name cannot be called by name: it is left out.
    """
    tools = page.get("tools") if isinstance(page, Mapping) else None
    if not isinstance(tools, list):
        return None
    return [t for t in tools if isinstance(t, Mapping) and isinstance(t.get("name"), str)]


def unfit_rules(
    rules: Sequence[Rule], tools: Mapping[str, Mapping[str, Any]], only: str | None = None
) -> list[str]:
    """Why each rule that names an argument no matching listed tool takes can never match.

    `tools` is the server's listing (name -> tool); only rules whose tool part matches a
    listed tool are read (a rule for a tool the server does not list cannot match a call
    either: the proxy refuses calls to unlisted tools). `only`: just the rules matching
    that tool (a tool that changed mid-session).
    """
    schemas = {name: tool.get("inputSchema") for name, tool in tools.items()}
    found = []
    for rule in rules:
        matching = [name for name in schemas if fnmatch.fnmatchcase(name, rule.tool)]
        if not matching or (only is not None and only not in matching):
            continue
        why = never_applies(rule, schemas)
        if why is not None:
            found.append(why)
    return found


def unlisted_names(
    rules: Sequence[Rule],
    table: Mapping[str, object],
    tools: Mapping[str, object],
    only: str | None = None,
) -> tuple[list[str], list[str]]:
    """The rules and `permissions` entries whose tool part is a plain name no listed tool
    has: those a listed tool's name is close to (the same but for case, or a near
    spelling), with "did you mean", and the others.

    A rule written for `Read_File` never matches a call of `read_file`: a deny so
    written is dead without a word. Globs and the `"*"` entry are not names. `only`: just
    the close ones that name that listed tool (a tool new or changed mid-session).
    """
    close: list[str] = []
    far: list[str] = []
    named = [(f"rule {str(rule)!r}", rule.tool) for rule in rules]
    named += [(f"permissions entry {name!r}", name) for name in table if name != "*"]
    for what, name in named:
        if is_glob(name) or name in tools:
            continue
        near = [t for t in tools if t.lower() == name.lower()]
        near = near or difflib.get_close_matches(name, list(tools), n=1)
        if only is not None:
            if only not in near:
                continue
            near = [only]
        if near:
            close.append(
                f"{what} names tool {name!r}, which the MCP server does not list; "
                f"did you mean {near[0]!r}?"
            )
        else:
            far.append(f"{what} names tool {name!r}, which the MCP server does not list")
    return close, far


# -- the ids on both sides ------------------------------------------------------------


def same_id(one: object, other: object) -> bool:
    """Whether two JSON-RPC ids are the same id: same type and value (`true` is not 1)."""
    return type(one) is type(other) and one == other


@dataclass(frozen=True)
class HostRequest:
    """A request of the host the proxy forwarded to the server, by the host's own id."""

    host_id: Any


@dataclass(frozen=True)
class ServerRequest:
    """A request of the server the proxy forwarded to the host, by the server's own id."""

    server_id: Any


class Ledger:
    """The requests the proxy sent one side and still waits on, under ids it alone allocates.

    An id is a whole number from one counter, never reused. An answer is taken only under
    an id still waiting, matched by type and value (`true`, `1.0` and `"1"` are not 1), and
    only once: what it was waiting for comes back, and the id is forgotten.
    """

    def __init__(self) -> None:
        self._count = itertools.count(1)
        self._waiting: dict[int, Any] = {}

    def send(self, waiter: Any) -> int:
        """A new id for a request sent on behalf of `waiter`."""
        ident = next(self._count)
        self._waiting[ident] = waiter
        return ident

    def answer(self, ident: object) -> Any:
        """What waits on `ident`, now answered; None when nothing waits on it."""
        if type(ident) is not int:
            return None
        return self._waiting.pop(ident, None)

    def forget(self, ident: int) -> None:
        """Stop waiting on `ident`: a later answer to it is dropped."""
        self._waiting.pop(ident, None)

    def waiting(self) -> dict[int, Any]:
        """Every id still waiting, with what waits on it."""
        return dict(self._waiting)


class Relay:
    """Which id each side sees: every request the proxy sends either side, its own or one
    it forwards, goes under an id of the proxy's ledger for that side.

    The host's requests reach the server, and the server's reach the host, renumbered; an
    answer goes back under the asker's own id, once, and only when it answers a request
    still waiting. Everything here is pure: the proxy does the sending.
    """

    def __init__(self) -> None:
        self.to_server = Ledger()
        self.to_host = Ledger()

    def host_request(self, message: Mapping[str, Any]) -> dict[str, Any]:
        """The host's request as forwarded to the server."""
        return {**message, "id": self.to_server.send(HostRequest(message["id"]))}

    def server_request(self, message: Mapping[str, Any]) -> dict[str, Any]:
        """The server's request as forwarded to the host."""
        return {**message, "id": self.to_host.send(ServerRequest(message["id"]))}

    def server_answer(self, message: Mapping[str, Any]) -> tuple[Any, dict[str, Any] | None]:
        """What the server's answer answers (None: nothing waits on it, drop it), and the
        answer as the host gets it when it answers a request of the host's."""
        waiter = self.to_server.answer(message.get("id"))
        if isinstance(waiter, HostRequest):
            return waiter, {**message, "id": waiter.host_id}
        return waiter, None

    def host_answer(self, message: Mapping[str, Any]) -> tuple[Any, dict[str, Any] | None]:
        """What the host's answer answers (None: drop it), and the answer as the server
        gets it when it answers a request of the server's."""
        waiter = self.to_host.answer(message.get("id"))
        if isinstance(waiter, ServerRequest):
            return waiter, {**message, "id": waiter.server_id}
        return waiter, None

    def host_cancelled(self, host_id: object) -> list[tuple[int, Any]]:
        """The host cancelled its request `host_id`: the ids it went to the server under
        (forwarded, or carried by the proxy's own request), no longer waiting."""
        if host_id is None:  # a request without an id cannot be cancelled
            return []
        found = [
            (ident, waiter)
            for ident, waiter in self.to_server.waiting().items()
            if same_id(getattr(waiter, "host_id", _NONE), host_id)
        ]
        for ident, _ in found:
            self.to_server.forget(ident)
        return found

    def server_cancelled(self, server_id: object) -> list[int]:
        """The server cancelled its request `server_id`: the ids the host knows it by."""
        found = [
            ident
            for ident, waiter in self.to_host.waiting().items()
            if isinstance(waiter, ServerRequest) and same_id(waiter.server_id, server_id)
        ]
        for ident in found:
            self.to_host.forget(ident)
        return found


_NONE = object()
"""No host id: a waiter that carries none."""
