"""Declared tools: a name, an OpenAI or Anthropic spec, or a callable; and argument checks."""

from __future__ import annotations

from typing import Any, Literal

import pytest

from agentfsm import ToolSpec
from agentfsm._model.tools import tool_specs
from agentfsm.exceptions import ToolDefinitionError

WEATHER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "days": {"type": "integer"},
        "unit": {"type": "string", "enum": ["c", "f"]},
        "where": {
            "type": "object",
            "properties": {"lat": {"type": "number"}, "lon": {"type": "number"}},
            "required": ["lat"],
        },
    },
    "required": ["city"],
    "additionalProperties": False,
}


def get_weather(city: str, days: int = 1, unit: str = "c") -> str:
    """Get the weather forecast for a city.

    Longer notes that the model does not need.
    """
    return f"{city}: sunny for {days} day(s) in {unit}"


def set_unit(unit: Literal["c", "f"]) -> str:
    """Choose the temperature unit (this module postpones annotations, as the repo's style asks)."""
    return unit


def log_event(name: str, **fields: Any) -> None:
    """Record an event with any extra fields."""


def spec() -> ToolSpec:
    return ToolSpec.from_declaration(
        {"name": "get_weather", "description": "Weather", "parameters": WEATHER_SCHEMA}
    )


class TestFromDeclaration:
    def test_a_name_declares_a_tool_with_any_arguments(self) -> None:
        """A bare name declares the tool and accepts any arguments."""
        tool = ToolSpec.from_declaration("search")
        assert (tool.name, tool.parameters) == ("search", None)
        assert tool.validate_arguments({"anything": [1, 2]}) is None

    def test_an_openai_tools_entry(self) -> None:
        """`{"type": "function", "function": {...}}` is read from the inner function."""
        tool = ToolSpec.from_declaration(
            {
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "description": "Weather",
                    "parameters": WEATHER_SCHEMA,
                },
            }
        )
        assert (tool.name, tool.description, tool.parameters) == (
            "get_weather",
            "Weather",
            WEATHER_SCHEMA,
        )

    def test_a_flat_function_spec(self) -> None:
        """A flat `{"name", "description", "parameters"}` spec is read as is."""
        tool = spec()
        assert (tool.name, tool.description, tool.parameters) == (
            "get_weather",
            "Weather",
            WEATHER_SCHEMA,
        )

    def test_a_flat_responses_style_spec(self) -> None:
        """A Responses-style `{"type": "function", "name", "parameters"}` spec is read too."""
        tool = ToolSpec.from_declaration(
            {"type": "function", "name": "get_weather", "parameters": WEATHER_SCHEMA}
        )
        assert (tool.name, tool.parameters) == ("get_weather", WEATHER_SCHEMA)

    def test_an_anthropic_spec_with_input_schema(self) -> None:
        """Anthropic's `input_schema` is taken as the parameters."""
        tool = ToolSpec.from_declaration(
            {"name": "get_weather", "description": "W", "input_schema": WEATHER_SCHEMA}
        )
        assert tool.parameters == WEATHER_SCHEMA
        assert tool.validate_arguments({}) == "missing required argument 'city'"

    def test_a_callable_gets_its_schema_from_type_hints(self) -> None:
        """A function's parameters become a JSON schema: types, defaults, required, enum."""
        tool = ToolSpec.from_declaration(get_weather)
        assert tool.name == "get_weather"
        assert tool.fn is get_weather
        params = tool.parameters
        assert params is not None
        assert params["type"] == "object"
        assert params["required"] == ["city"]
        assert params["properties"]["city"]["type"] == "string"
        assert params["properties"]["days"]["type"] == "integer"
        assert params["properties"]["days"]["default"] == 1

    def test_a_callable_with_postponed_literal_hints_gets_an_enum(self) -> None:
        """With postponed annotations, a Literal hint still becomes an enforced enum."""
        tool = ToolSpec.from_declaration(set_unit)
        assert tool.parameters is not None
        assert tool.parameters["properties"]["unit"]["enum"] == ["c", "f"]
        assert tool.validate_arguments({"unit": "c"}) is None
        assert tool.validate_arguments({"unit": "k"}) is not None

    def test_a_callable_gets_its_description_from_the_docstring(self) -> None:
        """The description is the docstring's first paragraph."""
        assert (
            ToolSpec.from_declaration(get_weather).description
            == "Get the weather forecast for a city."
        )

    def test_a_toolspec_is_kept(self) -> None:
        """Declaring a ToolSpec gives it back unchanged."""
        tool = spec()
        assert ToolSpec.from_declaration(tool) is tool

    @pytest.mark.parametrize(
        ("item", "words"),
        [
            ("", "must not be empty"),
            ({"description": "no name"}, "needs a 'name'"),
            ({"name": ""}, "needs a 'name'"),
            ({"type": "function", "function": {"parameters": {}}}, "needs a 'name'"),
            (
                {"name": "f", "parameters": ["not", "a", "schema"]},
                "'parameters' must be a JSON schema",
            ),
            (
                {"name": "f", "parameters": {"type": "obj"}},
                "not a valid JSON schema: parameters.type is 'obj'",
            ),
            (
                {"name": "f", "parameters": {"properties": {"n": {"type": 3}}}},
                "parameters.properties.n.type",
            ),
            (
                {"name": "f", "parameters": {"required": "n"}},
                "parameters.required must be a list",
            ),
            (42, "cannot declare a tool from int"),
            (lambda city: city, "lambdas have none"),
        ],
    )
    def test_a_bad_declaration_is_a_tool_definition_error(self, item: Any, words: str) -> None:
        """Whatever cannot be understood as a tool is a ToolDefinitionError saying why."""
        with pytest.raises(ToolDefinitionError, match=words):
            ToolSpec.from_declaration(item)


