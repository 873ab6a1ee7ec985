"""A property across two paths a remembered approval takes (docs/approvals.md): the runner
(`af.run`, whose `on_ask` answers with a scope, against the local scripted server) and the
Controller answered by hand and reloaded from `dump()` before every input, now and then with
a tool redefined; LangGraph's prebuilt graph, resumed with `remember`, is held to the same
decisions. Whatever the policy, calls and answers: an approval never covers a denied call, a
call of another tool or of a tool changed since, nor more calls than the uses it was given;
an asked call runs only covered or approved; and without redefinitions the paths decide
alike."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentfsm as af
from agentfsm.testing import call, turn
from agentfsm.testing.scripted import call as scripted_call
from agentfsm.testing.scripted import say, tool_calls
from agentfsm.testing.server import ScriptedServer
from tests.conftest import LITELLM_CLIENT
from tests.runner.conftest import scripted_run
from tests.strategies import one_argument_tool

pytestmark = LITELLM_CLIENT

A = af.Action
PATHS = ["/srv/a", "/srv/b", "/etc/passwd"]
TOOLS = ("write_file", "read_file")
SCOPES = [
    "once",
    "uses=1",
    "uses=2",
    "run",
    "conversation",
    {"scope": "uses", "uses": 1, "pattern": "path^=/srv/*"},
    {"scope": "conversation", "pattern": "*"},
]


def write_file(path: str) -> str:
    """write a file"""
    return "ok"


def read_file(path: str) -> str:
    """read a file"""
    return "ok"


_calls = st.lists(
    st.tuples(st.sampled_from(TOOLS), st.sampled_from(PATHS)),
    min_size=1,
    max_size=6,
)
_answers = st.lists(st.tuples(st.booleans(), st.sampled_from(SCOPES)), min_size=6, max_size=6)
_table = st.fixed_dictionaries(
    {
        "write_file": st.sampled_from(["ask", "ask", "allow", "deny"]),
        "read_file": st.sampled_from(["ask", "ask", "allow"]),
    }
)


class Ledger:
    """What the asks answered, and the property's checks on every decision."""

    def __init__(self, policy: af.Policy, answers: list[tuple[bool, Any]]) -> None:
        self.policy, self.answers = policy, list(answers)
        self.made: dict[str, tuple[str, Any, int]] = {}  # approval id -> tool, scope, epoch
        self.used: dict[str, int] = {}
        self.approved: set[str] = set()
        self.epoch = 0  # bumped when the tools are redefined

    def answer(self, decision: af.Decision) -> tuple[bool, str | None, Any]:
        """The next answer; the approvals it makes are numbered as the Controller numbers
        them (one per approved asked call whose scope remembers something)."""
        return self.answer_calls([(c.id, c.name) for c in decision.tool_calls])

    def answer_calls(self, calls: list[tuple[str, str]]) -> tuple[bool, str | None, Any]:
        """`answer`, given the asked calls' ids and names."""
        approved, scope = self.answers.pop(0) if self.answers else (False, "once")
        if approved:
            for call_id, name in calls:
                self.approved.add(call_id)
                if scope != "once":
                    self.made[f"a{len(self.made) + 1}"] = (name, scope, self.epoch)
        return approved, None if approved else "no", scope

    def check(self, decision: af.Decision) -> None:
        verdicts = {c.id: self.policy.permission_verdict(c)[0] for c in decision.tool_calls}
        for call_id, approval_id in decision.covered.items():
            tool, scope, epoch = self.made[approval_id]
            name = next(c.name for c in decision.tool_calls if c.id == call_id)
            assert verdicts[call_id] == "ask", "an approval covered a call not asked about"
            assert name == tool, "an approval covered another tool"
            assert epoch == self.epoch, "an approval covered a tool redefined since"
            self.used[approval_id] = self.used.get(approval_id, 0) + 1
            uses = _uses(scope)
            assert uses is None or self.used[approval_id] <= uses, "more uses than granted"
        if decision.action is A.EXECUTE_TOOLS:
            for c in decision.tool_calls:
                assert verdicts[c.id] != "deny", "a denied call ran"
                if verdicts[c.id] == "ask":
                    assert c.id in decision.covered or c.id in self.approved


def _uses(scope: Any) -> int | None:
    """The uses a scope grants; None for a scope not counted in uses."""
    if isinstance(scope, str):
        return int(scope.partition("=")[2]) if scope.startswith("uses=") else None
    uses = scope.get("uses")
    return uses if isinstance(uses, int) else None


def _policy(table: dict[str, str]) -> af.Policy:
    return af.Policy(
        permissions=table,
        permission_rules=["deny write_file(path=/etc/*)"],
        repeat_threshold=50,
    )


