"""Shell rules read what bash runs: spellings the grammar misreads, and the length limit."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentfsm import _shell as shell
from tests.shell.rm_scripts import DENY, ScriptsRunningRm, rm_runs, verdict

ALLOW = ["allow bash(command~ls:*)", "allow bash(command~echo:*)", "allow bash(command~cat:*)"]


MISREAD = [
    "r\\\nm -rf /",
    "echo hi; rm -r\\\nf /",
    "! { rm -rf /; }",
    "true && ! { rm -rf /; } || ls",
    "! if true; then rm -rf /; fi",
    "time { rm -rf /; }",
    "time -p { rm -rf /; }",
    "time if true; then rm -rf /; fi",
    "time while rm -rf /; do break; done",
    "time ! time { rm -rf /; }",
    "coproc { rm -rf /; }",
    "coproc worker { rm -rf /; }",
    "coproc worker while rm -rf /; do break; done",
    "echo ${x:-`rm -rf /`}",
    'echo "${x:-`rm -rf /`}"',
    "x=a; echo ${x/a/`rm -rf /`}",
    "echo `echo \\`rm -rf /\\``",
    'echo "`\\"rm\\" -rf /`"',
    "cat <<EOF\n`rm -rf /`\nEOF",
    "cat <<EOF\nhello `rm -rf /` there\nEOF",
    "cat <<EOF\n$(rm -rf /)\nEOF",
    "ls\n\\rm -rf /",
    "echo a\n\\r\\m -rf /\n",
    "ls -l\n  \\rm -rf /",
]
"""Spellings that run `rm -rf /` in bash, and that the reader used to miss."""

DATA = [
    "cat <<'EOF'\n$(rm -rf /)\n`rm -rf /`\nEOF",
    'cat <<"EOF"\n`rm -rf /`\nEOF',
    "echo \\`rm -rf /\\`",
    "echo 'r\\\nm -rf /'",
    "# it is \\\nls",
    "rm \\\n  -r /tmp/x",
    "ls &&\\\nls",
    "! ls",
    "time ls",
    "coproc ls",
]
"""Text that looks like the spellings above but runs no `rm -rf` in bash."""


class TestSpellingsBashRuns(ScriptsRunningRm):
    """Reserved words, backquotes and line continuations are read as bash reads them."""

    scripts = MISREAD
    allow = ALLOW

    @pytest.mark.parametrize("command", DATA)
    def test_data_is_not_a_command(self, command: str) -> None:
        """Quoted heredocs, escaped backquotes and plain continuations run no `rm -rf`."""
        assert verdict([DENY], command) == "allow"

    def test_nested_backquotes_are_read_at_each_level(self) -> None:
        """`` `echo \\`rm -rf /\\`` `` runs `rm -rf /` in the inner substitution."""
        script = shell.parse("echo `echo \\`rm -rf /\\``")
        assert ["rm", "-rf", "/"] in [list(views[0].words) for views in script.commands]
        assert not script.unsure

    def test_an_unclosed_backquote_inside_an_expansion_is_unsure(self) -> None:
        """A backquote that does not close inside text the grammar left unread is unsure."""
        assert shell.parse("echo ${x:-`rm}").unsure


class TestWhatBashRuns:
    """The data spellings are what real bash does too, checked with a traced `rm` on PATH."""

    @pytest.mark.parametrize("command", DATA)
    def test_bash_runs_no_rm_rf(self, command: str, tmp_path: Path) -> None:
        """Real bash runs no `rm -rf` for the data spellings."""
        assert not [args for args in rm_runs(command, tmp_path) if "-rf" in args]


class TestLengthLimit:
    """Command text past MAX_LENGTH bytes is unsure without being parsed."""

    def test_a_command_past_the_limit_is_unsure(self) -> None:
        """A long pipeline past the limit is unsure, so denied by a deny rule and never allowed."""
        command = " | ".join(["a=1 ls -la"] * (shell.MAX_LENGTH // 10 + 1))
        assert len(command.encode()) > shell.MAX_LENGTH
        assert shell.parse(command).unsure
        assert verdict([DENY], command) == "deny"
        assert verdict(ALLOW, command, permissions={"*": "deny"}) == "deny"

    def test_the_limit_counts_bytes(self) -> None:
        """The limit is on UTF-8 bytes: non-ASCII text reaches it with fewer characters."""
        command = "echo " + "é" * (shell.MAX_LENGTH // 2)
        assert len(command) < shell.MAX_LENGTH < len(command.encode())
        assert shell.parse(command).unsure

    def test_a_command_at_the_limit_is_read(self) -> None:
        """A command just under the limit is read as usual."""
        command = "echo " + "a" * (shell.MAX_LENGTH - 5)
        assert len(command.encode()) == shell.MAX_LENGTH
        script = shell.parse(command)
        assert not script.unsure
        assert verdict(ALLOW, command, permissions={"*": "deny"}) == "allow"


class TestMapfileCallback:
    """bash evaluates `mapfile -C TEXT` as `TEXT INDEX LINE`: two words end TEXT's last command."""

    def test_the_two_words_are_appended_to_the_last_command(self) -> None:
        script = shell.parse("printf 'a\\n' | mapfile -C 'echo x; rm -rf a' -c 1")
        assert ("rm", "-rf", "a", None, None) in [views[0].words for views in script.commands]

    def test_an_exact_allow_no_longer_covers_it(self) -> None:
        """`allow rm a` names `rm a`, not `rm a 0 LINE`, which is what bash runs."""
        rules = [
            "allow bash(command~rm a)",
            "allow bash(command~mapfile:*)",
            "allow bash(command~printf:*)",
        ]
        command = "printf 'a\\n' | mapfile -C 'rm a' -c 1"
        assert verdict(rules, command, permissions={"*": "deny"}) == "deny"
