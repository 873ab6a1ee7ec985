"""Diagrams of the machine, generated from the same route table the controller runs.

`mermaid(table)` and `dot(table)` render the states and every guarded edge
(labelled with priority and guard repr); given an `Overlay` (the path one or
more runs took, counted from a trace) they highlight visited states and edges.
`render(source, fmt)` turns DOT into SVG or PNG with the Graphviz `dot` program.
"""

from __future__ import annotations

import shutil
import subprocess
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from agentfsm._engine.policy import Policy
from agentfsm._engine.routes import INITIAL, WAITING, Route, RouteTable
from agentfsm._model.types import State
from agentfsm.exceptions import AgentFSMError, DefinitionError
from agentfsm.guards import Otherwise

__all__ = ["Overlay", "approvals_note", "dot", "edge_label", "mermaid", "render", "shadow_note"]


@dataclass
class Overlay:
    """How often runs visited each state and took each edge (keyed by source, dest, guard)."""

    states: Counter[str] = field(default_factory=Counter)
    edges: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    covered: int = 0
    """Calls a remembered approval let run without asking (decisions' `covered`)."""

    @classmethod
    def from_events(cls, events: Iterable[Mapping[str, Any]]) -> Overlay:
        """Count the `transition` events of a trace."""
        overlay = cls()
        last_dst: dict[Any, str] = {}
        for event in events:
            if event.get("event") == "decision" and isinstance(event.get("covered"), Mapping):
                overlay.covered += len(event["covered"])
            if event.get("event") != "transition":
                continue
            src, dst, guard = str(event["src"]), str(event["dst"]), str(event["guard"])
            run = event.get("run_id")
            if last_dst.get(run) != src:  # a run's first step: count the state it starts in
                overlay.states[src] += 1
            last_dst[run] = dst
            overlay.states[dst] += 1
            overlay.edges[(src, dst, guard)] += 1
        return overlay


def edge_label(route: Route) -> str:
    """A route's label: its priority and guard repr, or the reason of a fallback."""
    if not isinstance(route, Route):
        raise DefinitionError(f"edge_label takes a Route, not {type(route).__name__}")
    guard = route.guard
    if isinstance(guard, Otherwise):
        return f"{guard.leaf_priority()} otherwise: {guard.reason}"
    return route.label()


def _table(table: object, overlay: object, where: str) -> RouteTable:
    """The route table to draw (a Policy gives its own), with `overlay` checked."""
    if overlay is not None and not isinstance(overlay, Overlay):
        raise DefinitionError(
            f"{where}: overlay must be an Overlay or None, not {type(overlay).__name__}"
        )
    if isinstance(table, Policy):
        return table.routes
    if isinstance(table, RouteTable):
        return table
    raise DefinitionError(
        f"{where} draws a RouteTable (policy.routes) or a Policy, not {type(table).__name__}"
    )


def _groups(table: RouteTable) -> dict[tuple[State, State], list[Route]]:
    groups: dict[tuple[State, State], list[Route]] = {}
    for route in table.routes:
        groups.setdefault((route.source, route.dest), []).append(route)
    return groups


def _count(overlay: Overlay | None, route: Route) -> int:
    if overlay is None:
        return 0
    return overlay.edges[(route.source.value, route.dest.value, repr(route.guard))]


def _labels(routes: list[Route], overlay: Overlay | None) -> list[str]:
    labels = []
    for route in routes:
        text = edge_label(route)
        hits = _count(overlay, route)
        labels.append(f"{text} ×{hits}" if hits else text)
    return labels


def shadow_note(shadow: Policy) -> str:
    """The note a diagram puts on `validate` for a shadow policy: judged there, never enforced."""
    if not isinstance(shadow, Policy):
        raise DefinitionError(f"shadow must be an agentfsm.Policy, not {type(shadow).__name__}")
    rules = len(shadow.permission_rules) + len(shadow.permissions)
    hook = " and a hook" if shadow.permission is not None else ""
    return f"shadow policy ({rules} rule(s){hook}) judges every call here; recorded, never enforced"


def approvals_note(overlay: Overlay | None) -> str | None:
    """The note a diagram of a trace puts on `validate` when remembered approvals covered calls
    there (docs/approvals.md); None otherwise."""
    if overlay is None or not overlay.covered:
        return None
    return (
        f"{overlay.covered} call(s) ran under remembered approvals: a live approval turns an "
        "ask into a run here, never a deny; the guards after still decide"
    )


