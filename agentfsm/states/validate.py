"""validate: decide, call by call, which tool calls may run.

Layers 1, 4 and 5. A call to an undeclared tool, or with arguments that do not
fit the tool's schema, is not run: the model gets an error result instead. The
permission hook says allow, ask or deny. A handoff must be the only call of
its turn. The repetition streak counts identical consecutive rounds of calls.
"""

from __future__ import annotations

from agentfsm.core.call_identity import describe, round_signature, signature
from agentfsm.core.run_state import Run, Step
from agentfsm.core.snapshot import RunSnapshot
from agentfsm.core.types import ToolCall, ToolResult, build

__all__ = ["enter"]


class _Plan:
    __slots__ = ("approval", "denied", "executable", "handoffs", "rejected")

    def __init__(self) -> None:
        self.executable: list[ToolCall] = []
        self.approval: list[ToolCall] = []
        self.denied: list[ToolCall] = []
        self.handoffs: list[ToolCall] = []
        self.rejected: list[ToolResult] = []

    def reject(self, call: ToolCall, why: str) -> None:
        self.rejected.append(
            ToolResult(call_id=call.id, name=call.name, content=why, is_error=True)
        )


def enter(run: Run, step: Step) -> None:
    """Split the turn's calls into runnable, refused, denied, to-approve and handoffs."""
    calls = step.output.tool_calls if step.output is not None else []
    run.retries = 0
    snap = step.snap
    if not calls:
        step.snap = build(RunSnapshot, {**snap.__dict__, "incomplete_in_a_row": run.incomplete + 1})
        return
    plan = _plan(run, calls)
    sigs = step.sigs = {call.id: signature(call) for call in calls}
    runnable = (*plan.executable, *plan.approval)
    keys = [sigs[c.id] for c in runnable]
    streak = 0
    if keys:
        step.round = round_signature(keys)
        streak = run.streak + 1 if step.round == run.last_call else 1
    repeated = describe(runnable) if streak > 1 else ""
    if streak >= run.policy.repeat_threshold and run.policy.on_repeat == "feedback":
        _feed_back(plan, runnable, streak, repeated)
        # A refused round still counts: a model that ignores the feedback ends as DOOM_LOOP.
        run.last_call, run.streak = step.round, streak
    values = snap.__dict__.copy()  # same keys: copied in one block, then stored over
    values["executable"] = tuple(plan.executable)
    values["needs_approval"] = tuple(plan.approval)
    values["denied"] = tuple(plan.denied)
    values["handoffs"] = tuple(plan.handoffs)
    values["rejected"] = tuple(plan.rejected)
    values["repeat_streak"] = streak
    values["repeated"] = repeated
    values["tool_errors_in_a_row"] = run.tool_errors + len(plan.rejected)
    step.snap = build(RunSnapshot, values)


def _plan(run: Run, calls: list[ToolCall]) -> _Plan:
    plan = _Plan()
    handoff_names = run.policy.handoffs
    alone = len(calls) == 1
    for call in calls:
        if call.name in handoff_names:
            if alone:
                plan.handoffs.append(call)
            else:
                plan.reject(call, f"handoff {call.name!r} must be the only call of its turn")
            continue
        problem = _check(run, call)
        if problem is not None:
            plan.reject(call, problem)
            continue
        permission, source = run.policy.permission_verdict(call)
        if permission == "deny":
            plan.denied.append(call)
            plan.reject(call, f"permission denied: {call.name!r} may not run ({source})")
        elif permission == "ask":
            plan.approval.append(call)
        else:
            plan.executable.append(call)
    return plan


def _feed_back(plan: _Plan, runnable: tuple[ToolCall, ...], streak: int, repeated: str) -> None:
    """Refuse a repeated round of calls with an error result instead of running it."""
    why = (
        f"not executed: {repeated} was already called {streak - 1} times in a row with the "
        "same arguments, and calling it again would not change anything; try something else"
    )
    for call in runnable:
        plan.reject(call, why)
    plan.executable, plan.approval = [], []


def _check(run: Run, call: ToolCall) -> str | None:
    specs = run.specs
    if specs is None:
        return None
    spec = specs.get(call.name)
    if spec is None:
        known = ", ".join(sorted(specs)) or "none"
        return f"unknown tool {call.name!r}; declared tools: {known}"
    problem = spec.validate_arguments(call.arguments or {})
    return None if problem is None else f"invalid arguments for {call.name!r}: {problem}"
