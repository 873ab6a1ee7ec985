"""Cedar as a permission source: a policy's `cedar` field, evaluated with `cedarpy`.

A tool call becomes one Cedar request (docs/cedar.md):

- principal `Agent::"<principal>"` (`"agent"` unless the source names another);
- action `Action::"call"`, one action for every call: a tool is the resource, so
  `resource == Tool::"bash"` and `resource in [...]` speak of tools, and a tool added
  later is covered by the policies that do not name one;
- resource `Tool::"<tool name>"`;
- context `{arguments: {...}, history: {calls, tokens, cost_micros, turn}}`; `history`
  is absent where no run is known (`agentfsm explain` without `--history`).

Cedar has no floats and no null, and reads `{"__entity": ...}` in JSON as an entity
reference: a call whose arguments hold a float, a null, an int beyond 64 bits or such
a key cannot be shown to Cedar faithfully, so the source is unsure and denies it.
Spend is given as whole micro-dollars (`cost_micros`, rounded up), which Cedar compares.

Verdicts: Cedar's Allow is "allow" (or "ask" when a deciding permit carries
`@agentfsm("ask")`); Deny is "deny", whether a forbid matched or no permit did (a Cedar
source is an allow-list); any evaluation error denies, naming it, though Cedar itself
would only skip the erroring policy (a forbid that errors must not let a call through).
`cedarpy` is imported only when a policy has a Cedar source (`agentfsm[cedar]`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cached_property
from typing import TYPE_CHECKING, Any

from pydantic import ConfigDict, model_validator
from pydantic_core import PydanticCustomError

from agentfsm._model._checked import Checked
from agentfsm._model.call_history import CallHistory
from agentfsm._model.types import ToolCall, Verdict
from agentfsm.exceptions import PolicyError

if TYPE_CHECKING:
    import cedarpy

__all__ = [
    "ASK_ANNOTATION",
    "CallHistory",
    "CedarSource",
    "cedar_context",
    "cedar_request",
    "statements",
]

ASK_ANNOTATION = "agentfsm"
"""`@agentfsm("ask")` on a permit policy: a call it allows asks a human instead."""

_LONG = 2**63
_ESCAPES = frozenset({"__entity", "__extn", "__expr"})
"""Keys Cedar's JSON reads as an entity, extension or expression instead of a record field."""


class _UnsureError(Exception):
    """An argument Cedar cannot be given faithfully; the message names it."""


def _value(value: Any, where: str) -> Any:
    """`value` as Cedar JSON, or _UnsureError naming `where` and why."""
    if isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        if -_LONG <= value < _LONG:
            return value
        raise _UnsureError(f"{where} is an integer beyond Cedar's 64 bits")
    if isinstance(value, list | tuple):
        return [_value(item, f"{where}[{i}]") for i, item in enumerate(value)]
    if isinstance(value, Mapping):
        return _record(value, where)
    if value is None:
        raise _UnsureError(f"{where} is null, which Cedar has no value for")
    if isinstance(value, float):
        raise _UnsureError(f"{where} is a float ({value!r}), which Cedar has no value for")
    raise _UnsureError(f"{where} is a {type(value).__name__}")


def _record(value: Mapping[Any, Any], where: str) -> dict[str, Any]:
    record: dict[str, Any] = {}
    for key, item in value.items():
        if not isinstance(key, str):
            raise _UnsureError(f"{where} has a key that is not a string ({key!r})")
        if key in _ESCAPES:
            raise _UnsureError(f"{where} has the key {key!r}, which Cedar reads as an escape")
        record[key] = _value(item, f"{where}.{key}")
    return record


def cedar_context(call: ToolCall, history: CallHistory | None) -> dict[str, Any]:
    """The Cedar context of `call`: its arguments and, when known, the run's history.

    Raises _UnsureError (private) when an argument cannot be given to Cedar.
    """
    context: dict[str, Any] = {"arguments": _value(dict(call.arguments or {}), "arguments")}
    if history is not None:
        context["history"] = history.as_dict()
    return context


