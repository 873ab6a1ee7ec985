"""execute: the host (or the runner) runs the validated calls; every id gets one result.

Layer 2. On entry the calls become pending and count against the tool-call
budget, and the repetition streak moves on. When results arrive, a pending id
without a result gets a synthesized error result, so the model always sees
exactly one result per call. An empty result (None, blank text, `[]`, `{}`) is
named in the decision's reason; the runner shows the model `EMPTY_RESULT`.
"""

from __future__ import annotations

import json
from collections.abc import Hashable

from agentfsm._model._checked import replaced
from agentfsm._model.call_history import counted
from agentfsm._model.call_identity import round_signature
from agentfsm._model.copies import copied
from agentfsm._model.limits import MAX_DEPTH, nesting_exceeds
from agentfsm._model.run_state import RECENT_ROUNDS, Run, Step
from agentfsm._model.types import FinishReason, ModelTurn, ToolResult, unchecked
from agentfsm.exceptions import InvalidInputError, UnknownCallIdError
from agentfsm.guards.intent import key_of

__all__ = ["EMPTY_RESULT", "SKIPPED", "collect", "enter", "is_empty"]

SKIPPED = "skipped: a user message arrived"
"""The result of a call that a user message skipped before it started."""
EMPTY_RESULT = "(empty result)"
"""What the model reads for a successful call that returned nothing."""


def is_empty(content: object) -> bool:
    """Whether a result holds nothing: None, blank text, `[]`, `{}` or the `EMPTY_RESULT` mark."""
    if content is None:
        return True
    if type(content) is str:
        return not content.strip() or content == EMPTY_RESULT
    return (type(content) is list or type(content) is dict) and not content


def enter(run: Run, step: Step) -> None:
    """Make the executable calls pending, count them, and advance the repetition streak."""
    calls = step.snap.executable
    known = step.sigs
    run.pending = {call.id: call for call in calls}
    # Calls a human cleared: a restored run keeps them cleared (see validate.recheck).
    # A call a remembered approval covered counts as approved as well.
    run.approved = (
        tuple(run.pending)
        if step.snap.phase == "human_reply"
        else tuple(i for i, _ in step.snap.covered if i in run.pending)
    )
    keyed = key_of(run.policy)
    sigs: dict[str, Hashable] = {call.id: known.get(call.id) or keyed(call) for call in calls}
    run.pending_sigs = sigs
    run.tool_calls_used += len(calls)
    if run.policy.cedar is not None and calls:
        run.tool_counts = counted(run.tool_counts, calls, 1)
    run.tool_errors = step.snap.tool_errors_in_a_row
    if step.snap.phase == "model_output":  # after a human's reply, await_human kept it
        snap = step.snap
        run.round_failed = bool(snap.rejected) and (
            run.policy.denials_are_tool_errors or len(snap.rejected) > len(snap.denied)
        )
    run.incomplete = 0
    if calls:
        # validate keyed this round already when the calls came from a model output.
        key = step.round if step.round is not None else round_signature(list(sigs.values()))
        run.streak = run.streak + 1 if key == run.last_call else 1
        run.last_call = key


def collect(run: Run, results: list[ToolResult]) -> dict[str, object]:
    """Pair results with pending calls; synthesize an error result for each missing id.

    Returns the snapshot fields for the results: results in call order, the
    missing ids, the skipped ids, failed repair rounds in a row, and rounds in a
    row that only repeated a recent round (same calls, same results: nothing new
    was learned). A call is skipped only once a user message arrived while the
    results were pending (`on_user_message`): it got no result, or the runner's
    skip result; a skip is answered, not failed. The round of calls is one repair
    round: it failed when any of its calls did (refused in its turn, or an error
    result that is no skip), however many failed; a round without a failure ends
    the streak, and a round of skips only leaves it as it was.
    Raises UnknownCallIdError (before changing anything) for a result whose id
    was never asked for, or a second result for the same id, and
    InvalidInputError for content nested deeper than `MAX_DEPTH`.
    """
    missing: list[str] = []
    if _answers_in_order(run, results):
        ordered = results
    else:
        ordered, missing = _in_call_order(run, _by_id(run, results))
    skipped, failed, empty = _read(ordered, steered=run.interjection is not None)
    if failed or run.round_failed:
        errors = run.tool_errors + 1
    else:  # a round of skips only leaves the streak as it was
        errors = 0 if len(skipped) < len(ordered) else run.tool_errors
    fields: dict[str, object] = {
        "results": tuple(ordered),
        "missing": tuple(missing),
        "skipped": tuple(skipped),
        "tool_errors_in_a_row": errors,
        "same_results_in_a_row": _remember(run, ordered),
    }
    if run.policy.final_tools:
        answer = _final_answer(run.policy.final_tools, ordered)
        if answer is not None:
            fields["output"] = answer
    notes: tuple[str, ...] = ()
    if skipped:
        notes = (f"a user message arrived: {len(skipped)} call(s) were skipped",)
    if empty:
        notes += (f"empty result from {', '.join(empty)}",)
    if notes:
        fields["notes"] = notes
    return fields


