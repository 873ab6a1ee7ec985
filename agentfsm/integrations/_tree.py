"""The run tree across a framework's sub-agents: a governed agent started while a governed
tool runs is a child of the run that called the tool.

Its Controller runs under its own policy narrowed by the caller's (never wider) and joins the
caller's ledger, so each of its turns is charged to the caller's budgets as it is counted and
`TreeBudget()` stops it when a budget above it is spent. Contexts travel with threads and
tasks, so a sub-agent run from the tool's code, awaited or not, finds its caller here.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from agentfsm._engine.controller import Controller
from agentfsm._engine.policy import Policy
from agentfsm._model.ledger import Ledger, Left
from agentfsm.exceptions import DefinitionError

__all__ = [
    "ShowBudget",
    "budget_text",
    "checked_show_budget",
    "controller_in_tree",
    "running_tools_of",
]

ShowBudget = bool | Callable[[Left], str | None]
"""What a wrapper shows the model of its run tree's budget before each model call: nothing
(False), `Left.text()` (True), or what the function makes of what is left (None: nothing)."""

_CALLER: ContextVar[Controller | None] = ContextVar("agentfsm_integration_caller", default=None)


@contextmanager
def running_tools_of(controller: Controller | None) -> Iterator[None]:
    """Mark this context as running a tool of `controller`'s run."""
    token = _CALLER.set(controller)
    try:
        yield
    finally:
        _CALLER.reset(token)


def controller_in_tree(
    policy: Policy, tools: Iterable[Any] | None, caller: Controller | None = None, **given: Any
) -> Controller:
    """A run's Controller: a child of `caller` (a run that handed off to it), else of the run
    whose tool runs here (narrowed, in its ledger), else the root of a tree of its own."""
    caller = caller or _CALLER.get()
    run_id = uuid.uuid4().hex[:12]
    if caller is not None:
        policy = policy.narrowed_by(caller.policy)
    above = None if caller is None else caller.ledger
    if above is None:  # a root, or a caller restored from a checkpoint (a ledger is live)
        account = Ledger().open(policy, run_id=run_id)
    else:
        account = above.ledger.open(policy, run_id=run_id, parent=above)
    return Controller(policy, tools, run_id=run_id, ledger=account, **given)


def checked_show_budget(show: object, where: str) -> ShowBudget:
    """`show` when it is a ShowBudget; DefinitionError naming `where` otherwise."""
    if isinstance(show, bool) or callable(show):
        return show
    raise DefinitionError(
        f"{where}: show_budget must be True, False or a function of what is left, not {show!r:.60}"
    )


def budget_text(controller: Controller | None, show: ShowBudget) -> str | None:
    """The line that shows the model what its run tree has left, or None when nothing is shown
    (the host did not ask, or the run is in no tree)."""
    if show is False or controller is None or controller.ledger is None:
        return None
    left = controller.ledger.left(turns=controller.turns_left)
    said = left.text() if show is True else show(left)
    if said is None or isinstance(said, str):
        return said
    raise DefinitionError(f"show_budget returned {type(said).__name__}: it returns a str or None")
