"""A declared schema is checked whole: no keyword of it is skipped, so no call runs that breaks it.

The validate state used to read only `type`, `properties`, `required`,
`additionalProperties` and `enum`: a call breaking `minimum`, `items`,
`pattern`, `anyOf` or a list of types ran as if it fitted. Schemas that use
only those keywords are still checked in-house (cheap, on every call); any
other keyword goes to `jsonschema`. Both must say what `jsonschema` says.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator, validators

import agentfsm as af
from agentfsm import ToolSpec
from agentfsm.exceptions import ToolDefinitionError

_STRICT = validators.extend(  # type: ignore[no-untyped-call]
    Draft202012Validator,
    type_checker=Draft202012Validator.TYPE_CHECKER.redefine(
        "integer", lambda _c, value: type(value) is int
    ),
)
"""The reference: JSON Schema 2020-12, where an integer is an int (agentfsm's reading)."""

_names = st.sampled_from(["a", "b", "c"])
_TYPES = ["string", "integer", "number", "boolean", "array", "object", "null"]
_scalars = st.sampled_from([None, True, False, 0, 1, 1.0, 0.0, -1, 2.5, "", "a", "1"])
"""A small pool, so that enums and arguments often hold values Python confuses."""
_json = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_names, inner, max_size=2),
    max_leaves=6,
)


@st.composite
def plain_schemas(draw: st.DrawFn, depth: int = 0) -> dict[str, Any]:
    """Object schemas made only of the keywords the in-house check reads."""
    props: dict[str, Any] = {}
    for name in draw(st.lists(_names, unique=True, max_size=3)):
        sub: dict[str, Any] = {}
        kind = draw(st.sampled_from([*_TYPES, None, None, None]))
        if kind == "object" and depth < 2:
            sub = draw(plain_schemas(depth + 1))
        elif kind is not None:
            sub["type"] = kind
        if draw(st.booleans()):
            sub["enum"] = draw(st.lists(_scalars | _json, min_size=1, max_size=3))
        if draw(st.booleans()):
            sub["description"] = "annotations assert nothing"
        props[name] = sub
    schema: dict[str, Any] = {"type": "object", "properties": props}
    if draw(st.booleans()) and props:
        schema["required"] = draw(st.lists(st.sampled_from(sorted(props)), unique=True))
    if draw(st.booleans()):
        schema["additionalProperties"] = draw(st.booleans())
    return schema


_FULL = [
    {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1, "maximum": 3}}},
    {"type": "object", "properties": {"tags": {"type": "array", "items": {"type": "string"}}}},
    {"type": "object", "properties": {"mode": {"type": ["string", "null"]}}},
    {"type": "object", "properties": {"path": {"type": "string", "pattern": "^/tmp/"}}},
    {"type": "object", "properties": {"x": {"anyOf": [{"type": "integer"}, {"const": "all"}]}}},
    {
        "type": "object",
        "properties": {"point": {"$ref": "#/$defs/point"}},
        "$defs": {"point": {"type": "object", "required": ["x"], "properties": {"x": {}}}},
    },
    {"type": "object", "properties": {"s": {"type": "string", "maxLength": 2}}, "minProperties": 1},
]
"""Schemas with keywords beyond the plain ones, as real tool declarations write them."""


def _arguments(schema: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    """Arguments for an object schema: each property maybe, its value often one of its enum's
    or a value Python takes for one (True for 1), and sometimes an extra key."""
    optional = {name: _value_for(sub) for name, sub in schema.get("properties", {}).items()}
    return st.fixed_dictionaries({}, optional={**optional, "other": _json})


def _value_for(schema: Any) -> st.SearchStrategy[Any]:
    if not isinstance(schema, dict):
        return _json
    near = [
        twin
        for value in schema.get("enum", [])
        if isinstance(value, bool | int | float | str)
        for twin in _twins(value)
    ]
    choices = [_json, _scalars]
    if near:
        choices.append(st.sampled_from(near))
        choices.append(st.sampled_from(near))
    if "properties" in schema:
        choices.append(_arguments(schema))
    return st.one_of(choices)


def _twins(value: Any) -> tuple[Any, ...]:
    """`value` and what Python's == calls equal to it but JSON does not (True, 1, 1.0)."""
    if not isinstance(value, str) and value in (0, 1):
        return (bool(value), int(value), float(value))
    return (value,)


@st.composite
def plain_cases(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any]]:
    schema = draw(plain_schemas())
    return schema, draw(_arguments(schema))


