"""The host entries of docs/mcp-proxy.md, each tried: the docs are the test's input.

Every JSON entry under "## Hosts" is read from the page, `/home/me` replaced by a temporary
folder and `/home/me/.venv/bin/agentfsm` by this venv's `agentfsm`; then:

- for every entry (Claude Desktop, Cursor and VS Code have no GUI here), the entry's exact
  command and arguments are started as a host would start them, and an MCP host session
  (initialize, tools/list, a read) goes through the proxy to the filesystem server that `npx`
  starts from the pinned install (`make mcp-servers`; npm offline, so nothing is fetched);
- Claude Code (npm `@anthropic-ai/claude-code`, pinned in .ci/mcp-servers) runs for real,
  `claude -p` in a project holding the entry as `.mcp.json`, its model a scripted Anthropic
  Messages server on 127.0.0.1 that calls the proxied tools: a read runs, a write is asked and
  Claude Code's Elicitation hook answers it.
"""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar

import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.cli.test_mcp_proxy import ENV, ROOT, last_decision, replayed, run, text
from tests.cli.test_mcp_proxy_real_servers import SERVERS, installed

DOCS = Path(ROOT) / "docs" / "mcp-proxy.md"
HOSTS = ("Claude Code", "Claude Desktop", "Cursor", "VS Code")
DOCS_AGENTFSM = "/home/me/.venv/bin/agentfsm"
AGENTFSM = Path(sys.executable).with_name("agentfsm")
CLAUDE = SERVERS / "node_modules" / ".bin" / "claude"
MODEL = "claude-sonnet-4-5-20250929"
OFFLINE = {**ENV, "npm_config_offline": "true"}
"""The host's environment: npm offline, so `npx` runs the pinned install or fails."""


def hosts_section() -> str:
    return DOCS.read_text(encoding="utf-8").split("\n## Hosts\n", 1)[1].split("\n## ", 1)[0]


def json_block(markdown: str) -> Any:
    """The first ```json block of `markdown`, parsed."""
    return json.loads(markdown.split("```json\n", 1)[1].split("```", 1)[0])


def entries() -> dict[str, dict[str, Any]]:
    """Each host's entry, by the `### ` heading it sits under."""
    found = {}
    for part in hosts_section().split("\n### ")[1:]:
        host, _, body = part.partition("\n")
        found[host.strip()] = json_block(body)
    return found


def placed(config: dict[str, Any], home: Path) -> dict[str, Any]:
    """The entry with this venv's agentfsm and `home` where the docs have /home/me."""
    said = json.dumps(config).replace(DOCS_AGENTFSM, str(AGENTFSM))
    return dict(json.loads(said.replace("/home/me", str(home))))


def the_server(config: dict[str, Any]) -> dict[str, Any]:
    """The one server of an entry (VS Code's table is `servers`, the others' `mcpServers`)."""
    (server,) = (config.get("mcpServers") or config["servers"]).values()
    return dict(server)


def home(tmp_path: Path) -> Path:
    """/home/me for one test: the docs' policy and a project with a note in it."""
    if not os.access(AGENTFSM, os.X_OK):
        pytest.fail(f"{AGENTFSM} missing: `make install` installs agentfsm's command")
    installed(SERVERS / "node_modules" / ".bin" / "mcp-server-filesystem")
    me = tmp_path / "home"
    (me / "project").mkdir(parents=True)
    (me / "project" / "notes.txt").write_text("build/ can go\n", encoding="utf-8")
    policy = json_block(hosts_section().split("\n### ", 1)[0])
    (me / "agentfsm-policy.json").write_text(json.dumps(policy), encoding="utf-8")
    return me


