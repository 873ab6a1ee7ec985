"""Shell rules: text bash evaluates (arithmetic, prompts, callbacks) is read, or unsure."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentfsm import _shell as shell
from tests.shell.rm_scripts import DENY, ScriptsRunningRm, rm_runs, verdict

ALLOW = [
    "allow bash(command~ls:*)",
    "allow bash(command~echo:*)",
    "allow bash(command~true:*)",
    "allow bash(command~set:*)",
    "allow bash(command~let:*)",
    "allow bash(command~printf:*)",
    "allow bash(command~read:*)",
    "allow bash(command~test:*)",
    "allow bash(command~mapfile:*)",
    "allow bash(command~bash:*)",
    "allow bash(command~source:*)",
    "allow bash(command~env:*)",
    "allow bash(command~declare:*)",
    "allow bash(command~eval:*)",
]
"""An allow-list that covers every command in the table below except `rm`."""


X = "x='a[$(rm -rf /)]'; "
EVALUATED = [
    X + "(( x ))",
    X + "echo $(( x + 1 ))",
    X + "echo $(( $x ))",
    X + "[[ $x -eq 0 ]]",
    X + "a=(1 2); echo ${a[$x]}",
    X + "s=hello; echo ${s:x:1}",
    X + "echo ${!x}",
    X + "declare -i n; n=$x",
    X + "declare -i m=$x",
    X + 'printf -v "$x" %s 1',
    X + 'read "$x" <<< 1',
    X + 'test -v "$x"',
    X + "[[ -v $x ]]",
    X + "RANDOM=$x",
    "let 'y=a[$(rm -rf /)]'",
    "printf -v 'a[$(rm -rf /)]' %s 1",
    "p='$(rm -rf /)'; echo \"${p@P}\"",
    "PS4='$(rm -rf /)'; set -x; true",
    "mapfile -C 'rm -rf /; true' -c 1 lines <<< $'a\\nb'",
    "env 'BASH_FUNC_f%%=() { rm -rf /; }' bash -c f",
    "BASH_ENV='$(rm -rf /)' bash -c true",
    "echo 'rm -rf /' | bash /dev/stdin",
    "source /dev/stdin <<< 'rm -rf /'",
    "echo 'rm -rf /' | source /dev/stdin",
    "(( y ))",
    "for ((i = 0; i < n; i++)); do true; done",
]
"""Scripts running `rm -rf /` through text bash evaluates (the last two: a variable set outside)."""

KNOWN = [
    "i=0; (( i++ )); echo $i",
    "for ((i = 0; i < 3; i++)); do echo $i; done",
    "n=5; echo $(( n * 2 ))",
    "echo $(( RANDOM % 6 ))",
    "[[ $# -eq 0 ]] && echo none",
    "x=1",
    "",
    "# only a comment",
    "let 'z = 2 + 3'",
    "read -r line <<< hi",
]
"""Arithmetic on integers the script set, and scripts that run nothing: read with confidence."""


class TestEvaluatedText(ScriptsRunningRm):
    """Text bash evaluates is read as command text, or the script is unsure."""

    scripts = EVALUATED
    allow = ALLOW
    alone = EVALUATED[:-2]

    @pytest.mark.parametrize("command", KNOWN)
    def test_known_integers_are_read(self, command: str) -> None:
        """Arithmetic on integers the script set is read with confidence."""
        assert not shell.parse(command).unsure

    def test_a_script_that_only_sets_variables_is_not_covered(self) -> None:
        """A script that runs nothing but sets variables is not covered by an allow-list: a
        shell that lives across calls (OpenHands', a host's terminal) keeps what it set, and
        `PATH=/tmp/x:$PATH` now decides what `git` runs at the next call."""
        assert verdict(ALLOW, "x=1; y=2", permissions={"*": "deny"}) == "deny"
        assert verdict(ALLOW, "PATH=/tmp/x:$PATH") == "ask"

    def test_prompt_command_is_command_text(self) -> None:
        """PROMPT_COMMAND's value is read as the command it is."""
        assert verdict([DENY], "PROMPT_COMMAND='rm -rf /'") == "deny"
        assert verdict([DENY], "export PROMPT_COMMAND='ls'") == "allow"

    def test_bash_aliases_is_unsure(self) -> None:
        """BASH_ALIASES (and BASH_CMDS) make a later name run other text: unsure, so denied."""
        assert shell.parse("BASH_ALIASES[x]='ls'").unsure
        assert verdict([DENY], "BASH_ALIASES[x]='rm -rf /'") == "deny"
        assert verdict([DENY], "BASH_CMDS[x]=/bin/ls") == "deny"


class TestWhatBashRuns:
    """The table's last two scripts run `rm -rf /` given a variable from outside them."""

    @pytest.mark.parametrize("command", EVALUATED[-2:])
    def test_a_variable_from_outside_runs_rm(self, command: str, tmp_path: Path) -> None:
        """With the variable set before the script, as a persistent session may, bash runs `rm`."""
        before = "y='a[$(rm -rf /)]'; n=$y\n"
        assert ["-rf", "/"] in rm_runs(before + command, tmp_path)


CONTEXTS = [
    "(( {} ))",
    "echo $(( {} + 1 ))",
    "echo ${{a[{}]}}",
    "[[ ${} -gt 1 ]]",
    "s=abc; echo ${{s:{}:1}}",
    "let 'y = {} * 2'",
    "for ((k = 0; k < {}; k++)); do true; done",
]


class TestArithmeticProperty:
    """Arithmetic in any context reads a name with confidence only when the script set it."""

    @given(
        context=st.sampled_from(CONTEXTS),
        name=st.from_regex(r"[a-z_][a-z0-9_]{0,6}", fullmatch=True).filter(
            lambda n: n not in ("a", "s", "k", "y", "_")  # `$_` is reset by every command
        ),
        value=st.integers(-1000, 1000),
    )
    def test_unset_names_are_unsure_and_set_integers_are_read(
        self, context: str, name: str, value: int
    ) -> None:
        """Unset: unsure (a deny rule denies); set to an integer before: read with confidence."""
        command = context.format(name)
        assert shell.parse(command).unsure
        assert verdict([DENY], command) == "deny"
        assert not shell.parse(f"{name}={value}; {command}").unsure
        assert shell.parse(f"{name}={value}; {name}=$1; {command}").unsure
