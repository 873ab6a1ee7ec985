"""The loop the seeds describe, through `af.run` on the scripted server with litellm's client:
verifier reasons reach the model, a context-length error is CONTEXT_EXHAUSTED, tools are
optional, denied tools are not offered, nested runs inherit the tools, empty results are marked
and the doom-loop rule is the default."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import agentfsm as af
from agentfsm import Policy
from agentfsm._model.snapshot import RunSnapshot
from agentfsm._model.types import Action, Decision, ExitReason, ToolCall
from agentfsm._permissions import Permission, Rule
from agentfsm._replay.engine import replay_run
from agentfsm._replay.trajectories import read_runs
from agentfsm._runner.loop import RunResult, arun
from agentfsm._runner.retry import ProviderRetry
from agentfsm._runner.session import denied_by_name
from agentfsm.testing.scripted import (
    Reply,
    Responder,
    call,
    fault,
    last_tool_result,
    say,
    tool_calls,
)
from agentfsm.testing.server import ScriptedServer
from tests.conftest import LITELLM_CLIENT
from tests.runner.conftest import scripted_arun, scripted_run

pytestmark = LITELLM_CLIENT

QUESTION = "What will the weather be like in Shanghai tomorrow?"
SHANGHAI = {"latitude": 31.23, "longitude": 121.47}
WEATHER = call("get_weather", SHANGHAI)


def go(server: ScriptedServer, **kwargs: Any) -> RunResult:
    """Ask the question through `run` against the server's OpenAI route."""
    kwargs.setdefault("retry", ProviderRetry(attempts=1))
    return scripted_run(server, QUESTION, **kwargs)


def ago(server: ScriptedServer, **kwargs: Any) -> RunResult:
    """`go` through `arun`, on a fresh event loop."""
    kwargs.setdefault("retry", ProviderRetry(attempts=1))
    return asyncio.run(scripted_arun(server, QUESTION, **kwargs))


RUNNERS: list[Callable[..., RunResult]] = [go, ago]


def offered(body: Mapping[str, Any]) -> list[str]:
    """The names of the tools a request offered the model."""
    return [t["function"]["name"] for t in body.get("tools", [])]


def cites_a_source(snap: RunSnapshot) -> str | None:
    """Pass an answer that names its source."""
    text = snap.output.text if snap.output is not None else ""
    return None if "source:" in text else "the answer names no source; add the source"


class TestVerifierReason:
    """A verifier's reason (CONTINUE at P4) reaches the model as a user message."""

    @pytest.mark.parametrize("runner", RUNNERS)
    def test_the_model_is_told_what_is_missing(
        self, get_weather: Callable[..., Any], runner: Callable[..., RunResult]
    ) -> None:
        """After a failed check the next request ends with the answer, then the reason as the
        user's message, and a model that reads it completes the run."""

        def fix(body: Mapping[str, Any]) -> Reply:
            told = body["messages"][-1]
            if told["role"] == "user" and "names no source" in told["content"]:
                return say("Light rain, 12-16 C. source: CMA")
            return say("Light rain, 12-16 C.")

        policy = Policy(verifiers=(cites_a_source,))
        with ScriptedServer([say("Light rain, 12-16 C."), fix]) as server:
            result = runner(server, tools=[get_weather], policy=policy)
        assert result.exit_reason is ExitReason.COMPLETED
        assert result.decisions[0].action is Action.CONTINUE
        answer, told = server.requests[1].body["messages"][-2:]
        assert answer == {"role": "assistant", "content": "Light rain, 12-16 C."}
        assert told["role"] == "user"
        assert "the answer names no source; add the source" in told["content"]
        assert result.messages[-1]["content"] == "Light rain, 12-16 C. source: CMA"

    def test_a_tool_round_adds_no_user_message(self, get_weather: Callable[..., Any]) -> None:
        """A CONTINUE that is not a failed check (a tool round) adds no user message."""
        with ScriptedServer([tool_calls(WEATHER), say("Rain. source: CMA")]) as server:
            go(server, tools=[get_weather], policy=Policy(verifiers=(cites_a_source,)))
        assert [m["role"] for m in server.requests[1].body["messages"]] == [
            "user",
            "assistant",
            "tool",
        ]