class TestDocumentedEntries:
    def test_every_host_has_an_entry_with_the_absolute_command(self) -> None:
        """The page has an entry for each host people use, each naming agentfsm by its
        absolute path; VS Code's under `servers`, as VS Code reads it."""
        found = entries()
        assert sorted(found) == sorted(HOSTS)
        for config in found.values():
            assert the_server(config)["command"] == DOCS_AGENTFSM
        assert "servers" in found["VS Code"]
        assert "mcpServers" not in found["VS Code"]

    @pytest.mark.parametrize("host", HOSTS)
    def test_entry_runs(self, tmp_path: Path, host: str) -> None:
        """The entry's command, started as the host starts it, serves an MCP session through
        the proxy: the filesystem server's tools are listed, a read runs and is judged in the
        trace the entry names."""
        me = home(tmp_path)
        server = the_server(placed(entries()[host], me))
        # `npx` is run where the pinned server is installed: a host runs it from anywhere
        params = StdioServerParameters(
            command=server["command"], args=server["args"], env=OFFLINE, cwd=SERVERS
        )
        notes = str(me / "project" / "notes.txt")

        async def go() -> tuple[list[str], str]:
            with (tmp_path / "stderr.txt").open("w", encoding="utf-8") as errlog:
                async with (
                    stdio_client(params, errlog=errlog) as (read, write),
                    ClientSession(read, write) as session,
                ):
                    await session.initialize()
                    tools = [tool.name for tool in (await session.list_tools()).tools]
                    result = await session.call_tool("read_text_file", {"path": notes})
                    return tools, text(result)

        tools, said = run(go)
        assert {"read_text_file", "write_file"} <= set(tools)
        assert said == "build/ can go\n"
        trace = me / "filesystem.jsonl"
        record = replayed(trace)
        assert record["exit_reason"] == record["recorded_end"] == "completed"
        assert record["decisions"][0]["action"] == "execute_tools"


class Model(http.server.BaseHTTPRequestHandler):
    """A scripted Anthropic Messages API: reads the note, writes a file, then is done.

    Turn i answers a request holding i assistant messages; requests without the proxied tools
    (titles, probes) get a short text. Every request's tool results are kept in `results`.
    """

    project = ""
    results: ClassVar[list[str]] = []

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_HEAD(self) -> None:
        self.send_response(200)
        self.end_headers()

    def do_GET(self) -> None:
        self._json({})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
        if self.path.split("?")[0].endswith("/count_tokens"):
            self._json({"input_tokens": 1})
            return
        messages = body.get("messages") or []
        for message in messages:
            for block in message.get("content") if isinstance(message.get("content"), list) else []:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    Model.results.append(json.dumps(block.get("content")))
        names = {tool.get("name") for tool in body.get("tools") or []}
        used = [
            str(block.get("name"))
            for message in messages
            if message.get("role") == "assistant" and isinstance(message.get("content"), list)
            for block in message["content"]
            if isinstance(block, dict) and block.get("type") == "tool_use"
        ]
        calls = sum(1 for name in used if name.startswith("mcp__"))
        blocks: list[dict[str, Any]] = [{"type": "text", "text": "Done."}]
        steps = [
            ("read_text_file", {"path": f"{self.project}/notes.txt"}),
            ("write_file", {"path": f"{self.project}/out.txt", "content": "from claude\n"}),
        ]
        if "mcp__filesystem__read_text_file" in names and calls < len(steps):
            tool, args = steps[calls]
            blocks = [{"type": "tool_use", "id": f"toolu_{len(used)}"}]
            blocks[0] |= {"name": f"mcp__filesystem__{tool}", "input": args}
        elif "WaitForMcpServers" in names and used.count("WaitForMcpServers") < 12:
            # Claude Code asks the model before its MCP servers are up (starting the proxy
            # and the server behind it takes seconds); a model waits with this tool, which
            # returns after up to 5 s, and tries again while the server is still connecting
            blocks = [{"type": "tool_use", "id": f"toolu_{len(used)}", "name": "WaitForMcpServers"}]
            blocks[0]["input"] = {}
        self._stream(blocks, "tool_use" if blocks[0]["type"] == "tool_use" else "end_turn")

    def _stream(self, blocks: list[dict[str, Any]], stop: str) -> None:
        usage = {"input_tokens": 10, "output_tokens": 1}
        start: dict[str, Any] = {"id": "msg_1", "type": "message", "role": "assistant"}
        start |= {"model": MODEL, "content": [], "stop_reason": None, "stop_sequence": None}
        start["usage"] = usage
        events: list[tuple[str, dict[str, Any]]] = [
            ("message_start", {"type": "message_start", "message": start})
        ]
        for i, block in enumerate(blocks):
            first: dict[str, Any]
            if block["type"] == "text":
                first = {"type": "text", "text": ""}
                delta = {"type": "text_delta", "text": block["text"]}
            else:
                first = {**block, "input": {}}
                delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
            where = {"index": i}
            events += [
                ("content_block_start", {"type": "content_block_start", "content_block": first}),
                ("content_block_delta", {"type": "content_block_delta", "delta": delta}),
                ("content_block_stop", {"type": "content_block_stop"}),
            ]
            events[-3:] = [(name, {**data, **where}) for name, data in events[-3:]]
        end = {"stop_reason": stop, "stop_sequence": None}
        events += [
            ("message_delta", {"type": "message_delta", "delta": end, "usage": usage}),
            ("message_stop", {"type": "message_stop"}),
        ]
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.end_headers()
        for name, data in events:
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


