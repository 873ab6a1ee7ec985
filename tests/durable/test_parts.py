"""The parts of agentfsm.durable that need no database: agents, versions, the conversation."""

from __future__ import annotations

import pytest

import agentfsm as af
from agentfsm.durable import DurableAgent, app_version
from agentfsm.durable._conversation import Conversation
from agentfsm.durable._registry import agent_named, register
from agentfsm.exceptions import DefinitionError, InvalidInputError
from agentfsm.testing import call, turn


def lookup(q: str) -> str:
    """Look something up."""
    return q


class TestAppVersion:
    def test_the_version_names_the_state_format(self) -> None:
        """The DBOS application version starts with agentfsm's state and event formats."""
        version = app_version([DurableAgent("a", "m", tools=[lookup])])
        assert version.startswith("agentfsm-s1-e1-w2-")

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
