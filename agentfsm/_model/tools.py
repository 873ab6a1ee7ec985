"""Declared tools: a name, an OpenAI-style function spec, or a Python callable.

A `ToolSpec` knows the tool's JSON schema and checks a call's arguments
against it, so the validate state can refuse a call before the host runs it.
"""

from __future__ import annotations

import functools
import inspect
import json
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model, model_validator
from pydantic.json_schema import SkipJsonSchema

from agentfsm._model._checked import Checked, read
from agentfsm._model._plain_schema import Check, fits
from agentfsm.exceptions import ToolDefinitionError

__all__ = ["ToolSpec", "tool_specs"]


class ToolSpec(Checked):
    """One tool the model may call, with the schema its arguments must follow."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True, defer_build=True)

    name: str = Field(min_length=1)
    """The name the model calls the tool by (not empty: no call could name it)."""
    description: str = ""
    """What the tool does, shown to the model."""
    parameters: dict[str, Any] | None = None
    """JSON schema of the arguments object; `None` accepts any object."""
    fn: SkipJsonSchema[Callable[..., Any] | None] = None
    """The Python callable that runs the tool, when agentfsm runs it itself."""
    args_model: SkipJsonSchema[type[BaseModel] | None] = None
    """A pydantic model of the callable's parameters, used to validate arguments."""

    @classmethod
    def from_declaration(cls, item: Any) -> ToolSpec:
        """Build a spec from a name, a function spec dict, a callable, or a ToolSpec."""
        if isinstance(item, ToolSpec):
            return item
        if isinstance(item, str):
            if not item:
                raise ToolDefinitionError("a tool name must not be empty")
            return cls(name=item)
        if isinstance(item, Mapping):
            what = "a tool's function spec"
            return read(what, ToolDefinitionError, lambda: cls._from_mapping(item))
        if callable(item):
            return cls._from_callable(item)
        raise ToolDefinitionError(
            f"cannot declare a tool from {type(item).__name__}: expected a name, "
            "an OpenAI-style function spec {'name', 'description', 'parameters'} or a callable"
        )

    @classmethod
    def _from_mapping(cls, item: Mapping[str, Any]) -> ToolSpec:
        spec = item.get("function", item) if item.get("type") == "function" else item
        name = spec.get("name")
        if not isinstance(name, str) or not name:
            raise ToolDefinitionError(f"a function spec needs a 'name'; got keys {sorted(spec)}")
        params = spec.get("parameters", spec.get("input_schema"))
        if params is not None and not isinstance(params, dict):
            raise ToolDefinitionError(f"tool {name!r}: 'parameters' must be a JSON schema object")
        return cls(name=name, description=str(spec.get("description") or ""), parameters=params)

    @classmethod
    def _from_callable(cls, fn: Callable[..., Any]) -> ToolSpec:
        name = getattr(fn, "__name__", "")
        if not name or name == "<lambda>":
            raise ToolDefinitionError("a callable tool needs a __name__ (lambdas have none)")
        try:
            # Resolves postponed (string) annotations from `from __future__ import annotations`.
            hints = typing.get_type_hints(fn)
            fields: dict[str, Any] = {}
            extra: Literal["allow", "forbid"] = "forbid"
            for param in inspect.signature(fn).parameters.values():
                if param.kind is param.VAR_KEYWORD:
                    extra = "allow"
                if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                    continue
                default = ... if param.default is param.empty else param.default
                fields[param.name] = (hints.get(param.name, Any), default)
            # Arguments arrive as JSON: no coercion ("1" is not 1, true is not 1), and no
            # argument the function does not take unless it has **kwargs.
            config = ConfigDict(strict=True, extra=extra)
            model = create_model(f"{name}_args", __config__=config, **fields)
            schema = model.model_json_schema()
        except Exception as exc:  # pydantic raises several types for unusable hints
            raise ToolDefinitionError(f"tool {name!r}: cannot build a schema: {exc}") from exc
        schema.pop("title", None)
        doc = inspect.getdoc(fn) or ""
        return cls(
            name=name,
            description=doc.split("\n\n")[0],
            parameters=schema,
            fn=fn,
            args_model=model,
        )

    def to_openai(self) -> dict[str, Any]:
        """Return the spec in OpenAI's `tools=[...]` format."""
        params = self.parameters or {"type": "object", "properties": {}}
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": params},
        }

    def validate_arguments(self, arguments: Mapping[str, Any]) -> str | None:
        """Return why `arguments` do not fit the tool's schema, or None when they do.

        A callable's arguments are checked by the pydantic model of its parameters; a
        declared schema by `jsonschema` (JSON Schema 2020-12 unless it names its draft),
        compiled once per schema, with an integer read strictly (`1.0` and `true` are not).
        """
        if self.args_model is not None:
            try:
                self.args_model.model_validate(dict(arguments))
            except ValidationError as exc:
                return "; ".join(
                    f"{'.'.join(str(p) for p in e['loc']) or '<root>'}: {e['msg']}"
                    for e in exc.errors()
                )
            return None
        if self.parameters is None:
            return None
        return _check(_validator(self.parameters), arguments)

    @model_validator(mode="after")
    def _schema_is_usable(self) -> Self:
        if self.parameters is not None and self.args_model is None:
            problem = _schema_problem(self.parameters, "parameters")
            if problem is not None:
                raise ToolDefinitionError(f"tool {self.name!r}: not a valid JSON schema: {problem}")
        return self


