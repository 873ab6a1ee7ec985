"""The runner drives litellm's real HTTP client against the local scripted server."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from agentfsm import Policy
from agentfsm._model.types import Action, ExitReason
from agentfsm._runner.executor import Executor
from agentfsm._runner.loop import RunResult, arun, run
from agentfsm._runner.retry import ProviderRetry
from agentfsm.exceptions import AgentFSMError, DefinitionError, ToolDefinitionError
from agentfsm.testing.scripted import (
    Reply,
    Responder,
    call,
    cut_tool_call,
    fault,
    last_tool_result,
    say,
    stop_with_tool_calls,
    tool_calls,
)
from agentfsm.testing.server import ScriptedServer
from tests.conftest import LITELLM_CLIENT
from tests.runner.conftest import scripted_arun, scripted_run
from tests.strategies import Raising, RaisingMapping, hostile_values

pytestmark = LITELLM_CLIENT

WeatherTool = Callable[..., Any]

QUESTION = [{"role": "user", "content": "What will the weather be like in Shanghai tomorrow?"}]
SHANGHAI = {"latitude": 31.23, "longitude": 121.47}


def answer(body: Any) -> Reply:
    """Reply with the last tool result, as a model reading it would."""
    return say(f"Forecast: {last_tool_result(body)}")


def weather_script() -> list[Reply | Responder]:
    """One weather tool call, then an answer quoting the tool's result."""
    return [tool_calls(call("get_weather", SHANGHAI)), answer]


def run_openai(server: ScriptedServer, tool: object, **kwargs: Any) -> RunResult:
    """Run the weather question against the server's OpenAI route."""
    return scripted_run(server, QUESTION, tools=[tool], **kwargs)


def arun_openai(server: ScriptedServer, tool: object, **kwargs: Any) -> RunResult:
    """`run_openai` through `arun`, on a fresh event loop."""
    return asyncio.run(scripted_arun(server, QUESTION, tools=[tool], **kwargs))


