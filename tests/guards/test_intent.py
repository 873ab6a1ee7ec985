"""Loops by intent: the intent key of a call, the ladder's configuration and its guard."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import agentfsm as af
from agentfsm import ExitReason
from agentfsm.exceptions import PolicyError
from agentfsm.guards import LoopLadder, LoopRung, ToolLoops, intent_key
from agentfsm.testing import call, snapshot


def _same(name: str, a: dict[str, Any], b: dict[str, Any], **kinds: Any) -> bool:
    return intent_key(call(name, a), **kinds) == intent_key(call(name, b), **kinds)


class TestIntentKey:
    @pytest.mark.parametrize(
        ("name", "a", "b"),
        [
            ("search", {"q": "x", "limit": 5}, {"limit": 5, "q": "x"}),
            ("grep", {"pattern": "foo  bar "}, {"pattern": " foo bar"}),
            ("page", {"limit": 100}, {"limit": 100.0}),
            ("page", {"limit": 1e2}, {"limit": 100}),
            ("search", {"query": "asyncio timeout python"}, {"query": "Python asyncio  TIMEOUT"}),
            ("bash", {"command": "ls  -la src"}, {"command": "ls '-la' \"src\""}),
            ("bash", {"command": "git status;  git diff"}, {"command": "git status ;git diff"}),
            ("bash", {"command": "cat a|wc -l"}, {"command": "cat 'a' | wc  -l"}),
            ("nested", {"o": {"b": [1, " x"], "a": 2}}, {"o": {"a": 2.0, "b": [1.0, "x"]}}),
        ],
    )
    def test_paraphrases_share_a_key(self, name: str, a: dict[str, Any], b: dict[str, Any]) -> None:
        """Key order, whitespace, number spelling, query word order and shell quoting are one
        intent."""
        assert _same(name, a, b)

    @pytest.mark.parametrize(
        ("name", "a", "b"),
        [
            ("search", {"q": "x"}, {"q": "y"}),
            ("flag", {"on": True}, {"on": 1}),
            ("bash", {"command": "rm a"}, {"command": "rm b"}),
            ("bash", {"command": "ls -la"}, {"command": "ls -l"}),
            ("bash", {"command": "echo a > x"}, {"command": "echo a > y"}),
            ("bash", {"command": "DEBUG=1 make"}, {"command": "make"}),
            (
                "bash",
                {"command": "cat > a <<'E'\nx = 1\nE"},
                {"command": "cat > a <<'E'\nx = 2\nE"},
            ),
            ("write", {"text": "if x:\n    y()\n"}, {"text": "if x:\n  y()\n"}),
            ("grep", {"pattern": "a b"}, {"pattern": "b a"}),
        ],
    )
    def test_different_intents_differ(
        self, name: str, a: dict[str, Any], b: dict[str, Any]
    ) -> None:
        """Other values, true beside 1, other commands (another redirection target or heredoc
        text, another assignment before the name), re-indented code, and word order outside
        `words` arguments are other intents."""
        assert not _same(name, a, b)

    def test_another_tool_is_another_intent(self) -> None:
        """The tool's name is part of the key."""
        assert intent_key(call("a", {"x": 1})) != intent_key(call("b", {"x": 1}))

    def test_volatile_arguments_are_left_out(self) -> None:
        """A volatile argument never tells two calls apart, at any depth; others still do."""
        kinds: dict[str, Any] = {"volatile": frozenset({"offset", "request_id"})}
        assert _same("read", {"path": "a", "offset": 0}, {"path": "a", "offset": 400}, **kinds)
        assert _same(
            "q", {"o": {"request_id": 1, "x": 2}}, {"o": {"request_id": 9, "x": 2}}, **kinds
        )
        assert not _same("read", {"path": "a", "offset": 0}, {"path": "b", "offset": 0}, **kinds)
        assert not _same("read", {"path": "a", "offset": 0}, {"path": "a", "offset": 400})

    def test_a_script_the_reader_cannot_read_is_compared_as_text(self) -> None:
        """An unsure reading (a name known only at run time) never merges two scripts."""
        assert not _same("bash", {"command": "$X -rf a"}, {"command": "$Y -rf a"})
        assert _same("bash", {"command": "$X  -rf a"}, {"command": "$X -rf a"})

    def test_the_ladder_keys_by_its_tools_kinds(self) -> None:
        """A tool's own `volatile` and `words` apply to its calls, the ladder's to every tool."""
        ladder = LoopLadder(
            volatile=["trace"], tools={"read": ToolLoops(volatile=["offset"], words=["path"])}
        )
        a = call("read", {"path": "x y", "offset": 0, "trace": 1})
        b = call("read", {"path": "y x", "offset": 7, "trace": 2})
        assert ladder.key(a) == ladder.key(b)
        assert ladder.key(call("cat", {"path": "x", "offset": 0})) != ladder.key(
            call("cat", {"path": "x", "offset": 7})
        )


