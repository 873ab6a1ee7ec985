"""Keeping a Controller's state in a host's own state, as JSON-compatible data."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from agentfsm._engine.controller import Controller
from agentfsm._engine.events import Observer
from agentfsm._engine.policy import Policy

__all__ = ["restore", "save"]


def save(ctl: Controller) -> dict[str, Any]:
    """The controller's state as data the host can checkpoint (`Controller.dump`)."""
    return ctl.dump()


def restore(
    data: dict[str, Any],
    policy: Policy,
    tools: Sequence[Any] | None,
    observers: Iterable[Observer] = (),
    shadow: Policy | None = None,
) -> Controller:
    """The controller `save` described, with the live policy, tools and observers.

    Raises:
        CheckpointError: the data is from another format version, corrupted, or saved under
            another policy or other tools.
    """
    return Controller.load(data, policy=policy, tools=tools, observers=observers, shadow=shadow)
