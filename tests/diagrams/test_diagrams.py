"""Diagrams are generated from the route table the controller runs, so they cannot drift."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import ClassVar

import pytest

from agentfsm import Policy, State
from agentfsm._diagrams import Overlay, dot, edge_label, mermaid, render
from agentfsm._engine.routes import Route
from agentfsm.exceptions import AgentFSMError, DefinitionError
from agentfsm.guards import MaxTurns, Otherwise, RepeatedCall

REPO = Path(__file__).resolve().parents[2]


def mermaid_text(label: str) -> str:
    """A label as Mermaid can hold it: ':' ends a label, ';' a statement, '#' starts an entity."""
    return label.replace(":", " -").replace(";", ",").replace("#", "no.")


def transition(src: str, dst: str, guard: str) -> dict[str, str]:
    return {"event": "transition", "src": src, "dst": dst, "guard": guard}


class TestEdgeLabel:
    def test_a_guarded_route_shows_priority_and_guard(self) -> None:
        """A guarded edge reads `P6 RepeatedCall(3)`."""
        assert edge_label(Route(State.VALIDATE, RepeatedCall(3), State.END)) == "P6 RepeatedCall(3)"

    def test_a_fallback_shows_its_reason(self) -> None:
        """A fallback edge reads `P4 otherwise: <reason>`."""
        route = Route(State.VERIFY, Otherwise("the answer is not final", "P4"), State.BUDGET_CHECK)
        assert edge_label(route) == "P4 otherwise: the answer is not final"


class TestMermaid:
    def test_every_state_is_drawn(self) -> None:
        """Each State is declared once, under its name."""
        text = mermaid(Policy().routes)
        assert text.startswith("stateDiagram-v2\n")
        for state in State:
            assert f'state "{state.value}" as {state.name}' in text

    def test_every_route_is_labelled(self) -> None:
        """Every route's edge appears with its label on the line of its source and destination."""
        table = Policy().routes
        lines = mermaid(table).splitlines()
        for route in table:
            prefix = f"    {route.source.name} --> {route.dest.name}: "
            edge = next(line for line in lines if line.startswith(prefix))
            assert mermaid_text(edge_label(route)) in edge[len(prefix) :].split("<br/>"), route

    def test_the_start_and_end_are_marked(self) -> None:
        """The diagram starts at await_model and ends at end."""
        text = mermaid(Policy().routes)
        assert "[*] --> AWAIT_MODEL" in text
        assert "END --> [*]" in text

    def test_the_policy_shows_in_the_labels(self) -> None:
        """A policy's own limits label its edges."""
        assert "P6 MaxTurns(7)" in mermaid(Policy(max_turns=7).routes)
        assert "P6 MaxTurns(7)" not in mermaid(Policy().routes)


class TestDot:
    def test_every_state_and_route_is_drawn(self) -> None:
        """Each State is a node and every route's label is on its edge."""
        table = Policy().routes
        text = dot(table)
        assert text.startswith("digraph agentfsm {")
        for state in State:
            assert f"  {state.value} [" in text or f"  {state.value};" in text
        lines = text.splitlines()
        for route in table:
            prefix = f"  {route.source.value} -> {route.dest.value} ["
            edge = next(line for line in lines if line.startswith(prefix))
            labels = edge[len(prefix) :].removeprefix('label="').split('"')[0].split("\\n")
            assert edge_label(route) in labels, route

    def test_end_is_a_double_circle(self) -> None:
        """The terminal state is drawn with two peripheries."""
        assert "  end [peripheries=2" in dot(Policy().routes)

    def test_quotes_in_labels_are_escaped(self) -> None:
        """A reason with quotes does not break the DOT string."""
        table = Policy(guards=[MaxTurns(3) | Otherwise('say "hi"', "P6")]).routes
        assert """MaxTurns(3) | Otherwise('say \\"hi\\"', 'P6')""" in dot(table)


class TestCommittedDiagrams:
    @pytest.mark.parametrize(("name", "draw"), [("machine.mmd", mermaid), ("machine.dot", dot)])
    def test_the_committed_diagram_matches_the_route_table(self, name: str, draw: object) -> None:
        """diagrams/ holds exactly what the default route table draws now."""
        assert callable(draw)
        committed = (REPO / "diagrams" / name).read_text(encoding="utf-8")
        assert committed == draw(Policy().routes), (
            f"diagrams/{name} is stale: run `make diagrams` and commit the result"
        )


