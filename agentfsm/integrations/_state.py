"""Keeping a Controller's state in a host's own state, as JSON-compatible data."""

from __future__ import annotations

from typing import Any

from agentfsm.core.controller import Controller

__all__ = ["restore", "save"]

_LIVE: dict[str, Controller] = {}


def save(ctl: Controller) -> dict[str, Any]:
    """The controller's state as data the host can checkpoint."""
    dump = getattr(ctl, "dump", None)
    if callable(dump):
        data: dict[str, Any] = dump()
        return data
    _LIVE[ctl.run_id] = ctl
    return {"run_id": ctl.run_id}


def restore(data: dict[str, Any]) -> Controller:
    """The controller `save` described."""
    load = getattr(Controller, "load", None)
    if callable(load):
        ctl: Controller = load(data)
        return ctl
    return _LIVE[data["run_id"]]
