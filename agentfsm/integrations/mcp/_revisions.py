"""The MCP protocol revisions the proxy serves a host under, and what differs between them.

Plain functions over decoded JSON-RPC data, shared by `agentfsm.integrations.mcp._proxy`;
nothing here does I/O. Two eras (the `mcp` package's `mcp_types.version` names the same):

- The handshake revisions (`HANDSHAKE`): the host sends `initialize` once and its
  capabilities hold for the session; the proxy asks by sending the host an
  `elicitation/create` request, which exists from 2025-06-18 on (`ELICITING`).
- The stateless revision (`STATELESS`, 2026-07-28): no `initialize`; every request carries
  its own envelope in `params._meta` (the protocol version, the client's info and its
  capabilities for that request). The server sends the client no requests: to ask, it
  answers the request with an `InputRequiredResult` that embeds the elicitation and an
  opaque `requestState`, and the client sends the request again carrying its answers
  (`inputResponses`) and that state.

The proxy speaks the handshake to the server whatever the host speaks: for a stateless
host it runs its own `initialize`, declaring no client capability (so the server has no
question to send that the host could not get), and strips the envelope from what it
forwards.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "APPROVAL_KEY",
    "ELICITING",
    "HANDSHAKE",
    "KNOWN",
    "STATELESS",
    "STATELESS_NOTIFICATIONS",
    "STATELESS_REQUESTS",
    "Envelope",
    "accepted",
    "approved",
    "complete_result",
    "discover_result",
    "elicit_params",
    "input_required",
    "new_state",
    "read_envelope",
    "stripped",
    "upstream_initialize",
]

HANDSHAKE = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
"""The revisions a host reaches through `initialize`, oldest first."""
ELICITING = frozenset({"2025-06-18", "2025-11-25"})
"""The handshake revisions that have `elicitation/create`; under an older one nobody is asked."""
STATELESS = ("2026-07-28",)
"""The revisions whose every request carries its own envelope."""
KNOWN = (*HANDSHAKE, *STATELESS)
"""Every revision the proxy models; a test holds it to the `mcp` package's own list."""

_VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
_INFO_KEY = "io.modelcontextprotocol/clientInfo"
_CAPABILITIES_KEY = "io.modelcontextprotocol/clientCapabilities"
_LOG_LEVEL_KEY = "io.modelcontextprotocol/logLevel"
_ENVELOPE_KEYS = (_VERSION_KEY, _INFO_KEY, _CAPABILITIES_KEY, _LOG_LEVEL_KEY)

STATELESS_REQUESTS = frozenset(
    {
        "tools/list",
        "tools/call",
        "resources/list",
        "resources/templates/list",
        "resources/read",
        "prompts/list",
        "prompts/get",
        "completion/complete",
    }
)
"""The stateless host's requests the proxy forwards (`tools/*` it decides itself);
`server/discover` it answers itself. `subscriptions/listen` it does not model."""
STATELESS_NOTIFICATIONS = frozenset({"notifications/cancelled"})
"""The one notification a stateless host sends."""
_CACHEABLE = frozenset(
    {"tools/list", "prompts/list", "resources/list", "resources/templates/list", "resources/read"}
)
"""The methods whose stateless results carry caching hints (`ttlMs`, `cacheScope`)."""
_SERVED_CAPABILITIES = ("tools", "resources", "prompts", "completions")
"""The server capabilities the proxy passes on to a stateless host: what it forwards."""
APPROVAL_KEY = "agentfsm-approval"
"""The key of the proxy's one embedded question in an `InputRequiredResult`."""


@dataclass(frozen=True)
class Envelope:
    """A stateless request's envelope: its revision and the capabilities it declares."""

    version: str
    capabilities: Mapping[str, Any]

    def elicits(self) -> bool:
        """Whether this request declared form elicitation (an empty `elicitation` is form)."""
        found = self.capabilities.get("elicitation")
        return isinstance(found, Mapping) and ("form" in found or "url" not in found)


def read_envelope(message: Mapping[str, Any]) -> Envelope | str | None:
    """A request's stateless envelope; None when it carries none (a handshake-era message);
    why it is refused when it names a revision the proxy does not model or is malformed.

    A request without declared capabilities declares none: it can be asked nothing.
    """
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, Mapping) else None
    if not isinstance(meta, Mapping) or _VERSION_KEY not in meta:
        return None
    version = meta[_VERSION_KEY]
    if version not in STATELESS:
        return f"the request names MCP protocol version {version!r}, which the proxy does not serve"
    capabilities = meta.get(_CAPABILITIES_KEY, {})
    if not isinstance(capabilities, Mapping):
        return "the request's client capabilities (in its _meta) are not an object"
    return Envelope(version, capabilities)


