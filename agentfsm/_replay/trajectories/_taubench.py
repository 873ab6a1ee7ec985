"""tau-bench historical trajectories: a JSON list of `{task_id, trial, reward, info, traj}`.

`traj` is an OpenAI chat with a simulated user. A tool error is only text
(the content starts with `Error`), and call ids repeat within a run, so
results pair with calls by position. The recording ends with the user
simulator's `###STOP###`, a `transfer_to_human_agents` result, or the step cap.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from agentfsm._replay.trajectories._io import Errors, located, report
from agentfsm._replay.trajectories._model import RecordedRun
from agentfsm._replay.trajectories._openai import Conventions, message_steps

__all__ = ["NAME", "detect", "read_doc"]

NAME = "tau-bench"
STOP_MARK = "###STOP###"


def _is_error(message: Mapping[str, Any]) -> bool:
    content = message.get("content")
    return isinstance(content, str) and content.startswith("Error")


TAU = Conventions(is_error=_is_error)


def detect(doc: Any) -> bool:
    """Whether a document is a list of tau-bench runs."""
    return (
        isinstance(doc, list)
        and bool(doc)
        and isinstance(doc[0], Mapping)
        and {"task_id", "traj"} <= doc[0].keys()
    )


def read_doc(path: str, doc: Any, errors: Errors = None) -> Iterator[RecordedRun]:
    """Yield one run per entry, its end taken from the last recorded message."""
    for index, entry in enumerate(doc):
        traj = entry.get("traj") if isinstance(entry, Mapping) else None
        if not isinstance(traj, list):
            report(errors, located(path, f"run {index}", "expected an object with a 'traj' list"))
            continue
        run_id = f"task-{entry.get('task_id')}/trial-{entry.get('trial')}"
        yield RecordedRun(
            id=run_id,
            source=path,
            format=NAME,
            steps=message_steps(path, enumerate(traj), TAU, errors, prefix=f"run {index} "),
            end=recorded_end(traj),
            info={"reward": entry.get("reward"), "index": index},
        )


def recorded_end(traj: list[Any]) -> str | None:
    """Say how the recording ended: the user's stop mark, a last tool result, or a last message."""
    if not traj or not isinstance(traj[-1], Mapping):
        return None
    last = traj[-1]
    role = last.get("role")
    content = last.get("content")
    if role == "user" and isinstance(content, str) and STOP_MARK in content:
        return STOP_MARK
    if role == "tool":
        return f"tool result: {last.get('name')}"
    return f"last message: {role}"