CONTEXT_ERRORS = {
    "openai": "This model's maximum context length is 128000 tokens. However, your messages "
    "resulted in 131072 tokens. Please reduce the length of the messages.",
    "openai-code": "Error code: context_length_exceeded: input too large for this model",
    "gemini": "The input token count (1200000) exceeds the maximum number of tokens allowed "
    "(1048576).",
    "bedrock": "ValidationException: Input is too long for requested model.",
    "responses": "Your input exceeds the context window of this model. Please adjust your "
    "input and try again.",
}


class TestContextExhausted:
    """A provider's context-length error ends CONTEXT_EXHAUSTED with the messages kept."""

    @pytest.mark.parametrize("message", CONTEXT_ERRORS.values(), ids=CONTEXT_ERRORS.keys())
    def test_openai_route(self, get_weather: Callable[..., Any], message: str) -> None:
        """After one tool round the input no longer fits: the run ends CONTEXT_EXHAUSTED at
        once (not retried), keeping the question, the call and its result."""
        script = [tool_calls(WEATHER), fault(400, message=message), say("never asked")]
        with ScriptedServer(script) as server:
            result = go(server, tools=[get_weather], retry=ProviderRetry(attempts=3))
            assert server.remaining == 1
        assert result.exit_reason is ExitReason.CONTEXT_EXHAUSTED
        assert [m["role"] for m in result.messages] == ["user", "assistant", "tool"]
        assert message.split(".")[0] in (result.error or "")
        assert result.decisions[-1].exit_reason is ExitReason.CONTEXT_EXHAUSTED

    def test_anthropic_prompt_is_too_long(self, get_weather: Callable[..., Any]) -> None:
        """Anthropic's "prompt is too long" over /v1/messages, in arun, is CONTEXT_EXHAUSTED."""
        script = [fault(400, message="prompt is too long: 210000 tokens > 200000 maximum")]
        with ScriptedServer(script) as server:
            result = asyncio.run(
                arun(
                    "anthropic/scripted",
                    QUESTION,
                    tools=[get_weather],
                    api_base=server.anthropic_base,
                    api_key="sk-ant-test",
                    retry=ProviderRetry(attempts=3),
                )
            )
        assert result.exit_reason is ExitReason.CONTEXT_EXHAUSTED
        assert result.messages == [{"role": "user", "content": QUESTION}]
        assert len(server.requests) == 1

    def test_another_bad_request_is_still_a_provider_error(self) -> None:
        """A 400 that says nothing of the context stays PROVIDER_ERROR."""
        with ScriptedServer([fault(400, message="invalid tool schema")]) as server:
            result = go(server)
        assert result.exit_reason is ExitReason.PROVIDER_ERROR


class TestPlainChat:
    """`af.run(model, messages)` without tools is a plain chat run."""

    @pytest.mark.parametrize("runner", RUNNERS)
    def test_a_run_without_tools_completes(self, runner: Callable[..., RunResult]) -> None:
        """No `tools=`: the request offers none and the answer ends the run COMPLETED."""
        with ScriptedServer([say("Light rain tomorrow.")]) as server:
            result = runner(server)
        assert result.exit_reason is ExitReason.COMPLETED
        assert result.text == "Light rain tomorrow."
        assert "tools" not in server.requests[0].body

    def test_the_public_name_takes_no_tools(self) -> None:
        """`af.run` itself, with only a model and a message list."""
        with ScriptedServer([say("Hello.")]) as server:
            result = af.run(
                "openai/scripted",
                [{"role": "user", "content": "Hi"}],
                api_base=server.openai_base,
                api_key="sk-test",
            )
        assert result.exit_reason is ExitReason.COMPLETED


def delete_file(path: str) -> str:
    """Delete a file."""
    return f"deleted {path}"


