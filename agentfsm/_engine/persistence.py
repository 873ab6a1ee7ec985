"""Save and restore a run: the whole state of a Controller as JSON-compatible data.

The format is one pydantic model, `RunDump`: the header (format, version, run id),
the policy, the declared tools, the engine, the last model output, and `RunState`,
one field per slot of `Run` (a test checks they match, so a field added to `Run`
without one fails loudly instead of being lost on a restore). Each field's type
says how its value is written and checked. The models are internal (pydantic's own
errors come out of them); the public form of the format is `dump_schema()`, its JSON
Schema, committed as docs/checkpoint.schema.json. A change that older dumps do not
fit bumps `STATE_VERSION` and keeps reading the previous version.

`load_run` checks the data before anything is built: the format version, the
shape of every value, the policy, the declared tools, and that the state is one a
run can reach (`_impossible`: results only for calls that were issued, exactly as
issued, counters within their limits and counting what is pending, pending work
only in the states that hold it and never dropped; docs/durable.md lists every
invariant). Every problem raises `CheckpointError` naming the run id and the place.

What cannot be written as data is code: a permission hook, verifiers, function
guards and Python callable tools. The dump records that they were there (by
name); loading it needs the live objects again (`policy=`, `tools=`), and says
so when they are missing. Observers are never part of the state: they are
attached again on load.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Final, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    PlainValidator,
    StrictBool,
    StrictStr,
    TypeAdapter,
    ValidationError,
)
from pydantic.json_schema import SkipJsonSchema
from pydantic_core import ErrorDetails, PydanticSerializationError

from agentfsm._engine.policy import Policy
from agentfsm._engine.routes import WAITING
from agentfsm._model.approvals import Approval
from agentfsm._model.run_state import RECENT_ROUNDS, Run
from agentfsm._model.tools import ToolSpec, tool_specs
from agentfsm._model.types import ExitReason, ModelTurn, State, ToolCall, ToolResult
from agentfsm._permissions import Rule
from agentfsm.exceptions import AgentFSMError, CheckpointError, ToolDefinitionError
from agentfsm.guards import Guard, parse_guard
from agentfsm.states.validate import recheck

__all__ = [
    "FORMAT",
    "STATE_VERSION",
    "Loaded",
    "dump_run",
    "dump_schema",
    "load_run",
    "policy_code",
]

FORMAT: Final = "agentfsm.run"
"""The `format` field of every dump."""
STATE_VERSION: Final = 1
"""The version of the dump's shape; a dump of another version is refused, never guessed at."""

_RESTING = WAITING
"""States a run can be in between two inputs; the others only exist while routing."""


@dataclass(frozen=True)
class Loaded:
    """A decoded dump: the run, and the controller-level state beside it."""

    run: Run
    policy: Policy
    """The run's policy, as the live Policy (the run holds it as the states' `RunRules`)."""
    shadow: Policy | None
    """The shadow policy judged beside it, or None."""
    last_output: ModelTurn | None
    engine: Literal["compiled", "transitions"]


# -- value types: how one kind of value is written and checked ----------------------


def _count(data: Any) -> int:
    if type(data) is not int or data < 0:
        raise ValueError(f"expected a non-negative integer, got {data!r:.80}")
    return data


def _seconds(data: Any) -> float:
    if type(data) not in (int, float) or not math.isfinite(data) or data < 0:
        raise ValueError(f"expected a non-negative number, got {data!r:.80}")
    return float(data)


Count = Annotated[int, Field(ge=0), BeforeValidator(_count)]
"""A counter: a non-negative integer (a bool is not one)."""
Amount = Annotated[float, Field(ge=0, allow_inf_nan=False), BeforeValidator(_seconds)]
"""Seconds or dollars: a finite non-negative number."""


