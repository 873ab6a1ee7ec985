"""`agentfsm mcp-proxy` with a host of each MCP revision the `mcp` package speaks: the
handshake revisions (the host's `initialize`, the revision the server agrees) and the
stateless one (an envelope in every request, asks answered by the host sending the call
again). Every host is the package's own client, through the real proxy process."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, cast

import mcp.types as mt
import mcp_types.version as versions
import pytest
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters

from agentfsm.integrations.mcp import _revisions
from tests.cli.test_mcp_proxy import ENV, SERVER, Elicit, Proxy, answering, replayed, run, text
from tests.cli.test_mcp_proxy_http import HttpProxy
from tests.cli.test_mcp_proxy_ids import call, logged, proxied, result_of

ASK_DROP = {"permissions": {"drop_table": "ask", "read_row": "allow"}}


class TestModelledRevisions:
    def test_the_proxy_models_every_revision_the_mcp_package_speaks(self) -> None:
        """A new revision in the package fails here until the proxy models it."""
        assert _revisions.KNOWN == versions.KNOWN_PROTOCOL_VERSIONS
        assert _revisions.HANDSHAKE == versions.HANDSHAKE_PROTOCOL_VERSIONS
        assert _revisions.STATELESS == versions.MODERN_PROTOCOL_VERSIONS


class TestHandshakeRevisions:
    @pytest.mark.parametrize("version", ["2025-06-18", "2025-11-25"])
    def test_a_revision_with_elicitation_asks_the_host(
        self, tmp_path: Path, version: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Under a revision that has elicitation, an `ask` reaches the host; its yes runs the call
        and its no does not."""
        monkeypatch.setitem(ENV, "MCP_PROXY_TEST_VERSION", version)
        proxy = Proxy(tmp_path, ASK_DROP)
        asked: list[str] = []
        (yes,) = proxy.call(("drop_table", {"table": "a"}), elicit=answering("accept", True, asked))
        (no,) = proxy.call(("drop_table", {"table": "b"}), elicit=answering("decline", None, asked))
        assert not yes.is_error, text(yes)
        assert no.is_error
        assert "not approved" in text(no)
        assert len(asked) == 2
        assert proxy.calls() == ['drop_table:{"table": "a"}']

    @pytest.mark.parametrize("version", ["2024-11-05", "2025-03-26"])
    def test_a_revision_without_elicitation_asks_nobody(
        self, tmp_path: Path, version: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A host that declares elicitation under a revision that has none is not asked: the
        call is refused saying why, and never reaches the server."""
        monkeypatch.setitem(ENV, "MCP_PROXY_TEST_VERSION", version)
        proxy = Proxy(tmp_path, ASK_DROP)
        asked: list[str] = []
        (refused, read) = proxy.call(
            ("drop_table", {"table": "a"}),
            ("read_row", {"key": "k"}),
            elicit=answering("accept", True, asked),
        )
        assert refused.is_error
        assert f"MCP revision {version}" in text(refused)
        assert "nobody was asked" in text(refused)
        assert asked == []
        assert text(read) == "row k"
        assert proxy.calls() == ['read_row:{"key": "k"}']


def stateless(
    proxy: Proxy,
    work: Callable[[Client], Awaitable[Any]],
    elicit: Elicit | None = None,
    mode: str = "2026-07-28",
) -> Any:
    """`work` done by a host of the stateless revision (the package's `Client` pinned to it,
    or in `auto` mode) through the proxy on stdio."""
    params = StdioServerParameters(command=sys.executable, args=proxy.args, env=ENV)

    async def go() -> Any:
        async with Client(
            params, mode=cast(Any, mode), elicitation_callback=cast(Any, elicit)
        ) as host:
            assert host.protocol_version == "2026-07-28"
            return await work(host)

    return run(go)


class TestStatelessRevision:
    @pytest.mark.parametrize("mode", ["2026-07-28", "auto"])
    def test_an_ask_reaches_a_host_that_declares_elicitation(
        self, tmp_path: Path, mode: str
    ) -> None:
        """A stateless host that declares elicitation on its call is asked (by an
        InputRequiredResult); its yes runs the call, its no does not, and listing works."""
        proxy = Proxy(tmp_path, ASK_DROP)
        asked: list[str] = []

        async def work(host: Client) -> list[mt.CallToolResult]:
            listed = await host.list_tools()
            assert "drop_table" in [t.name for t in listed.tools]
            return [
                await host.call_tool("drop_table", {"table": "a"}),
                await host.call_tool("read_row", {"key": "k"}),
            ]

        yes, read = stateless(proxy, work, answering("accept", True, asked), mode)
        assert not yes.is_error, text(yes)
        assert text(yes) == "dropped a"
        assert text(read) == "row k"
        assert len(asked) == 1
        assert "drop_table" in asked[0]

        def declined(host: Client) -> Awaitable[mt.CallToolResult]:
            return host.call_tool("drop_table", {"table": "b"})

        no = stateless(proxy, declined, answering("decline", None), mode)
        assert no.is_error
        assert "not approved" in text(no)
        assert proxy.calls() == ['drop_table:{"table": "a"}', 'read_row:{"key": "k"}']

    def test_a_host_that_declares_nothing_gets_the_cannot_ask_refusal(self, tmp_path: Path) -> None:
        """A stateless call that declares no elicitation is refused as unaskable, not run."""
        proxy = Proxy(tmp_path, ASK_DROP)

        def work(host: Client) -> Awaitable[mt.CallToolResult]:
            return host.call_tool("drop_table", {"table": "a"})

        refused = stateless(proxy, work)
        assert refused.is_error
        assert "nobody was asked" in text(refused)
        assert "declared no MCP elicitation capability in its _meta" in text(refused)
        assert proxy.calls() == []

    def test_an_answer_for_another_call_or_a_forged_state_approves_nothing(
        self, tmp_path: Path
    ) -> None:
        """The host's retry must be the asked call: a yes sent with other arguments denies it,
        and a requestState the proxy never issued is refused."""
        proxy = Proxy(tmp_path, ASK_DROP)
        yes = {_revisions.APPROVAL_KEY: mt.ElicitResult(action="accept", content={"approve": True})}

        async def work(host: Client) -> tuple[Any, Any]:
            first = await host.session.call_tool(
                "drop_table", {"table": "a"}, allow_input_required=True
            )
            assert isinstance(first, mt.InputRequiredResult)
            assert first.request_state is not None
            swapped = await host.session.call_tool(
                "drop_table",
                {"table": "everything"},
                input_responses=cast(Any, yes),
                request_state=first.request_state,
                allow_input_required=True,
            )
            try:
                await host.session.call_tool(
                    "drop_table",
                    {"table": "a"},
                    input_responses=cast(Any, yes),
                    request_state="forged",
                    allow_input_required=True,
                )
            except Exception as exc:  # the proxy answers with a JSON-RPC error
                return swapped, exc
            return swapped, None

        swapped, forged = stateless(proxy, work, answering("accept", True))
        assert swapped.is_error
        assert "not approved" in text(swapped)
        assert forged is not None
        assert "requestState" in str(forged)
        assert proxy.calls() == []


def test_trace_of_a_stateless_session_replays(tmp_path: Path) -> None:
    """The trace of a stateless session (an approved ask, a refused one) replays with
    `agentfsm replay` to the same decisions, and ends completed when the host leaves."""
    proxy = Proxy(tmp_path, ASK_DROP)

    async def work(host: Client) -> None:
        await host.call_tool("drop_table", {"table": "a"})
        await host.call_tool("drop_table", {"table": "b"})

    calls = iter([True, False])

    async def elicit(context: Any, params: Any) -> mt.ElicitResult:
        return mt.ElicitResult(action="accept", content={"approve": next(calls)})

    stateless(proxy, work, elicit)
    record = replayed(proxy.trace)  # no divergence
    assert record["recorded_end"] == record["exit_reason"] == "completed"
    actions = [d["action"] for d in record["decisions"]]
    assert actions == ["ask_human", "execute_tools", "continue", "ask_human", "continue", "final"]
    assert proxy.calls() == ['drop_table:{"table": "a"}']


class TestStatelessOverHttp:
    @pytest.mark.parametrize("mode", ["2026-07-28", "auto"])
    def test_an_ask_reaches_a_stateless_host_by_url(self, tmp_path: Path, mode: str) -> None:
        """A stateless host by URL (one POST a request, no session) is asked through its
        retry: its yes runs the call, its no does not; a host that declares nothing is
        refused as unaskable; all of it one session in one trace that replays."""
        proxy = HttpProxy(tmp_path, ASK_DROP)

        async def one(url: str, elicit: Elicit | None, table: str) -> mt.CallToolResult:
            async with Client(
                url, mode=cast(Any, mode), elicitation_callback=cast(Any, elicit)
            ) as host:
                assert host.protocol_version == "2026-07-28"
                assert "drop_table" in [t.name for t in (await host.list_tools()).tools]
                return await host.call_tool("drop_table", {"table": table})

        async def go(url: str) -> list[mt.CallToolResult]:
            return [
                await one(url, answering("accept", True), "a"),
                await one(url, answering("decline", None), "b"),
                await one(url, None, "c"),
            ]

        with proxy.running():
            yes, no, unaskable = run(lambda: go(proxy.url))
        assert proxy.status == 0
        assert text(yes) == "dropped a"
        assert no.is_error
        assert "not approved" in text(no)
        assert unaskable.is_error
        assert "nobody was asked" in text(unaskable)
        assert proxy.calls() == ['drop_table:{"table": "a"}']
        (trace,) = tmp_path.glob("trace.stateless-*.jsonl")
        record = replayed(trace)
        assert record["exit_reason"] == "interrupted"  # the proxy shut down under it

    def test_two_hosts_with_the_same_ids_get_their_own_answers(self, tmp_path: Path) -> None:
        """Stateless hosts choose their ids: two at once under the same ids each get their
        own call's answer."""
        proxy = HttpProxy(tmp_path, {"permissions": {"read_row": "allow"}})

        async def one(url: str, key: str) -> str:
            async with Client(url, mode="2026-07-28") as host:
                return text(await host.call_tool("read_row", {"key": key}))

        async def go(url: str) -> list[str]:
            return list(await asyncio.gather(*(one(url, str(n)) for n in range(4))))

        with proxy.running():
            said = run(lambda: go(proxy.url))
        assert said == [f"row {n}" for n in range(4)]


def _envelope(version: str, capabilities: Any) -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": version,
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    }


