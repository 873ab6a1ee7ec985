"""verify: an answer without tool calls is checked for completion.

Layer 3. The work of this state is its guards: `AnswerComplete(*verifiers)`
runs the pluggable verifiers (an empty answer never passes) on the frozen
snapshot. Nothing is recorded on entry.
"""

from __future__ import annotations

from agentfsm._model.run_state import Run, Step

__all__ = ["enter"]


def enter(run: Run, step: Step) -> None:
    """Nothing to record: the verifiers are pure guards on the snapshot."""
