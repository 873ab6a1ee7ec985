"""Each integration names a bad argument with an AgentFSMError where it is given, not mid-run.

Found by calling every entry point with values of the wrong kind: a policy that is not one
was only noticed at the first model call; a tool list given as a string became one tool
per letter; the frameworks' own errors (an unknown model name, a config missing a field)
escaped as theirs. The frameworks and their test doubles are the real ones.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from agents import Agent
from agents.testing import ScriptedModel
from hypothesis import example, given, settings
from hypothesis import strategies as st
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from minisweagent.environments.local import LocalEnvironment
from minisweagent.models.test_models import DeterministicToolcallModel
from pydantic_ai.models.function import FunctionModel

import agentfsm as af
from agentfsm.exceptions import (
    DefinitionError,
    InvalidInputError,
    PolicyError,
    ToolDefinitionError,
)
from agentfsm.integrations import langgraph, mini_swe_agent, openai_agents, pydantic_ai
from tests.strategies import Raising, hostile_values

BAD_POLICIES = ["max_turns=3", 3, ["max_turns"], {"max_turns": "many"}]


def _fake_chat() -> FakeListChatModel:
    return FakeListChatModel(responses=["done"])


class TestLangGraph:
    @pytest.mark.parametrize("policy", BAD_POLICIES)
    def test_a_bad_policy_fails_at_decide(self, policy: Any) -> None:
        """Decide(policy=...) raises PolicyError at once."""
        with pytest.raises(PolicyError, match="policy"):
            langgraph.Decide(policy)

    def test_a_string_is_not_a_list_of_tools(self) -> None:
        """tools="bash" was read as the tools b, a, s, h."""
        with pytest.raises(ToolDefinitionError, match="not str"):
            langgraph.Decide(tools="bash")
        with pytest.raises(ToolDefinitionError, match="not str"):
            langgraph.create_agent(_fake_chat(), "bash")

    def test_the_model_must_be_a_runnable(self) -> None:
        """create_agent("gpt-4o", tools) says what a model is."""
        with pytest.raises(DefinitionError, match="Runnable, not str"):
            langgraph.create_agent("gpt-4o", [])  # type: ignore[arg-type]

    def test_a_tool_the_tool_node_cannot_run(self) -> None:
        """A bare name cannot run in a ToolNode: ToolDefinitionError, not AttributeError."""
        with pytest.raises(ToolDefinitionError, match="ToolNode cannot run"):
            langgraph.create_agent(_fake_chat(), ["bash"])

    def test_node_names_are_strings(self) -> None:
        """A node name that is no string is refused."""
        with pytest.raises(DefinitionError, match="tools_node must be a node name"):
            langgraph.Decide(tools_node=3)  # type: ignore[arg-type]

    def test_good_arguments_still_build(self) -> None:
        """The checks do not refuse what worked."""
        assert langgraph.create_agent(_fake_chat(), [], {"max_turns": 3}) is not None  # type: ignore[arg-type]


class TestOpenAIAgents:
    @pytest.mark.parametrize("policy", BAD_POLICIES)
    def test_a_bad_policy_fails_at_governed(self, policy: Any) -> None:
        """governed(agent, policy) raises PolicyError before any model is made."""
        with pytest.raises(PolicyError, match="policy"):
            openai_agents.governed(Agent(name="a", model=ScriptedModel([])), policy)

    def test_only_an_agent_is_governed(self) -> None:
        """governed(None) and GovernedModel("gpt-4o") say what they take."""
        with pytest.raises(DefinitionError, match=r"agents\.Agent, not NoneType"):
            openai_agents.governed(None)  # type: ignore[arg-type]
        with pytest.raises(DefinitionError, match="Agents SDK Model, not str"):
            openai_agents.GovernedModel("gpt-4o")  # type: ignore[arg-type]

    def test_a_model_name_the_sdk_does_not_know(self) -> None:
        """The SDK's UserError for an unknown prefix becomes a DefinitionError naming it."""
        with pytest.raises(DefinitionError, match="bogus/x"):
            openai_agents.governed(Agent(name="a", model="bogus/x"))

    def test_decisions_takes_a_run_result(self) -> None:
        """decisions(None) is InvalidInputError."""
        with pytest.raises(InvalidInputError, match=r"result of Runner\.run"):
            openai_agents.decisions(None)  # type: ignore[arg-type]


