"""agentfsm's decision overhead inside each framework, beside that framework's own per-step cost.

Run: `python bench/bench_integrations.py` from the repo root (needs the integrations extra, which
`make install` installs). Every framework runs the same workload twice, natively and governed:
a scripted model (the framework's own test double) whose turns 1..N-1 each ask for one call
`echo(i=k)` and whose turn N answers, and a no-op tool. Reported per model turn (median of the
repetitions): the native run's time, the governed run's time, their difference (everything the
integration adds: the Controller, the wrapper or node, message rewriting, state saving), and the
time spent inside the Controller's own methods. Writes bench/RESULTS-integrations.md.
"""

from __future__ import annotations

import asyncio
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("MSWEA_SILENT_STARTUP", "1")

import agentfsm as af  # noqa: E402  (needs the repo on sys.path)
from agentfsm._engine.controller import Controller  # noqa: E402
from bench.results import write_section  # noqa: E402

N = 20
"""Model turns per run: N - 1 tool calls, then the answer."""

Run = Callable[[], None]


class ControllerClock:
    """Accumulate the CPU time the calling thread spends inside the Controller's input methods."""

    METHODS = ("on_model_output", "on_tool_results", "on_human_reply")

    def __init__(self) -> None:
        self.seconds = 0.0
        self._saved: dict[str, Any] = {}

    def __enter__(self) -> ControllerClock:
        for name in self.METHODS:
            original = getattr(Controller, name)
            self._saved[name] = original

            def timed(ctl: Controller, *a: Any, _f: Any = original, **k: Any) -> Any:
                start = time.thread_time()
                try:
                    return _f(ctl, *a, **k)
                finally:
                    self.seconds += time.thread_time() - start

            setattr(Controller, name, timed)
        return self

    def __exit__(self, *exc: object) -> None:
        for name, original in self._saved.items():
            setattr(Controller, name, original)


def once(build: Callable[[], Run]) -> tuple[float, float, float]:
    """One whole run: wall and process CPU seconds, and CPU seconds inside the Controller."""
    run = build()
    with ControllerClock() as clock:
        wall, cpu = time.perf_counter(), time.process_time()
        run()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return wall, cpu, clock.seconds


def measure(make: Callable[[bool], Run], repeats: int) -> dict[str, float]:
    """Medians in µs per model turn, native and governed runs interleaved so load hits both."""
    native, governed = [], []
    for _ in range(repeats):
        native.append(once(lambda: make(False)))
        governed.append(once(lambda: make(True)))

    def median(rows: list[tuple[float, float, float]], column: int) -> float:
        return statistics.median(r[column] for r in rows) * 1e6 / N

    return {
        "native_cpu": median(native, 1),
        "governed_cpu": median(governed, 1),
        "native_wall": median(native, 0),
        "governed_wall": median(governed, 0),
        "inside": median(governed, 2),
    }


def bare_controller(repeats: int) -> float:
    """CPU µs per turn of the Controller alone, fed ModelTurns in a bare loop (for scale)."""
    from agentfsm.testing import call, turn

    turns = [turn(calls=[call("echo", {"i": k}, id=f"c{k}")]) for k in range(N - 1)]
    answer = turn(text="done", finish="stop")
    samples = []
    for _ in range(repeats):
        start = time.process_time()
        ctl = Controller(af.Policy(max_turns=N + 5))
        for k, output in enumerate(turns):
            ctl.on_model_output(output)
            ctl.on_tool_results([af.ToolResult(call_id=f"c{k}", content=str(k))])
        ctl.on_model_output(answer)
        samples.append(time.process_time() - start)
    return statistics.median(samples) * 1e6 / N


# -- LangGraph -------------------------------------------------------------------------------


