"""The Agents SDK's own features beside agentfsm's policy: the strongest verdict wins.

A function tool's own `needs_approval` (a bool or a callable), the tools of an MCP server
(a real stdio server process, `mcp_log_server.py`, started by the SDK's own `MCPServerStdio`),
handoffs, and tools the SDK or the provider's server would run without a function call
(hosted tools). The model is the SDK's own `ScriptedModel`; the SDK's own `Runner` runs it.
Nothing that the policy or the framework would stop runs unless a human approved it, and no
decision tells of a human who was never asked.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import sys
import threading
from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal, TypeVar

import pytest
from agents import (
    Agent,
    FunctionTool,
    RunConfig,
    Runner,
    WebSearchTool,
    function_tool,
    handoff,
)
from agents.mcp import MCPServerStdio
from agents.testing import ScriptedModel, assistant_message, function_call
from hypothesis import event, given
from hypothesis import strategies as st
from pydantic import BaseModel

import agentfsm as af
from agentfsm.exceptions import AgentFSMError, DefinitionError, RunError
from agentfsm.integrations.openai_agents import GovernedModel, decisions, governed
from tests.integrations.conftest import sdk_run

A, X = af.Action, af.ExitReason
CONFIG = RunConfig(tracing_disabled=True)
SERVER = Path(__file__).with_name("mcp_log_server.py")
HANDOFF = "research"
T = TypeVar("T")


# -- a real MCP server, kept for the module on a loop of its own ---------------------------


class McpServer:
    """The stdio MCP server process, connected on an event loop in a thread of its own.

    The SDK's MCP client must be opened and closed by one task, so the connection lives in one
    task for the whole module; every run is sent to that loop (`run`). `needs` is what the
    server's `require_approval` (a callable, read per call) says needs a human.
    """

    def __init__(self, log: Path) -> None:
        self.log = log
        self.needs: set[str] = set()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.server = MCPServerStdio(
            {"command": sys.executable, "args": [str(SERVER), str(log)]},
            cache_tools_list=True,
            client_session_timeout_seconds=60,
            require_approval=lambda _ctx, _agent, tool: tool.name in self.needs,
        )
        self.stop = asyncio.Event()
        self.thread.start()
        ready = threading.Event()
        self.served = asyncio.run_coroutine_threadsafe(self._serve(ready), self.loop)
        if not ready.wait(120):
            raise RuntimeError(f"the MCP server did not start: {self.served}")

    async def _serve(self, ready: threading.Event) -> None:
        async with self.server:
            ready.set()
            await self.stop.wait()

    def run(self, work: Coroutine[Any, Any, T]) -> T:
        """Run `work` on the server's loop and wait for it."""
        return asyncio.run_coroutine_threadsafe(work, self.loop).result(300)

    def ran(self) -> list[str]:
        """The lines the server's tools logged since the last call, and forget them."""
        lines = self.log.read_text().splitlines() if self.log.exists() else []
        self.log.write_text("")
        return lines

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.stop.set)
        self.served.result(60)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(60)
        self.loop.close()


@pytest.fixture(scope="module")
def mcp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[McpServer]:
    """One MCP server process for the module; every test starts with an empty log."""
    server = McpServer(tmp_path_factory.mktemp("mcp") / "calls.log")
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def server(mcp: McpServer) -> McpServer:
    mcp.needs = set()
    mcp.ran()
    return mcp


# -- driving a run to its end, answering every interruption --------------------------------


@dataclass
class Outcome:
    """What happened around the run: the human's part, and how it ended."""

    approved: set[str] = field(default_factory=set)
    """The arguments (as JSON) of every call a human approved."""
    rounds: int = 0
    """How many times the run stopped to ask a human."""
    declined: bool = False
    """Whether a human declined anything."""
    result: Any = None
    error: Exception | None = None


