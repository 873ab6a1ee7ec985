"""Issue 37, section 2: what `agentfsm mcp-proxy` adds to a tool call, against the same
server called directly, in one run.

    python bench/bench_mcp_proxy.py [--calls 2000] [--block 100] [--warm 200] [--json FILE]
    python bench/bench_mcp_proxy.py --instructions    # the stdio proxy's, by cachegrind
    python bench/bench_mcp_proxy.py --base DIR --sessions   # stdio, this tree's proxy and DIR's

One client process (the `mcp` package's ClientSession, as a host uses it) holds every
session open at once and times `tools/call` of a cheap tool `echo` through each in turn:

- stdio: direct (a ClientSession on the server's stdin/stdout) against through the proxy
  (`agentfsm mcp-proxy --policy P -- SERVER`), and through the proxy with `--trace`;
- HTTP, 1 and 8 sessions: direct (streamable HTTP to the server, the `mcp` package's own
  HTTP server) against through the proxy in front of that same server
  (`agentfsm mcp-proxy --http 0 --url SERVER_URL`): the host reaches the proxy by URL and the
  proxy reaches the server by URL, so the server is the same one and the proxy adds a hop.
  With 8 sessions, 8 host sessions call at once, each its own share of the block.

The machine has 2 cores shared with other work, so nothing is compared across blocks
taken minutes apart: the variants take turns in blocks of `--block` calls (the order
rotated every round), and each calls/s ratio is taken within a round, proxy block over
the direct block of that round; the figure quoted is the median of those ratios. Latency
percentiles are over every timed call of a variant; "added" is proxy minus direct.

A bare relay (`_relay SERVER...`: an asyncio line relay that parses and rewrites each line
with `json` and does nothing else) runs beside them on stdio: the floor of any proxy written
in Python, so the proxy's own share of what it adds can be told from the hop's.

`python bench/bench_mcp_proxy.py _server` is the stdio server (JSON-RPC by hand, so its own
cost is small beside the client's); `_server PORT` serves the same tool over streamable
HTTP with the `mcp` package's MCPServer.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import re
import select
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
ENV = {**os.environ, "PYTHONPATH": str(REPO), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
"""The processes' environment; they also run in REPO, since `python -m` puts the working
directory first on the path: the proxy measured is this checkout's."""
ECHO_TOOL = {
    "name": "echo",
    "description": "Return the text given.",
    "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
    "annotations": {"readOnlyHint": True},
}
POLICY = {"permissions": {"echo": "allow"}}


# -- the server -------------------------------------------------------------------------


def serve_stdio() -> None:
    """The stdio server: initialize, tools/list, tools/call of `echo`, ping."""
    out = sys.stdout
    for line in sys.stdin:
        message = json.loads(line)
        method, ident = message.get("method"), message.get("id")
        if ident is None:
            continue  # a notification
        params = message.get("params") or {}
        if method == "initialize":
            result: Any = {
                "protocolVersion": params.get("protocolVersion"),
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "bench-echo", "version": "1"},
            }
        elif method == "tools/list":
            result = {"tools": [ECHO_TOOL]}
        elif method == "tools/call":
            said = (params.get("arguments") or {}).get("text", "")
            result = {"content": [{"type": "text", "text": said}], "isError": False}
        else:
            result = {}
        out.write(json.dumps({"jsonrpc": "2.0", "id": ident, "result": result}) + "\n")
        out.flush()


def serve_http(port: int) -> None:
    """The same tool over streamable HTTP, by the `mcp` package's own server."""
    import logging

    from mcp.server.mcpserver import MCPServer
    from mcp.types import ToolAnnotations

    logging.disable(logging.INFO)  # uvicorn's access log would be most of the server's work
    server = MCPServer("bench-echo", log_level="WARNING")

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def echo(text: str) -> str:
        """Return the text given."""
        return text

    server.run("streamable-http", host="127.0.0.1", port=port)