class _Data(BaseModel):
    """A part of the dump: unknown keys are refused, not ignored."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class TupleKey(_Data):
    """A tuple inside a call key."""

    t: list[CallKeyData]
    """The items, in order."""


class SetKey(_Data):
    """A frozenset inside a call key."""

    s: list[CallKeyData]
    """The items, sorted by their JSON text so equal sets write equal data."""


CallKeyData = bool | int | float | str | TupleKey | SetKey | None
"""A call key as JSON: scalars as they are, tuples and frozensets tagged `t` and `s`."""
TupleKey.model_rebuild()
SetKey.model_rebuild()


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


CallKey = Annotated[
    Hashable,
    PlainValidator(_thaw, json_schema_input_type=CallKeyData),
    PlainSerializer(_freeze),
]
"""What identifies a call (its name and arguments), for the repeat and no-progress checks."""

_Round = tuple[tuple[Hashable, ...], list[tuple[bool, Any]]]
_RoundData = tuple[CallKeyData, list[tuple[bool, Any]]]


def _jsonable(value: Any, where: str) -> Any:
    """`value` unchanged when JSON carries it exactly; otherwise a TypeError naming `where`."""
    try:
        if json.loads(json.dumps(value, allow_nan=False)) == value:
            return value
    except (TypeError, ValueError):
        pass
    raise TypeError(f"{where} is not JSON data ({type(value).__name__}), so it cannot be saved")


def _write_rounds(rounds: tuple[_Round, ...]) -> list[Any]:
    return [
        [_freeze(key), [[err, _jsonable(value, "a tool result's content")] for err, value in seen]]
        for key, seen in rounds
    ]


def _read_round(item: Any) -> _Round:
    if isinstance(item, list) and len(item) == 2:
        calls, seen = _thaw(item[0]), item[1]
        pairs = isinstance(seen, list) and all(
            isinstance(pair, list) and len(pair) == 2 and type(pair[0]) is bool for pair in seen
        )
        if isinstance(calls, tuple) and pairs:
            return calls, [(err, content) for err, content in seen]
    raise ValueError("a round is [calls, [[is_error, content], ...]]")


def _read_rounds(data: Any) -> tuple[_Round, ...]:
    if not isinstance(data, list) or len(data) > RECENT_ROUNDS:
        raise ValueError(f"expected a list of at most {RECENT_ROUNDS} rounds")
    return tuple(_read_round(item) for item in data)


Rounds = Annotated[
    tuple[_Round, ...],
    PlainValidator(
        _read_rounds,
        json_schema_input_type=Annotated[list[_RoundData], Field(max_length=RECENT_ROUNDS)],
    ),
    PlainSerializer(_write_rounds),
]
"""The last tool rounds: each round's call key and its results as [is_error, content]."""


_CALL_LIST = TypeAdapter(list[ToolCall])


def _calls_by_id(data: Any) -> dict[str, ToolCall]:
    return {call.id: call for call in _CALL_LIST.validate_python(data)}


CallsById = Annotated[
    dict[str, ToolCall],
    PlainValidator(_calls_by_id, json_schema_input_type=list[ToolCall]),
    PlainSerializer(lambda calls: [call.model_dump(mode="json") for call in calls.values()]),
]
"""Calls by id, written as the list of calls."""


# -- the format --------------------------------------------------------------------