async def drive(agent: Agent[Any], answers: Iterator[bool], stream: bool = False) -> Outcome:
    """Run to the end; each interruption round gets the next answer (no, once they run out)."""
    seen = Outcome()
    try:
        result = await sdk_run(agent, "go", stream, run_config=CONFIG, max_turns=20)
        while result.interruptions:
            seen.rounds += 1
            yes = next(answers, False)
            state = result.to_state()
            for item in result.interruptions:
                if yes:
                    seen.approved.add(getattr(item.raw_item, "arguments", ""))
                    state.approve(item)
                else:
                    seen.declined = True
                    state.reject(item)
            result = await sdk_run(agent, state, stream, run_config=CONFIG, max_turns=20)
        seen.result = result
    except RunError as exc:  # a handoff a human was asked about: the SDK cannot ask one
        seen.error = exc
    assert seen.error is None or f"handoff {HANDOFF!r} not run" in str(seen.error)
    return seen


def asked_ids(result: Any) -> list[str]:
    """The call ids of a result's interruptions."""
    return [getattr(item.raw_item, "call_id", "") for item in result.interruptions]


def story_is_true(model: GovernedModel, seen: Outcome) -> None:
    """No decision tells of a human who was not asked: a decline only after a human's no,
    and every question to a human (about a function call) shown to one."""
    made = model.decisions
    if not seen.declined:
        assert all(d.exit_reason is not X.HUMAN_DECLINED for d in made), made
        texts = [str(r.content) for d in made for r in d.results] + [d.reason for d in made]
        assert not any("declined" in t for t in texts), texts
    questions = [
        d for d in made if d.action is A.ASK_HUMAN and any(c.name != HANDOFF for c in d.tool_calls)
    ]
    assert len(questions) == seen.rounds, (made, seen)


# -- the tools ---------------------------------------------------------------------------


class Log:
    """What the function tools ran, as `tool:argument` lines (the MCP server logs the same)."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def tool(self, name: str, needs_approval: Any = False) -> FunctionTool:
        def run(arg: str) -> str:
            self.lines.append(f"{name}:{arg}")
            return f"{name} ran {arg}"

        run.__name__ = name
        run.__doc__ = f"The {name} tool."
        return function_tool(run, needs_approval=needs_approval)


def script(*turns: list[Any]) -> ScriptedModel:
    """The SDK's ScriptedModel: these turns, then answers."""
    return ScriptedModel([*turns, *[[assistant_message("Done.")]] * 8])


def call(name: str, arg: str, call_id: str, key: str = "arg") -> Any:
    return function_call(name, {key: arg}, call_id=call_id)


async def only_x(_ctx: Any, params: dict[str, Any], _call_id: str) -> bool:
    """An async `needs_approval`: a human approves arguments that start with x."""
    return str(params.get("arg", "")).startswith("x")


# -- item 1: a function tool's own needs_approval ----------------------------------------