def by_runner(
    policy: af.Policy, calls: list[tuple[str, str]], answers: list[tuple[bool, Any]]
) -> list[tuple[str, dict[str, str]]]:
    ledger = Ledger(policy, answers)

    def on_ask(decision: af.Decision) -> tuple[bool, str | None, Any]:
        return ledger.answer(decision)

    script = [
        tool_calls(scripted_call(name, {"path": path}, id=f"c{i}"))
        for i, (name, path) in enumerate(calls)
    ]
    with ScriptedServer([*script, say("done")]) as server:
        task = [{"role": "user", "content": "go"}]
        result = scripted_run(
            server, task, tools=[write_file, read_file], policy=policy, on_ask=on_ask
        )
    for decision in result.decisions:
        ledger.check(decision)
    return [(d.action.value, dict(d.covered)) for d in result.decisions]


def by_controller(
    policy: af.Policy,
    calls: list[tuple[str, str]],
    answers: list[tuple[bool, Any]],
    redefine: list[bool],
) -> list[tuple[str, dict[str, str]]]:
    ledger = Ledger(policy, answers)
    tools = [one_argument_tool(n, f"{n.split('_')[0]} a file", "path") for n in TOOLS]

    def identify(name: str) -> str:  # the host's pin of each tool, moved by a redefinition
        return f"{name}@{ledger.epoch}"

    ctl = af.Controller(policy, tools, identify=identify)
    seen: list[af.Decision] = []

    def step(decision: af.Decision) -> af.Decision:
        ledger.check(decision)
        seen.append(decision)
        return decision

    for i, (name, path) in enumerate(calls):
        if redefine[i]:  # a new definition: approvals made before cover nothing more
            ledger.epoch += 1
        ctl = af.Controller.load(json.loads(json.dumps(ctl.dump())), tools=tools, identify=identify)
        decision = step(ctl.on_model_output(turn(calls=[call(name, {"path": path}, id=f"c{i}")])))
        if decision.action is A.ASK_HUMAN:
            approved, message, scope = ledger.answer(decision)
            remember = {c.id: scope for c in decision.tool_calls} if approved else None
            ctl = af.Controller.load(
                json.loads(json.dumps(ctl.dump())), tools=tools, identify=identify
            )
            decision = step(ctl.on_human_reply(approved, message, remember=remember))
        if decision.action is A.EXECUTE_TOOLS:
            results = [af.ToolResult(call_id=c.id, content="ok") for c in ctl.pending_calls]
            step(ctl.on_tool_results(results))
        if ctl.done:
            break
    if not ctl.done:
        step(ctl.on_model_output(turn(text="done")))
    return [(d.action.value, dict(d.covered)) for d in seen]


def by_langgraph(
    policy: af.Policy, calls: list[tuple[str, str]], answers: list[tuple[bool, Any]]
) -> tuple[list[str], list[str]]:
    """The same calls through LangGraph's prebuilt graph, each interrupt resumed with the
    answer and its scope (`remember`): the actions and the calls that ran."""
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.tools import tool
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.types import Command

    from agentfsm.integrations.langgraph import create_agent

    ledger, ran = Ledger(policy, answers), []

    @tool
    def write_file(path: str) -> str:
        """write a file"""
        ran.append(f"write_file {path}")
        return "ok"

    @tool
    def read_file(path: str) -> str:
        """read a file"""
        ran.append(f"read_file {path}")
        return "ok"

    script = [
        AIMessage(
            content="",
            tool_calls=[{"name": n, "args": {"path": p}, "id": f"c{i}", "type": "tool_call"}],
        )
        for i, (n, p) in enumerate(calls)
    ]
    script.append(AIMessage(content="done", response_metadata={"finish_reason": "stop"}))
    fake = GenericFakeChatModel(messages=iter(script))
    graph = create_agent(fake, [write_file, read_file], policy, checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "t"}, "recursion_limit": 100}
    out = graph.invoke({"messages": [("user", "go")]}, config)
    while "__interrupt__" in out:
        asked = out["__interrupt__"][0].value["tool_calls"]
        approved, message, scope = ledger.answer_calls([(c["id"], c["name"]) for c in asked])
        answer = {"approved": approved, "message": message}
        if approved:
            answer["remember"] = scope
        out = graph.invoke(Command(resume=answer), config)
    return [d["action"] for d in out["decisions"]], ran


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(table=_table, calls=_calls, answers=_answers)
def test_both_paths_keep_approvals_within_their_grant(
    table: dict[str, str], calls: list[tuple[str, str]], answers: list[tuple[bool, Any]]
) -> None:
    policy = _policy(table)
    ran = by_runner(policy, calls, answers)
    held = by_controller(policy, calls, answers, [False] * len(calls))
    assert ran == held
    graphed, executed = by_langgraph(policy, calls, answers)
    assert graphed == [action for action, _ in held]
    assert not any(c.startswith("write_file /etc/") for c in executed)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    table=_table,
    calls=_calls,
    answers=_answers,
    redefine=st.lists(st.booleans(), min_size=6, max_size=6),
)
def test_a_reloaded_controller_never_covers_a_redefined_tool(
    table: dict[str, str],
    calls: list[tuple[str, str]],
    answers: list[tuple[bool, Any]],
    redefine: list[bool],
) -> None:
    by_controller(_policy(table), calls, answers, redefine)
