"""The shared building blocks: fast construction and argument parsing."""

from __future__ import annotations

import json
from collections.abc import Callable

from hypothesis import given
from hypothesis import strategies as st

from agentfsm._model.types import FinishReason, ModelTurn, ToolCall, Usage
from agentfsm.providers._common import (
    Draft,
    broken,
    call_from_object,
    call_from_string,
    checked_turn,
    json_loads,
    make_usage,
)

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=8,
)
AROUND = st.sampled_from(["", " ", "\n", "\t ", "\ufeff", "x", "}", "\u2028", "1"])


def _outcome(parse: Callable[[str], object], text: str) -> tuple[str, str]:
    try:
        return "value", repr(parse(text))
    except ValueError as exc:
        return type(exc).__name__, str(exc)


class TestJsonLoads:
    """The one-call parse gives what `json.loads` gives, value or error, for any text."""

    @given(value=JSON, before=AROUND, after=AROUND, cut=st.integers(0, 40))
    def test_same_as_json_loads(self, value: object, before: str, after: str, cut: int) -> None:
        """Whole documents, white space or junk around them, and documents cut short."""
        whole = json.dumps(value)
        for text in (whole, before + whole + after, whole[:cut], before + whole[cut:]):
            assert _outcome(json_loads, text) == _outcome(json.loads, text)

    @given(st.text(max_size=12))
    def test_any_text(self, text: str) -> None:
        """Text that is mostly not JSON fails with json's own error."""
        assert _outcome(json_loads, text) == _outcome(json.loads, text)


class TestConstruct:
    """Drafts, calls and usage are built through validation."""

    def test_turn_equals_validated(self) -> None:
        """A turn built from a draft equals the validated one."""
        draft = Draft("openai", text="hi", finish=FinishReason.STOP, raw_finish="stop")
        draft.calls = [call_from_string("c1", "f", '{"a": 1}')]
        draft.usage = make_usage(3, 4, 0.5)
        built = draft.build()
        assert built == ModelTurn.model_validate(built.model_dump())
        assert isinstance(built.tool_calls[0], ToolCall)

    def test_usage_equals_validated(self) -> None:
        """A usage built from counts equals the validated one."""
        assert make_usage(1, 2) == Usage(input_tokens=1, output_tokens=2)

    def test_models_stay_frozen(self) -> None:
        """A constructed turn is still a frozen pydantic model that serializes."""
        turn = checked_turn(Draft("x").build().__dict__.copy())
        assert turn.model_dump()["provider"] == "x"

    def test_bad_counts_read_as_zero(self) -> None:
        """Booleans, strings and NaN are not token counts."""
        assert make_usage(True, "7") == Usage()
        assert make_usage(float("nan"), 2.9).output_tokens == 2


class TestCallFromString:
    """Arguments that arrive as a JSON string."""

    def test_object(self) -> None:
        """A JSON object parses into the arguments and the raw string is kept."""
        call = call_from_string("c", "f", '{"a": 1}')
        assert (call.arguments, call.raw_arguments, call.error) == ({"a": 1}, '{"a": 1}', None)

    def test_null_means_no_arguments(self) -> None:
        """JSON `null` means `{}`."""
        assert call_from_string("c", "f", "null").arguments == {}

    def test_empty_means_no_arguments(self) -> None:
        """An empty string means `{}`."""
        assert call_from_string("c", "f", "  ").complete

    def test_not_an_object(self) -> None:
        """Valid JSON that is not an object leaves the call broken, saying so."""
        for raw in ("[1, 2]", "3", '"x"', "true"):
            call = call_from_string("c", "f", raw)
            assert call.arguments is None
            assert call.error is not None
            assert "not an object" in call.error
            assert call.raw_arguments == raw

    def test_invalid_json(self) -> None:
        """Unparseable arguments leave the call broken with the raw text kept."""
        call = call_from_string("c", "f", '{"a": ')
        assert call.error is not None
        assert "not valid JSON" in call.error
        assert call.raw_arguments == '{"a": '

    def test_missing_name(self) -> None:
        """A call without a tool name cannot be executed."""
        assert call_from_string("c", None, "{}").error == "the call has no tool name"

    def test_id_kept_or_empty(self) -> None:
        """A missing or non-string id becomes `""`; the controller issues one."""
        assert call_from_string(None, "f", "{}").id == ""
        assert call_from_string(7, "f", "{}").id == ""


class TestCallFromObject:
    """Arguments that arrive as a JSON value."""

    def test_null_means_no_arguments(self) -> None:
        """`None` means `{}`."""
        assert call_from_object("c", "f", None).arguments == {}

    def test_string_is_parsed(self) -> None:
        """A string is read as JSON text."""
        assert call_from_object("c", "f", '{"b": 2}').arguments == {"b": 2}

    def test_list_is_broken(self) -> None:
        """A list is not an argument object."""
        assert call_from_object("c", "f", [1]).error == "arguments are a JSON list, not an object"


class TestBroken:
    """Marking a call not executable."""

    def test_keeps_what_was_received(self) -> None:
        """The raw arguments stay; the parsed ones go."""
        call = broken(call_from_string("c", "f", "{}"), "cut")
        assert (call.arguments, call.raw_arguments, call.error) == (None, "{}", "cut")

    def test_first_reason_wins(self) -> None:
        """A call already broken keeps its first reason."""
        call = broken(broken(call_from_string("c", "f", "{}"), "first"), "second")
        assert call.error == "first"