class TestOwnApproval:
    """A function tool's `needs_approval=True` (or a callable) still asks a human."""

    TURN: ClassVar[list[Any]] = [call("wipe", "/data", "c1")]

    def agent(self, log: Log, policy: af.Policy | None = None, flag: Any = True) -> Agent[Any]:
        return governed(
            Agent(name="a", model=script(self.TURN), tools=[log.tool("wipe", flag)]), policy
        )

    @pytest.mark.parametrize("stream", [False, True], ids=["run", "run_streamed"])
    def test_the_flag_interrupts_and_runs_only_once_approved(self, stream: bool) -> None:
        """Natively the SDK interrupts for `needs_approval=True`; governed with a policy that
        allows everything, it still does, and the tool runs only after `state.approve`."""
        log = Log()
        native = Agent(name="a", model=script(self.TURN), tools=[log.tool("wipe", True)])
        first = asyncio.run(sdk_run(native, "go", stream, run_config=CONFIG))
        assert len(first.interruptions) == 1
        assert log.lines == []
        agent = self.agent(log)
        first = asyncio.run(sdk_run(agent, "go", stream, run_config=CONFIG))
        assert asked_ids(first) == ["c1"]
        assert log.lines == []
        state = first.to_state()
        state.approve(first.interruptions[0])
        result = asyncio.run(sdk_run(agent, state, stream, run_config=CONFIG))
        assert log.lines == ["wipe:/data"]
        assert [d.action for d in decisions(result)][:2] == [A.ASK_HUMAN, A.EXECUTE_TOOLS]

    def test_a_rejection_is_a_human_decline(self) -> None:
        """Rejected, the tool never runs, and the run ends HUMAN_DECLINED (a human did)."""
        log = Log()
        agent = self.agent(log)
        seen = asyncio.run(drive(agent, iter([False])))
        assert log.lines == []
        assert seen.rounds == 1
        assert decisions(seen.result)[-1].exit_reason is X.HUMAN_DECLINED

    def test_the_policy_deny_still_denies(self) -> None:
        """A policy deny beats the flag's ask: no interruption, nothing runs."""
        log = Log()
        agent = self.agent(log, af.Policy(permissions={"wipe": "deny"}))
        seen = asyncio.run(drive(agent, iter([True])))
        assert log.lines == []
        assert seen.rounds == 0

    @pytest.mark.parametrize("flag", ["sync", "async"])
    def test_a_callable_flag_asks_about_the_calls_it_marks(self, flag: str) -> None:
        """A callable `needs_approval` is asked with the call's arguments: the call it marks
        waits for a human, the other runs at once."""
        log = Log()

        def sync_x(_ctx: Any, params: dict[str, Any], _call_id: str) -> bool:
            return str(params.get("arg", "")).startswith("x")

        check: Callable[..., bool | Awaitable[bool]] = sync_x if flag == "sync" else only_x
        turns = [[call("wipe", "keep", "c1")], [call("wipe", "x-gone", "c2")]]
        agent = governed(Agent(name="a", model=script(*turns), tools=[log.tool("wipe", check)]))
        first = asyncio.run(Runner.run(agent, "go", run_config=CONFIG))
        assert log.lines == ["wipe:keep"]
        assert asked_ids(first) == ["c2"]
        state = first.to_state()
        state.approve(first.interruptions[0])
        asyncio.run(Runner.run(agent, state, run_config=CONFIG))
        assert log.lines == ["wipe:keep", "wipe:x-gone"]

    def test_a_failing_callable_asks(self) -> None:
        """A callable that raises asks a human (as the SDK does), it never lets the call run."""
        log = Log()

        def broken(_ctx: Any, _params: dict[str, Any], _call_id: str) -> bool:
            raise ValueError("no idea")

        seen = asyncio.run(drive(self.agent(log, flag=broken), iter([False])))
        assert log.lines == []
        assert seen.rounds == 1


# -- item 2: MCP server tools ------------------------------------------------------------


class TestMcpTools:
    """Tools of a real MCP server process, through the SDK's own MCPServerStdio."""

    def agent(self, server: McpServer, turn: list[Any], policy: af.Policy) -> Agent[Any]:
        model = script(turn)
        return governed(Agent(name="a", model=model, mcp_servers=[server.server]), policy)

    TURN: ClassVar[list[Any]] = [call("drop_table", "users", "c1", "table")]
    ASK = af.Policy(permissions={"drop_table": "ask"})

    def test_ask_interrupts_and_nothing_runs_before_the_answer(self, server: McpServer) -> None:
        """Policy `ask`: a real interruption; the tool has not run; approved, it runs once."""
        agent = self.agent(server, self.TURN, self.ASK)
        first = server.run(Runner.run(agent, "go", run_config=CONFIG))
        assert asked_ids(first) == ["c1"]
        assert server.ran() == []
        state = first.to_state()
        state.approve(first.interruptions[0])
        result = server.run(Runner.run(agent, state, run_config=CONFIG))
        assert server.ran() == ["drop_table:users"]
        assert result.final_output == "Done."

    def test_a_rejection_never_runs_it_and_a_human_declined(self, server: McpServer) -> None:
        """Rejected: the tool never runs, and HUMAN_DECLINED is true (a human was asked)."""
        agent = self.agent(server, self.TURN, self.ASK)
        seen = server.run(drive(agent, iter([False])))
        assert server.ran() == []
        assert seen.rounds == 1
        assert decisions(seen.result)[-1].exit_reason is X.HUMAN_DECLINED

    def test_deny_and_allow(self, server: McpServer) -> None:
        """Deny: never runs, the model reads why; allow: runs once, without a question."""
        deny = af.Policy(permissions={"drop_table": "deny"})
        seen = server.run(drive(self.agent(server, self.TURN, deny), iter([])))
        assert server.ran() == []
        assert seen.rounds == 0
        seen = server.run(drive(self.agent(server, self.TURN, af.Policy()), iter([])))
        assert server.ran() == ["drop_table:users"]
        assert seen.rounds == 0

    def test_the_servers_own_approval_still_asks(self, server: McpServer) -> None:
        """The server's `require_approval` marks the tool: asked even though the policy
        allows it; the policy's deny still denies it."""
        server.needs = {"drop_table"}
        seen = server.run(drive(self.agent(server, self.TURN, af.Policy()), iter([False])))
        assert server.ran() == []
        assert seen.rounds == 1
        deny = af.Policy(permissions={"drop_table": "deny"})
        seen = server.run(drive(self.agent(server, self.TURN, deny), iter([True])))
        assert server.ran() == []
        assert seen.rounds == 0