# -- the client -------------------------------------------------------------------------

Call = Callable[[], Awaitable[None]]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _wait_listening(port: int, proc: subprocess.Popen[Any]) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("the bench's HTTP server did not start") from None
            time.sleep(0.1)


def _first_line(proc: subprocess.Popen[bytes]) -> str:
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], 60)
    if not ready:
        raise SystemExit("the proxy printed no URL")
    return proc.stdout.readline().decode("utf-8").strip()


@contextlib.contextmanager
def _process(argv: list[str], stdout: Any = subprocess.DEVNULL) -> Any:
    """A process for the run's length, stopped by SIGTERM at the end."""
    proc = subprocess.Popen(argv, stdout=stdout, stderr=subprocess.DEVNULL, env=ENV, cwd=REPO)
    try:
        yield proc
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


async def _calls(session: Any) -> Call:
    from mcp.types import TextContent

    await session.initialize()
    await session.list_tools()
    count = itertools.count()

    async def call() -> None:
        # Every call's arguments differ: the proxy's doom-loop guard stops a session that
        # repeats one call (and a real host's calls differ too).
        said = f"call {next(count)}"
        result = await session.call_tool("echo", {"text": said})
        first = result.content[0]
        if result.is_error or not isinstance(first, TextContent) or first.text != said:
            raise SystemExit(f"unexpected result: {result}")

    return call


