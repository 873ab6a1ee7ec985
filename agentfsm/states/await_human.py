"""await_human: a human must approve calls or clarify; the run can pause here.

Layer 5. On entry the calls awaiting approval are kept (with the error results
made for refused calls of the same turn) until `on_human_reply`.
"""

from __future__ import annotations

from agentfsm.core.run_state import Run, Step

__all__ = ["enter"]


def enter(run: Run, step: Step) -> None:
    """Keep what the human must approve until the reply arrives."""
    snap = step.snap
    run.pending_approval = snap.needs_approval or snap.executable
    run.pending_rejected = snap.rejected
    run.pending = {}