def _read(ordered: list[ToolResult], *, steered: bool) -> tuple[list[str], bool, list[str]]:
    """The skipped call ids, whether any other result is an error, and the empty results."""
    skipped: list[str] = []
    failed = False
    empty: list[str] = []
    for result in ordered:
        if result.is_error:
            if steered and _is_skip(result):
                skipped.append(result.call_id)
            else:
                failed = True
        elif is_empty(result.content):
            empty.append(f"{result.call_id} ({result.name or 'tool'})")
    return skipped, failed, empty


def _final_answer(final_tools: frozenset[str], ordered: list[ToolResult]) -> ModelTurn | None:
    """The first successful final tool's result as the answer the completion checks read.

    A final tool's result is a final output: verify checks it as it checks a model's answer
    without tool calls, so it is given to the checks as one (its text, JSON for data).
    """
    for result in ordered:
        if result.name in final_tools and not result.is_error:
            return unchecked(
                ModelTurn,
                {**_ANSWER, "text": _as_text(result.content)},
            )
    return None


_ANSWER = ModelTurn(finish_reason=FinishReason.STOP).__dict__
"""The fields of a plain answer; a final tool's answer differs by its text."""


def _as_text(content: object) -> str:
    """A result's content as the answer's text: itself when text, else its JSON."""
    if type(content) is str:
        return content
    if content is None:
        return ""
    try:
        return json.dumps(content, ensure_ascii=False, default=repr)
    except (TypeError, ValueError, RecursionError):  # a host's own object: named, not read
        return f"<{type(content).__name__}>"


def _is_skip(result: ToolResult) -> bool:
    """Whether an error result says the call was skipped (made here for a missing id, or the
    runner's result for a call it did not start)."""
    content = result.content
    return type(content) is str and content == SKIPPED


def _answers_in_order(run: Run, results: list[ToolResult]) -> bool:
    """Whether `results` answer the pending calls one each, in call order, as they stand.

    The common case, taken without pairing by id; anything else (a missing, unknown
    or repeated id, content to check for depth, a name to fix) goes the long way.
    """
    pending = run.pending
    if len(results) != len(pending) or run.policy.final_tools or run.refused:
        return False
    for result, call_id in zip(results, pending, strict=True):
        if result.call_id != call_id:
            return False
        content = result.content
        if type(content) is dict or type(content) is list:
            for item in content.values() if type(content) is dict else content:
                if type(item) is dict or type(item) is list:
                    return False  # nested: its depth is checked the long way
    return True


def _by_id(run: Run, results: list[ToolResult]) -> dict[str, ToolResult]:
    by_id: dict[str, ToolResult] = {}
    for result in results:
        if result.call_id not in run.pending:
            pending = ", ".join(repr(i) for i in run.pending) or "none"
            raise UnknownCallIdError(
                f"a result for call id {result.call_id!r}, which was never asked for; "
                f"pending call ids: {pending}",
                state=run.state.value,
                turn=run.turn,
            )
        if result.call_id in by_id:
            raise UnknownCallIdError(
                f"two results for call id {result.call_id!r}", state=run.state.value, turn=run.turn
            )
        content = result.content
        if (type(content) is dict or type(content) is list) and nesting_exceeds(content, MAX_DEPTH):
            raise InvalidInputError(
                f"the result for call id {result.call_id!r} nests deeper than {MAX_DEPTH} levels",
                state=run.state.value,
                turn=run.turn,
            )
        by_id[result.call_id] = result
    return by_id


def _in_call_order(run: Run, by_id: dict[str, ToolResult]) -> tuple[list[ToolResult], list[str]]:
    """The results in call order, a made-up one for each missing id, and the missing ids."""
    ordered: list[ToolResult] = []
    missing: list[str] = []
    skipped = run.interjection is not None
    named = bool(run.policy.final_tools)
    for call_id, call in run.pending.items():
        found = by_id.get(call_id)
        if found is None:
            missing.append(call_id)
            text = run.refused.get(call_id) or (
                SKIPPED if skipped else f"no result was returned for call {call_id} ({call.name})"
            )
            found = ToolResult(call_id=call_id, name=call.name, content=text, is_error=True)
        elif named and found.name != call.name:  # FinalTool reads the name
            found = replaced(found, {"name": call.name})
        ordered.append(found)
    return ordered, missing


def _remember(run: Run, ordered: list[ToolResult]) -> int:
    """Keep the round's results; return how many rounds in a row only repeated a recent one."""
    sigs = run.pending_sigs
    keys: list[Hashable] = []
    contents: list[tuple[bool, object]] = []
    for r in ordered:
        keys.append(sigs.get(r.call_id, r.call_id))
        contents.append((r.is_error, copied(r.content)))  # the host may reuse its result
    calls_key = tuple(keys)
    again = False
    if run.last_results:
        key, seen = run.last_results[-1]
        again = key == calls_key
        if again and seen != contents:
            # The same calls answered differently (polling a job): progress, not a loop.
            run.streak = 1
    # A pair compares its calls first: contents are compared (==) only for the same calls.
    stale = run.same_results + 1 if (calls_key, contents) in run.last_results else 0
    if stale and again and run.policy.loops is not None:
        # The same intent again, in a row: the loop ladder judges it (its warn, ask and stop
        # rungs), so the no-progress count does not end the run under the ladder's rungs.
        stale = run.same_results
    run.last_results = (*run.last_results[1 - RECENT_ROUNDS :], (calls_key, contents))
    return stale
