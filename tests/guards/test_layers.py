"""Every built-in guard's layer, priority and exit reason, as DESIGN.md gives them, in one
table: a guard added to `agentfsm.guards` without a row here fails."""

from __future__ import annotations

import inspect

import pytest

import agentfsm.guards as guards
from agentfsm import ExitReason, Priority
from agentfsm.guards import (
    AnswerComplete,
    AnswerIncomplete,
    ContentFiltered,
    ContextLimit,
    CostBudget,
    Deadline,
    Guard,
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

P, X = Priority, ExitReason

LAYERS: list[tuple[Guard, int, Priority, ExitReason | None]] = [
    # Layer 1: structure
    (OutputTruncated(), 1, P.P0, None),
    (MalformedToolCall(), 1, P.P0, None),
    (SignalConflict(), 1, P.P7, None),
    (HasToolCalls(), 1, P.P1, None),
    (HandoffRequested(), 1, P.P2, None),
    # Layer 2: tool results
    (ToolErrorLimit(5), 2, P.P6, X.TOOL_ERRORS),
    (ToolFailed(), 2, P.P5, None),
    (ResultsReady(), 2, P.P1, None),
    # Layer 3: completion
    (AnswerComplete(), 3, P.P3, X.COMPLETED),
    (AnswerIncomplete(), 3, P.P4, None),
    (Paused(), 3, P.P4, None),
    # Layer 4: loop risk
    (RepeatedCall(3), 4, P.P6, X.DOOM_LOOP),
    (NoProgress(4), 4, P.P6, X.NO_PROGRESS),
    (LoopRung("stop"), 4, P.P6, X.DOOM_LOOP),
    (RetriesExhausted(2), 4, P.P0, X.UNRECOVERABLE_OUTPUT),
    # Layer 5: boundaries (the provider's failure is one too)
    (ProviderFailed(), 5, P.P6, X.PROVIDER_ERROR),
    (MaxTurns(50), 5, P.P6, X.MAX_TURNS),
    (MaxToolCalls(10), 5, P.P6, X.MAX_TOOL_CALLS),
    (TokenBudget(1_000), 5, P.P6, X.TOKEN_BUDGET),
    (TreeBudget(), 5, P.P6, X.TOKEN_BUDGET),
    (CostBudget(0.5), 5, P.P6, X.COST_BUDGET),
    (Deadline(60), 5, P.P6, X.DEADLINE),
    (ContextLimit(100_000), 5, P.P6, X.CONTEXT_EXHAUSTED),
    (Refused(), 5, P.P6, X.REFUSAL),
    (ContentFiltered(), 5, P.P6, X.CONTENT_FILTER),
    (NeedsApproval(), 5, P.P6, None),
    (PermissionDenied(), 5, P.P6, X.PERMISSION_DENIED),
    (HumanDeclined(), 5, P.P6, X.HUMAN_DECLINED),
    (HumanApproved(), 5, P.P1, None),
]


@pytest.mark.parametrize(("guard", "layer", "priority", "exit_reason"), LAYERS, ids=repr)
def test_layer_priority_and_exit_reason(
    guard: Guard, layer: int, priority: Priority, exit_reason: ExitReason | None
) -> None:
    """Each built-in guard carries the layer, priority and exit reason of DESIGN.md."""
    assert (guard.layer, guard.priority, guard.exit_reason) == (layer, priority, exit_reason)


def test_every_built_in_guard_has_a_row() -> None:
    """The table covers every concrete guard class `agentfsm.guards` exports (the
    composites and `FunctionGuard` take their layer from what they wrap)."""
    wrapping = {guards.AllOf, guards.AnyOf, guards.Not, guards.Otherwise, guards.FunctionGuard}
    exported = {
        value
        for name in guards.__all__
        if inspect.isclass(value := getattr(guards, name))
        and issubclass(value, Guard)
        and value is not Guard
        and value not in wrapping
    }
    assert exported == {type(guard) for guard, *_ in LAYERS}
