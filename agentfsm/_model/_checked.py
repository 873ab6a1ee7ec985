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
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Self, TypeVar

from pydantic import BaseModel, PydanticUserError, ValidationError

from agentfsm._model.limits import MAX_JSON_INDENT
from agentfsm.exceptions import AgentFSMError, DataError, DefinitionError, PolicyError

__all__ = [
    "Checked",
    "check_number",
    "constructed",
    "data_error",
    "error_kind",
    "listed",
    "problems_of",
    "read",
    "replaced",
]

_T = TypeVar("_T")
_M = TypeVar("_M", bound=BaseModel)


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


def read(what: str, error: type[AgentFSMError], reader: Callable[[], _T]) -> _T:
    """`reader()`: a caller's own object (a Mapping, an iterable) that fails while agentfsm
    reads it is named as `error`, not passed on as its own exception."""
    try:
        return reader()
    except AgentFSMError:
        raise
    except Exception as exc:
        raise error(f"{what} could not be read: {_described(exc)}") from exc


def _described(exc: Exception) -> str:
    try:
        text = str(exc)
    except Exception:  # an exception that cannot print itself is still named by its type
        text = ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


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


def error_kind(model: type[BaseModel]) -> type[DefinitionError]:
    """What a bad value or argument of `model` raises: `DataError`, or its own (`PolicyError`)."""
    kind: type[DefinitionError] = getattr(model, "__agentfsm_error__", DataError)
    return kind


def data_error(model: type[BaseModel], exc: ValidationError) -> DefinitionError:
    """The error for pydantic's `exc`, raised while building a `model`: a `DataError`, or
    the model's own kind (`PolicyError` for a `Policy`)."""
    problems = problems_of(exc)
    return error_kind(model)(
        f"{model.__name__}: {listed(problems)}", model=model.__name__, problems=problems
    )


def _calling(model: type[BaseModel], method: Callable[..., _T], /, *args: Any, **kwargs: Any) -> _T:
    """`method(*args, **kwargs)`, with pydantic's error turned into the error for `model`.

    A `TypeError` or `ValueError` of pydantic's own methods (`model_dump(mode=3)`,
    `model_json_schema(mode="x")`, content that does not serialize) is a bad argument
    or value too, so it becomes the same kind of error, naming the method.
    """
    try:
        return method(*args, **kwargs)
    except AgentFSMError:
        raise
    except ValidationError as exc:
        # The error names every field and problem pydantic found; pydantic's own traceback
        # would only show its internals to the user.
        raise data_error(model, exc) from None
    except (TypeError, ValueError, ArithmeticError, AssertionError, PydanticUserError) as exc:
        name = getattr(method, "__name__", "method")
        said = _one_line(" ".join(f"{exc}".split()))
        raise error_kind(model)(
            f"{model.__name__}.{name}: {type(exc).__name__}: {said}",
            model=model.__name__,
            problems=[(name, said)],
        ) from exc


def replaced(model: _M, changes: Mapping[str, Any]) -> _M:
    """`model` with some fields replaced by values agentfsm made itself, without validation.

    Pydantic's unvalidated copy, for the routing path's own corrections (an issued
    call id, a turn's price). Every value a user gives goes through `model_copy`,
    which validates.
    """
    copied: _M = BaseModel.model_copy(model, update=changes)
    return copied


def _validated_copy(model: _M, update: object, deep: object) -> _M:
    """What `model_copy` returns: a copy whose updated fields are validated like the constructor's.

    Pydantic's own copy stores `update` as it is (a `ToolCall` whose arguments are a list,
    a `Policy` whose budget is a string) and keeps values cached on the original
    (a policy's route table), so a bad or changed value would only show at a later step.
    """
    cls = type(model)
    kind = error_kind(cls)
    if type(deep) is not bool:
        raise kind(f"{cls.__name__}.model_copy: deep must be True or False, not {deep!r:.60}")
    copied: _M = _calling(cls, BaseModel.model_copy, model, deep=deep)
    if update is None:
        return copied
    if not isinstance(update, Mapping) or not all(type(key) is str for key in update):
        raise kind(
            f"{cls.__name__}.model_copy: update must be a mapping of field names to values, "
            f"not {update!r:.60}"
        )
    fields = cls.model_fields
    values = {name: copied.__dict__[name] for name in fields if name in copied.__dict__}
    values.update(update)
    made = cls.model_validate(values)
    return _with_fields_set(made, model.model_fields_set | set(update))


