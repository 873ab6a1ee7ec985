"""await_human: a human must approve calls or clarify; the run can pause here.

Layer 5. On entry the calls awaiting approval are kept (with the allowed calls
of the same turn, and the error results made for its refused calls) until
`on_human_reply`: approved, they all run; declined, each gets an error result.
"""

from __future__ import annotations

from agentfsm._model.run_state import Run, Step

__all__ = ["enter"]


def enter(run: Run, step: Step) -> None:
    """Keep what the human must approve until the reply arrives."""
    snap = step.snap
    if snap.needs_approval:
        # The allowed calls of the same turn wait with them: never dropped.
        run.pending_approval, run.pending_allowed = snap.needs_approval, snap.executable
    else:
        run.pending_approval, run.pending_allowed = snap.executable, ()
    run.pending_rejected = snap.rejected
    if snap.phase == "model_output":  # the turn's refusals fail its round, approved or not
        run.round_failed = bool(snap.rejected)
    run.pending = {}
