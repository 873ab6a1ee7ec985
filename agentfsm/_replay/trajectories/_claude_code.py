"""Claude Code session transcripts: `~/.claude/projects/<cwd-slug>/<session-id>.jsonl`.

Claude Code writes one JSON object per line. Lines of `type` "user" and
"assistant" carry an Anthropic message in `message`; every other type
(`queue-operation`, `attachment`, `system`, `summary`, `last-prompt`,
`file-history-snapshot`, ...) is Claude Code's own bookkeeping and is skipped.

It writes one line per content block of an assistant message: the lines of one
model turn share `message.id`. The reader groups them back into one model
output, normalized as an Anthropic Messages body (stop reason, usage and model
from the turn's last line). Tool results come in "user" lines holding
`tool_result` blocks (one line per result, sometimes between the blocks of the
turn that made the calls); they become one tool-results step after the turn,
in the turn's call order, since replay pairs results with calls by position.
A user line's text is a user message, unless Claude Code marks it `isMeta`
(text it injected itself, not the user's).

Assistant lines Claude Code makes up itself (model `<synthetic>`: API errors,
"no response requested") are not model outputs: they are skipped and counted in
`info["skipped_synthetic"]`.

Sub-agents (the Agent/Task tool) are separate runs. Claude Code 2.x writes
each to its own file (`<session-id>/subagents/agent-<id>.jsonl`, every line
`isSidechain: true`), which reads as one run of its own; the parent run sees
only the Agent call and its result. Older versions wrote sidechain lines into
the session file: a file is read as the chain of its first conversation line,
and lines of the other chain are skipped, counted in `info["skipped_sidechain"]`.

Lines are read in file order, not by walking the `parentUuid` tree: that would
hold every line of a session in memory, and only a rewound or edited session
has branches (their abandoned lines replay too).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping
from typing import Any

from agentfsm._model.types import ToolResult
from agentfsm._replay.trajectories._io import (
    Errors,
    iter_jsonl,
    located,
    report,
    text_of,
    wrap_run_error,
)
from agentfsm._replay.trajectories._model import (
    ModelOutput,
    RecordedRun,
    Step,
    ToolResults,
    UserMessage,
)
from agentfsm._replay.trajectories._openai import normalized, result_of
from agentfsm.exceptions import RunError

__all__ = ["NAME", "read_jsonl", "sniff"]

NAME = "claude-code"
_SNIFF_LINES = 50
_KINDS = frozenset(
    {
        "user",
        "assistant",
        "system",
        "summary",
        "attachment",
        "queue-operation",
        "last-prompt",
        "file-history-snapshot",
    }
)
"""Line types Claude Code writes; a line of one of them with a session id or leaf uuid marks
the file (an agentfsm trace line has `event`, a chat message line a top-level `role`)."""
_SYNTHETIC = "<synthetic>"


def _is_entry(obj: Mapping[str, Any]) -> bool:
    return obj.get("type") in _KINDS and ("sessionId" in obj or "leafUuid" in obj)


def sniff(path: str, head: Any) -> bool:
    """Whether the first lines of a JSON-lines file are Claude Code transcript entries.

    Only a first line of a type Claude Code writes is looked past (a `file-history-snapshot`
    line, which names no session, may open a file), so other formats, and a JSON document
    on one line, are not read twice.
    """
    if not isinstance(head, Mapping) or head.get("type") not in _KINDS:
        return False
    lines = itertools.islice(iter_jsonl(path, errors=[]), _SNIFF_LINES)
    return any(_is_entry(obj) for _, obj in lines)


def _head(path: str) -> tuple[str, bool, dict[str, Any]]:
    """The run id, its chain (sidechain or not) and small facts, from the first lines."""
    session: str | None = None
    for _, obj in itertools.islice(iter_jsonl(path, errors=[]), _SNIFF_LINES):
        if session is None and isinstance(obj.get("sessionId"), str):
            session = obj["sessionId"]
        if obj.get("type") in ("user", "assistant"):
            sidechain = obj.get("isSidechain") is True
            agent = obj.get("agentId")
            info: dict[str, Any] = {"session": obj.get("sessionId") or session}
            if isinstance(obj.get("version"), str):
                info["claude_code_version"] = obj["version"]
            if sidechain and isinstance(agent, str):
                info["agent"] = agent
                return agent, True, info
            return str(info["session"] or "0"), sidechain, info
    return session or "0", False, {"session": session}


def read_jsonl(path: str, errors: Errors = None) -> Iterator[RecordedRun]:
    """Read one Claude Code transcript as one run, streaming (see the module doc)."""
    run_id, sidechain, info = _head(path)
    run = RecordedRun(id=run_id, source=path, format=NAME, steps=(), info=info)
    run.steps = _Steps(path, run, sidechain, errors).steps()
    yield run


class _Steps:
    """Groups the lines of one chain into steps; one instance per run."""

    def __init__(self, path: str, run: RecordedRun, sidechain: bool, errors: Errors) -> None:
        self.path = path
        self.run = run
        self.sidechain = sidechain
        self.errors = errors
        self.turn_id: Any = None
        self.turn_line = 0
        self.blocks: list[Any] = []
        self.last: Mapping[str, Any] = {}
        self.results: list[ToolResult] = []

    def steps(self) -> Iterator[Step]:
        skipped = 0
        for number, entry in iter_jsonl(self.path, self.errors):
            kind = entry.get("type")
            if kind not in ("user", "assistant"):
                continue
            if (entry.get("isSidechain") is True) != self.sidechain:
                skipped += 1
                continue
            message = entry.get("message")
            if not isinstance(message, Mapping):
                what = f"an entry of type {kind} without a message object"
                report(self.errors, located(self.path, number, what))
                continue
            content = message.get("content")
            if not isinstance(content, str | list):
                what = f"an entry of type {kind} whose message content is {type(content).__name__}"
                report(self.errors, located(self.path, number, what))
                continue
            if kind == "assistant":
                yield from self._assistant(number, entry, message, content)
            else:
                yield from self._user(number, entry, content)
        yield from self._flush()
        if skipped:
            self.run.info["skipped_sidechain"] = skipped

    def _assistant(
        self, number: int, entry: Mapping[str, Any], message: Mapping[str, Any], content: Any
    ) -> Iterator[Step]:
        if message.get("model") == _SYNTHETIC:
            self.run.info["skipped_synthetic"] = self.run.info.get("skipped_synthetic", 0) + 1
            return
        # One line per content block; the id ties them. A line without one is a turn alone.
        turn_id = message.get("id") or entry.get("requestId")
        if turn_id is None or turn_id != self.turn_id:
            yield from self._flush()
            self.turn_id, self.turn_line = turn_id, number
        self.blocks.extend(
            [{"type": "text", "text": content}] if isinstance(content, str) else content
        )
        self.last = message
        self.run.end = "last message: assistant"

    def _user(self, number: int, entry: Mapping[str, Any], content: Any) -> Iterator[Step]:
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        texts = []
        for block in blocks:
            if not isinstance(block, Mapping):
                # It could be a result that would go missing: name it rather than guess.
                what = f"a user message block that is {type(block).__name__}, not an object"
                report(self.errors, located(self.path, number, what))
                continue
            if block.get("type") == "tool_result":
                try:
                    self.results.append(_result(block))
                except RunError as exc:
                    report(self.errors, wrap_run_error(self.path, number, exc))
            elif block.get("type") == "text":
                texts.append(block)
        if texts and entry.get("isMeta") is not True:
            yield from self._flush()
            self.run.end = "last message: user"
            yield UserMessage(text_of(texts))

    def _flush(self) -> Iterator[Step]:
        """Yield the turn gathered so far, then its results in the turn's call order."""
        order: dict[str, int] = {}
        if self.blocks:
            body = {
                "type": "message",
                "role": "assistant",
                "id": self.last.get("id"),
                "model": self.last.get("model"),
                "content": self.blocks,
                "stop_reason": self.last.get("stop_reason"),
                "usage": self.last.get("usage"),
            }
            body = {k: v for k, v in body.items() if v is not None}
            self.blocks, self.turn_id = [], None
            try:
                turn = normalized(body, "anthropic")
            except RunError as exc:
                report(self.errors, wrap_run_error(self.path, self.turn_line, exc))
            else:
                order = {call.id: i for i, call in enumerate(turn.tool_calls)}
                yield ModelOutput(turn)
        if self.results:
            # sorted is stable: results for calls the turn did not make keep their order, last.
            ranked = sorted(self.results, key=lambda r: order.get(r.call_id, len(order)))
            self.results = []
            yield ToolResults(tuple(ranked))


def _result(block: Mapping[str, Any]) -> ToolResult:
    call_id = block.get("tool_use_id")
    return result_of(
        call_id if isinstance(call_id, str) else "",
        block.get("content") or "",
        block.get("is_error") is True,
    )
