"""A human's answer, call by call: read the host's reply and split the asked calls by it.

`Controller.on_human_reply` takes one answer for every asked call, or one per call
(`{call_id: bool}`), with each call's own text and edited arguments for approved
ones. Everything here reads what the host gave, checks it completely before the
run changes, and builds the calls that run and the error results of the others.
An edited call is a new call for the policy: the arguments that run are the
arguments checked.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, NamedTuple

from agentfsm._model._checked import read
from agentfsm._model.limits import MAX_DEPTH
from agentfsm._model.run_state import Run
from agentfsm._model.types import ModelTurn, ToolCall, ToolResult
from agentfsm.exceptions import InvalidInputError
from agentfsm.states.validate import verdict

__all__ = ["Reply", "read_reply", "split"]


class Reply(NamedTuple):
    """A human reply as checked: the answer, text and edit of each asked call, by call id."""

    answers: dict[str, bool]
    """Every asked call's answer: True runs it, False declines it."""
    texts: dict[str, str]
    """The calls' own texts (`messages`), for asked calls only."""
    edits: dict[str, dict[str, Any]]
    """Edited arguments of approved calls, as plain JSON data of agentfsm's own."""
    approved: bool
    """The reply as one answer: False when every asked call is declined (or False was given)."""

    def record(self, approved: object, message: str | None) -> dict[str, Any]:
        """The `human_reply` event's fields: the answer as given, and each call's text and edit.

        A reply of one answer records as it always did (`approved`, `message`); the
        per-call fields appear only when given, so older traces read the same.
        """
        fields: dict[str, Any] = {
            "approved": approved if type(approved) is bool else dict(self.answers),
            "message": message,
        }
        if self.texts:
            fields["messages"] = dict(self.texts)
        if self.edits:
            fields["arguments"] = {i: _copy(a) for i, a in self.edits.items()}
        return fields


def read_reply(
    run: Run, approved: object, message: object, messages: object, arguments: object
) -> Reply:
    """Check a human reply against the calls awaiting approval; InvalidInputError if it is bad.

    `approved` is a bool, or a mapping whose keys are exactly the asked calls' ids and
    whose values are bools; `messages` maps asked calls' ids to str; `arguments` maps
    approved calls' ids to JSON objects. Nothing of the host's is kept: the reply holds
    copies, so a mapping changed later cannot change what was decided.
    """
    asked = [c.id for c in run.pending_approval]
    if message is not None and not isinstance(message, str):
        raise _bad(run, f"message must be a str or None, not {type(message).__name__}")
    answers = _answers(run, approved, asked)
    texts = _by_id(run, "messages", messages, asked)
    for call_id, text in texts.items():
        if not isinstance(text, str):
            raise _bad(run, f"messages[{call_id!r}] must be a str, not {type(text).__name__}")
    yes = [i for i in asked if answers[i]]
    edits = _by_id(run, "arguments", arguments, yes)
    plain = {i: _json_object(run, f"arguments[{i!r}]", edit) for i, edit in edits.items()}
    # A mapping answers each call; with no call asked (a clarification) it declines nothing.
    whole = approved if type(approved) is bool else any(answers.values()) or not answers
    return Reply(answers, dict(texts), plain, whole)


def _answers(run: Run, approved: object, asked: list[str]) -> dict[str, bool]:
    """Each asked call's answer: one bool for all, or the mapping's, which must answer each."""
    if type(approved) is bool:
        return dict.fromkeys(asked, approved)
    if not isinstance(approved, Mapping):
        raise _bad(
            run,
            "approved must be a bool or a mapping {call_id: bool} of the asked calls, not "
            f"{type(approved).__name__}",
        )
    answers = _by_id(run, "approved", approved, asked)
    missing = [i for i in asked if i not in answers]
    if missing:
        raise _bad(run, f"approved has no answer for the asked call(s) {_ids(missing)}")
    for call_id, answer in answers.items():
        if type(answer) is not bool:
            raise _bad(
                run, f"approved[{call_id!r}] must be True or False, not {type(answer).__name__}"
            )
    return answers


def _by_id(run: Run, name: str, given: object, allowed: list[str]) -> dict[str, Any]:
    """A mapping given by call id, read once; every key must be one of `allowed`."""
    if given is None:
        return {}
    if not isinstance(given, Mapping):
        raise _bad(run, f"{name} must be a mapping by call id or None, not {type(given).__name__}")
    items = read(f"on_human_reply: {name}", InvalidInputError, lambda: list(given.items()))
    unknown = [key for key, _ in items if type(key) is not str or key not in allowed]
    if unknown:
        which = "approved" if name == "arguments" else "asked"
        among = _ids(allowed) or "none"
        raise _bad(run, f"{name} names {_ids(unknown)}, not among the {which} calls ({among})")
    return dict(items)


def _json_object(run: Run, where: str, value: object) -> dict[str, Any]:
    """A copy of `value` as plain JSON data: an object of str keys; InvalidInputError otherwise.

    Objects are mappings with str keys, arrays lists or tuples, leaves str, finite
    numbers, bools and None; nesting deeper than MAX_DEPTH (a cycle included) is refused.
    """
    if not isinstance(value, Mapping):
        raise _bad(run, f"{where} must be a JSON object (a mapping), not {type(value).__name__}")
    copied = _json_value(run, where, value, 1)
    assert isinstance(copied, dict)  # a Mapping copies as a dict
    return copied