def langgraph(governed: bool) -> Run:
    """A ReAct graph on GenericFakeChatModel: tools_condition natively, create_agent governed."""
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.tools import tool
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition

    from agentfsm.integrations.langgraph import create_agent

    @tool
    def echo(i: int) -> str:
        """Return i."""
        return str(i)

    script = [
        AIMessage(content="", tool_calls=[{"name": "echo", "args": {"i": k}, "id": f"c{k}"}])
        for k in range(N - 1)
    ] + [AIMessage(content="done")]
    model = GenericFakeChatModel(messages=iter(script))
    if governed:
        graph = create_agent(model, [echo], af.Policy(max_turns=N + 5))
    else:
        builder: Any = StateGraph(MessagesState)
        builder.add_node("agent", lambda s: {"messages": [model.invoke(s["messages"])]})
        builder.add_node("tools", ToolNode([echo]))
        builder.add_edge(START, "agent")
        builder.add_conditional_edges("agent", tools_condition)
        builder.add_edge("tools", "agent")
        graph = builder.compile()
    config = {"recursion_limit": 4 * N + 10}
    return lambda: _check(
        graph.invoke({"messages": [("user", "go")]}, config)["messages"][-1].content
    )


# -- OpenAI Agents SDK -------------------------------------------------------------------------


def openai_agents(governed: bool) -> Run:
    """Runner.run on the SDK's ScriptedModel, wrapped by governed() or not."""
    from agents import Agent, RunConfig, Runner, function_tool
    from agents.testing import ScriptedModel, assistant_message, function_call

    from agentfsm.integrations.openai_agents import governed as govern

    @function_tool
    def echo(i: int) -> str:
        """Return i."""
        return str(i)

    script = [[function_call("echo", {"i": k}, call_id=f"c{k}")] for k in range(N - 1)]
    agent = Agent(
        name="a", tools=[echo], model=ScriptedModel([*script, [assistant_message("done")]])
    )
    if governed:
        agent = govern(agent, af.Policy(max_turns=N + 5))
    config = RunConfig(tracing_disabled=True)
    loop = asyncio.new_event_loop()

    def run() -> None:
        result = loop.run_until_complete(
            Runner.run(agent, "go", run_config=config, max_turns=N + 5)
        )
        _check(result.final_output)

    return run


# -- pydantic-ai -------------------------------------------------------------------------------


def pydantic_ai(governed: bool) -> Run:
    """Agent.run_sync on FunctionModel, wrapped by GovernedModel or not."""
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import FunctionModel
    from pydantic_ai.usage import UsageLimits

    from agentfsm.integrations.pydantic_ai import GovernedModel

    def echo(i: int) -> str:
        """Return i."""
        return str(i)

    replies = iter(
        [
            ModelResponse(parts=[ToolCallPart("echo", {"i": k}, tool_call_id=f"c{k}")])
            for k in range(N - 1)
        ]
        + [ModelResponse(parts=[TextPart("done")])]
    )
    inner = FunctionModel(lambda messages, info: next(replies))
    limits = UsageLimits(request_limit=N + 5)
    if governed:
        model = GovernedModel(inner, af.Policy(max_turns=N + 5))
        agent: Any = Agent(model, toolsets=[model.toolset([echo])])
    else:
        agent = Agent(inner, tools=[echo])
    return lambda: _check(agent.run_sync("go", usage_limits=limits).output)


# -- mini-swe-agent ---------------------------------------------------------------------------


def mini_swe_agent(governed: bool) -> Run:
    """DefaultAgent or GovernedAgent on DeterministicToolcallModel and a real LocalEnvironment."""
    from minisweagent.agents.default import DefaultAgent
    from minisweagent.environments.local import LocalEnvironment
    from minisweagent.models.test_models import DeterministicToolcallModel

    from agentfsm.integrations.mini_swe_agent import GovernedAgent

    def step(command: str, k: int) -> dict[str, Any]:
        call = {
            "id": f"c{k}",
            "type": "function",
            "function": {"name": "bash", "arguments": json.dumps({"command": command})},
        }
        extra = {"actions": [{"command": command, "tool_call_id": f"c{k}"}], "cost": 0.0}
        return {"role": "assistant", "content": "", "tool_calls": [call], "extra": extra}

    outputs = [step(f"true {k}", k) for k in range(N - 1)]
    outputs.append(step("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT; echo done", N))
    model = DeterministicToolcallModel(outputs=outputs)
    config: dict[str, Any] = {
        "system_template": "s",
        "instance_template": "{{task}}",
        "step_limit": N + 5,
    }
    if governed:
        agent: Any = GovernedAgent(
            model, LocalEnvironment(), policy=af.Policy(max_turns=N + 5), **config
        )
    else:
        agent = DefaultAgent(model, LocalEnvironment(), **config)
    return lambda: _check(agent.run("go")["submission"].strip())


