"""Exactly one exception root for the data models: a bad value raises DataError, naming it.

ToolCall, ToolResult, ModelTurn and the other models are built by hosts, by
tests and from files. Their constructors, `model_validate*` and assignment
are public names, so pydantic's ValidationError must never escape them.
"""

from __future__ import annotations

import importlib
import inspect
import json
import pickle
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

import agentfsm as af
from agentfsm._engine.policy import Policy
from agentfsm._model._checked import Checked
from agentfsm._public import defined_in
from agentfsm.exceptions import AgentFSMError, DataError
from tests.strategies import odd_values

MODULES = [
    "agentfsm._model.types",
    "agentfsm._model.snapshot",
    "agentfsm._model.tools",
    "agentfsm._permissions",
    "agentfsm._engine.policy",
    "agentfsm.testing.scripted",
    "agentfsm._runner.session",
]
"""Core modules only: these tests run without the optional extras (durable checks its own)."""


def _models() -> list[type[BaseModel]]:
    found = []
    for name in MODULES:
        module = importlib.import_module(name)
        for value in vars(module).values():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseModel)
                and defined_in(value) == name  # its own, not one imported from elsewhere
                and not value.__name__.startswith("_")
            ):
                found.append(value)
    return found


MODELS = [m for m in _models() if m is not Policy]  # Policy raises PolicyError (its own tests)

_values = odd_values()


def _kwargs(model: type[BaseModel]) -> st.SearchStrategy[dict[str, Any]]:
    names = st.sampled_from([*model.model_fields, "unknown_field"])
    return st.dictionaries(names, _values, max_size=len(model.model_fields) + 1)


class TestEveryModelIsChecked:
    def test_the_public_models_are_found(self) -> None:
        """The scan finds the models a host builds (a broken scan would pass everything)."""
        names = {m.__name__ for m in MODELS}
        assert {"ToolCall", "ToolResult", "ModelTurn", "Usage"} <= names
        assert {"ToolSpec", "Rule", "ScriptedCall", "Reply", "RunResult"} <= names

    @pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
    def test_every_public_model_raises_data_error(self, model: type[BaseModel]) -> None:
        """Each public model derives from Checked, so its errors are DataErrors."""
        assert issubclass(model, Checked)


def _build_or_data_error(build: Any, *args: Any) -> DataError | None:
    """Call `build`; return the DataError it raised, None when it built (anything else escapes)."""
    try:
        build(*args)
    except DataError as exc:
        return exc
    return None


class TestOnlyDataErrorEscapes:
    @pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
    @settings(deadline=None)
    @given(data=st.data())
    def test_constructing_with_any_values(self, model: type[BaseModel], data: Any) -> None:
        """model(**anything) builds or raises DataError naming the model; nothing else."""
        values = data.draw(_kwargs(model))
        error = _build_or_data_error(lambda: model(**values))
        if error is not None:
            assert error.message.startswith(f"{model.__name__}: ")
            assert error.details["problems"], "a DataError lists at least one problem"
            assert "\n" not in error.message

    @pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
    @settings(deadline=None)
    @given(value=_values)
    def test_validating_any_value(self, model: type[BaseModel], value: Any) -> None:
        """model_validate(anything) builds or raises DataError; so does its JSON form."""
        _build_or_data_error(model.model_validate, value)
        _build_or_data_error(model.model_validate_strings, value)
        try:
            text = json.dumps(value)
        except (TypeError, ValueError):
            text = repr(value)
        _build_or_data_error(model.model_validate_json, text)


