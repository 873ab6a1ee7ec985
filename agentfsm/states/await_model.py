"""await_model: the host calls the model; the run waits for its output.

On entry the step's counters are committed: consecutive tool errors, identical
results, incomplete answers; pending calls are cleared.
"""

from __future__ import annotations

from agentfsm._model.run_state import Run, Step

__all__ = ["enter"]


def enter(run: Run, step: Step) -> None:
    """Commit the step's loop counters and clear pending work."""
    snap = step.snap
    run.pending = {}
    run.approved, run.refused = (), {}
    run.interjection = None
    run.round_failed = False
    run.pending_approval = ()
    run.pending_allowed = ()
    run.pending_rejected = ()
    run.tool_errors = snap.tool_errors_in_a_row
    run.same_results = snap.same_results_in_a_row
    out = snap.output
    if snap.phase == "model_output" and out is not None and not out.tool_calls:
        run.incomplete = snap.incomplete_in_a_row
