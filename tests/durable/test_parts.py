"""The parts of agentfsm.durable that need no database: agents, versions, the conversation."""

from __future__ import annotations

import asyncio
import base64
import json
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from dbos._serialization import deserialize_args, deserialize_exception, deserialize_value
from hypothesis import example, given, settings
from hypothesis import strategies as st

import agentfsm as af
from agentfsm import durable
from agentfsm._runner.executor import ToolOptions, tool
from agentfsm.durable import DurableAgent, app_version
from agentfsm.durable._conversation import Conversation
from agentfsm.durable._registry import agent_named, register
from agentfsm.durable._serializer import (
    JsonSerializer,
    RecordedError,
    failure_text,
    refuse_pickles,
)
from agentfsm.exceptions import (
    AgentFSMError,
    CheckpointError,
    DefinitionError,
    InvalidInputError,
    RunError,
    ToolDefinitionError,
)
from agentfsm.testing import call, turn
from tests.strategies import Raising, RaisingMapping, hostile_values

_odd = hostile_values()


def lookup(q: str) -> str:
    """Look something up."""
    return q


class TestAppVersion:
    def test_the_version_names_the_state_format(self) -> None:
        """The DBOS application version starts with agentfsm's state and event formats."""
        version = app_version([DurableAgent("a", "m", tools=[lookup])])
        assert version.startswith("agentfsm-s1-e1-w4-")

    def test_equal_agents_give_equal_versions(self) -> None:
        """Two processes declaring the same agents record runs under the same version."""
        one = app_version([DurableAgent("a", "m", tools=[lookup], policy=af.Policy(max_turns=9))])
        two = app_version([DurableAgent("a", "m", tools=[lookup], policy=af.Policy(max_turns=9))])
        assert one == two

    @pytest.mark.parametrize(
        "other",
        [
            DurableAgent("a", "m", tools=[lookup], policy=af.Policy(max_turns=8)),
            DurableAgent("a", "other-model", tools=[lookup], policy=af.Policy(max_turns=9)),
            DurableAgent("a", "m", tools=["lookup"], policy=af.Policy(max_turns=9)),
            DurableAgent("b", "m", tools=[lookup], policy=af.Policy(max_turns=9)),
        ],
    )
    def test_a_changed_agent_changes_the_version(self, other: DurableAgent) -> None:
        """A different policy, model, tool or name gives another version: no silent replay."""
        mine = DurableAgent("a", "m", tools=[lookup], policy=af.Policy(max_turns=9))
        assert app_version([mine]) != app_version([other])


class TestRegistry:
    def test_an_agent_is_found_by_name(self) -> None:
        """A declared agent is found by the name its runs record."""
        agent = DurableAgent("found", "m")
        register([agent])
        assert agent_named("found") is agent

    def test_an_undeclared_agent_is_named_in_the_error(self) -> None:
        """A run of an agent this process did not declare raises, naming it and the known ones."""
        register([DurableAgent("known", "m")])
        with pytest.raises(InvalidInputError, match=r"'ghost'.*known"):
            agent_named("ghost")

    def test_a_name_declared_twice_is_an_error(self) -> None:
        """Two agents under one name cannot both be recovered by it."""
        with pytest.raises(DefinitionError, match="twice"):
            register([DurableAgent("x", "m"), DurableAgent("x", "n")])

    def test_the_api_key_never_reaches_the_recorded_request(self) -> None:
        """The key is added by the step from the agent, not carried in the recorded inputs."""
        agent = DurableAgent("k", "m", api_key="sk-secret", tools=[lookup])
        assert "sk-secret" not in str(agent.fingerprint())
        assert agent.request_options()["api_key"] == "sk-secret"


