"""handoff: another agent takes the task; its answer comes back as the call's result.

Layer 1, P2. On entry the handoff call becomes pending, like an executed call,
and the run waits for the delegate's result through `on_tool_results`.
"""

from __future__ import annotations

from agentfsm.core.run_state import Run, Step

__all__ = ["enter"]


def enter(run: Run, step: Step) -> None:
    """Make the handoff call pending until the delegate answers."""
    run.pending = {call.id: call for call in step.snap.handoffs}
    run.incomplete = 0