class RunState(_Data):
    """Every slot of `Run`: counters, pending work and the values given again on load."""

    approval_count: Count = 0
    """Remembered approvals made so far, revoked ones included (absent in older dumps: 0)."""
    approvals: tuple[Approval, ...] = ()
    """Remembered approvals the run holds (absent in older dumps: none)."""
    approved: tuple[StrictStr, ...] = ()
    """Ids of the pending calls a human approved (absent in older dumps: none)."""
    clock: None = None
    """Always null: the clock is code, given again to `load` (absent in older dumps)."""
    context_tokens: Count
    """The size of the context sent with the last model call, in tokens."""
    cost: Amount
    """Dollars spent so far."""
    episode: Count
    """Which episode of the conversation: a user message after FINAL opens the next."""
    episode_start: Count
    """The turn before the episode's first model output; `max_turns` counts from it."""
    exit_reason: ExitReason | None
    """Why the run ended, or null while it runs."""
    identify: None = None
    """Always null: the tools' identity function is code, given again to `load`."""
    incomplete: Count
    """Incomplete (cut) model outputs in a row."""
    interjection: StrictStr | None
    """A user message that arrived while results were pending, or null."""
    last_call: CallKey
    """The key of the last round of calls that ran, for the repeat streak."""
    last_results: Rounds
    """The recent tool rounds and their results, for the no-progress check."""
    pending: CallsById
    """Calls cleared to run whose results have not come yet."""
    pending_allowed: tuple[ToolCall, ...]
    """Allowed calls of a turn whose other calls await approval: they run with them."""
    pending_approval: tuple[ToolCall, ...]
    """Calls awaiting a human's approval."""
    pending_rejected: tuple[ToolResult, ...]
    """Error results of calls refused in the turn that awaits approval."""
    pending_sigs: dict[str, CallKey]
    """Each pending call's key, by call id."""
    policy: None = None
    """Always null: the policy is written at the top of the dump."""
    price_warned: StrictBool
    """Whether the run already warned that a turn had no price."""
    prices: None = None
    """Always null: whether turns are priced follows from the policy."""
    refused: dict[StrictStr, StrictStr] = Field(default_factory=dict)
    """Waiting calls that may not run after all, by id, with why (absent in older dumps)."""
    retries: Count
    """Retries in a row."""
    round_failed: StrictBool = False
    """Whether the round awaiting results already failed: its turn refused a call (absent
    in older dumps: false)."""
    run_id: StrictStr
    """The run's id, the same as the dump's."""
    same_results: Count
    """Rounds in a row whose results repeated an earlier round's."""
    shadow: None = None
    """Never written: the shadow policy is written at the top of the dump (`RunDump.shadow`)."""
    specs: None = None
    """Always null: the tools are written at the top of the dump."""
    started: Amount
    """Seconds the run had used when it was saved (a monotonic clock means nothing elsewhere)."""
    state: State
    """The state the run rests in between two inputs."""
    streak: Count
    """How many times in a row the same round of calls was made."""
    tokens: Count
    """Tokens used so far."""
    tool_calls_used: Count
    """Tool calls run so far."""
    tool_counts: dict[StrictStr, Count] = {}  # pydantic copies it
    """Tool calls run so far by tool name, kept while the policy has a Cedar source (absent
    in older dumps: none)."""
    tool_errors: Count
    """Failed repair rounds in a row (rounds of calls of which any failed)."""
    tree: SkipJsonSchema[None] = Field(None, exclude=True)
    """Never written: a run's ledger account is live; a loaded run is in no run tree."""
    turn: Count
    """Model outputs taken so far."""


_GIVEN = frozenset(
    {"clock", "identify", "policy", "prices", "shadow", "specs", "run_id", "started", "tree"}
)
"""Fields of `Run` not copied from `RunState`: code, derived from the policy, or converted."""


class SavedPolicy(_Data):
    """The run's policy: its data, and the names of the parts that are code."""

    data: dict[str, Any]
    """`Policy.to_json()`; permission rules as the Rule model's own dump."""
    code: list[StrictStr] = Field(default_factory=list)
    """The parts that are code (`permission`, `verifiers`, `guards[i]`): given again on load."""


class SavedTool(_Data):
    """One declared tool."""

    name: StrictStr
    """The tool's name."""
    description: StrictStr
    """Its description."""
    parameters: dict[str, Any] | None
    """Its JSON Schema of arguments, or null."""
    callable: StrictBool
    """Whether it was a Python callable, which must be given again on load."""