def cedar_request(call: ToolCall, principal: str, context: dict[str, Any]) -> dict[str, Any]:
    """The Cedar request for `call` (entity uids in the JSON form: any tool name is an id)."""
    return {
        "principal": {"type": "Agent", "id": principal},
        "action": {"type": "Action", "id": "call"},
        "resource": {"type": "Tool", "id": call.name},
        "context": context,
    }


class CedarSource(Checked):
    """Cedar policies deciding tool calls beside the native rules; see docs/cedar.md.

    Text that does not parse raises PolicyError naming `origin` and the line of the
    policy that fails. `cedarpy` (`pip install 'agentfsm[cedar]'`) must be installed.
    """

    __agentfsm_error__ = PolicyError

    model_config = ConfigDict(frozen=True, extra="forbid")

    policies: str
    """The Cedar policy text."""
    origin: str = "cedar"
    """Where the text came from (a file name), for messages; a dump keeps it."""
    principal: str = "agent"
    """The id of the request's principal, `Agent::"<principal>"`."""
    cedar_schema: str | None = None
    """A Cedar schema (Cedar syntax, or JSON): the policies are validated against it when
    the source is made, and every request at evaluation (a request that does not fit denies)."""

    @model_validator(mode="after")
    def _parse(self) -> CedarSource:
        # Refuse text that does not parse, and annotations or templates not understood,
        # when the source is made, never at the first call.
        try:
            _ = self.compiled, self.described
            self._validated()
        except PolicyError as exc:  # the message as it is, not behind pydantic's "Value error"
            raise PydanticCustomError("cedar", "{why}", {"why": exc.message}) from exc
        return self

    @cached_property
    def compiled(self) -> cedarpy.PolicySet:
        """The parsed policy set."""
        engine = _cedarpy(self.origin)
        try:
            parsed: cedarpy.PolicySet = engine.PolicySet.from_str(self.policies)
        except ValueError as exc:
            raise PolicyError(_parse_error(self.policies, self.origin, str(exc))) from exc
        return parsed

    @cached_property
    def described(self) -> dict[str, dict[str, Any]]:
        """Each static policy by id, as Cedar's JSON form (effect, scope, annotations)."""
        cedarpy = _cedarpy(self.origin)
        found = json.loads(cedarpy.policies_to_json_str(self.policies))
        policies: dict[str, dict[str, Any]] = found.get("staticPolicies", {})
        for pid, body in policies.items():
            said = body.get("annotations", {}).get(ASK_ANNOTATION)
            if said is not None and said != "ask":
                raise PolicyError(
                    f"{self.origin}: Cedar policy {_label(pid, body)}: @{ASK_ANNOTATION}"
                    f'({said!r}) is not understood; the only value is @{ASK_ANNOTATION}("ask")'
                )
        if found.get("templates"):
            raise PolicyError(
                f"{self.origin}: Cedar templates (?principal, ?resource) are not supported: "
                "a template decides nothing until linked"
            )
        return policies

    @cached_property
    def parsed_schema(self) -> cedarpy.Schema | None:
        """The parsed schema, when the source has one."""
        if self.cedar_schema is None:
            return None
        engine = _cedarpy(self.origin)
        text = self.cedar_schema
        try:
            parsed: cedarpy.Schema = (
                engine.Schema.from_json_str(text)
                if text.lstrip().startswith("{")
                else engine.Schema.from_str(text)
            )
        except ValueError as exc:
            raise PolicyError(f"{self.origin}: the Cedar schema does not parse: {exc}") from exc
        return parsed

    def _validated(self) -> None:
        """Refuse policies that do not fit the schema, naming each problem."""
        if self.parsed_schema is None:
            return
        result = _cedarpy(self.origin).validate_policies(self.policies, self.parsed_schema)
        if not result.validation_passed:
            problems = "; ".join(str(error) for error in result.errors)
            raise PolicyError(f"{self.origin}: Cedar policies do not fit the schema: {problems}")

    def tools_named(self) -> list[str]:
        """The tool names the policies' resource scopes name (`Tool::"x"`), for lint."""
        names: list[str] = []
        for body in self.described.values():
            scope = body.get("resource", {})
            entities = [scope.get("entity"), *(scope.get("entities") or [])]
            for entity in entities:
                if isinstance(entity, Mapping) and entity.get("type") == "Tool":
                    names.append(str(entity.get("id")))
        return sorted(set(names))

    def verdict(self, call: ToolCall, history: CallHistory | None = None) -> Verdict:
        """What the Cedar policies say of `call`; anything but a clean answer denies."""
        try:
            context = cedar_context(call, history)
        except _UnsureError as exc:
            return "deny", f"cedar: {exc}: unsure, so denied"
        cedarpy = _cedarpy(self.origin)
        request = cedar_request(call, self.principal, context)
        try:
            result = cedarpy.is_authorized(request, self.compiled, "[]", schema=self.parsed_schema)
            decision, reasons = result.decision.value, list(result.diagnostics.reasons)
            errors = list(result.diagnostics.errors)
        except Exception as exc:  # anything the evaluator raises denies: fail closed
            return "deny", f"cedar: evaluation failed: {type(exc).__name__}: {exc}"
        return self._read(decision, reasons, errors)

    def _read(self, decision: str, reasons: list[str], errors: list[str]) -> Verdict:
        if errors:
            return "deny", f"cedar: evaluation error, so denied: {'; '.join(errors)}"
        names = ", ".join(self.label(pid) for pid in sorted(reasons))
        if decision == "Allow" and reasons:
            asking = [pid for pid in reasons if self._asks(pid)]
            if asking:
                return "ask", f"cedar permit {names} asks ({self.origin})"
            return "allow", f"cedar permit {names} ({self.origin})"
        if decision == "Deny" and reasons:
            return "deny", f"cedar forbid {names} ({self.origin})"
        if decision == "Deny":
            return "deny", f"cedar: no permit policy matched ({self.origin} is an allow-list)"
        return "deny", f"cedar: no decision ({decision}), so denied"

    def _asks(self, pid: str) -> bool:
        said = self.described.get(pid, {}).get("annotations", {}).get(ASK_ANNOTATION)
        return bool(said == "ask")

    def label(self, pid: str) -> str:
        """A policy's name in messages: its `@id` annotation, else Cedar's `policyN`."""
        return _label(pid, self.described.get(pid, {}))


