"""How a scripted `Reply` looks on the wire: OpenAI chat completions and Anthropic Messages.

Bodies are dicts; streams are iterators of server-sent event strings. A reply
with `end_stream=False` stops before the terminator (no finish reason, no
`[DONE]`, no `message_stop`), as a dropped connection would.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping
from typing import Any, Protocol

from agentfsm.testing.scripted import Reply

__all__ = [
    "IdSource",
    "anthropic_body",
    "anthropic_events",
    "as_sent",
    "openai_body",
    "openai_chunks",
]

_CHUNK = 12  # characters per streamed piece: small enough that arguments arrive in several


class IdSource(Protocol):
    """Where rendering gets the model name and fresh ids (the server)."""

    model: str

    def new_id(self, prefix: str) -> str:
        """Return a fresh id such as `call_3`."""
        ...


def _pieces(text: str) -> list[str]:
    return [text[i : i + _CHUNK] for i in range(0, len(text), _CHUNK)]


def _call_ids(reply: Reply, ids: IdSource, prefix: str) -> list[str]:
    return [c.id if c.id is not None else ids.new_id(prefix) for c in reply.tool_calls]


def _openai_usage(reply: Reply) -> dict[str, int]:
    total = reply.input_tokens + reply.output_tokens
    return {
        "prompt_tokens": reply.input_tokens,
        "completion_tokens": reply.output_tokens,
        "total_tokens": total,
    }


def openai_body(reply: Reply, ids: IdSource) -> dict[str, Any]:
    """Render a reply as one `chat.completion` body."""
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    call_ids = _call_ids(reply, ids, "call")
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": i,
                "type": "function",
                "function": {"name": c.name, "arguments": c.raw_arguments()},
            }
            for i, c in zip(call_ids, reply.tool_calls, strict=True)
        ]
    choice = {"index": 0, "message": message, "finish_reason": reply.openai_finish_reason()}
    return {
        "id": ids.new_id("chatcmpl"),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": ids.model,
        "choices": [choice],
        "usage": _openai_usage(reply),
    }


def openai_chunks(reply: Reply, ids: IdSource, body: Mapping[str, Any]) -> Iterator[str]:
    """Render a reply as `chat.completion.chunk` events; usage only when the request asked."""
    head = {"id": ids.new_id("chatcmpl"), "object": "chat.completion.chunk",
            "created": int(time.time()), "model": ids.model}  # fmt: skip

    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return f"data: {json.dumps({**head, 'choices': [choice]})}\n\n"

    yield chunk({"role": "assistant", "content": ""})
    for piece in _pieces(reply.text):
        yield chunk({"content": piece})
    call_ids = _call_ids(reply, ids, "call")
    for index, (call_id, c) in enumerate(zip(call_ids, reply.tool_calls, strict=True)):
        fn = {"name": c.name, "arguments": ""}
        yield chunk(
            {"tool_calls": [{"index": index, "id": call_id, "type": "function", "function": fn}]}
        )
        for piece in _pieces(c.raw_arguments()):
            yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    if not reply.end_stream:
        return
    finish = reply.openai_finish_reason()
    if finish is not None:
        yield chunk({}, finish)
    if (body.get("stream_options") or {}).get("include_usage"):
        yield f"data: {json.dumps({**head, 'choices': [], 'usage': _openai_usage(reply)})}\n\n"
    yield "data: [DONE]\n\n"


def _anthropic_blocks(reply: Reply, ids: IdSource) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = [{"type": "text", "text": reply.text}] if reply.text else []
    for call_id, c in zip(_call_ids(reply, ids, "toolu"), reply.tool_calls, strict=True):
        block = {"type": "tool_use", "id": call_id, "name": c.name, "input": c.arguments}
        blocks.append(block)
    return blocks


def anthropic_body(reply: Reply, ids: IdSource) -> dict[str, Any]:
    """Render a reply as one Messages body; cut argument text is sent as `{}`."""
    blocks = _anthropic_blocks(reply, ids)
    for block in blocks:  # a body cannot carry cut argument text: `input` must be an object
        if block["type"] == "tool_use" and isinstance(block["input"], str):
            block["input"] = {}
    usage = {"input_tokens": reply.input_tokens, "output_tokens": reply.output_tokens}
    return {**_anthropic_message(ids, blocks, reply.anthropic_stop_reason()), "usage": usage}


def _anthropic_message(
    ids: IdSource, blocks: list[dict[str, Any]], stop: str | None
) -> dict[str, Any]:
    return dict(id=ids.new_id("msg"), type="message", role="assistant", model=ids.model,
                content=blocks, stop_reason=stop, stop_sequence=None)  # fmt: skip


def _sse_event(name: str, data: Mapping[str, Any]) -> str:
    return f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n"


def anthropic_events(reply: Reply, ids: IdSource, body: Mapping[str, Any]) -> Iterator[str]:
    """Render a reply as Messages stream events, `message_start` to `message_stop`."""
    usage = {"input_tokens": reply.input_tokens, "output_tokens": 1}
    message: dict[str, Any] = {**_anthropic_message(ids, [], None), "usage": usage}
    yield _sse_event("message_start", {"message": message})
    for index, block in enumerate(_anthropic_blocks(reply, ids)):
        yield from _anthropic_block_events(index, block, reply)
    if not reply.end_stream:
        return
    delta = {"stop_reason": reply.anthropic_stop_reason(), "stop_sequence": None}
    yield _sse_event(
        "message_delta", {"delta": delta, "usage": {"output_tokens": reply.output_tokens}}
    )
    yield _sse_event("message_stop", {})


def _anthropic_block_events(index: int, block: dict[str, Any], reply: Reply) -> Iterator[str]:
    if block["type"] == "text":
        yield _sse_event(
            "content_block_start", {"index": index, "content_block": {"type": "text", "text": ""}}
        )
        for piece in _pieces(block["text"]):
            delta = {"type": "text_delta", "text": piece}
            yield _sse_event("content_block_delta", {"index": index, "delta": delta})
    else:
        raw = block["input"] if isinstance(block["input"], str) else json.dumps(block["input"])
        start = {**block, "input": {}}
        yield _sse_event("content_block_start", {"index": index, "content_block": start})
        for piece in _pieces(raw):
            delta = {"type": "input_json_delta", "partial_json": piece}
            yield _sse_event("content_block_delta", {"index": index, "delta": delta})
    if reply.end_stream:
        yield _sse_event("content_block_stop", {"index": index})


def as_sent(reply: Reply, ids: IdSource, body: Mapping[str, Any]) -> Iterator[str]:
    """Write a reply's own `events` as server-sent events, adding nothing (no terminator)."""
    for event in reply.events or ():
        if isinstance(event, str):
            yield event
        elif isinstance(event.get("type"), str) and "choices" not in event:
            yield f"event: {event['type']}\ndata: {json.dumps(event)}\n\n"
        else:
            yield f"data: {json.dumps(event)}\n\n"
