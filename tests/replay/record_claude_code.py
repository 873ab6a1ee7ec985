"""Record real Claude Code session transcripts for the Claude Code reader's tests.

The real Claude Code CLI runs non-interactively (`claude -p`) in a scratch
project against a scripted Anthropic Messages server on 127.0.0.1 (this file,
stdlib `http.server`, streaming SSE like the real API). The server answers like
a model following a script chosen by a marker in the first user message; every
other request Claude Code makes (titles, quota probes, token counts) gets a
short plain answer and is logged. The transcripts are what the CLI itself
writes to `$CLAUDE_CONFIG_DIR/projects/<cwd-slug>/<session-id>.jsonl`; they are
copied unchanged into `tests/replay/data/claude_code/`.

Recorded with Claude Code 2.1.197 (npm `@anthropic-ai/claude-code`, native
linux-x64 build), node v20. To re-record:

    mkdir -p /tmp/cc && cd /tmp/cc && npm install @anthropic-ai/claude-code
    python tests/replay/record_claude_code.py --claude /tmp/cc/node_modules/.bin/claude

CI never runs this: it reads the committed recordings.
"""

from __future__ import annotations

import argparse
import glob
import http.server
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "data", "claude_code")
MODEL = "claude-sonnet-4-5-20250929"

Block = dict[str, Any]

# A scripted model turn: its content blocks and the stop reason.
Turn = tuple[list[Block], str]


def _tool(n: int, name: str, **args: Any) -> Block:
    return {"type": "tool_use", "id": f"toolu_rec{n:04d}", "name": name, "input": args}


def _text(text: str) -> Block:
    return {"type": "text", "text": text}


def _thinking(text: str) -> Block:
    return {"type": "thinking", "thinking": text, "signature": "c2lnbmF0dXJl"}


# Each scenario: the marker in the prompt that selects it, and the turns the
# "model" gives in order (turn i answers a request holding i assistant messages).
SCENARIOS: dict[str, tuple[str, list[Turn]]] = {
    "tools": (
        "Clean up the build directory",
        [
            (
                [
                    _thinking("The user wants build/ gone; look before deleting."),
                    _text("Let me look at the project first."),
                    _tool(1, "Bash", command="ls"),
                ],
                "tool_use",
            ),
            (
                [
                    _tool(2, "Read", file_path="{cwd}/notes.txt"),
                    _tool(6, "Read", file_path="{cwd}/README.md"),
                ],
                "tool_use",
            ),
            (
                [
                    _tool(3, "Bash", command="cat missing.txt", description="Show missing.txt"),
                    _tool(4, "Bash", command="du -sh build", description="Size of build"),
                ],
                "tool_use",
            ),
            (
                [
                    _text("The notes say build/ can go. Removing it."),
                    _tool(5, "Bash", command="rm -rf build", description="Remove build"),
                ],
                "tool_use",
            ),
            ([_text("Done: build/ is removed; missing.txt does not exist.")], "end_turn"),
        ],
    ),
    "edit": (
        "Write a changelog entry",
        [
            (
                [_tool(31, "Write", file_path="{cwd}/CHANGES.txt", content="- build/ removed\n")],
                "tool_use",
            ),
            (
                [
                    _tool(
                        32,
                        "Edit",
                        file_path="{cwd}/notes.txt",
                        old_string="can be deleted",
                        new_string="was deleted",
                    )
                ],
                "tool_use",
            ),
            ([_text("CHANGES.txt written and notes.txt updated.")], "end_turn"),
        ],
    ),
    "subagent": (
        "Ask a helper agent",
        [
            (
                [
                    _text("I will ask a sub-agent."),
                    _tool(
                        11,
                        "Agent",
                        description="Count files",
                        prompt="SUBTASK: count the files in this directory",
                        subagent_type="general-purpose",
                    ),
                ],
                "tool_use",
            ),
            ([_text("The helper counted the files.")], "end_turn"),
        ],
    ),
    "sub": (
        "SUBTASK: count the files",
        [
            ([_tool(21, "Bash", command="ls | wc -l", description="Count files")], "tool_use"),
            ([_text("There are 3 entries.")], "end_turn"),
        ],
    ),
}

LOG: list[dict[str, Any]] = []


def _first_user_text(messages: list[Any]) -> str:
    for message in messages:
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content
        return " ".join(
            b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text"
        )
    return ""


def _answer(body: dict[str, Any], cwd: str) -> Turn:
    messages = body.get("messages") or []
    text = _first_user_text(messages)
    if body.get("tools"):
        # The sub-agent's prompt holds the parent's marker too: check it first.
        for marker, turns in sorted(SCENARIOS.values(), key=lambda s: -len(s[0])):
            if marker in text:
                done = sum(1 for m in messages if m.get("role") == "assistant")
                blocks, stop = turns[min(done, len(turns) - 1)]
                return json.loads(json.dumps(blocks).replace("{cwd}", cwd)), stop
    return [_text("Recorded session")], "end_turn"


def _start(index: int, block: Block) -> dict[str, Any]:
    return {"type": "content_block_start", "index": index, "content_block": block}