_KINDS = {"array": "a list", "object": "an object", "string": "a string", "boolean": "a boolean"}
"""How a schema keyword's expected JSON type reads in a declaration error."""
_TYPES = ["array", "boolean", "integer", "null", "number", "object", "string"]
_VALIDATORS: dict[int, tuple[dict[str, Any], tuple[Check | None, Any]]] = {}
"""Each schema's compiled `jsonschema` validator, by the schema's id."""


def _schema_problem(schema: Any, where: str) -> str | None:
    """Say what makes `schema` unusable as a tool's arguments schema, or None."""
    if not isinstance(schema, dict):
        return f"{where} must be an object, not {type(schema).__name__}"
    key = _content_key(schema)
    if key is not None and key in _USABLE:
        return None
    problem = _checked_schema(schema, where)
    if problem is None and key is not None:
        if len(_USABLE) >= _CACHE_SIZE:
            _USABLE.clear()
        _USABLE.add(key)
    return problem


def _checked_schema(schema: dict[str, Any], where: str) -> str | None:
    from jsonschema.exceptions import SchemaError

    try:
        _validator_class(schema).check_schema(schema)
    except SchemaError as exc:
        path = "".join(f".{part}" for part in exc.absolute_path)
        if exc.absolute_path and exc.absolute_path[-1] == "type" and isinstance(exc.instance, str):
            return f"{where}{path} is {exc.instance!r}; JSON Schema types are {_TYPES}"
        if exc.validator == "type" and exc.validator_value in _KINDS:
            return f"{where}{path} must be {_KINDS[exc.validator_value]}, not {exc.instance!r:.60}"
        return f"{where}{path}: {_short(exc.message)}"
    except RecursionError:
        return f"{where} nests too deep to be checked"
    return None


def _validator(schema: dict[str, Any]) -> tuple[Check | None, Any]:
    """The schema's quick check (see `_plain_schema`) and compiled validator, made once per
    schema content.

    Every Controller builds its own `ToolSpec`s and pydantic copies the schema into each, so a
    cache by object alone compiled the same schema again for every run (milliseconds each).
    The object is the quick key; the schema's canonical JSON text is the one that carries
    over. A schema that is not plain JSON data (which a tool declaration may still hold) is
    compiled for its object only.
    """
    found = _VALIDATORS.get(id(schema))
    if found is not None and found[0] is schema:
        return found[1]
    key = _content_key(schema)
    validator = _BY_CONTENT.get(key) if key is not None else None
    if validator is None:
        validator = (fits(schema), _validator_class(schema)(schema))
        if key is not None:
            _remember(_BY_CONTENT, key, validator)
    _remember(_VALIDATORS, id(schema), (schema, validator))
    return validator


