"""A shadow policy with a Cedar source reads the run's history, as an enforced one does."""

from __future__ import annotations

import pytest

import agentfsm as af

pytest.importorskip("cedarpy", reason="the cedar extra (make install installs it)")

CEDAR = """
permit(principal, action, resource);
@id("one-rm") forbid(principal, action, resource == Tool::"rm")
  when { context.history.calls >= 1 };
"""


def _rm(turn: int) -> af.ModelTurn:
    return af.ModelTurn(tool_calls=[af.ToolCall(id=f"c{turn}", name="rm", arguments={})])


@pytest.mark.parametrize("where", ["shadow", "policy"])
def test_the_history_reaches_cedar(where: str) -> None:
    """The first rm is allowed (no call ran yet), the second forbidden by `one-rm`; with no
    history given, Cedar's reading of it would error and deny both."""
    cedar = af.Policy(cedar=CEDAR)
    ctl = (
        af.Controller(af.Policy(), shadow=cedar)
        if where == "shadow"
        else af.Controller(cedar, shadow=af.Policy())
    )
    first = ctl.on_model_output(_rm(1))
    ctl.on_tool_results([af.ToolResult(call_id="c1", content="ok")])
    second = ctl.on_model_output(_rm(2))
    said = [(d.shadow[0].enforced, d.shadow[0].shadow) for d in (first, second)]
    if where == "shadow":
        assert said == [("allow", "allow"), ("allow", "deny")]
        assert "one-rm" in second.shadow[0].source
    else:
        assert said == [("allow", "allow"), ("deny", "allow")]
        assert "one-rm" in second.shadow[0].enforced_source