@contextlib.asynccontextmanager
async def _stdio(argv: list[str], tree: Path = REPO) -> AsyncIterator[Call]:
    """A host session on `argv`'s stdio, its agentfsm the checkout `tree`'s."""
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    env = {**ENV, "PYTHONPATH": str(tree)}
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=env, cwd=tree)
    with open(os.devnull, "w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            yield await _calls(session)


@contextlib.asynccontextmanager
async def _http(url: str) -> AsyncIterator[Call]:
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async with (
        streamable_http_client(url) as (read, write),
        ClientSession(read, write) as session,
    ):
        yield await _calls(session)


class Variant:
    """One way of calling the tool: its sessions, and every call's seconds and each
    block's calls/s."""

    def __init__(self, group: str, side: str, calls: list[Call]) -> None:
        self.group = group
        self.side = side
        self.name = f"{group} {side}"
        self.calls = calls
        self.latencies: list[float] = []
        self.rates: list[float] = []

    async def block(self, n: int, keep: bool = True) -> None:
        """`n` calls, spread over the variant's sessions, which call at once."""
        share = n // len(self.calls)
        times: list[float] = []

        async def one(call: Call) -> None:
            for _ in range(share):
                start = time.perf_counter()
                await call()
                times.append(time.perf_counter() - start)

        start = time.perf_counter()
        await asyncio.gather(*(one(call) for call in self.calls))
        wall = time.perf_counter() - start
        if keep:
            self.latencies += times
            self.rates.append(len(times) / wall)


def _ms(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(int(q * len(ordered)), len(ordered) - 1)] * 1000


async def measure(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    policy = tmp / "policy.json"
    policy.write_text(json.dumps(POLICY), encoding="utf-8")
    server = [sys.executable, str(Path(__file__).resolve()), "_server"]
    relay = [sys.executable, str(Path(__file__).resolve()), "_relay"]
    proxy = [sys.executable, "-m", "agentfsm", "mcp-proxy", "--policy", str(policy)]
    port = _free_port()
    with contextlib.ExitStack() as procs, contextlib.ExitStack() as later:
        http_server = procs.enter_context(_process([*server, str(port)]))
        _wait_listening(port, http_server)
        url = f"http://127.0.0.1:{port}/mcp"
        front = procs.enter_context(
            _process([*proxy, "--http", "0", "--url", url], stdout=subprocess.PIPE)
        )
        proxy_url = _first_line(front)
        async with contextlib.AsyncExitStack() as stack:

            async def sessions(make: Callable[[], Any], count: int = 1) -> list[Call]:
                return [await stack.enter_async_context(make()) for _ in range(count)]

            pairs = [
                ("stdio", "direct", await sessions(lambda: _stdio(server))),
                ("stdio", "bare relay", await sessions(lambda: _stdio([*relay, *server]))),
                ("stdio", "proxy", await sessions(lambda: _stdio([*proxy, "--", *server]))),
                (
                    "stdio",
                    "proxy --trace",
                    await sessions(
                        lambda: _stdio([*proxy, "--trace", str(tmp / "t.jsonl"), "--", *server])
                    ),
                ),
            ]
            if args.base is not None:  # the same two through another checkout's proxy
                base = Path(args.base).resolve()
                trace = str(tmp / "base.jsonl")
                pairs += [
                    (
                        "stdio",
                        "base proxy",
                        await sessions(lambda: _stdio([*proxy, "--", *server], base)),
                    ),
                    (
                        "stdio",
                        "base proxy --trace",
                        await sessions(
                            lambda: _stdio([*proxy, "--trace", trace, "--", *server], base)
                        ),
                    ),
                ]
            for count in args.sessions:
                direct = await sessions(lambda: _http(url), count)
                through = await sessions(lambda: _http(proxy_url), count)
                group = f"HTTP x{count}"
                pairs += [(group, "direct", direct), (group, "proxy", through)]
            variants = [Variant(group, side, calls) for group, side, calls in pairs]
            for variant in variants:
                await variant.block(args.warm, keep=False)
            rounds = max(args.calls // args.block, 1)
            ratios: dict[str, list[float]] = {}
            for r in range(rounds):
                order = variants[r % len(variants) :] + variants[: r % len(variants)]
                if r % 2:
                    order.reverse()
                for variant in order:
                    await variant.block(args.block)
                for plain, other in _pairs(variants):
                    ratios.setdefault(other.name, []).append(other.rates[-1] / plain.rates[-1])
        later.close()
    return _summary(variants, ratios, args)


def _pairs(variants: list[Variant]) -> list[tuple[Variant, Variant]]:
    """Each variant that is not direct with the direct one of its group."""
    direct = {v.group: v for v in variants if v.side == "direct"}
    return [(direct[v.group], v) for v in variants if v.side != "direct"]


def _summary(
    variants: list[Variant], ratios: dict[str, list[float]], args: argparse.Namespace
) -> dict[str, Any]:
    rows: dict[str, dict[str, Any]] = {}
    for v in variants:
        rows[v.name] = {
            "calls": len(v.latencies),
            "p50_ms": round(_ms(v.latencies, 0.5), 3),
            "p95_ms": round(_ms(v.latencies, 0.95), 3),
            "calls_per_s": round(statistics.median(v.rates), 1),
        }
    for direct, through in _pairs(variants):
        row = rows[through.name]
        row["added_p50_ms"] = round(row["p50_ms"] - rows[direct.name]["p50_ms"], 3)
        row["added_p95_ms"] = round(row["p95_ms"] - rows[direct.name]["p95_ms"], 3)
        found = ratios[through.name]
        row["rate_ratio"] = {
            "min": round(min(found), 3),
            "median": round(statistics.median(found), 3),
            "max": round(max(found), 3),
        }
    return {"calls": args.calls, "block": args.block, "variants": rows}


def _table(result: dict[str, Any]) -> str:
    head = "| variant | p50 ms | p95 ms | added p50 | added p95 | calls/s | calls/s ratio |"
    lines = [head, "|---|---|---|---|---|---|---|"]
    for name, row in result["variants"].items():
        ratio = row.get("rate_ratio")
        said = f"{ratio['median']:.2f} ({ratio['min']:.2f}-{ratio['max']:.2f})" if ratio else ""
        lines.append(
            f"| {name} | {row['p50_ms']:.2f} | {row['p95_ms']:.2f} | "
            f"{row.get('added_p50_ms', ''):} | {row.get('added_p95_ms', '')} | "
            f"{row['calls_per_s']:.0f} | {said} |"
        )
    return "\n".join(lines)


VALGRIND = ("valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null")


async def _proxy_instructions(calls: int, extra: list[str], tmp: Path) -> int:
    """Instructions of one stdio proxy process (cachegrind, user space) over `calls` calls."""
    policy = tmp / "policy.json"
    policy.write_text(json.dumps(POLICY), encoding="utf-8")
    server = [sys.executable, str(Path(__file__).resolve()), "_server"]
    log = tmp / f"cachegrind-{calls}.log"
    proxy = [*VALGRIND, f"--log-file={log}", sys.executable, "-m", "agentfsm", "mcp-proxy"]
    async with _stdio([*proxy, "--policy", str(policy), *extra, "--", *server]) as call:
        for _ in range(calls):
            await call()
    # The session closed; the proxy exits and valgrind writes its summary.
    for _ in range(600):
        found = re.search(r"I\s+refs:\s+([\d,]+)", log.read_text(encoding="utf-8"))
        if found:
            return int(found.group(1).replace(",", ""))
        await asyncio.sleep(0.1)
    raise SystemExit(f"cachegrind wrote no count: {log}")


def instructions(tmp: Path) -> None:
    """The stdio proxy's instructions per call, without and with a trace:
    (600 calls - 100 calls) / 500, so start-up and imports cancel."""
    for name, extra in (("stdio", []), ("stdio --trace", ["--trace", str(tmp / "t.jsonl")])):
        few, many = (asyncio.run(_proxy_instructions(n, extra, tmp)) for n in (100, 600))
        print(f"| proxy, {name} | {(many - few) / 500:,.0f} |")


def relay() -> None:
    """The floor of any stdio proxy in Python: an asyncio relay of lines between this
    process's stdin/stdout and a server child (`argv`), each line parsed and written again
    with `json`, and nothing else (no ids, no policy)."""

    async def run(argv: list[str]) -> None:
        loop = asyncio.get_running_loop()
        host = asyncio.StreamReader()
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(host), sys.stdin.buffer)
        child = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
        )
        assert child.stdin is not None
        assert child.stdout is not None
        to_server, from_server = child.stdin, child.stdout

        async def up() -> None:
            while line := await host.readline():
                to_server.write(json.dumps(json.loads(line)).encode() + b"\n")
                await to_server.drain()
            to_server.close()

        async def down() -> None:
            while line := await from_server.readline():
                sys.stdout.buffer.write(json.dumps(json.loads(line)).encode() + b"\n")
                sys.stdout.buffer.flush()

        await asyncio.gather(up(), down())

    asyncio.run(run(sys.argv[2:]))


def main() -> None:
    if sys.argv[1:2] == ["_relay"]:
        relay()
        return
    if sys.argv[1:2] == ["_server"]:
        if len(sys.argv) > 2:
            serve_http(int(sys.argv[2]))
        else:
            serve_stdio()
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000, help="timed calls per variant")
    parser.add_argument("--block", type=int, default=100, help="calls per variant per round")
    parser.add_argument("--warm", type=int, default=200, help="untimed calls per variant first")
    parser.add_argument(
        "--sessions", type=int, nargs="*", default=[1, 8], help="HTTP host sessions (none: no HTTP)"
    )
    parser.add_argument("--json", metavar="FILE", help="write the figures as JSON too")
    parser.add_argument(
        "--base", metavar="DIR", help="time another checkout's stdio proxy beside this one's"
    )
    parser.add_argument(
        "--instructions", action="store_true", help="count the stdio proxy's instructions instead"
    )
    args = parser.parse_args()
    if args.instructions:
        with tempfile.TemporaryDirectory() as tmp:
            instructions(Path(tmp))
        return
    with tempfile.TemporaryDirectory() as tmp:
        result = asyncio.run(measure(args, Path(tmp)))
    print(_table(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
