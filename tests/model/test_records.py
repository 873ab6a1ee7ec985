"""RunSnapshot and Decision are plain frozen records: validated when a user builds one,
cheap in the step, dumped as the pydantic models they were."""

from __future__ import annotations

import copy
import pickle
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import agentfsm as af
from agentfsm._model.records import validator_of
from agentfsm._model.snapshot import FIELDS, RunSnapshot, unchecked_evolve
from agentfsm.exceptions import DataError
from tests.strategies import odd_values, snapshots

_names = st.sampled_from([*FIELDS, "unknown_field"])


class TestBuiltByAUser:
    @settings(deadline=None)
    @given(st.dictionaries(_names, odd_values(), max_size=len(FIELDS) + 1))
    def test_any_fields_build_or_raise_data_error(self, fields: dict[str, Any]) -> None:
        """RunSnapshot(**anything) builds, holding what the validator made, or raises DataError."""
        error = None
        try:
            snap = RunSnapshot(**fields)
        except DataError as exc:
            error = exc
        if error is not None:
            assert error.message.startswith("RunSnapshot: ")
            assert error.details["problems"]
            assert "\n" not in error.message
            return
        assert snap.as_dict() == validator_of(RunSnapshot).model_validate(fields).__dict__
        assert set(snap.as_dict()) == set(FIELDS)

    def test_the_validator_has_the_record_s_fields_and_defaults(self) -> None:
        """One declaration: the pydantic check is made from the record's annotations."""
        model = validator_of(RunSnapshot)
        assert tuple(model.model_fields) == FIELDS
        assert RunSnapshot().as_dict() == model().__dict__
        assert RunSnapshot().phase == "model_output"

    def test_a_bad_value_names_the_field(self) -> None:
        with pytest.raises(DataError, match=r"RunSnapshot: turn: Input should be a valid integer"):
            RunSnapshot(turn="many")
        with pytest.raises(DataError, match=r"RunSnapshot: executable\.0"):
            RunSnapshot(executable=({"name": 3},))

    def test_nested_mappings_become_models(self) -> None:
        """A call given as a mapping is validated into a ToolCall, as pydantic did."""
        snap = RunSnapshot(executable=[{"id": "c1", "name": "echo", "arguments": {"x": 1}}])
        assert snap.executable == (af.ToolCall(id="c1", name="echo", arguments={"x": 1}),)


class TestFrozenRecord:
    @given(snapshots())
    def test_copies_pickles_and_equality(self, snap: RunSnapshot) -> None:
        """Pickle and copy give an equal snapshot; replace() validates and changes one field."""
        assert pickle.loads(pickle.dumps(snap)) == snap
        assert copy.copy(snap) == snap
        assert copy.deepcopy(snap) == snap
        later = snap.replace(turn=snap.turn + 1)
        assert later.turn == snap.turn + 1
        assert later != snap
        assert later.replace(turn=snap.turn) == snap

    @given(snapshots(), st.sampled_from(FIELDS))
    def test_no_field_can_be_set_or_deleted(self, snap: RunSnapshot, name: str) -> None:
        before = snap.as_dict()
        with pytest.raises(DataError, match="frozen"):
            setattr(snap, name, None)
        with pytest.raises(DataError, match="frozen"):
            delattr(snap, name)
        assert snap.as_dict() == before

    def test_not_hashable_and_not_equal_to_other_types(self) -> None:
        snap = RunSnapshot()
        with pytest.raises(TypeError):
            hash(snap)
        assert snap != snap.as_dict()
        assert repr(RunSnapshot(turn=2)).startswith("RunSnapshot(run_id='run', phase=")

    @given(snapshots(), snapshots())
    def test_the_step_s_evolve_equals_a_validated_replace(
        self, snap: RunSnapshot, other: RunSnapshot
    ) -> None:
        """The step's unvalidated copy holds what a validated replace holds, for valid values."""
        changes = {"turn": other.turn, "incomplete_in_a_row": other.incomplete_in_a_row}
        assert unchecked_evolve(snap, **changes) == snap.replace(**changes)
        assert type(unchecked_evolve(snap)) is RunSnapshot


class TestTheStepGivesGuardsSnapshots:
    def test_a_guard_reads_a_run_snapshot_with_the_run_s_counters(self) -> None:
        seen: list[RunSnapshot] = []

        def record(snap: RunSnapshot) -> None:
            seen.append(snap)

        ctl = af.Controller(af.Policy(verifiers=(record,)))
        ctl.on_model_output(af.ModelTurn(text="done", finish_reason=af.FinishReason.STOP))
        (snap,) = seen
        assert type(snap) is RunSnapshot
        assert snap.turn == 1
        assert snap.phase == "model_output"
        assert snap.output is not None
        assert snap.output.text == "done"
        assert snap.run_id == ctl.run_id
        with pytest.raises(DataError):
            snap.turn = 5


