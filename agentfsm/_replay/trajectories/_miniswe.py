"""mini-swe-agent trajectories (`*.traj.json`, format `mini-swe-agent-1.x`).

Assistant messages carry the raw litellm response under `extra.response`
(with the real `finish_reason` and usage), which is what gets normalized.
A tool failed when `extra.returncode` is non-zero or `extra.exception_info`
is set. The last message has role `exit` and holds the recorded exit status;
the submitting call before it has no tool result.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from agentfsm._replay.trajectories._io import Errors
from agentfsm._replay.trajectories._model import RecordedRun
from agentfsm._replay.trajectories._openai import Conventions, chat_body, message_steps

__all__ = ["NAME", "detect", "read_doc"]

NAME = "mini-swe-agent"


def _extra(message: Mapping[str, Any]) -> Mapping[str, Any]:
    extra = message.get("extra")
    return extra if isinstance(extra, Mapping) else {}


def _is_error(message: Mapping[str, Any]) -> bool:
    extra = _extra(message)
    code = extra.get("returncode")
    return bool(extra.get("exception_info")) or (isinstance(code, int) and code != 0)


def _body(message: Mapping[str, Any]) -> dict[str, Any]:
    response = _extra(message).get("response")
    if isinstance(response, dict) and isinstance(response.get("choices"), list):
        return response
    return chat_body(message)


MINISWE = Conventions(is_error=_is_error, body=_body)


def detect(doc: Any) -> bool:
    """Whether a document is a mini-swe-agent trajectory."""
    if not isinstance(doc, Mapping) or not isinstance(doc.get("messages"), list):
        return False
    fmt = doc.get("trajectory_format")
    return (isinstance(fmt, str) and fmt.startswith("mini-swe-agent")) or "info" in doc


def read_doc(path: str, doc: Any, errors: Errors = None) -> Iterator[RecordedRun]:
    """Yield the file's one run; its end is the `exit` message's status."""
    messages = doc["messages"]
    info = doc.get("info") if isinstance(doc.get("info"), Mapping) else {}
    run_id = doc.get("instance_id") or Path(path).name.removesuffix(".traj.json")
    yield RecordedRun(
        id=str(run_id),
        source=path,
        format=NAME,
        steps=message_steps(path, enumerate(messages), MINISWE, errors, prefix=""),
        end=_exit_status(messages, info),
        info={"model_stats": info.get("model_stats")},
    )


def _exit_status(messages: list[Any], info: Mapping[str, Any]) -> str | None:
    for message in reversed(messages):
        if isinstance(message, Mapping) and message.get("role") == "exit":
            status = _extra(message).get("exit_status")
            if isinstance(status, str):
                return status
    status = info.get("exit_status")
    return status if isinstance(status, str) else None
