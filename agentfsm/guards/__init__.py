"""Guards: the conditions on the machine's transitions, grouped by layer.

Layer 1 structure (`structure`), 2 tool results (`results`), 3 completion
(`completion`), 4 loop risk (`loop`), 5 boundaries (`boundaries`). Compose
them with `|`, `&` and `~`; `parse_guard` reads a repr back into a guard.
"""

from __future__ import annotations

from agentfsm import _public
from agentfsm._model._errors import at_call as _at_call
from agentfsm.exceptions import PolicyError
from agentfsm.guards._base import AllOf, AnyOf, FunctionGuard, Guard, Hit, Not, Otherwise, as_guard
from agentfsm.guards._parse import parse_guard as _parse
from agentfsm.guards.boundaries import (
    ContentFiltered,
    ContextLimit,
    CostBudget,
    Deadline,
    HumanApproved,
    HumanDeclined,
    MaxToolCalls,
    MaxTurns,
    NeedsApproval,
    PermissionDenied,
    Refused,
    TokenBudget,
    TreeBudget,
)
from agentfsm.guards.completion import (
    AnswerComplete,
    AnswerIncomplete,
    Paused,
    Verifier,
    non_empty_answer,
)
from agentfsm.guards.intent import LoopLadder, ToolLoops, intent_key
from agentfsm.guards.loop import LoopRung, NoProgress, RepeatedCall, RetriesExhausted
from agentfsm.guards.results import ResultsReady, ToolErrorLimit, ToolFailed
from agentfsm.guards.structure import (
    HandoffRequested,
    HasToolCalls,
    MalformedToolCall,
    OutputTruncated,
    ProviderFailed,
    SignalConflict,
)

__all__ = [
    "AllOf",
    "AnswerComplete",
    "AnswerIncomplete",
    "AnyOf",
    "ContentFiltered",
    "ContextLimit",
    "CostBudget",
    "Deadline",
    "FunctionGuard",
    "Guard",
    "HandoffRequested",
    "HasToolCalls",
    "Hit",
    "HumanApproved",
    "HumanDeclined",
    "LoopLadder",
    "LoopRung",
    "MalformedToolCall",
    "MaxToolCalls",
    "MaxTurns",
    "NeedsApproval",
    "NoProgress",
    "Not",
    "Otherwise",
    "OutputTruncated",
    "Paused",
    "PermissionDenied",
    "ProviderFailed",
    "Refused",
    "RepeatedCall",
    "ResultsReady",
    "RetriesExhausted",
    "SignalConflict",
    "TokenBudget",
    "ToolErrorLimit",
    "ToolFailed",
    "ToolLoops",
    "TreeBudget",
    "Verifier",
    "as_guard",
    "intent_key",
    "non_empty_answer",
    "parse_guard",
]

REGISTRY: dict[str, type[Guard]] = {
    cls.__name__: cls
    for cls in (
        AnswerComplete,
        AnswerIncomplete,
        ContentFiltered,
        ContextLimit,
        CostBudget,
        Deadline,
        HandoffRequested,
        HasToolCalls,
        HumanApproved,
        HumanDeclined,
        LoopRung,
        MalformedToolCall,
        MaxToolCalls,
        MaxTurns,
        NeedsApproval,
        NoProgress,
        Otherwise,
        OutputTruncated,
        Paused,
        PermissionDenied,
        ProviderFailed,
        Refused,
        RepeatedCall,
        ResultsReady,
        RetriesExhausted,
        SignalConflict,
        TokenBudget,
        ToolErrorLimit,
        ToolFailed,
        TreeBudget,
    )
}
"""Guard classes a policy file may name."""


@_at_call
def parse_guard(text: str) -> Guard:
    """Build a guard from code such as `"TokenBudget(200_000) | MaxTurns(50)"`."""
    if not isinstance(text, str):
        raise PolicyError(f"a guard's code is a str, not {type(text).__name__}")
    return _parse(text, REGISTRY)


_public.publish(__name__, globals(), __all__, submodules=True)
