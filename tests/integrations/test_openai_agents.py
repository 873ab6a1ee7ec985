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
    RunConfig,
    Runner,
    RunResult,
    function_tool,
)
from agents.exceptions import ModelRefusalError
from agents.result import RunResultBase
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call
from agents.usage import Usage
from openai.types.responses import ResponseOutputMessage, ResponseOutputRefusal

import agentfsm as af
from agentfsm.exceptions import AgentFSMError, DefinitionError
from agentfsm.integrations.openai_agents import decisions, governed
from tests.integrations.conftest import scripted_events, sdk_run

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

    return asyncio.run(
        sdk_run(agent, "weather in Paris?", stream, run_config=CONFIG, max_turns=max_turns)
    )


def native(script: list[list[Any]], tools: Tools) -> Agent[Any]:
    """An agent on the SDK's ScriptedModel, as the SDK runs it."""
    usage = Usage(requests=1, input_tokens=10, output_tokens=5, total_tokens=15)
    return Agent(
        name="weather", tools=list(tools.all), model=ScriptedModel(script, default_usage=usage)
    )


def ruled(
    script: list[list[Any]], tools: Tools, policy: af.Policy | None = None, **options: Any
) -> Agent[Any]:
    """The same agent with agentfsm deciding (`options` go to `governed`)."""
    return governed(native(script, tools), policy, **options)


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


def parallel(call_id: str, *uses: tuple[str, dict[str, Any]]) -> Any:
    """A `multi_tool_use.parallel` wrapper call carrying `uses` as (tool, arguments)."""
    tool_uses = [{"recipient_name": f"functions.{n}", "parameters": a} for n, a in uses]
    return function_call("multi_tool_use.parallel", {"tool_uses": tool_uses}, call_id=call_id)


class TestParallelWrapper:
    """A `multi_tool_use.parallel` wrapper beside other calls: verdicts follow call ids."""

    POLICY = af.Policy(permission_rules=["deny delete_file(path=/etc/*)"])

    def test_a_denied_call_after_the_wrapper_never_runs(self, stream: bool) -> None:
        """The wrapped calls run as calls of their own, and the denied call after them never
        runs: its error result reaches the model under its own id."""
        script = [
            [
                parallel(
                    "w", ("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Rome"})
                ),
                function_call("delete_file", {"path": "/etc/passwd"}, call_id="d1"),
            ],
            ANSWER,
        ]
        tools = Tools()
        agent = ruled(script, tools, self.POLICY)
        result = run(agent, stream)
        assert tools.ran == [("get_weather", "Paris"), ("get_weather", "Rome")]
        assert result.final_output == "It is sunny in Paris."
        scripted: Any = agent.model
        second = [i for i in scripted.inner.calls[1].input if isinstance(i, dict)]
        outputs = {
            i["call_id"]: i["output"] for i in second if i.get("type") == "function_call_output"
        }
        assert set(outputs) == {"w_0", "w_1", "d1"}
        assert "permission denied" in outputs["d1"]

    def test_a_denied_call_never_takes_an_allowed_calls_id(self, stream: bool) -> None:
        """A denied call after a wrapper whose second call is allowed: the wrapped calls keep
        their own verdicts and the denied call never runs (by position it took `w_1`)."""
        script = [
            [
                parallel(
                    "w", ("delete_file", {"path": "/etc/shadow"}), ("get_weather", {"city": "Oslo"})
                ),
                function_call("delete_file", {"path": "/etc/passwd"}, call_id="d1"),
            ],
            ANSWER,
        ]
        tools = Tools()
        run(ruled(script, tools, self.POLICY), stream)
        assert tools.ran == [("get_weather", "Oslo")]


class TestAskSibling:
    """A call that needs a human beside a call that needs none."""

    POLICY = af.Policy(permissions={"delete_file": "ask"})
    SCRIPT: ClassVar[list[list[Any]]] = [
        [function_call("delete_file", {"path": "/tmp/x"}, call_id="c1"), weather("c2")],
        [assistant_message("Done.")],
    ]

    def resume(self, agent: Agent[Any], approve: bool) -> tuple[RunResult, RunResult]:
        """Run until the interruption, approve or reject it, and run to the end."""
        first = asyncio.run(Runner.run(agent, "go", run_config=CONFIG))
        state = first.to_state()
        for item in first.interruptions:
            (state.approve if approve else state.reject)(item)
        return first, asyncio.run(Runner.run(agent, state, run_config=CONFIG))

    def test_once_approved_both_run_once(self) -> None:
        """Nothing runs before the human answers; once approved both calls run exactly once
        and the model reads one result for each."""
        tools = Tools()
        agent = ruled(self.SCRIPT, tools, self.POLICY)
        first, result = self.resume(agent, approve=True)
        assert [getattr(i.raw_item, "call_id", None) for i in first.interruptions] == ["c1"]
        assert sorted(tools.ran) == [("delete_file", "/tmp/x"), ("get_weather", "Paris")]
        assert result.final_output == "Done."
        scripted: Any = agent.model
        last = [i for i in scripted.inner.calls[-1].input if isinstance(i, dict)]
        answered = [i["call_id"] for i in last if i.get("type") == "function_call_output"]
        assert sorted(answered) == ["c1", "c2"]

    def test_once_rejected_neither_runs_and_both_are_answered(self) -> None:
        """Rejected (with `on_decline="feedback"`), neither call runs, and the model reads one
        result for each."""
        tools = Tools()
        agent = ruled(self.SCRIPT, tools, self.POLICY, on_decline="feedback")
        self.resume(agent, approve=False)
        assert tools.ran == []
        scripted: Any = agent.model
        last = [i for i in scripted.inner.calls[-1].input if isinstance(i, dict)]
        answered = [i["call_id"] for i in last if i.get("type") == "function_call_output"]
        assert sorted(answered) == ["c1", "c2"]


