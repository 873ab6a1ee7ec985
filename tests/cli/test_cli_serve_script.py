"""`agentfsm serve-script`: a real server process, answered over real HTTP."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentfsm._cli.serve_script import read_script
from agentfsm.exceptions import AgentFSMError
from tests.processes import free_port, python

SCRIPT = [
    {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]},
    "Sunny in Paris.",
]
TIMEOUT = 30


def _script(path: Path, replies: list[Any] = SCRIPT) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in replies), encoding="utf-8")
    return str(path)


def _start(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "agentfsm", "serve-script", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONWARNINGS": "error"},
    )


def _post(url: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"content-type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _stop(server: subprocess.Popen[str]) -> tuple[int, str]:
    server.send_signal(signal.SIGINT)
    _, err = server.communicate(timeout=TIMEOUT)
    return server.returncode, err


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """A running `serve-script` of SCRIPT and the base URL it printed first."""
    server = _start(_script(tmp_path / "script.jsonl"))
    try:
        assert server.stdout is not None
        base = server.stdout.readline().strip()
        yield server, base
    finally:
        if server.poll() is None:
            server.kill()
            server.communicate(timeout=TIMEOUT)


class TestServeScript:
    """The server answers requests in script order and stops cleanly on an interrupt."""

    def test_replies_in_order_then_exhausted(
        self, served: tuple[subprocess.Popen[str], str]
    ) -> None:
        """The first line is the OpenAI base; requests get the tool call, the text, then 400."""
        server, base = served
        assert base.startswith("http://127.0.0.1:")
        assert base.endswith("/v1")
        ask = {"model": "scripted", "messages": [{"role": "user", "content": "weather?"}]}
        status, first = _post(f"{base}/chat/completions", ask)
        assert status == 200
        call = first["choices"][0]["message"]["tool_calls"][0]["function"]
        assert (call["name"], json.loads(call["arguments"])) == ("get_weather", {"city": "Paris"})
        assert first["choices"][0]["finish_reason"] == "tool_calls"
        status, second = _post(f"{base}/chat/completions", ask)
        assert (status, second["choices"][0]["message"]["content"]) == (200, "Sunny in Paris.")
        status, third = _post(f"{base}/chat/completions", ask)
        assert status == 400
        assert "script exhausted" in third["error"]["message"]
        code, err = _stop(server)
        assert code == 0
        assert "served 2 of 2" in err

    def test_anthropic_route(self, served: tuple[subprocess.Popen[str], str]) -> None:
        """The root of the same server speaks Anthropic Messages."""
        server, base = served
        body = {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "x"}]}
        status, reply = _post(base.removesuffix("/v1") + "/v1/messages", body)
        assert status == 200
        assert reply["stop_reason"] == "tool_use"
        assert reply["content"][-1]["name"] == "get_weather"
        assert _stop(server)[0] == 0

    @pytest.mark.needs("openai")
    def test_the_openai_client_reads_openai_base_url(
        self, served: tuple[subprocess.Popen[str], str], tmp_path: Path
    ) -> None:
        """The openai SDK, given only OPENAI_BASE_URL, gets the scripted answers."""
        server, base = served
        code = (
            "from openai import OpenAI\n"
            "c = OpenAI(api_key='sk-local')\n"
            "for _ in range(2):\n"
            "    r = c.chat.completions.create(model='scripted', "
            "messages=[{'role': 'user', 'content': 'hi'}])\n"
            "    m = r.choices[0].message\n"
            "    print(m.tool_calls[0].function.name if m.tool_calls else m.content)\n"
        )
        env = {**os.environ, "OPENAI_BASE_URL": base}
        done = python("-c", code, env=env, timeout=120)
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines() == ["get_weather", "Sunny in Paris."]
        assert _stop(server)[0] == 0

    def test_sigterm_stops_it(self, served: tuple[subprocess.Popen[str], str]) -> None:
        """SIGTERM ends the server with exit 0 too."""
        server, _ = served
        server.send_signal(signal.SIGTERM)
        server.communicate(timeout=TIMEOUT)
        assert server.returncode == 0

    def test_given_port(self, tmp_path: Path) -> None:
        """--port N listens on N and says so on the first line."""
        port = free_port()
        server = _start(_script(tmp_path / "s.jsonl"), "--port", str(port))
        try:
            assert server.stdout is not None
            assert server.stdout.readline().strip() == f"http://127.0.0.1:{port}/v1"
        finally:
            assert _stop(server)[0] == 0


class TestBadScripts:
    """A script or port that cannot serve exits 2 with one line saying why."""

    def _run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return python("-m", "agentfsm", "serve-script", *args, timeout=TIMEOUT)

    def test_invalid_reply_names_the_line(self, tmp_path: Path) -> None:
        """A reply with an unknown field is named by file and line."""
        path = _script(tmp_path / "s.jsonl", ["ok", {"txt": "typo"}])
        done = self._run(path)
        assert done.returncode == 2
        assert done.stdout == ""
        assert done.stderr.startswith(f"agentfsm serve-script: {path}:2: ")
        assert "txt" in done.stderr

    def test_port_taken(self, tmp_path: Path) -> None:
        """A port already listened on is refused with exit 2."""
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            port = taken.getsockname()[1]
            done = self._run(_script(tmp_path / "s.jsonl"), "--port", str(port))
        assert done.returncode == 2
        assert f"cannot listen on 127.0.0.1:{port}" in done.stderr

    def test_port_out_of_range(self, tmp_path: Path) -> None:
        """--port 70000 is a usage error (exit 2) naming the range."""
        done = self._run(_script(tmp_path / "s.jsonl"), "--port", "70000")
        assert done.returncode == 2
        assert "expected a port from 0 to 65535, got 70000" in done.stderr

    def test_missing_file(self, tmp_path: Path) -> None:
        """A script that does not exist is exit 2, naming it."""
        done = self._run(str(tmp_path / "nope.json"))
        assert done.returncode == 2
        assert "nope.json: cannot read" in done.stderr


class TestReadScript:
    """Script files: a JSON list, or JSON Lines with blank and `#` lines skipped."""

    def test_json_list(self, tmp_path: Path) -> None:
        """A JSON list of strings and objects becomes replies in order."""
        path = tmp_path / "s.json"
        path.write_text(json.dumps(["a", {"text": "b", "finish_reason": "length"}]), "utf-8")
        replies = read_script(str(path))
        assert [(r.text, r.openai_finish_reason()) for r in replies] == [
            ("a", "stop"),
            ("b", "length"),
        ]

    def test_json_lines_skip_comments(self, tmp_path: Path) -> None:
        """Blank lines and comments are not replies."""
        path = tmp_path / "s.jsonl"
        path.write_text('# a greeting\n\n"hi"\n{"status": 429, "retry_after": 1}\n', "utf-8")
        replies = read_script(str(path))
        assert [(r.text, r.status) for r in replies] == [("hi", 200), ("", 429)]

    @pytest.mark.parametrize(
        ("text", "message"),
        [
            ("", "no replies"),
            ('"a"\n{oops\n', "s.jsonl:2: not valid JSON"),
            ("[1]", "reply 1: a reply is a string or an object, not int"),
        ],
    )
    def test_bad_scripts(self, tmp_path: Path, text: str, message: str) -> None:
        """An empty script, a bad line and a reply of the wrong kind are named."""
        path = tmp_path / "s.jsonl"
        path.write_text(text, "utf-8")
        with pytest.raises(AgentFSMError, match=message):
            read_script(str(path))


ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = [
    # (example, its script, how it finds the server, modules it needs, its last line ends with)
    ("openai_agent.py", "weather.jsonl", "env", ("openai",), "It is sunny in Paris."),
    ("weather_litellm.py", "weather_litellm.jsonl", "env", ("litellm",), "(60 tokens)"),
    ("integrations/langgraph_example.py", "weather.jsonl", "arg", ("langgraph",), "completed"),
    ("integrations/openai_agents_example.py", "weather.jsonl", "arg", ("agents",), "completed"),
    ("integrations/pydantic_ai_example.py", "weather.jsonl", "arg", ("pydantic_ai",), "completed"),
    (
        "integrations/mini_swe_agent_example.py",
        "mini_swe_agent.jsonl",
        "arg",
        ("minisweagent", "litellm"),
        "completed",
    ),
]
"""The docs' examples, each run as its docs say against `serve-script` of its script."""


