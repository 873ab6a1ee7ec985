"""`agentfsm mcp-proxy --shadow FILE`, end to end: a real host session, the proxy process and a
real server process. The shadow is recorded in the trace and never enforced."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.cli.test_mcp_proxy import Proxy, proxy_exits, replayed, text

POLICY = {"permissions": {"drop_table": "deny"}}
SHADOW = {"permissions": {"drop_table": "allow", "read_row": "deny"}}


def shadowed(tmp_path: Path, shadow: dict[str, Any] = SHADOW) -> Proxy:
    path = tmp_path / "shadow.json"
    path.write_text(json.dumps(shadow), encoding="utf-8")
    return Proxy(tmp_path, POLICY, "--shadow", str(path))


def decisions(trace: Path) -> list[dict[str, Any]]:
    events = [json.loads(line) for line in trace.read_text(encoding="utf-8").splitlines()]
    return [e for e in events if e.get("event") == "decision"]


class TestShadowProxy:
    def test_the_shadow_is_recorded_and_never_enforced(self, tmp_path: Path) -> None:
        """The server gets exactly what --policy allows; the trace holds the shadow's verdicts."""
        proxy = shadowed(tmp_path)
        denied, allowed = proxy.call(("drop_table", {"table": "users"}), ("read_row", {"key": "a"}))
        assert denied.is_error
        assert "denied" in text(denied)
        assert text(allowed) == "row a"
        assert proxy.calls() == ['read_row:{"key": "a"}']
        verdicts = [
            (v["tool"], v["enforced"], v["shadow"])
            for d in decisions(proxy.trace)
            for v in d.get("shadow", ())
        ]
        assert verdicts == [("drop_table", "deny", "allow"), ("read_row", "allow", "deny")]
        started = json.loads(proxy.trace.read_text(encoding="utf-8").splitlines()[1])
        assert started["event"] == "run_started"
        assert started["shadow"]["permissions"] == SHADOW["permissions"]
        record = replayed(proxy.trace)  # `agentfsm replay --json` shows where it differed
        assert record["shadow"]["by_transition"] == {"allow->deny": 1, "deny->allow": 1}

    def test_without_shadow_the_trace_has_none(self, tmp_path: Path) -> None:
        """Without --shadow no decision carries a shadow record."""
        proxy = Proxy(tmp_path, POLICY)
        proxy.call(("read_row", {"key": "a"}))
        assert all("shadow" not in d for d in decisions(proxy.trace))

    def test_a_bad_shadow_file_is_refused_naming_it(self, tmp_path: Path) -> None:
        """A shadow file that cannot be read exits 2 naming --shadow."""
        (tmp_path / "bad.json").write_text('{"permission_rules": ["maybe x"]}', encoding="utf-8")
        done = proxy_exits(tmp_path, "--shadow", "bad.json", "--", "true")
        assert done.returncode == 2
        assert "--shadow" in done.stderr