class TestLadder:
    def test_the_defaults(self) -> None:
        """`LoopLadder()` warns at 3, asks at 4 and stops at 5 calls of one intent in a row."""
        ladder = LoopLadder()
        assert [ladder.rung(["t"], n) for n in range(1, 7)] == [
            None,
            None,
            "warn",
            "ask",
            "stop",
            "stop",
        ]

    def test_a_tool_has_its_own_rungs_and_the_strictest_tool_of_a_round_counts(self) -> None:
        """A per-tool rung overrides the ladder's, 0 turns it off; a round of two tools takes
        the strongest rung either reaches."""
        ladder = LoopLadder(tools={"read": ToolLoops(warn=4, ask=0, stop=8)})
        assert [ladder.rung(["read"], n) for n in (3, 4, 7, 8)] == [None, "warn", "warn", "stop"]
        assert ladder.rung(["read", "bash"], 4) == "ask"

    @pytest.mark.parametrize(
        ("fields", "match"),
        [
            ({"warn": 1}, "warn = 1 would fire on every first call"),
            ({"warn": 4, "ask": 4}, "warn = 4 must come before ask = 4"),
            (
                {"tools": {"read": {"stop": 3}}},
                r"tools\['read'\]: ask = 4 must come before stop = 3",
            ),
            ({"tools": {"read": {"wran": 3}}}, "wran"),
            ({"stop": -1}, "stop"),
        ],
    )
    def test_a_ladder_that_cannot_escalate_is_refused(
        self, fields: dict[str, Any], match: str
    ) -> None:
        """A rung of 1, rungs out of order (the ladder's or a tool's after merging) and unknown
        keys are a PolicyError naming the field."""
        with pytest.raises(PolicyError, match="loops") as raised:
            af.Policy(loops=fields)
        assert raised.match(match)

    def test_a_policy_file_names_the_ladder_and_a_dump_loads_back(self, tmp_path: Path) -> None:
        """TOML `[loops]` with a per-tool table builds the ladder; `to_json` loads back equal."""
        path = tmp_path / "policy.toml"
        path.write_text(
            '[loops]\nwarn = 2\nask = 0\nvolatile = "request_id"\n'
            '[loops.tools.read_file]\nstop = 9\nvolatile = ["offset", "limit"]\n'
        )
        policy = af.Policy.from_file(path)
        assert policy.loops == LoopLadder(
            warn=2,
            ask=0,
            volatile=("request_id",),
            tools={"read_file": ToolLoops(stop=9, volatile=("offset", "limit"))},
        )
        assert af.Policy.from_mapping(policy.to_json()) == policy
        assert "loops" not in af.Policy().to_json()

    def test_true_is_the_default_ladder(self) -> None:
        """`loops=True` is `LoopLadder()`; the routes draw its rungs instead of RepeatedCall."""
        policy = af.Policy(loops=True)
        assert policy.loops == LoopLadder()
        codes = {route.code for route in policy.routes}
        assert {"LoopRung('stop')", "LoopRung('ask')"} <= codes
        assert not any(code.startswith("RepeatedCall") for code in codes)


class TestLoopRung:
    def test_stop_fires_at_the_stop_rung_and_says_how_to_go_on(self) -> None:
        """LoopRung('stop') ends DOOM_LOOP at the stop rung, with what to do next."""
        snap = snapshot(loop_rung="stop", repeat_streak=5, repeated='read({"p": "a"})')
        hit = LoopRung("stop")(snap)
        assert hit is not None
        assert hit.exit_reason is ExitReason.DOOM_LOOP
        assert hit.reason.startswith('read({"p": "a"}) would be the 5th call of the same intent')
        assert "to go on: send a user message" in hit.reason
        assert LoopRung("stop")(snapshot(loop_rung="ask", repeat_streak=4)) is None

    def test_ask_fires_at_the_ask_rung_only(self) -> None:
        """LoopRung('ask') fires at 'ask' (and 'stop', which its row never sees), not at 'warn'."""
        assert LoopRung("ask")(snapshot(loop_rung="ask", repeat_streak=4)) is not None
        assert LoopRung("ask")(snapshot(loop_rung="warn", repeat_streak=3)) is None
        assert LoopRung("ask")(snapshot(loop_rung="", repeat_streak=1)) is None

    def test_a_rung_is_ask_or_stop(self) -> None:
        """A warn is no route (it rides on the decision that runs the calls): a PolicyError."""
        with pytest.raises(PolicyError, match="LoopRung"):
            LoopRung("warn")

    def test_the_repr_reads_back(self) -> None:
        """`LoopRung('stop')` reads back as code."""
        assert af.guards.parse_guard(repr(LoopRung("stop"))) == LoopRung("stop")


class TestDeclaredTools:
    def test_a_ladder_naming_an_undeclared_tool_is_refused(self) -> None:
        """With tools declared, `loops.tools` naming a tool that is not one of them (its rungs
        would never apply) is a PolicyError with the closest name."""
        policy = af.Policy(loops={"tools": {"read_fiel": {"stop": 9}}})
        with pytest.raises(PolicyError, match=r"loops.tools names 'read_fiel'.*read_file"):
            af.Controller(policy, tools=["read_file", "bash"])
        af.Controller(af.Policy(loops={"tools": {"read_file": {"stop": 9}}}), tools=["read_file"])
