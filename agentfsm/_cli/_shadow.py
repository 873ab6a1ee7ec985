"""Shadow verdicts in `agentfsm replay`: where a candidate policy would have decided otherwise.

A trace written with a shadow policy (`Controller(shadow=...)`, `mcp-proxy --shadow`) holds,
beside each decision, the shadow's verdict on every call the decision judged. `replay` shows
where those recorded verdicts differ from the enforced ones; with `--shadow FILE` it judges the
recorded calls by that candidate instead, as the run is replayed. Shadow differences never
change replay's exit status: a shadow is observed, not enforced.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from agentfsm._cli._text import one_line

__all__ = ["Verdicts", "lines", "summary"]


class Verdicts:
    """An observer keeping the shadow verdicts of every replayed decision, with its turn."""

    def __init__(self) -> None:
        self.found: list[dict[str, Any]] = []

    def __call__(self, event: Mapping[str, Any]) -> None:
        if event.get("event") == "decision":
            turn = event.get("turn")
            self.found.extend({"turn": turn, **v} for v in event.get("shadow", ()))


def summary(verdicts: Iterable[Mapping[str, Any]], source: str) -> dict[str, Any] | None:
    """The shadow's verdicts in brief: how many calls, how many differ, by transition, and
    each difference; None when there was no shadow. `source`: "recorded" or the file."""
    verdicts = list(verdicts)
    if not verdicts:
        return None
    differ = [dict(v) for v in verdicts if v.get("shadow") != v.get("enforced")]
    moves = Counter(f"{v.get('enforced')}->{v.get('shadow')}" for v in differ)
    return {
        "source": source,
        "calls": len(verdicts),
        "differ": len(differ),
        "by_transition": dict(sorted(moves.items())),
        "differences": differ,
    }


def lines(brief: Mapping[str, Any]) -> list[str]:
    """The summary as text lines for one run of `replay`'s output."""
    moves = ", ".join(f"{k} {n}" for k, n in brief["by_transition"].items())
    head = f"  shadow ({brief['source']}): {brief['differ']} of {brief['calls']} call(s) differ" + (
        f" ({moves})" if moves else ""
    )
    return [head] + [
        f"    turn {v.get('turn')} {v.get('tool')} {v.get('call_id')}: enforced "
        f"{v.get('enforced')}, shadow {v.get('shadow')} ({one_line(str(v.get('source', '')))})"
        for v in brief["differences"]
    ]
