"""recover: a broken output (cut, unparseable call) is retried, a bounded number of times.

Layer 1, P0. Nothing from the broken output is executed. On entry the retry
counter moves on; `RetriesExhausted` ends the run when it reaches the policy's
`max_retries`.
"""

from __future__ import annotations

from agentfsm._model.run_state import Run, Step

__all__ = ["enter"]


def enter(run: Run, step: Step) -> None:
    """Count one more recovery in a row."""
    run.retries += 1