def _delta(index: int, delta: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": delta}


def _events(blocks: list[Block], stop: str, n: int) -> Iterator[tuple[str, dict[str, Any]]]:
    usage = {"input_tokens": 100 + n, "output_tokens": 1}
    message: dict[str, Any] = {
        "id": f"msg_rec{n:04d}",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": usage,
    }
    yield "message_start", {"type": "message_start", "message": message}
    for i, block in enumerate(blocks):
        start: dict[str, Any]
        delta: dict[str, Any]
        if block["type"] == "text":
            start = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        elif block["type"] == "thinking":
            start = {"type": "thinking", "thinking": "", "signature": ""}
            delta = {"type": "thinking_delta", "thinking": block["thinking"]}
            yield "content_block_start", _start(i, start)
            yield "content_block_delta", _delta(i, delta)
            signed = {"type": "signature_delta", "signature": block["signature"]}
            yield "content_block_delta", _delta(i, signed)
            yield "content_block_stop", {"type": "content_block_stop", "index": i}
            continue
        else:
            start = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        yield "content_block_start", _start(i, start)
        yield "content_block_delta", _delta(i, delta)
        yield "content_block_stop", {"type": "content_block_stop", "index": i}
    end = {"stop_reason": stop, "stop_sequence": None}
    yield "message_delta", {"type": "message_delta", "delta": end, "usage": {"output_tokens": 20}}
    yield "message_stop", {"type": "message_stop"}


class Handler(http.server.BaseHTTPRequestHandler):
    cwd = ""
    count = 0

    def log_message(self, format: str, *args: Any) -> None:  # the LOG says enough
        pass

    def do_HEAD(self) -> None:
        self.send_response(200)
        self.end_headers()

    def do_GET(self) -> None:
        LOG.append({"method": "GET", "path": self.path})
        self._json({})

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length", 0))
        body = json.loads(self.rfile.read(length) or b"{}")
        path = self.path.split("?")[0]
        entry = {"path": self.path, "model": body.get("model"), "stream": body.get("stream")}
        entry["tools"] = len(body.get("tools") or [])
        entry["first_user"] = _first_user_text(body.get("messages") or [])[:80]
        LOG.append(entry)
        if path.endswith("/count_tokens"):
            self._json({"input_tokens": 100})
            return
        if not path.endswith("/v1/messages"):
            self._json({})
            return
        Handler.count += 1
        blocks, stop = _answer(body, self.cwd)
        entry["answer"] = [b.get("name", b["type"]) for b in blocks]
        entry["tool_names"] = [t.get("name") for t in body.get("tools") or []]
        if not body.get("stream"):
            self._json(
                {
                    "id": f"msg_rec{Handler.count:04d}",
                    "type": "message",
                    "role": "assistant",
                    "model": MODEL,
                    "content": blocks,
                    "stop_reason": stop,
                    "stop_sequence": None,
                    "usage": {"input_tokens": 100, "output_tokens": 20},
                }
            )
            return
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.end_headers()
        for name, data in _events(blocks, stop, Handler.count):
            self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
        self.wfile.flush()
        self.close_connection = True

    def _json(self, obj: Any) -> None:
        data = json.dumps(obj).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def _project(root: str) -> str:
    project = os.path.join(root, "project")
    os.makedirs(os.path.join(project, "build"))
    with open(os.path.join(project, "notes.txt"), "w") as f:
        f.write("build/ holds stale artifacts and can be deleted.\n")
    with open(os.path.join(project, "build", "out.bin"), "wb") as f:
        f.write(b"\0" * 64)
    return project


def record(claude: str, scenario: str, name: str, out: str = OUT) -> str:
    root = tempfile.mkdtemp(prefix="cc-rec-")
    project = _project(root)
    config = os.path.join(root, "config")
    os.makedirs(config)
    Handler.cwd = project
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    env = {
        "PATH": os.environ["PATH"],
        "HOME": root,
        "CLAUDE_CONFIG_DIR": config,
        "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{server.server_address[1]}",
        "ANTHROPIC_API_KEY": "test",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
    }
    prompt = SCENARIOS[scenario][0] + "."
    cmd = [claude, "-p", prompt, "--output-format", "json", "--model", MODEL]
    cmd += ["--allowedTools", "Bash,Read,Agent,Write,Edit", "--permission-mode", "acceptEdits"]
    try:
        done = subprocess.run(
            cmd, cwd=project, env=env, capture_output=True, text=True, timeout=180
        )
    finally:
        server.shutdown()
    print(f"{scenario}: exit {done.returncode}\n{done.stdout[:2000]}\n{done.stderr[:2000]}")
    files = sorted(
        glob.glob(os.path.join(config, "projects", "*", "**", "*.jsonl"), recursive=True)
    )
    os.makedirs(out, exist_ok=True)
    agents = 0
    for found in files:
        print("transcript:", os.path.relpath(found, config))
        target = name
        # A sub-agent's transcript: <session-id>/subagents/agent-<id>.jsonl.
        if os.sep + "subagents" + os.sep in found:
            agents += 1
            target = f"{name}-agent" if agents == 1 else f"{name}-agent-{agents}"
        shutil.copyfile(found, os.path.join(out, f"{target}.jsonl"))
    return root


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--claude", default="claude", help="the Claude Code CLI to run")
    parser.add_argument("--only", help="record only this scenario")
    parser.add_argument("--out", default=OUT, help="where to write the transcripts")
    args = parser.parse_args()
    for scenario, name in (("tools", "tools"), ("edit", "edit"), ("subagent", "subagent")):
        if args.only and args.only != scenario:
            continue
        shutil.rmtree(record(args.claude, scenario, name, args.out))
    for entry in LOG:
        print(json.dumps(entry))
    return 0


if __name__ == "__main__":
    sys.exit(main())
