"""The OpenAI Agents SDK with agentfsm deciding, beside the SDK's own `Runner` loop.

Both run the SDK's own test double, `agents.testing.ScriptedModel`, with real function tools;
each test says what the SDK does natively and what agentfsm does.
"""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

import pytest
from agents import (
    Agent,
    FunctionTool,
    MaxTurnsExceeded,
    ModelBehaviorError,
    ModelSettings,
    ModelTracing,
    RunConfig,
    Runner,
    function_tool,
)
from agents.exceptions import ModelRefusalError
from agents.result import RunResultBase
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call
from agents.usage import Usage
from openai.types.responses import ResponseOutputMessage, ResponseOutputRefusal

import agentfsm as af
from agentfsm.exceptions import AgentFSMError
from agentfsm.integrations.openai_agents import decisions, governed

A, X = af.Action, af.ExitReason
CONFIG = RunConfig(tracing_disabled=True)


class Tools:
    """Two real function tools that record every execution."""

    def __init__(self) -> None:
        self.ran: list[tuple[str, str]] = []

        @function_tool
        def get_weather(city: str) -> str:
            """The weather in a city."""
            self.ran.append(("get_weather", city))
            return f"sunny in {city}"

        @function_tool
        def delete_file(path: str) -> str:
            """Delete a file."""
            self.ran.append(("delete_file", path))
            return f"deleted {path}"

        self.all: list[FunctionTool] = [get_weather, delete_file]


def weather(call_id: str, city: str = "Paris") -> Any:
    """A get_weather call item."""
    return function_call("get_weather", {"city": city}, call_id=call_id)


ANSWER = [assistant_message("It is sunny in Paris.")]
CUT = [
    function_call("get_weather", '{"city": "Par"}', call_id="c0").model_copy(
        update={"status": "incomplete"}
    )
]
REFUSAL = [
    ResponseOutputMessage(
        id="m1",
        type="message",
        role="assistant",
        status="completed",
        content=[ResponseOutputRefusal(type="refusal", refusal="I can't help with that.")],
    )
]


def run(agent: Agent[Any], stream: bool = False, max_turns: int = 10) -> RunResultBase:
    """Run the agent to its end, streamed or not."""

    async def go() -> RunResultBase:
        if not stream:
            return await Runner.run(
                agent, "weather in Paris?", run_config=CONFIG, max_turns=max_turns
            )
        result = Runner.run_streamed(
            agent, "weather in Paris?", run_config=CONFIG, max_turns=max_turns
        )
        async for _ in result.stream_events():
            pass
        return result

    return asyncio.run(go())


def native(script: list[list[Any]], tools: Tools) -> Agent[Any]:
    """An agent on the SDK's ScriptedModel, as the SDK runs it."""
    usage = Usage(requests=1, input_tokens=10, output_tokens=5, total_tokens=15)
    return Agent(
        name="weather", tools=list(tools.all), model=ScriptedModel(script, default_usage=usage)
    )


def ruled(script: list[list[Any]], tools: Tools, policy: af.Policy | None = None) -> Agent[Any]:
    """The same agent with agentfsm deciding."""
    return governed(native(script, tools), policy)


def actions(result: RunResultBase) -> list[af.Action]:
    """The actions agentfsm decided in the run."""
    return [d.action for d in decisions(result)]


@pytest.fixture(params=[False, True], ids=["run", "run_streamed"])
def stream(request: pytest.FixtureRequest) -> bool:
    """Every case runs with `Runner.run` and with `Runner.run_streamed`."""
    flag: bool = request.param
    return flag


class TestToolCallsBesideText:
    """Text and tool calls in one response (the Responses API's `stop` with calls)."""

    def test_both_execute_the_calls(self, stream: bool) -> None:
        """Natively the call runs; with agentfsm it runs too and the answer comes after."""
        script = [[assistant_message("Let me check."), weather("c1")], ANSWER]
        tools = Tools()
        run(native(script, tools), stream)
        assert tools.ran == [("get_weather", "Paris")]
        tools = Tools()
        result = run(ruled(script, tools), stream)
        assert tools.ran == [("get_weather", "Paris")]
        assert actions(result) == [A.EXECUTE_TOOLS, A.CONTINUE, A.FINAL]