def _check(answer: object) -> None:
    if answer != "done":
        raise SystemExit(f"the run did not end with the scripted answer: {answer!r}")


FRAMEWORKS: dict[str, tuple[Callable[[bool], Run], int]] = {
    "LangGraph 1.2 (GenericFakeChatModel, ToolNode)": (langgraph, 21),
    "OpenAI Agents SDK 0.24 (ScriptedModel, Runner.run)": (openai_agents, 21),
    "pydantic-ai 2.68 (FunctionModel, Agent.run_sync)": (pydantic_ai, 21),
    "mini-swe-agent 2.4 (DeterministicToolcallModel, LocalEnvironment)": (mini_swe_agent, 9),
}


def main() -> int:
    """Measure every framework and write bench/RESULTS-integrations.md."""
    rows = []
    for name, (make, repeats) in FRAMEWORKS.items():
        make(False)()  # warm imports and caches before timing
        make(True)()
        figures = measure(make, repeats)
        rows.append((name, figures))
        print(name, {k: round(v) for k, v in figures.items()})
    bare = bare_controller(30)
    lines = [
        "# Decision overhead inside each framework",
        "",
        (
            f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} with "
            f"`python bench/bench_integrations.py` on {platform.machine()} "
            f"({os.cpu_count()} cores shared with other work, load average "
            f"{os.getloadavg()[0]:.1f} at the end), Python {platform.python_version()}."
        ),
        f"Workload: one run of {N} model turns ({N - 1} tool calls, then the answer) on each",
        "framework's own test double. µs per model turn, medians; native and governed runs",
        "alternate, so the machine's load hits both alike. CPU time (the process's, all threads)",
        "is the figure to read on a loaded machine; wall time is shown beside it.",
        "",
        (
            "| framework | native CPU µs/turn | governed CPU µs/turn | added by the integration | "
            "inside the Controller | native / governed wall µs |"
        ),
        "|---|---|---|---|---|---|",
    ]
    for name, f in rows:
        added = f["governed_cpu"] - f["native_cpu"]
        share = 100 * added / f["native_cpu"] if f["native_cpu"] else 0.0
        cells = [
            name,
            f"{f['native_cpu']:,.0f}",
            f"{f['governed_cpu']:,.0f}",
            f"{added:,.0f} ({share:.0f}%)",
            f"{f['inside']:,.0f}",
            f"{f['native_wall']:,.0f} / {f['governed_wall']:,.0f}",
        ]
        lines.append(f"| {' | '.join(cells)} |")
    lines += [
        "",
        '"Added" is everything the integration does per turn: the Controller, the wrapper,',
        "message rewriting, and for LangGraph the decision inside the model node with one",
        "`dump` into the graph state per turn (no graph step of its own; see the LangGraph",
        "section for its share of a turn over real HTTP).",
        '"Inside the',
        'Controller" is the CPU time of `on_model_output` / `on_tool_results` themselves,',
        "reading the framework's own objects. For scale, the Controller alone fed `ModelTurn`s in",
        f"a bare loop, at the same time on the same machine: {bare:,.0f} CPU µs per turn.",
        "mini-swe-agent's native cost is mostly the subprocess each command runs in.",
        "",
    ]
    write_section("overhead", "\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
