"""What the guard tests ask of a guard: its hit on a snapshot."""

from __future__ import annotations

from typing import Any

from agentfsm.guards import Guard, Hit
from agentfsm.testing import snapshot

__all__ = ["fires"]


def fires(guard: Guard, **fields: Any) -> Hit:
    """The hit `guard` gives on `snapshot(**fields)`; the test fails if it does not fire."""
    hit = guard(snapshot(**fields))
    assert hit is not None, f"{guard!r} did not fire on {fields}"
    return hit