class TestLengthCutCall:
    """A call cut by the token limit (status `incomplete`) whose JSON happens to parse."""

    def test_native_runs_half_a_call_agentfsm_retries(self, stream: bool) -> None:
        """Natively the cut call runs with `city="Par"`; agentfsm retries and runs the full one."""
        script = [CUT, [weather("c1")], ANSWER]
        tools = Tools()
        run(native(script, tools), stream)
        assert tools.ran[0] == ("get_weather", "Par")
        tools = Tools()
        result = run(ruled(script, tools), stream)
        assert tools.ran == [("get_weather", "Paris")]
        assert actions(result)[:2] == [A.RETRY, A.EXECUTE_TOOLS]
        assert result.final_output == "It is sunny in Paris."
        if not stream:  # the retried request is counted in the run's usage
            assert len(result.raw_responses) == 2
            assert result.context_wrapper.usage.requests == 3


class TestUndeclaredTool:
    """A call to an undeclared tool beside a valid call."""

    def test_native_crashes_agentfsm_runs_the_valid_call(self, stream: bool) -> None:
        """Natively the run dies with ModelBehaviorError; agentfsm runs the valid call and
        sends the model the refused call with its error result."""
        script = [[weather("c1"), function_call("rm_rf", {}, call_id="c2")], ANSWER]
        tools = Tools()
        with pytest.raises(ModelBehaviorError):
            run(native(script, tools), stream)
        assert tools.ran == []
        tools = Tools()
        agent = ruled(script, tools)
        result = run(agent, stream)
        assert tools.ran == [("get_weather", "Paris")]
        assert result.final_output == "It is sunny in Paris."
        scripted: Any = agent.model
        second = scripted.inner.calls[1].input
        outputs = [i for i in second if isinstance(i, dict) and i.get("call_id") == "c2"]
        assert [o["type"] for o in outputs] == ["function_call", "function_call_output"]
        assert "rm_rf" in outputs[1]["output"]


class TestThirdIdenticalCall:
    """The same call three times in a row."""

    def test_native_loops_to_max_turns_agentfsm_stops(self, stream: bool) -> None:
        """Natively the call runs until MaxTurnsExceeded; agentfsm stops at the third,
        and RunResult's final output says why."""
        script = [[weather(f"c{i}")] for i in range(12)]
        tools = Tools()
        with pytest.raises(MaxTurnsExceeded):
            run(native(script, tools), stream, max_turns=6)
        assert len(tools.ran) >= 5
        tools = Tools()
        result = run(ruled(script, tools), stream, max_turns=6)
        assert len(tools.ran) == 2
        assert decisions(result)[-1].exit_reason is X.DOOM_LOOP
        assert str(result.final_output).startswith("[agentfsm stop: doom_loop]")


class TestApproval:
    """A call that needs a human: the SDK's own interruption and approval flow."""

    POLICY = af.Policy(permissions={"delete_file": "ask"})
    SCRIPT: ClassVar[list[list[Any]]] = [
        [function_call("delete_file", {"path": "/tmp/x"}, call_id="c1")],
        [assistant_message("Done.")],
    ]

    def test_native_runs_it_agentfsm_interrupts_then_runs_once_approved(self) -> None:
        """Natively the call runs at once; governed, the run returns an interruption, and
        the call runs only after `state.approve(...)`."""
        tools = Tools()
        run(native(self.SCRIPT, tools))
        assert tools.ran == [("delete_file", "/tmp/x")]
        tools = Tools()
        agent = ruled(self.SCRIPT, tools, self.POLICY)
        result = asyncio.run(Runner.run(agent, "delete /tmp/x", run_config=CONFIG))
        assert tools.ran == []
        assert len(result.interruptions) == 1
        state = result.to_state()
        state.approve(result.interruptions[0])
        result = asyncio.run(Runner.run(agent, state, run_config=CONFIG))
        assert tools.ran == [("delete_file", "/tmp/x")]
        assert actions(result) == [A.ASK_HUMAN, A.EXECUTE_TOOLS, A.CONTINUE, A.FINAL]

    def test_rejected_call_never_runs(self) -> None:
        """After `state.reject(...)` the call never runs and agentfsm records the decline."""
        tools = Tools()
        agent = ruled(self.SCRIPT, tools, self.POLICY)
        result = asyncio.run(Runner.run(agent, "delete /tmp/x", run_config=CONFIG))
        state = result.to_state()
        state.reject(result.interruptions[0])
        result = asyncio.run(Runner.run(agent, state, run_config=CONFIG))
        assert tools.ran == []
        assert A.ASK_HUMAN in actions(result)
        assert decisions(result)[1].action is not A.EXECUTE_TOOLS