class TestDeniedToolsNotOffered:
    """Tools denied by name are left out of the request's tool list; the call stays refused."""

    @pytest.mark.parametrize(
        "policy",
        [
            Policy(permissions={"delete_file": "deny"}),
            Policy(permission_rules=["deny delete_*"]),
            Policy(permissions={"*": "deny", "get_weather": "allow"}),
            Policy(permissions={"delete_file": "allow"}, permission_rules=["deny delete_file"]),
        ],
        ids=["table", "rule", "default-deny", "rule-over-table"],
    )
    def test_a_tool_denied_by_name_is_not_offered(
        self, get_weather: Callable[..., Any], policy: Policy
    ) -> None:
        """Only get_weather is offered; a call to delete_file anyway is denied, not run."""
        script = [tool_calls(call("delete_file", {"path": "/tmp/x"})), say("ok")]
        with ScriptedServer(script) as server:
            result = go(server, tools=[get_weather, delete_file], policy=policy)
        assert [offered(r.body) for r in server.requests] == [["get_weather"]] * 2
        assert "permission denied" in result.messages[2]["content"]

    @pytest.mark.parametrize(
        "policy",
        [
            Policy(permission_rules=["deny delete_file(path=/etc/*)"]),
            Policy(permissions={"delete_file": "ask"}),
            Policy(permissions={"*": "deny"}, permission=lambda c: "allow"),
            Policy(permission_rules=["deny delete_file(path~rm -rf *)"]),
        ],
        ids=["argument-pattern", "ask", "hook", "shell-pattern"],
    )
    def test_a_tool_denied_only_for_some_calls_is_offered(
        self, get_weather: Callable[..., Any], policy: Policy
    ) -> None:
        """A deny with an argument pattern, an ask, or a hook that may allow: still offered."""
        with ScriptedServer([say("ok")]) as server:
            go(server, tools=[get_weather, delete_file], policy=policy)
        assert offered(server.requests[0].body) == ["get_weather", "delete_file"]

    def test_every_tool_denied_offers_none(self, get_weather: Callable[..., Any]) -> None:
        """When every tool is denied the request carries no tool list at all."""
        with ScriptedServer([say("ok")]) as server:
            go(server, tools=[get_weather], policy=Policy(permissions={"get_weather": "deny"}))
        assert "tools" not in server.requests[0].body


NAMES = ("get_weather", "delete_file")
PERMISSION = st.sampled_from(["allow", "ask", "deny"])
RULES = st.builds(
    Rule,
    action=PERMISSION,
    tool=st.sampled_from(["get_weather", "delete_*", "*", "nothing"]),
    args=st.sampled_from([(), (("path", "/etc/*"),), (("latitude", "3*"),)]),
)
POLICIES = st.builds(
    Policy,
    permissions=st.dictionaries(st.sampled_from([*NAMES, "*"]), PERMISSION, max_size=3),
    permission_rules=st.lists(RULES, max_size=3).map(tuple),
    permission=st.none() | PERMISSION.map(lambda verdict: lambda call: verdict),
)
ARGUMENTS = st.dictionaries(
    st.sampled_from(["path", "latitude"]), st.sampled_from(["/etc/passwd", "/tmp/x", "31.2"])
)


class TestDeniedByName:
    """`denied_by_name` agrees with the permission check the controller runs on every call."""

    @given(policy=POLICIES, name=st.sampled_from(NAMES), arguments=ARGUMENTS)
    def test_a_tool_not_offered_is_denied_whatever_its_arguments(
        self, policy: Policy, name: str, arguments: dict[str, Any]
    ) -> None:
        """When the tool is left out of the request, every call of it would be denied."""
        if denied_by_name(policy, name):
            verdict: Permission = policy.permission_for(
                ToolCall(id="c1", name=name, arguments=arguments)
            )
            assert verdict == "deny"


