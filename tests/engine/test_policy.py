"""The policy: limits and choices that become guards in the route table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentfsm import Policy, ToolCall
from agentfsm._engine.policy import Permission
from agentfsm.exceptions import PolicyError
from agentfsm.guards import CostBudget, MaxTurns, RepeatedCall, TokenBudget
from agentfsm.testing import call


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


class TestDefaults:
    def test_default_limits(self) -> None:
        """By default a run has 50 turns and refuses the third identical call with feedback."""
        policy = Policy()
        assert policy.max_turns == 50
        assert policy.repeat_threshold == 3
        assert policy.on_repeat == "feedback"

    def test_defaults_set_no_budget_and_no_extra_guard(self) -> None:
        """Without being asked, a policy sets no token, cost or time budget and no extra guard."""
        policy = Policy()
        assert (policy.max_tokens, policy.max_cost, policy.max_seconds) == (None, None, None)
        assert policy.guards == ()

    def test_policies_are_frozen(self) -> None:
        """A policy cannot be changed after it is built."""
        policy = Policy()
        with pytest.raises(ValueError, match="frozen"):
            policy.max_turns = 3  # type: ignore[misc]


class TestGuards:
    def test_a_guard_string_is_parsed_into_the_same_objects(self) -> None:
        """`guards=["TokenBudget(200_000) | CostBudget(0.5)"]` equals the code-built guard."""
        policy = Policy(guards=["TokenBudget(200_000) | CostBudget(0.5)"])
        assert policy.guards == (TokenBudget(200_000) | CostBudget(0.5),)

    def test_a_single_guard_is_accepted_as_is(self) -> None:
        """One guard (object or string) need not be wrapped in a list."""
        assert Policy(guards=MaxTurns(3)).guards == (MaxTurns(3),)
        assert Policy(guards="MaxTurns(3)").guards == (MaxTurns(3),)

    def test_an_unknown_guard_name_is_a_policy_error(self) -> None:
        """A guard string naming an unknown class is a PolicyError naming it."""
        with pytest.raises(PolicyError, match="unknown guard 'Nope'"):
            Policy(guards=["Nope(1)"])

    def test_guards_serialise_as_their_reprs(self) -> None:
        """`to_json` writes guards as code that reads back into the same policy."""
        policy = Policy(max_turns=7, guards=[TokenBudget(200_000) | CostBudget(0.5)])
        data = policy.to_json()
        assert data["guards"] == ["TokenBudget(200_000) | CostBudget(0.5)"]
        assert Policy.from_mapping(json.loads(json.dumps(data))) == policy


class TestFromMapping:
    def test_builds_from_plain_data(self) -> None:
        """A mapping of field names builds the policy."""
        policy = Policy.from_mapping({"max_turns": 7, "on_repeat": "ask"})
        assert (policy.max_turns, policy.on_repeat) == (7, "ask")

    def test_names_the_source_and_every_bad_field(self) -> None:
        """Invalid fields are one PolicyError naming the source and each field."""
        with pytest.raises(PolicyError) as info:
            Policy.from_mapping({"max_turns": 0, "on_repeat": "maybe"}, source="team.json")
        message = str(info.value)
        assert message.startswith("team.json: ")
        assert "max_turns" in message
        assert "on_repeat" in message

    def test_an_unknown_field_is_refused(self) -> None:
        """A misspelt field is an error, not silently ignored."""
        with pytest.raises(PolicyError, match="max_turn: Extra inputs"):
            Policy.from_mapping({"max_turn": 5})

    @pytest.mark.parametrize(
        ("field", "value"),
        [
            ("max_turns", 0),
            ("repeat_threshold", 1),
            ("max_retries", -1),
            ("max_cost", -0.01),
            ("on_deny", "ignore"),
            ("permissions", {"rm": "maybe"}),
        ],
    )
    def test_out_of_range_values_are_refused(self, field: str, value: object) -> None:
        """Each out-of-range value is a PolicyError naming its field."""
        with pytest.raises(PolicyError, match=field):
            Policy.from_mapping({field: value})


class TestFromFile:
    def test_reads_json(self, tmp_path: Path) -> None:
        """A JSON file builds the same policy as code, guards included."""
        path = write(
            tmp_path / "p.json", '{"max_turns": 7, "guards": ["MaxTurns(5) | RepeatedCall(4)"]}'
        )
        policy = Policy.from_file(path)
        assert policy == Policy(max_turns=7, guards=[MaxTurns(5) | RepeatedCall(4)])

    def test_reads_toml(self, tmp_path: Path) -> None:
        """A TOML file builds the same policy as code, guards included."""
        path = write(
            tmp_path / "p.toml",
            'max_turns = 7\nguards = ["TokenBudget(200_000) | CostBudget(0.5)"]\n',
        )
        policy = Policy.from_file(path)
        assert policy.max_turns == 7
        assert policy.guards == (TokenBudget(200_000) | CostBudget(0.5),)

    def test_reads_a_policy_table(self, tmp_path: Path) -> None:
        """The fields may sit under a `[policy]` table."""
        path = write(tmp_path / "p.toml", '[policy]\nmax_turns = 9\non_repeat = "ask"\n')
        assert Policy.from_file(path) == Policy(max_turns=9, on_repeat="ask")

    def test_a_bad_field_names_the_file_and_the_field(self, tmp_path: Path) -> None:
        """A field out of range is a PolicyError naming the file and the field."""
        path = write(tmp_path / "p.json", '{"max_turns": -3}')
        with pytest.raises(PolicyError) as info:
            Policy.from_file(path)
        assert str(path) in str(info.value)
        assert "max_turns" in str(info.value)

    def test_an_unknown_guard_names_the_file_and_the_field(self, tmp_path: Path) -> None:
        """An unknown guard in a file is a PolicyError naming the file, `guards` and the name."""
        path = write(tmp_path / "p.toml", 'guards = ["Nope(1)"]\n')
        with pytest.raises(PolicyError) as info:
            Policy.from_file(path)
        message = str(info.value)
        assert "Nope" in message
        assert str(path) in message
        assert "guards" in message

    def test_a_missing_file_is_a_policy_error(self, tmp_path: Path) -> None:
        """A file that cannot be read is a PolicyError naming it."""
        path = tmp_path / "absent.json"
        with pytest.raises(PolicyError, match=r"absent\.json"):
            Policy.from_file(path)

    @pytest.mark.parametrize(
        ("name", "text", "kind"),
        [
            ("p.json", "{max_turns: 3", "JSON"),
            ("p.toml", "max_turns = = 3", "TOML"),
            ("policy", "max_turns = 3", "JSON"),  # no suffix: read as JSON, and said so
        ],
    )
    def test_a_malformed_file_is_a_policy_error(
        self, tmp_path: Path, name: str, text: str, kind: str
    ) -> None:
        """Syntax errors are a PolicyError naming the file, the line and the format."""
        path = write(tmp_path / name, text)
        with pytest.raises(PolicyError, match=rf"{name}:1: not valid {kind}: "):
            Policy.from_file(path)

    def test_a_file_that_is_not_an_object_is_refused(self, tmp_path: Path) -> None:
        """A JSON list is not a policy."""
        path = write(tmp_path / "p.json", "[1, 2]")
        with pytest.raises(PolicyError, match="must hold an object, not list"):
            Policy.from_file(path)


class TestRoutes:
    def test_routes_are_built_once_per_policy(self) -> None:
        """`policy.routes` is the same table object on every access."""
        policy = Policy()
        assert policy.routes is policy.routes

    def test_routes_follow_the_policy(self) -> None:
        """A policy's table holds its own limits."""
        assert any(r.guard == MaxTurns(7) for r in Policy(max_turns=7).routes)

    def test_a_cached_table_does_not_change_equality(self) -> None:
        """Reading `routes` on one policy keeps it equal to an identical policy."""
        used, fresh = Policy(), Policy()
        assert used.routes is not None
        assert used == fresh