class TestExamplesAgainstServeScript:
    """Every example runs as written against `agentfsm serve-script examples/scripts/...`."""

    @pytest.mark.parametrize(
        ("example", "script", "how", "ends"),
        [
            pytest.param(e, s, h, end, marks=pytest.mark.needs(*needs), id=e)
            for e, s, h, needs, end in EXAMPLES
        ],
    )
    def test_example_runs(
        self, example: str, script: str, how: str, ends: str, tmp_path: Path
    ) -> None:
        """The example, pointed at the server by OPENAI_BASE_URL or its argument, completes
        and uses every scripted reply."""
        server = _start(str(ROOT / "examples" / "scripts" / script))
        try:
            assert server.stdout is not None
            base = server.stdout.readline().strip()
            env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
            env.pop("OPENAI_API_KEY", None)
            env.pop("MODEL", None)
            if how == "env":
                env["OPENAI_BASE_URL"] = base
            else:
                env.pop("OPENAI_BASE_URL", None)
            args = [base] if how == "arg" else []
            done = python(
                str(ROOT / "examples" / example), *args, env=env, cwd=tmp_path, timeout=300
            )
            assert done.returncode == 0, done.stderr
            assert done.stdout.splitlines()[-1].endswith(ends), done.stdout
        finally:
            code, err = _stop(server)
        assert code == 0
        assert "served 2 of 2" in err
