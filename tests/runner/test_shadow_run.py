"""`af.run` and `af.arun` with a shadow policy: recorded beside the enforced one, never enforced."""

from __future__ import annotations

import asyncio
from pathlib import Path

import agentfsm as af
from agentfsm.testing.scripted import Reply, ScriptedCall, say
from agentfsm.testing.server import ScriptedServer
from tests.conftest import LITELLM_CLIENT
from tests.runner.conftest import scripted_arun, scripted_run


def _script() -> list[Reply]:
    return [
        Reply(
            tool_calls=[
                ScriptedCall(name="read", arguments={"path": "a"}, id="r1"),
                ScriptedCall(name="rm", arguments={"path": "a"}, id="m1"),
            ]
        ),
        say("done"),
    ]


def read_and_rm(ran: list[str]) -> list[object]:
    """Two tools that log what ran into `ran`: `read(path)` and `rm(path)`."""

    def read(path: str) -> str:
        """Read a file."""
        ran.append(f"read {path}")
        return "text"

    def rm(path: str) -> str:
        """Remove a file."""
        ran.append(f"rm {path}")
        return "removed"

    return [read, rm]


POLICY = af.Policy(permission_rules=["deny rm"])
SHADOW = {"permission_rules": ["deny read", "ask rm"]}


class TestShadowInTheRunner:
    pytestmark = LITELLM_CLIENT

    def test_the_run_is_unchanged_and_records_the_shadow(self, tmp_path: Path) -> None:
        """The shadowed run executes what the unshadowed one does; decisions and trace record it."""
        runs = []
        for shadow in (None, SHADOW):
            ran: list[str] = []
            with ScriptedServer(_script()) as server:
                result = scripted_run(
                    server,
                    "go",
                    tools=read_and_rm(ran),
                    policy=POLICY,
                    shadow=shadow,
                    trace=tmp_path / f"{shadow is None}.jsonl",
                )
            runs.append((ran, result))
        (plain_ran, plain), (shadow_ran, shadowed) = runs
        assert plain_ran == shadow_ran == ["read a"]
        assert shadowed.exit_reason is plain.exit_reason is af.ExitReason.COMPLETED
        assert shadowed.messages == plain.messages
        assert all(d.shadow == () for d in plain.decisions)
        verdicts = {(v.tool, v.enforced, v.shadow) for d in shadowed.decisions for v in d.shadow}
        assert verdicts == {("read", "allow", "deny"), ("rm", "deny", "ask")}
        traced = [e for e in af.read_trace(tmp_path / "False.jsonl") if e["event"] == "decision"]
        assert [v["tool"] for v in traced[0]["shadow"]] == ["read", "rm"]

    def test_arun_records_the_shadow_too(self) -> None:
        """`arun` takes `shadow=` as `run` does."""
        ran: list[str] = []
        with ScriptedServer(_script()) as server:
            result = asyncio.run(
                scripted_arun(server, "go", tools=read_and_rm(ran), policy=POLICY, shadow=SHADOW)
            )
        assert ran == ["read a"]
        assert [v.shadow for v in result.decisions[0].shadow] == ["deny", "ask"]
