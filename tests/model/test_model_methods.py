"""The methods pydantic gives every model are public names too: they validate and fail closed.

`model_copy(update=...)` and `model_construct(...)` skip validation in pydantic,
so a copied `Policy` could carry a budget that never fires or a permission
nobody understands, and a copied `ModelTurn` could crash the Controller with
an `AttributeError`. Here they validate like the constructor, and every other
method inherited from pydantic raises the model's own error on a bad argument.
"""

from __future__ import annotations

import subprocess
import sys
import warnings
from collections.abc import Callable
from importlib.util import find_spec
from typing import Any, Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

import agentfsm as af
from agentfsm._engine.policy import Policy
from agentfsm._model.limits import MAX_JSON_INDENT
from agentfsm._permissions import decide
from agentfsm.exceptions import AgentFSMError, DataError, PolicyError
from agentfsm.guards import TokenBudget
from agentfsm.guards.results import FinalTool
from agentfsm.testing import call, turn
from tests.model.test_data_errors import MODELS
from tests.strategies import odd_values

REQUIRED: dict[str, dict[str, Any]] = {
    "ToolCall": {"name": "echo"},
    "ToolResult": {"call_id": "c1"},
    "Decision": {"action": "continue", "priority": "P7", "layer": 1, "reason": "r", "guard": "g"},
    "ToolSpec": {"name": "echo"},
    "Rule": {"action": "deny", "tool": "bash"},
    "ScriptedCall": {"name": "echo"},
    "RunResult": {"exit_reason": "completed"},
    "DurableResult": {
        "run_id": "r1",
        "exit_reason": "completed",
        "text": "",
        "turns": 1,
        "decisions": [],
        "messages": [],
        "events": [],
    },
}
"""The fields each model needs; the others build from nothing."""

ALL = [*MODELS, Policy]


def example(model: type[BaseModel]) -> BaseModel:
    return model(**REQUIRED.get(model.__name__, {}))


def error_of(model: type[BaseModel]) -> type[AgentFSMError]:
    return PolicyError if model is Policy else DataError


def raised(call: Callable[[], object]) -> AgentFSMError | None:
    """Call it; return the AgentFSMError it raised, None when it returned (others escape)."""
    try:
        call()
    except AgentFSMError as exc:
        return exc
    return None


_values = odd_values()

CALLS: dict[str, Callable[[BaseModel, Any], object]] = {
    "model_dump(mode=)": lambda m, v: m.model_dump(mode=v),
    "model_dump(include=)": lambda m, v: m.model_dump(include=v),
    "model_dump(exclude=)": lambda m, v: m.model_dump(exclude=v),
    "model_dump_json(indent=)": lambda m, v: m.model_dump_json(indent=v),
    "model_json_schema(mode=)": lambda m, v: type(m).model_json_schema(mode=v),
    "model_copy(update=)": lambda m, v: m.model_copy(update=v),
    "model_copy(deep=)": lambda m, v: m.model_copy(deep=v),
    "model_construct(_fields_set=)": lambda m, v: type(m).model_construct(_fields_set=v),
    "model_construct(**)": lambda m, v: type(m).model_construct(x=v),
    "copy(update=)": lambda m, v: m.copy(update=v),
    "parse_raw()": lambda m, v: type(m).parse_raw(v),
    "schema_json(indent=)": lambda m, v: type(m).schema_json(indent=v),
}


class TestBadArgumentsRaiseTheModelsError:
    @pytest.mark.parametrize("model", ALL, ids=lambda m: m.__name__)
    @pytest.mark.parametrize("method", list(CALLS))
    @settings(deadline=None)
    @given(value=_values)
    def test_any_argument(self, model: type[BaseModel], method: str, value: Any) -> None:
        """Each inherited method works or raises the model's error (DataError, PolicyError)."""
        instance = example(model)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            error = raised(lambda: CALLS[method](instance, value))
        if error is not None:
            assert isinstance(error, error_of(model)), f"{method} raised {error!r}"
            assert "\n" not in error.message

    def test_the_error_names_the_method(self) -> None:
        """A bad argument to a dump names the model, the method and what was wrong."""
        with pytest.raises(DataError, match=r"^ToolResult\.model_dump: TypeError: "):
            af.ToolResult(call_id="c1").model_dump(mode=3)  # type: ignore[arg-type]
        with pytest.raises(PolicyError, match=r"^Policy\.model_json_schema: "):
            Policy.model_json_schema(mode="bogus")  # type: ignore[arg-type]

    def test_content_that_does_not_serialize(self) -> None:
        """A result holding an object JSON cannot hold says so as a DataError."""
        result = af.ToolResult(call_id="c1", content=object())
        with pytest.raises(DataError, match="model_dump_json: PydanticSerializationError"):
            result.model_dump_json()

    def test_an_indent_that_would_abort_the_process(self) -> None:
        """pydantic's serializer aborts the interpreter on model_dump_json(indent=2**40); the
        check runs first. In a child process, so a regression cannot take the suite down."""
        code = (
            "import agentfsm as af\n"
            "try:\n"
            "    af.ToolResult(call_id='c1').model_dump_json(indent=2**40)\n"
            "except af.exceptions.DataError as exc:\n"
            "    print(exc)\n"
        )
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
        )
        assert done.returncode == 0, done.stderr[-2000:]
        assert f"indent must be None or an int from 0 to {MAX_JSON_INDENT}" in done.stdout
        assert af.ToolResult(call_id="c1").model_dump_json(indent=MAX_JSON_INDENT)

    @pytest.mark.parametrize("model", ALL, ids=lambda m: m.__name__)
    def test_good_arguments_still_work(self, model: type[BaseModel]) -> None:
        """The wrapped methods return what pydantic's return."""
        instance = example(model)
        assert instance.model_dump(mode="json") == BaseModel.model_dump(instance, mode="json")
        assert model.model_json_schema()["title"] == model.__name__
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            assert instance.copy() == instance