class TestPermissions:
    def test_everything_is_allowed_by_default(self) -> None:
        """With no permissions set, every call is allowed."""
        assert Policy().permission_for(call("rm")) == "allow"

    def test_a_per_tool_entry_decides_for_that_tool(self) -> None:
        """`permissions={"rm": "deny"}` denies rm and allows the rest."""
        policy = Policy(permissions={"rm": "deny", "write_file": "ask"})
        assert policy.permission_for(call("rm")) == "deny"
        assert policy.permission_for(call("write_file")) == "ask"
        assert policy.permission_for(call("search")) == "allow"

    def test_star_sets_the_default(self) -> None:
        """The `"*"` entry applies to tools without their own entry."""
        policy = Policy(permissions={"*": "ask", "search": "allow"})
        assert policy.permission_for(call("rm")) == "ask"
        assert policy.permission_for(call("search")) == "allow"

    def test_a_hook_overrides_the_table(self) -> None:
        """A permission hook decides per call, arguments included, over `permissions`."""

        def hook(item: ToolCall) -> Permission:
            return "deny" if (item.arguments or {}).get("path", "").startswith("/etc") else "allow"

        policy = Policy(permissions={"*": "ask"}, permission=hook)
        assert policy.permission_for(call("write_file", {"path": "/etc/passwd"})) == "deny"
        assert policy.permission_for(call("write_file", {"path": "notes.txt"})) == "allow"
