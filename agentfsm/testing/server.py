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

from agentfsm.exceptions import DataError
from agentfsm.testing.scripted import Reply, Responder
from agentfsm.testing.wire import (
    anthropic_body,
    anthropic_events,
    as_sent,
    openai_body,
    openai_chunks,
)

__all__ = ["RecordedRequest", "ScriptedServer"]


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
        port: The port to listen on; 0 (the default) takes a free one.
        host: The address to listen on.

    Raises:
        OSError: the port cannot be listened on (taken, or not allowed).
    """

    def __init__(
        self,
        script: Iterable[Reply | Responder],
        *,
        model: str = "scripted",
        port: int = 0,
        host: str = "127.0.0.1",
    ) -> None:
        if isinstance(script, str | bytes | Mapping) or not isinstance(script, Iterable):
            raise DataError(
                f"ScriptedServer: script must be a list of replies, not {type(script).__name__}"
            )
        self.model = model
        self.requests: list[RecordedRequest] = []
        self._script = list(script)
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._httpd = _HTTPServer((host, port), _Handler)
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
            events = anthropic_events if anthropic else openai_chunks
            if reply.events is not None:
                events = as_sent
            self._sse(events(reply, scripted, body), reply.chunk_delay)
        elif reply.body is not None:
            self._json(200, reply.body)
        else:
            render = anthropic_body if anthropic else openai_body
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

    def _sse(self, events: Iterator[str], pause: float) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.end_headers()
        for number, event in enumerate(events):
            if number and pause:
                time.sleep(pause)
            self.wfile.write(event.encode())
            self.wfile.flush()