class TestConversation:
    def test_every_answered_call_is_followed_by_its_result(self) -> None:
        """A settled round is the assistant turn, then one tool message per answered call."""
        talk = Conversation([{"role": "user", "content": "hi"}])
        talk.output(turn(calls=[call("lookup", {"q": "a"}, id="c1")]))
        talk.answer([af.ToolResult(call_id="c1", content={"found": 1})])
        talk.settle()
        assert talk.messages[1]["tool_calls"][0]["id"] == "c1"
        assert talk.messages[2] == {"role": "tool", "tool_call_id": "c1", "content": '{"found": 1}'}

    def test_a_retried_output_is_not_part_of_the_conversation(self) -> None:
        """An output dropped for a retry never reaches the model."""
        talk = Conversation([{"role": "user", "content": "hi"}])
        talk.output(turn("cut", finish="length"))
        talk.drop()
        talk.settle()
        assert talk.messages == [{"role": "user", "content": "hi"}]


class TestArguments:
    """Each entry point names a bad argument before it reaches DBOS or the database."""

    @pytest.mark.parametrize(
        ("args", "kwargs", "match"),
        [
            ((3, "m"), {}, "needs a name"),
            (("a", None), {}, "model must be a litellm model name"),
            (("a", "m"), {"policy": "strict"}, "durable agent 'a': policy must be"),
            (("a", "m"), {"human_timeout": -1}, "finite human_timeout >= 0"),
            (("a", "m"), {"on_progress": "print"}, "on_progress must be callable"),
            (("a", "m"), {"api_key": 42}, "api_key must be a str"),
        ],
    )
    def test_a_bad_agent(self, args: tuple[Any, ...], kwargs: dict[str, Any], match: str) -> None:
        """DurableAgent checks every argument where it is given."""
        with pytest.raises(AgentFSMError, match=match):
            DurableAgent(*args, **kwargs)

    @pytest.mark.parametrize("agents", ["a", None, [None], ["a"], {"a": 1}])
    def test_agents_must_be_durable_agents(self, agents: Any) -> None:
        """launch/register/app_version take a list of DurableAgent: a string is not one."""
        with pytest.raises(DefinitionError, match="DurableAgent"):
            register(agents)
        with pytest.raises(DefinitionError, match="DurableAgent"):
            app_version(agents)

    def test_launch_checks_its_settings_first(self) -> None:
        """A database URL or a config of the wrong kind is refused before DBOS starts."""
        with pytest.raises(DefinitionError, match="database_url must be a non-empty str"):
            durable.launch([], database_url=None)  # type: ignore[arg-type]
        with pytest.raises(DefinitionError, match="config must be a mapping"):
            durable.launch([], config=[("executor_id", "x")])  # type: ignore[arg-type]
        with pytest.raises(DefinitionError, match="other_versions must be 'refuse' or 'leave'"):
            durable.launch([], other_versions="run")  # type: ignore[arg-type]

    @pytest.mark.parametrize("approved", ["no", "yes", 0, 1, None, [True]])
    def test_only_true_or_false_answers_a_human_question(self, approved: Any) -> None:
        """reply(run, "no") approved the calls (bool("no") is True): now anything but a bool
        is refused before the run is even looked up."""
        with pytest.raises(InvalidInputError, match="approved must be True or False"):
            durable.reply("run-1", approved)

    @pytest.mark.parametrize("run_id", [None, "", 3, ["r"]])
    def test_a_run_id_is_a_non_empty_string(self, run_id: Any) -> None:
        """status, asked, reply and result name a run id of the wrong kind."""
        for entry in (durable.status, durable.asked, durable.result):
            with pytest.raises(InvalidInputError, match="run_id must be a non-empty str"):
                entry(run_id)
        with pytest.raises(InvalidInputError, match="run_id must be a non-empty str"):
            durable.reply(run_id, True)

    @pytest.mark.parametrize("timeout", [-1, float("nan"), "10", True])
    def test_result_timeout_is_seconds(self, timeout: Any) -> None:
        """result(run, timeout=...) takes seconds >= 0 or None."""
        with pytest.raises(
            InvalidInputError, match=r"result: timeout must be a number|finite timeout >= 0"
        ):
            durable.result("run-1", timeout=timeout)

    def test_start_names_agent_and_messages(self) -> None:
        """start(None, ...) and messages that are not a conversation are refused."""
        register([DurableAgent("starter", "m")])
        with pytest.raises(InvalidInputError, match="agent must be a name or a DurableAgent"):
            durable.start(None, "hi")  # type: ignore[arg-type]
        with pytest.raises(InvalidInputError, match="messages must be a str or a list"):
            durable.start("starter", [1, 2])  # type: ignore[list-item]
        with pytest.raises(InvalidInputError, match="messages must be a str or a list"):
            durable.start("starter", 5)  # type: ignore[arg-type]

    @settings(deadline=None)
    @given(
        database_url=_odd | st.just("sqlite:///never.sqlite"),
        name=_odd | st.just("agentfsm"),
        executor_id=_odd | st.none(),
        config=_odd | st.sampled_from([None, {}, {1: 2}, {"serializer": 1}]),
        other_versions=_odd | st.sampled_from(["refuse", "leave"]),
    )
    @example(
        database_url="sqlite:///x",
        name="a",
        executor_id=None,
        config=RaisingMapping(),
        other_versions="leave",
    )
    @example(
        database_url="sqlite:///x",
        name="a",
        executor_id=None,
        config={1: 2},
        other_versions="leave",
    )
    @example(
        database_url=Raising(),
        name=Raising(),
        executor_id=Raising(),
        config=Raising(),
        other_versions=Raising(),
    )
    def test_launch_settings_of_any_value(
        self, database_url: Any, name: Any, executor_id: Any, config: Any, other_versions: Any
    ) -> None:
        """Every setting is checked before the agents (None here, so DBOS never starts):
        a DefinitionError whatever they hold, never DBOS's or Python's own error."""
        with pytest.raises(DefinitionError, match=r"launch: |agents must be a list"):
            durable.launch(
                None,  # type: ignore[arg-type]
                database_url=database_url,
                name=name,
                executor_id=executor_id,
                config=config,
                other_versions=other_versions,
            )

    @settings(deadline=None)
    @given(executor_id=_odd)
    @example(executor_id=Raising())
    @example(executor_id="worker-\udc80")
    def test_recover_any_executor_id(self, executor_id: Any) -> None:
        """recover(anything): InvalidInputError for a value that is no id; a RunError (no DBOS
        launched in this process) or the runs taken over for one that is."""
        try:
            taken = durable.recover(executor_id)
        except InvalidInputError as exc:
            error = exc.message
        except RunError:  # any other error, agentfsm's or not, fails the test
            return
        else:
            assert isinstance(taken, list)
            return
        assert error.startswith(
            ("recover: executor_id must be a non-empty str", "recover: executor_id holds a lone")
        ), error

    def test_before_launch_dbos_failures_are_run_errors(self) -> None:
        """In a process that never launched, status() is a RunError that says to launch."""
        code = (
            "from agentfsm import durable\n"
            "from agentfsm.exceptions import RunError\n"
            "try:\n    durable.status('run-1')\n"
            "except RunError as exc:\n    print('RunError:', exc)\n"
        )
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
        )
        assert done.returncode == 0, done.stderr
        assert "RunError: status:" in done.stdout
        assert "launch" in done.stdout


