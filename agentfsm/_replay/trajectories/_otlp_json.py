"""The OTLP JSON encoding: attribute lists, `AnyValue`s and ids, read into plain values.

OTLP JSON (the OpenTelemetry protocol's JSON mapping) writes an attribute as
`{"key": ..., "value": {"stringValue" | "intValue" | ... : ...}}`, an int64 as a JSON string,
and ids as hex; protobuf's own JSON mapping (`MessageToDict`) writes ids as base64 and enums by
name. Both are read. Anything else raises `BadSpanError`, which the reader locates.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["BadSpanError", "any_value", "attributes", "read_int", "span_id"]

_HEX = re.compile(r"[0-9a-fA-F]+")


class BadSpanError(Exception):
    """A span or attribute the reader cannot use; the reader turns it into a located TraceError."""


def attributes(raw: Any) -> dict[str, Any]:
    """An OTLP attribute list (`[{key, value: AnyValue}]`) as a plain dict."""
    if raw is None:
        return {}
    if not isinstance(raw, list):
        raise BadSpanError(f"'attributes' must be a list, not {type(raw).__name__}")
    out: dict[str, Any] = {}
    for n, item in enumerate(raw):
        if not isinstance(item, Mapping) or not isinstance(item.get("key"), str):
            raise BadSpanError(f"attribute {n} is not {{'key': <string>, 'value': <AnyValue>}}")
        out[item["key"]] = any_value(item.get("value"), item["key"])
    return out


def any_value(value: Any, key: str) -> Any:
    """One OTLP `AnyValue` as a Python value (`intValue` may be a JSON string, as int64 is)."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise BadSpanError(f"attribute {key!r}: the value must be an AnyValue object")
    for kind, read in _VALUE_KINDS.items():
        if kind in value:
            try:
                return read(value[kind], key)
            except (TypeError, ValueError) as exc:
                raise BadSpanError(
                    f"attribute {key!r}: {kind} {value[kind]!r:.60} ({exc})"
                ) from exc
    if not value:
        return None
    raise BadSpanError(f"attribute {key!r}: unknown value kind {sorted(value)[0]!r}")


def read_int(raw: Any, key: str) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int | str):
        raise TypeError("not an integer")
    return int(raw)


def _array(raw: Any, key: str) -> list[Any]:
    values = raw.get("values", []) if isinstance(raw, Mapping) else None
    if not isinstance(values, list):
        raise TypeError("not {'values': [...]}")
    return [any_value(v, key) for v in values]


def _kvlist(raw: Any, key: str) -> dict[str, Any]:
    values = raw.get("values", []) if isinstance(raw, Mapping) else None
    if not isinstance(values, list):
        raise TypeError("not {'values': [...]}")
    return attributes(values)


def _string(raw: Any, key: str) -> str:
    if not isinstance(raw, str):
        raise TypeError("not a string")
    return raw


def _bool(raw: Any, key: str) -> bool:
    if not isinstance(raw, bool):
        raise TypeError("not a boolean")
    return raw


def _double(raw: Any, key: str) -> float:
    if isinstance(raw, bool) or not isinstance(raw, int | float | str):
        raise TypeError("not a number")
    return float(raw)


_VALUE_KINDS = {
    "stringValue": _string,
    "intValue": read_int,
    "boolValue": _bool,
    "doubleValue": _double,
    "arrayValue": _array,
    "kvlistValue": _kvlist,
    "bytesValue": _string,
}


def span_id(raw: Any, size: int, what: str) -> str:
    """A trace or span id as lowercase hex: the OTLP JSON spec writes hex; protobuf's own JSON
    mapping (`MessageToDict`) writes the bytes as base64, so both are read."""
    if not isinstance(raw, str) or not raw:
        raise BadSpanError(f"'{what}' is missing")
    if len(raw) == 2 * size and _HEX.fullmatch(raw):
        return raw.lower()
    try:
        decoded = base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError):
        decoded = b""
    if len(decoded) != size:
        raise BadSpanError(
            f"'{what}' {raw!r:.60} is neither {2 * size} hex digits nor {size} bytes"
        )
    return decoded.hex()
