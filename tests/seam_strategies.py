"""Hypothesis strategies for the seams a call crosses: policies, model outputs, a side-effect log.

Policies mix every permission source and every awkward rule form: text rules,
mappings whose globs hold `, name=` or edge spaces, tables with a `"*"`
default, final tools and a handoff. Model outputs are OpenAI chat bodies and
Responses bodies (whose `multi_tool_use.parallel` wrapper is unwrapped), with
duplicate and missing call ids, handoff calls and siblings of `ask` calls.
Every call carries a unique `n`, so a tool's log says which call ran (a handoff's
task ends with `#<n>`, so the child's first request says which handoff started it).
"""

from __future__ import annotations

import itertools
import json
from collections import Counter
from collections.abc import Iterator
from typing import Any

from hypothesis import strategies as st

import agentfsm as af
from agentfsm.testing.scripted import Reply, ScriptedCall

__all__ = [
    "HANDOFF",
    "TOOLS",
    "Call",
    "SideEffects",
    "as_reply",
    "calls_by_n",
    "chat_body",
    "check_log",
    "exchanges",
    "handoff_outputs",
    "human_answers",
    "model_outputs",
    "policies",
    "raw_calls",
    "scripts",
    "tool_kinds",
    "turns_of_a_run",
]

HANDOFF = "research"
"""The one handoff tool of every drawn policy that has handoffs."""
TOOLS = ("sql", "bash", "read", "write", "submit", HANDOFF)
"""Tool names calls are drawn from (`submit` may be a final tool)."""
_ARGS = ("query", "command", "path", "task")

GLOBS = (
    "*",
    "*DROP TABLE*, owner=*",
    "*DROP TABLE*",
    " rm *",
    "rm -rf *",
    "x* ",
    "  spaced  ",
    "a=b*",
    "*, path=/etc*",
    "[ab]*",
    "*,*",
    "?",
)
"""Globs that read back wrong from text: commas before `name=`, edge spaces, `key=` inside."""
VALUES = (
    "x DROP TABLE y, owner=z",
    "DROP TABLE t",
    " rm -rf /",
    "rm -rf /",
    "x",
    "xyz ",
    "  spaced  ",
    "spaced",
    "a=bc",
    "a, path=/etc/passwd",
    "b",
    "",
)
"""Argument values that match some of the globs (and would match others after a bad re-parse)."""

ACTIONS = st.sampled_from(["allow", "ask", "deny"])
_NAMES = st.sampled_from(TOOLS)
_TOOL_GLOBS = st.sampled_from([*TOOLS, "*", "s*", "re*", "[bs]*"])


@st.composite
def _text_rule(draw: st.DrawFn) -> str:
    """A rule as text, with globs the text form carries exactly."""
    action, tool = draw(ACTIONS), draw(_TOOL_GLOBS)
    pairs = draw(st.lists(st.tuples(st.sampled_from(_ARGS), st.sampled_from(GLOBS)), max_size=2))
    safe = [(k, v) for k, v in pairs if v == v.strip() and ", " not in v and ")" not in v]
    inner = ", ".join(f"{k}={v}" for k, v in safe)
    return f"{action} {tool}" + (f"({inner})" if inner else "")


@st.composite
def _mapping_rule(draw: st.DrawFn) -> dict[str, Any]:
    """A rule as a mapping, its globs drawn from the ones text cannot carry."""
    args = draw(st.dictionaries(st.sampled_from(_ARGS), st.sampled_from(GLOBS), max_size=2))
    return {"action": draw(ACTIONS), "tool": draw(_TOOL_GLOBS), "args": args}


