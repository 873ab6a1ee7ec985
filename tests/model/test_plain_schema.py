"""The quick check of plain tool schemas never accepts what jsonschema refuses (issue 31, 4)."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import agentfsm as af
from agentfsm._model._plain_schema import fits
from agentfsm._model.tools import _validator_class

_NAMES = st.sampled_from(["a", "b", "c"])
_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5),
    st.floats(-5, 5),
    st.just(math.nan),
    st.text(max_size=3),
)
_TYPE_NAMES = st.sampled_from(["object", "array", "string", "integer", "number", "boolean", "null"])


def _schemas(depth: int = 0) -> st.SearchStrategy[dict[str, Any]]:
    """Schemas of the plain keywords, nested a little, with the odd unreadable keyword."""
    inner = st.deferred(lambda: _schemas(depth + 1)) if depth < 2 else st.just({})
    keywords = {
        "type": st.one_of(_TYPE_NAMES, st.lists(_TYPE_NAMES, min_size=1, max_size=3)),
        "properties": st.dictionaries(_NAMES, inner, max_size=3),
        "required": st.lists(_NAMES, max_size=3, unique=True),
        "additionalProperties": st.booleans(),
        "items": inner,
        "enum": st.lists(_SCALARS, min_size=1, max_size=4),
        "const": _SCALARS,
        "minimum": st.integers(-3, 3) | st.floats(-3, 3),
        "exclusiveMaximum": st.integers(-3, 3),
        "minLength": st.integers(0, 3),
        "maxItems": st.integers(0, 3),
        "description": st.text(max_size=5),
        "format": st.just("email"),
        "pattern": st.just("^a"),  # not read: no quick check for this schema
    }
    return st.fixed_dictionaries({}, optional=keywords)


_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_NAMES, inner, max_size=3),
    max_leaves=8,
)


def _jsonschema_accepts(schema: dict[str, Any], value: Any) -> bool:
    return bool(_validator_class(schema)(schema).is_valid(value))


@given(schema=_schemas(), value=_VALUES)
def test_the_quick_check_never_accepts_what_jsonschema_refuses(
    schema: dict[str, Any], value: Any
) -> None:
    """For any plain schema and any JSON value: the quick check accepting means jsonschema
    (with integers read strictly) accepts; and it agrees with jsonschema wherever no enum,
    const or NaN makes it stricter on purpose."""
    quick = fits(schema)
    if quick is None:
        assert "pattern" in repr(schema)  # only the unread keyword disables it here
        return
    accepted = _jsonschema_accepts(schema, value)
    if quick(value):
        assert accepted, f"quick accepted what jsonschema refuses: {schema!r} {value!r}"
    elif "enum" not in repr(schema) and "const" not in repr(schema) and "nan" not in repr(value):
        assert not accepted, f"quick refused what jsonschema accepts: {schema!r} {value!r}"


@pytest.mark.parametrize(
    "schema",
    [
        {"$schema": "http://json-schema.org/draft-04/schema#", "type": "object"},
        {"type": "object", "patternProperties": {"^x": {}}},
        {"type": "object", "additionalProperties": {"type": "string"}},
        {"enum": [{"a": 1}]},  # Python's == takes True for 1 inside containers
        {"items": [{"type": "string"}]},  # an old draft's tuple of item schemas
        {"exclusiveMinimum": True},  # draft 4's boolean
        {"required": "a"},
        {"type": "integer", "$ref": "#/x"},
    ],
)
def test_a_schema_it_does_not_read_gets_no_quick_check(schema: dict[str, Any]) -> None:
    assert fits(schema) is None


def test_a_declared_tool_still_words_its_errors_and_reads_integers_strictly() -> None:
    """The quick path changes no answer: a bad call still gets jsonschema's words."""
    spec = af.ToolSpec(
        name="echo",
        parameters={
            "type": "object",
            "properties": {"i": {"type": "integer", "minimum": 0}},
            "required": ["i"],
            "additionalProperties": False,
        },
    )
    assert spec.validate_arguments({"i": 3}) is None
    assert spec.validate_arguments({"i": 1.0}) is not None
    assert spec.validate_arguments({"i": True}) is not None
    assert spec.validate_arguments({"i": -1}) == "i: -1 is less than the minimum of 0"
    assert "missing required argument 'i'" in (spec.validate_arguments({}) or "")
    assert spec.validate_arguments({"i": 1, "j": 2}) is not None
