"""pydantic-ai with agentfsm deciding, beside pydantic-ai's own agent graph.

Both run pydantic-ai's own test double, `FunctionModel`, replaying scripted `ModelResponse`s,
with real function tools; each test says what pydantic-ai does natively and what agentfsm does.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults, ToolApproved, ToolDenied
from pydantic_ai.exceptions import UsageLimitExceeded
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel
from pydantic_ai.usage import UsageLimits

import agentfsm as af
from agentfsm.integrations.pydantic_ai import GovernedModel

A, X = af.Action, af.ExitReason


class Script:
    """A FunctionModel function replaying responses and keeping every request it saw."""

    def __init__(self, responses: list[ModelResponse]) -> None:
        self.responses = list(responses)
        self.seen: list[list[ModelMessage]] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        """Answer the next request with the next scripted response."""
        self.seen.append(list(messages))
        return self.responses[min(len(self.seen), len(self.responses)) - 1]


class Tools:
    """Two real tools that record every execution."""

    def __init__(self) -> None:
        self.ran: list[tuple[str, str]] = []

    def functions(self) -> list[Callable[..., str]]:
        """The tool functions."""

        def get_weather(city: str) -> str:
            """The weather in a city."""
            self.ran.append(("get_weather", city))
            return f"sunny in {city}"

        def delete_file(path: str) -> str:
            """Delete a file."""
            self.ran.append(("delete_file", path))
            return f"deleted {path}"

        return [get_weather, delete_file]


def weather(call_id: str, args: Any = None) -> ToolCallPart:
    """A get_weather call."""
    return ToolCallPart("get_weather", args or {"city": "Paris"}, tool_call_id=call_id)


ANSWER = ModelResponse(parts=[TextPart("It is sunny in Paris.")], finish_reason="stop")
LIMITS = UsageLimits(request_limit=8)


def native(script: Script, tools: Tools) -> Any:
    """pydantic-ai's own run on the FunctionModel."""
    agent = Agent(FunctionModel(script), tools=tools.functions())
    return agent.run_sync("weather in Paris?", usage_limits=LIMITS)


def ruled(
    script: Script, tools: Tools, policy: af.Policy | None = None, **options: Any
) -> tuple[GovernedModel, Agent[None, str | DeferredToolRequests]]:
    """The same agent with agentfsm deciding (`options` go to `GovernedModel`)."""
    model = GovernedModel(FunctionModel(script), policy, **options)
    agent: Agent[None, str | DeferredToolRequests] = Agent(
        model,
        toolsets=[model.toolset(tools.functions())],
        output_type=[str, DeferredToolRequests],
    )
    return model, agent


def actions(model: GovernedModel) -> list[af.Action]:
    """The actions agentfsm decided."""
    return [d.action for d in model.decisions]


class TestToolCallsUnderStop:
    """Tool calls under finish reason `stop`."""

    def test_both_execute(self) -> None:
        """Natively the call runs; with agentfsm too, and P7 names the conflict."""
        responses = [ModelResponse(parts=[weather("c1")], finish_reason="stop"), ANSWER]
        tools = Tools()
        native(Script(responses), tools)
        assert tools.ran == [("get_weather", "Paris")]
        tools = Tools()
        model, agent = ruled(Script(responses), tools)
        assert agent.run_sync("weather?").output == "It is sunny in Paris."
        assert tools.ran == [("get_weather", "Paris")]
        assert model.decisions[0].priority == "P7"


class TestLengthCutCall:
    """A call cut by the token limit."""

    CUT = ModelResponse(parts=[weather("c0", '{"city": "Pa')], finish_reason="length")

    def test_native_sends_the_broken_call_back_agentfsm_asks_again_without_it(self) -> None:
        """Natively the broken call stays in the history with a validation retry; agentfsm
        calls the model again without it, so no later request contains it."""
        responses = [self.CUT, ModelResponse(parts=[weather("c1")]), ANSWER]
        script, tools = Script(responses), Tools()
        native(script, tools)
        assert any('{"city": "Pa' in str(m) for m in script.seen[-1])
        script, tools = Script(responses), Tools()
        model, agent = ruled(script, tools)
        assert agent.run_sync("weather?").output == "It is sunny in Paris."
        assert not any('{"city": "Pa' in str(m) for m in script.seen[-1])
        assert actions(model)[:2] == [A.RETRY, A.EXECUTE_TOOLS]
        assert tools.ran == [("get_weather", "Paris")]