@st.composite
def policies(draw: st.DrawFn, *, hooks: bool = False) -> af.Policy:
    """A policy with deny, ask and allow from rules, the table and (with `hooks`) a hook."""
    rules = draw(st.lists(_text_rule() | _mapping_rule(), max_size=4))
    table = draw(
        st.dictionaries(st.sampled_from([*TOOLS, "*"]), ACTIONS, max_size=3),
    )
    extra: dict[str, Any] = {}
    if hooks and draw(st.booleans()):
        denied = draw(st.sampled_from(VALUES))

        def hook(call: af.ToolCall) -> str:
            values = (call.arguments or {}).values()
            return "deny" if denied in values else "allow"

        extra["permission"] = hook
    return af.Policy(
        permission_rules=rules,
        permissions=table,
        handoffs=draw(st.sampled_from([frozenset(), frozenset({HANDOFF})])),
        final_tools=draw(st.sampled_from([frozenset(), frozenset({"submit"})])),
        on_deny=draw(st.sampled_from(["feedback", "stop"])),
        on_repeat=draw(st.sampled_from(["feedback", "stop", "ask"])),
        max_turns=draw(st.integers(2, 8)),
        max_consecutive_tool_errors=draw(st.integers(1, 4)),
        **extra,
    )


_numbers = itertools.count(1)


@st.composite
def _call(draw: st.DrawFn) -> tuple[str, str, dict[str, Any]]:
    """(id, name, arguments) of one call; ids repeat and go missing, `n` never repeats."""
    call_id = draw(st.sampled_from(["c1", "c2", "c3", ""]))
    arguments: dict[str, Any] = draw(
        st.dictionaries(st.sampled_from(_ARGS), st.sampled_from(VALUES), max_size=2)
    )
    arguments["n"] = n = next(_numbers)
    name = draw(_NAMES)
    if name == HANDOFF:  # a child's first request says which handoff started it
        arguments["task"] = f"{arguments.get('task', '')}#{n}"
    return call_id, name, arguments


def chat_body(calls: list[tuple[str, str, dict[str, Any]]], text: str = "") -> dict[str, Any]:
    """An OpenAI chat completion body with these calls."""
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        message["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
            for i, n, a in calls
        ]
    finish = "tool_calls" if calls else "stop"
    return {"choices": [{"index": 0, "message": message, "finish_reason": finish}]}


def responses_body(
    calls: list[tuple[str, str, dict[str, Any]]], wrap: int, wrapper_id: str
) -> dict[str, Any]:
    """A Responses API body; the first `wrap` calls ride in one `multi_tool_use.parallel`."""
    output: list[dict[str, Any]] = []
    if wrap:
        uses = [{"recipient_name": f"functions.{n}", "parameters": a} for _, n, a in calls[:wrap]]
        output.append(
            {
                "type": "function_call",
                "call_id": wrapper_id,
                "name": "multi_tool_use.parallel",
                "arguments": json.dumps({"tool_uses": uses}),
            }
        )
    output += [
        {"type": "function_call", "call_id": i, "name": n, "arguments": json.dumps(a)}
        for i, n, a in calls[wrap:]
    ]
    if not calls:
        output.append(
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "ok"}],
            }
        )
    return {"object": "response", "status": "completed", "output": output}


@st.composite
def model_outputs(draw: st.DrawFn, *, wrappers: bool = True, min_calls: int = 0) -> dict[str, Any]:
    """One model output: chat or Responses, 0-4 calls, maybe a parallel wrapper."""
    calls: list[tuple[str, str, dict[str, Any]]] = draw(
        st.lists(_call(), min_size=min_calls, max_size=4)
    )
    wrapped: bool = wrappers and draw(st.booleans())
    if calls and wrapped:
        wrap = draw(st.integers(1, len(calls)))
        return responses_body(calls, wrap, draw(st.sampled_from(["w1", "c1", ""])))
    return chat_body(calls)


@st.composite
def handoff_outputs(draw: st.DrawFn) -> dict[str, Any]:
    """A chat output whose one call hands off (a handoff must be alone in its turn).

    The task ends with `#<n>`: the child's first request says which handoff started it.
    """
    n = next(_numbers)
    task = f"{draw(st.sampled_from(VALUES))}#{n}"
    call_id = draw(st.sampled_from(["h1", "c1", ""]))
    return chat_body([(call_id, HANDOFF, {"task": task, "n": n})])


