"""agentfsm: decide, after every LLM turn, what an agent does next.

An explicit state machine: execute the tool calls and call the model again,
accept the final answer, retry a broken output, hand off, ask a human, or stop
with a named reason. See DESIGN.md for the states and the P0-P7 routing.
"""

from __future__ import annotations

import importlib
from typing import Any

from agentfsm import _public, exceptions, guards, states
from agentfsm._engine.controller import Controller
from agentfsm._engine.policy import Policy
from agentfsm._model._errors import at_call as _at_call
from agentfsm._model.approvals import Approval
from agentfsm._model.ledger import Account, Hold, Ledger, Left
from agentfsm._model.snapshot import RunSnapshot
from agentfsm._model.tools import ToolSpec
from agentfsm._model.types import (
    Action,
    Decision,
    ExitReason,
    FinishReason,
    ModelTurn,
    Priority,
    ShadowVerdict,
    State,
    ToolCall,
    ToolResult,
    Usage,
)
from agentfsm._version import __version__ as __version__
from agentfsm.exceptions import AgentFSMError

__all__ = [
    "Account",
    "Action",
    "Agent",
    "AgentFSMError",
    "Approval",
    "Controller",
    "Decision",
    "Executor",
    "ExitReason",
    "FinishReason",
    "Hold",
    "Inbox",
    "Ledger",
    "Left",
    "ModelTurn",
    "Policy",
    "Priority",
    "ProviderRetry",
    "ReplayResult",
    "RunResult",
    "RunSnapshot",
    "ShadowVerdict",
    "State",
    "StreamAccumulator",
    "ToolCall",
    "ToolOptions",
    "ToolResult",
    "ToolSpec",
    "TraceWriter",
    "Usage",
    "arun",
    "compare",
    "detect_provider",
    "exceptions",
    "guards",
    "normalize",
    "read_trace",
    "replay_run",
    "run",
    "running_call",
    "states",
    "tool",
]

_LAZY = {
    "Agent": "agentfsm._runner.agents",
    "Executor": "agentfsm._runner.executor",
    "Inbox": "agentfsm._runner.session",
    "ProviderRetry": "agentfsm._runner.retry",
    "ReplayResult": "agentfsm._replay.engine",
    "RunResult": "agentfsm._runner.loop",
    "StreamAccumulator": "agentfsm.providers",
    "ToolOptions": "agentfsm._runner.executor",
    "TraceWriter": "agentfsm._replay.trace",
    "arun": "agentfsm._runner.loop",
    "compare": "agentfsm._replay.engine",
    "detect_provider": "agentfsm.providers",
    "read_trace": "agentfsm._replay.trace",
    "replay_run": "agentfsm._replay.engine",
    "run": "agentfsm._runner.loop",
    "running_call": "agentfsm._runner.executor",
    "tool": "agentfsm._runner.executor",
}
"""Names imported on first use: the runner (litellm), replay and the normalizers stay out of
`import agentfsm`, which the per-step path and short-lived hosts pay for."""


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'agentfsm' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    _public.sweep()
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


@_at_call
def normalize(payload: Any, provider: str | None = None) -> ModelTurn:
    """Read one model output in any supported wire format into a ModelTurn."""
    from agentfsm.providers import normalize as _normalize

    return _normalize(payload, provider=provider)


_public.publish(__name__, globals(), __all__)
_public.publish_lazy(__name__, _LAZY)