_CACHE_SIZE = 1024
"""How many schemas each cache keeps, for programs that make schemas freely."""
_BY_CONTENT: dict[str, tuple[Check | None, Any]] = {}
"""Each schema's compiled validator, by the schema's canonical JSON text."""
_USABLE: set[str] = set()
"""The canonical JSON texts of schemas already checked usable."""


def _remember(cache: dict[Any, Any], key: Any, value: Any) -> None:
    if len(cache) >= _CACHE_SIZE:
        cache.clear()
    cache[key] = value


def _content_key(schema: dict[str, Any]) -> str | None:
    """The schema's canonical JSON text, or None when it is not plain JSON data."""
    try:
        return json.dumps(schema, sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return None


def _validator_class(schema: dict[str, Any]) -> Any:
    """The `jsonschema` validator class for `schema` (2020-12 unless it names its draft)."""
    from jsonschema import Draft202012Validator, validators

    return _strict_integers(validators.validator_for(schema, default=Draft202012Validator))


@functools.cache
def _strict_integers(kind: Any) -> Any:
    """The draft's validator class with an integer read strictly, made once per draft.

    An integer is an int, not a float such as 1.0 (which JSON Schema accepts, and which
    `range(1.0)` in the tool would not).
    """
    from jsonschema import validators

    strict = kind.TYPE_CHECKER.redefine("integer", _is_integer)
    return validators.extend(kind, type_checker=strict)  # type: ignore[no-untyped-call]


def _is_integer(_checker: object, value: object) -> bool:
    return type(value) is int


def _check(checkers: tuple[Check | None, Any], arguments: Mapping[str, Any]) -> str | None:
    quick, validator = checkers
    instance = dict(arguments)
    if quick is not None and quick(instance):
        return None  # a plain schema the arguments fit: jsonschema would say the same
    from jsonschema.exceptions import best_match

    try:
        # Most calls fit: `is_valid` stops at nothing to rank, where `best_match` sorts every
        # error the schema yields; the errors are collected only when there are some.
        if validator.is_valid(instance):
            return None
        error = best_match(validator.iter_errors(instance))
    except Exception as exc:  # a $ref that resolves nowhere, say: the call is refused
        return f"the tool's schema cannot check them: {type(exc).__name__}: {_short(str(exc))}"
    if error is None:
        return None
    where = ".".join(str(p) for p in error.absolute_path)
    message = _short(_described(error))
    return f"{where}: {message}" if where else message


def _described(error: Any) -> str:
    """The error in the words the model reads: which argument, what was expected."""
    kind, expected, value = error.validator, error.validator_value, error.instance
    if kind == "required" and isinstance(value, dict):
        missing = [name for name in expected if name not in value]
        if missing:
            return f"missing required argument {missing[0]!r}"
    if (
        kind == "additionalProperties"
        and isinstance(value, dict)
        and "patternProperties" not in error.schema
    ):
        extra = sorted(set(value) - set(error.schema.get("properties", {})))
        if extra:
            return f"unexpected argument(s) {extra}"
    if kind == "type":
        wanted = expected if isinstance(expected, str) else " or ".join(map(str, expected))
        return f"expected {wanted}, got {type(value).__name__}"
    if kind == "enum":
        return f"{value!r} is not one of {expected}"
    return str(error.message)


def _short(text: str) -> str:
    """A validator's message on one line, at most 300 characters (it may quote the value)."""
    line = " ".join(text.split())
    return line if len(line) <= 300 else line[:297] + "..."


def tool_specs(tools: Iterable[Any] | None) -> dict[str, ToolSpec] | None:
    """Index declared tools by name; `None` means any tool name is accepted."""
    if tools is None:
        return None
    if isinstance(tools, str | bytes | Mapping) or not isinstance(tools, Iterable):
        raise ToolDefinitionError(
            f"tools must be a list of tools (names, function specs or callables) or None, "
            f"not {type(tools).__name__} {tools!r:.60}; a single tool goes in a list: [tool]"
        )
    specs: dict[str, ToolSpec] = {}
    for item in read("tools", ToolDefinitionError, lambda: list(tools)):
        spec = ToolSpec.from_declaration(item)
        if spec.name in specs:
            raise ToolDefinitionError(f"tool {spec.name!r} is declared twice")
        specs[spec.name] = spec
    return specs
