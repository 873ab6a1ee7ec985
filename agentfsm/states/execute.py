"""execute: the host (or the runner) runs the validated calls; every id gets one result.

Layer 2. On entry the calls become pending and count against the tool-call
budget, and the repetition streak moves on. When results arrive, a pending id
without a result gets a synthesized error result, so the model always sees
exactly one result per call.
"""

from __future__ import annotations

from agentfsm._run import Run, Step
from agentfsm.states.validate import signature

__all__ = ["enter"]


def enter(run: Run, step: Step) -> None:
    """Make the executable calls pending, count them, and advance the repetition streak."""
    calls = step.snap.executable
    run.pending = {call.id: call for call in calls}
    run.tool_calls_used += len(calls)
    run.tool_errors = step.snap.tool_errors_in_a_row
    run.incomplete = 0
    for call in calls:
        sig = signature(call)
        run.streak = run.streak + 1 if sig == run.last_call else 1
        run.last_call = sig
