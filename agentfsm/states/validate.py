"""validate: decide, call by call, which tool calls may run.

Layers 1, 4 and 5. A call to an undeclared tool, or with arguments that do not
fit the tool's schema, is not run: the model gets an error result instead. The
permission sources (rules, the table, the hook) say allow, ask or deny. A
handoff must be the only call of its turn, and is checked like any call: a
denied handoff is refused, one marked `ask` waits for a human. The repetition
streak counts identical consecutive rounds of calls, every call of the turn
included: a refused or denied call repeated is a repeat like any other.
"""

from __future__ import annotations

from functools import partial

from agentfsm._model.call_history import CallHistory, counted
from agentfsm._model.call_identity import CallKey, describe, round_signature, signature
from agentfsm._model.run_state import Run, Step
from agentfsm._model.snapshot import unchecked_evolve
from agentfsm._model.types import ShadowVerdict, State, ToolCall, ToolResult
from agentfsm.guards.intent import warning
from agentfsm.states import _approvals, _shadow

__all__ = ["enter", "recheck", "verdict"]


_Plan = tuple[
    list[ToolCall], list[ToolCall], list[ToolCall], list[ToolCall], list[ToolResult], list[str]
]
"""The calls that may run, await approval, are denied, hand off; the refusals' results; and
why each asked call is asked."""


def _refusal(call: ToolCall, why: str) -> ToolResult:
    return ToolResult(call_id=call.id, name=call.name, content=why, is_error=True)


def enter(run: Run, step: Step) -> None:
    """Split the turn's calls into runnable, refused, denied, to-approve and handoffs."""
    calls = step.calls
    run.retries = 0
    snap = step.snap
    if not calls:
        step.snap = unchecked_evolve(snap, incomplete_in_a_row=run.incomplete + 1)
        return
    shadow: list[ShadowVerdict] | None = None if run.shadow is None else []
    covered: list[tuple[str, str]] = []
    executable, approval, denied, handoffs, rejected, asked = _plan(
        run, calls, shadow, (covered, snap.elapsed)
    )
    if shadow:
        step.shadow = tuple(shadow)
    ladder = run.policy.loops
    key = signature if ladder is None else ladder.key
    sigs: dict[str, CallKey] = {call.id: key(call) for call in calls}
    step.sigs = sigs
    runnable = (*executable, *approval)
    # The round is every call of the turn, refused and denied ones included: a model that
    # makes the same denied call again and again is repeating itself like any other.
    step.round = round_signature(list(sigs.values()))
    streak = run.streak + 1 if step.round == run.last_call else 1
    repeated = describe(calls) if streak > 1 else ""
    rung = None if ladder is None else ladder.rung([c.name for c in calls], streak)
    feedback = ladder is None and run.policy.on_repeat == "feedback"
    if feedback and streak >= run.policy.repeat_threshold:
        rejected += _feed_back(runnable, streak, repeated)
        executable, approval = [], []
    runs = bool(executable or approval or handoffs)
    notes = (*snap.notes, *_covered_notes(covered)) if covered and runs else snap.notes
    said = warning(ladder, calls, streak) if ladder is not None and rung == "warn" else ""
    if said:  # the warn rung: the warning for the model (the decision's note), and its reason
        notes = (*notes, said)
    if not runs:
        # Nothing of the round runs, so execute will not count it: it counts here, and a
        # model that ignores the refusals ends as DOOM_LOOP.
        run.last_call, run.streak = step.round, streak
    step.snap = unchecked_evolve(
        snap,
        executable=tuple(executable),
        needs_approval=tuple(approval),
        asked_because=tuple(asked) if approval else (),
        denied=tuple(denied),
        handoffs=tuple(handoffs),
        rejected=tuple(rejected),
        # A repeat fed back refuses the covered calls too: they are not covered then.
        covered=tuple(covered) if executable or handoffs else (),
        notes=notes,
        repeat_streak=streak,
        repeated=repeated,
        loop_rung=rung or "",
        **({"warning": said} if said else {}),
        # One repair round, however many of its calls were refused: complete here when
        # nothing of it runs; otherwise execute (or await_human) keeps that it failed.
        tool_errors_in_a_row=run.tool_errors + 1
        if not runs and _failed(run, rejected, denied)
        else run.tool_errors,
    )


def _failed(run: Run, rejected: list[ToolResult], denied: list[ToolCall]) -> bool:
    """Whether the round's refusals make it a failed round: any refusal does, unless the
    policy does not count denials (`denials_are_tool_errors=False`) and all were denials."""
    if not rejected or run.policy.denials_are_tool_errors:
        return bool(rejected)
    ids = {call.id for call in denied}
    return any(result.call_id not in ids for result in rejected)


