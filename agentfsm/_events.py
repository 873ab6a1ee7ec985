"""Events: every transition is one flat, snake_case event.

Observers are a list of callables run in order, like structlog's processors.
Events also go to `structlog.get_logger("agentfsm")`, but only once the
application has configured structlog: a library must not configure logging,
nor print to stdout on its own. structlog is imported only when the
application has imported it, so `import agentfsm` stays cheap.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = ["Emitter", "Observer"]

Observer = Callable[[Mapping[str, Any]], None]


def _structlog_configured() -> bool:
    module = sys.modules.get("structlog")
    return module is not None and bool(module.is_configured())


class Emitter:
    """Send events to the observers and, when configured, to structlog."""

    __slots__ = ("observers",)

    def __init__(self, observers: Iterable[Observer] = ()) -> None:
        self.observers: list[Observer] = list(observers)

    @property
    def active(self) -> bool:
        """Whether anyone listens; events are not even built otherwise."""
        return bool(self.observers) or _structlog_configured()

    def emit(self, event: dict[str, Any]) -> None:
        """Deliver one event to every observer, then to structlog."""
        for observer in self.observers:
            observer(event)
        if _structlog_configured():
            import structlog

            fields = {k: v for k, v in event.items() if k != "event"}
            structlog.get_logger("agentfsm").info(event["event"], **fields)
