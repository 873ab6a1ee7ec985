"""The route table: rows of (source, guard, destination) in evaluation order.

One table drives the controller, the `transitions` machine and the diagram, so
they cannot drift apart. Out of each state the rows are tried in order and the
first guard that applies chooses the edge. The order follows DESIGN.md: what
can be verified locally first (structure, P0, P7), then boundaries and safety
(P6), then the model's intent (P1, P2), then completion (P3, P4).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from agentfsm.core.snapshot import Phase
from agentfsm.core.types import Priority, State
from agentfsm.exceptions import MachineDefinitionError, PolicyError
from agentfsm.guards._base import ALL_PHASES, Guard, Otherwise
from agentfsm.guards.boundaries import (
    ContentFiltered,
    ContextLimit,
    CostBudget,
    Deadline,
    HumanApproved,
    HumanDeclined,
    MaxToolCalls,
    MaxTurns,
    NeedsApproval,
    PermissionDenied,
    Refused,
    TokenBudget,
)
from agentfsm.guards.completion import AnswerComplete, AnswerIncomplete, Paused
from agentfsm.guards.loop import NoProgress, RepeatedCall, RetriesExhausted
from agentfsm.guards.results import FinalTool, ResultsReady, ToolErrorLimit, ToolFailed
from agentfsm.guards.structure import (
    HandoffRequested,
    HasToolCalls,
    MalformedToolCall,
    OutputTruncated,
    ProviderFailed,
    SignalConflict,
)

if TYPE_CHECKING:
    from agentfsm.core.policy import Policy

__all__ = ["FEEDBACK_GRACE", "INITIAL", "WAITING", "Route", "RouteTable", "build_routes"]

FEEDBACK_GRACE = 2
"""With `on_repeat="feedback"`, refused repeats the model may still make before DOOM_LOOP."""

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


def _check_policy(policy: object, where: str) -> None:
    from agentfsm.core.policy import Policy  # the policy module builds its tables from here

    if not isinstance(policy, Policy):
        raise PolicyError(f"{where} takes an agentfsm.Policy, not {type(policy).__name__}")


def boundary_guards(policy: Policy) -> list[Guard]:
    """The budget guards a policy asks for, plus the guards it was given directly."""
    _check_policy(policy, "boundary_guards")
    found: list[Guard] = [MaxTurns(policy.max_turns)]
    if policy.max_tool_calls is not None:
        found.append(MaxToolCalls(policy.max_tool_calls))
    if policy.max_tokens is not None:
        found.append(TokenBudget(policy.max_tokens))
    # An infinite budget is no budget: it validates, and builds no guard.
    if policy.max_cost is not None and math.isfinite(policy.max_cost):
        found.append(CostBudget(policy.max_cost, on_unknown=policy.on_unknown_price))
    if policy.max_seconds is not None and math.isfinite(policy.max_seconds):
        found.append(Deadline(policy.max_seconds))
    if policy.max_context_tokens is not None:
        found.append(ContextLimit(policy.max_context_tokens))
    found.extend(policy.guards)
    return found


def build_routes(policy: Policy) -> RouteTable:
    """Build the route table a policy describes."""
    _check_policy(policy, "build_routes")
    S = State  # noqa: N806 - the table reads as a table with a one-letter alias
    bounds = boundary_guards(policy)
    verifiers = tuple(policy.verifiers)
    on_repeat = S.AWAIT_HUMAN if policy.on_repeat == "ask" else S.END
    # "feedback": validate refuses the repeated calls itself; the run stops only when the
    # model repeats them FEEDBACK_GRACE more times after being told.
    repeats = policy.repeat_threshold + (FEEDBACK_GRACE if policy.on_repeat == "feedback" else 0)
    on_incomplete = S.AWAIT_HUMAN if policy.on_incomplete == "ask" else S.AWAIT_MODEL
    rows: list[tuple[State, Guard, State]] = [
        (S.AWAIT_MODEL, Otherwise("a model output arrived", "P1"), S.PARSE),
        (S.PARSE, OutputTruncated(), S.RECOVER),
        (S.PARSE, MalformedToolCall(), S.RECOVER),
        (S.PARSE, Refused(), S.END),
        (S.PARSE, ContentFiltered(), S.END),
        (S.PARSE, ProviderFailed(), S.END),
        (S.PARSE, SignalConflict(), S.VALIDATE),
        (S.PARSE, Otherwise("the output is well formed", "P1"), S.VALIDATE),
        (S.VALIDATE, RepeatedCall(repeats), on_repeat),
    ]
    if policy.on_deny == "stop":
        rows.append((S.VALIDATE, PermissionDenied(), S.END))
    rows += [
        (S.VALIDATE, NeedsApproval(), S.AWAIT_HUMAN),
        (S.VALIDATE, HasToolCalls(), S.BUDGET_CHECK),
        (S.VALIDATE, HandoffRequested(), S.BUDGET_CHECK),
        (S.VALIDATE, ToolFailed(), S.BUDGET_CHECK),
        (S.VALIDATE, Otherwise("no tool call: check the answer", "P3"), S.VERIFY),
        (S.VERIFY, AnswerComplete(*verifiers), S.END),
        (S.VERIFY, Otherwise("the answer is not final", "P4"), S.BUDGET_CHECK),
        *((S.BUDGET_CHECK, g, S.END) for g in bounds),
        (S.BUDGET_CHECK, ToolErrorLimit(policy.max_consecutive_tool_errors), S.END),
    ]
    if policy.no_progress_threshold is not None:
        rows.append((S.BUDGET_CHECK, NoProgress(policy.no_progress_threshold), S.END))
    rows += [
        (S.BUDGET_CHECK, HasToolCalls(), S.EXECUTE),
        (S.BUDGET_CHECK, HandoffRequested(), S.HANDOFF),
        (S.BUDGET_CHECK, Paused(), S.AWAIT_MODEL),
        (S.BUDGET_CHECK, ToolFailed(), S.AWAIT_MODEL),
        (S.BUDGET_CHECK, ResultsReady(), S.AWAIT_MODEL),
        (S.BUDGET_CHECK, AnswerIncomplete(*verifiers), on_incomplete),
        (S.BUDGET_CHECK, Otherwise("call the model again", "P4"), S.AWAIT_MODEL),
        (S.RECOVER, RetriesExhausted(policy.max_retries), S.END),
        *((S.RECOVER, g, S.END) for g in bounds),
        (S.RECOVER, Otherwise("retry the model call", "P0"), S.AWAIT_MODEL),
    ]
    if policy.final_tools:
        rows.append((S.EXECUTE, FinalTool(*sorted(policy.final_tools)), S.END))
    rows += [
        (S.EXECUTE, Otherwise("the tool results arrived", "P1"), S.BUDGET_CHECK),
        (S.HANDOFF, Otherwise("the delegate answered", "P2"), S.BUDGET_CHECK),
        (S.AWAIT_HUMAN, HumanDeclined(), S.END),
        (S.AWAIT_HUMAN, HumanApproved(), S.BUDGET_CHECK),
        (S.AWAIT_HUMAN, Otherwise("the human replied", "P4"), S.AWAIT_MODEL),
    ]
    return RouteTable(Route(src, guard, dst) for src, guard, dst in rows)