def _json_value(run: Run, where: str, value: object, depth: int) -> Any:
    """A plain copy of one JSON value `depth` levels down; InvalidInputError naming `where`."""
    if depth > MAX_DEPTH:
        raise _bad(run, f"{where} nests deeper than {MAX_DEPTH} levels")
    if value is None or type(value) in (str, bool, int):
        return value
    if type(value) is float:
        if not math.isfinite(value):
            raise _bad(run, f"{where} holds {value}, which JSON cannot hold")
        return value
    if isinstance(value, Mapping):
        items = read(where, InvalidInputError, lambda: list(value.items()))
        copy: dict[str, Any] = {}
        for key, item in items:
            if type(key) is not str:
                raise _bad(run, f"{where} has a {type(key).__name__} key; JSON keys are str")
            copy[key] = _json_value(run, f"{where}[{key!r}]", item, depth + 1)
        return copy
    if isinstance(value, list | tuple):
        return [_json_value(run, f"{where}[{n}]", v, depth + 1) for n, v in enumerate(value)]
    raise _bad(run, f"{where} holds a {type(value).__name__}, which is not JSON data")


def _copy(value: Any) -> Any:
    """A copy of plain JSON data (checked by `_json_value`, so bounded in depth)."""
    if type(value) is dict:
        return {k: _copy(v) for k, v in value.items()}
    if type(value) is list:
        return [_copy(v) for v in value]
    return value


def split(
    run: Run, reply: Reply, message: str | None, turn: ModelTurn | None
) -> tuple[tuple[ToolCall, ...], list[ToolResult]]:
    """The calls that run, in turn order, and an error result for each asked call that does not.

    When every asked call is declined, none of the turn runs: the allowed calls that
    waited with them get an error result too. Otherwise the approved calls run with
    the allowed ones, each declined call gets its own text, and each edited call is
    checked as a new call (`_edited`).
    """
    asked = run.pending_approval
    if not reply.approved:
        return (), _declined(asked, run.pending_allowed, reply, message)
    runs: list[ToolCall] = []
    results: list[ToolResult] = []
    for call in asked:
        if not reply.answers[call.id]:
            results.append(_decline(call, reply.texts.get(call.id) or message))
        elif call.id in reply.edits:
            _edited(run, call, reply.edits[call.id], runs, results)
        else:
            runs.append(call)
    return _in_turn_order(run.pending_allowed, runs, turn), results


def _edited(
    run: Run,
    call: ToolCall,
    edit: dict[str, Any],
    runs: list[ToolCall],
    results: list[ToolResult],
) -> None:
    """Check an approved call with edited arguments as a new call: it runs, or gets why not.

    Its declared tool's schema, then the permission sources: denied or invalid, it does
    not run and gets an error result saying why; allowed, it runs; asked, this answer
    (which saw these arguments) approves it. It keeps the call's id, name and kind.
    """
    new = ToolCall(id=call.id, name=call.name, arguments=_copy(edit), kind=call.kind)
    permission, why = verdict(run, new)
    if permission == "allow" or permission == "ask":
        runs.append(new)
    else:
        text = f"not executed: the edited arguments may not run: {why}"
        results.append(ToolResult(call_id=call.id, name=call.name, is_error=True, content=text))


def _decline(call: ToolCall, text: str | None) -> ToolResult:
    """The error result of a declined call, with the human's text when there is one."""
    said = f": {text}" if text else ""
    return ToolResult(
        call_id=call.id, name=call.name, is_error=True, content=f"declined by the human{said}"
    )


def _declined(
    asked: tuple[ToolCall, ...], allowed: tuple[ToolCall, ...], reply: Reply, message: str | None
) -> list[ToolResult]:
    """Error results for declined calls, and for the allowed calls that waited with them."""
    results = [_decline(c, reply.texts.get(c.id) or message) for c in asked]
    names = ", ".join(c.name for c in asked)
    said = f": {message}" if message else ""
    results += [
        ToolResult(
            call_id=c.id,
            name=c.name,
            is_error=True,
            content=f"not executed: the human declined {names}, asked in the same turn{said}",
        )
        for c in allowed
    ]
    return results


def _in_turn_order(
    allowed: tuple[ToolCall, ...], approved: list[ToolCall], turn: ModelTurn | None
) -> tuple[ToolCall, ...]:
    """The allowed and the approved calls together, in the order the model made them."""
    calls = (*allowed, *approved)
    if turn is None:
        return calls
    order = {c.id: i for i, c in enumerate(turn.tool_calls)}
    return tuple(sorted(calls, key=lambda c: order.get(c.id, len(order))))


def _ids(ids: list[Any]) -> str:
    """Call ids as the error messages list them."""
    return ", ".join(repr(i) for i in ids)


def _bad(run: Run, message: str) -> InvalidInputError:
    """The error of a reply that does not fit, with the run's state and turn."""
    return InvalidInputError(f"on_human_reply: {message}", state=run.state.value, turn=run.turn)
