"""Remembered approvals through `agentfsm mcp-proxy`, end to end: the elicitation form offers
the scopes, a host that cannot elicit is given approvals in a file the proxy watches, and a
tool that changed is never covered. Real host session, real proxy and server processes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import mcp.types as mt

from agentfsm.integrations.mcp._approvals import remember_of
from tests.cli.test_mcp_proxy import Elicit, Proxy, replayed, run, text


def remembering(choice: str | None, asked: list[dict[str, Any]]) -> Elicit:
    """An elicitation callback that approves every call, remembering it for `choice`."""

    async def elicit(context: Any, params: Any) -> mt.ElicitResult:
        asked.append({"message": params.message, "schema": params.requested_schema})
        content: dict[str, Any] = {"approve": True}
        if choice is not None:
            content["remember"] = choice
        return mt.ElicitResult(action="accept", content=content)

    return elicit


def events(trace: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in trace.read_text(encoding="utf-8").splitlines()]


ASK_DROP = {"permissions": {"drop_table": "ask", "read_row": "ask", "mutate": "allow"}}


class TestElicitedScopes:
    def test_the_form_offers_the_scopes_and_a_session_answer_holds(self, tmp_path: Path) -> None:
        """`session` covers the same call later in the session: asked once, run twice, the
        decision says which approval covered it, and the trace replays without a difference."""
        proxy = Proxy(tmp_path, ASK_DROP)
        asked: list[dict[str, Any]] = []
        first, second, other = proxy.call(
            ("drop_table", {"table": "users"}),
            ("drop_table", {"table": "users"}),
            ("drop_table", {"table": "orders"}),
            elicit=remembering("session", asked),
        )
        assert not first.is_error
        assert not second.is_error
        assert not other.is_error
        assert len(asked) == 2  # users once, orders (other arguments) once
        offered = asked[0]["schema"]["properties"]["remember"]["enum"]
        assert offered == ["once", "uses=10", "seconds=3600", "session", "tool"]
        covered = [
            e for e in events(proxy.trace) if e.get("event") == "decision" and "covered" in e
        ]
        assert len(covered) == 1
        assert replayed(proxy.trace)["exit_reason"] == "completed"

    def test_once_asks_every_time(self, tmp_path: Path) -> None:
        """Without a scope (or `once`) the same call is asked again."""
        proxy = Proxy(tmp_path, ASK_DROP)
        asked: list[dict[str, Any]] = []
        proxy.call(
            ("drop_table", {"table": "users"}),
            ("drop_table", {"table": "users"}),
            elicit=remembering("once", asked),
        )
        assert len(asked) == 2

    def test_a_changed_tool_is_never_covered(self, tmp_path: Path) -> None:
        """`tool` covers any read_row call until the server redefines read_row: then it asks."""
        proxy = Proxy(tmp_path, ASK_DROP)
        asked: list[dict[str, Any]] = []
        results = proxy.call(
            ("read_row", {"key": "a"}),
            ("read_row", {"key": "b"}),
            ("mutate", {}),
            ("read_row", {"key": "c"}),
            elicit=remembering("tool", asked),
        )
        assert [r.is_error for r in results] == [False, False, False, False]
        assert [a["message"].split(" with ")[0] for a in asked] == [
            "Run tool read_row",
            "Run tool read_row",
        ]
        assert "changed" in asked[1]["message"] or "c" in asked[1]["message"]


class TestApprovalsFile:
    def test_a_host_that_cannot_elicit_runs_what_the_file_approves(self, tmp_path: Path) -> None:
        """The file's approval (1 use, exact arguments) runs one call; then the host is told
        nobody can be asked, and names the file; the grant is in the trace."""
        approvals = tmp_path / "approvals.json"
        entry = {"tool": "drop_table", "arguments": {"table": "users"}, "scope": "uses=1"}
        approvals.write_text(json.dumps({"approvals": [entry]}), encoding="utf-8")
        proxy = Proxy(tmp_path, ASK_DROP, "--approvals", str(approvals))
        first, again, other = proxy.call(
            ("drop_table", {"table": "users"}),
            ("drop_table", {"table": "users"}),
            ("drop_table", {"table": "orders"}),
        )
        assert not first.is_error
        assert again.is_error
        assert "--approvals FILE" in text(again)
        assert other.is_error
        assert proxy.calls() == ['drop_table:{"table": "users"}']
        names = [e["event"] for e in events(proxy.trace)]
        assert "approval_granted" in names
        assert replayed(proxy.trace)["exit_reason"] == "completed"

    def test_the_file_is_read_again_when_it_changes(self, tmp_path: Path) -> None:
        """An entry added mid-session holds from the next call; removed, it is revoked."""
        approvals = tmp_path / "approvals.toml"
        approvals.write_text("approvals = []\n", encoding="utf-8")
        proxy = Proxy(tmp_path, ASK_DROP, "--approvals", str(approvals))

        async def go() -> list[bool]:
            async with proxy.session() as host:
                before = await host.call_tool("read_row", {"key": "a"})
                entry = '{tool = "read_row", pattern = "key=*", scope = "conversation"}'
                approvals.write_text(f"approvals = [{entry}]\n", encoding="utf-8")
                during = await host.call_tool("read_row", {"key": "b"})
                approvals.write_text("approvals = []\n# emptied\n", encoding="utf-8")
                after = await host.call_tool("read_row", {"key": "c"})
                return [before.is_error, during.is_error, after.is_error]

        assert run(go) == [True, False, True]
        names = [e["event"] for e in events(proxy.trace)]
        assert "approval_revoked" in names

    def test_an_unreadable_file_grants_nothing(self, tmp_path: Path) -> None:
        """A file that is not an approvals list holds nothing, and the trace says why."""
        approvals = tmp_path / "approvals.json"
        approvals.write_text("{not json", encoding="utf-8")
        proxy = Proxy(tmp_path, ASK_DROP, "--approvals", str(approvals))
        (result,) = proxy.call(("drop_table", {"table": "users"}))
        assert result.is_error
        assert "cannot be read" in proxy.trace.read_text(encoding="utf-8")


class TestFormAnswers:
    def test_only_an_offered_choice_remembers(self) -> None:
        """A choice the form did not offer (or none) remembers nothing: it never widens."""
        assert remember_of({"approve": True, "remember": "session"}) == "conversation"
        assert remember_of({"approve": True, "remember": "tool"}) == {
            "scope": "conversation",
            "pattern": "*",
        }
        for odd in ("forever", "deployment", 1, None, ["tool"]):
            assert remember_of({"approve": True, "remember": odd}) is None
        assert remember_of({"approve": True}) is None