def _label(pid: str, body: Mapping[str, Any]) -> str:
    named = body.get("annotations", {}).get("id")
    return repr(named) if named else pid


def _cedarpy(origin: str) -> Any:
    try:
        import cedarpy
    except ImportError as exc:
        raise PolicyError(
            f"{origin}: a Cedar permission source needs cedarpy: pip install 'agentfsm[cedar]'"
        ) from exc
    return cedarpy


def statements(text: str) -> list[tuple[int, str]]:
    """`text` split at the `;` that end Cedar policies, each with its first line.

    Strings ("...", with backslash escapes) and `//` comments are skipped, so a `;`
    inside them does not split. Cedar's parse errors carry no position: parsing each
    statement alone finds the one that fails.
    """
    found: list[tuple[int, str]] = []
    start, line, i, quoted = 0, 1, 0, False
    first_line: int | None = None
    while i < len(text):
        char = text[i]
        if quoted:
            if char == "\\":
                line += text[i + 1 : i + 2] == "\n"
                i += 2
                continue
            quoted = char != '"'
            line += char == "\n"
            i += 1
            continue
        if char == "/" and text.startswith("//", i):
            end = text.find("\n", i)
            i = len(text) if end == -1 else end
            continue
        if char == "\n":
            line += 1
        elif not char.isspace() and first_line is None:
            first_line = line
        if char == '"':
            quoted = True
        elif char == ";":
            found.append((first_line or line, text[start : i + 1]))
            start, first_line = i + 1, None
        i += 1
    if first_line is not None:
        found.append((first_line, text[start:]))
    return found


def _parse_error(text: str, origin: str, message: str) -> str:
    """The parse error naming `origin` and the line of the first policy that fails."""
    import cedarpy

    for line, statement in statements(text):
        try:
            cedarpy.PolicySet.from_str(statement)
        except ValueError as exc:
            return f"{origin}:{line}: Cedar policy does not parse: {exc}"
    return f"{origin}: Cedar policies do not parse: {message}"