def _plan(
    run: Run,
    calls: list[ToolCall],
    shadow: list[ShadowVerdict] | None,
    remembered: tuple[list[tuple[str, str]], float],
) -> _Plan:
    executable: list[ToolCall] = []
    approval: list[ToolCall] = []
    denied: list[ToolCall] = []
    handoffs: list[ToolCall] = []
    rejected: list[ToolResult] = []
    asked: list[str] = []
    handoff_names = run.policy.handoffs
    alone = len(calls) == 1
    for call in calls:
        handoff = call.name in handoff_names
        if handoff and not alone:
            why = f"handoff {call.name!r} must be the only call of its turn"
            rejected.append(_refusal(call, why))
            continue
        problem = _check(run, call)
        if problem is not None:
            rejected.append(_refusal(call, problem))
            if shadow is not None:
                shadow.append(_shadow.refused(call, problem))
            continue
        permission, why = _permission(run, call)
        if shadow is not None and run.shadow is not None:  # recorded, never enforced
            shadow.append(
                _shadow.judged(run.shadow, call, permission, why, partial(CallHistory.of_run, run))
            )
        if permission == "ask" and run.approvals:
            permission = _remembered(run, call, *remembered)
        if permission == "allow":
            (handoffs if handoff else executable).append(call)
        elif permission == "ask":
            approval.append(call)  # an approved handoff still hands off (on_human_reply)
            asked.append(f"{call.name}: {why}")
        else:
            denied.append(call)
            rejected.append(_refusal(call, why))
    return executable, approval, denied, handoffs, rejected, asked


def _remembered(run: Run, call: ToolCall, covered: list[tuple[str, str]], now: float) -> str:
    """An asked call a live remembered approval covers is allowed, and the use counted.

    Only an "ask" reaches here: a deny never does, and the guards after validate (repeats,
    budgets) read the covered call like any other. A use is counted when the approval
    covers the call, so a turn a guard then stops has spent it: uses never exceed N.
    """
    approval = _approvals.covering(run, call, now)
    if approval is None:
        return "ask"
    run.approvals = _approvals.spent(run.approvals, approval)
    covered.append((call.id, approval.id))
    return "allow"


def _covered_notes(covered: list[tuple[str, str]]) -> list[str]:
    """The reason's note for each call a remembered approval let run."""
    return [f"call {c} runs under remembered approval {a}" for c, a in covered]


def verdict(run: Run, call: ToolCall) -> tuple[str, str]:
    """Whether `call` may run ("allow"), needs a human ("ask") or not ("deny"), and why.

    A call to an undeclared tool, or whose arguments do not fit its schema, is denied;
    so is anything the permission sources answer that is not understood (fail closed).
    """
    problem = _check(run, call)
    return ("deny", problem) if problem is not None else _permission(run, call)


def _permission(run: Run, call: ToolCall) -> tuple[str, str]:
    """The permission sources' verdict on a call that fits its tool, and its source."""
    policy = run.policy
    if policy.cedar is None:  # the history is built only for a source that reads it
        permission, source = policy.permission_verdict(call)
    else:
        permission, source = policy.permission_verdict(call, history=CallHistory.of_run(run))
    if permission == "allow" or permission == "ask":
        return permission, source
    # "deny", or anything not understood: fail closed
    return "deny", f"permission denied: {call.name!r} may not run ({source})"


def recheck(run: Run) -> None:
    """Check a restored run's cleared and waiting calls again, against the policy it runs with.

    A dump can be edited, and a permission hook may answer otherwise now. A call the policy
    denies (or that no longer fits its declared tool) is not cleared: it stays among the
    calls awaiting results, `may_run` says no, and it gets an error result saying why in the
    next decision. A cleared call the policy wants a human to approve, with no approval
    recorded, waits for a human again, the run's other cleared calls waiting with it.
    """
    refused = dict(run.refused)
    if run.pending:
        asks: list[ToolCall] = []
        for call in run.pending.values():
            permission, why = verdict(run, call)
            if permission == "deny":
                refused[call.id] = f"not executed: {why}"
            elif permission == "ask" and call.id not in run.approved:
                asks.append(call)
        if asks:
            _ask_again(run, asks, refused)
    elif run.pending_approval or run.pending_allowed:
        _recheck_waiting(run, refused)
    run.refused = refused


def _ask_again(run: Run, asks: list[ToolCall], refused: dict[str, str]) -> None:
    """Move cleared calls back to awaiting a human; none of them has run."""
    asked = {call.id for call in asks}
    run.pending_approval = tuple(asks)
    run.pending_allowed = tuple(
        c for c in run.pending.values() if c.id not in asked and c.id not in refused
    )
    run.pending_rejected = ()
    run.tool_calls_used = max(0, run.tool_calls_used - len(run.pending))  # counted again then
    if run.tool_counts:
        run.tool_counts = counted(run.tool_counts, run.pending.values(), -1)
    run.pending, run.approved = {}, ()
    run.state = State.AWAIT_HUMAN


def _recheck_waiting(run: Run, refused: dict[str, str]) -> None:
    """Calls awaiting a human: a denied one is refused, an allowed one now `ask` is asked."""
    approval: list[ToolCall] = []
    allowed: list[ToolCall] = []
    for call in (*run.pending_approval, *run.pending_allowed):
        permission, why = verdict(run, call)
        if permission == "deny":
            refused[call.id] = f"not executed: {why}"
        elif permission == "ask" or call in run.pending_approval:
            approval.append(call)  # a call already awaiting approval keeps waiting for it
        else:
            allowed.append(call)
    run.pending_approval, run.pending_allowed = tuple(approval), tuple(allowed)


def _feed_back(runnable: tuple[ToolCall, ...], streak: int, repeated: str) -> list[ToolResult]:
    """Refusals of a repeated round of calls: error results instead of running it."""
    why = (
        f"not executed: {repeated} was already called {streak - 1} times in a row with the "
        "same arguments, and calling it again would not change anything; try something else"
    )
    return [_refusal(call, why) for call in runnable]


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