def stripped(message: Mapping[str, Any]) -> dict[str, Any]:
    """A stateless host's message as a handshake-era server gets it: without the envelope
    and without the answers to questions only the proxy asked (`inputResponses`,
    `requestState`)."""
    params = message.get("params")
    if not isinstance(params, Mapping):
        return dict(message)
    kept = {k: v for k, v in params.items() if k not in ("inputResponses", "requestState")}
    meta = params.get("_meta")
    if isinstance(meta, Mapping):
        rest = {k: v for k, v in meta.items() if k not in _ENVELOPE_KEYS}
        if rest:
            kept["_meta"] = rest
        else:
            kept.pop("_meta", None)
    return {**message, "params": kept}


def complete_result(method: str | None, result: object) -> object:
    """A result as a stateless host reads it: tagged `complete`, and for a cacheable method
    immediately stale and private (the proxy's answers depend on its policy and session,
    so it lets nobody cache them)."""
    if not isinstance(result, Mapping):
        return result
    shaped: dict[str, Any] = {**result, "resultType": "complete"}
    if method in _CACHEABLE:
        shaped.update(ttlMs=0, cacheScope="private")
    return shaped


def upstream_initialize(name: str, version: str) -> dict[str, Any]:
    """The params of the proxy's own `initialize` to the server for a stateless host: the
    newest handshake revision, no client capability."""
    return {
        "protocolVersion": HANDSHAKE[-1],
        "capabilities": {},
        "clientInfo": {"name": name, "version": version},
    }


def discover_result(initialized: Mapping[str, Any]) -> dict[str, Any]:
    """The proxy's answer to `server/discover`, from the server's `initialize` result: the
    stateless revisions, and the server's capabilities the proxy forwards."""
    caps = initialized.get("capabilities")
    caps = caps if isinstance(caps, Mapping) else {}
    result: dict[str, Any] = {
        "supportedVersions": list(STATELESS),
        "capabilities": {
            k: caps[k] for k in _SERVED_CAPABILITIES if isinstance(caps.get(k), Mapping)
        },
        "resultType": "complete",
        "ttlMs": 0,
        "cacheScope": "private",
    }
    info = initialized.get("serverInfo")
    if isinstance(info, Mapping):
        result["_meta"] = {"io.modelcontextprotocol/serverInfo": dict(info)}
    if isinstance(initialized.get("instructions"), str):
        result["instructions"] = initialized["instructions"]
    return result


def elicit_params(version: str | None, message: str, name: str) -> dict[str, Any]:
    """The params of the proxy's approval question: a form with one yes/no field.

    `mode` exists from 2025-11-25 on; a 2025-06-18 host gets the form without it.
    """
    params: dict[str, Any] = {
        "message": message,
        "requestedSchema": {
            "type": "object",
            "properties": {"approve": {"type": "boolean", "title": f"Run {name}?"}},
            "required": ["approve"],
        },
    }
    if version != "2025-06-18":
        params = {"mode": "form", **params}
    return params


def new_state() -> str:
    """A `requestState` nobody can guess: the proxy keeps what it stands for itself."""
    return secrets.token_urlsafe(32)


def input_required(state: str, question: Mapping[str, Any]) -> dict[str, Any]:
    """The `InputRequiredResult` that asks a stateless host the proxy's question."""
    return {
        "resultType": "input_required",
        "inputRequests": {APPROVAL_KEY: {"method": "elicitation/create", "params": dict(question)}},
        "requestState": state,
    }


def accepted(answer: object) -> bool:
    """Whether an elicitation result is an accept with a yes; anything else is a no."""
    if not isinstance(answer, Mapping) or answer.get("action") != "accept":
        return False
    content = answer.get("content")
    return isinstance(content, Mapping) and content.get("approve") is True


def approved(params: Mapping[str, Any]) -> bool:
    """Whether a stateless host's retry answers the proxy's question with an accept and a yes."""
    responses = params.get("inputResponses")
    return isinstance(responses, Mapping) and accepted(responses.get(APPROVAL_KEY))