class TestMayRun:
    """The tool wrapper asks `may_run` by call id right before the tool runs."""

    def test_a_call_agentfsm_did_not_clear_never_runs(self) -> None:
        """A call the SDK invokes under an id agentfsm never cleared does not reach the tool."""
        tools = Tools()
        agent = ruled([ANSWER], tools)
        run(agent)
        wrapped = next(t for t in agent.tools if isinstance(t, FunctionTool))
        ctx: Any = type("Ctx", (), {"tool_call_id": "forged"})()

        async def invoke() -> Any:
            return await wrapped.on_invoke_tool(ctx, '{"city": "Paris"}')

        out = asyncio.run(invoke())
        assert tools.ran == []
        assert "not executed" in str(out)


class TestEveryCallAnswered:
    """A response whose every call agentfsm refuses (CONTINUE, P5)."""

    def test_the_next_request_answers_each_call_once(self) -> None:
        """The denied call is in the next request with exactly one (error) output."""
        policy = af.Policy(permission_rules=["deny delete_file(path=/etc/*)"])
        script = [[function_call("delete_file", {"path": "/etc/x"}, call_id="d1")], ANSWER]
        tools = Tools()
        agent = ruled(script, tools, policy)
        assert run(agent).final_output == "It is sunny in Paris."
        assert tools.ran == []
        scripted: Any = agent.model
        second = [i for i in scripted.inner.calls[1].input if isinstance(i, dict)]
        kinds = [(i.get("type"), i.get("call_id")) for i in second if i.get("call_id")]
        assert kinds == [("function_call", "d1"), ("function_call_output", "d1")]


class TestDecline:
    """What `state.reject(...)` means: `on_decline="stop"` (default) or `"feedback"`."""

    POLICY = af.Policy(permissions={"delete_file": "ask"})
    SCRIPT: ClassVar[list[list[Any]]] = [
        [function_call("delete_file", {"path": "/tmp/x"}, call_id="c1")],
        [assistant_message("Done.")],
    ]

    def reject(self, message: str | None = None, **options: Any) -> tuple[Agent[Any], RunResult]:
        """Run to the interruption, reject it (with `message`), and run to the end."""
        agent = ruled(self.SCRIPT, Tools(), self.POLICY, **options)
        first = asyncio.run(Runner.run(agent, "go", run_config=CONFIG))
        state = first.to_state()
        state.reject(first.interruptions[0], rejection_message=message)
        return agent, asyncio.run(Runner.run(agent, state, run_config=CONFIG))

    def test_by_default_a_plain_rejection_ends_the_run(self) -> None:
        """Without a message of its own the rejection ends the run HUMAN_DECLINED, and the
        model is not called again."""
        agent, result = self.reject()
        assert decisions(result)[-1].exit_reason is X.HUMAN_DECLINED
        assert "human_declined" in str(result.final_output)
        scripted: Any = agent.model
        assert len(scripted.inner.calls) == 1
        items: list[dict[str, Any]] = [dict(i) for i in result.to_input_list()]
        outputs = [i["call_id"] for i in items if i.get("type") == "function_call_output"]
        assert outputs == ["c1"]  # the history stays valid: the call has its answer

    def test_a_rejection_message_goes_to_the_model(self) -> None:
        """A `rejection_message` is the human's word: the model reads it and the run goes on."""
        agent, result = self.reject("use the trash instead")
        assert result.final_output == "Done."
        scripted: Any = agent.model
        sent = [i for i in scripted.inner.calls[-1].input if isinstance(i, dict)]
        assert any("use the trash instead" in str(i.get("output")) for i in sent)

    def test_with_feedback_a_plain_rejection_goes_to_the_model(self) -> None:
        """With `on_decline="feedback"` the model reads the decline and answers."""
        agent, result = self.reject(on_decline="feedback")
        assert result.final_output == "Done."
        assert decisions(result)[-1].exit_reason is X.COMPLETED
        scripted: Any = agent.model
        sent = [i for i in scripted.inner.calls[-1].input if isinstance(i, dict)]
        assert any("not approved" in str(i.get("output")) for i in sent)  # the SDK's own text

    def test_a_bad_setting_is_refused(self) -> None:
        """Anything but "stop" or "feedback" raises DefinitionError."""
        with pytest.raises(DefinitionError):
            ruled(self.SCRIPT, Tools(), self.POLICY, on_decline="ignore")


class TestLoopLadder:
    """One call three times in a row under `Policy(loops=...)`."""

    def test_the_warning_follows_the_result_and_the_loop_stops(self, stream: bool) -> None:
        """Warn at 2, stop at 3: the second call runs and the next request carries the warning
        as a user message after its output; the third never runs (DOOM_LOOP)."""
        script = [[weather(f"c{i}")] for i in range(3)]
        tools = Tools()
        agent = ruled(script, tools, af.Policy(loops={"warn": 2, "ask": 0, "stop": 3}))
        result = run(agent, stream)
        assert tools.ran == [("get_weather", "Paris")] * 2
        assert decisions(result)[-1].exit_reason is X.DOOM_LOOP
        assert "to go on" in str(result.final_output)
        scripted: Any = agent.model
        third = [
            i if isinstance(i, dict) else i.model_dump() for i in scripted.inner.calls[2].input
        ]
        warned = [i for i in third if str(i.get("content")).startswith("loop warning:")]
        assert [i["role"] for i in warned] == ["user"]
        before = third[third.index(warned[0]) - 1]
        assert (before["type"], before["call_id"]) == ("function_call_output", "c1")
