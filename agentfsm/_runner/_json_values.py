"""Where a value is not JSON data, by path: what a caller gives to be sent or stored as JSON.

A run's messages go to the model as JSON, and a durable run's to the database as JSON
text that the drivers encode as UTF-8. A value JSON cannot hold (bytes, a set, an object),
a value it would turn into another (a key that is not a str comes back as a str; NaN is
not JSON), a value nested past `MAX_DEPTH` or containing itself, and text UTF-8 cannot
encode (a lone surrogate) are found here with their path (`messages[0]['content'][2]`),
so the entry point that was given them can refuse them, naming where they are.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any

from agentfsm._model.limits import MAX_DEPTH

__all__ = ["shown", "surrogate_at", "unsendable"]

_LONGEST_PATH = 160
"""Characters of a value's path shown in an error; a longer one is cut in the middle."""
_NEVER_JSON = (bytes, bytearray, memoryview, set, frozenset, complex)
"""Types no JSON encoder writes (an SDK's included)."""


def unsendable(value: object, field: str, *, objects: bool = False) -> tuple[str, str] | None:
    """(path, what is wrong) for the first part of `value` that is not JSON data, or None.

    `field` names `value` (`messages`); a path longer than `_LONGEST_PATH` is cut in its
    middle. `objects`: let values of other types through (pydantic models an SDK encodes),
    refusing only what no encoder writes.
    """
    problem = _first_problem(value, field, 0, set(), objects)
    if problem is None:
        return None
    path, what = problem
    if len(path) > _LONGEST_PATH:  # a path through a hundred levels
        path = f"{path[: _LONGEST_PATH // 2]}...{path[-_LONGEST_PATH // 4 :]}"
    return path, what


def _first_problem(
    value: object, path: str, depth: int, open_: set[int], objects: bool
) -> tuple[str, str] | None:
    """(path, what is wrong) for the first part of `value` that is not storable JSON, or None.

    `open_` holds the ids of the containers being walked (the path from the top): one of
    them met again is a loop. The depth bound keeps the recursion far below Python's limit.
    """
    if not isinstance(value, dict | list | tuple):
        what = _scalar_problem(value, objects)
        return None if what is None else (path, what)
    if depth >= MAX_DEPTH:
        return path, f"nests deeper than {MAX_DEPTH} levels"
    if id(value) in open_:
        return path, "contains itself (a loop), which JSON cannot hold"
    open_.add(id(value))
    try:
        for item_path, item in _parts(value, path):
            if item_path is None:  # a key JSON would change
                return f"{path}[{shown(item)}]", _bad_key(item)
            problem = _first_problem(item, item_path, depth + 1, open_, objects)
            if problem is not None:
                return problem
        return None
    finally:
        open_.discard(id(value))


def _parts(
    value: dict[Any, Any] | list[Any] | tuple[Any, ...], path: str
) -> Iterator[tuple[str | None, Any]]:
    """Each part of a container with its path: a dict's keys then values, a list's items.

    A key that is not a str comes with the path None (the caller names it)."""
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                yield None, key
                return
            yield f"{path} key {shown(key)}", key
            yield f"{path}[{key!r}]", item
    else:
        for index, item in enumerate(value):
            yield f"{path}[{index}]", item


def _bad_key(key: object) -> str:
    # json.dumps writes an int, float, bool or None key as text: read back, it is another key.
    return (
        f"is a key of type {type(key).__name__}: JSON keys are str, and json would write "
        "this one as text, so the value read back would differ from the one given"
    )


def _scalar_problem(value: object, objects: bool) -> str | None:
    """What is wrong with a value that is not a container, or None.

    With `objects`, a value of another type passes unless no JSON encoder takes it (bytes,
    sets, complex numbers): the encoder in use (an SDK's) may know how to send it."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, str):
        bad = surrogate_at(value)
        if bad is None:
            return None
        return f"is text with a lone surrogate at index {bad}, which UTF-8 cannot encode"
    if isinstance(value, int):
        try:
            int.__repr__(value)
        except ValueError:  # past Python's int-to-text limit, which json hits as it writes
            return "is an int too long to write as text (past sys.get_int_max_str_digits())"
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else f"is {value!r}, which JSON cannot hold"
    if objects and not isinstance(value, _NEVER_JSON):
        return None
    kind = "a mapping of type" if isinstance(value, Mapping) else "a value of type"
    return f"is {kind} {type(value).__name__}, which JSON cannot hold"


def surrogate_at(text: str) -> int | None:
    """The index of the first lone surrogate in `text`, or None."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return exc.start
    return None


def shown(value: object) -> str:
    """A short, safe description of `value` for a message: its repr cut, or its type."""
    try:
        text = repr(value)
    except Exception:  # a repr that raises still gets named by its type
        return f"a {type(value).__name__}"
    return text if len(text) <= 60 else f"a {type(value).__name__}"