class TestRunOpenAI:
    """`run` through litellm's OpenAI client."""

    @pytest.mark.parametrize("stream", [False, True])
    def test_weather_run_completes_with_the_tool_executed(
        self, get_weather: WeatherTool, weather_calls: list[Any], stream: bool
    ) -> None:
        """The weather run ends COMPLETED, the tool really ran and the answer quotes it."""
        with ScriptedServer(weather_script()) as server:
            result = run_openai(server, get_weather, stream=stream)
        assert result.exit_reason is ExitReason.COMPLETED
        assert weather_calls == [(31.23, 121.47)]
        assert result.text.startswith("Forecast: {")
        assert json.loads(result.text.removeprefix("Forecast: "))["day"] == "tomorrow"
        assert [d.action for d in result.decisions] == [
            Action.EXECUTE_TOOLS,
            Action.CONTINUE,
            Action.FINAL,
        ]
        assert result.turns == 2
        assert (result.usage.input_tokens, result.usage.output_tokens) == (40, 20)

    def test_messages_hold_the_whole_conversation(self, get_weather: WeatherTool) -> None:
        """The result's messages are the question, the call, its result and the answer."""
        with ScriptedServer(weather_script()) as server:
            result = run_openai(server, get_weather)
        roles = [m["role"] for m in result.messages]
        call_id = result.messages[1]["tool_calls"][0]["id"]
        assert roles == ["user", "assistant", "tool", "assistant"]
        assert result.messages[2]["tool_call_id"] == call_id
        assert result.messages[3]["content"] == result.text

    def test_tool_specs_and_options_are_sent(self, get_weather: WeatherTool) -> None:
        """Tool specs come from the callable; tool_choice and parallel_tool_calls pass through."""
        with ScriptedServer(weather_script()) as server:
            run_openai(server, get_weather, tool_choice="auto", parallel_tool_calls=False)
        body = server.requests[0].body
        (spec,) = body["tools"]
        assert spec["function"]["name"] == "get_weather"
        assert set(spec["function"]["parameters"]["required"]) == {"latitude", "longitude"}
        assert (body["tool_choice"], body["parallel_tool_calls"]) == ("auto", False)

    def test_stop_with_tool_calls_still_executes_them(
        self, get_weather: WeatherTool, weather_calls: list[Any]
    ) -> None:
        """finish_reason stop with tool calls present: the calls are executed anyway."""
        script: list[Reply | Responder] = [
            stop_with_tool_calls(call("get_weather", SHANGHAI)),
            answer,
        ]
        with ScriptedServer(script) as server:
            result = run_openai(server, get_weather)
        assert result.exit_reason is ExitReason.COMPLETED
        assert weather_calls == [(31.23, 121.47)]
        assert result.decisions[0].action is Action.EXECUTE_TOOLS

    @pytest.mark.parametrize("stream", [False, True])
    def test_cut_tool_call_is_retried_with_more_tokens_never_executed(
        self, get_weather: WeatherTool, weather_calls: list[Any], stream: bool
    ) -> None:
        """A tool call cut at length is not executed; the retry asks for twice the max_tokens."""
        script = [cut_tool_call("get_weather", '{"latitude": 31.23, "longi'), *weather_script()]
        with ScriptedServer(script) as server:
            result = run_openai(server, get_weather, max_tokens=64, stream=stream)
        assert result.decisions[0].action is Action.RETRY
        assert [r.body["max_tokens"] for r in server.requests] == [64, 128, 128]
        assert weather_calls == [(31.23, 121.47)]
        assert len(server.requests[1].body["messages"]) == 1  # the cut turn is not replayed
        assert result.exit_reason is ExitReason.COMPLETED

    def test_without_max_tokens_the_retry_doubles_what_was_used(
        self, get_weather: WeatherTool
    ) -> None:
        """With no max_tokens set, the retry asks for twice the output tokens the cut turn used."""
        script = [cut_tool_call("get_weather", '{"latitude": 3'), *weather_script()]
        with ScriptedServer(script) as server:
            run_openai(server, get_weather)
        assert "max_tokens" not in server.requests[0].body
        assert server.requests[1].body["max_tokens"] == 20

    def test_tool_without_python_callable_gets_an_error_result(self) -> None:
        """A tool declared by spec alone cannot run here: the model gets an error result."""
        spec = {"name": "get_weather", "parameters": {"type": "object", "properties": {}}}
        with ScriptedServer(weather_script()) as server:
            result = run_openai(server, spec)
        tool_message = result.messages[2]
        assert tool_message["role"] == "tool"
        assert "no Python implementation" in tool_message["content"]

    def test_rate_limit_is_retried_after_the_providers_wait(
        self, get_weather: WeatherTool, fast_retry: ProviderRetry, slept: list[float]
    ) -> None:
        """A 429 with Retry-After: 2 is retried after waiting 2 s, then the run completes."""
        with ScriptedServer([fault(429, retry_after=2), *weather_script()]) as server:
            result = run_openai(server, get_weather, retry=fast_retry)
        assert result.exit_reason is ExitReason.COMPLETED
        assert slept == [2.0]
        assert len(server.requests) == 3

    def test_server_errors_until_retries_run_out_end_with_provider_error(
        self, get_weather: WeatherTool, fast_retry: ProviderRetry
    ) -> None:
        """HTTP 500 on every attempt ends the run with PROVIDER_ERROR after three attempts."""
        with ScriptedServer([fault(500)] * 5) as server:
            result = run_openai(server, get_weather, retry=fast_retry)
        assert result.exit_reason is ExitReason.PROVIDER_ERROR
        assert len(server.requests) == 3
        assert result.error is not None
        assert "gave up after 3 attempts" in result.error
        assert "InternalServerError" in result.error

    def test_bad_request_is_not_retried(
        self, get_weather: WeatherTool, fast_retry: ProviderRetry
    ) -> None:
        """A 400 ends the run with PROVIDER_ERROR at once: retrying cannot fix it."""
        with ScriptedServer([fault(400, message="bad tools")] * 3) as server:
            result = run_openai(server, get_weather, retry=fast_retry)
        assert result.exit_reason is ExitReason.PROVIDER_ERROR
        assert len(server.requests) == 1
        assert "bad tools" in (result.error or "")

    def test_timeout_is_retried(self, get_weather: WeatherTool, fast_retry: ProviderRetry) -> None:
        """A call that times out is made again, and the run completes."""
        script = [Reply(text="late", delay=0.5), *weather_script()]
        with ScriptedServer(script) as server:
            result = run_openai(server, get_weather, retry=fast_retry, timeout=0.1)
        assert result.exit_reason is ExitReason.COMPLETED
        assert len(server.requests) == 3

    def test_stream_without_finish_reason_is_recovered(self, get_weather: WeatherTool) -> None:
        """A stream that ends without a finish reason goes to the Controller, which retries it."""
        script = [Reply(text="Tomorrow in Shang", end_stream=False), *weather_script()]
        with ScriptedServer(script) as server:
            result = run_openai(server, get_weather, stream=True)
        assert result.decisions[0].action is Action.RETRY
        assert result.exit_reason is ExitReason.COMPLETED
        assert len(server.requests) == 3

    def test_endless_unfinished_streams_end_the_run(self, get_weather: WeatherTool) -> None:
        """Streams that never finish are retried a bounded number of times, never forever."""
        with ScriptedServer([Reply(text="cut", end_stream=False)] * 10) as server:
            result = run_openai(server, get_weather, stream=True, policy=Policy(max_retries=2))
        assert result.exit_reason is ExitReason.UNRECOVERABLE_OUTPUT
        assert len(server.requests) == 3

    def test_tool_exception_becomes_an_error_result(self) -> None:
        """A tool that raises sends the model an error result and the run goes on."""

        def get_weather(latitude: float, longitude: float) -> str:
            """Fail like a broken weather service."""
            raise ConnectionError("weather service down")

        with ScriptedServer(weather_script()) as server:
            result = run_openai(server, get_weather)
        tool_message = result.messages[2]
        assert tool_message["content"] == "ConnectionError: weather service down"
        assert result.decisions[1].priority == "P5"
        assert result.exit_reason is ExitReason.COMPLETED

    def test_ask_human_is_answered_by_on_ask(
        self, get_weather: WeatherTool, weather_calls: list[Any]
    ) -> None:
        """A call that needs approval goes to on_ask; approved, it is executed."""
        asked: list[Action] = []

        def on_ask(decision: Any) -> tuple[bool, str | None]:
            asked.append(decision.action)
            return True, None

        policy = Policy(permissions={"get_weather": "ask"})
        with ScriptedServer(weather_script()) as server:
            result = run_openai(server, get_weather, policy=policy, on_ask=on_ask)
        assert asked == [Action.ASK_HUMAN]
        assert weather_calls == [(31.23, 121.47)]
        assert result.exit_reason is ExitReason.COMPLETED

    def test_ask_human_without_on_ask_declines(
        self, get_weather: WeatherTool, weather_calls: list[Any]
    ) -> None:
        """Without on_ask every approval is declined and the tool never runs."""
        policy = Policy(permissions={"get_weather": "ask"})
        with ScriptedServer(weather_script()) as server:
            result = run_openai(server, get_weather, policy=policy)
        assert weather_calls == []
        assert result.exit_reason is ExitReason.HUMAN_DECLINED

    def test_trace_file_is_written(self, get_weather: WeatherTool, tmp_path: Path) -> None:
        """With `trace`, every controller event lands in the JSON-lines file."""
        path = tmp_path / "traces" / "run.jsonl"
        with ScriptedServer(weather_script()) as server:
            run_openai(server, get_weather, trace=path)
        events = [json.loads(line)["event"] for line in path.read_text().splitlines()]
        assert events[0] == "trace"
        assert "tool_results" in events
        assert events.count("decision") == 3


