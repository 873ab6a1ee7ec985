"""`agentfsm explain POLICY CALL` and `agentfsm --version`, run as a user runs them."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import agentfsm
from tests.cli.test_cli_errors import agentfsm as run_agentfsm
from tests.cli.test_cli_errors import assert_bad_input


def _policy(
    tmp_path: Path, rules: tuple[str, ...] = ("deny bash(command~rm -rf *)", "ask bash")
) -> Path:
    path = tmp_path / "policy.json"
    path.write_text(json.dumps({"permission_rules": list(rules)}), encoding="utf-8")
    return path


def _explain(tmp_path: Path, rule: str, call: Mapping[str, object]) -> str:
    """Explain `call` under a policy of one `rule`: it exits 0; what it prints."""
    done = run_agentfsm("explain", _policy(tmp_path, (rule,)), json.dumps(call))
    assert done.returncode == 0, done.stderr
    return done.stdout


class TestExplain:
    """The permission of one call and the source that gave it."""

    def test_the_shell_rule_that_denies_names_the_command(self, tmp_path: Path) -> None:
        """`rm -rf /` after `cd /`: denied by the shell rule, naming the simple command."""
        call = {"name": "bash", "arguments": {"command": "cd / && rm -rf /"}}
        done = run_agentfsm("explain", _policy(tmp_path), json.dumps(call))
        assert done.returncode == 0, done.stderr
        assert done.stdout == "deny: rule 'deny bash(command~rm -rf *)': rm -rf / is rm -rf *\n"

    def test_arguments_as_a_json_string_and_the_default(self, tmp_path: Path) -> None:
        """OpenAI's string arguments are read; a tool no rule names gets the default."""
        policy = _policy(tmp_path)
        ls = run_agentfsm(
            "explain", policy, '{"name": "bash", "arguments": "{\\"command\\": \\"ls\\"}"}'
        )
        other = run_agentfsm("explain", policy, '{"name": "read_file"}')
        assert (ls.returncode, ls.stdout) == (0, "ask: rule 'ask bash'\n")
        assert (other.returncode, other.stdout) == (0, "allow: the default\n")

    def test_a_call_that_is_not_json_is_bad_input(self, tmp_path: Path) -> None:
        """CALL must be a JSON object with a name: exit 2, one line."""
        assert_bad_input(run_agentfsm("explain", _policy(tmp_path), "bash"), "CALL is not JSON")
        assert_bad_input(run_agentfsm("explain", _policy(tmp_path), "[1]"), "JSON object")

    def test_a_rule_missing_its_argument_asks_and_says_why(self, tmp_path: Path) -> None:
        """`deny bash(comand~rm -rf *)` on `rm -rf /`: ask, naming the argument the call lacks."""
        call = {"name": "bash", "arguments": {"command": "rm -rf /"}}
        said = _explain(tmp_path, "deny bash(comand~rm -rf *)", call)
        assert said.startswith("ask: rule 'deny bash(comand~rm -rf *)' names argument ")
        assert "'comand', which this call does not have" in said

    def test_a_path_rule_names_why_an_unsure_path_is_denied(self, tmp_path: Path) -> None:
        """`deny write_file(path^=/etc/*)` on a relative path: deny, saying it may be under it."""
        call = {"name": "write_file", "arguments": {"path": "../etc/passwd"}}
        said = _explain(tmp_path, "deny write_file(path^=/etc/*)", call)
        assert said.startswith("deny: rule 'deny write_file(path^=/etc/*)': '../etc/passwd'")
        assert "may be under /etc/*: it is a relative path" in said

    def test_a_policy_with_a_repeated_key_is_refused(self, tmp_path: Path) -> None:
        """A second `permission_rules` would wipe the deny: exit 2 naming the file and line 2."""
        path = tmp_path / "policy.json"
        path.write_text(
            '{"permission_rules": ["deny bash(command~rm -rf *)"],\n"permission_rules": []}',
            encoding="utf-8",
        )
        call = {"name": "bash", "arguments": {"command": "rm -rf /"}}
        done = run_agentfsm("explain", path, json.dumps(call))
        assert_bad_input(done, f"{path}:2: key 'permission_rules' is written twice")


class TestVersion:
    """`agentfsm --version` prints the package's version."""

    def test_version(self) -> None:
        """The version the package reports, exit 0."""
        done = run_agentfsm("--version")
        assert (done.returncode, done.stdout) == (0, f"agentfsm {agentfsm.__version__}\n")