class RunDump(_Data):
    """What `Controller.dump()` returns and `Controller.load` reads."""

    format: Literal["agentfsm.run"]
    """Always `agentfsm.run`."""
    version: Literal[1]
    """The version of this shape; another version is refused."""
    run_id: StrictStr = Field(min_length=1)
    """The run's id."""
    policy: SavedPolicy
    """The run's policy."""
    shadow: SavedPolicy | None = None
    """The shadow policy judged beside it, never enforced; absent when the run has none."""
    tools: list[SavedTool] | None = None
    """The declared tools, or null when the run accepts any tool name."""
    engine: Literal["compiled", "transitions"] = "compiled"
    """Which engine routes the run."""
    last_output: ModelTurn | None = None
    """The last model output, whose calls pending work answers."""
    run: RunState
    """The run's counters and pending work."""


def dump_schema() -> dict[str, Any]:
    """The JSON Schema of a dump: what `Controller.dump()` writes and `Controller.load` reads.

    The schema checks the shape; `load` checks more (the policy, the tools, a reachable
    state). docs/checkpoint.schema.json is this schema, written by
    docs/gen_checkpoint_schema.py.
    """
    return {"$schema": _DRAFT, **RunDump.model_json_schema()}


_DRAFT = "https://json-schema.org/draft/2020-12/schema"


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


def _saved_policy(policy: Policy) -> SavedPolicy:
    return SavedPolicy(data=policy.to_json(), code=policy_code(policy))


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


def _load_policy(
    run_id: str, saved: SavedPolicy, given: Policy | None, keyword: str = "policy"
) -> Policy:
    """The saved policy (or shadow: `keyword`), or the live one given, which must equal it."""
    name = "policy" if keyword == "policy" else f"{keyword} policy"
    text_rules = _text_rules(saved.data)
    if given is not None:
        mine = _saved_policy(given)
        if text_rules:  # an older dump: compare the rules as it wrote them
            mine.data["permission_rules"] = [_legacy_text(r) for r in given.permission_rules]
        diff = _differences(saved.data, mine.data)
        if diff or mine.code != saved.code:
            raise CheckpointError(
                f"run {run_id}: the {name} given differs from the saved one in "
                f"{', '.join(diff) or 'its code (' + ', '.join(saved.code) + ')'}",
                run_id=run_id,
                fields=diff,
            )
        return given
    if saved.code:
        raise CheckpointError(
            f"run {run_id}: the saved {name} has code that a dump cannot hold "
            f"({', '.join(saved.code)}): pass the live {name}, "
            f"Controller.load(data, {keyword}=...)",
            run_id=run_id,
            code=saved.code,
        )
    if text_rules:
        raise CheckpointError(
            f"run {run_id}: the saved {name} holds permission rules as text (an older "
            "agentfsm), which may not read back as the same rules (a glob holding ', name=' "
            f"or edge spaces): pass the live {name}, Controller.load(data, {keyword}=...)",
            run_id=run_id,
        )
    try:
        return Policy.from_mapping(saved.data, source=f"run {run_id}: saved {name}")
    except AgentFSMError as exc:
        raise CheckpointError(exc.message, run_id=run_id) from exc


# -- the tools ---------------------------------------------------------------------


def _saved_tools(specs: dict[str, ToolSpec] | None) -> list[SavedTool] | None:
    if specs is None:
        return None
    return [
        SavedTool(
            name=s.name,
            description=s.description,
            parameters=s.parameters,
            callable=s.fn is not None,
        )
        for s in specs.values()
    ]


