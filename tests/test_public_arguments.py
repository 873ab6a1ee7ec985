"""Every bad argument to a public name raises an AgentFSMError subclass naming it, where given.

The Controller's own inputs have their contract tests; these are the other
entry points a host calls: normalizing, streams, policies from data or files,
the trace writer and replay. Each was found raising TypeError, AttributeError
or an OSError when given the wrong kind of value.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings

import agentfsm as af
from agentfsm import testing
from agentfsm._replay.trajectories import ModelOutput, RecordedRun, read_runs
from agentfsm.exceptions import (
    AgentFSMError,
    DataError,
    DefinitionError,
    MachineDefinitionError,
    PayloadError,
    PolicyError,
    TraceError,
)
from agentfsm.providers import Provider
from agentfsm.testing import ScriptedModel, ScriptedServer
from tests.strategies import odd_values

_odd = odd_values()


def _only_agentfsm_errors(call: Any, *args: Any) -> None:
    """Call and, if the result is an iterator, drain it: only AgentFSMError may escape."""
    try:
        result = call(*args)
        if hasattr(result, "__next__"):
            for _ in result:
                pass
    except AgentFSMError:
        pass


def _a_run() -> RecordedRun:
    turn = af.ModelTurn(text="done", finish_reason=af.FinishReason.STOP)
    return RecordedRun(id="r1", source="mem", format="test", steps=[ModelOutput(turn)])


class TestAnyArgument:
    """A property per entry point: arbitrary values raise AgentFSMError or are accepted."""

    @settings(deadline=None)
    @given(payload=_odd, provider=_odd)
    def test_normalize_and_detect(self, payload: Any, provider: Any) -> None:
        """normalize(payload, provider) and detect_provider(payload)."""
        _only_agentfsm_errors(af.normalize, payload, provider)
        _only_agentfsm_errors(af.detect_provider, payload)

    @settings(deadline=None)
    @given(provider=_odd, chunks=_odd)
    def test_stream_accumulator(self, provider: Any, chunks: Any) -> None:
        """StreamAccumulator(provider), then extend, add and end with anything."""
        try:
            stream = af.StreamAccumulator(provider)
        except AgentFSMError:
            return
        _only_agentfsm_errors(stream.extend, chunks)
        _only_agentfsm_errors(stream.add, chunks)
        _only_agentfsm_errors(stream.end)
        _only_agentfsm_errors(stream.turn)

    @settings(deadline=None)
    @given(value=_odd)
    def test_policy_from_data_and_files(self, value: Any) -> None:
        """Policy.from_mapping and Policy.from_file with anything."""
        _only_agentfsm_errors(af.Policy.from_mapping, value)
        _only_agentfsm_errors(af.Policy.from_file, value)

    @settings(deadline=None)
    @given(value=_odd)
    def test_replay_entry_points(self, value: Any) -> None:
        """replay_run, compare, read_runs and read_trace with anything."""
        _only_agentfsm_errors(af.replay_run, value)
        _only_agentfsm_errors(af.replay_run, _a_run(), value)
        _only_agentfsm_errors(af.compare, value, value)
        _only_agentfsm_errors(read_runs, value)
        _only_agentfsm_errors(af.read_trace, value)

    @settings(deadline=None)
    @given(value=_odd)
    def test_trace_writer_targets(self, value: Any, tmp_path_factory: Any) -> None:
        """TraceWriter(anything that is not a writable path or text file) raises TraceError."""
        if isinstance(value, str | bytes) and value:
            value = tmp_path_factory.mktemp("w") / "missing" / "t.jsonl"
        _only_agentfsm_errors(af.TraceWriter, value)


class TestNamedErrors:
    def test_a_provider_that_is_not_a_name(self) -> None:
        """A list as provider is an unknown provider, not an unhashable TypeError."""
        with pytest.raises(PayloadError, match=r"unknown provider \[\]"):
            af.normalize({"choices": []}, [])  # type: ignore[arg-type]
        with pytest.raises(PayloadError, match="unknown provider"):
            af.StreamAccumulator([])

    def test_extend_takes_an_iterable_of_chunks(self) -> None:
        """extend(None) and extend("text") say to use add for one chunk."""
        stream = af.StreamAccumulator()
        for value in (None, "data: {}"):
            with pytest.raises(PayloadError, match="iterable of chunks"):
                stream.extend(value)

    def test_policy_sources_of_the_wrong_kind(self) -> None:
        """A policy from a non-mapping, or a file path that is no path, is a PolicyError."""
        with pytest.raises(PolicyError, match="a policy is a mapping of fields, not str"):
            af.Policy.from_mapping("max_turns=3")  # type: ignore[arg-type]
        with pytest.raises(PolicyError, match="not NoneType"):
            af.Policy.from_file(None)  # type: ignore[arg-type]
        with pytest.raises(PolicyError, match="embedded null byte"):
            af.Policy.from_file("policy\x00.json")

    def test_trace_writer_targets_that_cannot_be_written(self, tmp_path: Path) -> None:
        """A folder, a missing folder or a non-file object: TraceError naming the target."""
        with pytest.raises(TraceError, match="Is a directory") as caught:
            af.TraceWriter(tmp_path)
        assert caught.value.details["path"] == str(tmp_path)
        with pytest.raises(TraceError, match="No such file or directory"):
            af.TraceWriter(tmp_path / "missing" / "t.jsonl")
        with pytest.raises(TraceError, match="not int"):
            af.TraceWriter(3)
        assert af.TraceWriter(io.StringIO()).events == 0  # a text file still works

    def test_replay_takes_recorded_runs(self) -> None:
        """replay_run(None), compare(None, ...) and bad observers say what was expected."""
        with pytest.raises(TraceError, match="takes a RecordedRun"):
            af.replay_run(None)
        result = af.replay_run(_a_run())
        with pytest.raises(TraceError, match="second is a NoneType"):
            af.compare(result, None)
        with pytest.raises(DefinitionError, match="observers must be a list"):
            af.replay_run(_a_run(), observers=None)

    def test_a_step_of_unknown_kind_is_not_skipped(self) -> None:
        """A recorded run holding something that is no step raises, naming the run."""
        turn = af.ModelTurn(
            tool_calls=[af.ToolCall(id="c1", name="echo", arguments={})],
            finish_reason=af.FinishReason.TOOL_CALLS,
        )
        run = RecordedRun(
            id="r2",
            source="mem",
            format="test",
            steps=[ModelOutput(turn), {"results": []}],  # type: ignore[list-item]
        )
        with pytest.raises(TraceError, match="mem: run r2: a step is a dict"):
            af.replay_run(run)


class TestGuardsAndTestingHelpers:
    def test_guards_name_their_bad_arguments(self) -> None:
        """Guards and route tables built by hand raise PolicyError/MachineDefinitionError."""
        from agentfsm._engine import RouteTable, build_routes

        with pytest.raises(PolicyError, match="on_unknown must be 'warn' or 'stop'"):
            af.guards.CostBudget(1.0, on_unknown="ignore")  # type: ignore[arg-type]
        with pytest.raises(PolicyError, match="a guard's code is a str"):
            af.guards.parse_guard(None)  # type: ignore[arg-type]
        with pytest.raises(MachineDefinitionError, match="made of Routes, not str"):
            RouteTable("routes")  # type: ignore[arg-type]
        with pytest.raises(MachineDefinitionError, match=r"routes\[0\] must be a Route"):
            RouteTable([None])  # type: ignore[list-item]
        with pytest.raises(PolicyError, match=r"build_routes takes an agentfsm\.Policy"):
            build_routes({"max_turns": 3})  # type: ignore[arg-type]

    def test_a_provider_name_outside_the_list(self) -> None:
        """Provider("bogus") lists the formats, as a DataError."""
        with pytest.raises(DataError, match="'bogus' is not a valid Provider: expected one of"):
            Provider("bogus")

    def test_testing_helpers(self) -> None:
        """The test doubles name a script or arguments of the wrong kind."""
        with pytest.raises(DataError, match="outputs must be a list"):
            ScriptedModel(None)  # type: ignore[arg-type]
        with pytest.raises(DataError, match="script must be a list of replies"):
            ScriptedServer(None)  # type: ignore[arg-type]
        with pytest.raises(DataError, match="arguments must be a mapping"):
            testing.call("echo", "x=1")  # type: ignore[arg-type]
        with pytest.raises(DataError, match="calls must be a list of ToolCall"):
            testing.turn("", None)  # type: ignore[arg-type]


class TestHelpersExportedByModules:
    """Functions a module lists in `__all__` are public names too."""

    def test_non_empty_answer_reads_a_snapshot(self) -> None:
        """A verifier called by hand with something else says what it reads."""
        from agentfsm.guards.completion import non_empty_answer

        with pytest.raises(af.exceptions.InvalidInputError, match="reads a RunSnapshot"):
            non_empty_answer(None)  # type: ignore[arg-type]
        assert non_empty_answer(af.RunSnapshot()) == "the answer is empty"

    @settings(deadline=None)
    @given(body=_odd)
    def test_last_tool_result_of_any_body(self, body: Any) -> None:
        """testing.last_tool_result reads a request body, or raises DataError."""
        _only_agentfsm_errors(testing.last_tool_result, body)

    def test_expand_paths_takes_one_path_as_one(self, tmp_path: Path) -> None:
        """A single path used to be read as a list of one-letter patterns."""
        from agentfsm._replay.trajectories import expand_paths

        file = tmp_path / "run.jsonl"
        file.write_text("{}\n")
        assert expand_paths(str(file)) == [(str(file), True)]
        assert expand_paths(file) == [(str(file), True)]  # type: ignore[arg-type]
        with pytest.raises(TraceError, match="a list of paths or globs, not int"):
            expand_paths(3)  # type: ignore[arg-type]
        with pytest.raises(
            TraceError, match=r"expand_paths takes a path \(str or os.PathLike\), not NoneType"
        ):
            expand_paths([None])  # type: ignore[list-item]
        with pytest.raises(TraceError, match="NUL"):
            expand_paths(["a\0b"])

    def test_handoff_helpers_name_their_arguments(self) -> None:
        from agentfsm._runner.agents import Agent, child_messages, child_result

        with pytest.raises(af.exceptions.InvalidInputError, match="agent must be an agentfsm"):
            child_messages(None, testing.call("child"))  # type: ignore[arg-type]
        with pytest.raises(af.exceptions.InvalidInputError, match="call must be the handoff"):
            child_messages(Agent(), None)  # type: ignore[arg-type]
        with pytest.raises(af.exceptions.InvalidInputError, match="child_result takes"):
            child_result(None, "completed", "", None)  # type: ignore[arg-type]
        messages = child_messages(Agent(instructions="be brief"), testing.call("c", {"task": "t"}))
        assert messages == [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "t"},
        ]


class TestVocabularyLookups:
    @pytest.mark.parametrize(
        "enum", [af.Action, af.ExitReason, af.FinishReason, af.Priority, af.State, Provider]
    )
    @settings(deadline=None)
    @given(name=_odd)
    def test_a_member_name_outside_the_set(self, enum: Any, name: Any) -> None:
        """State["BOGUS"] raised KeyError; it is a DataError listing the member names."""
        try:
            member = enum[name]
        except DataError as exc:
            error = exc
        else:
            assert member.name == name
            return
        assert error.message.endswith(", ".join(enum.__members__))

    @pytest.mark.parametrize("enum", [af.Action, af.State, Provider])
    def test_the_functional_api_cannot_extend_a_vocabulary(self, enum: Any) -> None:
        """State("x", "y") raised TypeError (Python's "cannot extend")."""
        with pytest.raises(DataError, match="is a closed vocabulary"):
            enum("x", "y")
        assert enum[next(iter(enum.__members__))] is next(iter(enum))