class TestDataError:
    def test_names_each_field_and_the_nested_path(self) -> None:
        """A nested call's bad name is reported with its path inside the turn."""
        with pytest.raises(DataError) as caught:
            af.ModelTurn(tool_calls=[{"name": "ok"}, {"name": 7}])
        assert caught.value.details["problems"] == [
            ("tool_calls.1.name", "Input should be a valid string")
        ]
        assert str(caught.value) == "ModelTurn: tool_calls.1.name: Input should be a valid string"

    def test_lists_every_problem(self) -> None:
        """A missing field and an unknown one are both reported."""
        with pytest.raises(DataError) as caught:
            af.ToolResult(cal_id="c1")  # type: ignore[call-arg]
        fields = [field for field, _ in caught.value.details["problems"]]
        assert fields == ["call_id", "cal_id"]

    def test_assignment_to_a_frozen_record(self) -> None:
        """Records are facts: assigning or deleting a field raises DataError, changes nothing."""
        result = af.ToolResult(call_id="c1", content="x")
        with pytest.raises(DataError, match="ToolResult: content: Instance is frozen"):
            result.content = "y"
        with pytest.raises(DataError):
            del result.content
        assert result.content == "x"

    def test_is_an_agentfsm_error_and_a_value_error(self) -> None:
        """Code that caught pydantic's error as ValueError keeps catching it."""
        with pytest.raises(ValueError, match="ToolCall: name: Input should be a valid string"):
            af.ToolCall(name=None)
        with pytest.raises(AgentFSMError):
            af.Usage(input_tokens="many")

    def test_pickles_with_its_problems(self) -> None:
        """It crosses a process pool with its problems intact."""
        with pytest.raises(DataError) as caught:
            af.Usage(input_tokens="many")
        again = pickle.loads(pickle.dumps(caught.value))
        assert type(again) is DataError
        assert again.details == caught.value.details

    def test_the_controller_reports_a_bad_result_as_invalid_input(self) -> None:
        """A result dict that is no ToolResult is InvalidInputError naming the field, and the
        Controller is left as it was."""
        ctl = af.Controller(tools=["echo"])
        ctl.on_model_output(
            af.ModelTurn(
                tool_calls=[af.ToolCall(id="c1", name="echo", arguments={})],
                finish_reason=af.FinishReason.TOOL_CALLS,
            )
        )
        before = (ctl.state, ctl.turn)
        with pytest.raises(af.exceptions.InvalidInputError, match="call_id: Input should be"):
            ctl.on_tool_results([{"call_id": 5, "content": "x"}])
        assert (ctl.state, ctl.turn) == before


class TestNestedValidationKeepsTheDirectPath:
    @pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
    def test_pydantic_does_not_call_a_custom_init(self, model: type[BaseModel]) -> None:
        """Checked's __init__ does what pydantic's does, so nested values skip it."""
        assert model.__pydantic_custom_init__ is False

    def test_nested_values_are_models(self) -> None:
        """A turn validated from plain data holds real ToolCalls."""
        turn = af.ModelTurn.model_validate({"tool_calls": [{"id": "c1", "name": "echo"}]})
        assert type(turn.tool_calls[0]) is af.ToolCall


class TestVocabularies:
    @pytest.mark.parametrize(
        "enum", [af.Action, af.ExitReason, af.FinishReason, af.Priority, af.State]
    )
    @settings(deadline=None)
    @given(value=_values)
    def test_a_name_outside_the_set_raises_data_error(self, enum: Any, value: Any) -> None:
        """State("bogus") and the like raise DataError listing the names, not ValueError."""
        members = {m.value for m in enum}
        if isinstance(value, str) and value in members:
            assert enum(value).value == value
            return
        with pytest.raises(DataError) as caught:
            enum(value)
        assert caught.value.message.startswith(f"{value!r} is not a valid {enum.__name__}")
        assert all(name in caught.value.message for name in members)

    def test_a_member_name_still_reads(self) -> None:
        """Valid names keep working, and the error is still a ValueError."""
        assert af.State("parse") is af.State.PARSE
        with pytest.raises(ValueError, match="is not a valid State"):
            af.State("bogus")


class TestSchemas:
    @pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
    def test_every_public_model_has_a_json_schema(self, model: type[BaseModel]) -> None:
        """model_json_schema() works for each (ToolSpec's callable fields are left out of it)."""
        schema = model.model_json_schema()
        assert schema["title"] == model.__name__
        assert "fn" not in schema.get("properties", {})
