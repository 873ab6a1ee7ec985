"""What a caller gives the durable database, checked before anything is written.

The database stores JSON text (`_serializer`), and the drivers store that text as
UTF-8. A value JSON cannot hold (bytes, a set, an object), a value it would store as
something else (a dict key that is not a str comes back as a str; NaN is not JSON),
a value nested past `MAX_DEPTH` or looping back into itself, and text UTF-8 cannot
encode (a lone surrogate) are refused at the call that gave them, with a `DataError`
naming where in the argument the value is and what it is. The checks run before any
database call, so a refused call records nothing.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any

from agentfsm._model.limits import MAX_DEPTH
from agentfsm.exceptions import AgentFSMError, DataError, InvalidInputError

__all__ = ["check_stored", "check_text"]

_LONGEST_PATH = 160
"""Characters of a value's path shown in an error; a longer one is cut in the middle."""


def check_text(
    value: object, where: str, field: str, error: type[AgentFSMError] = InvalidInputError
) -> str:
    """`value` as a non-empty str that UTF-8 encodes; else `error` naming `where` and `field`.

    For the names and ids that go to the database as column values (run ids, agent
    names, executor ids): the driver encodes them, and a lone surrogate would fail there
    with the driver's own error, after the call had begun.
    """
    if not isinstance(value, str) or not value:
        raise error(f"{where}: {field} must be a non-empty str, not {_shown(value)}")
    bad = _surrogate(value)
    if bad is not None:
        raise error(
            f"{where}: {field} holds a lone surrogate at index {bad} ({value[bad]!r}), "
            "which UTF-8 cannot encode; nothing was recorded"
        )
    return value


def check_stored(value: object, where: str, field: str) -> None:
    """Raise a DataError at the first part of `value` the database would not store as given.

    `field` names `value` in the message (`messages`); the part's path follows it
    (`messages[0]['content'][2]`).
    """
    problem = _first_problem(value, field, 0, set())
    if problem is None:
        return
    path, what = problem
    if len(path) > _LONGEST_PATH:  # a path through a hundred levels is cut in its middle
        path = f"{path[: _LONGEST_PATH // 2]}...{path[-_LONGEST_PATH // 4 :]}"
    raise DataError(
        f"{where}: {path} {what}; the durable database stores JSON text only, so nothing "
        "was recorded",
        problems=[(path, what)],
    )


def _first_problem(value: object, path: str, depth: int, open_: set[int]) -> tuple[str, str] | None:
    """(path, what is wrong) for the first part of `value` that is not storable JSON, or None.

    `open_` holds the ids of the containers being walked (the path from the top): one of
    them met again is a loop. The depth bound keeps the recursion far below Python's limit.
    """
    if not isinstance(value, dict | list | tuple):
        what = _scalar_problem(value)
        return None if what is None else (path, what)
    if depth >= MAX_DEPTH:
        return path, f"nests deeper than {MAX_DEPTH} levels"
    if id(value) in open_:
        return path, "contains itself (a loop), which JSON cannot hold"
    open_.add(id(value))
    try:
        for item_path, item in _parts(value, path):
            if item_path is None:  # a key JSON would change
                return f"{path}[{_shown(item)}]", _bad_key(item)
            problem = _first_problem(item, item_path, depth + 1, open_)
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
            yield f"{path} key {_shown(key)}", key
            yield f"{path}[{key!r}]", item
    else:
        for index, item in enumerate(value):
            yield f"{path}[{index}]", item


def _bad_key(key: object) -> str:
    # json.dumps writes an int, float, bool or None key as text: read back, it is another key.
    return (
        f"is a {type(key).__name__} key: JSON keys are str, and json would write this one "
        "as text, so the value read back would differ from the one given"
    )


def _scalar_problem(value: object) -> str | None:
    """What is wrong with a value that is not a container, or None."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, str):
        bad = _surrogate(value)
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
    kind = "a mapping of type" if isinstance(value, Mapping) else "a value of type"
    return f"is {kind} {type(value).__name__}, which JSON cannot hold"


def _surrogate(text: str) -> int | None:
    """The index of the first lone surrogate in `text`, or None."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return exc.start
    return None


def _shown(value: object) -> str:
    """A short, safe description of `value` for a message: its repr cut, or its type."""
    try:
        text = repr(value)
    except Exception:  # a repr that raises still gets named by its type
        return f"a {type(value).__name__}"
    return text if len(text) <= 60 else f"a {type(value).__name__}"