class TestRunAnthropic:
    """`run` through litellm's Anthropic Messages client."""

    @pytest.mark.parametrize("stream", [False, True])
    def test_weather_run_completes(
        self, get_weather: WeatherTool, weather_calls: list[Any], stream: bool
    ) -> None:
        """The weather run over /v1/messages ends COMPLETED with the tool executed."""
        with ScriptedServer(weather_script()) as server:
            result = run(
                "anthropic/scripted",
                QUESTION,
                tools=[get_weather],
                api_base=server.anthropic_base,
                api_key="sk-ant-test",
                stream=stream,
            )
        assert result.exit_reason is ExitReason.COMPLETED
        assert weather_calls == [(31.23, 121.47)]
        assert server.requests[0].path == "/v1/messages"
        assert server.requests[0].body["tools"][0]["name"] == "get_weather"
        tool_block = server.requests[1].body["messages"][-1]["content"][0]
        assert tool_block["type"] == "tool_result"

    def test_cut_tool_call_in_stream_is_retried(
        self, get_weather: WeatherTool, weather_calls: list[Any]
    ) -> None:
        """A tool_use block cut at max_tokens is retried with twice the max_tokens."""
        script = [cut_tool_call("get_weather", '{"latitude": 31.23, "lo'), *weather_script()]
        with ScriptedServer(script) as server:
            result = run(
                "anthropic/scripted",
                QUESTION,
                tools=[get_weather],
                api_base=server.anthropic_base,
                api_key="sk-ant-test",
                stream=True,
                max_tokens=100,
            )
        assert result.decisions[0].action is Action.RETRY
        assert server.requests[1].body["max_tokens"] == 200
        assert weather_calls == [(31.23, 121.47)]


