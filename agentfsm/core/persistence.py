"""Save and restore a run: the whole state of a Controller as JSON-compatible data.

`dump_run` writes every slot of `Run` through its own codec, so a field added
to `Run` without a codec fails loudly (tests check that `CODECS` covers
`Run.__slots__`), instead of being silently lost on a restore. `load_run`
checks the data before anything is built: the format version, the policy, the
declared tools, and that the state is one a run can reach (results only for
calls that were issued, counters within their limits, pending work only in
the states that hold it). Every problem raises `CheckpointError` naming the
run id and what differs.

What cannot be written as data is code: a permission hook, verifiers,
function guards and Python callable tools. The dump records that they were
there (by name); loading it needs the live objects again (`policy=`,
`tools=`), and says so when they are missing. Observers are never part of
the state: they are attached again on load.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel

from agentfsm.core.permissions import Rule
from agentfsm.core.policy import Policy
from agentfsm.core.run_state import RECENT_ROUNDS, Run
from agentfsm.core.tools import ToolSpec, tool_specs
from agentfsm.core.types import ExitReason, ModelTurn, State, ToolCall, ToolResult
from agentfsm.exceptions import AgentFSMError, CheckpointError, DataError, ToolDefinitionError
from agentfsm.guards import Guard, parse_guard
from agentfsm.guards._routes import WAITING

__all__ = [
    "CODECS",
    "FORMAT",
    "STATE_VERSION",
    "Codec",
    "Loaded",
    "dump_run",
    "load_run",
    "policy_code",
]

FORMAT = "agentfsm.run"
"""The `format` field of every dump."""
STATE_VERSION = 1
"""The version of the dump's shape; a dump of another version is refused, never guessed at."""

_RESTING = WAITING
"""States a run can be in between two inputs; the others only exist while routing."""


@dataclass(frozen=True)
class _Context:
    """What decoding a run needs besides the data: the live policy, tools and clock."""

    run_id: str
    policy: Policy
    specs: dict[str, ToolSpec] | None
    clock: Callable[[], float] = time.monotonic


@dataclass(frozen=True)
class Codec:
    """How one slot of `Run` becomes JSON-compatible data and back."""

    encode: Callable[[Run], Any]
    """The slot's value as JSON-compatible data (reads the run: some slots are derived)."""
    decode: Callable[[Any, _Context], Any]
    """The slot's value from that data; raises ValueError/TypeError/KeyError when malformed."""


@dataclass(frozen=True)
class Loaded:
    """A decoded dump: the run, and the controller-level state beside it."""

    run: Run
    last_output: ModelTurn | None
    engine: Literal["compiled", "transitions"]


# -- values ---------------------------------------------------------------------------


def _int(data: Any, _: _Context) -> int:
    if type(data) is not int or data < 0:
        raise ValueError(f"expected a non-negative integer, got {data!r}")
    return data


def _flag(data: Any) -> bool:
    if type(data) is not bool:
        raise ValueError(f"expected true or false, got {data!r}")
    return data


def _float(data: Any, _: _Context) -> float:
    if type(data) not in (int, float) or not math.isfinite(data) or data < 0:
        raise ValueError(f"expected a non-negative number, got {data!r}")
    return float(data)


def _freeze(value: Hashable) -> Any:
    """A call key (nested tuples, frozensets and JSON scalars) as JSON data, tagged."""
    if isinstance(value, tuple):
        return {"t": [_freeze(v) for v in value]}
    if isinstance(value, frozenset):
        items = [_freeze(v) for v in value]
        return {"s": sorted(items, key=lambda i: json.dumps(i, sort_keys=True))}
    if value is None or isinstance(value, str | int | float | bool):
        return value
    raise TypeError(f"a call key holds a {type(value).__name__}, which has no JSON form")


def _thaw(data: Any) -> Hashable:
    if isinstance(data, dict):
        if set(data) == {"t"} and isinstance(data["t"], list):
            return tuple(_thaw(v) for v in data["t"])
        if set(data) == {"s"} and isinstance(data["s"], list):
            return frozenset(_thaw(v) for v in data["s"])
        raise ValueError(f"a call key must be tagged 't' or 's', got keys {sorted(data)}")
    if data is None or isinstance(data, str | int | float | bool):
        return data
    raise ValueError(f"a call key cannot be a {type(data).__name__}")