def _load_tools(
    run_id: str, saved: list[SavedTool] | None, given: Iterable[Any] | None
) -> dict[str, ToolSpec] | None:
    if saved is None:
        if given is not None:
            raise CheckpointError(
                f"run {run_id}: tools were given, but the saved run accepted any tool name",
                run_id=run_id,
            )
        return None
    if given is None:
        needed = [t.name for t in saved if t.callable]
        if needed:
            raise CheckpointError(
                f"run {run_id}: tools {needed} were Python callables, which a dump cannot hold: "
                "pass them again, Controller.load(data, tools=[...])",
                run_id=run_id,
                tools=needed,
            )
        given = [t.model_dump(exclude={"callable"}) for t in saved]
    try:
        specs = tool_specs(given)
    except ToolDefinitionError as exc:
        raise CheckpointError(
            f"run {run_id}: the saved tools: {exc.message}", run_id=run_id
        ) from exc
    mine = _saved_tools(specs) or []
    if mine != saved:
        names = sorted(
            {t.name for t in saved if t not in mine} | {t.name for t in mine if t not in saved}
        )
        raise CheckpointError(
            f"run {run_id}: the tools given differ from the saved ones: {names}",
            run_id=run_id,
            tools=names,
        )
    return specs


# -- dump and load -----------------------------------------------------------------


def dump_run(
    run: Run,
    policy: Policy,
    last_output: ModelTurn | None,
    engine: str,
    shadow: Policy | None = None,
) -> dict[str, Any]:
    """The whole state of `run` as JSON-compatible data (see the module docstring)."""
    values = {name: getattr(run, name) for name in RunState.model_fields if name not in _GIVEN}
    state = RunState.model_construct(**values, run_id=run.run_id, started=run.clock() - run.started)
    header: dict[str, Any] = {"format": FORMAT, "version": STATE_VERSION, "engine": engine}
    dump = RunDump.model_construct(
        **header,
        run_id=run.run_id,
        policy=_saved_policy(policy),
        tools=_saved_tools(run.specs),
        last_output=last_output,
        run=state,
        shadow=None if shadow is None else _saved_policy(shadow),
    )
    try:
        data = dump.model_dump(mode="json")
    except PydanticSerializationError as exc:
        raise CheckpointError(f"run {run.run_id}: {exc}", run_id=run.run_id) from exc
    del data["run"]["shadow"]  # written at the top; a run without one dumps as it always did
    del data["run"]["identify"]  # code, given again to `load`
    if not run.approval_count:  # a run that never remembered an approval dumps as it did
        del data["run"]["approvals"], data["run"]["approval_count"]
    if shadow is None:
        del data["shadow"]
    return data


def load_run(
    data: Any,
    *,
    policy: Policy | None = None,
    tools: Iterable[Any] | None = None,
    clock: Callable[[], float] = time.monotonic,
    shadow: Policy | None = None,
) -> Loaded:
    """Decode a dump, checking it is whole, of this version and a state a run can reach."""
    run_id = _header(data)
    try:
        dump = RunDump.model_validate(data)
    except ValidationError as exc:
        raise _refusal(run_id, exc) from exc
    saved = dump.run
    if saved.run_id != run_id:
        raise CheckpointError(
            f"run {run_id}: the saved run's run_id {saved.run_id!r} is not the dump's",
            run_id=run_id,
        )
    run = Run.__new__(Run)
    live_policy = _load_policy(run_id, dump.policy, policy)
    live_shadow = _load_shadow(run_id, dump.shadow, shadow)
    given = {
        "clock": clock,
        "identify": None,  # code: the Controller sets it again (`Controller.load`)
        "policy": live_policy,
        "prices": live_policy.prices_turns,
        "specs": _load_tools(run_id, dump.tools, tools),
        "run_id": run_id,
        "shadow": live_shadow,
        # A monotonic clock means nothing in another process: keep the time already used.
        "started": clock() - saved.started,
        "tree": None,
    }
    for name in Run.__slots__:
        setattr(run, name, given[name] if name in given else getattr(saved, name))
    _check_reachable(run, live_policy, dump.last_output)
    # Nothing in a dump clears a call by itself: the live policy checks every one again.
    recheck(run)
    return Loaded(run, live_policy, live_shadow, dump.last_output, dump.engine)


def _load_shadow(run_id: str, saved: SavedPolicy | None, given: Policy | None) -> Policy | None:
    """The shadow of a restored run: the saved one, checked as the policy is.

    A shadow never changes a decision, so a run saved without one may be given one on
    load; a saved shadow must be given again as it was when it holds code.
    """
    if saved is None:
        return given
    return _load_policy(run_id, saved, given, "shadow")


