"""A policy file means one thing: a repeated key, or fields both at the top and under `policy`,
is refused with the file and the line, never read as the last value or half the file."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentfsm import Policy
from agentfsm._engine.policy import policy_fields
from agentfsm.exceptions import PolicyError
from tests.cli.test_cli_errors import agentfsm, assert_bad_input


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


class TestFieldsBesideThePolicyKey:
    """Fields at the top and under `policy`: the top ones would be dropped, so it is refused."""

    def test_json_top_level_deny_beside_policy_is_refused(self, tmp_path: Path) -> None:
        """A top-level `permissions` deny beside `policy`: PolicyError naming file and line 2."""
        path = write(
            tmp_path / "p.json",
            '{\n  "permissions": {"drop_db": "deny"},\n  "policy": {"max_turns": 5}\n}\n',
        )
        with pytest.raises(PolicyError, match=r"p\.json:2: 'permissions' sits beside"):
            Policy.from_file(path)

    def test_toml_top_level_rules_beside_a_policy_table_are_refused(self, tmp_path: Path) -> None:
        """TOML rules before a `[policy]` table: PolicyError naming file and line 1."""
        path = write(
            tmp_path / "p.toml",
            'permission_rules = ["deny bash(command~rm -rf *)"]\n\n[policy]\nmax_turns = 5\n',
        )
        with pytest.raises(PolicyError, match=r"p\.toml:1: 'permission_rules' sits beside"):
            Policy.from_file(path)

    def test_a_policy_table_alone_is_still_read(self, tmp_path: Path) -> None:
        """Everything under `policy` (and nothing beside it) is the policy, as before."""
        path = write(
            tmp_path / "p.toml", '[policy]\nmax_turns = 5\n[policy.permissions]\nx = "deny"\n'
        )
        assert Policy.from_file(path).permissions == {"x": "deny"}

    def test_a_policy_key_that_is_not_a_table_is_refused(self, tmp_path: Path) -> None:
        """`"policy": 3` is not a table of fields: PolicyError naming the line."""
        path = write(tmp_path / "p.json", '{\n"policy": 3}')
        with pytest.raises(PolicyError, match=r"p\.json:2: 'policy' must be a table"):
            Policy.from_file(path)


class TestRepeatedKeys:
    """A key written twice in one object, at any depth, is refused with the line of the second."""

    def test_a_deny_then_allow_for_one_tool_is_refused(self, tmp_path: Path) -> None:
        """`"drop_db": "deny"` then `"drop_db": "allow"`: refused at line 4, naming line 3."""
        path = write(
            tmp_path / "p.json",
            '{\n  "permissions": {\n    "drop_db": "deny",\n    "drop_db": "allow"\n  }\n}\n',
        )
        with pytest.raises(PolicyError) as raised:
            Policy.from_file(path)
        assert "p.json:4: key 'drop_db' is written twice in one object (first at line 3)" in str(
            raised.value
        )

    def test_a_later_empty_rule_list_is_refused(self, tmp_path: Path) -> None:
        """A second `"permission_rules": []` would wipe the rules: refused at its line."""
        path = write(
            tmp_path / "p.json",
            '{"permission_rules": ["deny bash(command~rm -rf *)"],\n "permission_rules": []}',
        )
        with pytest.raises(PolicyError, match=r"p\.json:2: key 'permission_rules' is written"):
            Policy.from_file(path)

    def test_an_escaped_spelling_of_the_same_key_is_a_repeat(self, tmp_path: Path) -> None:
        """`"drop_db"` and `"drop\\u005fdb"` are one key once decoded: refused."""
        path = write(
            tmp_path / "p.json", '{"permissions": {"drop_db": "deny", "drop\\u005fdb": "allow"}}'
        )
        with pytest.raises(PolicyError, match=r"p\.json:1: key 'drop_db' is written twice"):
            Policy.from_file(path)

    def test_toml_repeats_name_the_file_and_line(self, tmp_path: Path) -> None:
        """TOML's decoder refuses a repeat; the PolicyError reads `FILE:LINE:`."""
        path = write(
            tmp_path / "p.toml",
            '[permissions]\ndrop_db = "deny"\ndrop_db = "allow"\n',
        )
        with pytest.raises(PolicyError, match=r"p\.toml:3: not valid TOML: Cannot overwrite"):
            Policy.from_file(path)

    def test_the_same_key_in_two_objects_is_not_a_repeat(self, tmp_path: Path) -> None:
        """Keys repeat only within one object: two rules' mappings may both say `tool`."""
        rules = [{"action": "deny", "tool": "a"}, {"action": "deny", "tool": "b"}]
        path = write(tmp_path / "p.json", json.dumps({"permission_rules": rules}))
        assert len(Policy.from_file(path).permission_rules) == 2


