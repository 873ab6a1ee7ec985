"""What the MCP proxy reads and writes on the wire: tool pins, tool results, messages.

Plain functions over JSON-RPC data as decoded from a line (dicts and lists), shared by
`agentfsm._cli._mcp_proxy`; nothing here does I/O.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Pins",
    "cap_result",
    "decoded",
    "digest",
    "elicits",
    "error_result",
    "flag_changed",
    "malformed_result",
    "result_text",
    "server_error",
]

_CHANGED_FLAG = "[agentfsm: this tool changed since it was first listed; calls are asked again]"


def digest(tool: Mapping[str, Any]) -> str:
    """The pin of a listed tool: a hash of its description and input schema."""
    pinned = {"description": tool.get("description"), "inputSchema": tool.get("inputSchema")}
    text = json.dumps(pinned, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass
class Pins:
    """Each tool's pin from its first listing, the tools that changed since, their hints."""

    first: dict[str, str] = field(default_factory=dict)
    changed: set[str] = field(default_factory=set)
    annotations: dict[str, Any] = field(default_factory=dict)

    def see(self, tools: Sequence[Any]) -> list[str]:
        """Record a listing; return the names of the tools that differ from their pin."""
        found = []
        for tool in tools:
            if not isinstance(tool, Mapping) or not isinstance(tool.get("name"), str):
                continue
            name = tool["name"]
            pin = digest(tool)
            self.annotations.setdefault(name, tool.get("annotations"))
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