def _jsonable(value: Any, where: str) -> Any:
    """`value` unchanged when JSON carries it exactly; otherwise a TypeError naming `where`."""
    try:
        if json.loads(json.dumps(value, allow_nan=False)) == value:
            return value
    except (TypeError, ValueError):
        pass
    raise TypeError(f"{where} is not JSON data ({type(value).__name__}), so it cannot be saved")


def _models(cls: type[BaseModel], data: Any) -> list[Any]:
    if not isinstance(data, list):
        raise TypeError(f"expected a list of {cls.__name__}, got {type(data).__name__}")
    return [cls.model_validate(item) for item in data]


def _text_or_none(data: Any) -> str | None:
    if data is not None and not isinstance(data, str):
        raise TypeError(f"expected a string or null, got {type(data).__name__}")
    return data


def _call_map(data: Any, _: _Context) -> dict[str, ToolCall]:
    return {call.id: call for call in _models(ToolCall, data)}


def _rounds(run: Run) -> list[Any]:
    return [
        [_freeze(key), [[err, _jsonable(value, "a tool result's content")] for err, value in seen]]
        for key, seen in run.last_results
    ]


_Round = tuple[tuple[Hashable, ...], list[tuple[bool, Any]]]


def _unrounds(data: Any, _: _Context) -> tuple[_Round, ...]:
    if not isinstance(data, list) or len(data) > RECENT_ROUNDS:
        raise ValueError(f"expected a list of at most {RECENT_ROUNDS} rounds")
    rounds: list[_Round] = []
    for key, seen in data:
        calls = _thaw(key)
        if not isinstance(calls, tuple) or not isinstance(seen, list):
            raise ValueError("a round is [calls, results]")
        rounds.append((calls, [(bool(err), content) for err, content in seen]))
    return tuple(rounds)


def _specs(specs: dict[str, ToolSpec] | None) -> list[dict[str, Any]] | None:
    if specs is None:
        return None
    return [
        {
            "name": s.name,
            "description": s.description,
            "parameters": s.parameters,
            "callable": s.fn is not None,
        }
        for s in specs.values()
    ]


CODECS: dict[str, Codec] = {
    "context_tokens": Codec(lambda r: r.context_tokens, _int),
    "cost": Codec(lambda r: r.cost, _float),
    "exit_reason": Codec(
        lambda r: None if r.exit_reason is None else r.exit_reason.value,
        lambda d, _: None if d is None else ExitReason(d),
    ),
    "episode": Codec(lambda r: r.episode, _int),
    "episode_start": Codec(lambda r: r.episode_start, _int),
    "incomplete": Codec(lambda r: r.incomplete, _int),
    "interjection": Codec(lambda r: r.interjection, lambda d, _: _text_or_none(d)),
    "last_call": Codec(lambda r: _freeze(r.last_call), lambda d, _: _thaw(d)),
    "last_results": Codec(_rounds, _unrounds),
    "pending": Codec(lambda r: [c.model_dump(mode="json") for c in r.pending.values()], _call_map),
    "pending_allowed": Codec(
        lambda r: [c.model_dump(mode="json") for c in r.pending_allowed],
        lambda d, _: tuple(_models(ToolCall, d)),
    ),
    "pending_approval": Codec(
        lambda r: [c.model_dump(mode="json") for c in r.pending_approval],
        lambda d, _: tuple(_models(ToolCall, d)),
    ),
    "pending_rejected": Codec(
        lambda r: [c.model_dump(mode="json") for c in r.pending_rejected],
        lambda d, _: tuple(_models(ToolResult, d)),
    ),
    "pending_sigs": Codec(
        lambda r: {k: _freeze(v) for k, v in r.pending_sigs.items()},
        lambda d, _: {str(k): _thaw(v) for k, v in dict(d).items()},
    ),
    # The policy and the tools are written at the top of the dump and checked there.
    "policy": Codec(lambda r: None, lambda d, ctx: ctx.policy),
    "price_warned": Codec(lambda r: r.price_warned, lambda d, _: _flag(d)),
    # Whether turns are priced follows from the policy's cost budgets.
    "prices": Codec(lambda r: None, lambda d, ctx: ctx.policy.prices_turns),
    "retries": Codec(lambda r: r.retries, _int),
    "run_id": Codec(lambda r: r.run_id, lambda d, ctx: ctx.run_id),
    "same_results": Codec(lambda r: r.same_results, _int),
    "specs": Codec(lambda r: None, lambda d, ctx: ctx.specs),
    # The clock is code: it is given again to `load` (the default is time.monotonic).
    "clock": Codec(lambda r: None, lambda d, ctx: ctx.clock),
    # A monotonic clock means nothing in another process: keep the time already used.
    "started": Codec(lambda r: r.clock() - r.started, lambda d, ctx: ctx.clock() - _float(d, ctx)),
    "state": Codec(lambda r: r.state.value, lambda d, _: State(d)),
    "streak": Codec(lambda r: r.streak, _int),
    "tokens": Codec(lambda r: r.tokens, _int),
    "tool_calls_used": Codec(lambda r: r.tool_calls_used, _int),
    "tool_errors": Codec(lambda r: r.tool_errors, _int),
    "turn": Codec(lambda r: r.turn, _int),
}
"""One codec per slot of `Run`; a slot without one makes `dump_run` raise."""


