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

from agentfsm._runner._json_values import shown, surrogate_at, unsendable
from agentfsm.exceptions import AgentFSMError, DataError, InvalidInputError

__all__ = ["check_stored", "check_text"]


def check_text(
    value: object, where: str, field: str, error: type[AgentFSMError] = InvalidInputError
) -> str:
    """`value` as a non-empty str that UTF-8 encodes; else `error` naming `where` and `field`.

    For the names and ids that go to the database as column values (run ids, agent
    names, executor ids): the driver encodes them, and a lone surrogate would fail there
    with the driver's own error, after the call had begun.
    """
    if not isinstance(value, str) or not value:
        raise error(f"{where}: {field} must be a non-empty str, not {shown(value)}")
    bad = surrogate_at(value)
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
    problem = unsendable(value, field)
    if problem is None:
        return
    path, what = problem
    raise DataError(
        f"{where}: {path} {what}; the durable database stores JSON text only, so nothing "
        "was recorded",
        problems=[(path, what)],
    )