def mermaid(
    table: RouteTable | Policy, overlay: Overlay | None = None, *, shadow: Policy | None = None
) -> str:
    """Render `table` (or a policy's table) as a Mermaid state diagram; with `shadow`, a note
    on `validate`, where the shadow policy judges each call."""
    note = None if shadow is None else shadow_note(shadow)
    table = _table(table, overlay, "mermaid")
    lines = ["stateDiagram-v2"]
    for state in State:
        visits = overlay.states[state.value] if overlay else 0
        name = f"{state.value} ×{visits}" if visits else state.value
        lines.append(f'    state "{name}" as {state.name}')
    lines.append(f"    [*] --> {INITIAL.name}")
    for (src, dst), routes in _groups(table).items():
        label = "<br/>".join(_mermaid_text(t) for t in _labels(routes, overlay))
        lines.append(f"    {src.name} --> {dst.name}: {label}")
    lines.append(f"    {State.END.name} --> [*]")
    if note is not None:
        lines.append(f"    note right of {State.VALIDATE.name} : {_mermaid_text(note)}")
    remembered = approvals_note(overlay)
    if remembered is not None:
        lines.append(f"    note left of {State.VALIDATE.name} : {_mermaid_text(remembered)}")
    lines.append("    classDef waiting font-weight:bold")
    lines.append("    class " + ",".join(s.name for s in State if s in WAITING) + " waiting")
    if overlay and overlay.states:
        lines.append("    classDef visited fill:#d7f0d7,stroke:#2e7d32")
        visited = [s.name for s in State if overlay.states[s.value]]
        lines.append("    class " + ",".join(visited) + " visited")
    return "\n".join(lines) + "\n"


def _mermaid_text(text: str) -> str:
    # ':' ends a Mermaid label's source and ';' a statement; '#' starts an entity.
    return text.replace(":", " -").replace(";", ",").replace("#", "no.")


def dot(
    table: RouteTable | Policy,
    overlay: Overlay | None = None,
    *,
    ids: bool = False,
    shadow: Policy | None = None,
) -> str:
    """Render `table` (or a policy's table) as a Graphviz DOT digraph.

    With `ids`, every state is `id="n-<state>"` and every edge `id="e-<source>-<dest>"`, so a
    page can highlight them in the SVG that Graphviz draws (the HTML report does). With
    `shadow`, a note hangs on `validate`, where the shadow policy judges each call.
    """
    note = None if shadow is None else shadow_note(shadow)
    table = _table(table, overlay, "dot")
    lines = [
        "digraph agentfsm {",
        "  rankdir=TB;",
        '  node [shape=box, style="rounded", fontname="Helvetica"];',
        '  edge [fontname="Helvetica", fontsize=9];',
        '  start [shape=point, label=""];',
        f"  start -> {INITIAL.value};",
    ]
    for state in State:
        visits = overlay.states[state.value] if overlay else 0
        attrs = ["peripheries=2"] if state is State.END else []
        if state in WAITING:
            attrs.append('style="rounded,bold"')
        if visits:
            attrs += ['style="rounded,filled"', 'fillcolor="#d7f0d7"']
            attrs.append(f'label="{state.value}\\n×{visits}"')
        if ids:
            attrs.append(f'id="n-{state.value}"')
        lines.append(f"  {state.value} [{', '.join(attrs)}];" if attrs else f"  {state.value};")
    for (src, dst), routes in _groups(table).items():
        label = "\\n".join(_dot_text(t) for t in _labels(routes, overlay))
        used = sum(_count(overlay, r) for r in routes)
        extra = ', color="#2e7d32", penwidth=2.5' if used else ""
        if ids:
            extra += f', id="e-{src.value}-{dst.value}"'
        lines.append(f'  {src.value} -> {dst.value} [label="{label}"{extra}];')
    if note is not None:  # a note, not a state: dashed, and no edge of the machine
        lines.append(f'  shadow_note [shape=note, style=dashed, label="{_dot_text(note)}"];')
        lines.append(
            f'  {State.VALIDATE.value} -> shadow_note [style=dashed, arrowhead=none, label=""];'
        )
    remembered = approvals_note(overlay)
    if remembered is not None:
        lines.append(
            f'  approvals_note [shape=note, style=dashed, label="{_dot_text(remembered)}"];'
        )
        lines.append(
            f'  {State.VALIDATE.value} -> approvals_note [style=dashed, arrowhead=none, label=""];'
        )
    lines.append("}")
    return "\n".join(lines) + "\n"


def _dot_text(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


_FORMATS = ("svg", "png")
"""What `render` draws."""


def render(source: str, fmt: str) -> bytes:
    """Turn DOT source into `fmt` (svg or png) with Graphviz's `dot` program."""
    if not isinstance(source, str):
        raise DefinitionError(f"render takes DOT source text, not {type(source).__name__}")
    if fmt not in _FORMATS:
        raise DefinitionError(f"render: format {fmt!r} is not one of {', '.join(_FORMATS)}")
    program = shutil.which("dot")
    if program is None:
        raise AgentFSMError(
            f"rendering {fmt} needs the Graphviz 'dot' program, which is not installed: "
            "install it (Debian/Ubuntu: apt-get install graphviz; macOS: brew install graphviz) "
            "or use --format mermaid or --format dot"
        )
    done = subprocess.run(
        [program, f"-T{fmt}"], input=source.encode(), capture_output=True, check=False
    )
    if done.returncode != 0:
        raise AgentFSMError(f"dot failed ({done.returncode}): {done.stderr.decode()[:500]}")
    return done.stdout