class TestUndeclaredTool:
    """A call to an undeclared tool beside a valid call."""

    def test_valid_call_runs_and_the_model_reads_the_error(self) -> None:
        """Natively pydantic-ai answers the unknown tool with a retry prompt; with agentfsm the
        call never reaches pydantic-ai and the controller's error answers it."""
        responses = [
            ModelResponse(parts=[weather("c1"), ToolCallPart("rm_rf", {}, tool_call_id="c2")]),
            ANSWER,
        ]
        script, tools = Script(responses), Tools()
        native(script, tools)
        assert tools.ran == [("get_weather", "Paris")]
        script, tools = Script(responses), Tools()
        model, agent = ruled(script, tools)
        assert agent.run_sync("weather?").output == "It is sunny in Paris."
        assert tools.ran == [("get_weather", "Paris")]
        request = script.seen[1][-1]
        assert isinstance(request, ModelRequest)
        errors = [
            p for p in request.parts if isinstance(p, ToolReturnPart) and p.outcome == "failed"
        ]
        assert [p.tool_call_id for p in errors] == ["c2"]
        assert "rm_rf" in str(errors[0].content)
        assert model.decisions[0].results[0].call_id == "c2"


class TestThirdIdenticalCall:
    """The same call three times in a row."""

    def test_native_runs_to_the_request_limit_agentfsm_stops(self) -> None:
        """Natively the call runs until UsageLimitExceeded; agentfsm stops at the third."""
        responses = [ModelResponse(parts=[weather("c1")])]
        tools = Tools()
        with pytest.raises(UsageLimitExceeded):
            native(Script(responses), tools)
        assert len(tools.ran) >= 7
        tools = Tools()
        model, agent = ruled(Script(responses), tools)
        output = agent.run_sync("weather?").output
        assert len(tools.ran) == 2
        assert model.decisions[-1].exit_reason is X.DOOM_LOOP
        assert str(output).startswith("[agentfsm stop: doom_loop]")


class TestApproval:
    """A call that needs a human: pydantic-ai's own deferred-tool flow."""

    POLICY = af.Policy(permissions={"delete_file": "ask"})

    def responses(self) -> list[ModelResponse]:
        """Delete a file, then answer."""
        return [
            ModelResponse(parts=[ToolCallPart("delete_file", {"path": "/x"}, tool_call_id="d1")]),
            ModelResponse(parts=[TextPart("Done.")]),
        ]

    def test_native_runs_it_agentfsm_defers_then_runs_once_approved(self) -> None:
        """Natively the call runs at once; governed, the run ends with DeferredToolRequests
        and the call runs only after its approval."""
        tools = Tools()
        native(Script(self.responses()), tools)
        assert tools.ran == [("delete_file", "/x")]
        tools = Tools()
        model, agent = ruled(Script(self.responses()), tools, self.POLICY)
        first = agent.run_sync("delete /x")
        assert isinstance(first.output, DeferredToolRequests)
        assert tools.ran == []
        assert [c.tool_call_id for c in first.output.approvals] == ["d1"]
        result = agent.run_sync(
            message_history=first.all_messages(),
            deferred_tool_results=DeferredToolResults(approvals={"d1": True}),
        )
        assert (result.output, tools.ran) == ("Done.", [("delete_file", "/x")])
        assert actions(model) == [A.ASK_HUMAN, A.EXECUTE_TOOLS, A.CONTINUE, A.FINAL]

    def test_denied_call_never_runs(self) -> None:
        """A denial never runs the call; agentfsm hears the human's message."""
        tools = Tools()
        model, agent = ruled(Script(self.responses()), tools, self.POLICY)
        first = agent.run_sync("delete /x")
        agent.run_sync(
            message_history=first.all_messages(),
            deferred_tool_results=DeferredToolResults(approvals={"d1": ToolDenied("not that")}),
        )
        assert tools.ran == []
        assert model.decisions[1].action is not A.EXECUTE_TOOLS