class SideEffects:
    """Tools that log each run by the call's `n`; one per tool name."""

    def __init__(self) -> None:
        self.log: list[tuple[str, int]] = []

    def tools(self) -> list[Any]:
        """One Python tool per name in TOOLS, each logging (name, n) when it runs."""
        return [self._tool(name) for name in TOOLS]

    def _tool(self, name: str) -> Any:
        def tool(n: int, query: str = "", command: str = "", path: str = "", task: str = "") -> str:
            self.log.append((name, n))
            return f"{name} ran {n}"

        tool.__name__ = name
        tool.__doc__ = f"The {name} tool."
        return tool

    def ran(self) -> Iterator[int]:
        """The `n` of every call that ran, in order."""
        return (n for _, n in self.log)


def turns_of_a_run(max_size: int = 4) -> st.SearchStrategy[list[dict[str, Any]]]:
    """The model's outputs of one run, in order: calls (a handoff among them) or text."""
    return st.lists(model_outputs() | handoff_outputs(), min_size=1, max_size=max_size)


def human_answers() -> st.SearchStrategy[list[bool]]:
    """A human's yes or no to the next four questions (tests cycle them)."""
    return st.lists(st.booleans(), min_size=4, max_size=4)


def tool_kinds(kinds: tuple[str, ...]) -> st.SearchStrategy[dict[str, str]]:
    """A kind for each of `TOOLS` (how a framework's own tool of that name behaves)."""
    return st.fixed_dictionaries({name: st.sampled_from(kinds) for name in TOOLS})


Call = tuple[str, str, dict[str, Any]]
"""A call as the model made it: (id, name, arguments)."""


def raw_calls(output: dict[str, Any]) -> list[Call]:
    """The calls of a drawn output as the model made them: a `parallel` wrapper stays one call."""
    if "choices" in output:
        message = output["choices"][0]["message"]
        return [
            (c["id"], c["function"]["name"], json.loads(c["function"]["arguments"]))
            for c in message.get("tool_calls") or []
        ]
    return [
        (i["call_id"], i["name"], json.loads(i["arguments"]))
        for i in output["output"]
        if i["type"] == "function_call"
    ]


def calls_by_n(outputs: list[dict[str, Any]]) -> dict[int, af.ToolCall]:
    """Every call the outputs hold, by its `n`, as the controller reads it."""
    found: dict[int, af.ToolCall] = {}
    for output in outputs:
        for c in af.normalize(output).tool_calls:
            found[(c.arguments or {})["n"]] = c
    return found


def check_log(
    effects: SideEffects, calls: dict[int, af.ToolCall], policy: af.Policy, approved: set[int]
) -> None:
    """No call ran twice, no denied call ran, and an `ask` call ran only once approved."""
    ran = Counter(effects.ran())
    assert all(times == 1 for times in ran.values()), ran
    for n in ran:
        verdict = policy.permission_for(calls[n])
        assert verdict != "deny", f"denied call {calls[n]} ran"
        if verdict == "ask":
            assert n in approved, f"call {calls[n]} ran without approval"


@st.composite
def scripts(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Chat outputs with calls for a litellm-driven loop (chat does not unwrap wrappers), then an
    answer."""
    calling = st.lists(
        model_outputs(wrappers=False, min_calls=1) | handoff_outputs(), min_size=1, max_size=5
    )
    return [*draw(calling), chat_body([], text="done")]


def as_reply(output: dict[str, Any]) -> Reply:
    """A chat output as the scripted server's reply."""
    message = output["choices"][0]["message"]
    calls = [
        ScriptedCall(
            name=c["function"]["name"], arguments=json.loads(c["function"]["arguments"]), id=c["id"]
        )
        for c in message.get("tool_calls") or []
    ]
    return Reply(text=message.get("content") or "", tool_calls=calls)


def exchanges(messages: list[dict[str, Any]]) -> list[tuple[list[str], list[str]]]:
    """Each assistant turn's call ids and the ids the tool messages after it answer."""
    found: list[tuple[list[str], list[str]]] = []
    for m in messages:
        if m["role"] == "assistant":
            found.append(([c["id"] for c in m.get("tool_calls") or []], []))
        elif m["role"] == "tool":
            found[-1][1].append(m["tool_call_id"])
    return found