# -- tools agentfsm cannot check before they run -------------------------------------------


class WithHostedTool(Agent[Any]):
    """An agent class that adds a hosted tool at run time (as a sandbox agent adds its own)."""

    async def get_all_tools(self, run_context: Any) -> list[Any]:
        return [*await super().get_all_tools(run_context), WebSearchTool()]


class TestHostedTools:
    """Tools the provider's server (or the SDK outside function tools) runs are refused."""

    def test_governed_refuses_a_hosted_tool_by_name(self) -> None:
        """The build raises DefinitionError naming the tool and the fix."""
        agent = Agent(name="a", model=script([]), tools=[WebSearchTool()])
        with pytest.raises(DefinitionError, match=r"'web_search'.*function tool"):
            governed(agent)

    def test_a_hosted_tool_appearing_at_run_time_stops_the_run(self) -> None:
        """A tool the agent brings only at run time is refused before the model is called;
        the user's own Agent subclass stays one."""
        agent = governed(WithHostedTool(name="a", model=script([assistant_message("hi")])))
        assert isinstance(agent, WithHostedTool)
        with pytest.raises(AgentFSMError, match="web_search"):
            asyncio.run(Runner.run(agent, "go", run_config=CONFIG))
        scripted: Any = agent.model
        assert not scripted.inner.calls


# -- item 5: a property over the framework's own features ------------------------------------

ARGUMENT = {"plain": "arg", "flagged": "arg", "checked": "arg", "drop_table": "table"}
ARGUMENT |= {"read_row": "key", HANDOFF: "task"}
NAMES = tuple(ARGUMENT)
RULES = (
    "deny drop_table(table=users*)",
    "ask read_row",
    "allow flagged",
    "deny checked(arg=tmp*)",
    "ask plain(arg=x*)",
    "deny *(arg=users*)",
    f"ask {HANDOFF}",
    f"deny {HANDOFF}(task=tmp*)",
    "allow *",
)
VERDICTS = ("allow", "ask", "deny")
_numbers = itertools.count(1)


class Task(BaseModel):
    task: str


@dataclass(frozen=True)
class Case:
    """A policy, the framework's own settings, a script of calls and the human's answers."""

    policy: af.Policy
    mcp_needs: frozenset[str]
    turns: tuple[tuple[tuple[str, str], ...], ...]
    """Each turn's calls as (tool, argument); a handoff is alone in its turn."""
    answers: tuple[bool, ...]
    stream: bool
    on_decline: Literal["stop", "feedback"]
    async_check: bool

    def framework_asks(self, name: str, arg: str) -> bool:
        """Whether the SDK itself would ask a human before running this call."""
        if name in ("drop_table", "read_row"):
            return name in self.mcp_needs
        return name == "flagged" or (name == "checked" and arg.startswith("x"))

    def verdict(self, name: str, arg: str) -> str:
        """The strongest of the policy's verdict and the framework's own."""
        said = self.policy.permission_for(
            af.ToolCall(id="x", name=name, arguments={ARGUMENT[name]: arg})
        )
        return "ask" if said == "allow" and self.framework_asks(name, arg) else said


