"""The only module that talks to `transitions`.

A `transitions.Machine` is built once per route table and shared by every run
that uses that table (`shared_machine`). Its states are the `State` enum; each
route row becomes one transition of the `advance` trigger, in table order, with
the row's guard as its condition, so `transitions` tries them exactly as the
controller's compiled walk does. `TransitionsEngine` drives a run through that
machine; it is the reference the compiled walk is tested against, and the
`engine="transitions"` mode for debugging.

The controller does not attach each run to the machine: `transitions` keeps a
strong reference to every model it drives, so the runs of a long-lived process
would never be freed; the compiled walk reads the same route table instead.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from transitions import EventData, Machine  # the one import of transitions

from agentfsm._engine.routes import INITIAL, Route, RouteTable
from agentfsm._model.types import State
from agentfsm.exceptions import MachineDefinitionError
from agentfsm.guards import Hit

__all__ = ["TransitionsEngine", "shared_machine"]

TRIGGER = "advance"


class _Condition:
    """A route's guard as a `transitions` condition; remembers the hit on the model."""

    __slots__ = ("route",)

    def __init__(self, route: Route) -> None:
        self.route = route

    def __call__(self, event: EventData) -> bool:
        hit = self.route.guard(event.kwargs["snapshot"])
        if hit is None:
            return False
        model = event.model
        assert isinstance(model, _Model)
        model.last = (self.route, hit)
        return True


@lru_cache(maxsize=128)
def shared_machine(table: RouteTable) -> Machine:
    """Build (once per route table) the `transitions` machine of `table`."""
    machine = Machine(
        model=None,
        states=list(State),
        initial=INITIAL,
        auto_transitions=False,
        send_event=True,
        ignore_invalid_triggers=False,
    )
    for route in table.routes:
        machine.add_transition(TRIGGER, route.source, route.dest, conditions=[_Condition(route)])
    _check_agrees(machine, table)
    return machine


def _check_agrees(machine: Machine, table: RouteTable) -> None:
    built = {
        (t.source, t.dest)
        for event in machine.events.values()
        for ts in event.transitions.values()
        for t in ts
    }
    wanted = {(r.source.name, r.dest.name) for r in table.routes}
    if built != wanted:
        raise MachineDefinitionError(
            f"the transitions machine disagrees with the route table: {sorted(built ^ wanted)}"
        )


class _Model:
    """The small object `transitions` moves; one per run."""

    def __init__(self) -> None:
        self.state: Any = INITIAL
        self.last: tuple[Route, Hit] | None = None


class TransitionsEngine:
    """Drive one run through the shared `transitions` machine, one edge per trigger."""

    def __init__(self, table: RouteTable) -> None:
        self.machine = shared_machine(table)
        self.model = _Model()
        self.machine.add_model(self.model, initial=INITIAL)

    def advance(self, snapshot: Any) -> tuple[Route, Hit]:
        """Take the first edge out of the current state whose guard applies."""
        self.model.last = None
        self.model.trigger(TRIGGER, snapshot=snapshot)  # type: ignore[attr-defined]
        if self.model.last is None:
            raise MachineDefinitionError(f"no edge out of {self.model.state!r} applied")
        return self.model.last

    def set_state(self, state: State) -> None:
        """Move the model without evaluating guards (inputs enter at a waiting state)."""
        self.machine.set_state(state, model=self.model)

    def close(self) -> None:
        """Detach the run from the shared machine."""
        self.machine.remove_model(self.model)