class TestValidateArgumentsFromSchema:
    def test_valid_arguments_pass(self) -> None:
        """Arguments that fit the schema give None."""
        assert spec().validate_arguments({"city": "Oslo", "days": 3, "unit": "c"}) is None

    def test_a_missing_required_argument(self) -> None:
        """A missing required argument is named."""
        assert spec().validate_arguments({"days": 3}) == "missing required argument 'city'"

    def test_a_wrong_type(self) -> None:
        """A string where an integer is expected is named with both types."""
        assert (
            spec().validate_arguments({"city": "Oslo", "days": "3"})
            == "days: expected integer, got str"
        )

    def test_a_bool_is_not_an_integer(self) -> None:
        """JSON `true` is not an integer, although Python's bool is an int."""
        assert (
            spec().validate_arguments({"city": "Oslo", "days": True})
            == "days: expected integer, got bool"
        )

    def test_a_value_outside_the_enum(self) -> None:
        """A value not in the enum is named with the allowed values."""
        problem = spec().validate_arguments({"city": "Oslo", "unit": "k"})
        assert problem == "unit: 'k' is not one of ['c', 'f']"

    def test_an_unexpected_argument_when_additional_properties_is_false(self) -> None:
        """With `additionalProperties: false`, an undeclared argument is named."""
        problem = spec().validate_arguments({"city": "Oslo", "country": "NO"})
        assert problem == "unexpected argument(s) ['country']"

    def test_extra_arguments_pass_when_not_forbidden(self) -> None:
        """Without `additionalProperties: false`, extra arguments are fine."""
        tool = ToolSpec.from_declaration(
            {"name": "f", "parameters": {"type": "object", "properties": {}}}
        )
        assert tool.validate_arguments({"extra": 1}) is None

    def test_a_nested_object_is_checked(self) -> None:
        """Nested objects are checked too, and the path is named."""
        assert (
            spec().validate_arguments({"city": "Oslo", "where": {}})
            == "where: missing required argument 'lat'"
        )
        problem = spec().validate_arguments({"city": "Oslo", "where": {"lat": "north"}})
        assert problem == "where.lat: expected number, got str"
        assert (
            spec().validate_arguments({"city": "Oslo", "where": {"lat": 59.9, "lon": 10}}) is None
        )


class TestValidateArgumentsFromCallable:
    def test_valid_arguments_pass(self) -> None:
        """Arguments that fit the signature give None."""
        assert (
            ToolSpec.from_declaration(get_weather).validate_arguments({"city": "Oslo", "days": 2})
            is None
        )

    def test_a_missing_required_argument(self) -> None:
        """A missing parameter without default is named."""
        problem = ToolSpec.from_declaration(get_weather).validate_arguments({"days": 2})
        assert problem is not None
        assert problem.startswith("city:")

    def test_a_wrong_type(self) -> None:
        """A value that is not the parameter's type is named."""
        problem = ToolSpec.from_declaration(get_weather).validate_arguments(
            {"city": "Oslo", "days": "many"}
        )
        assert problem is not None
        assert problem.startswith("days:")

    def test_a_bool_is_not_an_integer(self) -> None:
        """JSON `true` for an `int` parameter is refused, as the schema shown to the model says."""
        problem = ToolSpec.from_declaration(get_weather).validate_arguments(
            {"city": "Oslo", "days": True}
        )
        assert problem is not None
        assert "days" in problem

    def test_an_argument_the_function_does_not_take(self) -> None:
        """An argument the function has no parameter for is refused: calling it would fail."""
        problem = ToolSpec.from_declaration(get_weather).validate_arguments(
            {"city": "Oslo", "country": "NO"}
        )
        assert problem is not None
        assert "country" in problem

    def test_var_keyword_functions_take_any_extra_argument(self) -> None:
        """A function with `**fields` accepts arguments it does not name."""
        assert (
            ToolSpec.from_declaration(log_event).validate_arguments({"name": "x", "level": 3})
            is None
        )


class TestToolSpecs:
    def test_indexes_tools_by_name(self) -> None:
        """Declarations of every kind are indexed by tool name."""
        specs = tool_specs(
            ["search", get_weather, {"name": "rm", "parameters": {"type": "object"}}]
        )
        assert specs is not None
        assert sorted(specs) == ["get_weather", "rm", "search"]

    def test_none_means_any_tool(self) -> None:
        """`None` declares no list: any tool name is accepted."""
        assert tool_specs(None) is None

    def test_a_name_declared_twice_is_an_error(self) -> None:
        """Two declarations of one name are a ToolDefinitionError naming it."""
        with pytest.raises(ToolDefinitionError, match="'get_weather' is declared twice"):
            tool_specs([get_weather, "get_weather"])


class TestToOpenAI:
    def test_a_spec_becomes_an_openai_tools_entry(self) -> None:
        """`to_openai` gives the `{"type": "function", "function": {...}}` shape."""
        assert spec().to_openai() == {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Weather",
                "parameters": WEATHER_SCHEMA,
            },
        }

    def test_a_bare_name_gets_an_empty_object_schema(self) -> None:
        """A tool declared by name is sent with an empty object schema."""
        params = ToolSpec.from_declaration("search").to_openai()["function"]["parameters"]
        assert params == {"type": "object", "properties": {}}

    def test_a_callable_round_trips_through_the_openai_shape(self) -> None:
        """The OpenAI entry of a callable declares a tool with the same name and schema."""
        tool = ToolSpec.from_declaration(get_weather)
        again = ToolSpec.from_declaration(tool.to_openai())
        assert (again.name, again.description, again.parameters) == (
            tool.name,
            tool.description,
            tool.parameters,
        )
