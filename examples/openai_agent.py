"""A whole agent on the plain `openai` client, with agentfsm deciding every step.

Your code calls the model and runs the tools; the controller says what happens next.
`python examples/openai_agent.py` serves a scripted conversation on 127.0.0.1
(`agentfsm.testing.ScriptedServer`), so no key is needed. With a key:
`OPENAI_API_KEY=... python examples/openai_agent.py gpt-4o-mini`. With `OPENAI_BASE_URL`
set it asks that server (model `scripted` unless one is given), for example one started
with `agentfsm serve-script examples/scripts/weather.jsonl --port 8000`:
`OPENAI_BASE_URL=http://127.0.0.1:8000/v1 python examples/openai_agent.py`.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from openai import OpenAI

import agentfsm as af
from agentfsm.testing import ScriptedServer, say, scripted_call, tool_calls


def get_weather(city: str) -> dict[str, Any]:
    """Tomorrow's forecast for a city."""
    return {"city": city, "high_c": 24, "sky": "light rain"}


# --- the agent (docs/embedding.md shows this part; the README, its agent function) ---------
def agent(client: OpenAI, model: str, question: str) -> af.Decision:
    ctl = af.Controller(af.Policy(max_turns=8), tools=[get_weather])
    tools: list[Any] = [
        {
            "type": "function",
            "function": spec.model_dump(include={"name", "description", "parameters"}),
        }
        for spec in (ctl.tools or {}).values()
    ]
    messages: list[Any] = [{"role": "user", "content": question}]
    adjust: dict[str, Any] = {}
    while True:
        response = client.chat.completions.create(
            model=model, messages=messages, tools=tools, **adjust
        )
        d = ctl.on_model_output(response)  # the SDK object as it is
        if d.action is not af.Action.RETRY:  # a broken output stays out of the history
            messages.append(response.choices[0].message.model_dump(exclude_none=True))
        while d.action in (af.Action.EXECUTE_TOOLS, af.Action.ASK_HUMAN):
            messages += [tool_message(r) for r in d.results]  # errors the controller made
            if d.action is af.Action.ASK_HUMAN:
                d = ctl.on_human_reply(approved=input(f"run {d.tool_calls}? [y/N] ") == "y")
                continue
            results = [run_tool(call) for call in d.tool_calls if ctl.may_run(call.id)]
            messages += [tool_message(r) for r in results]
            d = ctl.on_tool_results(results)
        messages += [tool_message(r) for r in d.results]
        if d.action in (af.Action.FINAL, af.Action.STOP):
            return d
        adjust = d.adjust  # RETRY after a cut answer asks for more max_tokens


def run_tool(call: af.ToolCall) -> af.ToolResult:
    try:
        content = json.dumps(get_weather(**(call.arguments or {})))
    except Exception as exc:  # the model reads the error and may repair its call
        return af.ToolResult(call_id=call.id, content=f"{type(exc).__name__}: {exc}", is_error=True)
    return af.ToolResult(call_id=call.id, content=content)


def tool_message(result: af.ToolResult) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": result.call_id, "content": result.content}


# ------------------------------------------------------------------------------------------


def main() -> af.Decision:
    """Run the agent against a real provider (a model name given) or the scripted server."""
    question = "What is the weather in Shanghai tomorrow?"
    base_url = os.environ.get("OPENAI_BASE_URL")
    if len(sys.argv) > 1 or base_url:
        model = sys.argv[1] if len(sys.argv) > 1 else "scripted"
        # a local server needs no key; OpenAI's own (no base URL) still asks for one
        key = os.environ.get("OPENAI_API_KEY") or ("sk-local" if base_url else None)
        decision = agent(OpenAI(base_url=base_url, api_key=key), model, question)
    else:
        script = [
            tool_calls(scripted_call("get_weather", {"city": "Shanghai"})),
            say("Tomorrow in Shanghai: 24 °C and light rain."),
        ]
        with ScriptedServer(script) as server:
            client = OpenAI(base_url=server.openai_base, api_key="not-needed")
            decision = agent(client, "scripted", question)
    print(f"{decision.action.value} {decision.exit_reason}: {decision.answer}")
    return decision


if __name__ == "__main__":
    main()
