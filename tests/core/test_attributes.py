"""The step's models read attributes through CPython's plain lookup and answer as pydantic does,
and are built through a twin class that takes plain stores."""

from __future__ import annotations

import pickle
import sys
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, PrivateAttr

import agentfsm as af
from agentfsm.core import _attributes
from agentfsm.core.permissions import Rule
from agentfsm.core.snapshot import RunSnapshot
from agentfsm.core.tools import ToolSpec
from agentfsm.core.types import build, maker
from agentfsm.exceptions import DataError

STEP_MODELS: list[type[BaseModel]] = [
    af.ToolCall,
    af.Usage,
    af.ModelTurn,
    af.ToolResult,
    af.Decision,
    RunSnapshot,
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
        af.Controller(tools=["echo"]).on_model_output(af.ModelTurn(text="done")),
        RunSnapshot(turn=2),
        af.Policy(max_turns=4),
        ToolSpec(name="echo"),
        Rule(action="ask", tool="echo"),
    ]


def slot_of(cls: type) -> int:
    assert _attributes._SLOT is not None
    return _attributes._word(cls, _attributes._SLOT[0])


def pydantic_error(model: BaseModel, name: str) -> str:
    """The message pydantic's own `__getattr__` gives for a missing attribute."""
    with pytest.raises(AttributeError) as raised:
        BaseModel.__getattr__(model, name)  # type: ignore[attr-defined]
    return str(raised.value)


cpython = pytest.mark.skipif(
    sys.implementation.name != "cpython", reason="the slot exists on CPython only"
)


class TestPlainLookup:
    """Which classes get the plain lookup, and that nothing a user reads changes."""

    @cpython
    def test_the_slot_is_found_on_this_interpreter(self) -> None:
        """On CPython the slot is found, and `object` holds the plain lookup there."""
        assert _attributes._SLOT is not None
        _offset, plain, hook = _attributes._SLOT
        assert slot_of(object) == plain
        assert plain != hook

    @cpython
    def test_every_step_model_has_the_plain_lookup(self) -> None:
        """The models read on every step hold CPython's plain lookup, not the hook."""
        assert _attributes._SLOT is not None
        for cls in STEP_MODELS:
            assert slot_of(cls) == _attributes._SLOT[1], cls.__name__
        assert _attributes.plain_lookup(*STEP_MODELS)

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
        if _attributes._SLOT is not None:
            assert slot_of(Tagged) == _attributes._SLOT[2]

    def test_a_class_that_needs_pydantic_s_lookup_is_left_as_it_is(self) -> None:
        """A model with private attributes or extras is refused and still reads them."""

        class Private(BaseModel):
            _secret: int = PrivateAttr(default=7)

        class Extra(BaseModel):
            model_config = ConfigDict(extra="allow")

        assert not _attributes.plain_lookup(Private, Extra)
        assert Private()._secret == 7
        extra: Any = Extra(colour="red")
        assert extra.colour == "red"


class TestPlainStoreTwin:
    """`build` fills a twin by plain stores and hands back an ordinary instance of the class."""

    @cpython
    def test_every_step_model_has_a_twin_here(self) -> None:
        """On CPython each of agentfsm's step models gets a twin that adds nothing to it."""
        for cls in STEP_MODELS:
            twin = _attributes.plain_store_twin(cls)
            assert twin is not None, cls.__name__
            assert twin.__bases__ == (cls,)
            assert twin.__basicsize__ == cls.__basicsize__
            assert twin.__dict__["__init__"] is object.__init__  # made without a Python frame
            made = twin()
            made.__class__ = cls  # what build does last: an ordinary instance of cls
            assert type(made) is cls
            assert not isinstance(made, twin)

    def test_a_user_s_class_gets_no_twin(self) -> None:
        """A class outside agentfsm is never subclassed: its `__init_subclass__` could act on it."""
        seen: list[type] = []

        class Watched(BaseModel):
            value: int = 0

            def __init_subclass__(cls, **kwargs: Any) -> None:
                seen.append(cls)

        assert _attributes.plain_store_twin(Watched) is None
        assert seen == []
        built = build(Watched, {"value": 3})
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
        """What build gives is an ordinary, frozen instance equal to the validated model."""
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
        }
        built = build(af.Decision, dict(values))
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
        """build(type(call), ...) for a user's subclass keeps that class (the providers do it)."""

        class Traced(af.ToolCall):
            _seen: int = PrivateAttr(default=0)

        built = build(Traced, {**af.ToolCall(name="echo").__dict__})
        assert type(built) is Traced
        assert built.name == "echo"


class TestMaker:
    """Each class's build function is made once, with one twin, whoever asks for it."""

    def test_one_function_and_one_twin_per_class(self) -> None:
        """Asking again gives the same function, and building makes no new class."""
        assert maker(af.Decision) is maker(af.Decision)
        assert maker(RunSnapshot) is maker(RunSnapshot)
        assert _attributes.plain_store_twin(af.Usage) is _attributes.plain_store_twin(af.Usage)
        before = {cls: len(cls.__subclasses__()) for cls in (af.ToolCall, af.Usage, RunSnapshot)}
        for _ in range(5):
            build(af.ToolCall, dict(af.ToolCall(name="echo").__dict__))
            build(af.Usage, {"input_tokens": 1, "output_tokens": 2, "cost": None})
            build(RunSnapshot, dict(RunSnapshot().__dict__))
        after = {cls: len(cls.__subclasses__()) for cls in before}
        assert after == before
