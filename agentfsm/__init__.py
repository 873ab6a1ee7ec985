"""agentfsm: decide, after every LLM turn, what an agent does next.

An explicit state machine: execute the tool calls and call the model again,
accept the final answer, retry a broken output, hand off, ask a human, or stop
with a named reason. See DESIGN.md for the states and the P0-P7 routing.
"""

from __future__ import annotations

from typing import Any

from agentfsm import exceptions, guards, states
from agentfsm._controller import Controller
from agentfsm._policy import Policy
from agentfsm._snapshot import RunSnapshot
from agentfsm._tools import ToolSpec
from agentfsm._types import (
    Action,
    Decision,
    ExitReason,
    FinishReason,
    ModelTurn,
    Priority,
    State,
    ToolCall,
    ToolResult,
    Usage,
)
from agentfsm.exceptions import AgentFSMError

__all__ = [
    "Action",
    "AgentFSMError",
    "Controller",
    "Decision",
    "ExitReason",
    "FinishReason",
    "ModelTurn",
    "Policy",
    "Priority",
    "RunSnapshot",
    "State",
    "ToolCall",
    "ToolResult",
    "ToolSpec",
    "Usage",
    "exceptions",
    "guards",
    "normalize",
    "states",
]

__version__ = "0.1.0"


def normalize(payload: Any, provider: str | None = None) -> ModelTurn:
    """Read one model output in any supported wire format into a ModelTurn."""
    from agentfsm.providers import normalize as _normalize

    return _normalize(payload, provider=provider)