# -- the policy --------------------------------------------------------------------


def policy_code(policy: Policy) -> list[str]:
    """The parts of `policy` that are code, not data: they must be given again on load."""
    code = []
    if policy.permission is not None:
        code.append("permission")
    if policy.verifiers:
        code.append("verifiers")
    code += [f"guards[{i}]" for i, g in enumerate(policy.guards) if not _readable(g)]
    return code


def _readable(guard: Guard) -> bool:
    try:
        return parse_guard(repr(guard)) == guard
    except AgentFSMError:
        return False


def _policy_data(policy: Policy) -> dict[str, Any]:
    return {"data": policy.to_json(), "code": policy_code(policy)}


def _differences(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    return sorted(k for k in set(a) | set(b) if a.get(k, "<absent>") != b.get(k, "<absent>"))


def _text_rules(data: Mapping[str, Any]) -> bool:
    """Whether a saved policy holds a permission rule as text, as older dumps did.

    Text is read back by parsing, which splits a glob holding `, name=` and drops its
    edge spaces: such a dump is only loaded against the live policy, never re-parsed.
    """
    rules = data.get("permission_rules")
    return isinstance(rules, list) and any(isinstance(rule, str) for rule in rules)


def _legacy_text(rule: Rule) -> str:
    """A rule as dumps before structured rules wrote it: globs unquoted, no shell patterns."""
    inner = ", ".join(f"{name}={pattern}" for name, pattern in rule.args)
    return f"{rule.action} {rule.tool}" + (f"({inner})" if inner else "")


def _load_policy(run_id: str, saved: Any, given: Policy | None) -> Policy:
    if not isinstance(saved, dict) or not isinstance(saved.get("data"), dict):
        raise CheckpointError(f"run {run_id}: the dump's 'policy' is not an object", run_id=run_id)
    code = saved.get("code") or []
    if not isinstance(code, list) or not all(isinstance(name, str) for name in code):
        raise CheckpointError(
            f"run {run_id}: the dump's policy 'code' is not a list of names: {code!r:.80}",
            run_id=run_id,
        )
    text_rules = _text_rules(saved["data"])
    if given is not None:
        mine = _policy_data(given)
        if text_rules:  # an older dump: compare the rules as it wrote them
            mine["data"]["permission_rules"] = [_legacy_text(r) for r in given.permission_rules]
        diff = _differences(saved["data"], mine["data"])
        if diff or mine["code"] != code:
            raise CheckpointError(
                f"run {run_id}: the policy given differs from the saved one in "
                f"{', '.join(diff) or 'its code (' + ', '.join(code) + ')'}",
                run_id=run_id,
                fields=diff,
            )
        return given
    if code:
        raise CheckpointError(
            f"run {run_id}: the saved policy has code that a dump cannot hold "
            f"({', '.join(code)}): pass the live policy, Controller.load(data, policy=...)",
            run_id=run_id,
            code=code,
        )
    if text_rules:
        raise CheckpointError(
            f"run {run_id}: the saved policy holds permission rules as text (an older "
            "agentfsm), which may not read back as the same rules (a glob holding ', name=' "
            "or edge spaces): pass the live policy, Controller.load(data, policy=...)",
            run_id=run_id,
        )
    try:
        return Policy.from_mapping(saved["data"], source=f"run {run_id}: saved policy")
    except AgentFSMError as exc:
        raise CheckpointError(exc.message, run_id=run_id) from exc


# -- the tools ---------------------------------------------------------------------


def _load_tools(run_id: str, saved: Any, given: Iterable[Any] | None) -> dict[str, ToolSpec] | None:
    if saved is None:
        if given is not None:
            raise CheckpointError(
                f"run {run_id}: tools were given, but the saved run accepted any tool name",
                run_id=run_id,
            )
        return None
    if not isinstance(saved, list):
        raise CheckpointError(f"run {run_id}: the dump's 'tools' is not a list", run_id=run_id)
    for index, item in enumerate(saved):
        if not _is_saved_tool(item):
            raise CheckpointError(
                f"run {run_id}: the dump's tools[{index}] is not a saved tool (name, "
                f"description, parameters, callable): {item!r:.80}",
                run_id=run_id,
            )
    if given is None:
        needed = [t.get("name") for t in saved if isinstance(t, dict) and t.get("callable")]
        if needed:
            raise CheckpointError(
                f"run {run_id}: tools {needed} were Python callables, which a dump cannot hold: "
                "pass them again, Controller.load(data, tools=[...])",
                run_id=run_id,
                tools=needed,
            )
        given = [{k: t[k] for k in ("name", "description", "parameters")} for t in saved]
    try:
        specs = tool_specs(given)
    except ToolDefinitionError as exc:
        raise CheckpointError(
            f"run {run_id}: the saved tools: {exc.message}", run_id=run_id
        ) from exc
    assert specs is not None  # given is a list here
    mine = _specs(specs)
    assert mine is not None
    if mine != saved:
        names = sorted(
            {str(t.get("name")) for t in saved if isinstance(t, dict) and t not in mine}
            | {str(t["name"]) for t in mine if t not in saved}
        )
        raise CheckpointError(
            f"run {run_id}: the tools given differ from the saved ones: {names}",
            run_id=run_id,
            tools=names,
        )
    return specs


def _is_saved_tool(item: object) -> bool:
    """Whether `item` has the shape `_specs` writes for one tool."""
    return (
        isinstance(item, dict)
        and isinstance(item.get("name"), str)
        and isinstance(item.get("description"), str)
        and (item.get("parameters") is None or isinstance(item.get("parameters"), dict))
        and isinstance(item.get("callable"), bool)
    )


# -- dump and load -----------------------------------------------------------------


def dump_run(run: Run, last_output: ModelTurn | None, engine: str) -> dict[str, Any]:
    """The whole state of `run` as JSON-compatible data (see the module docstring)."""
    missing = [name for name in Run.__slots__ if name not in CODECS]
    if missing:
        raise CheckpointError(
            f"run {run.run_id}: Run fields {missing} have no codec in "
            "agentfsm.core.persistence.CODECS, so the dump would lose them",
            run_id=run.run_id,
        )
    try:
        fields = {name: CODECS[name].encode(run) for name in Run.__slots__}
    except TypeError as exc:
        raise CheckpointError(f"run {run.run_id}: {exc}", run_id=run.run_id) from exc
    return {
        "format": FORMAT,
        "version": STATE_VERSION,
        "run_id": run.run_id,
        "policy": _policy_data(run.policy),
        "tools": _specs(run.specs),
        "engine": engine,
        "last_output": None if last_output is None else last_output.model_dump(mode="json"),
        "run": fields,
    }


def load_run(
    data: Any,
    *,
    policy: Policy | None = None,
    tools: Iterable[Any] | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> Loaded:
    """Decode a dump, checking it is whole, of this version and a state a run can reach."""
    run_id = _header(data)
    ctx = _Context(run_id, _load_policy(run_id, data.get("policy"), policy), None)
    ctx = _Context(run_id, ctx.policy, _load_tools(run_id, data.get("tools"), tools), clock)
    fields = data.get("run")
    if not isinstance(fields, dict):
        raise CheckpointError(f"run {run_id}: the dump has no 'run' object", run_id=run_id)
    # A dump made before the clock was a field has no "clock": it holds no data anyway.
    fields = {"clock": None, **fields}
    differ = sorted(set(fields) ^ set(CODECS))
    if differ:
        raise CheckpointError(
            f"run {run_id}: the saved run's fields differ from this version's: {differ}",
            run_id=run_id,
            fields=differ,
        )
    run = Run.__new__(Run)
    for name, codec in CODECS.items():
        try:
            setattr(run, name, codec.decode(fields[name], ctx))
        except (ValueError, TypeError, KeyError) as exc:  # DataError is a ValueError
            raise CheckpointError(
                f"run {run_id}: saved field {name!r} is invalid: {exc}", run_id=run_id, field=name
            ) from exc
    try:
        raw = data.get("last_output")
        last = None if raw is None else ModelTurn.model_validate(raw)
    except DataError as exc:
        raise CheckpointError(
            f"run {run_id}: saved field 'last_output' is invalid: {exc}", run_id=run_id
        ) from exc
    _check_reachable(run, last)
    engine = data.get("engine", "compiled")
    if engine == "transitions":
        return Loaded(run, last, "transitions")
    if engine != "compiled":
        raise CheckpointError(f"run {run_id}: unknown engine {engine!r}", run_id=run_id)
    return Loaded(run, last, "compiled")


def _header(data: Any) -> str:
    if not isinstance(data, Mapping):
        raise CheckpointError(
            f"a saved run must be a dict from Controller.dump(), not {type(data).__name__}"
        )
    run_id = data.get("run_id")
    if not isinstance(run_id, str) or not run_id:
        raise CheckpointError("the saved run has no 'run_id': it is not a Controller.dump()")
    if data.get("format") != FORMAT:
        raise CheckpointError(
            f"run {run_id}: format {data.get('format')!r} is not {FORMAT!r}", run_id=run_id
        )
    if data.get("version") != STATE_VERSION:
        raise CheckpointError(
            f"run {run_id}: saved with state-format version {data.get('version')!r}; this "
            f"agentfsm reads version {STATE_VERSION} only",
            run_id=run_id,
            version=data.get("version"),
        )
    return run_id


def _check_reachable(run: Run, last: ModelTurn | None) -> None:
    """Refuse a state no run reaches: the dump was edited, or written by a broken program."""
    problems = _impossible(run, last)
    if problems:
        raise CheckpointError(
            f"run {run.run_id}: the saved state is impossible: {'; '.join(problems)}",
            run_id=run.run_id,
            problems=problems,
        )


def _impossible_episode(run: Run) -> list[str]:
    """Episode counters past the turn, or a user message held outside pending results."""
    problems = []
    if run.episode_start > run.turn or run.episode < 1:
        problems.append(
            f"episode {run.episode} from turn {run.episode_start} is past turn {run.turn}"
        )
    elif run.turn - run.episode_start > run.policy.max_turns:
        where = f" (episode {run.episode})" if run.episode > 1 else ""
        problems.append(
            f"turn {run.turn - run.episode_start} is above max_turns {run.policy.max_turns}{where}"
        )
    if run.interjection is not None and run.state not in (State.EXECUTE, State.HANDOFF):
        problems.append(f"a user message awaits pending results in state {run.state.value!r}")
    return problems


def _impossible(run: Run, last: ModelTurn | None) -> list[str]:
    policy, state = run.policy, run.state
    problems = []
    if state not in _RESTING:
        problems.append(f"state {state.value!r} is never held between inputs")
    problems += _impossible_episode(run)
    if policy.max_tool_calls is not None and run.tool_calls_used > policy.max_tool_calls:
        problems.append(
            f"tool_calls_used {run.tool_calls_used} is above max_tool_calls {policy.max_tool_calls}"
        )
    if (state is State.END) != (run.exit_reason is not None):
        problems.append(f"exit_reason {run.exit_reason} does not match state {state.value!r}")
    if run.pending and state not in (State.EXECUTE, State.HANDOFF):
        problems.append(f"calls are pending in state {state.value!r}")
    waiting = run.pending_approval or run.pending_rejected or run.pending_allowed
    if waiting and state is not State.AWAIT_HUMAN:
        problems.append(f"calls await approval in state {state.value!r}")
    issued = {c.id for c in last.tool_calls} if last is not None else set()
    referenced = [*run.pending, *(c.id for c in run.pending_approval)]
    referenced += [c.id for c in run.pending_allowed]
    referenced += [r.call_id for r in run.pending_rejected]
    never = sorted(set(referenced) - issued)
    if never:
        problems.append(f"calls or results {never} answer no call the last model output issued")
    if set(run.pending) - set(run.pending_sigs):
        problems.append("pending calls have no call keys")
    return problems
