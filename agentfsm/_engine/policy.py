"""The policy: limits and choices that become guards in the route table.

Budgets are guards; a policy only names them. `Policy(max_turns=50,
guards=[TokenBudget(200_000) | CostBudget(0.5)])` and a policy file with
`guards = ["TokenBudget(200_000) | CostBudget(0.5)"]` build the same objects.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from functools import cached_property
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, WithJsonSchema, field_validator
from pydantic.json_schema import SkipJsonSchema

from agentfsm._cedar import CallHistory, CedarSource
from agentfsm._engine.ask_floor import floored
from agentfsm._engine.narrow import narrowed
from agentfsm._engine.routes import Route, RouteTable
from agentfsm._model import limits
from agentfsm._model._checked import Checked, listed, read
from agentfsm._model._files import open_regular, read_document, top_level_line
from agentfsm._model.tools import ToolSpec
from agentfsm._model.types import State, ToolCall
from agentfsm._permissions import (
    Permission,
    PermissionHook,
    Rule,
    Verdict,
    decide,
    did_you_mean,
    is_glob,
    never_applies,
)
from agentfsm.exceptions import DataError, PolicyError
from agentfsm.guards import Guard, Verifier, as_guard, parse_guard
from agentfsm.guards._base import Otherwise
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
from agentfsm.guards.completion import AnswerComplete, AnswerIncomplete, Paused
from agentfsm.guards.intent import LoopLadder
from agentfsm.guards.loop import LoopRung, NoProgress, RepeatedCall, RetriesExhausted
from agentfsm.guards.results import FinalTool, ResultsReady, ToolErrorLimit, ToolFailed
from agentfsm.guards.structure import (
    HandoffRequested,
    HasToolCalls,
    MalformedToolCall,
    OutputTruncated,
    ProviderFailed,
    SignalConflict,
)

__all__ = [
    "FEEDBACK_GRACE",
    "NAMED_TOOLS",
    "Permission",
    "Policy",
    "as_policy",
    "as_shadow",
    "boundary_guards",
    "build_routes",
    "check_against_tools",
    "policy_fields",
    "undeclared_entries",
    "undeclared_names",
]

FEEDBACK_GRACE = 2
"""With `on_repeat="feedback"`, refused repeats the model may still make before DOOM_LOOP."""

_STRENGTH = {"allow": 0, "ask": 1, "deny": 2}

_TABLES: dict[tuple[Any, ...], RouteTable] = {}
"""Route tables by policy content: a policy built per run reuses its table and machine."""


_GUARDS_SCHEMA = {
    "type": "array",
    "items": {"type": "string", "description": "a guard as code, e.g. 'TokenBudget(200_000)'"},
}
"""The guards as a policy file writes them; code (hooks, verifiers) has no JSON form."""


class Policy(Checked):
    """How a run is bounded and routed; every field becomes a guard or a route choice.

    Every way of making one validates, `model_copy(update=...)` and `model_construct`
    included, and raises `PolicyError` naming each bad field.
    """

    __agentfsm_error__ = PolicyError

    model_config = ConfigDict(
        frozen=True, extra="forbid", arbitrary_types_allowed=True, defer_build=True
    )

    max_turns: int = Field(50, ge=1)
    """Model outputs a run may use, retries included."""
    max_tool_calls: int | None = Field(None, ge=0)
    """Tool calls a run may execute."""
    max_retries: int = Field(2, ge=0)
    """P0 recoveries in a row before the run ends as UNRECOVERABLE_OUTPUT."""
    max_consecutive_tool_errors: int = Field(5, ge=1)
    """Failed rounds of tool calls in a row before the run ends as TOOL_ERRORS (the P5 bound):
    a round (one turn's calls) fails when any of its calls failed or was refused, however
    many did; a call a user message skipped is no failure."""
    repeat_threshold: int = Field(3, ge=2)
    """Identical consecutive calls that trip the doom-loop guard."""
    on_repeat: Literal["feedback", "ask", "stop"] = "feedback"
    """What happens at the `repeat_threshold`-th identical call: `"feedback"` (the default,
    the seeds' rule) does not run it and sends the model an error result saying why; the run
    goes on, bounded by `max_consecutive_tool_errors` and `no_progress_threshold`, and ends
    as DOOM_LOOP if the model repeats the call twice more. `"ask"` asks a human; `"stop"`
    ends the run as DOOM_LOOP at once. A recorded agentfsm trace replays with the policy it
    recorded, whatever this default."""
    loops: LoopLadder | None = None
    """The loop ladder (docs/loops.md): calls compared by intent (paraphrases included), and
    per tool a warning the model sees, then a human ask, then a stop. Given, it replaces
    `repeat_threshold` and `on_repeat`; `True` (or `{}` in a file) is `LoopLadder()`."""
    denials_are_tool_errors: bool = True
    """Whether a round refused only because the permission sources denied its calls counts
    toward `max_consecutive_tool_errors` (the MCP proxy's default is False: a denial is the
    policy's answer, not a failing tool)."""
    no_progress_threshold: int | None = Field(6, ge=2)
    """Rounds in a row without change (repeated calls and results, failed answers) before
    NO_PROGRESS. 6 by default: at 4 or 5, replaying the tau-bench sample stops task 9 trial 2,
    which books the same failing reservation five times, and that sample counts as healthy."""
    max_tokens: int | None = Field(None, ge=0)
    """Token budget over the run (input plus output)."""
    max_cost: float | None = Field(None, ge=0)
    """Cost budget over the run, in US dollars: payload costs, else usage priced by genai-prices."""
    on_unknown_price: Literal["warn", "stop"] = "warn"
    """When a cost budget cannot price a turn (model not in genai-prices, no usage): say so
    once in the decision's reason and count it as $0 ("warn"), or stop with COST_BUDGET."""
    max_seconds: float | None = Field(None, ge=0)
    """Wall-time budget of the run."""
    max_context_tokens: int | None = Field(None, ge=1)
    """Stop when the context reaches this many tokens."""
    on_incomplete: Literal["continue", "ask"] = "continue"
    """What to do with an answer that fails the completion checks."""
    on_deny: Literal["feedback", "stop"] = "feedback"
    """Denied calls: send the model an error result, or stop the run."""
    permissions: dict[str, Permission] = Field(default_factory=dict)
    """Per-tool permission; the key `"*"` sets the default (allow when absent)."""
    permission_rules: tuple[Rule, ...] = ()
    """Rules by tool name and argument pattern, e.g. `"deny bash(command=rm -rf *)"`,
    `"ask git_*"`, `{"action": "allow", "tool": "read_file"}`. Every rule that matches counts."""
    ask_floor: frozenset[str] = frozenset()
    """Tools whose calls ask where the policy would allow them, unless the tool's own
    `permissions` entry is "allow" or allow rules written for exactly that tool allow the
    call: a floor only an allow lifts (MCP tool annotations set it; see docs/mcp-proxy.md)."""
    permission: SkipJsonSchema[PermissionHook | None] = Field(None, exclude=True)
    """A hook deciding per call. Its verdict counts beside the rules and `permissions`:
    the strongest wins (deny, then ask, then allow). Anything it returns that is not exactly
    `"allow"`, `"ask"` or `"deny"`, and any exception it raises, denies the call."""
    cedar: CedarSource | None = None
    """Cedar policies deciding calls beside the rules, the table and the hook (the strongest
    verdict wins); a Cedar source is an allow-list and fails closed (docs/cedar.md). Given
    as a CedarSource, the Cedar text, or in a policy file `cedar = "rules.cedar"` (a path
    relative to the file) or `cedar_policies = "..."`. Needs `agentfsm[cedar]`."""
    handoffs: frozenset[str] = frozenset()
    """Tool names that hand the task to another agent."""
    final_tools: frozenset[str] = frozenset()
    """Tool names whose successful result is the run's answer (mini-swe-agent's submit, the
    OpenAI Agents SDK's `StopAtTools`): it ends the run as COMPLETED once it passes the
    completion checks (`verifiers`, a non-empty answer), as a model's answer does."""
    verifiers: SkipJsonSchema[tuple[Verifier, ...]] = Field((), exclude=True)
    """Completion checks run on an answer without tool calls, and on a final tool's result."""
    guards: Annotated[tuple[Guard, ...], WithJsonSchema(_GUARDS_SCHEMA)] = ()
    """Extra stop conditions, evaluated with the budgets, and on a final answer before it is
    accepted: a guard of your own that applies to the answer stops the run. Budgets and loop
    limits given here bind, as the fields do, only when another model call or tool run is
    needed."""

    @field_validator("guards", mode="before")
    @classmethod
    def _parse_guards(cls, value: Any) -> tuple[Guard, ...]:
        if isinstance(value, str | Guard) or callable(value):
            value = [value]
        if not isinstance(value, list | tuple):
            raise PolicyError(f"guards must be a list of guards, not {type(value).__name__}")
        return tuple(parse_guard(g) if isinstance(g, str) else as_guard(g) for g in value)

    @field_validator("loops", mode="before")
    @classmethod
    def _ladder(cls, value: Any) -> Any:
        if value is True:
            return LoopLadder()
        return None if value is False else value

    @field_validator("permission_rules", mode="before")
    @classmethod
    def _parse_rules(cls, value: Any) -> tuple[Rule, ...]:
        if isinstance(value, str | Rule | Mapping):
            value = [value]
        if not isinstance(value, list | tuple):
            raise PolicyError(
                f"permission_rules must be a list of rules, not {type(value).__name__}"
            )
        return tuple(_rule(item) for item in value)

    @field_validator("cedar", mode="before")
    @classmethod
    def _parse_cedar(cls, value: Any) -> Any:
        # The text as data: pydantic builds the source, and its errors read as the field's.
        return {"policies": value} if isinstance(value, str) else value

    @field_validator("final_tools", "handoffs", "ask_floor", mode="before")
    @classmethod
    def _names(cls, value: Any) -> Any:
        names = [value] if isinstance(value, str) else value
        if isinstance(names, list | tuple | set | frozenset) and "" in names:
            raise ValueError("a tool name must not be empty")
        return names

    @cached_property
    def prices_turns(self) -> bool:
        """Whether a cost budget (`max_cost`, or a CostBudget among `guards`) needs turn prices."""
        return self.max_cost is not None or self._has_guard(CostBudget)

    @cached_property
    def reads_tree(self) -> bool:
        """Whether a guard reads the run tree's ledger (`TreeBudget` among `guards`)."""
        return self._has_guard(TreeBudget)

    def _has_guard(self, kind: type) -> bool:
        """Whether a guard of `kind` is among `guards`, inside combined guards included."""
        todo: list[object] = list(self.guards)
        while todo:
            guard = todo.pop()
            if isinstance(guard, kind):
                return True
            todo.extend(getattr(guard, "children", ()))
            child = getattr(guard, "child", None)
            if child is not None:
                todo.append(child)
        return False

    @cached_property
    def routes(self) -> RouteTable:
        """The route table this policy builds, shared by every equal policy."""
        key = self._routing_key()
        table = _TABLES.get(key)
        if table is None:
            if len(_TABLES) >= 256:  # bound the cache for programs that vary policies freely
                _TABLES.clear()
            table = _TABLES[key] = build_routes(self)
        return table

    def _routing_key(self) -> tuple[Any, ...]:
        # Hooks, verifiers and guards count by identity or equality; dicts become sorted items.
        return tuple(
            tuple(sorted(v.items())) if isinstance(v, dict) else v
            for v in (getattr(self, name) for name in type(self).model_fields)
        )

    def permission_for(self, call: ToolCall) -> Permission:
        """Whether `call` may run, needs a human, or is denied (the strongest verdict wins)."""
        return self.permission_verdict(call)[0]

    def permission_verdict(self, call: ToolCall, *, history: CallHistory | None = None) -> Verdict:
        """The permission of `call` and the source that gave it (a rule, the table, the hook,
        a Cedar policy).

        `history` is what the run has done so far, which a Cedar source reads in its
        context; without it a Cedar policy that reads `context.history` denies.
        """
        verdict = self.native_verdict(call)
        if self.cedar is None:
            return verdict
        said = self.cedar.verdict(call, history)
        # The strongest wins; on a tie Cedar is named where the native sources only defaulted.
        if _STRENGTH[said[0]] > _STRENGTH.get(verdict[0], 2) or (
            said[0] == verdict[0] and verdict[1] == "the default"
        ):
            return said
        return verdict

    def native_verdict(self, call: ToolCall) -> Verdict:
        """The verdict of the rules, the table, the hook and the ask floor, without Cedar."""
        plain = not self.permission_rules and not self.permissions and self.permission is None
        if plain and call.name not in self.ask_floor:
            return "allow", "the default"
        verdict = decide(call, self.permission_rules, self.permissions, self.permission)
        if call.name in self.ask_floor:
            return floored(verdict, call, self.permission_rules, self.permissions)
        return verdict

    def narrowed_by(self, parent: Policy) -> Policy:
        """This policy as a sub-agent of `parent` runs it: never wider than `parent`.

        Per call the stronger verdict wins (deny, then ask, then allow), each limit is the
        lesser, and `TreeBudget()` stops the child when its run tree's budget is spent;
        see `agentfsm._engine.narrow.narrowed`.
        """
        _check_policy(parent, "narrowed_by")
        child: Policy = narrowed(self, parent)
        return child

    def to_json(self) -> dict[str, Any]:
        """The policy as JSON-compatible data, guards as their reprs."""
        data = self.model_dump(
            mode="python",
            exclude={
                "guards",
                "handoffs",
                "final_tools",
                "ask_floor",
                "permission_rules",
                "cedar",
                "loops",
                "denials_are_tool_errors",
            },
        )
        # Only when set: a policy without them dumps as it always did.
        if self.loops is not None:
            data["loops"] = self.loops.model_dump(mode="json")
        if not self.denials_are_tool_errors:
            data["denials_are_tool_errors"] = False
        if self.cedar is not None:  # only when set: a policy without one dumps as it always did
            data["cedar"] = self.cedar.model_dump(mode="json")
        data["guards"] = [repr(g) for g in self.guards]
        data["handoffs"] = sorted(self.handoffs)
        data["final_tools"] = sorted(self.final_tools)
        if self.ask_floor:  # only when set: a policy without floors dumps as it always did
            data["ask_floor"] = sorted(self.ask_floor)
        # Structured, never text: a glob holding ", name=" or edge spaces would not parse back.
        # A rule without path patterns is written as before they existed, so older dumps
        # of the same policy still compare equal when loaded.
        data["permission_rules"] = [
            rule.model_dump(mode="json", exclude=set() if rule.paths else {"paths"})
            for rule in self.permission_rules
        ]
        return data

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], *, source: str = "policy") -> Policy:
        """Build a policy from plain data, naming `source` in errors."""
        if not isinstance(data, Mapping):
            raise PolicyError(
                f"{source}: a policy is a mapping of fields, not {type(data).__name__}"
            )
        fields = read(source, PolicyError, lambda: dict(data))
        _cedar_text(fields, source)
        try:
            return cls.model_validate(fields)
        except PolicyError as exc:  # a field, or as-is from the guards validator
            problems = exc.details.get("problems")
            where = listed(problems) if problems else f"guards: {exc.message}"
            raise PolicyError(f"{source}: {where}") from exc

    @classmethod
    def from_file(cls, path: str | Path) -> Policy:
        """Read a policy from a JSON or TOML file."""
        if not isinstance(path, str | os.PathLike):
            raise PolicyError(f"a policy file's path is a str or a path, not {type(path).__name__}")
        file = Path(path)
        text = _read_text(file, f"cannot read policy file {file}", f"policy file {file}")
        fields = policy_fields(text, str(file), toml=file.suffix == ".toml")
        return cls.from_mapping(_cedar_file(fields, file), source=str(file))


def _cedar_text(fields: dict[str, Any], source: str) -> None:
    """Read `cedar_policies` (Cedar text in a policy's data) into the `cedar` field."""
    if "cedar_policies" not in fields:
        return
    if "cedar" in fields:
        raise PolicyError(f"{source}: give 'cedar' or 'cedar_policies', not both")
    text = fields.pop("cedar_policies")
    if not isinstance(text, str):
        raise PolicyError(f"{source}: 'cedar_policies' is Cedar text, not {type(text).__name__}")
    fields["cedar"] = {"policies": text, "origin": f"{source} (cedar_policies)"}


def _cedar_file(fields: Mapping[str, Any], file: Path) -> Mapping[str, Any]:
    """A policy file's `cedar = "rules.cedar"` and `cedar_schema = "rules.cedarschema"`: the
    Cedar files' text, read beside `file`, into the `cedar` field."""
    fields = dict(fields)
    if "cedar" in fields and "cedar_policies" in fields:
        raise PolicyError(f"{file}: give 'cedar' or 'cedar_policies', not both")
    schema = fields.pop("cedar_schema", None)
    name = fields.get("cedar")
    if isinstance(name, str):
        fields["cedar"] = {
            "policies": _cedar_text_file(file, name),
            "origin": str(file.parent / name),
        }
    if schema is None:
        return fields
    cedar = fields.get("cedar_policies", fields.get("cedar"))
    if not isinstance(schema, str) or cedar is None:
        raise PolicyError(
            f"{file}: 'cedar_schema' is a schema file beside 'cedar' or 'cedar_policies'"
        )
    text = _cedar_text_file(file, schema)
    if "cedar_policies" in fields:
        fields["cedar"] = {
            "policies": fields.pop("cedar_policies"),
            "origin": f"{file} (cedar_policies)",
        }
    if isinstance(fields["cedar"], Mapping):
        fields["cedar"] = {**fields["cedar"], "cedar_schema": text}
    return fields


def _cedar_text_file(file: Path, name: str) -> str:
    """The text of a Cedar file `name`, relative to the policy `file`."""
    path = file.parent / name
    return _read_text(path, f"{file}: cannot read Cedar file {path}", f"{file}: Cedar file {path}")


def _read_text(path: Path, cannot: str, named: str) -> str:
    """A policy's text file, as UTF-8: a regular file only, bounded (never /dev/zero, never a
    FIFO that blocks); PolicyError saying `cannot: why`, or `named is not UTF-8 text`."""
    try:
        with open_regular(
            str(path),
            lambda why: PolicyError(f"{cannot}: {why}"),
            max_bytes=limits.MAX_POLICY_BYTES,
        ) as raw:
            return raw.read().decode("utf-8")
    except OSError as exc:
        raise PolicyError(f"{cannot}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise PolicyError(f"{named} is not UTF-8 text: {exc.reason}") from exc


def policy_fields(text: str, source: str, *, toml: bool) -> Mapping[str, Any]:
    """The policy's fields in a policy file's `text`: at the top, or all under a `policy` key.

    A file that is not valid JSON (or TOML), writes a key twice in one object, holds
    anything but an object, or has fields both at the top and under `policy` (which
    would silently drop the top ones, denies included) raises PolicyError naming
    `source` and the line.
    """
    data = read_document(
        text, source, toml=toml, refuse=lambda why: PolicyError(f"policy file {why}")
    )
    if not isinstance(data, dict):
        raise PolicyError(f"policy file {source} must hold an object, not {type(data).__name__}")
    if "policy" not in data:
        return data
    beside = [key for key in data if key != "policy"]
    if beside:
        line = top_level_line(text, beside[0], toml=toml)
        where = f"{source}:{line}" if line is not None else source
        raise PolicyError(
            f"policy file {where}: {beside[0]!r} sits beside the 'policy' key, which holds the "
            f"policy's fields; put every field under 'policy', or none (beside it: {beside})"
        )
    fields = data["policy"]
    if not isinstance(fields, dict):
        line = top_level_line(text, "policy", toml=toml)
        where = f"{source}:{line}" if line is not None else source
        raise PolicyError(
            f"policy file {where}: 'policy' must be a table of the policy's fields, "
            f"not {type(fields).__name__}"
        )
    return fields


def _rule(item: Any) -> Rule:
    """A rule from its text, a mapping a person wrote, or the Rule's own dump (`to_json`).

    The dump form is told apart by its `args`, a list of [name, glob] pairs, and is
    validated as the model itself, so every field of the rule is kept as it was.
    """
    if isinstance(item, Mapping) and isinstance(item.get("args"), list):
        try:
            return Rule.model_validate(dict(item))
        except DataError as exc:
            raise PolicyError(f"permission rule {dict(item)!r:.200} is invalid: {exc}") from exc
    return Rule.of(item)


def check_against_tools(policy: Policy, tools: Mapping[str, ToolSpec] | None) -> None:
    """Raise PolicyError when a permission rule, `permissions` entry, or a tool named in
    `ask_floor`, `final_tools` or `handoffs` of `policy` can never apply to `tools`.

    With tools declared, a rule naming a tool that is not declared (unless its tool
    part is a glob), or an argument that no matching tool's schema takes, would never
    match: `deny bash(comand~rm -rf *)` would let `rm -rf /` run. A `permissions`
    entry is looked up by the exact tool name, so a key that names no declared tool
    (a glob such as `"read_*"` included; `"*"` is the default) would never speak
    either, nor would a misspelled name in `ask_floor` (the call would run unasked),
    `final_tools` or `handoffs`. Each problem is named, with the closest declared name.
    `tools=None` (any name accepted) checks nothing; `agentfsm lint` reports these and
    more without building a Controller.
    """
    ladder = policy.loops is not None and bool(policy.loops.tools)
    named = bool(policy.ask_floor or policy.final_tools or policy.handoffs) or ladder
    if tools is None or not (policy.permission_rules or policy.permissions or named):
        return
    schemas = {name: spec.parameters for name, spec in tools.items()}
    problems = [
        ("permission_rules", why)
        for why in (never_applies(rule, schemas) for rule in policy.permission_rules)
        if why is not None
    ]
    problems += [("permissions", why) for why in undeclared_entries(policy.permissions, tools)]
    problems += undeclared_names(policy, tools)
    problems += _undeclared_loop_tools(policy, tools)
    if problems:
        raise PolicyError(
            f"the policy does not fit the declared tools: {listed(problems)}", problems=problems
        )


def _undeclared_loop_tools(policy: Policy, tools: Mapping[str, object]) -> list[tuple[str, str]]:
    """`("loops", why)` for each tool of `loops.tools` that is not declared: its rungs and
    volatile arguments would never apply."""
    if policy.loops is None:
        return []
    declared = f"(declared: {', '.join(sorted(tools)) or 'none'})"
    found = []
    for name in sorted(policy.loops.tools):
        if name not in tools:
            hint = did_you_mean(name, tools)
            found.append(
                ("loops", f"loops.tools names {name!r}, which is not declared{hint} {declared}")
            )
    return found


NAMED_TOOLS = ("ask_floor", "final_tools", "handoffs")
"""The policy fields that hold exact tool names."""


def undeclared_names(policy: Policy, tools: Mapping[str, object]) -> list[tuple[str, str]]:
    """`(field, why)` for each name in `ask_floor`, `final_tools` or `handoffs` that names no
    declared tool: a misspelled floor lets the tool's calls run unasked, a misspelled final
    tool or handoff never ends the run or hands off."""
    declared = f"(declared: {', '.join(sorted(tools)) or 'none'})"
    found = []
    for field in NAMED_TOOLS:
        for name in sorted(getattr(policy, field)):
            if name not in tools:
                hint = did_you_mean(name, tools)
                found.append(
                    (field, f"{field} names {name!r}, which is not declared{hint} {declared}")
                )
    return found


def undeclared_entries(table: Mapping[str, object], tools: Mapping[str, object]) -> list[str]:
    """Why each `permissions` key other than `"*"` that names no declared tool never speaks.

    The table is read by exact tool name, never as a glob: `"read_*"` speaks only for a
    tool named `read_*`, so it is named here too, with the rule that says what it means.
    """
    found = []
    for name in table:
        if name == "*" or name in tools:
            continue
        why = f"permissions[{name!r}] names a tool that is not declared{did_you_mean(name, tools)}"
        if is_glob(name):
            why += (
                f"; its keys are exact tool names, not globs (for every tool matching it, "
                f"write a rule: '{table[name]} {name}')"
            )
        found.append(f"{why} (declared: {', '.join(sorted(tools)) or 'none'})")
    return found


def as_policy(policy: object, where: str = "policy") -> Policy:
    """The policy given to a Controller or an integration: a Policy, None (the defaults) or a
    mapping of its fields; anything else raises PolicyError naming `where`."""
    if policy is None:
        return Policy()
    if isinstance(policy, Policy):
        return policy
    if isinstance(policy, Mapping):
        return Policy.from_mapping(policy, source=where)
    raise PolicyError(
        f"{where} must be an agentfsm.Policy, a mapping of its fields or None, "
        f"not {type(policy).__name__}"
    )


def as_shadow(shadow: object, tools: Mapping[str, ToolSpec] | None) -> Policy | None:
    """The shadow policy given beside the enforced one: None (no shadow), a Policy or a
    mapping of its fields, fitting the declared `tools`; PolicyError naming `shadow`."""
    if shadow is None:
        return None
    if not isinstance(shadow, Policy | Mapping):
        raise PolicyError(
            f"shadow must be an agentfsm.Policy, a mapping of its fields or None, "
            f"not {type(shadow).__name__}"
        )
    candidate = as_policy(shadow, "shadow")
    try:
        check_against_tools(candidate, tools)
    except PolicyError as exc:
        raise PolicyError(f"shadow: {exc.message}", **exc.details) from exc
    return candidate


# -- the route table a policy builds -----------------------------------------------------


def _check_policy(policy: object, where: str) -> None:
    if not isinstance(policy, Policy):
        raise PolicyError(f"{where} takes an agentfsm.Policy, not {type(policy).__name__}")


def boundary_guards(policy: Policy) -> list[Guard]:
    """The budget guards a policy asks for, plus the guards it was given directly."""
    _check_policy(policy, "boundary_guards")
    found: list[Guard] = [MaxTurns(policy.max_turns)]
    if policy.max_tool_calls is not None:
        found.append(MaxToolCalls(policy.max_tool_calls))
    if policy.max_tokens is not None:
        found.append(TokenBudget(policy.max_tokens))
    # An infinite budget is no budget: it validates, and builds no guard.
    if policy.max_cost is not None and math.isfinite(policy.max_cost):
        found.append(CostBudget(policy.max_cost, on_unknown=policy.on_unknown_price))
    if policy.max_seconds is not None and math.isfinite(policy.max_seconds):
        found.append(Deadline(policy.max_seconds))
    if policy.max_context_tokens is not None:
        found.append(ContextLimit(policy.max_context_tokens))
    found.extend(policy.guards)
    return found


def _refusal_guards(policy: Policy) -> list[Guard]:
    """The guards that refuse calls and let the model try again, in the order they decide.

    With `on_repeat="feedback"` the repeated round was refused by the loop guard (layer 4);
    with `on_deny="feedback"` a denied call by the permission guard (layer 5). When no call
    of the turn runs, the decision to go back to the model is theirs, at P6.
    """
    found: list[Guard] = []
    if policy.on_repeat == "feedback" and policy.loops is None:
        found.append(RepeatedCall(policy.repeat_threshold, feedback=True))
    if policy.on_deny == "feedback":
        found.append(PermissionDenied(feedback=True))
    return found


def _answer_guards(policy: Policy) -> list[Guard]:
    """The parts of the policy's `guards` that may end a run at a final answer."""
    return [part for part in (g.on_answers() for g in policy.guards) if part is not None]


def build_routes(policy: Policy) -> RouteTable:
    """Build the route table a policy describes."""
    _check_policy(policy, "build_routes")
    S = State  # noqa: N806 - the table reads as a table with a one-letter alias
    bounds = boundary_guards(policy)
    verifiers = tuple(policy.verifiers)
    on_repeat = S.AWAIT_HUMAN if policy.on_repeat == "ask" else S.END
    # "feedback": validate refuses the repeated calls itself; the run stops only when the
    # model repeats them FEEDBACK_GRACE more times after being told.
    repeats = policy.repeat_threshold + (FEEDBACK_GRACE if policy.on_repeat == "feedback" else 0)
    on_incomplete = S.AWAIT_HUMAN if policy.on_incomplete == "ask" else S.AWAIT_MODEL
    rows: list[tuple[State, Guard, State]] = [
        (S.AWAIT_MODEL, Otherwise("a model output arrived", "P1"), S.PARSE),
        (S.PARSE, OutputTruncated(), S.RECOVER),
        (S.PARSE, MalformedToolCall(), S.RECOVER),
        (S.PARSE, Refused(), S.END),
        (S.PARSE, ContentFiltered(), S.END),
        (S.PARSE, ProviderFailed(), S.END),
        (S.PARSE, SignalConflict(), S.VALIDATE),
        (S.PARSE, Otherwise("the output is well formed", "P1"), S.VALIDATE),
    ]
    if policy.loops is None:
        rows.append((S.VALIDATE, RepeatedCall(repeats), on_repeat))
    else:  # the ladder's rungs; its warning rides on the decision that runs the calls
        rows += [
            (S.VALIDATE, LoopRung("stop"), S.END),
            (S.VALIDATE, LoopRung("ask"), S.AWAIT_HUMAN),
        ]
    if policy.on_deny == "stop":
        rows.append((S.VALIDATE, PermissionDenied(), S.END))
    # Refusals that nothing else in the turn outranks: the guard that refused decides (P6),
    # not the P5 feedback of a failed tool (seed 003: repetition and denials are P6).
    # They apply only when no call of the turn runs, so they come with the other P6 rows.
    refusals = _refusal_guards(policy)
    rows += [
        (S.VALIDATE, NeedsApproval(), S.AWAIT_HUMAN),
        *((S.VALIDATE, g, S.BUDGET_CHECK) for g in refusals),
        (S.VALIDATE, HasToolCalls(), S.BUDGET_CHECK),
        (S.VALIDATE, HandoffRequested(), S.BUDGET_CHECK),
        (S.VALIDATE, ToolFailed(), S.BUDGET_CHECK),
        (S.VALIDATE, Otherwise("no tool call: check the answer", "P3"), S.VERIFY),
        # A guard of your own stops a final answer too; budgets do not (see acts_on_answers).
        *((S.VERIFY, g, S.END) for g in _answer_guards(policy)),
        (S.VERIFY, AnswerComplete(*verifiers), S.END),
        (S.VERIFY, Otherwise("the answer is not final", "P4"), S.BUDGET_CHECK),
        *((S.BUDGET_CHECK, g, S.END) for g in bounds),
        (S.BUDGET_CHECK, ToolErrorLimit(policy.max_consecutive_tool_errors), S.END),
    ]
    if policy.no_progress_threshold is not None:
        rows.append((S.BUDGET_CHECK, NoProgress(policy.no_progress_threshold), S.END))
    rows += [
        *((S.BUDGET_CHECK, g, S.AWAIT_MODEL) for g in refusals),
        (S.BUDGET_CHECK, HasToolCalls(), S.EXECUTE),
        (S.BUDGET_CHECK, HandoffRequested(), S.HANDOFF),
        (S.BUDGET_CHECK, Paused(), S.AWAIT_MODEL),
        # Before the results rows: a final tool's answer that fails a check says why (P4).
        (S.BUDGET_CHECK, AnswerIncomplete(*verifiers), on_incomplete),
        (S.BUDGET_CHECK, ToolFailed(), S.AWAIT_MODEL),
        (S.BUDGET_CHECK, ResultsReady(), S.AWAIT_MODEL),
        (S.BUDGET_CHECK, Otherwise("call the model again", "P4"), S.AWAIT_MODEL),
        (S.RECOVER, RetriesExhausted(policy.max_retries), S.END),
        *((S.RECOVER, g, S.END) for g in bounds),
        (S.RECOVER, Otherwise("retry the model call", "P0"), S.AWAIT_MODEL),
    ]
    if policy.final_tools:
        # A final tool that is also a handoff (LangGraph's return_direct on a delegate): the
        # delegate's answer ends the run as the tool's result would.
        # Its result is a final output: verify checks it as it checks a model's answer.
        final = FinalTool(*sorted(policy.final_tools))
        rows += [(S.EXECUTE, final, S.VERIFY), (S.HANDOFF, final, S.VERIFY)]
    rows += [
        (S.EXECUTE, Otherwise("the tool results arrived", "P1"), S.BUDGET_CHECK),
        (S.HANDOFF, Otherwise("the delegate answered", "P2"), S.BUDGET_CHECK),
        (S.AWAIT_HUMAN, HumanDeclined(), S.END),
        # A reply that goes back to the model (a decline with a message, an answer) needs a
        # model turn: the budgets are checked first, as on every other way to the model (an
        # approval meets the same ones first in BUDGET_CHECK, so it ends the same).
        *((S.AWAIT_HUMAN, g, S.END) for g in bounds),
        (S.AWAIT_HUMAN, HumanApproved(), S.BUDGET_CHECK),
        (S.AWAIT_HUMAN, Otherwise("the human replied", "P4"), S.AWAIT_MODEL),
    ]
    return RouteTable(Route(src, guard, dst) for src, guard, dst in rows)
