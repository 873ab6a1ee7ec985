"""The route table: rows of (source, guard, destination) in evaluation order.

One table drives the controller, the `transitions` machine and the diagram, so
they cannot drift apart. Out of each state the rows are tried in order and the
first guard that applies chooses the edge. The order follows DESIGN.md: what
can be verified locally first (structure, P0, P7), then boundaries and safety
(P6), then the model's intent (P1, P2), then completion (P3, P4).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from agentfsm._model.snapshot import Phase
from agentfsm._model.types import Priority, State
from agentfsm.exceptions import MachineDefinitionError
from agentfsm.guards._base import ALL_PHASES, Guard, Otherwise

__all__ = ["INITIAL", "WAITING", "Route", "RouteTable"]

INITIAL = State.AWAIT_MODEL
WAITING = frozenset({State.AWAIT_MODEL, State.EXECUTE, State.HANDOFF, State.AWAIT_HUMAN, State.END})
"""States where a step stops until the next input (model output, results, reply)."""


@dataclass(frozen=True, slots=True)
class Route:
    """One edge: leave `source` for `dest` when `guard` applies."""

    source: State
    guard: Guard
    dest: State
    code: str = field(init=False, compare=False)
    """The guard's repr, computed once: every decision and event quotes it."""
    priority: Priority = field(init=False, compare=False)
    """The guard's priority, computed once."""
    layer: int = field(init=False, compare=False)
    """The guard's layer, computed once."""
    fallback: bool = field(init=False, compare=False)
    """Whether the guard is an Otherwise(): it only says that nothing else applied."""

    def __post_init__(self) -> None:
        guard = self.guard
        object.__setattr__(self, "code", repr(guard))
        object.__setattr__(self, "priority", guard.leaf_priority())
        object.__setattr__(self, "layer", guard.leaf_layer())
        object.__setattr__(self, "fallback", isinstance(guard, Otherwise))

    def label(self) -> str:
        """The edge label used in diagrams: priority and guard."""
        return f"{self.guard.leaf_priority()} {self.guard!r}"


class RouteTable:
    """An ordered, validated route table, indexed by source state."""

    __slots__ = ("_hash", "by_phase", "by_source", "routes")

    def __init__(self, routes: Iterable[Route]) -> None:
        if isinstance(routes, str | bytes | Mapping) or not isinstance(routes, Iterable):
            raise MachineDefinitionError(
                f"a RouteTable is made of Routes, not {type(routes).__name__}"
            )
        self.routes: tuple[Route, ...] = tuple(routes)
        for index, route in enumerate(self.routes):
            if not isinstance(route, Route):
                raise MachineDefinitionError(
                    f"routes[{index}] must be a Route, not {type(route).__name__}"
                )
        by_source: dict[State, list[Route]] = {s: [] for s in State}
        for route in self.routes:
            by_source[route.source].append(route)
        self.by_source: Mapping[State, tuple[Route, ...]] = {
            s: tuple(rows) for s, rows in by_source.items()
        }
        _validate(self)
        self._hash = hash(self.routes)
        self.by_phase: Mapping[Phase, Mapping[State, tuple[Route, ...]]] = {
            phase: {
                s: tuple(r for r in rows if phase in r.guard.phases)
                for s, rows in self.by_source.items()
            }
            for phase in ALL_PHASES
        }
        """Rows per input phase: a guard that cannot apply to an input is not even asked."""

    def __iter__(self) -> Iterator[Route]:
        return iter(self.routes)

    def __len__(self) -> int:
        return len(self.routes)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RouteTable) and self.routes == other.routes

    def __hash__(self) -> int:
        return self._hash


def _validate(table: RouteTable) -> None:
    """Raise MachineDefinitionError naming the states that make the table unsound."""
    rows = table.by_source
    if rows[State.END]:
        raise MachineDefinitionError(
            "no edge may leave 'end'; found edges to " + _names(r.dest for r in rows[State.END])
        )
    no_fallback = [s for s in State if s is not State.END and not _ends_in_fallback(rows[s])]
    if no_fallback:
        raise MachineDefinitionError(
            "every non-terminal state needs a fallback edge (an Otherwise() row last): "
            + _names(no_fallback)
        )
    unreachable = set(State) - _reach(rows, [INITIAL], forward=True)
    if unreachable:
        raise MachineDefinitionError(f"states unreachable from {INITIAL}: {_names(unreachable)}")
    stuck = set(State) - _reach(rows, [State.END], forward=False)
    if stuck:
        raise MachineDefinitionError(f"states that cannot reach 'end' (traps): {_names(stuck)}")
    _check_no_spin(rows)


def _ends_in_fallback(rows: tuple[Route, ...]) -> bool:
    return bool(rows) and isinstance(rows[-1].guard, Otherwise)


def _reach(
    rows: Mapping[State, tuple[Route, ...]], start: list[State], forward: bool
) -> set[State]:
    edges: dict[State, set[State]] = {s: set() for s in State}
    for source, out in rows.items():
        for route in out:
            a, b = (source, route.dest) if forward else (route.dest, source)
            edges[a].add(b)
    seen, todo = set(start), deque(start)
    while todo:
        for nxt in edges[todo.popleft()] - seen:
            seen.add(nxt)
            todo.append(nxt)
    return seen


def _check_no_spin(rows: Mapping[State, tuple[Route, ...]]) -> None:
    """A step must reach a waiting state: no cycle may avoid every waiting state."""
    inner = {
        s: {r.dest for r in rows[s] if r.dest not in WAITING} for s in State if s not in WAITING
    }
    visiting: set[State] = set()
    done: set[State] = set()

    def visit(state: State, trail: list[State]) -> None:
        if state in done:
            return
        if state in visiting:
            cycle = [*trail[trail.index(state) :], state]
            raise MachineDefinitionError(
                "a step could loop forever between " + " -> ".join(s.value for s in cycle)
            )
        visiting.add(state)
        for nxt in inner[state]:
            visit(nxt, [*trail, state])
        visiting.discard(state)
        done.add(state)

    for state in inner:
        visit(state, [])


def _names(states: Iterable[State]) -> str:
    return ", ".join(sorted(s.value for s in states))