def _header(data: Any) -> str:
    """The run id of a dump of this format and version (checked before its shape)."""
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


def _refusal(run_id: str, exc: ValidationError) -> CheckpointError:
    """The CheckpointError for a dump whose shape does not validate, naming the place."""
    errors = exc.errors(include_url=False)
    differ = sorted(
        str(e["loc"][1])
        for e in errors
        if len(e["loc"]) == 2 and e["loc"][0] == "run" and e["type"] in _ABSENT_OR_EXTRA
    )
    if differ:
        return CheckpointError(
            f"run {run_id}: the saved run's fields differ from this version's: {differ}",
            run_id=run_id,
            fields=differ,
        )
    return CheckpointError(
        f"run {run_id}: {_problem(errors[0])}",
        run_id=run_id,
        field=".".join(map(str, errors[0]["loc"])),
    )


_ABSENT_OR_EXTRA = frozenset({"missing", "extra_forbidden"})


def _problem(error: ErrorDetails) -> str:
    """What is wrong at the error's place, in the words of the checks before the model."""
    place = ".".join(map(str, error["loc"]))
    message = f"{error['msg']} (at {place})" if len(error["loc"]) > 1 else error["msg"]
    match error["loc"]:
        case ("run",):
            return "the dump has no 'run' object"
        case ("run", name, *_):
            return f"saved field {name!r} is invalid: {message}"
        case ("last_output", *_):
            return f"saved field 'last_output' is invalid: {message}"
        case ("policy",):
            return "the dump's 'policy' is not an object"
        case ("policy", "code", *_):
            return f"the dump's policy 'code' is not a list of names: {message}"
        case ("tools",):
            return "the dump's 'tools' is not a list"
        case ("tools", index, *_):
            return (
                f"the dump's tools[{index}] is not a saved tool (name, description, "
                f"parameters, callable): {message}"
            )
        case ("engine",):
            return f"unknown engine {error['input']!r:.80}"
    return f"the dump's {place!r} is invalid: {error['msg']}"


def _check_reachable(run: Run, policy: Policy, last: ModelTurn | None) -> None:
    """Refuse a state no run reaches: the dump was edited, or written by a broken program."""
    problems = _impossible(run, policy, last)
    if problems:
        raise CheckpointError(
            f"run {run.run_id}: the saved state is impossible: {'; '.join(problems)}",
            run_id=run.run_id,
            problems=problems,
        )


def _impossible_episode(run: Run, max_turns: int) -> list[str]:
    """Episode counters past the turn, or a user message held outside pending results."""
    problems = []
    if run.episode_start > run.turn or run.episode < 1:
        problems.append(
            f"episode {run.episode} from turn {run.episode_start} is past turn {run.turn}"
        )
    elif run.turn - run.episode_start > max_turns:
        where = f" (episode {run.episode})" if run.episode > 1 else ""
        problems.append(
            f"turn {run.turn - run.episode_start} is above max_turns {max_turns}{where}"
        )
    if run.interjection is not None and run.state not in (State.EXECUTE, State.HANDOFF):
        problems.append(f"a user message awaits pending results in state {run.state.value!r}")
    return problems