class TestCopiesValidate:
    @pytest.mark.parametrize("model", ALL, ids=lambda m: m.__name__)
    @settings(deadline=None)
    @given(data=st.data())
    def test_a_copy_is_what_the_constructor_makes(self, model: type[BaseModel], data: Any) -> None:
        """model_copy(update=u) equals model(**fields | u), or raises the error it raises."""
        instance = example(model)
        name = data.draw(st.sampled_from(list(model.model_fields)))
        value = data.draw(_values)
        fields = {n: getattr(instance, n) for n in model.model_fields}
        error = raised(lambda: model(**{**fields, name: value}))
        if error is not None:
            assert isinstance(error, error_of(model))
            with pytest.raises(error_of(model)):
                instance.model_copy(update={name: value})
            return
        copied = instance.model_copy(update={name: value})
        assert copied == model(**{**fields, name: value})
        assert copied.model_fields_set == instance.model_fields_set | {name}

    def test_an_unknown_field_is_refused(self) -> None:
        """Pydantic's copy would add the field; this one names it."""
        with pytest.raises(DataError, match="zz: Extra inputs are not permitted"):
            af.ToolResult(call_id="c1").model_copy(update={"zz": 1})

    def test_a_turn_copied_with_bad_calls_never_reaches_the_controller(self) -> None:
        """A turn whose calls are a string used to crash on_model_output with AttributeError."""
        good = turn(calls=[call("bash", {"c": 1}, id="c1")])
        with pytest.raises(DataError, match="tool_calls"):
            good.model_copy(update={"tool_calls": "bash"})
        with pytest.raises(DataError, match="arguments"):
            good.tool_calls[0].model_copy(update={"arguments": [1]})
        with pytest.raises(DataError, match="tool_calls"):
            af.ModelTurn.model_construct(tool_calls=[{"id": 3}])  # type: ignore[list-item]

    def test_the_deprecated_copy_validates_its_update(self) -> None:
        """pydantic v1's copy(update=...) stored the update as it was."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            with pytest.raises(DataError, match="arguments"):
                call("echo").copy(update={"arguments": [1]})

    def test_construct_keeps_the_fields_it_is_told_were_set(self) -> None:
        """model_construct validates, and `_fields_set` still says which fields were given."""
        made = af.ToolResult.model_construct(_fields_set={"call_id"}, call_id="c1", content="x")
        assert made == af.ToolResult(call_id="c1", content="x")
        assert made.model_fields_set == {"call_id"}
        with pytest.raises(DataError, match="_fields_set must be a set of its field names"):
            af.ToolResult.model_construct(_fields_set={"nope"}, call_id="c1")


class TestCopiedPolicies:
    def test_a_copied_budget_is_the_one_enforced(self) -> None:
        """A policy used once cached its route table; its copy with max_turns=2 kept the old
        limit of 50, so the run went on past its budget."""
        used = Policy(max_turns=50)
        af.Controller(used)  # builds and caches the route table
        ctl = af.Controller(used.model_copy(update={"max_turns": 2}), tools=["bash"])
        first = ctl.on_model_output(turn(calls=[call("bash", {"c": 1}, id="c1")]))
        assert first.action == af.Action.EXECUTE_TOOLS
        ctl.on_tool_results([af.ToolResult(call_id="c1", content="ok")])
        second = ctl.on_model_output(turn(calls=[call("bash", {"c": 2}, id="c2")]))
        assert second.action == af.Action.STOP
        assert second.exit_reason == af.ExitReason.MAX_TURNS

    @pytest.mark.parametrize("verdict", ["DENY", "no", "", None, False, 0])
    def test_a_permission_nobody_understands_cannot_be_copied_in(self, verdict: Any) -> None:
        """`model_copy` used to store permissions={"bash": "DENY"} and the call ran."""
        with pytest.raises(PolicyError, match="permissions"):
            Policy().model_copy(update={"permissions": {"bash": verdict}})

    def test_a_refused_change_names_its_field_and_leaves_the_original(self) -> None:
        """The integrations change a policy by `model_copy` (MCP hints add permissions,
        LangGraph adds final tools): a bad value fails as the constructor's would, and the
        policy asked for the copy keeps what it had, the good values beside it included."""
        original = Policy(max_turns=7, permissions={"read": "allow"}, final_tools=["submit"])
        before = original.to_json()
        update = {"final_tools": original.final_tools | {"done"}, "permissions": {"rm": "DENY"}}
        with pytest.raises(PolicyError, match="permissions") as caught:
            original.model_copy(update=update)
        assert [field for field, _ in caught.value.details["problems"]] == ["permissions.rm"]
        assert original.to_json() == before
        assert original.final_tools == {"submit"}

    def test_a_change_keeps_every_other_field(self) -> None:
        """Each field but the changed one is the original's, code (hook, verifiers) included;
        every field of the original differs from its default, so a field the copy dropped
        back to its default would show."""

        def hook(_: af.ToolCall) -> Literal["allow"]:
            return "allow"

        def verifier(_: Any) -> None:
            return None

        # A Cedar source needs cedarpy (the `cedar` extra; `make install` and CI install it).
        cedar = {"cedar": "permit(principal, action, resource);"} if find_spec("cedarpy") else {}
        original = Policy(
            max_turns=9,
            max_tool_calls=4,
            max_retries=1,
            max_consecutive_tool_errors=2,
            repeat_threshold=4,
            on_repeat="stop",
            loops={"warn": 2, "tools": {"read": {"volatile": "offset"}}},
            denials_are_tool_errors=False,
            no_progress_threshold=None,
            max_tokens=1000,
            max_cost=0.5,
            on_unknown_price="stop",
            max_seconds=60,
            max_context_tokens=8000,
            on_incomplete="ask",
            on_deny="stop",
            permissions={"*": "ask"},
            permission_rules=["deny rm"],
            ask_floor=["drop"],
            permission=hook,
            handoffs=["research"],
            final_tools=["submit"],
            verifiers=[verifier],
            guards=[TokenBudget(10)],
            **cedar,
        )
        default = Policy()
        same = [n for n in Policy.model_fields if getattr(original, n) == getattr(default, n)]
        assert same == ([] if cedar else ["cedar"])
        copied = original.model_copy(update={"final_tools": original.final_tools | {"done"}})
        assert copied.final_tools == {"submit", "done"}
        for name in Policy.model_fields:
            if name != "final_tools":
                assert getattr(copied, name) == getattr(original, name), name
        assert copied.permission is hook
        assert copied.verifiers == (verifier,)
        finals = {r.guard.names for r in copied.routes.routes if isinstance(r.guard, FinalTool)}
        assert finals == {frozenset({"submit", "done"})}

    def test_a_policy_has_a_json_schema_for_its_files(self) -> None:
        """It used to raise: hooks and verifiers are code (left out), guards are strings."""
        schema = Policy.model_json_schema()
        assert schema["properties"]["guards"]["items"]["type"] == "string"
        assert "permission" not in schema["properties"]
        assert "verifiers" not in schema["properties"]
        assert schema["properties"]["max_turns"]["minimum"] == 1

    def test_construct_validates_a_policy(self) -> None:
        with pytest.raises(PolicyError, match="max_turns"):
            Policy.model_construct(max_turns="x")  # type: ignore[arg-type]


class TestPermissionsFailClosedWhereTheyAreRead:
    @settings(deadline=None)
    @given(value=_values, default=st.booleans())
    def test_a_table_entry_not_understood_denies(self, value: Any, default: bool) -> None:
        """Whatever a permission table holds, only "allow" and "ask" let a call go further."""
        table = {"*": value} if default else {"bash": value}
        verdict, source = decide(call("bash", {}, id="c1"), (), table, None)
        if type(value) is str and value in ("allow", "ask", "deny"):
            assert verdict == value
        else:
            assert verdict == "deny"
            assert "not 'allow', 'ask' or 'deny'" in source

    def test_a_policy_changed_behind_pydantics_back_denies(self) -> None:
        """Even a policy whose fields were overwritten directly cannot let a call through."""
        policy = Policy()
        object.__setattr__(policy, "permissions", {"bash": "DENY"})
        ctl = af.Controller(policy, tools=["bash"])
        decision = ctl.on_model_output(turn(calls=[call("bash", {"c": 1}, id="c1")]))
        assert decision.action != af.Action.EXECUTE_TOOLS
        assert "permission denied" in decision.reason
        assert decision.results[0].is_error