class TestNestedRunTools:
    """A run started inside a tool inherits the outer run's tools unless given its own."""

    def script(self) -> list[Reply | Responder]:
        return [
            tool_calls(call("research", {"topic": "rain"})),  # the outer run asks its tool
            tool_calls(WEATHER),  # the tool's run calls an inherited tool
            lambda body: say(f"found {last_tool_result(body)}"),
            lambda body: say("done"),
        ]

    def research(self, server: ScriptedServer, **given: Any) -> Callable[[str], str]:
        def research(topic: str) -> str:
            """Research a topic with a run of its own."""
            return scripted_run(
                server, f"research {topic}", retry=ProviderRetry(attempts=1), **given
            ).text

        return research

    @staticmethod
    def inner(server: ScriptedServer) -> list[Mapping[str, Any]]:
        """The requests the tool's own run made."""
        return [
            r.body for r in server.requests if r.body["messages"][0]["content"] == "research rain"
        ]

    def test_the_nested_run_offers_and_runs_the_outer_tools(
        self, get_weather: Callable[..., Any], weather_calls: list[Any]
    ) -> None:
        """The inner requests offer research and get_weather, and get_weather runs in it."""
        with ScriptedServer(self.script()) as server:
            result = go(server, tools=[self.research(server), get_weather])
        inner = self.inner(server)
        assert [offered(body) for body in inner] == [["research", "get_weather"]] * 2
        # The outer model reads the inner answer, which quotes the inherited tool's result.
        assert last_tool_result(server.requests[-1].body) == f"found {last_tool_result(inner[1])}"
        assert weather_calls == [(31.23, 121.47)]
        assert result.exit_reason is ExitReason.COMPLETED

    def test_the_nested_run_given_its_own_tools_keeps_them(
        self, get_weather: Callable[..., Any]
    ) -> None:
        """`tools=[]` given to the nested run: it offers none."""
        script = [tool_calls(call("research", {"topic": "rain"})), say("inner"), say("done")]
        with ScriptedServer(script) as server:
            go(server, tools=[self.research(server, tools=[]), get_weather])
        (inner,) = self.inner(server)
        assert "tools" not in inner

    def test_the_nested_run_keeps_the_outer_permissions(
        self, get_weather: Callable[..., Any], weather_calls: list[Any]
    ) -> None:
        """A call the outer policy denies by argument pattern is denied in the nested run too."""
        policy = Policy(permission_rules=["deny get_weather(latitude=31.23)"])
        with ScriptedServer(self.script()) as server:
            go(server, tools=[self.research(server), get_weather], policy=policy)
        inner = self.inner(server)
        assert weather_calls == []
        assert "permission denied" in (last_tool_result(inner[1]) or "")

    def test_an_async_nested_run_inherits_too(self, get_weather: Callable[..., Any]) -> None:
        """The same from arun, with an async tool that awaits arun."""

        async def main(server: ScriptedServer) -> RunResult:
            async def research(topic: str) -> str:
                """Research a topic with a run of its own."""
                inner = await scripted_arun(server, f"research {topic}")
                return inner.text

            return await scripted_arun(server, QUESTION, tools=[research, get_weather])

        with ScriptedServer(self.script()) as server:
            result = asyncio.run(main(server))
        inner = self.inner(server)
        assert [offered(body) for body in inner] == [["research", "get_weather"]] * 2
        assert result.exit_reason is ExitReason.COMPLETED


class TestEmptyResult:
    """An empty tool result is marked for the model and named in the decision's reason."""

    @pytest.mark.parametrize("value", ["", "  \n", None, [], {}], ids=repr)
    def test_an_empty_result_is_marked(self, value: object) -> None:
        """The model reads "(empty result)" and the decision after the results says so."""

        def lookup(key: str) -> object:
            """Look a key up."""
            return value

        script: list[Reply | Responder] = [tool_calls(call("lookup", {"key": "x"})), say("ok")]
        with ScriptedServer(script) as server:
            result = go(server, tools=[lookup])
        assert last_tool_result(server.requests[1].body) == "(empty result)"
        after = result.decisions[1]
        assert after.action is Action.CONTINUE
        assert "empty" in after.reason
        assert result.exit_reason is ExitReason.COMPLETED

    @pytest.mark.parametrize("value", [0, False, "0", [0]], ids=repr)
    def test_a_falsy_value_is_not_empty(self, value: object) -> None:
        """0, False, "0" and [0] are answers, not empty results."""

        def lookup(key: str) -> object:
            """Look a key up."""
            return value

        script = [tool_calls(call("lookup", {"key": "x"})), say("ok")]
        with ScriptedServer(script) as server:
            result = go(server, tools=[lookup])
        assert last_tool_result(server.requests[1].body) != "(empty result)"
        assert "empty" not in result.decisions[1].reason


def three_repeats() -> list[Reply | Responder]:
    """The same weather call three times in a row, then an answer."""
    return [tool_calls(WEATHER), tool_calls(WEATHER), tool_calls(WEATHER), say("Rain.")]


