"""A quick "these arguments fit" for the plain schemas most tools declare.

`jsonschema` checks any schema, and pays for that generality on every call: a descent per
keyword, a resolver, an error iterator, tens of microseconds for `{"i": 3}`. Most tool
schemas use a handful of keywords: an object with typed properties, `required`,
`additionalProperties: false`, arrays of such, bounds, enums. For a schema made only of
those, `fits` builds a checker from plain closures once; the Controller asks it first.

It answers only "fits": False means "not sure", and `jsonschema` then decides and words
the error. So the checker must never accept what `jsonschema` (with integers read
strictly) refuses; it may refuse what `jsonschema` would accept (`1.0` in an enum of `1`),
which costs a slower call, never a wrong one. A schema with any other keyword, a `$schema`
naming a draft, or a keyword of an unexpected type gets no checker at all.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["Check", "fits"]

Check = Callable[[Any], bool]

_ANNOTATIONS = frozenset(
    {"title", "description", "default", "examples", "deprecated", "$comment", "format"}
)
"""Keywords that say nothing about validity (`format` is not asserted: the validators are
made without a format checker)."""
_TYPES: dict[str, Check] = {
    "object": lambda v: type(v) is dict,
    "array": lambda v: type(v) is list,
    "string": lambda v: type(v) is str,
    "integer": lambda v: type(v) is int,  # strictly: not 1.0, not True
    "number": lambda v: type(v) is int or type(v) is float,
    "boolean": lambda v: type(v) is bool,
    "null": lambda v: v is None,
}
_BOUNDS: dict[str, Callable[[float, float], bool]] = {
    "minimum": lambda v, b: v >= b,
    "maximum": lambda v, b: v <= b,
    "exclusiveMinimum": lambda v, b: v > b,
    "exclusiveMaximum": lambda v, b: v < b,
}
_LENGTHS: dict[str, tuple[type[str] | type[list[Any]], Callable[[int, int], bool]]] = {
    "minLength": (str, lambda n, b: n >= b),  # in code points, as Python's len counts
    "maxLength": (str, lambda n, b: n <= b),
    "minItems": (list, lambda n, b: n >= b),
    "maxItems": (list, lambda n, b: n <= b),
}


_SCALARS = (str, int, float, bool, type(None))


class _NotPlainError(Exception):
    """The schema uses something the quick check does not read."""


def fits(schema: Any) -> Check | None:
    """A check that says True only for values `schema` accepts; None for a schema it cannot
    read (then `jsonschema` alone decides)."""
    if not isinstance(schema, Mapping) or "$schema" in schema:
        return None
    try:
        return _compile(schema, depth=0)
    except _NotPlainError:
        return None


def _compile(schema: Any, depth: int) -> Check:
    if schema is True:
        return lambda v: True
    if not isinstance(schema, Mapping) or depth > 16:
        raise _NotPlainError
    checks = [
        _keyword(key, value, schema, depth)
        for key, value in schema.items()
        if key not in _ANNOTATIONS
    ]
    if len(checks) == 1:
        return checks[0]

    def every(v: Any) -> bool:
        # Loops, not all(generator): the check runs on every call's arguments, and a
        # generator costs more to make than these few keywords cost to test.
        for check in checks:  # noqa: SIM110
            if not check(v):
                return False
        return True

    return every


def _keyword(key: str, value: Any, schema: Mapping[str, Any], depth: int) -> Check:
    """The check of one keyword of `schema`."""
    if key in _BOUNDS:
        return _bound(_BOUNDS[key], value)
    if key in _LENGTHS:
        return _length(*_LENGTHS[key], value)
    if key == "type":
        return _type(value)
    if key == "properties":
        return _properties(value, depth)
    if key == "required":
        return _required(value)
    if key == "additionalProperties":
        return _closed(value, schema.get("properties", {}))
    if key == "items":
        return _items(value, depth)
    if key in ("enum", "const"):
        return _one_of_values(value if key == "enum" else [value])
    raise _NotPlainError


def _type(value: Any) -> Check:
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, list) or not names or any(n not in _TYPES for n in names):
        raise _NotPlainError
    tests = [_TYPES[n] for n in names]
    if len(tests) == 1:
        return tests[0]

    def any_type(v: Any) -> bool:
        for test in tests:  # noqa: SIM110  # a loop, as in `every` above
            if test(v):
                return True
        return False

    return any_type


def _properties(value: Any, depth: int) -> Check:
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise _NotPlainError
    inner = {name: _compile(sub, depth + 1) for name, sub in value.items()}

    def check(v: Any) -> bool:
        if type(v) is not dict:
            return True  # `properties` applies to objects only
        for key, item in v.items():
            each = inner.get(key)
            if each is not None and not each(item):
                return False
        return True

    return check


def _required(value: Any) -> Check:
    if not isinstance(value, list) or not all(isinstance(n, str) for n in value):
        raise _NotPlainError
    names = frozenset(value)
    return lambda v: type(v) is not dict or names.issubset(v)


def _closed(value: Any, properties: Any) -> Check:
    if value is True:
        return lambda v: True
    if value is not False or not isinstance(properties, Mapping):
        raise _NotPlainError  # a schema for the others: not read here
    known = frozenset(properties)
    return lambda v: type(v) is not dict or known.issuperset(v)


def _items(value: Any, depth: int) -> Check:
    each = _compile(value, depth + 1)  # a list of schemas (old drafts' tuples) is not plain
    return lambda v: type(v) is not list or all(each(item) for item in v)


def _one_of_values(values: Any) -> Check:
    # Scalars only: Python's == inside containers takes True for 1, which JSON Schema does not.
    if not isinstance(values, list) or not all(type(a) in _SCALARS for a in values):
        raise _NotPlainError
    # The same type and an equal value: stricter than JSON Schema's equality (which takes
    # 1.0 for 1), so a value this refuses goes to jsonschema, never the other way round.
    allowed = [(type(a), a) for a in values]
    return lambda v: any(type(v) is kind and v == a for kind, a in allowed)


def _bound(compare: Callable[[float, float], bool], bound: Any) -> Check:
    if type(bound) not in (int, float):
        raise _NotPlainError  # draft 4's boolean exclusiveMinimum, say

    def check(v: Any) -> bool:
        if type(v) is not int and type(v) is not float:
            return True  # bounds apply to numbers only
        return compare(v, bound)

    return check


def _length(
    kind: type[str] | type[list[Any]], compare: Callable[[int, int], bool], bound: Any
) -> Check:
    if type(bound) is not int or bound < 0:
        raise _NotPlainError
    return lambda v: type(v) is not kind or compare(len(v), bound)
