"""handoff: another agent takes the task; its answer comes back as the call's result.

Layer 1, P2. On entry the handoff call becomes pending, like an executed call,
and the run waits for the delegate's result through `on_tool_results`.
"""

from __future__ import annotations

from agentfsm._model.call_identity import signature
from agentfsm._model.run_state import Run, Step

__all__ = ["enter"]


def enter(run: Run, step: Step) -> None:
    """Make the handoff call pending until the delegate answers."""
    calls = step.snap.handoffs
    run.pending = {call.id: call for call in calls}
    run.approved = (
        tuple(run.pending)
        if step.snap.phase == "human_reply"
        else tuple(i for i, _ in step.snap.covered if i in run.pending)
    )
    # Like executed calls, a pending handoff has its call key: a dump of the run is whole.
    run.pending_sigs = {call.id: step.sigs.get(call.id) or signature(call) for call in calls}
    run.incomplete = 0
    run.round_failed = False  # a handoff is alone in its turn: nothing of it was refused
