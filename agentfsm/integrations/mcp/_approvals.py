"""Remembered approvals in the MCP proxy: the scopes its elicitation offers, and the
approvals file it watches for a host that cannot ask (docs/mcp-proxy.md#remembered-approvals).

Both end in the session's Controller (`on_human_reply(remember=)`, `Controller.grant`), so
an approval here is what it is everywhere: bound to the tool's pin in the proxy's current
listing (a tool that changed is never covered), never covering a deny or a guard's stop,
listed in the trace when granted, revoked and used.
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Mapping
from typing import Any

from agentfsm._engine.controller import Controller
from agentfsm.exceptions import AgentFSMError

__all__ = ["SCOPE_CHOICES", "ApprovalsFile", "Scope", "remember_of", "scope_field"]

Scope = str | Mapping[str, Any] | None
"""A `remember` scope as `Controller.on_human_reply` takes it; None remembers nothing."""

SCOPE_CHOICES: dict[str, tuple[str, Scope]] = {
    "once": ("this call only", None),
    "uses=10": ("this exact call, the next 10 times", "uses=10"),
    "seconds=3600": ("this exact call, for an hour", "seconds=3600"),
    "session": ("this exact call, for this session", "conversation"),
    "tool": ("any call of this tool, for this session", {"scope": "conversation", "pattern": "*"}),
}
"""The scopes the elicitation form offers: the value the host sends, its title, and the
`remember` scope it stands for (None: nothing is remembered)."""


def scope_field() -> dict[str, Any]:
    """The form's `remember` field: a string enum of `SCOPE_CHOICES`, `once` by default."""
    return {
        "type": "string",
        "title": "Remember this answer for",
        "enum": list(SCOPE_CHOICES),
        "enumNames": [title for title, _ in SCOPE_CHOICES.values()],
        "default": "once",
    }


def remember_of(content: Mapping[str, Any]) -> Scope:
    """The `remember` scope of an accepted form's content; None (this call only) for anything
    not offered: an answer the proxy did not ask for never widens an approval."""
    choice = content.get("remember")
    if not isinstance(choice, str) or choice not in SCOPE_CHOICES:
        return None
    return SCOPE_CHOICES[choice][1]


class ApprovalsFile:
    """An approvals file the proxy re-reads whenever it changes, granting what it lists.

    The file is JSON or TOML (by its suffix) holding `approvals`, a list of entries
    `{"tool", "pattern" or "arguments", "scope"}` (scope `conversation` when absent). Each
    change revokes what the file granted before and grants the new entries afresh (their
    uses and seconds start again); an unreadable file, or one that is not such a list,
    revokes them all: nothing holds that the proxy could not read. An entry that does not
    fit (an unknown tool, a bad scope or pattern) is ignored and said in the trace.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._seen: tuple[int, int, int] | None = None
        self._granted: list[str] = []

    def _stamp(self) -> tuple[int, int, int] | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size, st.st_ino)

    def sync(self, ctl: Controller, note: Any) -> None:
        """Bring `ctl`'s file approvals in line with the file, if it changed since last read.

        `note(text)` says what happened in the trace (each grant and revocation is also
        an event of the Controller's own).
        """
        stamp = self._stamp()
        if self._seen is not None and stamp == self._seen:
            return
        self._seen = stamp
        for approval_id in self._granted:
            if any(a.id == approval_id for a in ctl.approvals):
                ctl.revoke(approval_id)
        self._granted = []
        entries, problem = self._read()
        if problem is not None:
            note(f"approvals file {self.path}: {problem}; none of its approvals hold")
            return
        for index, entry in enumerate(entries):
            tool: Any = entry.get("tool")  # checked by grant, which names a bad one
            try:
                approval = ctl.grant(
                    tool,
                    scope=entry.get("scope", "conversation"),
                    pattern=entry.get("pattern"),
                    arguments=entry.get("arguments"),
                    source=f"approvals file {self.path}",
                )
            except AgentFSMError as exc:
                note(f"approvals file {self.path}: entry {index} ignored: {exc.message}")
            else:
                self._granted.append(approval.id)
        note(f"approvals file {self.path}: read, {len(self._granted)} approval(s) granted")

    def _read(self) -> tuple[list[dict[str, Any]], str | None]:
        try:
            with open(self.path, "rb") as handle:
                raw = handle.read(1_000_000)
            data: Any = (
                tomllib.loads(raw.decode("utf-8"))
                if self.path.endswith(".toml")
                else json.loads(raw)
            )
        except (OSError, ValueError, UnicodeDecodeError) as exc:
            return [], f"cannot be read ({type(exc).__name__}: {exc})"
        entries = data.get("approvals") if isinstance(data, dict) else None
        if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
            return [], "holds no list of approval objects under 'approvals'"
        return entries, None