class TestFailClosed:
    """What the proxy does not fully model of a revision is refused, never allowed."""

    @pytest.mark.parametrize(
        ("meta", "said"),
        [
            (_envelope("2099-01-01", {"elicitation": {}}), "which the proxy does not serve"),
            (
                _envelope("2026-07-28", "everything"),
                "capabilities (in its _meta) are not an object",
            ),
        ],
    )
    def test_an_envelope_the_proxy_does_not_model_is_refused(
        self, tmp_path: Path, meta: dict[str, Any], said: str
    ) -> None:
        """An unknown revision or malformed capabilities: the call is an error, never run."""
        with proxied(tmp_path, ASK_DROP, SERVER) as (host, log, _):
            params = {"name": "drop_table", "arguments": {"table": "a"}, "_meta": meta}
            host.send({"id": 7, "method": "tools/call", "params": params})
            (answer,) = [host.wait_for(lambda m: m.get("id") == 7)]
            assert answer["error"]["code"] == -32602
            assert said in answer["error"]["message"]
        assert logged(log) == []

    def test_a_session_does_not_mix_the_two_eras(self, tmp_path: Path) -> None:
        """After `initialize`, a request with a stateless envelope (declaring elicitation) is
        refused; the initialized session goes on."""
        with proxied(tmp_path, ASK_DROP, SERVER) as (host, log, _):
            host.start(elicit=False)
            params = {
                "name": "drop_table",
                "arguments": {"table": "a"},
                "_meta": _envelope("2026-07-28", {"elicitation": {}}),
            }
            host.send({"id": 8, "method": "tools/call", "params": params})
            answer = host.wait_for(lambda m: m.get("id") == 8)
            assert answer["error"]["code"] == -32600
            assert "stateless request in an initialized session" in answer["error"]["message"]
            call(host, 9, "read_row", {"key": "k"})
            assert result_of(host, 9)["content"][0]["text"] == "row k"
        assert logged(log) == ['read_row:{"key": "k"}']