class TestArun:
    """`arun`, the same loop with litellm.acompletion."""

    @pytest.mark.parametrize("stream", [False, True])
    def test_weather_run_completes_with_an_async_tool(self, stream: bool) -> None:
        """An async tool is awaited and the run ends COMPLETED."""
        seen: list[float] = []

        async def get_weather(latitude: float, longitude: float) -> dict[str, float]:
            """Forecast tomorrow's weather at a point."""
            seen.append(latitude)
            return {"high_c": 24.0}

        with ScriptedServer(weather_script()) as server:
            result = arun_openai(server, get_weather, stream=stream)
        assert result.exit_reason is ExitReason.COMPLETED
        assert seen == [31.23]
        assert result.text == 'Forecast: {"high_c": 24.0}'

    def test_rate_limit_then_success(
        self, get_weather: WeatherTool, fast_retry: ProviderRetry, slept: list[float]
    ) -> None:
        """A 429 is retried by the async loop after the provider's Retry-After."""

        with ScriptedServer([fault(429, retry_after=1.5), *weather_script()]) as server:
            result = arun_openai(server, get_weather, retry=fast_retry)
        assert result.exit_reason is ExitReason.COMPLETED
        assert slept == [1.5]

    def test_exhausted_retries_end_with_provider_error(
        self, get_weather: WeatherTool, fast_retry: ProviderRetry
    ) -> None:
        """503 on every attempt ends the async run with PROVIDER_ERROR, not an exception."""

        with ScriptedServer([fault(503)] * 3) as server:
            result = arun_openai(server, get_weather, retry=fast_retry)
        assert result.exit_reason is ExitReason.PROVIDER_ERROR
        assert len(server.requests) == 3


class TestRunArguments:
    """run and arun name a bad argument before any model is called."""

    @pytest.mark.parametrize(
        ("options", "match"),
        [
            ({"model": None}, "model must be a litellm model name"),
            ({"messages": None}, "messages must be a str or a list"),
            ({"messages": ["hi"]}, "messages must be a str or a list"),
            ({"observers": None}, "observers must be a list of callables"),
            ({"trace": 3}, "trace must be a file path"),
            ({"retry": 5}, "retry must be a ProviderRetry"),
            ({"on_ask": True}, "on_ask must be a function"),
            ({"timeout": -1}, "finite timeout >= 0"),
            ({"timeout": float("nan")}, "finite timeout >= 0"),
            ({"max_tokens": 0.5}, "max_tokens must be an int"),
            ({"stream": "yes"}, "stream must be True or False"),
            ({"executor": {}}, "executor must be an Executor"),
            ({"cancel": True}, "cancel must be an Event"),
            ({"inbox": []}, "inbox must be an Inbox"),
            ({"agents": {"helper": "gpt"}}, "agents must be a mapping of tool names to Agents"),
        ],
    )
    def test_a_bad_argument_is_named(self, options: dict[str, Any], match: str) -> None:
        """Each is a DefinitionError at the call; nothing reaches a server (none is running)."""
        arguments: dict[str, Any] = {"model": "openai/scripted", "messages": QUESTION, "tools": []}
        arguments.update(options)
        with pytest.raises(DefinitionError, match=match):
            run(**arguments, api_base="http://127.0.0.1:9")
        with pytest.raises(DefinitionError, match=match):
            asyncio.run(arun(**arguments, api_base="http://127.0.0.1:9"))

    def test_a_string_is_the_users_one_message(self, get_weather: WeatherTool) -> None:
        """run(model, "question") runs as [{"role": "user", "content": "question"}]."""
        with ScriptedServer(weather_script()) as server:
            result = run(
                "openai/scripted",
                "What is the weather in Shanghai tomorrow?",
                tools=[get_weather],
                api_base=server.openai_base,
                api_key="sk-test",
            )
        assert result.exit_reason is ExitReason.COMPLETED
        assert result.messages[0] == {
            "role": "user",
            "content": "What is the weather in Shanghai tomorrow?",
        }

    def test_executor_options_must_be_a_mapping(self) -> None:
        """Executor(tools, options="x") is a ToolDefinitionError, not a ValueError from dict()."""
        with pytest.raises(ToolDefinitionError, match="options must map tool names"):
            Executor([], options="x")  # type: ignore[arg-type]


