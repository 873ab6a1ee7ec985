"""The base of agentfsm's data models: a bad value raises `DataError`, not pydantic's error.

Every public name raises only `AgentFSMError` subclasses on bad arguments. A
model's constructor, its `model_validate*` class methods and assignment to its
fields (all models here are frozen) are public, so they turn pydantic's
`ValidationError` into a `DataError` naming the model and each field.
Building a valid model costs what pydantic's own `__init__` costs: the same
single call into the validator.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Self, TypeVar

from pydantic import BaseModel, ValidationError

from agentfsm.exceptions import AgentFSMError, DataError, PolicyError

__all__ = ["Checked", "check_number", "data_error", "listed", "problems_of"]

_T = TypeVar("_T")


def check_number(
    owner: str,
    name: str,
    value: object,
    *,
    minimum: float,
    integer: bool = False,
    error: type[AgentFSMError] = PolicyError,
) -> None:
    """Raise `error` unless `value` is a finite number (an int when `integer`) >= `minimum`."""
    kinds = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds):
        kind = "an int" if integer else "a number"
        raise error(f"{owner}: {name} must be {kind}, not {type(value).__name__}")
    if not math.isfinite(value) or value < minimum:
        raise error(f"{owner} needs a finite {name} >= {minimum}, got {value}")


def problems_of(exc: ValidationError) -> list[tuple[str, str]]:
    """Each problem of a pydantic error as `(field path, message)`, each on one line."""
    return [
        (_one_line(".".join(str(part) for part in e["loc"]) or "value"), _one_line(e["msg"]))
        for e in exc.errors()
    ]


def _one_line(text: str) -> str:
    """`text` with line breaks and other control characters escaped (a key may hold them)."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def listed(problems: list[tuple[str, str]]) -> str:
    """Problems as `field: message; field: message`, the form every error here uses."""
    return "; ".join(f"{field}: {message}" for field, message in problems)


def data_error(model: type[BaseModel], exc: ValidationError) -> DataError:
    """The `DataError` for pydantic's `exc`, raised while building a `model`."""
    problems = problems_of(exc)
    return DataError(
        f"{model.__name__}: {listed(problems)}", model=model.__name__, problems=problems
    )


def _calling(model: type[BaseModel], method: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
    """`method(*args, **kwargs)`, with pydantic's error turned into the `DataError` for `model`."""
    try:
        return method(*args, **kwargs)
    except ValidationError as exc:
        raise data_error(model, exc) from exc


class Checked(BaseModel):
    """A pydantic model whose constructor and validators raise `DataError`."""

    def __init__(self, /, **data: Any) -> None:
        # Inline, not through `_calling`: hosts build a ToolResult on every step.
        __tracebackhide__ = True
        try:
            self.__pydantic_validator__.validate_python(data, self_instance=self)
        except ValidationError as exc:
            raise data_error(type(self), exc) from exc

    # Pydantic calls a custom `__init__` for every nested instance it validates; this one
    # does what pydantic's own does, so nested values keep pydantic's direct path.
    __init__.__pydantic_base_init__ = True  # type: ignore[attr-defined]

    def __setattr__(self, name: str, value: Any) -> None:
        # A frozen model, or a value that does not validate.
        _calling(type(self), super().__setattr__, name, value)

    def __delattr__(self, name: str) -> None:
        _calling(type(self), super().__delattr__, name)

    @classmethod
    def model_validate(cls, obj: Any, **options: Any) -> Self:
        """Validate `obj` (a mapping or an instance) into this model; raise `DataError`."""
        return _calling(cls, super().model_validate, obj, **options)

    @classmethod
    def model_validate_json(cls, json_data: str | bytes | bytearray, **options: Any) -> Self:
        """Validate a JSON document into this model; raise `DataError`."""
        return _calling(cls, super().model_validate_json, json_data, **options)

    @classmethod
    def model_validate_strings(cls, obj: Any, **options: Any) -> Self:
        """Validate string data into this model; raise `DataError`."""
        return _calling(cls, super().model_validate_strings, obj, **options)