class TestRefusal:
    """The model refuses."""

    def test_native_raises_agentfsm_stops_with_refusal(self, stream: bool) -> None:
        """Natively the run raises ModelRefusalError; governed, it ends in a RunResult whose
        last decision is STOP with REFUSAL."""
        with pytest.raises(ModelRefusalError):
            run(native([REFUSAL], Tools()), stream)
        result = run(ruled([REFUSAL], Tools()), stream)
        last = decisions(result)[-1]
        assert (last.action, last.exit_reason) == (A.STOP, X.REFUSAL)
        assert "refusal" in str(result.final_output)


class TestFinalAnswer:
    """A normal answer."""

    def test_both_end_with_it(self, stream: bool) -> None:
        """Both runs end with the answer; agentfsm's decision is FINAL, COMPLETED."""
        assert run(native([ANSWER], Tools()), stream).final_output == "It is sunny in Paris."
        result = run(ruled([ANSWER], Tools()), stream)
        assert result.final_output == "It is sunny in Paris."
        assert decisions(result)[-1].exit_reason is X.COMPLETED


class TestDecisions:
    """`decisions` reads the governed model of the result's last agent."""

    def test_refuses_an_ungoverned_result(self) -> None:
        """A result from an agent governed() did not make is refused by name."""
        result = run(native([ANSWER], Tools()))
        with pytest.raises(AgentFSMError, match="governed"):
            decisions(result)


async def scripted_events(items: list[Any]) -> list[Any]:
    """The stream events the SDK's ScriptedModel sends for a response of `items`."""
    model = ScriptedModel([items])
    return [
        event
        async for event in model.stream_response(
            None,
            "hi",
            ModelSettings(),
            [],
            None,
            [],
            ModelTracing.DISABLED,
            previous_response_id=None,
            conversation_id=None,
            prompt=None,
        )
    ]


class TestIncrementalStreaming:
    """stream="text" shows text as it arrives; "held" waits for the decision."""

    def first_delta_then_wait(self, mode: str) -> bool:
        """Whether the consumer saw the first text delta while the model was still streaming.

        The scripted stream sends its first text delta, then waits (up to 2 s) until the
        consumer of `Runner.run_streamed` has received it before it sends the rest.
        """

        async def go() -> bool:
            events = await scripted_events(ANSWER)
            first = next(i for i, e in enumerate(events) if e.type == "response.output_text.delta")
            shown = asyncio.Event()
            in_time: list[bool] = []

            async def stream(_call: Any) -> Any:
                for index, event in enumerate(events):
                    yield event
                    if index == first:
                        try:
                            await asyncio.wait_for(shown.wait(), timeout=2.0)
                            in_time.append(True)
                        except TimeoutError:
                            in_time.append(False)

            model = ScriptedModel([ModelStep.stream(stream, output=ANSWER)])
            agent = governed(Agent(name="weather", model=model), stream=mode)  # type: ignore[arg-type]
            result = Runner.run_streamed(agent, "weather in Paris?", run_config=CONFIG)
            async for event in result.stream_events():
                if event.type == "raw_response_event" and event.data.type.endswith("text.delta"):
                    shown.set()
            assert result.final_output == "It is sunny in Paris."
            return in_time == [True]

        return asyncio.run(go())

    def test_text_mode_shows_the_text_while_the_model_streams(self) -> None:
        """With stream="text" the first delta reaches the consumer before the stream ends."""
        assert self.first_delta_then_wait("text")

    def test_held_mode_shows_nothing_before_the_decision(self) -> None:
        """With the default, the delta arrives only after the whole response was decided."""
        assert not self.first_delta_then_wait("held")

    def test_text_mode_still_holds_the_calls_it_refuses(self) -> None:
        """A call to an undeclared tool never reaches the SDK, streamed text or not."""
        tools = Tools()
        script = [[function_call("rm_rf", {"path": "/"}, call_id="c0"), weather("c1")], ANSWER]
        agent = governed(native(script, tools), stream="text")
        result = run(agent, stream=True)
        assert tools.ran == [("get_weather", "Paris")]
        assert result.final_output == "It is sunny in Paris."

    def test_an_unknown_mode_is_refused(self) -> None:
        """stream must be "held" or "text"."""
        with pytest.raises(AgentFSMError, match="stream must be 'held' or 'text'"):
            governed(native([ANSWER], Tools()), stream="live")  # type: ignore[arg-type]