@tool(idempotent=True)
def charge(amount: int) -> str:
    """Charge by an idempotency key."""
    return str(amount)


def transfer(amount: int) -> str:
    """Transfer money."""
    return str(amount)


class TestRetrySafety:
    def test_only_tools_declared_idempotent_may_run_again(self) -> None:
        """`@tool(idempotent=True)` may re-run on recovery; any other callable runs at most once."""
        agent = DurableAgent("pay", "m", tools=[charge, transfer, "by_name"])
        assert agent.once == frozenset({"transfer"})

    def test_options_declare_tools_that_cannot_be_marked(self) -> None:
        """`options=` declares what `@tool` cannot mark, and overrides the mark."""
        agent = DurableAgent(
            "pay",
            "m",
            tools=[charge, transfer],
            options={"transfer": ToolOptions(idempotent=True), "charge": ToolOptions()},
        )
        assert agent.once == frozenset({"charge"})

    @pytest.mark.parametrize(
        ("options", "match"),
        [
            ({"ghost": ToolOptions()}, "undeclared tool"),
            ({"transfer": {"idempotent": True}}, "must be a ToolOptions"),
            ([("transfer", ToolOptions())], "options must map tool names"),
        ],
    )
    def test_bad_options_are_named(self, options: Any, match: str) -> None:
        """Options for a tool not declared, or not ToolOptions, are refused where given."""
        with pytest.raises(ToolDefinitionError, match=match):
            DurableAgent("pay", "m", tools=[transfer], options=options)

    def test_a_changed_declaration_changes_the_version(self) -> None:
        """Declaring a tool idempotent changes the steps a run records: another version."""
        once = DurableAgent("pay", "m", tools=[transfer])
        again = DurableAgent(
            "pay", "m", tools=[transfer], options={"transfer": ToolOptions(idempotent=True)}
        )
        assert app_version([once]) != app_version([again])

    def test_the_key_is_only_known_inside_a_durable_tool(self) -> None:
        """idempotency_key() outside a durable tool call is a RunError, not a made-up key."""
        with pytest.raises(RunError, match="only known inside a tool"):
            durable.idempotency_key()


