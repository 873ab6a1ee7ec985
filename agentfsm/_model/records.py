"""Plain frozen records for what the step makes on every input: snapshots and decisions.

A Controller step builds two or three `RunSnapshot`s and one `Decision` from values it
checked already. As pydantic models each cost a pydantic copy, several times the work
of the rest of the record (issue 36), so they are plain classes: an instance's fields
are its `__dict__`, filled in one `dict.update`.

Pydantic stays at the boundary, where outside data becomes a record:
- `Decision(...)`, `RunSnapshot(...)`, `model_validate(...)`, `model_copy(update=...)`
  and `replace(...)` validate through a pydantic model made once per class from the
  record's own annotations (so each field is declared once), and raise `DataError`
  naming every bad field;
- `model_dump(...)`, `model_dump_json(...)` and `model_json_schema()` are that model's,
  so a record dumps exactly as it did when it was a pydantic model;
- a record is a valid field type of a pydantic model (`list[Decision]` in `RunResult`).
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Callable, Mapping
from typing import Any, Self, get_type_hints

from pydantic import ConfigDict, GetCoreSchemaHandler, create_model
from pydantic.fields import FieldInfo
from pydantic_core import core_schema

from agentfsm._model._checked import Checked, constructed
from agentfsm.exceptions import DataError

__all__ = ["Record", "validator_of"]


class _Frozen(Checked):
    model_config = ConfigDict(frozen=True, extra="forbid")


def validator_of(cls: type[Record]) -> type[Checked]:
    """The pydantic model that checks `cls`'s fields, named as `cls`, made on first use."""
    model = _VALIDATORS.get(cls)
    if model is None:
        hints = get_type_hints(cls, globalns=cls._namespace)
        fields: dict[str, Any] = {name: (hints[name], cls._defaults[name]) for name in cls._fields}
        model = _VALIDATORS[cls] = create_model(cls.__name__, __base__=_Frozen, **fields)
        model.__doc__ = cls.__doc__
    return model


_VALIDATORS: dict[type[Record], type[Checked]] = {}


class _ModelFields:
    """`Record.model_fields`: the validator's fields, read on the class as pydantic's are."""

    def __get__(self, instance: object, owner: type[Record]) -> dict[str, FieldInfo]:
        return validator_of(owner).model_fields


class Record:
    """A frozen record whose fields are its annotated class attributes (defaults included).

    Subclasses declare `name: type = default` (or `= Field(default_factory=list)`) with a
    docstring under each, as a pydantic model does.
    """

    _fields: tuple[str, ...] = ()
    _defaults: dict[str, Any] = {}  # noqa: RUF012  # set per subclass, never changed
    _namespace: dict[str, Any] = {}  # noqa: RUF012  # likewise

    model_fields = _ModelFields()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._fields = tuple(cls.__annotations__)
        cls._defaults = {name: cls.__dict__.get(name, FieldInfo()) for name in cls._fields}
        # The annotations are strings, read in the module that defines the class: its
        # `__module__` may later name the public module that exports it (`agentfsm._public`).
        cls._namespace = vars(sys.modules[cls.__module__])

    # -- built from outside: validated ----------------------------------------------

    def __init__(self, **fields: Any) -> None:
        """`fields` over the defaults, each validated: `DataError` names every bad one."""
        vars(self).update(validator_of(type(self)).model_validate(fields).__dict__)

    @classmethod
    def model_validate(cls, obj: Any, **options: Any) -> Self:
        """`obj` (a mapping, or a record of this class) as a record; raise `DataError`."""
        if type(obj) is cls and not options:
            return obj
        if isinstance(obj, Record):
            obj = obj.as_dict()
        return cls._made(validator_of(cls).model_validate(obj, **options).__dict__)

    @classmethod
    def model_validate_json(cls, json_data: str | bytes | bytearray, **options: Any) -> Self:
        """A JSON document as a record; raise `DataError`."""
        return cls._made(validator_of(cls).model_validate_json(json_data, **options).__dict__)

    @classmethod
    def model_json_schema(cls, **options: Any) -> dict[str, Any]:
        """The JSON schema of the record's fields (pydantic's)."""
        schema: dict[str, Any] = validator_of(cls).model_json_schema(**options)
        return schema

    def replace(self, **changes: Any) -> Self:
        """A copy with `changes`, validated like the constructor."""
        return type(self)(**{**vars(self), **changes})

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """A copy with `update`'s fields replaced, validated as the constructor validates."""
        name = type(self).__name__
        if type(deep) is not bool:
            raise DataError(f"{name}.model_copy: deep must be True or False, not {deep!r:.60}")
        if update is not None and (
            not isinstance(update, Mapping) or not all(type(key) is str for key in update)
        ):
            raise DataError(
                f"{name}.model_copy: update must be a mapping of field names to values, "
                f"not {update!r:.60}"
            )
        made = self.replace(**update) if update else self
        return copy.deepcopy(made) if deep else copy.copy(made)

    # -- built by agentfsm: trusted ------------------------------------------------

    @classmethod
    def _made(cls, values: Mapping[str, Any]) -> Self:
        """A record of `values` (every field), unvalidated: values agentfsm checked itself."""
        record = cls.__new__(cls)
        vars(record).update(values)
        return record

    # -- read -----------------------------------------------------------------------

    def as_dict(self) -> dict[str, Any]:
        """Every field by name (a new dict; the values are the record's own)."""
        return dict(vars(self))

    @property
    def model_fields_set(self) -> set[str]:
        """Every field: a record always holds all of them."""
        return set(self._fields)

    def _as_model(self) -> Checked:
        return constructed(validator_of(type(self)), vars(self), set(self._fields))

    def model_dump(self, **options: Any) -> dict[str, Any]:
        """The fields as a dict, as pydantic's `model_dump(**options)` gives them."""
        dumped: dict[str, Any] = self._as_model().model_dump(**options)
        return dumped

    def model_dump_json(self, **options: Any) -> str:
        """The fields as JSON, as pydantic's `model_dump_json(**options)` gives them."""
        dumped: str = self._as_model().model_dump_json(**options)
        return dumped

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        # As a field of a pydantic model: validated by the record's model, then made a record;
        # dumped by that model, in the mode of the outer dump.
        model = validator_of(cls)

        def dump(record: Record, info: core_schema.SerializationInfo) -> Any:
            return record.model_dump(mode=info.mode)

        return core_schema.no_info_before_validator_function(
            _as_mapping,
            core_schema.no_info_after_validator_function(
                _maker(cls), handler.generate_schema(model)
            ),
            serialization=core_schema.plain_serializer_function_ser_schema(dump, info_arg=True),
        )

    # -- frozen, equal by value ------------------------------------------------------

    def __setattr__(self, name: str, value: Any) -> None:
        raise DataError(
            f"{type(self).__name__} is frozen: {name} cannot be set; make another with replace()",
            model=type(self).__name__,
            problems=[(name, "the record is frozen")],
        )

    def __delattr__(self, name: str) -> None:
        raise DataError(
            f"{type(self).__name__} is frozen: {name} cannot be deleted",
            model=type(self).__name__,
            problems=[(name, "the record is frozen")],
        )

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return vars(self) == vars(other)

    __hash__ = None  # type: ignore[assignment]  # equal by value and holds lists: as a dict

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in vars(self).items())})"


def _as_mapping(value: Any) -> Any:
    """A record given where a record is expected: its fields, for the model to check."""
    return value.as_dict() if isinstance(value, Record) else value


def _maker(cls: type[Record]) -> Callable[[Checked], Record]:
    def make(model: Checked) -> Record:
        return cls._made(model.__dict__)

    return make
