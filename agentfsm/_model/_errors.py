"""agentfsm's own errors, raised where the user called agentfsm.

An `AgentFSMError` says what was wrong with what the user gave, in its message. The
frames of the modules it passed through on its way out (policy loading, tool
declarations, the runner's session) are agentfsm's business, and a user reading the
traceback would read them as the place to look. The public entry points are wrapped so
that such an error leaves them with no frames below the entry point itself.

Only agentfsm's own errors lose their frames. Anything else (a tool's exception, a
provider's, a hook's) keeps its traceback, and so does the exception an
`AgentFSMError` was raised from: it stays reachable as `__cause__`.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable, Iterator
from typing import ParamSpec, TypeVar, cast

from agentfsm.exceptions import AgentFSMError

__all__ = ["at_call", "iterated_at_call"]

_P = ParamSpec("_P")
_R = TypeVar("_R")
_Y = TypeVar("_Y")


def at_call(function: Callable[_P, _R]) -> Callable[_P, _R]:
    """`function` (plain or async) raising agentfsm's own errors without the frames below it."""
    if inspect.iscoroutinefunction(function):
        return cast(Callable[_P, _R], _awaited_at_call(function))

    @functools.wraps(function)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return function(*args, **kwargs)
        except AgentFSMError as exc:
            error = exc
        raise error.with_traceback(None)

    return wrapper


def _awaited_at_call(
    function: Callable[_P, Awaitable[_Y]],
) -> Callable[_P, Awaitable[_Y]]:
    @functools.wraps(function)
    async def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _Y:
        try:
            return await function(*args, **kwargs)
        except AgentFSMError as exc:
            error = exc
        raise error.with_traceback(None)

    return wrapper


def iterated_at_call(function: Callable[_P, Iterator[_Y]]) -> Callable[_P, Iterator[_Y]]:
    """`at_call` for a generator function: its errors arise while the caller iterates."""

    @functools.wraps(function)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> Iterator[_Y]:
        try:
            yield from function(*args, **kwargs)
        except AgentFSMError as exc:
            error = exc
        else:
            return
        raise error.with_traceback(None)

    return wrapper