class TestAskSibling:
    """A call that needs a human beside a call that needs none."""

    POLICY = af.Policy(permissions={"delete_file": "ask"})

    def responses(self) -> list[ModelResponse]:
        """Delete a file and ask the weather in one response, then answer."""
        calls = [ToolCallPart("delete_file", {"path": "/x"}, tool_call_id="d1"), weather("w1")]
        return [ModelResponse(parts=calls), ModelResponse(parts=[TextPart("Done.")])]

    def resume(self, answer: bool) -> tuple[Tools, Script, Any, Any]:
        """Run to the deferred request, answer it, and run to the end (declines are told)."""
        script, tools = Script(self.responses()), Tools()
        _, agent = ruled(script, tools, self.POLICY, on_decline="feedback")
        first = agent.run_sync("go")
        before = list(tools.ran)
        assert isinstance(first.output, DeferredToolRequests)
        approvals: dict[str, bool | ToolApproved | ToolDenied] = {
            c.tool_call_id: answer for c in first.output.approvals
        }
        result = agent.run_sync(
            message_history=first.all_messages(),
            deferred_tool_results=DeferredToolResults(approvals=approvals),
        )
        return tools, script, before, result

    @staticmethod
    def answered(script: Script) -> list[str]:
        """The call ids the last request answers, once per answer."""
        return [
            p.tool_call_id
            for m in script.seen[-1]
            if isinstance(m, ModelRequest)
            for p in m.parts
            if isinstance(p, ToolReturnPart)
        ]

    def test_once_approved_both_run_once(self) -> None:
        """Nothing runs before the approval; then both calls run once and each is answered."""
        tools, script, before, result = self.resume(True)
        assert before == []
        assert result.output == "Done."
        assert sorted(tools.ran) == [("delete_file", "/x"), ("get_weather", "Paris")]
        assert sorted(self.answered(script)) == ["d1", "w1"]

    def test_once_denied_neither_runs_and_both_are_answered(self) -> None:
        """Denied, neither call runs, and the model reads one result for each."""
        tools, script, _, _ = self.resume(False)
        assert tools.ran == []
        assert sorted(self.answered(script)) == ["d1", "w1"]


class Unshaped(GovernedModel):
    """A GovernedModel that hands pydantic-ai the model's calls as they came (a mis-mapping)."""

    def _shape(self, response: ModelResponse, decision: af.Decision) -> ModelResponse:
        super()._shape(response, decision)
        return response


class TestMayRun:
    """The toolset asks `may_run` by call id right before the tool runs."""

    def test_a_call_agentfsm_refused_never_runs(self) -> None:
        """A denied call that reaches the graph anyway does not reach the tool."""
        policy = af.Policy(permission_rules=["deny delete_file(path=/etc/*)"])
        calls = [ToolCallPart("delete_file", {"path": "/etc/x"}, tool_call_id="d1"), weather("w1")]
        tools = Tools()
        model = Unshaped(FunctionModel(Script([ModelResponse(parts=calls), ANSWER])), policy)
        agent = Agent(model, toolsets=[model.toolset(tools.functions())])
        agent.run_sync("go")
        assert tools.ran == [("get_weather", "Paris")]


class TestEveryCallAnswered:
    """A response whose every call agentfsm refuses (CONTINUE, P5)."""

    def test_the_next_request_answers_each_call_once(self) -> None:
        """The denied call is in the next request with exactly one (error) result."""
        policy = af.Policy(permission_rules=["deny delete_file(path=/etc/*)"])
        call = ToolCallPart("delete_file", {"path": "/etc/x"}, tool_call_id="d1")
        script, tools = Script([ModelResponse(parts=[call]), ANSWER]), Tools()
        _, agent = ruled(script, tools, policy)
        assert agent.run_sync("go").output == "It is sunny in Paris."
        assert tools.ran == []
        answers = [
            p
            for m in script.seen[-1]
            if isinstance(m, ModelRequest)
            for p in m.parts
            if isinstance(p, ToolReturnPart)
        ]
        assert [(p.tool_call_id, p.outcome) for p in answers] == [("d1", "failed")]


