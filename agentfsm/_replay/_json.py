"""JSON text to the values `json.loads` gives, decoded by msgspec first because it is faster.

Replay spends much of its time parsing trajectory and trace files, and msgspec's
decoder does that work faster than `json` (bench/RESULTS-hardening.md). Its results are
exactly `json.loads`'s for every text it accepts (objects become dicts with the last
of duplicate keys winning, integers of any size stay `int`, floats round the
same way). Every text it refuses goes to `json.loads` itself, so a text only
`json` reads (NaN, Infinity, a lone surrogate, a byte-order mark, UTF-16 or
UTF-32 bytes, a number past a float's range) gives `json`'s value, and a bad
text fails with `json`'s own `JSONDecodeError`, line and column included.

Depth: both decoders count each nested level against Python's recursion limit
and raise `RecursionError` past it; a text msgspec refuses for depth goes to
`json.loads` like any other, and the readers turn a `RecursionError` into a
`TraceError` naming the file and line.

Only the replay readers import this module (never the per-step Controller path).
"""

from __future__ import annotations

import json
from typing import Any

import msgspec

__all__ = ["loads"]

_decode = msgspec.json.decode


def loads(data: bytes | str) -> Any:
    """Parse one JSON text exactly as `json.loads(data)` does, only faster.

    Raises:
        json.JSONDecodeError: the text is not JSON (`json`'s own error).
        UnicodeDecodeError: bytes that are not text in any encoding `json` detects.
        RecursionError: the text nests deeper than Python's recursion limit allows.
    """
    try:
        return _decode(data)
    except (ValueError, RecursionError):  # msgspec.DecodeError is a ValueError
        return json.loads(data)
