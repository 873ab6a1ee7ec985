"""ToolBench DFSDT answers: legacy `function_call` chats, or the search tree when invalid.

For a valid answer the last of `answer_generation.train_messages` is the
full final chain (each element is a cumulative prefix). A `function` result
failed when the `error` field of its JSON content is non-empty. Answers with
`valid_data: false` have no messages; their `tree` is walked in pre-order,
each `Action` node one model turn whose call's arguments and observation sit
on its `Action Input` child, backtracking included.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from agentfsm._replay._json import loads
from agentfsm._replay.trajectories._io import Errors
from agentfsm._replay.trajectories._model import (
    ModelOutput,
    RecordedRun,
    Step,
    ToolResults,
    UserMessage,
)
from agentfsm._replay.trajectories._openai import (
    Conventions,
    chat_body,
    message_steps,
    normalized,
    result_of,
)

__all__ = ["NAME", "detect", "read_doc"]

NAME = "toolbench"


def error_field(content: Any) -> bool:
    """Whether a ToolBench result's JSON content has a non-empty `error` field."""
    if not isinstance(content, str) or '"error"' not in content:
        return False
    try:
        parsed = loads(content)
    except (ValueError, RecursionError):
        return False
    return isinstance(parsed, Mapping) and bool(parsed.get("error"))


def _is_error(message: Mapping[str, Any]) -> bool:
    return error_field(message.get("content"))


TOOLBENCH = Conventions(is_error=_is_error)


def detect(doc: Any) -> bool:
    """Whether a document is a ToolBench answer file."""
    return isinstance(doc, Mapping) and isinstance(doc.get("answer_generation"), Mapping)


def _truthy(value: Any) -> bool:
    return value is True or (isinstance(value, str) and value.lower() == "true")


def read_doc(path: str, doc: Any, errors: Errors = None) -> Iterator[RecordedRun]:
    """Yield the file's one run, from the final chain or, without one, from the tree."""
    answer = doc["answer_generation"]
    chains = answer.get("train_messages")
    file = Path(path)
    run = RecordedRun(
        id=f"{file.parent.name}/{file.stem}",
        source=path,
        format=NAME,
        steps=(),
        end=str(answer.get("finish_type")) if answer.get("finish_type") else None,
    )
    if _truthy(answer.get("valid_data")) and isinstance(chains, list) and chains:
        chain = chains[-1]
        prefix = "train_messages[-1] "
        run.steps = message_steps(path, enumerate(chain), TOOLBENCH, errors, prefix=prefix)
        run.info = {"walked": "final chain"}
    else:
        run.steps = tree_steps(str(answer.get("query", "")), doc.get("tree"))
        run.info = {"walked": "tree"}
    yield run


def _children(node: Mapping[str, Any]) -> list[Any]:
    children = node.get("children")
    return children if isinstance(children, list) else []


def _preorder(tree: Any) -> Iterator[Mapping[str, Any]]:
    root = tree.get("tree") if isinstance(tree, Mapping) else None
    stack = [root] if isinstance(root, Mapping) else []
    while stack:
        node = stack.pop()
        yield node
        stack.extend(c for c in reversed(_children(node)) if isinstance(c, Mapping))


def tree_steps(query: str, tree: Any) -> Iterator[Step]:
    """Yield the steps of a DFSDT tree walked in pre-order: thoughts join the next action."""
    if query:
        yield UserMessage(query)
    thought: list[str] = []
    for node in _preorder(tree):
        kind = node.get("node_type")
        if kind == "Thought":
            thought.append(str(node.get("description", "")))
        elif kind == "Action":
            yield from _action_steps(node, "\n".join(thought))
            thought = []


def _action_steps(action: Mapping[str, Any], thought: str) -> Iterator[Step]:
    inputs = [c for c in _children(action) if c.get("node_type") == "Action Input"]
    arguments = str(inputs[0].get("description", "")) if inputs else ""
    call = {"name": str(action.get("description", "")), "arguments": arguments}
    turn = normalized(
        chat_body({"role": "assistant", "content": thought, "function_call": call}), "openai"
    )
    yield ModelOutput(turn)
    if inputs and "observation" in inputs[0] and turn.tool_calls:
        observation = inputs[0]["observation"]
        failed = error_field(observation)
        result = result_of(turn.tool_calls[0].id, observation, failed, call["name"])
        yield ToolResults((result,))