@pytest.mark.parametrize("command", [["mcp-proxy", "--policy"], ["diagram", "--policy"]])
def test_every_command_taking_a_policy_file_refuses_a_repeat(
    tmp_path: Path, command: list[str]
) -> None:
    """`mcp-proxy --policy` and `diagram --policy` read through the same reader: exit 2
    naming the file and line, before any server starts."""
    path = write(tmp_path / "p.json", '{"permissions": {"drop_db": "deny",\n "drop_db": "allow"}}')
    extra = ["--", "true"] if command[0] == "mcp-proxy" else []
    done = agentfsm(*command, path, *extra)
    assert_bad_input(done, f"{path}:2: key 'drop_db' is written twice")


# -- generated documents -------------------------------------------------------------------

_KEYS = st.sampled_from(["a", "b", "drop_db", "é", "x y"])
Tree = list[tuple[str, Any]]


def _trees() -> st.SearchStrategy[Any]:
    """JSON values whose objects are lists of (key, value) pairs, so keys may repeat."""
    scalars = st.one_of(st.integers(-5, 5), st.sampled_from(["deny", "allow", "x"]), st.none())
    return st.recursive(
        scalars,
        lambda inner: st.one_of(
            st.lists(inner, max_size=3),
            st.lists(st.tuples(_KEYS, inner), max_size=4).map(lambda pairs: ("obj", pairs)),
        ),
        max_leaves=12,
    )


def _render(value: Any, ascii_keys: bool) -> str:
    """JSON text of a tree, one object member a line, keys spelled escaped or not."""
    if isinstance(value, tuple):
        members = [
            f"{json.dumps(key, ensure_ascii=ascii_keys)}: {_render(item, ascii_keys)}"
            for key, item in value[1]
        ]
        return "{\n" + ",\n".join(members) + "\n}"
    if isinstance(value, list):
        return "[" + ", ".join(_render(item, ascii_keys) for item in value) + "]"
    return json.dumps(value)


def _repeats(value: Any) -> bool:
    """The oracle: whether any object of the tree holds a key twice."""
    if isinstance(value, tuple):
        keys = [key for key, _ in value[1]]
        return len(keys) != len(set(keys)) or any(_repeats(item) for _, item in value[1])
    if isinstance(value, list):
        return any(_repeats(item) for item in value)
    return False


@given(tree=st.lists(st.tuples(_KEYS, _trees()), max_size=4), ascii_keys=st.booleans())
def test_a_document_is_refused_exactly_when_an_object_repeats_a_key(
    tree: Tree, ascii_keys: bool
) -> None:
    """Generated documents, repeats at any depth: refused iff some object repeats a key, and the
    error's line holds that key."""
    text = _render(("obj", [("policy", ("obj", tree))]), ascii_keys)
    if not _repeats(("obj", tree)):
        policy_fields(text, "p.json", toml=False)
        return
    with pytest.raises(PolicyError) as raised:
        policy_fields(text, "p.json", toml=False)
    found = re.match(r"policy file p\.json:(\d+): key '(.*)' is written twice", str(raised.value))
    assert found is not None, raised.value
    line = text.splitlines()[int(found.group(1)) - 1]
    assert line.startswith(json.dumps(found.group(2), ensure_ascii=ascii_keys) + ":")


@given(
    tables=st.dictionaries(
        st.sampled_from(["p", "q"]), st.lists(st.sampled_from(["a", "b", "c"]), max_size=4)
    ),
    top=st.lists(st.sampled_from(["a", "b", "c"]), max_size=3),
)
def test_a_toml_repeat_is_refused_with_its_line(
    tables: dict[str, list[str]], top: list[str]
) -> None:
    """Generated TOML, keys repeated at the top or in a table: refused iff a table repeats a key,
    with the line of the repeat."""
    lines = [f"{key} = 1" for key in top]
    for name, keys in tables.items():
        lines += [f"[{name}]", *(f"{key} = 1" for key in keys)]
    text = "\n".join(lines) + "\n"
    repeated = len(top) != len(set(top)) or any(len(k) != len(set(k)) for k in tables.values())
    if not repeated:
        policy_fields(text, "p.toml", toml=True)
        return
    with pytest.raises(PolicyError) as raised:
        policy_fields(text, "p.toml", toml=True)
    found = re.match(r"policy file p\.toml:(\d+): not valid TOML", str(raised.value))
    assert found is not None, raised.value
    key = text.splitlines()[int(found.group(1)) - 1].split(" = ")[0]
    assert key in ("a", "b", "c")