class TestOverlay:
    EVENTS: ClassVar[list[dict[str, str]]] = [
        {"event": "run_started"},
        transition("await_model", "parse", "Otherwise('a model output arrived', 'P1')"),
        transition("parse", "validate", "Otherwise('the output is well formed', 'P1')"),
        transition("validate", "budget_check", "HasToolCalls()"),
        transition("budget_check", "execute", "HasToolCalls()"),
        {"event": "decision"},
        transition("execute", "budget_check", "Otherwise('the tool results arrived', 'P1')"),
        transition("budget_check", "await_model", "ResultsReady()"),
        transition("await_model", "parse", "Otherwise('a model output arrived', 'P1')"),
    ]

    def test_counts_states_and_edges_from_transitions(self) -> None:
        """Every transition counts its edge and its destination; the first source counts once."""
        overlay = Overlay.from_events(self.EVENTS)
        assert overlay.states["await_model"] == 2
        assert overlay.states["parse"] == 2
        assert overlay.states["budget_check"] == 2
        assert overlay.states["execute"] == 1
        assert overlay.states["end"] == 0
        assert (
            overlay.edges[("await_model", "parse", "Otherwise('a model output arrived', 'P1')")]
            == 2
        )
        assert overlay.edges[("validate", "budget_check", "HasToolCalls()")] == 1

    def test_ignores_events_other_than_transitions(self) -> None:
        """Decisions and run starts do not count."""
        overlay = Overlay.from_events([{"event": "decision", "src": "x", "dst": "y", "guard": "g"}])
        assert not overlay.states
        assert not overlay.edges

    def test_mermaid_marks_visited_states_and_counts_edges(self) -> None:
        """Visited states show their count and a visited class; taken edges show theirs."""
        text = mermaid(Policy().routes, Overlay.from_events(self.EVENTS))
        assert 'state "await_model ×2" as AWAIT_MODEL' in text
        assert 'state "end" as END' in text
        assert "P1 HasToolCalls() ×1" in text
        assert "P1 ResultsReady() ×1" in text
        visited = next(line for line in text.splitlines() if line.endswith(" visited"))
        assert "EXECUTE" in visited
        assert "END" not in visited.split()[1].split(",")

    def test_dot_marks_visited_states_and_colours_taken_edges(self) -> None:
        """Visited nodes are filled with their count; taken edges are coloured."""
        text = dot(Policy().routes, Overlay.from_events(self.EVENTS))
        execute = next(line for line in text.splitlines() if line.startswith("  execute ["))
        assert "filled" in execute
        assert "×1" in execute
        taken = next(
            line for line in text.splitlines() if line.startswith("  budget_check -> execute")
        )
        assert "penwidth" in taken
        untaken = next(line for line in text.splitlines() if line.startswith("  verify -> end"))
        assert "penwidth" not in untaken

    def test_no_overlay_draws_no_counts(self) -> None:
        """Without an overlay there are no counts and no visited class."""
        text = mermaid(Policy().routes)
        assert "×" not in text
        assert "visited" not in text


class TestRender:
    def test_without_graphviz_the_error_says_how_to_install_it(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """With no `dot` on PATH, render raises AgentFSMError with install advice."""
        monkeypatch.setenv("PATH", str(tmp_path))
        with pytest.raises(AgentFSMError) as info:
            render(dot(Policy().routes), "svg")
        message = str(info.value)
        assert "apt-get install graphviz" in message
        assert "brew install graphviz" in message
        assert "--format mermaid" in message

    @pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz 'dot' is not installed")
    def test_with_graphviz_it_produces_svg(self) -> None:
        """With `dot` installed, render gives an SVG document naming the states."""
        svg = render(dot(Policy().routes), "svg").decode()
        assert "<svg" in svg
        assert "budget_check" in svg


class TestArguments:
    """The drawing functions name what they were given instead of failing inside."""

    @pytest.mark.parametrize("table", [None, "policy", {"max_turns": 3}, 3])
    def test_a_table_of_the_wrong_kind(self, table: object) -> None:
        """mermaid and dot draw a RouteTable or a Policy; anything else is a DefinitionError."""
        with pytest.raises(DefinitionError, match="draws a RouteTable"):
            mermaid(table)  # type: ignore[arg-type]
        with pytest.raises(DefinitionError, match="draws a RouteTable"):
            dot(table)  # type: ignore[arg-type]

    def test_a_policy_draws_its_own_table(self) -> None:
        """mermaid(policy) is mermaid(policy.routes)."""
        policy = Policy(max_turns=7)
        assert mermaid(policy) == mermaid(policy.routes)
        assert dot(policy) == dot(policy.routes)

    def test_an_overlay_of_the_wrong_kind(self) -> None:
        """An overlay that is not an Overlay is named."""
        with pytest.raises(DefinitionError, match="overlay must be an Overlay"):
            mermaid(Policy().routes, {"parse": 1})  # type: ignore[arg-type]

    def test_render_checks_source_and_format(self) -> None:
        """render(None, "svg") and render(dot, "pdf; rm") are refused before Graphviz runs."""
        with pytest.raises(DefinitionError, match="DOT source text"):
            render(None, "svg")  # type: ignore[arg-type]
        with pytest.raises(DefinitionError, match="is not one of svg, png"):
            render(dot(Policy().routes), "pdf; rm")

    def test_edge_label_takes_a_route(self) -> None:
        """edge_label(None) is a DefinitionError."""
        with pytest.raises(DefinitionError, match="takes a Route"):
            edge_label(None)  # type: ignore[arg-type]