@contextmanager
def model(project: Path) -> Iterator[str]:
    """The scripted model's base URL, serving until the block ends."""
    Model.project = str(project)
    Model.results = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Model)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


class TestClaudeCode:
    @pytest.mark.parametrize("answer", ["accept", "decline"])
    def test_claude_code_calls_through_the_documented_entry(
        self, tmp_path: Path, answer: str
    ) -> None:
        """Claude Code, given the page's entry as the project's `.mcp.json`, calls the
        filesystem server's tools through the proxy: the read runs, the write is asked and
        Claude Code's Elicitation hook answers; only a yes writes the file."""
        claude = installed(CLAUDE)
        me = home(tmp_path)
        project = me / "project"
        (project / ".mcp.json").write_text(
            json.dumps(placed(entries()["Claude Code"], me)), encoding="utf-8"
        )
        # npx finds the pinned server from the project, as from a project that depends on it
        (project / "node_modules").symlink_to(SERVERS / "node_modules")
        (project / "package.json").write_bytes((SERVERS / "package.json").read_bytes())
        config = tmp_path / "claude-config"
        config.mkdir()
        said: dict[str, Any] = {"hookEventName": "Elicitation", "action": answer}
        if answer == "accept":
            said["content"] = {"approve": True}
        hook = {"type": "command", "command": f"echo '{json.dumps({'hookSpecificOutput': said})}'"}
        settings = {
            "enableAllProjectMcpServers": True,
            "hooks": {"Elicitation": [{"hooks": [hook]}]},
        }
        (config / "settings.json").write_text(json.dumps(settings), encoding="utf-8")
        tools = "mcp__filesystem__read_text_file,mcp__filesystem__write_file"
        with model(project) as url:
            env = {
                **OFFLINE,
                "HOME": str(me),
                "CLAUDE_CONFIG_DIR": str(config),
                "ANTHROPIC_BASE_URL": url,
                "ANTHROPIC_API_KEY": "test",
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                "DISABLE_AUTOUPDATER": "1",
            }
            done = subprocess.run(
                [
                    *(claude, "-p", "Read notes.txt, then write out.txt.", "--model", MODEL),
                    *("--output-format", "json", "--allowedTools", tools),
                ],
                cwd=project,
                env=env,
                capture_output=True,
                text=True,
                timeout=240,
                check=False,
            )
        assert done.returncode == 0, done.stdout + done.stderr
        trace = me / "filesystem.jsonl"
        record = replayed(trace)
        actions = [d["action"] for d in record["decisions"]]
        assert actions[0] == "execute_tools"  # the read, allowed by the policy
        assert "ask_human" in actions  # the write: the server marks it destructive
        assert actions.count("execute_tools") == (2 if answer == "accept" else 1)
        # Claude Code got the proxied read's result and gave it to the model
        assert any("build/ can go" in said for said in Model.results)
        assert (project / "out.txt").exists() is (answer == "accept")
        # Claude Code ends a stdio server with SIGINT: the trace ends, and says so
        assert record["exit_reason"] == record["recorded_end"] == "interrupted"
        assert "received SIGINT" in last_decision(trace)["reason"]