class TestOnAskAnswers:
    """Only True approves: an answer on_ask gives that is not understood declines (fail closed)."""

    @pytest.mark.parametrize("answer", [True, (True, None), (True, "go ahead")])
    def test_true_approves(
        self, get_weather: WeatherTool, weather_calls: list[Any], answer: Any
    ) -> None:
        """A bare True, or (True, message), runs the call."""
        policy = Policy(permissions={"get_weather": "ask"})
        with ScriptedServer(weather_script()) as server:
            result = run_openai(server, get_weather, policy=policy, on_ask=lambda d: answer)
        assert weather_calls == [(31.23, 121.47)]
        assert result.exit_reason is ExitReason.COMPLETED

    @pytest.mark.parametrize(
        "answer", ["yes", 1, ("yes", None), (1, None), (True,), (True, 3), None, [True, None]]
    )
    def test_anything_else_declines(
        self, get_weather: WeatherTool, weather_calls: list[Any], answer: Any
    ) -> None:
        """A truthy answer that is not True never runs the call: the run ends HUMAN_DECLINED
        and a RuntimeWarning quotes the answer (the model is not sent it)."""
        policy = Policy(permissions={"get_weather": "ask"})
        with (
            ScriptedServer(weather_script()) as server,
            pytest.warns(RuntimeWarning, match=re.escape(f"on_ask answered {answer!r}")),
        ):
            result = run_openai(server, get_weather, policy=policy, on_ask=lambda d: answer)
        assert weather_calls == []
        assert result.exit_reason is ExitReason.HUMAN_DECLINED

    def test_a_coroutine_on_ask_needs_arun(self, get_weather: WeatherTool) -> None:
        """run() refuses an async on_ask before the run, and one that returns a coroutine when
        it is asked (closing the coroutine)."""

        async def later(decision: Any) -> tuple[bool, str | None]:
            return True, None

        with pytest.raises(DefinitionError, match="use arun"):
            run("openai/scripted", QUESTION, tools=[get_weather], on_ask=later)
        policy = Policy(permissions={"get_weather": "ask"})
        with ScriptedServer(weather_script()) as server, pytest.raises(DefinitionError):
            run_openai(server, get_weather, policy=policy, on_ask=lambda d: later(d))


_odd = hostile_values()
_KEYWORDS = (
    "model",
    "messages",
    "tools",
    "policy",
    "tool_choice",
    "parallel_tool_calls",
    "api_base",
    "api_key",
    "stream",
    "max_tokens",
    "observers",
    "trace",
    "retry",
    "on_ask",
    "timeout",
    "executor",
    "cancel",
    "inbox",
    "agents",
    "temperature",  # one of litellm's own, carried in completion_kwargs
)
_NO_NETWORK = ("api_base", "trace")
"""A str there is a URL litellm would reach or a file the run would write: others only."""


@pytest.fixture(scope="module")
def answering() -> Iterator[ScriptedServer]:
    """A server that says "done" to every request: a run whose arguments are good ends."""
    with ScriptedServer([say("done")] * 10_000) as server:
        yield server


class TestRunArgumentsProperty:
    """run and arun with one keyword argument of any value, the others good."""

    @settings(deadline=None)
    @given(keyword=st.sampled_from(_KEYWORDS), value=_odd, is_async=st.booleans())
    @example(keyword="api_key", value="\ud800", is_async=False)
    @example(keyword="tool_choice", value=Raising(), is_async=False)
    @example(keyword="parallel_tool_calls", value=float("nan"), is_async=False)
    @example(keyword="api_base", value=3, is_async=False)
    @example(keyword="temperature", value=Raising(), is_async=True)
    @example(keyword="observers", value=[3], is_async=False)
    @example(keyword="trace", value="a\x00b", is_async=False)
    @example(keyword="messages", value=[{1: "a"}], is_async=False)
    @example(keyword="model", value=Raising(), is_async=False)
    @example(keyword="tools", value=Raising(), is_async=False)
    @example(keyword="tools", value=[RaisingMapping()], is_async=False)
    @example(keyword="messages", value=[RaisingMapping()], is_async=True)
    @example(keyword="policy", value=RaisingMapping(), is_async=False)
    @example(keyword="agents", value=RaisingMapping(), is_async=False)
    def test_a_result_or_an_agentfsm_error(
        self, keyword: str, value: Any, is_async: bool, answering: ScriptedServer
    ) -> None:
        """A RunResult, or an AgentFSMError raised before any model is asked."""
        if keyword in _NO_NETWORK and isinstance(value, str) and "\x00" not in value:
            value = None
        arguments: dict[str, Any] = {
            "model": "openai/scripted",
            "messages": "hi",
            "api_base": answering.openai_base,
            "api_key": "sk-test",
            "retry": ProviderRetry(attempts=1),
            "timeout": 10.0,
            keyword: value,
        }
        asked = len(answering.requests)
        try:
            result = asyncio.run(arun(**arguments)) if is_async else run(**arguments)
        except AgentFSMError:
            assert len(answering.requests) == asked  # refused where given: no model was asked
            return
        assert isinstance(result, RunResult)
