"""What the span readers' tests share: any JSON value, and reading a file to its end."""

from __future__ import annotations

from pathlib import Path

from hypothesis import strategies as st

from agentfsm._replay.trajectories import read_runs
from agentfsm.exceptions import TraceError

__all__ = ["JSON", "read_all"]

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=2**63)
    | st.floats(allow_nan=False)
    | st.text(max_size=8)
    | st.sampled_from(["chat", "execute_tool", "[", "[{}]", '[{"parts": 1}]', "12"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=12), inner),
    max_leaves=8,
)
"""Any JSON value, with the strings the reader looks for."""


def read_all(path: Path) -> str | None:
    """Read every step of every run: None, or the TraceError's message."""
    try:
        for run in read_runs(path):
            list(run.steps)
    except TraceError as exc:
        return str(exc)
    return None
