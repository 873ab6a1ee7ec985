"""The report's view of remembered approvals: which were granted, used and revoked, and by
which approval each covered call ran (docs/approvals.md)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from html import escape
from typing import Any

__all__ = ["ApprovalNotes", "covered_row", "section"]


class ApprovalNotes:
    """What a replay's events say of approvals: each grant, remembered answer and revocation."""

    def __init__(self) -> None:
        self.changes: list[dict[str, Any]] = []
        self.used: Counter[str] = Counter()

    def see(self, event: Mapping[str, Any]) -> None:
        """Read one event of the replay (any kind; the others are ignored)."""
        kind = event.get("event")
        turn = event.get("turn")
        if kind in ("approval_granted", "approval_revoked"):
            what = "granted" if kind == "approval_granted" else "revoked"
            self.changes.append({"turn": turn, "what": what, **dict(event.get("approval") or {})})
        elif kind == "human_reply":
            for made in event.get("remember") or ():
                if isinstance(made, Mapping):
                    self.changes.append({"turn": turn, "what": "remembered", **dict(made)})
        elif kind == "decision":
            for approval_id in (event.get("covered") or {}).values():
                self.used[str(approval_id)] += 1


def _e(value: object) -> str:
    return escape(str(value), quote=True)


def covered_row(decision: Mapping[str, Any]) -> str:
    """The decision's `covered` entry (`call → approval`), or nothing when none was covered."""
    covered = decision.get("covered") or {}
    if not covered:
        return ""
    items = ", ".join(f"{_e(c)} by approval <code>{_e(a)}</code>" for c, a in covered.items())
    return f"<dt>remembered approvals</dt><dd>{items} (no human asked)</dd>"


def section(notes: ApprovalNotes | None) -> str:
    """The run's remembered approvals: each grant, remembered answer and revocation, and how
    many calls each covered; nothing when the run had none."""
    if notes is None or not (notes.changes or notes.used):
        return ""
    rows = "".join(
        f"<tr><td>{_e(c.get('turn', ''))}</td><td>{_e(c['what'])}</td>"
        f"<td><code>{_e(c.get('id', ''))}</code></td><td><code>{_e(c.get('tool', ''))}</code> "
        f"{_e(c.get('pattern') or c.get('arguments') or '')}</td><td>{_e(c.get('scope', ''))}"
        f"</td><td>{_e(c.get('source', ''))}</td><td>{notes.used.get(str(c.get('id')), 0)}"
        "</td></tr>"
        for c in notes.changes
    )
    total = sum(notes.used.values())
    return (
        f"<h3>Remembered approvals</h3><p>{total} call(s) ran under a remembered approval, "
        "without asking a human.</p><table class='approvals'><thead><tr>"
        "<th scope='col'>turn</th><th scope='col'>what</th><th scope='col'>approval</th>"
        "<th scope='col'>covers</th><th scope='col'>scope</th><th scope='col'>granted by</th>"
        f"<th scope='col'>calls covered</th></tr></thead><tbody>{rows}</tbody></table>"
    )