class TestPydanticAI:
    @staticmethod
    def _model() -> FunctionModel:
        return FunctionModel(lambda messages, info: None)  # type: ignore[arg-type,return-value]

    @pytest.mark.parametrize("policy", BAD_POLICIES)
    def test_a_bad_policy_fails_at_once(self, policy: Any) -> None:
        """GovernedModel(model, policy) raises PolicyError at once."""
        with pytest.raises(PolicyError, match="policy"):
            pydantic_ai.GovernedModel(self._model(), policy)

    def test_what_is_wrapped(self) -> None:
        """A model name pydantic-ai does not know, or no model at all, is a DefinitionError."""
        with pytest.raises(DefinitionError, match="GovernedModel: model 'no-such-model'"):
            pydantic_ai.GovernedModel("no-such-model")
        with pytest.raises(DefinitionError, match="not NoneType"):
            pydantic_ai.GovernedModel(None)  # type: ignore[arg-type]

    def test_toolset_takes_tools(self) -> None:
        """toolset("bash") and toolset of things pydantic-ai cannot use are refused."""
        model = pydantic_ai.GovernedModel(self._model())
        with pytest.raises(ToolDefinitionError, match="not str"):
            model.toolset("bash")
        with pytest.raises(ToolDefinitionError, match="cannot make tools"):
            model.toolset([3])


class TestMiniSweAgent:
    CONFIG: dict[str, Any] = {"system_template": "s", "instance_template": "{{task}}"}  # noqa: RUF012

    def test_a_bad_policy_or_approver(self, tmp_path: Path) -> None:
        """policy and approve are checked before the agent is made."""
        model, env = DeterministicToolcallModel(outputs=[]), LocalEnvironment(cwd=str(tmp_path))  # type: ignore[no-untyped-call]
        with pytest.raises(PolicyError, match="GovernedAgent: policy"):
            mini_swe_agent.GovernedAgent(model, env, policy="strict", **self.CONFIG)  # type: ignore[arg-type]
        with pytest.raises(DefinitionError, match="approve must be a function"):
            mini_swe_agent.GovernedAgent(model, env, approve=True, **self.CONFIG)  # type: ignore[arg-type]

    def test_mini_swe_agents_own_config_errors(self, tmp_path: Path) -> None:
        """A config missing its templates is a DefinitionError naming each field."""
        model, env = DeterministicToolcallModel(outputs=[]), LocalEnvironment(cwd=str(tmp_path))  # type: ignore[no-untyped-call]
        with pytest.raises(DefinitionError, match="system_template: Field required"):
            mini_swe_agent.GovernedAgent(model, env)
        assert af.Policy() == mini_swe_agent.GovernedAgent(model, env, **self.CONFIG).policy


class TestLangGraphState:
    @pytest.mark.parametrize("state", [None, "x", [], {"messages": "x"}, {}])
    def test_a_state_that_is_not_agent_state(self, state: Any) -> None:
        """The decide node called with something that is no graph state names it."""
        with pytest.raises(InvalidInputError, match="graph state"):
            langgraph.Decide()(state)


_odd = hostile_values()


def _each_integration(on_decline: Any, observers: Any, cwd: Path) -> list[Callable[[], Any]]:
    """Builds each integration's governed object with these on_decline and observers."""
    swe_model = DeterministicToolcallModel(outputs=[])  # type: ignore[no-untyped-call]
    env = LocalEnvironment(cwd=str(cwd))
    given = {"on_decline": on_decline, "observers": observers}
    return [
        lambda: langgraph.Decide(**given),
        lambda: openai_agents.GovernedModel(ScriptedModel([]), **given),
        lambda: pydantic_ai.GovernedModel(TestPydanticAI._model(), **given),
        lambda: mini_swe_agent.GovernedAgent(swe_model, env, **given, **TestMiniSweAgent.CONFIG),
    ]


class TestOnDeclineAndObservers:
    """on_decline= and observers= of the four integrations, with any value."""

    @settings(deadline=None)
    @given(
        on_decline=st.sampled_from(["stop", "feedback"]) | _odd,
        observers=st.sampled_from([(), [print]]) | _odd,
    )
    @example(on_decline=Raising(), observers=())
    @example(on_decline="stop", observers=None)
    @example(on_decline="stop", observers=[3])
    @example(on_decline="stop", observers=Raising())
    @example(on_decline="stop", observers="print")
    def test_any_value_is_taken_or_refused_at_once(
        self, on_decline: Any, observers: Any, tmp_path_factory: pytest.TempPathFactory
    ) -> None:
        """A DefinitionError when given, or settings a run can use: never an error mid-run."""
        for build in _each_integration(on_decline, observers, tmp_path_factory.getbasetemp()):
            error: str | None
            try:
                built = build()
            except DefinitionError as exc:  # any other error, agentfsm's or not, fails the test
                error = exc.message
            else:
                error = None
            if error is not None:
                assert "on_decline" in error or "observers" in error
                continue
            assert built.on_decline in ("stop", "feedback")
            assert type(built.on_decline) is str
            # What each run's Controller is given: a list of callables (what they do with an
            # event, `int` raising on one, is the observer's own business, as for a Controller).
            assert type(built.observers) is list
            assert all(callable(o) for o in built.observers)
