"""The models read as pydantic's do; `unchecked` gives ordinary instances of the class asked."""

from __future__ import annotations

import pickle
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, PrivateAttr

import agentfsm as af
from agentfsm._model.tools import ToolSpec
from agentfsm._model.types import unchecked, unchecked_decision
from agentfsm._permissions import Rule
from agentfsm.exceptions import DataError

STEP_MODELS: list[type[BaseModel]] = [
    af.ToolCall,
    af.Usage,
    af.ModelTurn,
    af.ToolResult,
    af.Policy,
    ToolSpec,
    Rule,
]


def instances() -> list[BaseModel]:
    call = af.ToolCall(id="c1", name="echo", arguments={"x": 1})
    return [
        call,
        af.Usage(input_tokens=3, output_tokens=4),
        af.ModelTurn(text="hi", tool_calls=[call]),
        af.ToolResult(call_id="c1", content="ok"),
        af.Policy(max_turns=4),
        ToolSpec(name="echo"),
        Rule(action="ask", tool="echo"),
    ]


def pydantic_error(model: BaseModel, name: str) -> str:
    """The message pydantic's own `__getattr__` gives for a missing attribute."""
    with pytest.raises(AttributeError) as raised:
        BaseModel.__getattr__(model, name)  # type: ignore[attr-defined]
    return str(raised.value)


class TestReads:
    """Nothing a user reads differs from pydantic's own models."""

    @given(st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,20}", fullmatch=True))
    def test_a_missing_attribute_raises_pydantic_s_own_error(self, name: str) -> None:
        """Reading a missing attribute (any identifier) raises the error pydantic would raise."""
        for model in instances():
            if hasattr(type(model), name) or name in model.__dict__:
                continue
            with pytest.raises(AttributeError) as raised:
                getattr(model, name)
            assert str(raised.value) == pydantic_error(model, name)
            assert getattr(model, name, "default") == "default"

    def test_fields_properties_and_methods_read_as_before(self) -> None:
        """Fields, properties and methods read the same; models still pickle and compare."""
        for model in instances():
            for field in type(model).model_fields:
                assert getattr(model, field) is model.__dict__[field]
            assert pickle.loads(pickle.dumps(model)) == model
            assert model.model_copy() == model
        assert af.Policy(max_turns=4).prices_turns is False

    def test_a_subclass_keeps_pydantic_s_lookup_for_its_private_attributes(self) -> None:
        """A user's subclass with a private attribute and extras reads both, through pydantic."""

        class Tagged(af.ModelTurn):
            model_config = ConfigDict(extra="allow")
            _tag: str = PrivateAttr(default="mine")

        turn = Tagged(text="x", note="kept")
        assert turn._tag == "mine"
        assert turn.note == "kept"  # type: ignore[attr-defined]

    def test_a_class_with_private_attributes_or_extras_reads_them(self) -> None:
        """A model with private attributes or extras reads both."""

        class Private(BaseModel):
            _secret: int = PrivateAttr(default=7)

        class Extra(BaseModel):
            model_config = ConfigDict(extra="allow")

        assert Private()._secret == 7
        extra: Any = Extra(colour="red")
        assert extra.colour == "red"


class TestBuild:
    """`unchecked` hands back an ordinary instance of the class it is given."""

    def test_a_user_s_class_is_never_subclassed(self) -> None:
        """A class outside agentfsm is built as itself: its `__init_subclass__` never runs."""
        seen: list[type] = []

        class Watched(BaseModel):
            value: int = 0

            def __init_subclass__(cls, **kwargs: Any) -> None:
                seen.append(cls)

        assert seen == []
        built = unchecked(Watched, {"value": 3})
        assert type(built) is Watched
        assert built == Watched(value=3)

    @given(
        st.text(max_size=20),
        st.integers(min_value=0, max_value=10**6),
        st.lists(st.sampled_from(list(af.State)), max_size=4),
    )
    def test_a_built_model_is_the_validated_one_of_its_own_class(
        self, reason: str, turn: int, path: list[af.State]
    ) -> None:
        """What unchecked gives is an ordinary, frozen instance equal to the validated model."""
        values: dict[str, Any] = {
            "action": af.Action.CONTINUE,
            "priority": af.Priority.P1,
            "layer": 2,
            "reason": reason,
            "guard": "ResultsReady()",
            "fired": "ResultsReady()",
            "tool_calls": [],
            "results": [],
            "exit_reason": None,
            "turn": turn,
            "state": af.State.AWAIT_MODEL,
            "path": tuple(path),
            "adjust": {},
            "answer": None,
            "note": None,
            "shadow": (),
            "covered": {},
        }
        built = unchecked_decision(dict(values))
        assert type(built) is af.Decision
        assert built == af.Decision(**values)
        assert built.model_fields_set == set(af.Decision.model_fields)
        assert built.model_dump() == af.Decision(**values).model_dump()
        with pytest.raises(DataError):
            built.turn = turn + 1
        assert pickle.loads(pickle.dumps(built)) == built
        assert built.model_copy(update={"turn": 0}).turn == 0
        assert built.turn == turn

    def test_a_user_s_subclass_of_a_step_model_is_built_as_itself(self) -> None:
        """unchecked(type(call), ...) for a user's subclass keeps that class."""

        class Traced(af.ToolCall):
            _seen: int = PrivateAttr(default=0)

        built = unchecked(Traced, {**af.ToolCall(name="echo").__dict__})
        assert type(built) is Traced
        assert built.name == "echo"


class TestMaker:
    """Each class's unchecked function is made once, whoever asks for it."""

    def test_one_function_per_class_and_no_new_classes(self) -> None:
        """Asking again gives the same function, and building makes no new class."""
        before = {cls: len(cls.__subclasses__()) for cls in (af.ToolCall, af.Usage)}
        for _ in range(5):
            unchecked(af.ToolCall, dict(af.ToolCall(name="echo").__dict__))
            unchecked(af.Usage, {"input_tokens": 1, "output_tokens": 2, "cost": None})
        after = {cls: len(cls.__subclasses__()) for cls in before}
        assert after == before
