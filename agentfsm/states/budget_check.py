"""budget_check: before anything that needs another model call or a tool run, check limits.

Layers 4 and 5: turns, tool calls, tokens, cost, wall time, context size,
tool errors in a row, no progress. The counters are in the snapshot; the work
of this state is its guards. Nothing is recorded on entry.
"""

from __future__ import annotations

from agentfsm._model.run_state import Run, Step

__all__ = ["enter"]


def enter(run: Run, step: Step) -> None:
    """Nothing to record: the budget guards read the snapshot."""
