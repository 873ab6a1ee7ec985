"""`agentfsm lint POLICY [--tools FILE]`: what in a policy file can never work, one line each.

Every test runs the real `agentfsm` command in a subprocess on real files. Findings read
`FILE:LINE: level: message`; exit 0 clean, 1 findings, 2 a file that cannot be read.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.test_cli_errors import agentfsm, assert_bad_input

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "bash",
            "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
        },
    },
    {"name": "read_file", "parameters": {"type": "object", "properties": {"path": {}}}},
]


def _files(tmp_path: Path, policy: str, suffix: str = ".json") -> tuple[Path, Path]:
    (tmp_path / f"policy{suffix}").write_text(policy, encoding="utf-8")
    (tmp_path / "tools.json").write_text(json.dumps(TOOLS), encoding="utf-8")
    return tmp_path / f"policy{suffix}", tmp_path / "tools.json"


def _findings(stdout: str) -> list[tuple[str, str, str]]:
    """Each finding line as (line, level, message), the file name checked and dropped."""
    found = []
    for line in stdout.splitlines():
        where, level, message = line.split(": ", 2)
        found.append((where.rpartition(":")[2], level, message))
    return found


def _lint_rules(tmp_path: Path, rules: list[str]) -> list[tuple[str, str, str]]:
    """Lint a policy of `rules` (one a line, without --tools): it exits 1; its findings."""
    policy, _ = _files(tmp_path, json.dumps({"permission_rules": rules}, indent=1))
    done = agentfsm("lint", policy)
    assert done.returncode == 1, done.stderr
    return _findings(done.stdout)


class TestFindings:
    """Each kind of finding, on the line the file shows it."""

    def test_a_misspelled_argument_can_never_match(self, tmp_path: Path) -> None:
        """`deny bash(comand~rm -rf *)` against a bash tool taking `command`: error, line 4."""
        policy, tools = _files(
            tmp_path,
            '{\n  "max_turns": 5,\n  "permission_rules": [\n'
            '    "deny bash(comand~rm -rf *)"\n  ]\n}\n',
        )
        done = agentfsm("lint", policy, "--tools", tools)
        assert done.returncode == 1, done.stderr
        ((line, level, message),) = _findings(done.stdout)
        assert (line, level) == ("4", "error")
        assert "'comand'" in message
        assert "did you mean 'command'?" in message
        assert done.stdout.startswith(f"{policy}:4: error: ")

    def test_unknown_guards_fields_and_values(self, tmp_path: Path) -> None:
        """A guard name, a field name and a value that do not exist: one error each, placed."""
        policy, _ = _files(
            tmp_path,
            'max_turn = 4\non_repeat = "never"\n\nguards = [\n  "MaxTurns(3)",\n'
            '  "TokenBudgt(500)",\n]\n',
            suffix=".toml",
        )
        done = agentfsm("lint", policy)
        assert done.returncode == 1, done.stderr
        found = _findings(done.stdout)
        assert [(line, level) for line, level, _ in found] == [
            ("1", "error"),
            ("2", "error"),
            ("6", "error"),
        ]
        assert "did you mean 'max_turns'?" in found[0][2]
        assert "on_repeat" in found[1][2]
        assert "unknown guard 'TokenBudgt'" in found[2][2]
        assert "did you mean 'TokenBudget'?" in found[2][2]

    def test_shadowed_rules_and_undeclared_tools(self, tmp_path: Path) -> None:
        """`deny *` first: a later `ask bash(...)` never decides; `allow bsh` names no tool."""
        rules = ["deny *", "ask bash(command~git push *)", "allow bsh", "deny git_*"]
        policy, tools = _files(tmp_path, json.dumps({"permission_rules": rules}, indent=1))
        done = agentfsm("lint", policy, "--tools", tools)
        assert done.returncode == 1, done.stderr
        found = _findings(done.stdout)
        assert found[0][:2] == ("4", "warning")
        assert "never decides: rule 'deny *'" in found[0][2]
        assert found[1][:2] == ("5", "error")
        assert "tool 'bsh', which is not declared; did you mean 'bash'?" in found[1][2]
        assert ("6", "warning") in [f[:2] for f in found]
        assert any("'deny git_*' matches no declared tool" in f[2] for f in found)

    def test_a_table_entry_for_an_undeclared_tool(self, tmp_path: Path) -> None:
        """`permissions = {"bsh": "deny"}` never applies to a declared bash: an error."""
        policy, tools = _files(tmp_path, '{\n"permissions": {"bsh": "deny", "*": "allow"}\n}')
        done = agentfsm("lint", policy, "--tools", tools)
        assert done.returncode == 1, done.stderr
        assert _findings(done.stdout) == [
            (
                "2",
                "error",
                (
                    "permissions['bsh'] names a tool that is not declared; "
                    "did you mean 'bash'? (declared: bash, read_file)"
                ),
            )
        ]

    def test_named_tools_that_are_not_declared(self, tmp_path: Path) -> None:
        """Regression: `ask_floor`, `final_tools`, `handoffs` naming no declared tool: errors
        with the line and "did you mean" (lint was clean, and bash ran unasked)."""
        fields = {"ask_floor": ["bsh"], "final_tools": ["read_fil"], "handoffs": ["bash"]}
        policy, tools = _files(tmp_path, json.dumps(fields, indent=1))
        done = agentfsm("lint", policy, "--tools", tools)
        assert done.returncode == 1, done.stderr
        found = _findings(done.stdout)
        assert [f[:2] for f in found] == [("2", "error"), ("5", "error")]
        assert "ask_floor names 'bsh', which is not declared; did you mean 'bash'?" in found[0][2]
        assert "final_tools names 'read_fil'" in found[1][2]
        assert "did you mean 'read_file'?" in found[1][2]

    def test_a_glob_on_a_command_is_a_warning_with_the_shell_pattern(self, tmp_path: Path) -> None:
        """Regression: lint was clean on `deny bash(command=rm -rf *)`, which misses
        `rm -fr /`; a glob starting with `~` reads as the shell pattern mistyped."""
        rules = [
            "deny bash(command=rm -rf *)",
            'deny bash(command="~rm *")',
            "allow bash(command=git status *)",
            "allow bash(command=ls)",  # one exact command: lets nothing else through
        ]
        found = _lint_rules(tmp_path, rules)
        assert [f[:2] for f in found] == [("3", "warning"), ("4", "warning"), ("5", "warning")]
        assert "misses 'rm -fr /'" in found[0][2]
        assert found[0][2].endswith("write the shell pattern command~rm -rf *")
        assert "did you mean the shell pattern command~rm *?" in found[1][2]
        assert "also matches the command followed by '; rm -rf /'" in found[2][2]

    def test_the_tilde_typo_is_an_error_with_the_rule_it_means(self, tmp_path: Path) -> None:
        """`command=~rm -rf *` does not parse: an error naming `command~rm -rf *`."""
        text = json.dumps({"permission_rules": ["deny bash(command=~rm -rf *)"]})
        policy, _ = _files(tmp_path, text)
        done = agentfsm("lint", policy)
        assert done.returncode == 1, done.stderr
        ((line, level, message),) = _findings(done.stdout)
        assert (line, level) == ("1", "error")
        assert "did you mean the shell pattern command~rm -rf *?" in message

    def test_a_clean_policy_exits_zero_with_nothing_printed(self, tmp_path: Path) -> None:
        """Rules that fit the tools and each other: exit 0, no output."""
        rules = ["deny bash(command~rm -rf *)", "ask read_file(path^=/etc/*)", "allow bash"]
        policy, tools = _files(
            tmp_path, json.dumps({"policy": {"permission_rules": rules, "max_turns": 9}})
        )
        done = agentfsm("lint", policy, "--tools", tools)
        assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


class TestUnsureRules:
    """Rules that cannot be evaluated on some calls, or that `..` gets past: warnings."""

    def test_a_shell_pattern_on_a_name_that_is_not_a_command_warns(self, tmp_path: Path) -> None:
        """Without --tools, `deny bash(comand~...)` warns naming 'comand'; `command` is clean."""
        rules = ["deny bash(comand~rm -rf *)", "deny sh(cmd~rm -rf *)", "ask x(run_command~rm *)"]
        ((line, level, message),) = _lint_rules(tmp_path, rules)
        assert (line, level) == ("3", "warning")
        assert "argument 'comand' as a shell command" in message

    def test_a_plain_glob_on_a_path_argument_warns_with_the_path_pattern(
        self, tmp_path: Path
    ) -> None:
        """`allow write_file(path=/srv/out/*)` warns and suggests `path^=/srv/out/*`."""
        rules = ["allow write_file(path=/srv/out/*)", "allow write_file(path^=/srv/out/*)"]
        ((line, level, message),) = _lint_rules(tmp_path, rules)
        assert (line, level) == ("3", "warning")
        assert "write the path pattern path^=/srv/out/*" in message

    def test_an_ask_under_a_broader_shell_deny_is_unreachable(self, tmp_path: Path) -> None:
        """`deny bash(command~rm *)` before `ask bash(command~rm -rf /tmp/*)`: the ask never
        decides; a broader ask under a narrower deny is not reported."""
        rules = [
            "deny bash(command~rm *)",
            "ask bash(command~rm -rf /tmp/*)",
            "deny bash(command~git push -f *)",
            "ask bash(command~git push *)",
        ]
        ((line, level, message),) = _lint_rules(tmp_path, rules)
        assert (line, level) == ("4", "warning")
        assert "'ask bash(command~rm -rf /tmp/*)' never decides" in message
        assert "stronger action" in message

    def test_same_action_shell_rules_where_one_covers_the_other(self, tmp_path: Path) -> None:
        """`deny rm -r *` covers `deny rm -rf *` written after it; an allow `git status:*`
        covers `git status --short` wherever it is written."""
        rules = [
            "allow bash(command~git status --short)",
            "deny bash(command~rm -r *)",
            "deny bash(command~rm -rf *)",
            "allow bash(command~git status:*)",
            "allow bash(command~git log)",
        ]
        found = _lint_rules(tmp_path, rules)
        assert [(line, level) for line, level, _ in found] == [("3", "warning"), ("5", "warning")]
        assert "'allow bash(command~git status --short)' never decides" in found[0][2]
        assert "'deny bash(command~rm -rf *)' never decides" in found[1][2]


class TestUnreadable:
    """A file lint cannot read is bad input: exit 2, one line on stderr."""

    def test_broken_json_names_the_line(self, tmp_path: Path) -> None:
        """A policy that is not JSON: exit 2 with the file and line."""
        policy, _ = _files(tmp_path, '{\n  "max_turns": \n')
        assert_bad_input(agentfsm("lint", policy), f"{policy}:3: not valid JSON")

    def test_a_repeated_key_is_refused_not_linted_clean(self, tmp_path: Path) -> None:
        """`"drop_db": "deny"` then `"drop_db": "allow"`: exit 2 with the file and line 3."""
        policy, _ = _files(
            tmp_path, '{"permissions": {\n  "drop_db": "deny",\n  "drop_db": "allow"}}'
        )
        assert_bad_input(agentfsm("lint", policy), f"{policy}:3: key 'drop_db' is written twice")

    def test_a_toml_repeat_names_the_line(self, tmp_path: Path) -> None:
        """A TOML key written twice: exit 2 with `FILE:LINE:`."""
        policy, _ = _files(tmp_path, "max_turns = 3\nmax_turns = 4\n", suffix=".toml")
        assert_bad_input(agentfsm("lint", policy), f"{policy}:2: not valid TOML")

    def test_fields_beside_the_policy_key_are_refused(self, tmp_path: Path) -> None:
        """A top-level deny beside a `[policy]` table would be dropped: exit 2 naming line 1."""
        policy, _ = _files(
            tmp_path, '[permissions]\ndrop_db = "deny"\n[policy]\nmax_turns = 3\n', ".toml"
        )
        assert_bad_input(agentfsm("lint", policy), f"{policy}:1: 'permissions' sits beside")

    def test_a_missing_tools_file(self, tmp_path: Path) -> None:
        """A --tools file that is not there: exit 2 naming it."""
        policy, _ = _files(tmp_path, "{}")
        assert_bad_input(agentfsm("lint", policy, "--tools", tmp_path / "no.json"), "no.json")

    def test_a_tools_file_that_declares_nothing_usable(self, tmp_path: Path) -> None:
        """A tools file holding an object without tools: exit 2 saying what it must hold."""
        policy, _ = _files(tmp_path, "{}")
        (tmp_path / "t.json").write_text('{"name": 3}', encoding="utf-8")
        assert_bad_input(agentfsm("lint", policy, "--tools", tmp_path / "t.json"), "JSON list")