def _one_property(sub: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": {"n": sub}}


class TestSchemasAreCheckedWhole:
    @settings(deadline=None)
    @given(case=plain_cases())
    # The confusions Python's own == and isinstance make, each named once:
    @example(case=(_one_property({"enum": [1]}), {"n": True}))
    @example(case=(_one_property({"type": "boolean", "enum": [0]}), {"n": False}))
    @example(case=(_one_property({"type": "integer"}), {"n": True}))
    @example(case=(_one_property({"type": "integer"}), {"n": 1.0}))
    @example(case=(_one_property({"type": "number"}), {"n": False}))
    def test_plain_schemas_are_read_as_jsonschema_reads_them(
        self, case: tuple[dict[str, Any], dict[str, Any]]
    ) -> None:
        """On schemas of the common keywords, the verdict is the strict-integer reference's."""
        schema, arguments = case
        tool = ToolSpec.from_declaration({"name": "f", "parameters": schema})
        verdict = tool.validate_arguments(arguments)
        assert (verdict is None) == _STRICT(schema).is_valid(arguments), verdict

    @pytest.mark.parametrize("schema", _FULL, ids=range(len(_FULL)))
    @settings(deadline=None)
    @given(data=st.data())
    def test_every_other_keyword_is_checked(self, schema: dict[str, Any], data: Any) -> None:
        """Schemas with items, minimum, pattern, anyOf, $ref, ... agree with jsonschema too."""
        arguments = data.draw(_arguments(schema))
        tool = ToolSpec.from_declaration({"name": "f", "parameters": schema})
        verdict = tool.validate_arguments(arguments)
        assert (verdict is None) == _STRICT(schema).is_valid(arguments), verdict

    @pytest.mark.parametrize(
        ("schema", "arguments", "words"),
        [
            (_FULL[0], {"n": 0}, "n: 0 is less than the minimum of 1"),
            (_FULL[1], {"tags": ["a", 2]}, "tags.1: expected string, got int"),
            (_FULL[2], {"mode": 5}, "mode: expected string or null, got int"),
            (_FULL[3], {"path": "/etc/passwd"}, "path: '/etc/passwd' does not match"),
            (_FULL[5], {"point": {}}, "point: missing required argument 'x'"),
        ],
    )
    def test_a_call_that_breaks_its_schema_never_runs(
        self, schema: dict[str, Any], arguments: dict[str, Any], words: str
    ) -> None:
        """These calls used to be executed: each keyword was skipped."""
        ctl = af.Controller(tools=[{"name": "f", "parameters": schema}])
        call = af.ToolCall(id="c1", name="f", arguments=arguments)
        decision = ctl.on_model_output(af.ModelTurn(tool_calls=[call]))
        assert decision.action != af.Action.EXECUTE_TOOLS
        assert decision.results[0].is_error
        assert words in decision.results[0].content

    def test_true_is_not_one(self) -> None:
        """Python says True == 1; JSON does not: an enum of [1] refuses true."""
        tool = ToolSpec.from_declaration(
            {"name": "f", "parameters": {"type": "object", "properties": {"n": {"enum": [1]}}}}
        )
        assert tool.validate_arguments({"n": 1}) is None
        assert tool.validate_arguments({"n": True}) == "n: True is not one of [1]"

    def test_a_reference_to_nowhere_refuses_the_call(self) -> None:
        """A schema the validator cannot follow denies (fails closed), naming why."""
        schema = {"type": "object", "properties": {"n": {"$ref": "#/$defs/missing"}}}
        tool = ToolSpec.from_declaration({"name": "f", "parameters": schema})
        assert tool.validate_arguments({}) is None
        verdict = tool.validate_arguments({"n": 1})
        assert verdict is not None
        assert verdict.startswith("the tool's schema cannot check them")


class TestDeclarations:
    @pytest.mark.parametrize(
        ("schema", "words"),
        [
            ({"type": "objct"}, "parameters.type is 'objct'"),
            (
                {"type": "object", "properties": {"n": {"minimum": "x"}}},
                "parameters.properties.n.minimum: 'x' is not of type 'number'",
            ),
            ({"type": "object", "properties": {"n": {"type": ["string", 3]}}}, "parameters"),
        ],
    )
    def test_a_schema_that_is_not_json_schema(self, schema: dict[str, Any], words: str) -> None:
        """Declared by spec or built directly, a broken schema is a ToolDefinitionError."""
        with pytest.raises(ToolDefinitionError, match="not a valid JSON schema") as caught:
            ToolSpec.from_declaration({"name": "f", "parameters": schema})
        assert words in caught.value.message
        with pytest.raises(ToolDefinitionError, match="not a valid JSON schema"):
            ToolSpec(name="f", parameters=schema)

    def test_a_schema_nested_past_the_recursion_limit(self) -> None:
        """jsonschema's own check recurses; 3,000 levels is a ToolDefinitionError, not a
        RecursionError."""
        schema: dict[str, Any] = {"type": "object"}
        inner = schema
        for _ in range(3000):
            inner["properties"] = {"a": {"type": "object"}}
            inner = inner["properties"]["a"]
        with pytest.raises(ToolDefinitionError, match="nests too deep to be checked"):
            ToolSpec.from_declaration({"name": "f", "parameters": schema})


class TestCompiledOnce:
    """A schema is compiled once per content, not once per Controller (issue 31, item 4).

    Every Controller builds its own ToolSpecs and pydantic copies the schema into each, so a
    cache keyed by the object compiled the same schema again for every run: milliseconds per
    Controller with a declared tool.
    """

    def test_equal_schemas_of_two_controllers_share_one_validator(self) -> None:
        from agentfsm._model import tools as tools_module

        schema = {
            "type": "object",
            "properties": {"n": {"type": "integer", "minimum": 0}},
            "required": ["n"],
        }
        first = ToolSpec.from_declaration({"name": "count", "parameters": schema})
        second = ToolSpec.from_declaration({"name": "count", "parameters": dict(schema)})
        assert first.parameters is not second.parameters  # pydantic copied each
        assert first.parameters is not None
        assert second.parameters is not None
        compiled = tools_module._validator(first.parameters)
        assert tools_module._validator(second.parameters) is compiled
        assert first.validate_arguments({"n": -1}) == second.validate_arguments({"n": -1})
        assert first.validate_arguments({"n": 1}) is None

    def test_a_schema_that_differs_gets_its_own_validator(self) -> None:
        from agentfsm._model import tools as tools_module

        low = ToolSpec.from_declaration(
            {"name": "t", "parameters": {"type": "object", "properties": {"n": {"minimum": 0}}}}
        )
        high = ToolSpec.from_declaration(
            {"name": "t", "parameters": {"type": "object", "properties": {"n": {"minimum": 5}}}}
        )
        assert low.parameters is not None
        assert high.parameters is not None
        assert tools_module._validator(low.parameters) is not tools_module._validator(
            high.parameters
        )
        assert low.validate_arguments({"n": 3}) is None
        assert high.validate_arguments({"n": 3}) is not None
