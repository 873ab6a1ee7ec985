"""A real HTTP server on 127.0.0.1 that answers from a script, in two wire protocols.

It speaks OpenAI chat completions (`POST /v1/chat/completions`) and Anthropic
Messages (`POST /v1/messages`), streaming (server-sent events) and not, so a real
client (litellm, the official SDKs, curl) can be pointed at it with `api_base`.
Each request consumes the next scripted `Reply`; every request is recorded so a
test can check what the client sent (max_tokens, tools, tool_choice, ...).
"""

from __future__ import annotations

import itertools
import json
import sys
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from agentfsm._scripted import Reply, Responder

__all__ = ["RecordedRequest", "ScriptedServer"]

_CHUNK = 12  # characters per streamed piece: small enough that arguments arrive in several


@dataclass(frozen=True)
class RecordedRequest:
    """One request the server received."""

    path: str
    """The URL path, e.g. `/v1/chat/completions`."""
    body: dict[str, Any]
    """The JSON body as sent."""
    headers: dict[str, str] = field(default_factory=dict)
    """The request headers, names lower-cased."""


class ScriptedServer:
    """Serve scripted replies on a random free port of 127.0.0.1, in a background thread.

    Args:
        script: Replies (or callables building one from the request body), one per request.
            A request after the last one gets HTTP 400 `script exhausted`.
        model: The model name written into responses.
    """

    def __init__(self, script: Iterable[Reply | Responder], *, model: str = "scripted") -> None:
        self.model = model
        self.requests: list[RecordedRequest] = []
        self._script = list(script)
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._httpd = _HTTPServer(("127.0.0.1", 0), _Handler)
        self._httpd.scripted = self  # type: ignore[attr-defined]
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The server's root URL, `http://127.0.0.1:<port>`."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def openai_base(self) -> str:
        """The `api_base` for OpenAI-compatible clients (`<url>/v1`)."""
        return f"{self.url}/v1"

    @property
    def anthropic_base(self) -> str:
        """The `api_base` for Anthropic clients (the root; they append `/v1/messages`)."""
        return self.url

    @property
    def remaining(self) -> int:
        """How many scripted replies are still unserved."""
        with self._lock:
            return len(self._script)

    def start(self) -> ScriptedServer:
        """Start serving in a daemon thread; return self."""
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._httpd.serve_forever,
                kwargs={"poll_interval": 0.02},  # shutdown() waits up to one poll interval
                name="agentfsm-scripted-server",
                daemon=True,
            )
            self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving and release the port."""
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join()
            self._thread = None
        self._httpd.server_close()

    def __enter__(self) -> ScriptedServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def next_reply(self, path: str, body: dict[str, Any], headers: dict[str, str]) -> Reply | None:
        """Record a request and return the reply it gets (None once the script is used up)."""
        with self._lock:
            self.requests.append(RecordedRequest(path=path, body=body, headers=headers))
            if not self._script:
                return None
            item = self._script.pop(0)
        return item if isinstance(item, Reply) else item(body)

    def new_id(self, prefix: str) -> str:
        """Return a fresh id such as `call_3`."""
        return f"{prefix}_{next(self._ids)}"


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Stay quiet when a client hangs up first (a timeout test does it on purpose)."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    server_version = "agentfsm-scripted/1"
    disable_nagle_algorithm = True  # headers and body go out at once, not 40 ms apart

    def log_message(self, format: str, *args: Any) -> None:
        """Keep test output clean: requests are recorded, not logged."""

    def do_POST(self) -> None:
        scripted: ScriptedServer = self.server.scripted  # type: ignore[attr-defined]
        length = int(self.headers.get("content-length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        path = self.path.split("?")[0].rstrip("/")
        if path not in ("/v1/chat/completions", "/v1/messages"):
            self._json(404, {"error": {"message": f"no route {path}", "type": "not_found"}})
            return
        headers = {k.lower(): v for k, v in self.headers.items()}
        reply = scripted.next_reply(path, body, headers)
        anthropic = path == "/v1/messages"
        if reply is None:
            reply = Reply(status=400, error_message="script exhausted: no reply left")
        time.sleep(reply.delay)
        if reply.status != 200:
            self._error(reply, anthropic=anthropic)
        elif body.get("stream"):
            events = _anthropic_events if anthropic else _openai_chunks
            self._sse(events(reply, scripted, body))
        else:
            render = _anthropic_body if anthropic else _openai_body
            self._json(200, render(reply, scripted))

    def _json(
        self, status: int, payload: Mapping[str, Any], extra: dict[str, str] | None = None
    ) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for name, value in (extra or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _error(self, reply: Reply, *, anthropic: bool) -> None:
        kind = "rate_limit_error" if reply.status == 429 else "api_error"
        error = {"type": kind, "message": reply.error_message}
        payload: dict[str, Any] = (
            {"type": "error", "error": error} if anthropic else {"error": error}
        )
        extra = {} if reply.retry_after is None else {"retry-after": f"{reply.retry_after:g}"}
        self._json(reply.status, payload, extra)

    def _sse(self, events: Iterator[str]) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.end_headers()
        for event in events:
            self.wfile.write(event.encode())
            self.wfile.flush()


def _pieces(text: str) -> list[str]:
    return [text[i : i + _CHUNK] for i in range(0, len(text), _CHUNK)]


def _call_ids(reply: Reply, scripted: ScriptedServer, prefix: str) -> list[str]:
    return [c.id if c.id is not None else scripted.new_id(prefix) for c in reply.tool_calls]


def _openai_usage(reply: Reply) -> dict[str, int]:
    total = reply.input_tokens + reply.output_tokens
    return {
        "prompt_tokens": reply.input_tokens,
        "completion_tokens": reply.output_tokens,
        "total_tokens": total,
    }


def _openai_body(reply: Reply, scripted: ScriptedServer) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    ids = _call_ids(reply, scripted, "call")
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": i,
                "type": "function",
                "function": {"name": c.name, "arguments": c.raw_arguments()},
            }
            for i, c in zip(ids, reply.tool_calls, strict=True)
        ]
    choice = {"index": 0, "message": message, "finish_reason": reply.openai_finish_reason()}
    return {
        "id": scripted.new_id("chatcmpl"),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": scripted.model,
        "choices": [choice],
        "usage": _openai_usage(reply),
    }


def _openai_chunks(
    reply: Reply, scripted: ScriptedServer, body: Mapping[str, Any]
) -> Iterator[str]:
    head = {"id": scripted.new_id("chatcmpl"), "object": "chat.completion.chunk",
            "created": int(time.time()), "model": scripted.model}  # fmt: skip

    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return f"data: {json.dumps({**head, 'choices': [choice]})}\n\n"

    yield chunk({"role": "assistant", "content": ""})
    for piece in _pieces(reply.text):
        yield chunk({"content": piece})
    ids = _call_ids(reply, scripted, "call")
    for index, (call_id, c) in enumerate(zip(ids, reply.tool_calls, strict=True)):
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


def _anthropic_blocks(reply: Reply, scripted: ScriptedServer) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = [{"type": "text", "text": reply.text}] if reply.text else []
    for call_id, c in zip(_call_ids(reply, scripted, "toolu"), reply.tool_calls, strict=True):
        block = {"type": "tool_use", "id": call_id, "name": c.name, "input": c.arguments}
        blocks.append(block)
    return blocks


def _anthropic_body(reply: Reply, scripted: ScriptedServer) -> dict[str, Any]:
    blocks = _anthropic_blocks(reply, scripted)
    for block in blocks:  # a cut argument text cannot be an object: send what parsed, nothing
        if block["type"] == "tool_use" and isinstance(block["input"], str):
            block["input"] = {}
    usage = {"input_tokens": reply.input_tokens, "output_tokens": reply.output_tokens}
    return {**_anthropic_message(scripted, blocks, reply.anthropic_stop_reason()), "usage": usage}


def _anthropic_message(
    scripted: ScriptedServer, blocks: list[dict[str, Any]], stop: str | None
) -> dict[str, Any]:
    return dict(id=scripted.new_id("msg"), type="message", role="assistant", model=scripted.model,
                content=blocks, stop_reason=stop, stop_sequence=None)  # fmt: skip


def _sse_event(name: str, data: Mapping[str, Any]) -> str:
    return f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n"


def _anthropic_events(
    reply: Reply, scripted: ScriptedServer, body: Mapping[str, Any]
) -> Iterator[str]:
    usage = {"input_tokens": reply.input_tokens, "output_tokens": 1}
    message: dict[str, Any] = {**_anthropic_message(scripted, [], None), "usage": usage}
    yield _sse_event("message_start", {"message": message})
    for index, block in enumerate(_anthropic_blocks(reply, scripted)):
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