class TestRefusal:
    """The model refuses (Anthropic's `refusal`, which pydantic-ai maps to content_filter)."""

    REFUSAL = ModelResponse(
        parts=[TextPart("I can't help with that.")],
        finish_reason="content_filter",
        provider_details={"finish_reason": "refusal"},
    )

    def test_native_returns_it_as_the_answer_agentfsm_stops(self) -> None:
        """Natively the refusal comes back as the run's output; agentfsm stops with REFUSAL."""
        assert native(Script([self.REFUSAL]), Tools()).output == "I can't help with that."
        model, agent = ruled(Script([self.REFUSAL]), Tools())
        output = agent.run_sync("x").output
        assert model.decisions[-1].exit_reason is X.REFUSAL
        assert str(output).startswith("[agentfsm stop: refusal]")


class TestFinalAnswer:
    """A normal answer."""

    def test_both_end_with_it(self) -> None:
        """Both return the answer; agentfsm's decision is FINAL, COMPLETED."""
        assert native(Script([ANSWER]), Tools()).output == "It is sunny in Paris."
        model, agent = ruled(Script([ANSWER]), Tools())
        assert agent.run_sync("x").output == "It is sunny in Paris."
        assert (model.decisions[-1].action, model.decisions[-1].exit_reason) == (
            A.FINAL,
            X.COMPLETED,
        )