def _with_fields_set(model: _M, fields: set[str]) -> _M:
    """`model` again, with `fields` as the names it reports as explicitly set.

    Pydantic's own `model_construct` (not the validating override below) takes its values
    from `model`, which is validated already; a frozen model cannot be changed in place.
    """
    cls = type(model)
    values = {name: model.__dict__[name] for name in cls.model_fields if name in model.__dict__}
    return constructed(cls, values, fields)


def constructed(cls: type[_M], values: Mapping[str, Any], fields: set[str] | None = None) -> _M:
    """Pydantic's own `model_construct(fields, **values)`, unvalidated, for any model class.

    `Checked` overrides `model_construct` to validate; this is pydantic's, for values
    agentfsm validated already or produced itself.
    """
    made: _M = _PYDANTIC_CONSTRUCT(cls, fields, **values)
    return made


_PYDANTIC_CONSTRUCT = BaseModel.__dict__["model_construct"].__func__


class Checked(BaseModel):
    """A pydantic model whose constructor, validators and other methods raise `DataError`."""

    __agentfsm_error__: ClassVar[type[DefinitionError]] = DataError
    """The error a bad value or argument raises (`Policy` raises `PolicyError`)."""

    def __init__(self, /, **data: Any) -> None:
        __tracebackhide__ = True
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise data_error(type(self), exc) from None

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

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """A copy with `update`'s fields replaced, validated as the constructor validates them.

        Pydantic's own copy does not validate `update`; this one raises `DataError` for a
        value the constructor would refuse, so no invalid instance can be made by copying.
        """
        return _validated_copy(self, update, deep)

    @classmethod
    def model_construct(  # type: ignore[override]  # pydantic's mypy plugin writes its own
        cls, _fields_set: set[str] | None = None, **values: Any
    ) -> Self:
        """Build from `values`, validated like the constructor (pydantic's does not validate).

        A model made here without validation could carry anything into a later step;
        `_fields_set`, when given, is the set of field names reported as explicitly set.
        """
        made = cls.model_validate(values)
        if _fields_set is not None:
            if not isinstance(_fields_set, set | frozenset) or not set(_fields_set) <= set(
                cls.model_fields
            ):
                raise error_kind(cls)(
                    f"{cls.__name__}.model_construct: _fields_set must be a set of its field "
                    f"names, not {_fields_set!r:.60}"
                )
            return _with_fields_set(made, set(_fields_set))
        return made


def _check_indent(model: type[BaseModel], name: str, indent: object) -> None:
    """Refuse an indent the JSON dump cannot honour (pydantic's aborts the process)."""
    if indent is None or (type(indent) is int and 0 <= indent <= MAX_JSON_INDENT):
        return
    raise error_kind(model)(
        f"{model.__name__}.{name}: indent must be None or an int from 0 to "
        f"{MAX_JSON_INDENT}, not {indent!r:.60}",
        model=model.__name__,
        problems=[("indent", f"expected None or 0 to {MAX_JSON_INDENT}")],
    )


def _converting(name: str) -> Any:
    """Pydantic's method `name`, with its errors turned into the model's own (see `_calling`)."""
    inherited = BaseModel.__dict__[name]
    if isinstance(inherited, classmethod):
        function = inherited.__func__

        def on_class(cls: type[BaseModel], /, *args: Any, **kwargs: Any) -> Any:
            if "indent" in kwargs:
                _check_indent(cls, name, kwargs["indent"])
            return _calling(cls, function.__get__(cls), *args, **kwargs)

        on_class.__name__ = on_class.__qualname__ = name
        on_class.__doc__ = function.__doc__
        return classmethod(on_class)

    def on_instance(self: BaseModel, /, *args: Any, **kwargs: Any) -> Any:
        if "indent" in kwargs:
            _check_indent(type(self), name, kwargs["indent"])
        return _calling(type(self), inherited.__get__(self), *args, **kwargs)

    def v1_copy(self: BaseModel, /, *args: Any, **kwargs: Any) -> Any:
        # The deprecated `copy(update=...)` stores its update as it is, as `model_copy` did.
        copied = _calling(type(self), inherited.__get__(self), *args, **kwargs)
        return copied if kwargs.get("update") is None else _validated_copy(copied, {}, False)

    wrapper = v1_copy if name == "copy" else on_instance
    wrapper.__name__ = wrapper.__qualname__ = name
    wrapper.__doc__ = inherited.__doc__
    return wrapper


CONVERTED = (
    "model_dump",
    "model_dump_json",
    "model_json_schema",
    # pydantic's deprecated v1 names that do not go through the methods above
    "copy",
    "json",
    "parse_raw",
    "parse_file",
    "schema_json",
)
"""Pydantic methods whose bad arguments (or unserializable values) raise the model's error."""
for _name in CONVERTED:
    setattr(Checked, _name, _converting(_name))