@st.composite
def cases(draw: st.DrawFn) -> Case:
    table = draw(st.dictionaries(st.sampled_from([*NAMES, "*"]), st.sampled_from(VERDICTS)))
    rules = draw(st.lists(st.sampled_from(RULES), max_size=3, unique=True))
    policy = af.Policy(
        permission_rules=rules,
        permissions=table,
        handoffs=draw(st.sampled_from([frozenset(), frozenset({HANDOFF})])),
        on_deny=draw(st.sampled_from(["feedback", "stop"])),
    )
    value = st.sampled_from(["users", "tmp", "x", "ok"]).map(lambda v: f"{v}#{next(_numbers)}")
    tool_call = st.tuples(st.sampled_from([n for n in NAMES if n != HANDOFF]), value)
    turn = st.lists(tool_call, min_size=1, max_size=3).map(tuple) | st.tuples(
        st.tuples(st.just(HANDOFF), value)
    )
    return Case(
        policy=policy,
        mcp_needs=frozenset(draw(st.sets(st.sampled_from(["drop_table", "read_row"])))),
        turns=tuple(draw(st.lists(turn, min_size=1, max_size=3))),
        answers=tuple(draw(st.lists(st.booleans(), min_size=4, max_size=4))),
        stream=draw(st.booleans()),
        on_decline=draw(st.sampled_from(["stop", "feedback"])),
        async_check=draw(st.booleans()),
    )


def sync_x(_ctx: Any, params: dict[str, Any], _call_id: str) -> bool:
    return str(params.get("arg", "")).startswith("x")


def build(case: Case, log: Log, server: McpServer) -> tuple[Agent[Any], ScriptedModel]:
    """The governed agent of a case, and the model of the child a handoff passes to."""
    child = ScriptedModel([[assistant_message("child done")]] * 4)

    def on_handoff(_ctx: Any, given: Task) -> None:
        log.lines.append(f"{HANDOFF}:{given.task}")

    to_child = handoff(
        Agent(name="child", model=child),
        tool_name_override=HANDOFF,
        on_handoff=on_handoff,
        input_type=Task,
    )
    turns = [
        [call(name, arg, f"c{arg.split('#')[1]}", ARGUMENT[name]) for name, arg in turn]
        for turn in case.turns
    ]
    tools: list[Any] = [
        log.tool("plain"),
        log.tool("flagged", True),
        log.tool("checked", only_x if case.async_check else sync_x),
    ]
    agent = Agent(
        name="parent",
        model=script(*turns),
        tools=tools,
        handoffs=[to_child],
        mcp_servers=[server.server],
    )
    return governed(agent, case.policy, on_decline=case.on_decline), child


class TestOwnFeaturesProperty:
    """Random policies beside the SDK's own approval flags, MCP tools and a handoff."""

    @given(cases())
    def test_nothing_runs_that_either_would_stop_and_every_story_is_true(
        self, mcp: McpServer, case: Case
    ) -> None:
        """Every call that ran: not denied by the policy, and approved by a human whenever
        the policy or the framework asks; none twice; a handoff passes only when the policy
        allows it. No decline is told that no human made; every question reached a human."""
        mcp.needs = set(case.mcp_needs)
        mcp.ran()
        log = Log()
        agent, child = build(case, log, mcp)
        seen = mcp.run(drive(agent, iter(case.answers), case.stream))
        ran = log.lines + mcp.ran()
        assert all(n == 1 for n in Counter(ran).values()), ran
        calls = {arg: name for turn in case.turns for name, arg in turn}
        approved = {next(iter(json.loads(a).values())) for a in seen.approved}
        for line in ran:
            name, arg = line.split(":", 1)
            assert calls[arg] == name
            verdict = case.verdict(name, arg)
            assert verdict != "deny", f"{line} ran though denied"
            if verdict == "ask":
                assert name != HANDOFF, f"{line}: the SDK cannot ask about a handoff"
                assert arg in approved, f"{line} ran without a human's approval"
        assert len(child.calls) == sum(1 for line in ran if line.startswith(HANDOFF))
        assert isinstance(agent.model, GovernedModel)
        story_is_true(agent.model, seen)
        event(f"ran {len(ran)}, asked {seen.rounds}, declined {seen.declined}")
