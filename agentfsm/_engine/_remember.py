"""The Controller's side of remembered approvals: made from an answer or a grant, revoked.

`on_human_reply(remember={call_id: scope})` makes one approval per approved call it names,
from the arguments that run (an edit included); `grant` makes one the host was told out of
band (an approvals file, a settings page); `revoke` ends one. Each reads and checks all it
is given before the run changes, so a bad argument leaves the Controller as it was.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentfsm._model._checked import read
from agentfsm._model.approvals import Approval
from agentfsm._model.run_state import Run
from agentfsm._model.types import ToolCall
from agentfsm.exceptions import InvalidInputError
from agentfsm.states._approvals import ANY_ARGUMENTS, ScopeSpec, granted, live, scope_of

__all__ = ["from_reply", "grant", "live", "now_of", "revoke"]


def now_of(run: Run) -> float:
    """The run's time now, in seconds since it started (what approvals expire by)."""
    return run.clock() - run.started


def from_reply(
    run: Run, remember: object, approved: tuple[ToolCall, ...], asked: tuple[ToolCall, ...]
) -> tuple[Approval, ...]:
    """The approvals a reply's `remember` makes: `{call_id: scope}` over approved asked calls.

    A call that will not run (declined, or its edit denied) remembers nothing; naming one
    that was not asked is an InvalidInputError.
    """
    if remember is None:
        return ()
    if not isinstance(remember, Mapping):
        raise _bad(
            run, f"remember must be a mapping {{call_id: scope}}, not {type(remember).__name__}"
        )
    asked_ids = {c.id for c in asked}
    running = {c.id: c for c in approved}
    made: list[Approval] = []
    count = run.approval_count
    items = read("on_human_reply: remember", InvalidInputError, lambda: list(remember.items()))
    for call_id, value in items:
        if type(call_id) is not str or call_id not in asked_ids:
            among = ", ".join(repr(i) for i in sorted(asked_ids)) or "none"
            raise _bad(run, f"remember names {call_id!r:.60}, not among the asked calls ({among})")
        spec = _checked(run, value, f"remember[{call_id!r}]", "on_human_reply")
        call = running.get(call_id)
        if call is None:
            continue
        try:
            approval = granted(
                run,
                spec,
                call.name,
                call.arguments,
                now=now_of(run),
                where=f"remember[{call_id!r}]",
                call_id=call_id,
                number=count + len(made) + 1,  # numbered in the reply's order
            )
        except InvalidInputError as exc:
            raise _bad(run, exc.message) from None
        if approval is not None:
            made.append(approval)
    return tuple(made)


def _checked(run: Run, value: object, where: str, what: str) -> ScopeSpec:
    try:
        return scope_of(value, where)
    except InvalidInputError as exc:
        raise _bad(run, exc.message, what) from None


def grant(
    run: Run,
    tool: object,
    *,
    scope: object,
    pattern: object,
    arguments: object,
    identity: object,
    source: object,
) -> Approval:
    """An approval the host grants out of band: checked whole, not yet added to the run."""
    _check_grant(run, tool, identity, source)
    spec = _checked(run, scope, "scope", "grant")
    if spec.scope == "once":
        raise _bad(run, "grant: scope 'once' remembers nothing; give a wider scope", "grant")
    if (pattern is None) == (arguments is None):
        raise _bad(
            run,
            f"grant: give a pattern (e.g. 'path^=/srv/out/*', or {ANY_ARGUMENTS!r} for any "
            "arguments) or the exact arguments, one of the two",
            "grant",
        )
    if pattern is not None:
        if not isinstance(pattern, str) or not pattern.strip():
            raise _bad(run, f"grant: pattern must be a non-empty str, not {pattern!r:.60}", "grant")
        spec = spec._replace(pattern=pattern)
    plain = _arguments(run, arguments) if arguments is not None else None
    assert isinstance(tool, str)  # checked by _check_grant
    try:
        approval = granted(
            run,
            spec,
            tool,
            plain,
            now=now_of(run),
            where="pattern",
            source=str(source),
            identity=identity if isinstance(identity, str) else None,
        )
    except InvalidInputError as exc:
        raise _bad(run, exc.message, "grant") from None
    assert approval is not None  # "once" was refused above
    return approval


def _check_grant(run: Run, tool: object, identity: object, source: object) -> None:
    """The grant's tool, identity and source, each of the right kind."""
    if not isinstance(tool, str) or not tool:
        raise _bad(run, f"grant: tool must be a non-empty str, not {tool!r:.60}", "grant")
    if run.specs is not None and tool not in run.specs:
        raise _bad(run, f"grant: {tool!r} is not a declared tool", "grant")
    if identity is not None and not isinstance(identity, str):
        raise _bad(run, f"grant: identity must be a str or None, not {identity!r:.60}", "grant")
    if not isinstance(source, str) or not source:
        raise _bad(run, f"grant: source must be a non-empty str, not {source!r:.60}", "grant")


def _arguments(run: Run, arguments: object) -> dict[str, Any]:
    from agentfsm._engine._answers import _json_object  # the reply's own JSON check

    return _json_object(run, "grant: arguments", arguments)


def revoke(run: Run, approval_id: object) -> Approval:
    """End the approval `approval_id` of the run; InvalidInputError if there is none."""
    if not isinstance(approval_id, str):
        raise _bad(
            run, f"revoke: approval_id must be a str, not {type(approval_id).__name__}", "revoke"
        )
    for approval in run.approvals:
        if approval.id == approval_id:
            run.approvals = tuple(a for a in run.approvals if a.id != approval_id)
            return approval
    held = ", ".join(a.id for a in live(run.approvals, now_of(run), run.episode)) or "none"
    raise _bad(run, f"revoke: no remembered approval {approval_id!r} (live: {held})", "revoke")


def _bad(run: Run, message: str, what: str = "on_human_reply") -> InvalidInputError:
    text = message if message.startswith(f"{what}:") else f"{what}: {message}"
    return InvalidInputError(text, state=run.state.value, turn=run.turn)