class TestDoomLoop:
    """The third identical call in a row is not executed; stop and ask are one setting away."""

    def test_by_default_the_repeat_is_refused_with_a_reason(
        self, get_weather: Callable[..., Any], weather_calls: list[Any]
    ) -> None:
        """Default policy: two calls run, the third gets an error result saying why, and the
        model, told so, answers: the run completes."""
        with ScriptedServer(three_repeats()) as server:
            result = go(server, tools=[get_weather])
        assert Policy().on_repeat == "feedback"
        assert len(weather_calls) == 2
        refusal = last_tool_result(server.requests[3].body) or ""
        assert refusal.startswith("not executed: get_weather(")
        assert "already called 2 times in a row" in refusal
        assert result.exit_reason is ExitReason.COMPLETED

    def test_stop_ends_the_run_as_a_doom_loop(
        self, get_weather: Callable[..., Any], weather_calls: list[Any]
    ) -> None:
        """`on_repeat="stop"`: the third call is not run and the run ends DOOM_LOOP."""
        with ScriptedServer(three_repeats()) as server:
            result = go(server, tools=[get_weather], policy=Policy(on_repeat="stop"))
            assert server.remaining == 1
        assert len(weather_calls) == 2
        assert result.exit_reason is ExitReason.DOOM_LOOP

    @pytest.mark.parametrize(("approve", "runs"), [(True, 3), (False, 2)])
    def test_ask_asks_a_human(
        self,
        get_weather: Callable[..., Any],
        weather_calls: list[Any],
        approve: bool,
        runs: int,
    ) -> None:
        """`on_repeat="ask"`: on_ask sees the repeated call; approved it runs, declined not."""
        asked: list[Decision] = []

        def on_ask(decision: Decision) -> tuple[bool, str | None]:
            asked.append(decision)
            return approve, None

        with ScriptedServer(three_repeats()) as server:
            result = go(server, tools=[get_weather], policy=Policy(on_repeat="ask"), on_ask=on_ask)
        assert [d.tool_calls[0].name for d in asked] == ["get_weather"]
        assert len(weather_calls) == runs
        expected = ExitReason.COMPLETED if approve else ExitReason.HUMAN_DECLINED
        assert result.exit_reason is expected


class TestReplayUnaffected:
    """A recorded run replays with the policy its trace recorded, whatever the default."""

    @pytest.mark.parametrize(
        ("policy", "end"),
        [(Policy(on_repeat="stop"), "doom_loop"), (Policy(), "completed")],
        ids=["stop", "default"],
    )
    def test_a_trace_replays_to_its_live_end(
        self, get_weather: Callable[..., Any], tmp_path: Path, policy: Policy, end: str
    ) -> None:
        """The three-repeat run, recorded under `stop` and under the default, replays without a
        policy to the end it had live, decision for decision."""
        path = tmp_path / "run.jsonl"
        with ScriptedServer(three_repeats()) as server:
            live = go(server, tools=[get_weather], policy=policy, trace=path)
        (recorded,) = read_runs(path)
        replayed = replay_run(recorded)
        assert live.exit_reason == replayed.exit_reason == end
        assert [d.action for d in replayed.decisions] == [d.action for d in live.decisions]


def paraphrased_repeats() -> list[Reply | Responder]:
    """The weather call five times, said five ways (key order, number spelling), then an answer."""
    said = [
        SHANGHAI,
        {"longitude": 121.47, "latitude": 31.23},
        {"latitude": 31.230, "longitude": 121.470},
        {"longitude": 121.47, "latitude": 31.23},
        SHANGHAI,
    ]
    return [*(tool_calls(call("get_weather", args)) for args in said), say("Rain.")]


class TestLoopLadder:
    """`Policy(loops=...)` through the runner: paraphrases count, the warning reaches the model."""

    LADDER = Policy(loops={"warn": 2, "ask": 0, "stop": 4})

    def test_the_warning_reaches_the_model_and_the_stop_ends_the_run(
        self, get_weather: Callable[..., Any], weather_calls: list[Any], tmp_path: Path
    ) -> None:
        """The 2nd and 3rd paraphrase run and the model reads a loop warning after their
        results, as a user message; the 4th is not run and the run ends DOOM_LOOP, replayed
        from its trace to the same end."""
        path = tmp_path / "run.jsonl"
        with ScriptedServer(paraphrased_repeats()) as server:
            result = go(server, tools=[get_weather], policy=self.LADDER, trace=path)
            assert server.remaining == 2
        assert len(weather_calls) == 3
        assert result.exit_reason is ExitReason.DOOM_LOOP
        warned = [
            m["content"]
            for m in server.requests[2].body["messages"]
            if m["role"] == "user" and m["content"].startswith("loop warning:")
        ]
        assert len(warned) == 1
        assert "is call 2 of the same intent in a row" in warned[0]
        assert server.requests[2].body["messages"][-1]["content"] == warned[0]
        assert "to go on" in result.decisions[-1].reason
        (recorded,) = read_runs(path)
        assert replay_run(recorded).exit_reason == "doom_loop"