def _decisions() -> list[af.Decision]:
    """Real decisions of every action kind a run makes, from a scripted run."""
    ctl = af.Controller(af.Policy(permissions={"rm": "ask"}), tools=["echo", "rm"])
    made = [
        ctl.on_model_output(
            af.ModelTurn(tool_calls=[af.ToolCall(id="a", name="echo", arguments={"x": [1]})])
        )
    ]
    made.append(ctl.on_tool_results([af.ToolResult(call_id="a", content={"ok": True})]))
    made.append(
        ctl.on_model_output(af.ModelTurn(tool_calls=[af.ToolCall(id="b", name="rm", arguments={})]))
    )
    made.append(ctl.on_human_reply(False, "no"))
    made.append(ctl.on_model_output(af.ModelTurn(text="done")))
    return made


class TestDecision:
    def test_dumps_as_the_pydantic_model_of_its_fields(self) -> None:
        """model_dump (both modes, with options) and JSON equal pydantic's for the same fields."""
        model = validator_of(af.Decision)
        decisions = _decisions()
        assert {d.action for d in decisions} >= {
            af.Action.EXECUTE_TOOLS,
            af.Action.CONTINUE,
            af.Action.ASK_HUMAN,
            af.Action.FINAL,
        }
        for d in decisions:
            twin = model.model_validate(d.as_dict())
            assert d.model_dump() == twin.model_dump()
            assert d.model_dump(mode="json") == twin.model_dump(mode="json")
            assert d.model_dump(include={"action"}, exclude_none=True) == {"action": d.action}
            assert d.model_dump_json() == twin.model_dump_json()
            assert af.Decision.model_validate_json(d.model_dump_json()) == d
            assert af.Decision.model_validate(d.model_dump()) == d
            assert af.Decision.model_validate(d) is d
            assert pickle.loads(pickle.dumps(d)) == d

    def test_a_field_of_a_pydantic_model(self) -> None:
        """RunResult holds decisions: validated in, dumped out in the outer dump's mode."""
        from agentfsm._runner.session import RunResult

        decisions = _decisions()
        field = RunResult.model_fields["decisions"]
        assert field.annotation == list[af.Decision]
        schema = af.Decision.model_json_schema()
        assert set(schema["properties"]) == set(af.Decision.model_fields)
        dumped = [d.model_dump(mode="json") for d in decisions]
        from pydantic import TypeAdapter

        adapter = TypeAdapter(list[af.Decision])
        assert adapter.dump_python(decisions, mode="json") == dumped
        assert adapter.validate_python(dumped) == decisions
        assert adapter.validate_python(decisions) == decisions
        with pytest.raises(Exception, match="action"):
            adapter.validate_python([{**dumped[0], "action": "fly"}])

    @settings(deadline=None)
    @given(st.dictionaries(st.sampled_from([*af.Decision.model_fields, "x"]), odd_values()))
    def test_copies_validate_like_the_constructor(self, update: dict[str, Any]) -> None:
        """model_copy(update=...) builds what the constructor builds, or raises DataError."""
        (d, *_) = _decisions()
        error = None
        try:
            copied = d.model_copy(update=update)
        except DataError as exc:
            error = exc
        if error is not None:
            assert error.message.startswith("Decision: ")
            with pytest.raises(DataError):
                af.Decision(**{**d.as_dict(), **update})
            return
        assert copied == af.Decision(**{**d.as_dict(), **update})

    def test_bad_copy_arguments_and_assignment(self) -> None:
        (d, *_) = _decisions()
        with pytest.raises(DataError, match="deep must be"):
            d.model_copy(deep="yes")  # type: ignore[arg-type]
        with pytest.raises(DataError, match="update must be a mapping"):
            d.model_copy(update=[("turn", 1)])  # type: ignore[arg-type]
        with pytest.raises(DataError, match="frozen"):
            d.turn = 4
        with pytest.raises(DataError, match=r"Decision\.model_dump_json: indent"):
            d.model_dump_json(indent=-1)
        with pytest.raises(DataError, match=r"Decision\.model_dump"):
            d.model_dump(include=3)
        deep = d.model_copy(deep=True)
        assert deep == d
        assert deep.tool_calls[0].arguments is not d.tool_calls[0].arguments
