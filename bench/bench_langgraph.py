"""agentfsm's cost inside LangGraph per turn, beside LangGraph's own turn, in one process.

Run: `python bench/bench_langgraph.py` from the repo root. One run is N model turns (N - 1 calls
of a no-op tool `echo`, then the answer) through three graphs built the same way:

- native: LangGraph's own loop (`tools_condition`, `ToolNode`) on `MessagesState`;
- governed: `create_agent`, which decides inside the model node (`Decide.wrap`);
- decide node: agentfsm as a node of its own after the model and after the tools (`Decide` as a
  node, two more graph steps per turn: how `create_agent` worked before).

Two models: LangChain's `GenericFakeChatModel` (LangGraph's cost alone), and `ChatOpenAI` over
real HTTP to `agentfsm.testing.ScriptedServer`, served from a child process so its CPU is not
counted. Figures are the process's CPU µs per model turn (medians; the three graphs alternate,
so load hits all alike), and wall µs beside them. Writes its section of
bench/RESULTS-integrations.md.
"""

from __future__ import annotations

import multiprocessing
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import agentfsm as af  # noqa: E402
from agentfsm.testing import ScriptedServer  # noqa: E402
from agentfsm.testing.scripted import call, say, tool_calls  # noqa: E402
from bench.results import write_section  # noqa: E402  (needs the repo on sys.path)

N = 20
REPEATS = 15
KINDS = ("native", "governed", "decide node")


def serve(runs: int, pipe: Connection) -> None:
    """A child process: serve `runs` scripted runs, send the base URL, wait for the word."""
    script = [tool_calls(call("echo", {"i": k}, id=f"c{k}")) for k in range(N - 1)]
    with ScriptedServer([*script, say("done")] * runs) as server:
        pipe.send(server.openai_base)
        pipe.recv()


def graph(kind: str, model: Any) -> Any:
    """The graph of `kind` over `model` (a fake, or ChatOpenAI with the tool bound)."""
    from langchain_core.tools import tool
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition

    from agentfsm.integrations.langgraph import AgentState, Decide, create_agent

    @tool
    def echo(i: int) -> str:
        """Return i."""
        return str(i)

    policy = af.Policy(max_turns=N + 5)
    if kind == "governed":
        return create_agent(model, [echo], policy)
    bound = model.bind_tools([echo]) if hasattr(model, "openai_api_base") else model
    builder: Any = StateGraph(MessagesState if kind == "native" else AgentState)
    builder.add_node("agent", lambda s: {"messages": [bound.invoke(s["messages"])]})
    builder.add_edge(START, "agent")
    if kind == "native":
        builder.add_node("tools", ToolNode([echo]))
        builder.add_conditional_edges("agent", tools_condition)
        builder.add_edge("tools", "agent")
        return builder.compile()
    decide = Decide(policy, [echo])
    builder.add_node("tools", ToolNode([echo], wrap_tool_call=decide.wrap_tool_call))
    builder.add_node("decide", decide)
    builder.add_node("human", decide.human)
    builder.add_edge("agent", "decide")
    builder.add_edge("tools", "decide")
    builder.add_conditional_edges("decide", decide.route, decide.destinations)
    return builder.compile()


def fake_model() -> Any:
    """LangChain's fake chat model replaying one run's script."""
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage

    script = [
        AIMessage(content="", tool_calls=[{"name": "echo", "args": {"i": k}, "id": f"c{k}"}])
        for k in range(N - 1)
    ]
    return GenericFakeChatModel(messages=iter([*script, AIMessage(content="done")]))


def once(kind: str, make_model: Callable[[], Any]) -> tuple[float, float]:
    """One run: process CPU and wall µs per turn."""
    g = graph(kind, make_model())
    wall, cpu = time.perf_counter(), time.process_time()
    out = g.invoke({"messages": [("user", "go")]}, {"recursion_limit": 4 * N + 10})
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    if out["messages"][-1].content != "done":
        raise SystemExit(f"{kind}: the run did not end with the answer")
    return cpu * 1e6 / N, wall * 1e6 / N


def measure(make_model: Callable[[], Any]) -> dict[str, tuple[float, float]]:
    """Median CPU and wall µs per turn of each graph, the graphs alternating."""
    for kind in KINDS:
        once(kind, make_model)  # warm imports and caches
    samples: dict[str, list[tuple[float, float]]] = {k: [] for k in KINDS}
    for _ in range(REPEATS):
        for kind in KINDS:
            samples[kind].append(once(kind, make_model))
    return {
        k: (statistics.median(c for c, _ in v), statistics.median(w for _, w in v))
        for k, v in samples.items()
    }


def main() -> int:
    """Measure both models and write the section of bench/RESULTS-integrations.md."""
    from langchain_openai import ChatOpenAI

    parent, child = multiprocessing.Pipe()
    server = multiprocessing.Process(
        target=serve, args=((REPEATS + 1) * len(KINDS), child), daemon=True
    )
    server.start()
    base = parent.recv()
    results = {"GenericFakeChatModel": measure(fake_model)}
    results["ChatOpenAI over HTTP"] = measure(
        lambda: ChatOpenAI(model="scripted", base_url=base, api_key="unused", max_retries=0)
    )
    parent.send("stop")
    server.join(timeout=10)
    lines = [
        "## LangGraph: agentfsm's share of a turn",
        "",
        (
            f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} with "
            f"`python bench/bench_langgraph.py` on {platform.machine()} ({os.cpu_count()} cores "
            f"shared with other helpers' test runs: the machine is loaded, load average "
            f"{os.getloadavg()[0]:.1f} at the end), Python {platform.python_version()}."
        ),
        f"One run: {N} model turns ({N - 1} tool calls, then the answer). CPU µs per turn of",
        (
            "this process (the HTTP server runs in another), medians of "
            f"{REPEATS} runs; the three graphs alternate. Added = governed - native."
        ),
        "",
        (
            "| model | native CPU µs/turn | governed (decides in the model node) | added | "
            "decide node (before) | added | wall µs native / governed |"
        ),
        "|---|---|---|---|---|---|---|",
    ]
    for name, f in results.items():
        native, governed, node = f["native"][0], f["governed"][0], f["decide node"][0]
        lines.append(
            f"| {name} | {native:,.0f} | {governed:,.0f} | {governed - native:,.0f} "
            f"({100 * (governed - native) / native:.0f}%) | {node:,.0f} | {node - native:,.0f} "
            f"({100 * (node - native) / native:.0f}%) | {f['native'][1]:,.0f} / "
            f"{f['governed'][1]:,.0f} |"
        )
        print(name, {k: round(v[0]) for k, v in f.items()})
    lines += [
        "",
        "Deciding inside the model node (`Decide.wrap`) adds no graph step: a turn is the model",
        "step and the tools step, as natively. What is left is the Controller's decision and",
        "`Controller.dump()` into the graph state once per turn (it was twice, after the model",
        "and after the tools), which a checkpoint needs to resume the run. On the fake model",
        "LangGraph's turn is its scheduling alone, without a client, so the same added time is",
        "a larger share of it than of a turn with a real client over HTTP.",
        "",
    ]
    write_section("langgraph", "\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
