"""end: the run is over; it always carries an ExitReason.

Nothing leaves this state. A normal end is COMPLETED; every other reason names
the limit, refusal or failure that ended the run.
"""

from __future__ import annotations

from agentfsm._model.run_state import Run, Step
from agentfsm._model.types import ExitReason

__all__ = ["enter"]


def enter(run: Run, step: Step) -> None:
    """Record why the run ended."""
    hit = step.hit
    run.exit_reason = (hit.exit_reason if hit else None) or ExitReason.INTERRUPTED
    run.pending = {}
    run.approved, run.refused = (), {}
    run.interjection = None
    run.round_failed = False