def _impossible(run: Run, policy: Policy, last: ModelTurn | None) -> list[str]:
    """Every invariant of a state a run rests in that `run` breaks (docs/durable.md lists them)."""
    state = run.state
    problems = []
    if state not in _RESTING:
        problems.append(f"state {state.value!r} is never held between inputs")
    problems += _impossible_episode(run, policy.max_turns)
    if policy.max_tool_calls is not None and run.tool_calls_used > policy.max_tool_calls:
        problems.append(
            f"tool_calls_used {run.tool_calls_used} is above max_tool_calls {policy.max_tool_calls}"
        )
    if (state is State.END) != (run.exit_reason is not None):
        problems.append(f"exit_reason {run.exit_reason} does not match state {state.value!r}")
    if state is not State.END and run.tool_errors >= policy.max_consecutive_tool_errors:
        problems.append(
            f"tool_errors {run.tool_errors} reached max_consecutive_tool_errors "
            f"{policy.max_consecutive_tool_errors} in a run that goes on"
        )
    if (last is None) != (run.turn == 0):
        held = "holds a last_output" if last is not None else "holds no last_output"
        problems.append(f"turn {run.turn} {held}: only turn 0 has no model output")
    if run.pending and state not in (State.EXECUTE, State.HANDOFF):
        problems.append(f"calls are pending in state {state.value!r}")
    waiting = run.pending_approval or run.pending_rejected or run.pending_allowed
    if waiting and state is not State.AWAIT_HUMAN:
        problems.append(f"calls await approval in state {state.value!r}")
    if run.round_failed and state not in (State.EXECUTE, State.AWAIT_HUMAN):
        problems.append(f"round_failed is set in state {state.value!r}")
    problems += _impossible_pending(run, policy)
    problems += _impossible_calls(run, last)
    return problems


def _impossible_pending(run: Run, policy: Policy) -> list[str]:
    """Calls awaiting results: none dropped, each counted, of the state's kind."""
    state = run.state
    if state not in (State.EXECUTE, State.HANDOFF):
        return []
    problems = []
    pending = run.pending
    if not pending:
        problems.append(f"state {state.value!r} has no pending calls")
    if set(run.pending_sigs) != set(pending):
        problems.append("pending_sigs does not key exactly the pending calls (a call was dropped)")
    handing = [c.id for c in pending.values() if c.name in policy.handoffs]
    if state is State.HANDOFF and (len(pending) != 1 or len(handing) != 1):
        problems.append("state 'handoff' pends other than one handoff call")
    if state is State.EXECUTE:
        if handing:
            problems.append(f"handoff calls {handing} are pending as tools in state 'execute'")
        if run.tool_calls_used < len(pending):
            problems.append(
                f"tool_calls_used {run.tool_calls_used} is below the {len(pending)} pending "
                "calls, each counted when it was cleared"
            )
    return problems


def _as_issued(held: ToolCall, issued: ToolCall, run: Run) -> bool:
    """Whether a held call is the issued one; a human's approval may have edited its arguments."""
    if held == issued:
        return True
    same_call = (held.name, held.kind) == (issued.name, issued.kind)
    return same_call and held.id in run.approved and held.error is None


def _impossible_calls(run: Run, last: ModelTurn | None) -> list[str]:
    """Every call the run holds is one the last model output issued, exactly as issued.

    An approved call may carry the arguments the human edited (`on_human_reply(arguments=)`):
    the policy checked them then, and `recheck` checks them again on load.
    """
    state = run.state
    problems = []
    issued = {c.id: c for c in last.tool_calls} if last is not None else {}
    held = [*run.pending.values(), *run.pending_approval, *run.pending_allowed]
    referenced = [c.id for c in held]
    referenced += [r.call_id for r in run.pending_rejected]
    referenced += [*run.approved, *run.refused]
    if set(run.approved) - set(run.pending):
        problems.append("approved calls are not pending")
    if run.refused and state not in (State.EXECUTE, State.HANDOFF, State.AWAIT_HUMAN):
        problems.append(f"refused calls await an answer in state {state.value!r}")
    elif set(run.refused) - {c.id for c in held}:
        problems.append("refused calls are not among the calls held")
    never = sorted(set(referenced) - set(issued))
    if never:
        problems.append(f"calls or results {never} answer no call the last model output issued")
    changed = sorted(c.id for c in held if c.id in issued and not _as_issued(c, issued[c.id], run))
    if changed:
        problems.append(f"calls {changed} differ from the calls the last model output issued")
    if set(run.pending) - set(run.pending_sigs):
        problems.append("pending calls have no call keys")
    return problems