class Streamed(Script):
    """The same scripted responses, sent as a FunctionModel stream (text, or call deltas)."""

    async def stream(self, messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
        """Send the next response in pieces: its text in two halves, or its calls' deltas."""
        response = self(messages, info)
        calls = [p for p in response.parts if isinstance(p, ToolCallPart)]
        if not calls:
            text = "".join(p.content for p in response.parts if isinstance(p, TextPart))
            yield text[: len(text) // 2]
            yield text[len(text) // 2 :]
            return
        for index, call in enumerate(calls):
            args = call.args if isinstance(call.args, str) else json.dumps(call.args)
            yield {index: DeltaToolCall(call.tool_name, args[:5], tool_call_id=call.tool_call_id)}
            yield {index: DeltaToolCall(None, args[5:])}


def streamed(
    script: Streamed, tools: Tools, policy: af.Policy | None = None
) -> tuple[GovernedModel, Agent[None, str]]:
    """The agent on a streaming FunctionModel, with agentfsm deciding."""
    model = GovernedModel(FunctionModel(script, stream_function=script.stream), policy)
    agent: Agent[None, str] = Agent(model, toolsets=[model.toolset(tools.functions())])
    return model, agent


class TestStreaming:
    """run_stream goes through agentfsm like run: the graph sees only decided responses."""

    def test_a_call_runs_and_the_answer_streams(self) -> None:
        """A streamed call runs once; the streamed answer is the output."""
        tools = Tools()
        model, agent = streamed(Streamed([ModelResponse(parts=[weather("c1")]), ANSWER]), tools)
        assert agent.run_stream_sync("weather?").get_output() == "It is sunny in Paris."
        assert tools.ran == [("get_weather", "Paris")]
        assert actions(model) == [A.EXECUTE_TOOLS, A.CONTINUE, A.FINAL]

    def test_a_cut_call_is_asked_again_and_never_reaches_the_graph(self) -> None:
        """A call whose arguments end mid-JSON is retried; the graph never sees it."""
        cut = ModelResponse(parts=[weather("c0", '{"city": "Pa')])
        script = Streamed([cut, ModelResponse(parts=[weather("c1")]), ANSWER])
        tools = Tools()
        model, agent = streamed(script, tools)
        assert agent.run_stream_sync("weather?").get_output() == "It is sunny in Paris."
        assert tools.ran == [("get_weather", "Paris")]
        assert actions(model) == [A.RETRY, A.EXECUTE_TOOLS, A.CONTINUE, A.FINAL]
        # By the parts' call ids: "c0" also turns up by chance in the messages' random run ids.
        seen_ids = {getattr(p, "tool_call_id", None) for m in script.seen[-1] for p in m.parts}
        assert "c0" not in seen_ids
        assert "c1" in seen_ids

    def test_an_undeclared_tool_is_taken_out_and_the_valid_call_runs(self) -> None:
        """The undeclared call never runs; the model reads its error in the next request."""
        rogue = ToolCallPart("rm_rf", {"path": "/"}, tool_call_id="c0")
        script = Streamed([ModelResponse(parts=[rogue, weather("c1")]), ANSWER])
        tools = Tools()
        _, agent = streamed(script, tools)
        assert agent.run_stream_sync("weather?").get_output() == "It is sunny in Paris."
        assert tools.ran == [("get_weather", "Paris")]
        assert "unknown tool 'rm_rf'" in repr(script.seen[-1])

    def test_a_stop_ends_the_streamed_run_with_its_reason(self) -> None:
        """max_turns 1: the run ends with agentfsm's stop text instead of a second call."""
        script = Streamed([ModelResponse(parts=[weather("c1")]), ANSWER])
        _, agent = streamed(script, Tools(), af.Policy(max_turns=1))
        output = agent.run_stream_sync("weather?").get_output()
        assert output.startswith("[agentfsm stop: max_turns]")


class TestDecline:
    """What a denial means: `on_decline="stop"` (default) or `"feedback"`."""

    POLICY = af.Policy(permissions={"delete_file": "ask"})

    def deny(self, answer: bool | ToolDenied, **options: Any) -> tuple[GovernedModel, Script, Any]:
        """Run to the deferred request, deny it with `answer`, and run to the end."""
        responses = [
            ModelResponse(parts=[ToolCallPart("delete_file", {"path": "/x"}, tool_call_id="d1")]),
            ModelResponse(parts=[TextPart("Done.")]),
        ]
        script = Script(responses)
        model, agent = ruled(script, Tools(), self.POLICY, **options)
        first = agent.run_sync("go")
        result = agent.run_sync(
            message_history=first.all_messages(),
            deferred_tool_results=DeferredToolResults(approvals={"d1": answer}),
        )
        return model, script, result

    def test_by_default_a_plain_denial_ends_the_run(self) -> None:
        """`False` (or a bare `ToolDenied()`) ends the run HUMAN_DECLINED; no model call."""
        for answer in (False, ToolDenied()):
            model, script, result = self.deny(answer)
            assert model.decisions[-1].exit_reason is X.HUMAN_DECLINED
            assert "human_declined" in str(result.output)
            assert len(script.seen) == 1
            returns = [
                p.tool_call_id
                for m in result.all_messages()
                if isinstance(m, ModelRequest)
                for p in m.parts
                if isinstance(p, ToolReturnPart)
            ]
            assert returns == ["d1"]  # the history stays valid: the call has its answer

    def test_a_denial_message_goes_to_the_model(self) -> None:
        """`ToolDenied("...")` is the human's word: the model reads it and the run goes on."""
        _, script, result = self.deny(ToolDenied("use the trash instead"))
        assert result.output == "Done."
        assert len(script.seen) == 2
        assert "use the trash instead" in str(result.all_messages())

    def test_with_feedback_a_plain_denial_goes_to_the_model(self) -> None:
        """With `on_decline="feedback"` the model reads the decline and answers."""
        model, script, result = self.deny(False, on_decline="feedback")
        assert result.output == "Done."
        assert model.decisions[-1].exit_reason is X.COMPLETED
        assert len(script.seen) == 2
        assert "The tool call was denied." in str(result.all_messages())  # pydantic-ai's text


class TestLoopLadder:
    """One call three times in a row under `Policy(loops=...)`."""

    def test_the_warning_follows_the_result_and_the_loop_stops(self) -> None:
        """Warn at 2, stop at 3: the second call runs and the next request carries the warning
        as a user prompt after its result; the third never runs (DOOM_LOOP)."""
        script = Script([ModelResponse(parts=[weather(f"c{i}")]) for i in range(3)])
        tools = Tools()
        policy = af.Policy(loops={"warn": 2, "ask": 0, "stop": 3})
        model, agent = ruled(script, tools, policy)
        output = agent.run_sync("weather?").output
        assert tools.ran == [("get_weather", "Paris")] * 2
        assert model.decisions[-1].exit_reason is X.DOOM_LOOP
        assert "to go on" in str(output)
        returned, warned = script.seen[2][-1].parts
        assert isinstance(returned, ToolReturnPart)
        assert isinstance(warned, UserPromptPart)
        assert str(warned.content).startswith("loop warning: get_weather(")
