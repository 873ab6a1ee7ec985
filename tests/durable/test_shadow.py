"""A durable agent with a shadow policy: each run's decisions record it, and it runs what the
policy alone would run; and one whose policy has a Cedar source. DBOS runs in this test
process, on SQLite."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

import agentfsm as af
from agentfsm import durable
from agentfsm.durable._registry import register
from agentfsm.testing import ScriptedServer
from agentfsm.testing.scripted import Reply, call, say, tool_calls
from tests.conftest import LITELLM_CLIENT
from tests.durable.conftest import database
from tests.runner.test_shadow_run import read_and_rm

pytestmark = [pytest.mark.xdist_group("dbos-in-process"), *LITELLM_CLIENT]


def model(body: Mapping[str, Any]) -> Reply:
    """Read a file and remove one in one turn; once answered, say so."""
    if any(m.get("role") == "tool" for m in body.get("messages") or []):
        return say("done")
    return tool_calls(call("read", {"path": "a"}, id="r1"), call("rm", {"path": "a"}, id="m1"))


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """DBOS launched in this process on a fresh SQLite database."""
    url = database("sqlite", tmp_path_factory.mktemp("shadow"))
    durable.launch([durable.DurableAgent("placeholder", "openai/scripted")], database_url=url)
    try:
        yield url
    finally:
        durable.shutdown()


def test_a_durable_run_records_the_shadow_and_runs_what_the_policy_allows(
    db: str, tmp_path: Path
) -> None:
    """The run's decisions hold each call's shadow verdict; only the allowed call ran."""
    ran: list[str] = []

    with ScriptedServer([model] * 4) as server:
        agent = durable.DurableAgent(
            "shadowed",
            "openai/scripted",
            tools=read_and_rm(ran),
            policy=af.Policy(permission_rules=["deny rm"]),
            shadow={"permission_rules": ["deny read"]},
            api_base=server.openai_base,
            api_key="sk-local",
        )
        register([agent])
        done = durable.result(durable.start(agent, "tidy"), timeout=60)
    assert done.exit_reason is af.ExitReason.COMPLETED
    assert ran == ["read a"]
    verdicts = [(v.tool, v.enforced, v.shadow) for d in done.decisions for v in d.shadow]
    assert verdicts == [("read", "allow", "deny"), ("rm", "deny", "allow")]


@pytest.mark.needs("cedarpy")
def test_a_durable_run_under_a_cedar_source_runs_only_what_cedar_permits(db: str) -> None:
    """The policy crosses into the durable workflow with its Cedar text: the forbidden call
    never runs, and the shadow (the same Cedar) reads the run's history too."""
    ran: list[str] = []

    cedar = """
permit(principal, action, resource);
@id("no-rm") forbid(principal, action, resource == Tool::"rm") when { context.history.turn >= 0 };
"""
    with ScriptedServer([model] * 4) as server:
        agent = durable.DurableAgent(
            "cedar",
            "openai/scripted",
            tools=read_and_rm(ran),
            policy=af.Policy(cedar=cedar),
            shadow=af.Policy(cedar=cedar),
            api_base=server.openai_base,
            api_key="sk-local",
        )
        register([agent])
        done = durable.result(durable.start(agent, "tidy"), timeout=60)
    assert done.exit_reason is af.ExitReason.COMPLETED
    assert ran == ["read a"]
    verdicts = [(v.tool, v.enforced, v.shadow) for d in done.decisions for v in d.shadow]
    assert verdicts == [("read", "allow", "allow"), ("rm", "deny", "deny")]
    assert all("no-rm" in v.source for d in done.decisions for v in d.shadow if v.tool == "rm")