class TestSerializer:
    def test_values_and_failures_round_trip_as_json(self) -> None:
        """Values go in as JSON data; a failure keeps its type's name and text, not the object."""
        codec = JsonSerializer()
        value = {"a": [1, 2.5, None, "é"]}
        assert json.loads(codec.serialize(value)) == {"value": value}
        assert codec.deserialize(codec.serialize(value)) == value
        back = codec.deserialize(codec.serialize(KeyError("gone")))
        assert isinstance(back, RecordedError)
        assert failure_text(back) == failure_text(KeyError("gone")) == "KeyError: 'gone'"

    @pytest.mark.parametrize(
        "text", ["gASVAAAAAAAAAACMBGhpZGWUhZQu", "[1]", '{"value": 1, "x": 2}', '{"error": 1}']
    )
    def test_anything_else_is_a_checkpoint_error(self, text: str) -> None:
        """Text that is not agentfsm's JSON is refused, never interpreted another way."""
        with pytest.raises(CheckpointError, match="cannot be read"):
            JsonSerializer().deserialize(text)

    def test_dbos_refuses_a_row_that_names_pickle(self, tmp_path: Path) -> None:
        """After refuse_pickles, DBOS's reader for rows labelled py_pickle runs no code."""
        marker = tmp_path / "marker"
        payload = base64.b64encode(pickle.dumps(_Hostile(str(marker)))).decode()
        refuse_pickles()
        for read in (deserialize_value, deserialize_exception, deserialize_args):
            with pytest.raises(CheckpointError, match="pickle format"):
                read(payload, "py_pickle", JsonSerializer())
        assert not marker.exists()

    def test_launch_refuses_another_serializer(self) -> None:
        """config cannot put pickle (or anything but agentfsm's JSON) back."""
        with pytest.raises(DefinitionError, match="may not set 'serializer'"):
            durable.launch([], config={"serializer": object()})


class _Hostile:
    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (open, (self.marker, "w"))


class _UnprintableError(Exception):
    def __str__(self) -> str:
        raise ValueError("its __str__ raises")


def unprintable() -> str:
    """Fail with an exception whose message cannot be shown."""
    raise _UnprintableError


def verbose() -> str:
    """Fail with a very long message."""
    raise RuntimeError("x" * 200_000)


class TestToolErrors:
    def _run(self, name: str) -> dict[str, Any]:
        from agentfsm.durable._workflow import tool_step

        register([DurableAgent("failing", "m", tools=[unprintable, verbose])])
        payload = {"id": "c1", "name": name, "arguments": {}}
        output: dict[str, Any] = asyncio.run(tool_step("failing", payload, "k", False))
        return output

    def test_an_exception_whose_str_raises_is_still_the_calls_error(self) -> None:
        """The error result names the type and says the message cannot be shown, as the executor."""
        output = self._run("unprintable")
        assert output["is_error"] is True
        assert output["content"] == (
            "_UnprintableError (its message cannot be shown: str() raised ValueError)"
        )

    def test_a_long_error_is_cut_like_a_long_result(self) -> None:
        """An error text past the executor's 50,000 characters is cut with a marker."""
        output = self._run("verbose")
        assert output["content"].startswith("RuntimeError: xxx")
        assert len(output["content"]) < 50_200
        assert "[... cut: the result was 200,014 characters" in output["content"]
